#pragma once
// The resume protocol's wire format on a WebSocket: one JSON object per text
// frame (docs/runtime.md, "Wire format", is the reference a client written
// elsewhere follows). The core's frames (core/resume/protocol.hpp) carry no
// payload; on the wire a Data frame carries its payload as a JSON string whose
// length in bytes is the message's `bytes`.
//
//   client -> hub  {"type":"subscribe","channel":"c1","after":{"epoch":7,"seq":41}}
//                  {"type":"pong","ping":12,"consumed":65600}
//   hub -> client  {"type":"data","channel":"c1","epoch":7,"seq":42,"payload":"..."}
//                  {"type":"reset","kind":"evicted","after":{..},"resume":{..}}
//                  {"type":"ping","id":12}
//
// Decoding never throws: a frame that is not one of these (bad JSON, a field
// missing or of the wrong type, a number out of range) is a WireError naming
// the field and what is allowed.

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "core/resume/protocol.hpp"

namespace leaseproof::runtime {

struct WireError {
  std::string message;  // e.g. "after.seq: expected an integer >= 0, got \"x\""
};

// A channel name: 1..256 bytes of printable ASCII without spaces, so that it
// can appear in URLs, metric labels and file names as it is.
inline constexpr std::size_t kChannelNameMax = 256;
// "" when valid, else what is wrong with it.
std::string check_channel_name(std::string_view channel);

// A payload on the wire: at most this many bytes (the hub refuses larger
// publishes; a subscriber refuses larger frames).
inline constexpr std::size_t kPayloadBytesMax = 1u << 20;

// Hub -> client. A Data frame's payload comes from the hub's store (the core
// keeps only the size); its length must equal message.bytes.
std::string encode_data(std::string_view channel, const resume::Message& message, std::string_view payload);
std::string encode_reset(const resume::Reset& reset);
std::string encode_ping(const resume::Ping& ping);

// A decoded hub frame plus what the core does not model: the payload.
struct WireHubFrame {
  resume::HubFrame frame;
  std::string channel;  // Data only
  std::string payload;  // Data only
};
std::variant<WireHubFrame, WireError> decode_hub_frame(std::string_view text);

// Client -> hub.
std::string encode_subscribe(const resume::Subscribe& subscribe);
std::string encode_pong(const resume::Pong& pong);
using WireClientFrame = std::variant<resume::Subscribe, resume::Pong>;
std::variant<WireClientFrame, WireError> decode_client_frame(std::string_view text);

// The payloads of the hub's generator and synthetic publishes: exactly `bytes`
// bytes, "t=<unix time in ns>;" followed by 'x' padding when it fits (24 bytes
// or more), else `bytes` 'x's. A subscriber reads the send time back to
// measure delivery latency.
std::string synthetic_payload(uint32_t bytes, int64_t unix_ns);
// The send time in a synthetic payload; -1 when there is none.
int64_t payload_send_time(std::string_view payload);

}  // namespace leaseproof::runtime
