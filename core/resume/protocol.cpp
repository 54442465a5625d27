#include "core/resume/protocol.hpp"

#include <limits>
#include <type_traits>

#include "base/assert.hpp"

namespace leaseproof::resume {

namespace {

// Wire sizes of the fixed parts. A Data header carries the (epoch, seq) pair;
// a Reset carries its kind and two positions (padded to 8 bytes); a Ping its id.
constexpr uint32_t kDataHeaderBytes = 16;
constexpr uint32_t kResetBytes = 40;
constexpr uint32_t kPingBytes = 8;

}  // namespace

bool reconnect_allowed(uint16_t code) {
  switch (code) {
    case close_code::going_away:
    case close_code::abnormal:
    case close_code::internal_error:
    case close_code::service_restart:
    case close_code::try_again_later:
      return true;
    default:
      // 1000 included: a normal close means the hub meant it; 1002 and 1008
      // say the request itself is wrong, so retrying it cannot help.
      return false;
  }
}

std::string_view to_string(ResetKind kind) {
  switch (kind) {
    case ResetKind::evicted: return "evicted";
    case ResetKind::epoch_changed: return "epoch_changed";
    case ResetKind::ahead_of_top: return "ahead_of_top";
    case ResetKind::over_limit: return "over_limit";
  }
  LP_UNREACHABLE("reset kind {}", static_cast<int>(kind));
}

uint32_t frame_bytes(const HubFrame& frame) {
  return std::visit(
      [](const auto& f) -> uint32_t {
        using T = std::decay_t<decltype(f)>;
        if constexpr (std::is_same_v<T, Data>) {
          // The size must fit the uint32 the queue accounting uses.
          LP_ASSERT_LE(f.message.bytes, std::numeric_limits<uint32_t>::max() - kDataHeaderBytes);
          return kDataHeaderBytes + f.message.bytes;
        } else if constexpr (std::is_same_v<T, Reset>) {
          return kResetBytes;
        } else {
          static_assert(std::is_same_v<T, Ping>);
          return kPingBytes;
        }
      },
      frame);
}

}  // namespace leaseproof::resume
