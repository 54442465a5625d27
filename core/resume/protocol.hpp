#pragma once
// The resume protocol between the upstream hub (publisher) and a worker's
// client (subscriber), as plain values. One subscription carries one channel
// (one connection id). Messages carry (epoch, seq): the hub's epoch changes
// when it restarts without its ring; seq counts from 1 within an epoch.
//
//   client -> hub   Subscribe{channel, after}   resume after this position
//                   Pong{ping, consumed_bytes}  liveness + flow control
//   hub -> client   Data{message}               in order, no holes
//                   Reset{kind, after, resume}  the gap is explicit, typed
//                   Ping{id}
//   either side     close with a WebSocket close code
//
// See docs/resume-core.md for the rules and the bounds.

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace leaseproof::resume {

// WebSocket close codes the protocol uses (RFC 6455 section 7.4.1, and 1012 /
// 1013 from the IANA registry).
namespace close_code {
inline constexpr uint16_t normal = 1000;
inline constexpr uint16_t going_away = 1001;
inline constexpr uint16_t protocol_error = 1002;
inline constexpr uint16_t abnormal = 1006;  // no close frame: the connection dropped
inline constexpr uint16_t invalid_payload = 1007;  // a text message that is not UTF-8
inline constexpr uint16_t policy_violation = 1008;
inline constexpr uint16_t message_too_big = 1009;
inline constexpr uint16_t internal_error = 1011;
inline constexpr uint16_t service_restart = 1012;
inline constexpr uint16_t try_again_later = 1013;
}  // namespace close_code

// Reconnect after 1001, 1006, 1011, 1012, 1013; never after 1002 or 1008 (or
// any other code: the peer said the request itself is wrong).
bool reconnect_allowed(uint16_t code);

// A position in a channel's stream: the last message processed (client) or
// the one to resume after. seq 0 means "before the first message of epoch".
// epoch 0 is "no epoch yet" (a connection that never recorded anything).
struct Position {
  uint64_t epoch = 0;
  int64_t seq = 0;
  friend bool operator==(const Position&, const Position&) = default;
};
// Stream order: a later hub epoch, or a later seq in the same epoch.
inline bool before(Position a, Position b) { return a.epoch != b.epoch ? a.epoch < b.epoch : a.seq < b.seq; }

struct Message {
  uint64_t epoch = 0;
  int64_t seq = 0;
  uint32_t bytes = 0;  // payload size (the payload itself is not modelled)
};
inline Position position_of(const Message& m) { return Position{m.epoch, m.seq}; }

enum class ResetKind : uint8_t {
  evicted,        // the position is older than the ring's oldest message
  epoch_changed,  // the hub restarted without its ring: the old epoch is gone
  ahead_of_top,   // the position is beyond anything published in this epoch
  over_limit,     // the replay would exceed the replay limit
};
std::string_view to_string(ResetKind kind);

// Frames from hub to client.
struct Data {
  Message message;
};
// Messages after `after` up to `resume` (both exclusive of `after`, inclusive
// of `resume`) will never be delivered; the next Data follows `resume`.
// In other epochs than `after.epoch`, everything after `after` in
// `after.epoch` and every message of epochs between the two is lost.
struct Reset {
  ResetKind kind = ResetKind::evicted;
  Position after;   // what the client asked to resume after
  Position resume;  // where delivery resumes (the next Data is resume.seq + 1)
};
struct Ping {
  uint64_t id = 0;
};
using HubFrame = std::variant<Data, Reset, Ping>;

// Frames from client to hub.
struct Subscribe {
  std::string channel;
  Position after;
};
struct Pong {
  uint64_t ping = 0;
  uint64_t consumed_bytes = 0;  // bytes of Data read since the last Pong
};

// Wire size of a frame, for queue accounting (header + payload).
uint32_t frame_bytes(const HubFrame& frame);

}  // namespace leaseproof::resume
