#include "scenarios/registry_scale.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "core/dynamo/attribute_value.hpp"
#include "core/registry/client.hpp"
#include "core/registry/requests.hpp"
#include "models/dynamo/store.hpp"
#include "sim/clock.hpp"
#include "sim/prng.hpp"

namespace leaseproof::scenarios {
namespace {

using registry::RegistryConfig;

constexpr uint64_t kPageBytesMax = 1024 * 1024;  // a Query or Scan page stops at 1 MB
constexpr uint64_t kReadUnitBytes = 4096;

// The lease scenario's default link, each way.
Duration round_trip(sim::Prng& prng) {
  const sim::LatencyDistribution link{Duration::from_ms(2), Duration::from_ms(3), Ratio{1, 200},
                                      Duration::from_ms(200)};
  return link.sample(prng) + link.sample(prng);
}

RegistryConfig config_with(uint32_t shards, uint32_t page_items) {
  RegistryConfig config;
  config.room_shards = shards;
  config.query_page_items_max = page_items;
  return config;
}

// A table of memberships, and what a Scan of it would read.
struct Table {
  models::DynamoStore store{models::DynamoStoreOptions::faults_off(), 1};
  uint64_t items = 0;
  std::vector<uint64_t> item_bytes;  // in load order
};

void create(models::DynamoStore& store, const RegistryConfig& config) {
  const auto created = store.apply(registry::create_table_request(config), sim::kWallEpoch);
  LP_ASSERT_MSG(created.ok(), "registry table: {}", created.ok() ? "" : created.error().message);
}

// Loads `rooms` (name, members), then filler rooms of 2..200 members until
// the table holds `total` items.
void load(Table& table, const RegistryConfig& config, const std::vector<std::pair<std::string, uint32_t>>& rooms,
          uint64_t total, uint64_t seed) {
  create(table.store, config);
  sim::Prng prng(seed);
  uint64_t next_connection = 0;
  auto join = [&](const std::string& room) {
    const std::string connection = fmt::format("c{:07}", next_connection++);
    const std::string user = fmt::format("u{}", prng.below(1'000'000));
    dynamo::Request request = registry::join_request(config, room, connection, user, sim::kWallEpoch.ms());
    table.item_bytes.push_back(dynamo::item_size_bytes(std::get<dynamo::PutItemRequest>(request).item));
    const auto reply = table.store.apply(request, sim::kWallEpoch);
    LP_ASSERT(reply.ok());
    ++table.items;
  };
  for (const auto& [room, members] : rooms) {
    for (uint32_t i = 0; i < members; ++i) join(room);
  }
  for (uint64_t filler = 0; table.items < total; ++filler) {
    const uint64_t members = std::min<uint64_t>(2 + prng.below(199), total - table.items);
    const std::string room = fmt::format("f{}", filler);
    for (uint64_t i = 0; i < members; ++i) join(room);
  }
}

ScanFigures scan_of(const Table& table, sim::Prng& prng) {
  ScanFigures scan;
  scan.table_items = table.items;
  uint64_t page = 0;
  auto close_page = [&] {
    if (page == 0) return;
    ++scan.pages;
    scan.read_units += 0.5 * static_cast<double>((page + kReadUnitBytes - 1) / kReadUnitBytes);
    scan.latency += round_trip(prng);
    page = 0;
  };
  for (uint64_t bytes : table.item_bytes) {
    scan.table_bytes += bytes;
    if (page + bytes > kPageBytesMax) close_page();
    page += bytes;
  }
  close_page();
  return scan;
}

// One members() of the core through the store; per partition key, the page
// chain's latency and the read units.
struct Measured {
  QueryFigures figures;
  double hottest_key_read_units = 0;
};

Measured measure_members(models::DynamoStore& store, const RegistryConfig& config, const std::string& room,
                         uint32_t members, uint64_t seed) {
  sim::PrngRandomSource random(seed);
  sim::Prng latency(sim::derive_seed(seed, "registry-scale/latency"));
  registry::RegistryClient client(config, random);
  Measured measured;
  QueryFigures& figures = measured.figures;
  figures.room_members = members;
  figures.shards = registry::room_shards(config);
  const int64_t half_units_before = store.accounting(config.table.name).table.read_half_units;
  std::map<std::string, Duration> chain;    // by partition key value
  std::map<std::string, double> key_units;  // by partition key value
  registry::Actions pending;
  const registry::Clock clock{sim::kWallEpoch, Instant{}};
  client.members(1, room, clock, pending);
  std::optional<registry::Done> done;
  while (!pending.empty()) {
    registry::Action action = std::move(pending.front());
    pending.erase(pending.begin());
    if (auto* finished = std::get_if<registry::Done>(&action)) {
      done = std::move(*finished);
      continue;
    }
    const auto* call = std::get_if<registry::DynamoCall>(&action);
    if (call == nullptr) continue;
    const auto& query = std::get<dynamo::QueryRequest>(call->request);
    const std::string key = query.expression_attribute_values.at(":pk").text();
    chain[key] += round_trip(latency);
    ++figures.requests;
    const auto reply = store.apply(call->request, sim::kWallEpoch);
    LP_ASSERT(reply.ok());
    const auto& page = std::get<dynamo::QueryResponse>(reply.value());
    figures.items_read += static_cast<uint64_t>(page.scanned_count);
    if (page.consumed_capacity) key_units[key] += page.consumed_capacity->capacity_units;
    registry::Actions out;
    client.on_reply(call->token, &reply, clock, out);
    pending.insert(pending.end(), out.begin(), out.end());
  }
  LP_ASSERT_MSG(done && done->error.empty(), "members of {}: {}", room, done ? done->error : "never finished");
  figures.members_returned = std::get<registry::MembersDone>(done->outcome).members.size();
  figures.read_units =
      static_cast<double>(store.accounting(config.table.name).table.read_half_units - half_units_before) / 2.0;
  for (const auto& [key, time] : chain) figures.latency = std::max(figures.latency, time);
  for (const auto& [key, units] : key_units) {
    measured.hottest_key_read_units = std::max(measured.hottest_key_read_units, units);
  }
  return measured;
}

std::string room_name(uint32_t members) { return fmt::format("room-{}", members); }

HotRoomRow hot_room(const RegistryScaleOptions& options, uint32_t shards) {
  HotRoomRow row;
  row.shards = shards;
  row.members = options.hot_room_members;
  row.joins_per_s = options.joins_per_s;
  models::DynamoStoreOptions store_options = models::DynamoStoreOptions::faults_off();
  store_options.throttling = true;
  row.partition_wcu_per_s = store_options.partition_wcu_per_s;
  row.table_partitions = store_options.partitions_per_table;
  const RegistryConfig config = config_with(shards, options.query_page_items_max);
  models::DynamoStore store(store_options, options.seed);
  create(store, config);
  const std::string room = room_name(options.hot_room_members);
  std::map<std::string, uint64_t> writes_by_key;
  const Duration step = Duration::from_ns(1'000'000'000 / options.joins_per_s);
  Instant at = sim::kWallEpoch + Duration::from_s(1);
  for (uint32_t i = 0; i < options.hot_room_members; ++i, at += step) {
    const std::string connection = fmt::format("h{:07}", i);
    const dynamo::Request request = registry::join_request(config, room, connection, connection, at.ms());
    ++writes_by_key[registry::room_key(room, registry::shard_of(connection, shards))];
    const auto reply = store.apply(request, at);
    if (!reply.ok()) ++row.joins_throttled;
  }
  const double fill_s = static_cast<double>(options.hot_room_members) / options.joins_per_s;
  uint64_t hottest = 0;
  for (const auto& [key, writes] : writes_by_key) hottest = std::max(hottest, writes);
  row.hottest_key_wcu_per_s = static_cast<double>(hottest) / fill_s;  // each item is under 1 KB: 1 WCU
  // One broadcast's member query of the full room (loaded without throttling).
  Table full;
  load(full, config, {{room, options.hot_room_members}}, options.hot_room_members, options.seed);
  const Measured measured = measure_members(full.store, config, room, options.hot_room_members, options.seed);
  row.broadcast_read_units = measured.figures.read_units;
  row.hottest_key_rcu_per_broadcast = measured.hottest_key_read_units;
  return row;
}

}  // namespace

std::string RegistryScaleOptions::validate() const {
  if (room_sizes.empty()) return "room_sizes must not be empty";
  uint64_t rooms_total = 0;
  for (uint32_t size : room_sizes) {
    if (size < 1 || size > 1'000'000) return fmt::format("room size {} must be between 1 and 1000000", size);
    rooms_total += size;
  }
  if (memberships < rooms_total || memberships > 5'000'000) {
    return fmt::format("memberships ({}) must be between the rooms' total ({}) and 5000000", memberships,
                       rooms_total);
  }
  for (uint64_t size : table_sizes) {
    if (size < room_sizes.front() || size > 5'000'000) {
      return fmt::format("table size {} must be between the first room's size ({}) and 5000000", size,
                         room_sizes.front());
    }
  }
  if (hot_room_members < 1 || hot_room_members > 1'000'000) {
    return fmt::format("hot room members ({}) must be between 1 and 1000000", hot_room_members);
  }
  if (joins_per_s < 1 || joins_per_s > 1'000'000) {
    return fmt::format("joins per second ({}) must be between 1 and 1000000", joins_per_s);
  }
  if (shard_counts.empty()) return "shard counts must not be empty";
  for (uint32_t shards : shard_counts) {
    if (shards < 1 || shards > 1000) return fmt::format("shard count {} must be between 1 and 1000", shards);
  }
  if (query_page_items_max < 1 || query_page_items_max > 10'000) {
    return fmt::format("query page items ({}) must be between 1 and 10000", query_page_items_max);
  }
  return "";
}

RegistryScaleReport measure_registry_scale(const RegistryScaleOptions& options,
                                           const std::function<void(const std::string&)>& progress) {
  LP_ASSERT_MSG(options.validate().empty(), "{}", options.validate());
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  RegistryScaleReport report;
  report.options = options;
  std::vector<std::pair<std::string, uint32_t>> rooms;
  for (uint32_t size : options.room_sizes) rooms.emplace_back(room_name(size), size);
  for (uint32_t shards : options.shard_counts) {
    say(fmt::format("loading {} memberships ({} shards per room)", options.memberships, shards));
    const RegistryConfig config = config_with(shards, options.query_page_items_max);
    Table table;
    load(table, config, rooms, options.memberships, options.seed);
    report.table_items = table.items;
    for (const auto& [room, size] : rooms) {
      report.rooms.push_back(measure_members(table.store, config, room, size, options.seed).figures);
    }
    if (shards == options.shard_counts.front()) {
      sim::Prng latency(sim::derive_seed(options.seed, "registry-scale/scan"));
      report.scan = scan_of(table, latency);
    }
  }
  const uint32_t small_room = options.room_sizes.front();
  for (uint64_t size : options.table_sizes) {
    say(fmt::format("table of {} items: the room of {} against a Scan", size, small_room));
    const RegistryConfig config = config_with(options.shard_counts.back(), options.query_page_items_max);
    Table table;
    load(table, config, {{room_name(small_room), small_room}}, size, options.seed);
    TableSizeRow row;
    row.table_items = table.items;
    row.query = measure_members(table.store, config, room_name(small_room), small_room, options.seed).figures;
    sim::Prng latency(sim::derive_seed(options.seed, "registry-scale/scan"));
    row.scan = scan_of(table, latency);
    report.table_sizes.push_back(row);
  }
  for (uint32_t shards : options.shard_counts) {
    say(fmt::format("hot room: {} joins at {}/s on {} shard{}", options.hot_room_members, options.joins_per_s, shards,
                    shards == 1 ? "" : "s"));
    report.hot_room.push_back(hot_room(options, shards));
  }
  return report;
}

namespace {

std::string ms(Duration d) { return fmt::format("{:.1f} ms", static_cast<double>(d.us()) / 1000.0); }
std::string units(double u) { return fmt::format("{:.1f}", u); }

}  // namespace

std::string RegistryScaleReport::markdown() const {
  std::string out;
  out += fmt::format("### A broadcast's member query, table of {} memberships\n\n", table_items);
  out += "| room members | shards | queries | items read | RCU | latency |\n|---:|---:|---:|---:|---:|---:|\n";
  for (const QueryFigures& q : rooms) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", q.room_members, q.shards, q.requests, q.items_read,
                       units(q.read_units), ms(q.latency));
  }
  out += fmt::format("| Scan of the table | | {} pages | {} | {} | {} |\n\n", scan.pages, scan.table_items,
                     units(scan.read_units), ms(scan.latency));
  out += fmt::format("### Items read to find a {}-member room's connections\n\n", options.room_sizes.front());
  out += "| table size | Query: items read | Query: RCU | Scan: items read | Scan: RCU |\n|---:|---:|---:|---:|---:|\n";
  for (const TableSizeRow& row : table_sizes) {
    out += fmt::format("| {} | {} | {} | {} | {} |\n", row.table_items, row.query.items_read,
                       units(row.query.read_units), row.scan.table_items, units(row.scan.read_units));
  }
  out += fmt::format("\n### A {}-member room filling at {} joins/s\n\n", options.hot_room_members, options.joins_per_s);
  out += "| shards | hottest key WCU/s | partition limit WCU/s | joins throttled | broadcast RCU | hottest key RCU per "
         "broadcast |\n|---:|---:|---:|---:|---:|---:|\n";
  for (const HotRoomRow& row : hot_room) {
    out += fmt::format("| {} | {:.0f} | {} | {} of {} | {} | {} |\n", row.shards, row.hottest_key_wcu_per_s,
                       row.partition_wcu_per_s, row.joins_throttled, row.members, units(row.broadcast_read_units),
                       units(row.hottest_key_rcu_per_broadcast));
  }
  return out;
}

nlohmann::json RegistryScaleReport::to_json() const {
  auto query_json = [](const QueryFigures& q) {
    return nlohmann::json{{"room_members", q.room_members}, {"shards", q.shards},
                          {"members_returned", q.members_returned}, {"requests", q.requests},
                          {"items_read", q.items_read}, {"read_units", q.read_units},
                          {"latency_ms", static_cast<double>(q.latency.us()) / 1000.0}};
  };
  auto scan_json = [](const ScanFigures& s) {
    return nlohmann::json{{"table_items", s.table_items}, {"table_bytes", s.table_bytes}, {"pages", s.pages},
                          {"read_units", s.read_units}, {"latency_ms", static_cast<double>(s.latency.us()) / 1000.0}};
  };
  nlohmann::json out;
  out["seed"] = options.seed;
  out["table_items"] = table_items;
  out["rooms"] = nlohmann::json::array();
  for (const QueryFigures& q : rooms) out["rooms"].push_back(query_json(q));
  out["scan"] = scan_json(scan);
  out["table_sizes"] = nlohmann::json::array();
  for (const TableSizeRow& row : table_sizes) {
    out["table_sizes"].push_back({{"table_items", row.table_items}, {"query", query_json(row.query)},
                                  {"scan", scan_json(row.scan)}});
  }
  out["hot_room"] = nlohmann::json::array();
  for (const HotRoomRow& row : hot_room) {
    out["hot_room"].push_back({{"shards", row.shards}, {"members", row.members}, {"joins_per_s", row.joins_per_s},
                               {"hottest_key_wcu_per_s", row.hottest_key_wcu_per_s},
                               {"partition_wcu_per_s", row.partition_wcu_per_s},
                               {"table_partitions", row.table_partitions}, {"joins_throttled", row.joins_throttled},
                               {"broadcast_read_units", row.broadcast_read_units},
                               {"hottest_key_rcu_per_broadcast", row.hottest_key_rcu_per_broadcast}});
  }
  return out;
}

}  // namespace leaseproof::scenarios
