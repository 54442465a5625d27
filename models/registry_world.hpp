#pragma once
// The serverless WebSocket service of seed 003, as simulated processes:
//
//   GatewayProcess  API Gateway's WebSocket API and the clients behind it.
//                   Clients connect (a new connection id each time), join
//                   rooms, sometimes in several tabs of one user, leave some
//                   of them again while connected, and go away:
//                   a clean close fires $disconnect except for a configurable
//                   share; an abrupt loss (network gone, laptop closed) never
//                   fires it; the 2-hour cap closes every connection; a
//                   maintenance drops a share of all connections at once
//                   without $disconnect. A client whose connection ended
//                   reconnects after a while with a new id and joins its rooms
//                   again. PostToConnection answers 410 Gone for a dead
//                   connection and 429 beyond a rate (token bucket).
//   RegistryHandler The Lambda functions: $connect, join, leave, $disconnect and a
//                   periodic broadcast and presence probe, each through the
//                   registry core (core/registry) against DynamoDB.
//
// Both note what checkers need (docs/trace-format.md, "Registry"): the
// gateway what is true (gw.connect, gw.gone, gw.post), the handler what the
// registry did and answered (registry.*).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/time.hpp"
#include "core/registry/client.hpp"
#include "models/dynamo/node.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

// A client asks to join a room at most this many times (the gateway answers
// each ask once the handler is done, or after invoke_timeout), waiting
// 1..5 s between them.
inline constexpr uint32_t kJoinAttempts = 6;
inline constexpr Duration kJoinRetryWaitMax = Duration::from_s(5);

struct RegistryWorkload {
  uint32_t clients = 200;
  uint32_t users = 150;  // clients share users: several tabs of one user
  uint32_t rooms = 20;   // "r0".."r{rooms-1}"; r0 is the big room
  uint32_t rooms_per_client = 3;
  Ratio big_room_share = Ratio{1, 2};  // clients that also join r0
  Duration lifetime_min = Duration::from_min(1);
  Duration lifetime_max = Duration::from_min(30);
  Duration reconnect_max = Duration::from_s(10);
  Ratio abrupt_share = Ratio{1, 4};     // losses that never fire $disconnect
  // Clients that, after an abrupt loss, stay away for vanish_min..vanish_max
  // (a closed laptop): their user may have no live connection left.
  Ratio vanish_share = Ratio{1, 2};
  Duration vanish_min = Duration::from_min(30);
  Duration vanish_max = Duration::from_min(60);
  Ratio disconnect_loss = Ratio{1, 10}; // clean closes whose $disconnect is lost
  // Joins after which the client leaves that room again (leave_after_min ..
  // leave_after_max after its join was answered), staying connected.
  Ratio leave_share = Ratio{1, 10};
  Duration leave_after_min = Duration::from_s(5);
  Duration leave_after_max = Duration::from_s(60);
  Duration connection_cap = Duration::from_h(2);
  std::vector<Instant> maintenances;    // each drops maintenance_share of all connections
  Ratio maintenance_share = Ratio{1, 3};
  // A deployment of the service's routes: every connection is closed at once
  // and $disconnect fires for each (except the lost share): a burst of
  // removals. The clients reconnect and join again.
  std::vector<Instant> mass_closes;
  // Rooms nobody broadcasts to (the last quiet_rooms of them): only TTL and
  // $disconnect clean their rows, so rows of lost connections live there
  // until their TTL.
  uint32_t quiet_rooms = 0;
  int64_t posts_per_s = 2000;           // PostToConnection rate before 429s
  Duration broadcast_interval = Duration::from_ms(500);  // to a random room; r0 one in four
  Duration presence_interval = Duration::from_s(1);      // of a random user
  Duration invoke_timeout = Duration::from_s(10);         // the gateway's wait for a join
  Duration dynamo_timeout = Duration::from_s(1);
};

// Capacity the handler's operations consumed, as DynamoDB reported it, by
// what they were for: broadcasts (member queries and their prunes) and the
// connections' own (joins, leaves, removals, presence). For cost per
// broadcast and per connection-hour.
struct RegistryTally {
  struct Units {
    double read = 0;
    double write = 0;
  };
  Units broadcast;
  Units connection;
};

struct RegistryShared {
  RegistryWorkload workload;
  registry::RegistryConfig config;
  RegistryTally* tally = nullptr;  // optional
  NodeId dynamo;
  NodeId gateway;
  NodeId handler;
};

class GatewayProcess final : public sim::Process {
 public:
  explicit GatewayProcess(const RegistryShared& shared) : shared_(shared) {}
  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;
  // Drops a share of the live connections at once, no $disconnect.
  void maintenance_now() { maintenance(*context_); }
  // Closes every connection, $disconnect firing except for the lost share.
  void mass_close_now();

 private:
  struct Connection {
    uint32_t client = 0;
    std::string user;
    uint64_t lifetime_timer = 0;
  };
  void maintenance(sim::NodeContext& context);
  void connect(sim::NodeContext& context, uint32_t client);
  void join(sim::NodeContext& context, const std::string& connection, const std::string& room, uint32_t attempt);
  // The client leaves a room it joined; the connection stays.
  void leave(sim::NodeContext& context, const std::string& connection, const std::string& room);
  // The connection ends; `disconnect`: $disconnect fires.
  void end(sim::NodeContext& context, const std::string& connection, std::string_view cause, bool disconnect);
  const std::vector<std::string>& rooms_of(uint32_t client) const { return client_rooms_[client]; }

  const RegistryShared& shared_;
  sim::NodeContext* context_ = nullptr;
  std::map<std::string, Connection> live_;
  std::vector<std::vector<std::string>> client_rooms_;
  uint64_t next_connection_ = 0;
  Instant bucket_at_;
  int64_t bucket_tokens_ = 0;
};

class RegistryHandler final : public sim::Process {
 public:
  explicit RegistryHandler(const RegistryShared& shared) : shared_(shared) {}
  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;

 private:
  registry::Clock clock(sim::NodeContext& context) const;
  void run(sim::NodeContext& context, registry::Actions& actions);
  void note_deletes(sim::NodeContext& context, const dynamo::Request& request, uint64_t operation);
  void done(sim::NodeContext& context, registry::Done& done);
  void arm(sim::NodeContext& context);
  void broadcast_tick(sim::NodeContext& context);
  void presence_tick(sim::NodeContext& context);

  struct Pending {
    enum class Kind : uint8_t { join, leave, remove, broadcast, presence } kind = Kind::join;
    std::string subject;  // connection (join, leave, remove), room (broadcast), user (presence)
    std::string room;     // join, leave
    std::optional<sim::Envelope> call;  // join: the gateway's call, answered at the end
  };
  const RegistryShared& shared_;
  std::unique_ptr<RandomSource> random_;
  std::unique_ptr<registry::RegistryClient> client_;
  std::map<registry::OperationId, Pending> pending_;
  registry::OperationId next_op_ = 1;
  uint64_t timer_ = 0;
  Instant timer_due_ = Instant::max();
};

}  // namespace leaseproof::models
