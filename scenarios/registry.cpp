#include "scenarios/registry.hpp"
#include "scenarios/metrics.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/assert.hpp"
#include "core/registry/requests.hpp"
#include "models/dynamo/node.hpp"
#include "models/dynamo/store.hpp"
#include "models/registry_world.hpp"
#include "properties/registry_checker.hpp"
#include "properties/sim_invariants.hpp"
#include "sim/prng.hpp"
#include "sim/world.hpp"

namespace leaseproof::scenarios {
namespace {

struct RegistryOptions {
  models::RegistryWorkload workload;
  registry::RegistryConfig config;
  bool throttling = true;
  int64_t partition_wcu_per_s = 20;
  int64_t partition_rcu_per_s = 300;
  uint32_t partitions = 4;
  // DynamoDB deletes expired items "typically within a few days"; scaled
  // with the TTL (20 minutes here for 2 h 10 min).
  Duration ttl_sweep_lag_max = Duration::from_min(10);
  Duration duration = Duration::from_min(30);
  // A network partition between the handler and DynamoDB (both ways) from
  // `dynamo_cut_at` for `dynamo_cut_for`; zero length: none.
  Duration dynamo_cut_at;
  Duration dynamo_cut_for;
};

RegistryOptions defaults(std::string_view name, uint64_t seed) {
  RegistryOptions o;
  o.workload.clients = 100;
  o.workload.users = 80;
  o.workload.rooms = 12;
  o.workload.lifetime_min = Duration::from_min(1);
  o.workload.lifetime_max = Duration::from_min(10);
  o.workload.connection_cap = Duration::from_min(15);
  o.workload.maintenances = {Instant{} + Duration::from_min(12)};
  o.workload.mass_closes = {Instant{} + Duration::from_min(18)};
  o.workload.quiet_rooms = 4;
  o.workload.posts_per_s = 500;
  o.workload.broadcast_interval = Duration::from_s(1);
  o.workload.presence_interval = Duration::from_s(1);
  o.config.ttl = Duration::from_min(20);
  if (name == "registry-swarm") {
    // Everything drawn from the seed (TigerBeetle's swarm testing): a
    // failure prints the options it ran with, and the seed reproduces them.
    sim::Prng draw(sim::derive_seed(seed, "registry/swarm"));
    models::RegistryWorkload& w = o.workload;
    w.clients = static_cast<uint32_t>(draw.uniform(20, 200));
    w.users = static_cast<uint32_t>(draw.uniform(w.clients / 2, w.clients));
    w.rooms = static_cast<uint32_t>(draw.uniform(2, 30));
    w.rooms_per_client = static_cast<uint32_t>(draw.uniform(1, std::min<int64_t>(5, w.rooms)));
    w.big_room_share = Ratio::percent(static_cast<uint64_t>(draw.uniform(0, 100)));
    w.quiet_rooms = static_cast<uint32_t>(draw.uniform(0, w.rooms / 2));
    w.abrupt_share = Ratio::percent(static_cast<uint64_t>(draw.uniform(0, 60)));
    w.disconnect_loss = Ratio::percent(static_cast<uint64_t>(draw.uniform(0, 50)));
    w.vanish_share = Ratio::percent(static_cast<uint64_t>(draw.uniform(0, 100)));
    w.connection_cap = Duration::from_min(draw.uniform(5, 20));
    w.lifetime_max = std::min(w.connection_cap, Duration::from_min(draw.uniform(1, 15)));
    w.lifetime_min = Duration::from_s(draw.uniform(10, 60));
    w.broadcast_interval = Duration::from_ms(draw.uniform(200, 3000));
    w.posts_per_s = draw.uniform(50, 2000);
    w.maintenances.clear();
    w.mass_closes.clear();
    if (draw.chance(Ratio{1, 2})) w.maintenances.push_back(Instant{} + Duration::from_s(draw.uniform(60, 1500)));
    if (draw.chance(Ratio{1, 2})) w.mass_closes.push_back(Instant{} + Duration::from_s(draw.uniform(60, 1500)));
    o.config.room_shards = static_cast<uint32_t>(draw.uniform(1, 16));
    o.config.ttl = w.connection_cap + Duration::from_min(draw.uniform(1, 10));
    o.throttling = draw.chance(Ratio{3, 4});
    // Inside the registry's capacity assumption: the table's partitions
    // absorb every client's joins and removals (a row, and two GSI entries,
    // each) within a minute, as after a mass close; below it, joins wait
    // past any bound and membership fails whatever the registry does.
    const int64_t burst_wcu = int64_t{w.clients} * w.rooms_per_client * 6;
    const int64_t needed = (burst_wcu + 60 * o.partitions - 1) / (60 * o.partitions);
    o.partition_wcu_per_s = draw.uniform(std::max<int64_t>(10, needed), std::max<int64_t>(200, needed));
    o.partition_rcu_per_s = draw.uniform(100, 3000);
    o.ttl_sweep_lag_max = Duration::from_s(draw.uniform(1, 900));
    if (draw.chance(Ratio{1, 3})) {
      o.dynamo_cut_at = Duration::from_s(draw.uniform(60, 1500));
      o.dynamo_cut_for = Duration::from_s(draw.uniform(1, 60));
    }
    // Drawn last: the options above do not depend on it.
    w.leave_share = Ratio::percent(static_cast<uint64_t>(draw.uniform(0, 30)));
  }
  if (name == "registry-huge-room") {
    // Seed 003's largest room: 50,000 members, DynamoDB's own per-partition
    // limits, a deployment closing every connection at 30 s (50,000 removals
    // and as many joins again within seconds), a broadcast every 10 s.
    o.workload.clients = 50'000;
    o.workload.users = 50'000;
    o.workload.rooms = 1;
    o.workload.rooms_per_client = 1;
    o.workload.quiet_rooms = 0;
    o.workload.broadcast_interval = Duration::from_s(10);
    o.workload.maintenances.clear();
    o.workload.mass_closes = {Instant{} + Duration::from_s(30)};
    o.workload.posts_per_s = 100'000;
    o.partition_wcu_per_s = 1000;
    o.partition_rcu_per_s = 3000;
    o.duration = Duration::from_min(3);  // the joins after the close are judged: 91 s, within the run
  }
  if (name == "registry-big-room") {
    // One room of 2,000 members, a broadcast to it every 100 ms, no churn
    // events: the load that one partition key per room cannot carry.
    o.workload.clients = 2000;
    o.workload.users = 2000;
    o.workload.rooms = 1;
    o.workload.rooms_per_client = 1;
    o.workload.quiet_rooms = 0;
    o.workload.broadcast_interval = Duration::from_ms(100);
    o.workload.maintenances.clear();
    o.workload.mass_closes.clear();
    o.workload.posts_per_s = 100'000;
    o.duration = Duration::from_min(3);
  }
  return o;
}

std::string read_parameters(const nlohmann::json& p, RegistryOptions& o) {
  if (!p.is_object()) return "parameters: expected a JSON object";
  static constexpr std::string_view kAllowed[] = {
      "algorithm", "flaws", "clients", "users", "rooms", "rooms_per_client", "room_shards", "ttl",
      "connection_cap", "disconnect_loss_pct", "abrupt_pct", "leave_pct", "maintenance_at", "mass_close_at", "quiet_rooms",
      "throttling", "partition_wcu_per_s", "partition_rcu_per_s", "posts_per_s", "broadcast_interval",
      "dynamo_cut_at", "dynamo_cut_for"};
  for (const auto& [key, value] : p.items()) {
    if (std::find(std::begin(kAllowed), std::end(kAllowed), key) == std::end(kAllowed)) {
      return fmt::format("{}: unknown field; allowed: {}", key, fmt::join(kAllowed, ", "));
    }
  }
  auto integer = [&](const char* key, int64_t low, int64_t high, auto& out) -> std::string {
    if (!p.contains(key)) return {};
    const auto& v = p[key];
    if (!v.is_number_integer() || v.get<int64_t>() < low || v.get<int64_t>() > high) {
      return fmt::format("{}: expected an integer in {}..{}, got {}", key, low, high, v.dump());
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(v.get<int64_t>());
    return {};
  };
  auto duration = [&](const char* key, Duration low, Duration high, Duration& out) -> std::string {
    if (!p.contains(key)) return {};
    std::optional<Duration> parsed = p[key].is_string() ? parse_duration(p[key].get<std::string>()) : std::nullopt;
    if (!parsed || *parsed < low || *parsed > high) {
      return fmt::format("{}: expected a duration string in {}..{}, got {}", key, low, high, p[key].dump());
    }
    out = *parsed;
    return {};
  };
  if (p.contains("algorithm")) {
    const auto& v = p["algorithm"];
    if (!v.is_string() || (v != "core" && v != "seed")) {
      return fmt::format("algorithm: expected \"core\" or \"seed\", got {}", v.dump());
    }
    o.config.algorithm = v == "seed" ? registry::Algorithm::seed : registry::Algorithm::core;
  }
  if (p.contains("flaws")) {
    const auto& v = p["flaws"];
    const std::string allowed = "an array of \"drop_unprocessed\", \"no_expiry_filter\", \"one_partition\"";
    if (!v.is_array()) return fmt::format("flaws: expected {}, got {}", allowed, v.dump());
    for (const auto& name : v) {
      bool known = false;
      for (registry::Flaw flaw : registry::kFlaws) {
        if (name.is_string() && name.get<std::string>() == registry::to_string(flaw)) {
          o.config.flaws |= static_cast<uint8_t>(flaw);
          known = true;
        }
      }
      if (!known) return fmt::format("flaws: expected {}, got {}", allowed, name.dump());
    }
  }
  models::RegistryWorkload& w = o.workload;
  int64_t disconnect_loss = -1;
  int64_t abrupt = -1;
  int64_t leave = -1;
  for (std::string e : {integer("clients", 1, 50000, w.clients), integer("users", 1, 50000, w.users),
                        integer("rooms", 1, 1000, w.rooms), integer("rooms_per_client", 1, 25, w.rooms_per_client),
                        integer("room_shards", 1, 100, o.config.room_shards),
                        integer("disconnect_loss_pct", 0, 100, disconnect_loss), integer("abrupt_pct", 0, 100, abrupt),
                        integer("leave_pct", 0, 100, leave),
                        integer("partition_wcu_per_s", 1, 100000, o.partition_wcu_per_s),
                        integer("partition_rcu_per_s", 1, 100000, o.partition_rcu_per_s),
                        integer("posts_per_s", 1, 1000000, w.posts_per_s),
                        duration("ttl", Duration::from_min(1), Duration::from_h(48), o.config.ttl),
                        duration("connection_cap", Duration::from_min(1), Duration::from_h(48), w.connection_cap),
                        duration("broadcast_interval", Duration::from_ms(10), Duration::from_min(10),
                                 w.broadcast_interval),
                        duration("dynamo_cut_at", Duration::zero(), Duration::from_h(48), o.dynamo_cut_at),
                        duration("dynamo_cut_for", Duration::zero(), Duration::from_min(10), o.dynamo_cut_for)}) {
    if (!e.empty()) return e;
  }
  if (disconnect_loss >= 0) w.disconnect_loss = Ratio{static_cast<uint64_t>(disconnect_loss), 100};
  if (abrupt >= 0) w.abrupt_share = Ratio{static_cast<uint64_t>(abrupt), 100};
  if (leave >= 0) w.leave_share = Ratio{static_cast<uint64_t>(leave), 100};
  if (p.contains("throttling")) {
    if (!p["throttling"].is_boolean()) return fmt::format("throttling: expected true or false, got {}", p["throttling"].dump());
    o.throttling = p["throttling"].get<bool>();
  }
  if (std::string e = integer("quiet_rooms", 0, 1000, w.quiet_rooms); !e.empty()) return e;
  if (p.contains("mass_close_at")) {
    Duration at;
    if (std::string e = duration("mass_close_at", Duration::zero(), Duration::from_h(48), at); !e.empty()) return e;
    w.mass_closes = {Instant{} + at};
  }
  if (p.contains("maintenance_at")) {
    Duration at;
    if (std::string e = duration("maintenance_at", Duration::zero(), Duration::from_h(48), at); !e.empty()) return e;
    w.maintenances = {Instant{} + at};
  }
  // Without its own figure, the users follow the clients (four users to five
  // clients, as the defaults: some users keep two tabs open).
  if (p.contains("clients") && !p.contains("users")) w.users = std::max<uint32_t>(1, w.clients * 4 / 5);
  if (w.users > w.clients) return fmt::format("users ({}) must be at most clients ({})", w.users, w.clients);
  if (uint64_t{w.clients} * w.rooms_per_client > 100'000) {
    return fmt::format("clients x rooms_per_client ({} x {}) must be at most 100,000 memberships", w.clients,
                       w.rooms_per_client);
  }
  if (o.config.ttl <= w.connection_cap) {
    return fmt::format("ttl ({}) must be longer than connection_cap ({}): a live connection's row must not expire",
                       o.config.ttl, w.connection_cap);
  }
  if (w.lifetime_max > w.connection_cap) w.lifetime_max = w.connection_cap;
  if (w.lifetime_min > w.lifetime_max) w.lifetime_min = w.lifetime_max;
  return o.config.validate();
}

RegistryOptions options_of(std::string_view name, const RunConfig& config) {
  RegistryOptions o = defaults(name, config.seed);
  const std::string error = read_parameters(config.parameters, o);
  LP_ASSERT_MSG(error.empty(), "unchecked parameters: {}", error);
  o.duration = config.duration.value_or(o.duration);
  return o;
}

models::DynamoStoreOptions store_options(const RegistryOptions& o) {
  models::DynamoStoreOptions s;
  s.throttling = o.throttling;
  s.partition_wcu_per_s = o.partition_wcu_per_s;
  s.partition_rcu_per_s = o.partition_rcu_per_s;
  s.partitions_per_table = o.partitions;
  s.ttl_sweep_lag_max = o.ttl_sweep_lag_max;
  s.ttl_attribute[o.config.table.name] = "expiresAt";
  return s;
}

// Every attempt of the client answered (or timed out) and the longest wait
// before the next, plus a second for the network.
Duration join_bound(const models::RegistryWorkload& w) {
  return models::kJoinAttempts * (w.invoke_timeout + models::kJoinRetryWaitMax) + Duration::from_s(1);
}

// " flaws=a,b" or "".
std::string flaw_text(const registry::RegistryConfig& c) {
  std::string out;
  for (registry::Flaw flaw : registry::kFlaws) {
    if (c.algorithm == registry::Algorithm::core && c.has(flaw)) {
      out += fmt::format("{}{}", out.empty() ? " flaws=" : ",", registry::to_string(flaw));
    }
  }
  return out;
}

}  // namespace

std::string validate_registry(std::string_view name, const RunConfig& config) {
  RegistryOptions o = defaults(name, config.seed);
  return read_parameters(config.parameters, o);
}

RunResult run_registry(std::string_view name, const RunConfig& config) {
  const RegistryOptions o = options_of(name, config);
  sim::World world{config.seed};
  configure_trace(world, config);
  const models::DynamoStoreOptions dynamo_options = store_options(o);
  properties::SimInvariants invariants;
  properties::RegistryChecker checker{properties::RegistryBounds{
      o.config.ttl, Duration::from_s(2), dynamo_options.gsi_lag.max(), dynamo_options.eventual_read_window,
      join_bound(o.workload)}};
  std::map<std::string, uint64_t, std::less<>> marks;
  world.trace().add_observer([&](const sim::TraceEvent& e) {
    invariants.observe(e);
    checker.observe(e);
    if (e.kind == sim::EventKind::note && e.label.starts_with("registry.") && e.label.find('_') != std::string_view::npos &&
        e.detail.empty()) {
      ++marks[std::string{e.label}];  // the core's coverage marks
    }
  });
  world.set_default_link(sim::LinkConfig{sim::LatencyDistribution{Duration::from_ms(2), Duration::from_ms(3),
                                                                   Ratio{1, 200}, Duration::from_ms(200)},
                                         Ratio::zero(), false});
  models::DynamoStore store{dynamo_options, sim::derive_seed(config.seed, "registry/dynamo")};
  models::RegistryTally tally;
  models::RegistryShared shared;
  shared.workload = o.workload;
  shared.config = o.config;
  shared.tally = &tally;
  shared.dynamo = world.add_node("dynamodb", {}, [&store] { return std::make_unique<models::DynamoNode>(store); });
  shared.gateway = world.add_node("gateway", {}, [&shared] { return std::make_unique<models::GatewayProcess>(shared); });
  shared.handler = world.add_node("handler", {}, [&shared] { return std::make_unique<models::RegistryHandler>(shared); });
  world.at(Instant{}, [&store, &shared] {
    const auto created = store.apply(registry::create_table_request(shared.config), sim::kWallEpoch);
    LP_ASSERT(created.ok());
  });
  for (Instant at : o.workload.mass_closes) {
    world.at(at, [&world, &shared] {
      dynamic_cast<models::GatewayProcess*>(world.process(shared.gateway))->mass_close_now();
    });
  }
  for (Instant at : o.workload.maintenances) {
    world.at(at, [&world, &shared] {
      dynamic_cast<models::GatewayProcess*>(world.process(shared.gateway))->maintenance_now();
    });
  }
  if (!o.dynamo_cut_for.is_zero()) {
    const Instant from = Instant{} + o.dynamo_cut_at;
    world.partition(shared.handler, shared.dynamo, from, from + o.dynamo_cut_for);
    world.partition(shared.dynamo, shared.handler, from, from + o.dynamo_cut_for);
  }
  if (config.before_run) config.before_run(world);
  world.run_until(Instant{} + o.duration);
  checker.finish(Instant{} + o.duration);

  const registry::RegistryConfig& c = o.config;
  RunResult result = world_result(
      world, config, o.duration,
      fmt::format("registry: algorithm={}{} clients={} users={} rooms={} rooms_per_client={} shards={} ttl={} cap={} "
                  "quiet={} disconnect_loss={} abrupt={} leave={} throttling={} partition={} WCU/s {} RCU/s posts={}/s "
                  "broadcast every {}{}",
                  registry::to_string(c.algorithm), flaw_text(c), o.workload.clients, o.workload.users, o.workload.rooms,
                  o.workload.rooms_per_client, registry::room_shards(c), c.ttl, o.workload.connection_cap,
                  o.workload.quiet_rooms, o.workload.disconnect_loss, o.workload.abrupt_share, o.workload.leave_share, o.throttling,
                  o.partition_wcu_per_s, o.partition_rcu_per_s, o.workload.posts_per_s,
                  o.workload.broadcast_interval,
                  o.dynamo_cut_for.is_zero() ? std::string{}
                                             : fmt::format(" handler-DynamoDB cut at {} for {}", o.dynamo_cut_at,
                                                           o.dynamo_cut_for)));
  result.scenario = std::string{name};
  result.parameters = config.parameters;
  result.violations = invariants.violations();
  for (const std::string& v : checker.violations()) result.violations.push_back(v);
  result.violations_unlisted = checker.violations_unlisted();
  result.summary = checker.summary();
  const auto& accounting = store.accounting(c.table.name);
  if (accounting.scan != 0) result.violations.push_back(fmt::format("no scans: {} Scan requests", accounting.scan));
  const auto& f = checker.figures();
  result.counters = {{"registry.broadcasts", f.broadcasts},
                     {"registry.expected_deliveries", f.expected_deliveries},
                     {"registry.delivered", f.delivered},
                     {"registry.ghost_posts", f.ghost_posts},
                     {"registry.broadcasts_failed_in_cut", f.broadcasts_failed_in_cut},
                     {"registry.presence_online_ghosts", f.presence_online_ghosts},
                     {"registry.presence_online_joining", f.presence_online_joining},
                     {"registry.leaves_asked", f.leaves_asked},
                     {"registry.leaves_ok", f.leaves_ok},
                     {"registry.leave_deletes", f.leave_deletes},
                     {"registry.removals_ok", f.removals_ok},
                     {"registry.removals_failed", f.removals_failed},
                     {"dynamodb.throttled_requests", static_cast<uint64_t>(accounting.throttled_requests)},
                     {"dynamodb.ttl_deletes", static_cast<uint64_t>(accounting.ttl_deletes)},
                     {"dynamodb.query", static_cast<uint64_t>(accounting.query)}};
  for (const auto& [mark, count] : marks) result.counters.emplace_back(mark, count);
  result.metrics = {
      {"dynamodb", dynamodb_metrics(store, o.duration)},
      {"fleet", {{"connections", o.workload.clients}}},
      {"registry",
       {{"broadcasts", f.broadcasts},
        {"expected_deliveries", f.expected_deliveries},
        {"delivered", f.delivered},
        {"misses_not_in_answer", f.misses_not_in_answer},
        {"misses_gateway", f.misses_gateway},
        {"connections", f.connections},
        {"connection_s", f.connection_s},
        {"broadcast_units", {{"read", tally.broadcast.read}, {"write", tally.broadcast.write}}},
        {"connection_units", {{"read", tally.connection.read}, {"write", tally.connection.write}}},
        {"staleness_ms",
         {{"broadcast", histogram_ms(checker.staleness().broadcast_ms)},
          {"presence", histogram_ms(checker.staleness().presence_ms)}}}}}};
  if (c.algorithm == registry::Algorithm::seed) {
    result.failure_expected = "the seed's registry (UnprocessedItems dropped, no expiresAt filter, one partition per room)";
  } else if (c.flaws != 0) {
    result.failure_expected = fmt::format("the seed's flaws{}", flaw_text(c));
  }
  return result;
}

}  // namespace leaseproof::scenarios

namespace leaseproof::scenarios {
namespace {

std::string size_text(const RegistryOptions& o) {
  return fmt::format("{} client{}, {} room{} ({} each), {}", o.workload.clients, o.workload.clients == 1 ? "" : "s",
                     o.workload.rooms, o.workload.rooms == 1 ? "" : "s", o.workload.rooms_per_client, o.duration);
}

struct Candidate {
  std::string change;
  RunConfig config;
};

// The changes to try from `config`, in order (each valid for the scenario).
std::vector<Candidate> candidates(std::string_view name, const RunConfig& config) {
  const RegistryOptions o = options_of(name, config);
  const models::RegistryWorkload& w = o.workload;
  std::vector<Candidate> out;
  auto add = [&](std::string change, const std::function<void(nlohmann::json&)>& edit, std::optional<Duration> run = {}) {
    Candidate c{std::move(change), config};
    edit(c.config.parameters);
    if (run) c.config.duration = run;
    if (validate_registry(name, c.config).empty()) out.push_back(std::move(c));
  };
  const Instant end = Instant{} + o.duration;
  if (!w.maintenances.empty() && w.maintenances.front() < end) {
    add("removed the maintenance", [](nlohmann::json& p) { p["maintenance_at"] = "48h"; });
  }
  if (!w.mass_closes.empty() && w.mass_closes.front() < end) {
    add("removed the mass close", [](nlohmann::json& p) { p["mass_close_at"] = "48h"; });
  }
  if (!o.dynamo_cut_for.is_zero() && Instant{} + o.dynamo_cut_at < end) {
    add("removed the handler-DynamoDB cut", [](nlohmann::json& p) { p["dynamo_cut_for"] = "0s"; });
  }
  if (w.quiet_rooms > 0) add("no quiet rooms", [](nlohmann::json& p) { p["quiet_rooms"] = 0; });
  if (!w.abrupt_share.is_zero()) add("no abrupt losses", [](nlohmann::json& p) { p["abrupt_pct"] = 0; });
  if (!w.disconnect_loss.is_zero()) add("no lost $disconnect", [](nlohmann::json& p) { p["disconnect_loss_pct"] = 0; });
  auto clients = [&](uint32_t n) {
    add(fmt::format("{} client{} (was {})", n, n == 1 ? "" : "s", w.clients), [&](nlohmann::json& p) {
      p["clients"] = n;
      p["users"] = std::min(w.users, n);
    });
  };
  if (w.clients > 1) clients(w.clients / 2);
  if (w.clients > 1 && o.partition_wcu_per_s > 1) {
    // The table scaled down with the fleet: the same load per partition.
    add(fmt::format("{} clients and partitions of {} WCU/s (were {} and {})", w.clients / 2,
                    std::max<int64_t>(1, o.partition_wcu_per_s / 2), w.clients, o.partition_wcu_per_s),
        [&](nlohmann::json& p) {
          p["clients"] = w.clients / 2;
          p["users"] = std::min(w.users, w.clients / 2);
          p["partition_wcu_per_s"] = std::max<int64_t>(1, o.partition_wcu_per_s / 2);
        });
  }
  if (!w.mass_closes.empty() && w.mass_closes.front() < end && w.mass_closes.front() > Instant{} + Duration::from_min(1)) {
    const Duration earlier = Duration::from_s((w.mass_closes.front() - Instant{}).s() / 2);
    add(fmt::format("the mass close at {} (was {})", earlier, w.mass_closes.front() - Instant{}),
        [&](nlohmann::json& p) { p["mass_close_at"] = format_duration(earlier); });
  }
  if (w.rooms > 1) {
    add(fmt::format("{} rooms (was {})", w.rooms / 2, w.rooms), [&](nlohmann::json& p) {
      const uint32_t rooms = w.rooms / 2;
      p["rooms"] = rooms;
      p["rooms_per_client"] = std::min(w.rooms_per_client, rooms);
      p["quiet_rooms"] = std::min(w.quiet_rooms, rooms - 1);
    });
  }
  if (w.rooms_per_client > 1) {
    add(fmt::format("{} rooms per client (was {})", w.rooms_per_client / 2, w.rooms_per_client),
        [&](nlohmann::json& p) { p["rooms_per_client"] = w.rooms_per_client / 2; });
  }
  if (o.duration > Duration::from_min(2)) {
    const Duration half = Duration::from_s(std::max<int64_t>(60, o.duration.s() / 2));
    add(fmt::format("a run of {} (was {})", half, o.duration), [](nlohmann::json&) {}, half);
  }
  if (w.clients > 1 && w.clients / 2 != w.clients - 1) clients(w.clients - 1);
  return out;
}

}  // namespace

bool is_registry_scenario(std::string_view scenario) { return scenario.starts_with("registry"); }

RegistryShrinkResult shrink_registry(const Scenario& scenario, const RunConfig& start, const std::string& property,
                                     uint64_t budget_runs, const std::function<void(const RegistryShrinkStep&)>& on_step) {
  LP_ASSERT(is_registry_scenario(scenario.name));
  LP_ASSERT(budget_runs >= 1);
  const std::string name{scenario.name};
  RegistryShrinkResult result;
  result.first = scenario.run(start);
  result.runs = 1;
  result.property = property;
  if (result.property.empty() && !result.first.violations.empty()) {
    result.property = violation_kind(result.first.violations.front());
  }
  auto fails = [&](const RunResult& run) {
    for (const std::string& v : run.violations) {
      if (violation_kind(v) == result.property) return true;
    }
    return false;
  };
  result.started_failing = fails(result.first);
  result.last = result.first;
  if (!result.started_failing) return result;
  RunConfig current = start;
  if (on_step) {
    on_step(RegistryShrinkStep{0, "fails " + result.property, size_text(options_of(name, current)), result.runs});
  }
  bool changed = true;
  while (changed) {
    changed = false;
    for (Candidate& candidate : candidates(name, current)) {
      if (result.runs >= budget_runs) {
        result.budget_exhausted = true;
        return result;
      }
      RunResult run = scenario.run(candidate.config);
      ++result.runs;
      if (!fails(run)) continue;
      current = std::move(candidate.config);
      result.last = std::move(run);
      ++result.steps;
      if (on_step) {
        on_step(RegistryShrinkStep{result.steps, candidate.change, size_text(options_of(name, current)), result.runs});
      }
      changed = true;
      break;
    }
  }
  return result;
}

}  // namespace leaseproof::scenarios
