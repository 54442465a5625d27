#include "runtime/hub/resume_wire.hpp"

#include <charconv>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/json_depth.hpp"

namespace leaseproof::runtime {
namespace {

using nlohmann::json;

std::string short_dump(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// Reads an unsigned integer field; "" when fine, else the error.
std::string read_u64(const json& object, const char* field, const std::string& where, uint64_t& out) {
  const auto it = object.find(field);
  if (it == object.end()) return fmt::format("{}{}: missing", where, field);
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return fmt::format("{}{}: expected an integer >= 0, got {}", where, field, short_dump(*it));
  }
  out = it->get<uint64_t>();
  return {};
}

std::string read_position(const json& object, const char* field, resume::Position& out, bool optional) {
  const auto it = object.find(field);
  if (it == object.end()) return optional ? std::string{} : fmt::format("{}: missing", field);
  if (!it->is_object()) return fmt::format("{}: expected an object {{\"epoch\":E,\"seq\":S}}, got {}", field, short_dump(*it));
  const std::string where = std::string{field} + ".";
  uint64_t seq = 0;
  if (std::string e = read_u64(*it, "epoch", where, out.epoch); !e.empty()) return e;
  if (std::string e = read_u64(*it, "seq", where, seq); !e.empty()) return e;
  if (seq > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return fmt::format("{}seq: {} is above {}", where, seq, std::numeric_limits<int64_t>::max());
  }
  out.seq = static_cast<int64_t>(seq);
  return {};
}

std::string read_string(const json& object, const char* field, std::string& out) {
  const auto it = object.find(field);
  if (it == object.end()) return fmt::format("{}: missing", field);
  if (!it->is_string()) return fmt::format("{}: expected a string, got {}", field, short_dump(*it));
  out = it->get<std::string>();
  return {};
}

json position_json(resume::Position p) { return json{{"epoch", p.epoch}, {"seq", p.seq}}; }

std::variant<json, WireError> parse_object(std::string_view text) {
  bool too_deep = false;
  json value = parse_json_bounded(text, too_deep);
  if (too_deep) return WireError{fmt::format("nested more than {} levels deep", kJsonLevelsMax)};
  if (value.is_discarded()) return WireError{"not JSON"};
  if (!value.is_object()) return WireError{fmt::format("expected a JSON object, got {}", short_dump(value))};
  return value;
}

std::optional<resume::ResetKind> reset_kind(std::string_view name) {
  for (auto kind : {resume::ResetKind::evicted, resume::ResetKind::epoch_changed, resume::ResetKind::ahead_of_top,
                    resume::ResetKind::over_limit}) {
    if (resume::to_string(kind) == name) return kind;
  }
  return std::nullopt;
}

}  // namespace

std::string check_channel_name(std::string_view channel) {
  if (channel.empty() || channel.size() > kChannelNameMax) {
    return fmt::format("expected 1..{} bytes, got {}", kChannelNameMax, channel.size());
  }
  for (char c : channel) {
    if (c <= ' ' || c > '~' || c == '"' || c == '\\' || c == '&' || c == '?' || c == '/' || c == '%') {
      return fmt::format("'{}' holds a character other than printable ASCII without space, quote, "
                         "backslash, &, ?, / or %",
                         channel.size() > 60 ? std::string{channel.substr(0, 57)} + "..." : std::string{channel});
    }
  }
  return {};
}

std::string encode_data(std::string_view channel, const resume::Message& message, std::string_view payload) {
  // Channel names need no escaping (check_channel_name); payloads may.
  return fmt::format(R"({{"type":"data","channel":"{}","epoch":{},"seq":{},"payload":{}}})", channel,
                     message.epoch, message.seq, json(payload).dump());
}

std::string encode_reset(const resume::Reset& reset) {
  return fmt::format(R"({{"type":"reset","kind":"{}","after":{{"epoch":{},"seq":{}}},"resume":{{"epoch":{},"seq":{}}}}})",
                     resume::to_string(reset.kind), reset.after.epoch, reset.after.seq, reset.resume.epoch,
                     reset.resume.seq);
}

std::string encode_ping(const resume::Ping& ping) { return fmt::format(R"({{"type":"ping","id":{}}})", ping.id); }

std::variant<WireHubFrame, WireError> decode_hub_frame(std::string_view text) {
  auto parsed = parse_object(text);
  if (auto* error = std::get_if<WireError>(&parsed)) return std::move(*error);
  const json& object = std::get<json>(parsed);
  std::string type;
  if (std::string e = read_string(object, "type", type); !e.empty()) return WireError{e};
  WireHubFrame out;
  if (type == "data") {
    resume::Message message;
    uint64_t seq = 0;
    if (std::string e = read_string(object, "channel", out.channel); !e.empty()) return WireError{e};
    if (std::string e = read_u64(object, "epoch", "", message.epoch); !e.empty()) return WireError{e};
    if (std::string e = read_u64(object, "seq", "", seq); !e.empty()) return WireError{e};
    if (seq == 0 || seq > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return WireError{fmt::format("seq: expected 1..{}, got {}", std::numeric_limits<int64_t>::max(), seq)};
    }
    message.seq = static_cast<int64_t>(seq);
    if (std::string e = read_string(object, "payload", out.payload); !e.empty()) return WireError{e};
    if (out.payload.size() > kPayloadBytesMax) {
      return WireError{fmt::format("payload: {} bytes, at most {} allowed", out.payload.size(), kPayloadBytesMax)};
    }
    message.bytes = static_cast<uint32_t>(out.payload.size());
    out.frame = resume::Data{message};
    return out;
  }
  if (type == "reset") {
    resume::Reset reset;
    std::string kind;
    if (std::string e = read_string(object, "kind", kind); !e.empty()) return WireError{e};
    const auto parsed_kind = reset_kind(kind);
    if (!parsed_kind) {
      return WireError{fmt::format("kind: '{}' is not evicted, epoch_changed, ahead_of_top or over_limit", kind)};
    }
    reset.kind = *parsed_kind;
    if (std::string e = read_position(object, "after", reset.after, false); !e.empty()) return WireError{e};
    if (std::string e = read_position(object, "resume", reset.resume, false); !e.empty()) return WireError{e};
    out.frame = reset;
    return out;
  }
  if (type == "ping") {
    resume::Ping ping;
    if (std::string e = read_u64(object, "id", "", ping.id); !e.empty()) return WireError{e};
    out.frame = ping;
    return out;
  }
  return WireError{fmt::format("type: '{}' is not data, reset or ping", type)};
}

std::string encode_subscribe(const resume::Subscribe& subscribe) {
  return json{{"type", "subscribe"}, {"channel", subscribe.channel}, {"after", position_json(subscribe.after)}}.dump();
}

std::string encode_pong(const resume::Pong& pong) {
  return fmt::format(R"({{"type":"pong","ping":{},"consumed":{}}})", pong.ping, pong.consumed_bytes);
}

std::variant<WireClientFrame, WireError> decode_client_frame(std::string_view text) {
  auto parsed = parse_object(text);
  if (auto* error = std::get_if<WireError>(&parsed)) return std::move(*error);
  const json& object = std::get<json>(parsed);
  std::string type;
  if (std::string e = read_string(object, "type", type); !e.empty()) return WireError{e};
  if (type == "subscribe") {
    resume::Subscribe subscribe;
    if (std::string e = read_string(object, "channel", subscribe.channel); !e.empty()) return WireError{e};
    if (std::string e = check_channel_name(subscribe.channel); !e.empty()) return WireError{"channel: " + e};
    // No "after": from the start (the first message of whatever epoch the hub is in).
    if (std::string e = read_position(object, "after", subscribe.after, true); !e.empty()) return WireError{e};
    return WireClientFrame{std::move(subscribe)};
  }
  if (type == "pong") {
    resume::Pong pong;
    if (std::string e = read_u64(object, "ping", "", pong.ping); !e.empty()) return WireError{e};
    if (std::string e = read_u64(object, "consumed", "", pong.consumed_bytes); !e.empty()) return WireError{e};
    return WireClientFrame{pong};
  }
  return WireError{fmt::format("type: '{}' is not subscribe or pong", type)};
}

std::string synthetic_payload(uint32_t bytes, int64_t unix_ns) {
  std::string payload = fmt::format("t={};", unix_ns);
  if (bytes < 24 || payload.size() > bytes) return std::string(bytes, 'x');
  payload.resize(bytes, 'x');
  return payload;
}

int64_t payload_send_time(std::string_view payload) {
  if (!payload.starts_with("t=")) return -1;
  const auto end = payload.find(';');
  if (end == std::string_view::npos) return -1;
  int64_t value = -1;
  const auto [ptr, ec] = std::from_chars(payload.data() + 2, payload.data() + end, value);
  if (ec != std::errc{} || ptr != payload.data() + end) return -1;
  return value;
}

}  // namespace leaseproof::runtime
