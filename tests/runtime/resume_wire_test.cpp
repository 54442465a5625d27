// The resume protocol's wire format (runtime/hub/resume_wire.hpp): every frame
// round-trips, and every malformed frame is refused naming its field.
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/hub/resume_wire.hpp"
#include "runtime/worker/ws_link.hpp"

namespace leaseproof::runtime {
namespace {

using resume::Position;

std::string error_of(std::string_view text) {
  auto decoded = decode_client_frame(text);
  const auto* error = std::get_if<WireError>(&decoded);
  return error ? error->message : "";
}
std::string hub_error_of(std::string_view text) {
  auto decoded = decode_hub_frame(text);
  const auto* error = std::get_if<WireError>(&decoded);
  return error ? error->message : "";
}

TEST(ResumeWire, DataRoundTripsWithItsPayload) {
  const resume::Message message{7, 42, 11};
  const std::string text = encode_data("c1", message, "hé \"x\"\n");
  EXPECT_EQ(text, R"({"type":"data","channel":"c1","epoch":7,"seq":42,"payload":"hé \"x\"\n"})");
  auto decoded = decode_hub_frame(text);
  ASSERT_TRUE(std::holds_alternative<WireHubFrame>(decoded)) << std::get<WireError>(decoded).message;
  const auto& wire = std::get<WireHubFrame>(decoded);
  EXPECT_EQ(wire.channel, "c1");
  EXPECT_EQ(wire.payload, "hé \"x\"\n");
  const auto& data = std::get<resume::Data>(wire.frame);
  EXPECT_EQ(data.message.epoch, 7u);
  EXPECT_EQ(data.message.seq, 42);
  EXPECT_EQ(data.message.bytes, 8u);  // bytes, not characters: é is two
}

TEST(ResumeWire, ResetAndPingRoundTrip) {
  const resume::Reset reset{resume::ResetKind::over_limit, Position{3, 9}, Position{4, 100}};
  EXPECT_EQ(encode_reset(reset),
            R"({"type":"reset","kind":"over_limit","after":{"epoch":3,"seq":9},"resume":{"epoch":4,"seq":100}})");
  auto decoded = decode_hub_frame(encode_reset(reset));
  ASSERT_TRUE(std::holds_alternative<WireHubFrame>(decoded));
  const auto& back = std::get<resume::Reset>(std::get<WireHubFrame>(decoded).frame);
  EXPECT_EQ(back.kind, resume::ResetKind::over_limit);
  EXPECT_EQ(back.after, (Position{3, 9}));
  EXPECT_EQ(back.resume, (Position{4, 100}));
  auto ping = decode_hub_frame(encode_ping(resume::Ping{12}));
  ASSERT_TRUE(std::holds_alternative<WireHubFrame>(ping));
  EXPECT_EQ(std::get<resume::Ping>(std::get<WireHubFrame>(ping).frame).id, 12u);
}

TEST(ResumeWire, ClientFramesRoundTrip) {
  auto subscribe = decode_client_frame(encode_subscribe(resume::Subscribe{"room-1", Position{5, 77}}));
  ASSERT_TRUE(std::holds_alternative<WireClientFrame>(subscribe));
  const auto& s = std::get<resume::Subscribe>(std::get<WireClientFrame>(subscribe));
  EXPECT_EQ(s.channel, "room-1");
  EXPECT_EQ(s.after, (Position{5, 77}));
  auto pong = decode_client_frame(encode_pong(resume::Pong{3, 65600}));
  ASSERT_TRUE(std::holds_alternative<WireClientFrame>(pong));
  EXPECT_EQ(std::get<resume::Pong>(std::get<WireClientFrame>(pong)).consumed_bytes, 65600u);
  // No "after": from the start.
  auto fresh = decode_client_frame(R"({"type":"subscribe","channel":"c"})");
  ASSERT_TRUE(std::holds_alternative<WireClientFrame>(fresh));
  EXPECT_EQ(std::get<resume::Subscribe>(std::get<WireClientFrame>(fresh)).after, Position{});
}

TEST(ResumeWire, MalformedClientFramesNameTheField) {
  EXPECT_EQ(error_of("not json"), "not JSON");
  // A frame fits in kPayloadBytesMax, and nests no deeper than any JSON input may.
  const std::string deep = std::string(30'000, '[') + std::string(30'000, ']');
  EXPECT_EQ(error_of(deep), "nested more than 128 levels deep");
  EXPECT_EQ(error_of("[1]"), "expected a JSON object, got [1]");
  EXPECT_EQ(error_of(R"({"channel":"c"})"), "type: missing");
  EXPECT_EQ(error_of(R"({"type":"hello"})"), "type: 'hello' is not subscribe or pong");
  EXPECT_EQ(error_of(R"({"type":"subscribe"})"), "channel: missing");
  EXPECT_EQ(error_of(R"({"type":"subscribe","channel":""})"), "channel: expected 1..256 bytes, got 0");
  EXPECT_NE(error_of(R"({"type":"subscribe","channel":"a b"})").find("printable ASCII"), std::string::npos);
  EXPECT_EQ(error_of(R"({"type":"subscribe","channel":"c","after":{"epoch":1,"seq":-1}})"),
            "after.seq: expected an integer >= 0, got -1");
  EXPECT_EQ(error_of(R"({"type":"subscribe","channel":"c","after":{"epoch":1,"seq":9223372036854775808}})"),
            "after.seq: 9223372036854775808 is above 9223372036854775807");
  EXPECT_EQ(error_of(R"({"type":"subscribe","channel":"c","after":[1,2]})"),
            R"(after: expected an object {"epoch":E,"seq":S}, got [1,2])");
  EXPECT_EQ(error_of(R"({"type":"pong","ping":1})"), "consumed: missing");
  EXPECT_EQ(error_of(R"({"type":"pong","ping":"1","consumed":0})"), R"(ping: expected an integer >= 0, got "1")");
  EXPECT_EQ(error_of(R"({"type":"pong","ping":1.5,"consumed":0})"), "ping: expected an integer >= 0, got 1.5");
}

TEST(ResumeWire, MalformedHubFramesNameTheField) {
  EXPECT_EQ(hub_error_of(R"({"type":"data","channel":"c","epoch":1,"seq":0,"payload":""})"),
            "seq: expected 1..9223372036854775807, got 0");
  EXPECT_EQ(hub_error_of(R"({"type":"data","channel":"c","epoch":1,"seq":1})"), "payload: missing");
  EXPECT_EQ(hub_error_of(R"({"type":"reset","kind":"gone","after":{"epoch":1,"seq":1},"resume":{"epoch":1,"seq":1}})"),
            "kind: 'gone' is not evicted, epoch_changed, ahead_of_top or over_limit");
  EXPECT_EQ(hub_error_of(R"({"type":"ping"})"), "id: missing");
}

TEST(ResumeWire, SyntheticPayloadsHaveTheirSizeAndSendTime) {
  const std::string payload = synthetic_payload(256, 1'700'000'000'123'456'789);
  EXPECT_EQ(payload.size(), 256u);
  EXPECT_EQ(payload_send_time(payload), 1'700'000'000'123'456'789);
  EXPECT_EQ(synthetic_payload(10, 5), std::string(10, 'x'));  // too small for the time
  EXPECT_EQ(payload_send_time("xxxx"), -1);
  EXPECT_EQ(payload_send_time("t=12a;"), -1);
}

RC_GTEST_PROP(ResumeWire, AnyUtf8PayloadRoundTrips, (const std::string& ascii, uint64_t epoch, uint32_t seq)) {
  // ASCII from rapidcheck (controls included) plus a fixed multi-byte tail.
  std::string payload;
  for (char c : ascii) payload.push_back(static_cast<char>(static_cast<unsigned char>(c) & 0x7f));
  payload += "ü€😀";
  const resume::Message message{epoch, static_cast<int64_t>(seq) + 1, static_cast<uint32_t>(payload.size())};
  auto decoded = decode_hub_frame(encode_data("ch", message, payload));
  RC_ASSERT(std::holds_alternative<WireHubFrame>(decoded));
  const auto& wire = std::get<WireHubFrame>(decoded);
  RC_ASSERT(wire.payload == payload);
  RC_ASSERT(std::get<resume::Data>(wire.frame).message.seq == message.seq);
  RC_ASSERT(std::get<resume::Data>(wire.frame).message.epoch == epoch);
}

// A worker dials the URL a lease item names: ws:// or wss://, a host name or
// an address, the scheme's port when none is given.
TEST(WsUrl, SchemesHostsAndDefaultPorts) {
  const auto parse = [](std::string_view text) { return std::get<WsUrl>(parse_ws_url(text)); };
  const WsUrl plain = parse("ws://127.0.0.1:8080/stream?x=1");
  EXPECT_FALSE(plain.tls);
  EXPECT_EQ(plain.host, "127.0.0.1");
  EXPECT_EQ(plain.port, 8080);
  EXPECT_EQ(plain.target(), "/stream?x=1");
  const WsUrl secure = parse("wss://hub.example.com/feed");
  EXPECT_TRUE(secure.tls);
  EXPECT_EQ(secure.host, "hub.example.com");
  EXPECT_EQ(secure.port, 443);
  EXPECT_EQ(secure.target(), "/feed");
  EXPECT_EQ(parse("ws://localhost").port, 80);
  EXPECT_EQ(parse("ws://localhost").host, "localhost");  // kept: a certificate names it
  EXPECT_EQ(parse("wss://[::1]:9443/").host, "::1");
  for (const char* bad : {"http://127.0.0.1:80/", "ws://:80/", "ws://127.0.0.1:0/", "ws://user@127.0.0.1/", "wss//x",
                          ""}) {
    const auto parsed = parse_ws_url(bad);
    ASSERT_TRUE(std::holds_alternative<std::string>(parsed)) << bad;
    EXPECT_NE(std::get<std::string>(parsed).find("is not ws://HOST[:PORT]/PATH or wss://"), std::string::npos)
        << std::get<std::string>(parsed);
  }
}

}  // namespace
}  // namespace leaseproof::runtime
