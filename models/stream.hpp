#pragma once
// Streaming in the simulation: WebSocket connections between workers and the
// upstream hub (optionally through a relay), the hub node running the core
// hub (core/resume/hub.hpp) unchanged, the relay with an idle cut-off, and
// simple subscribers for the lab scenarios.
//
// Transport. A connection is a TCP stream: every link from or to the hub and
// the relay is FIFO (World::set_stream_node), and frames are numbered per
// direction. A frame that arrives after a gap means the network lost one: the
// stream is broken, and the receiver drops the connection (1006) and tells the
// other side, as TCP would after failed retransmissions. So a subscriber sees
// either every frame in order or a closed connection, never a hole.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/lex_compare.hpp"
#include "base/random.hpp"
#include "core/resume/client.hpp"
#include "core/resume/hub.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

// The randomness core/ asks for (jitter), drawn from the node's generator.
class NodeRandom final : public RandomSource {
 public:
  explicit NodeRandom(sim::NodeContext& context) : context_(context) {}
  uint64_t below(uint64_t bound) override { return context_.prng().below(bound); }

 private:
  sim::NodeContext& context_;
};

namespace ws {

using ConnectionId = uint64_t;

inline constexpr std::string_view kOpen = "ws.open";
inline constexpr std::string_view kFrame = "ws.frame";
inline constexpr std::string_view kPong = "ws.pong";
inline constexpr std::string_view kClose = "ws.close";

// client -> hub: open a connection and subscribe.
struct Open final : sim::Payload {
  Open(ConnectionId c, resume::Subscribe s, std::string w) : connection(c), subscribe(std::move(s)), who(std::move(w)) {}
  ConnectionId connection;
  resume::Subscribe subscribe;
  std::string who;  // the subscriber's name, for the trace
};
// hub -> client.
struct Frame final : sim::Payload {
  Frame(ConnectionId c, uint64_t i, resume::HubFrame f) : connection(c), index(i), frame(std::move(f)) {}
  ConnectionId connection;
  uint64_t index;  // 1, 2, ... per connection
  resume::HubFrame frame;
};
// client -> hub.
struct PongFrame final : sim::Payload {
  PongFrame(ConnectionId c, uint64_t i, resume::Pong p) : connection(c), index(i), pong(p) {}
  ConnectionId connection;
  uint64_t index;  // 1, 2, ... per connection
  resume::Pong pong;
};
// Either way: the connection is closed with this code.
struct Close final : sim::Payload {
  Close(ConnectionId c, uint16_t k) : connection(c), code(k) {}
  ConnectionId connection;
  uint16_t code;
};

// Unique across the run: the node, its incarnation and a counter.
ConnectionId make_connection_id(NodeId node, Incarnation incarnation, uint32_t counter);
uint32_t frame_size(const resume::HubFrame& frame);

}  // namespace ws

// The hub's durable side, outliving its process: the epoch counter, the
// shared ring store (when the hub keeps its ring across restarts), and what
// it publishes.
struct HubShared {
  resume::HubConfig config;
  bool keep_ring = false;           // restart with the ring (same epoch) or without (new epoch)
  uint64_t last_epoch = 0;
  // The hub's state lives here, so that a restart with keep_ring finds the
  // rings as of the crash (a shared store written through at every publish).
  std::optional<resume::Hub> hub;
  // Steady traffic: every `publish_interval`, one message of `message_bytes`
  // on every channel, from `publish_from` until `publish_until`.
  std::vector<std::string> channels;
  Duration publish_interval = Duration::from_s(1);
  uint32_t message_bytes = 256;
  Duration publish_from = Duration::zero();
  Duration publish_until = Duration::max();
  // Bursts (lab scenarios): `count` messages of `bytes` on `channel`, one
  // every `interval` from `at`.
  struct Burst {
    std::string channel;
    Duration at;
    uint32_t count = 0;
    uint32_t bytes = 0;
    Duration interval = Duration::zero();
  };
  std::vector<Burst> bursts;
  // Largest queue a subscriber ever had (checked against the bound).
  uint64_t queue_peak_bytes = 0;
};

class HubProcess final : public sim::Process {
 public:
  explicit HubProcess(HubShared& shared) : shared_(shared), hub_(shared.hub) {}

  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;
  // Service restart announced to everyone: close all with 1012.
  void close_all(uint16_t code);
  size_t subscriber_count() const { return hub_ ? hub_->subscriber_count() : 0; }

 private:
  struct Peer {
    NodeId node;
    std::string channel;
    std::string who;
    uint64_t sent = 0;      // frames sent
    uint64_t received = 0;  // pongs received
  };
  void apply(resume::HubActions& actions);
  void drop(ws::ConnectionId id, const char* reason);
  void schedule_timer();
  void publish(std::string_view channel, uint32_t bytes);
  void schedule_tick(Duration not_before);
  void schedule_bursts();
  void burst_step(size_t i, uint32_t n);
  void note_channel(std::string_view label, const Peer& peer);

  HubShared& shared_;
  sim::NodeContext* context_ = nullptr;
  std::optional<resume::Hub>& hub_;  // shared_.hub
  // Hashed: found on every frame, never walked.
  std::unordered_map<ws::ConnectionId, Peer> peers_;
  std::unordered_map<std::string, uint32_t, TextHash, std::equal_to<>> channel_subscribers_;
  uint64_t timer_ = 0;
  Instant timer_at_ = Instant::max();
};

// An ALB / nginx-style proxy: forwards frames both ways and cuts a connection
// that carried nothing, either way, for `idle_limit` (1006 to both sides).
class RelayProcess final : public sim::Process {
 public:
  RelayProcess(NodeId hub, Duration idle_limit) : hub_(hub), idle_limit_(idle_limit) {}

  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;

 private:
  struct Route {
    NodeId client;
    Instant last_activity;
  };
  void sweep();

  NodeId hub_;
  Duration idle_limit_;
  sim::NodeContext* context_ = nullptr;
  std::map<ws::ConnectionId, Route> routes_;
};

// The client end of streams on one node, for the lab and the reconnect wave:
// `count` ResumeClients on channels `channel_prefix`0.. that record at once
// (no sink) and never give up. `read` false: a subscriber that opens its
// connection and then neither reads nor answers pings.
struct SubscriberPoolOptions {
  NodeId via;  // hub or relay
  std::string channel_prefix = "c";
  uint32_t count = 1;
  resume::ClientConfig client;
  bool read = true;
};

class SubscriberPool final : public sim::Process {
 public:
  explicit SubscriberPool(SubscriberPoolOptions options) : options_(std::move(options)) {}

  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;
  uint64_t received_messages() const { return received_; }
  resume::Position cursor(uint32_t index) const { return clients_.at(index).client->cursor(); }

 private:
  struct Slot {
    std::unique_ptr<resume::ResumeClient> client;
    ws::ConnectionId connection = 0;
    uint64_t received = 0;  // frames on the current connection
    uint64_t sent = 0;
    uint64_t timer = 0;
    Instant timer_at = Instant::max();
  };
  void apply(uint32_t index, resume::ClientActions& actions);
  void schedule(uint32_t index);

  SubscriberPoolOptions options_;
  sim::NodeContext* context_ = nullptr;
  std::unique_ptr<NodeRandom> random_;
  std::vector<Slot> clients_;
  std::map<ws::ConnectionId, uint32_t> by_connection_;
  uint32_t next_connection_ = 1;
  uint64_t received_ = 0;
};

}  // namespace leaseproof::models
