#pragma once
// Seed 003's "Verification" section, measured: the cost of a broadcast's
// member query against the simulated DynamoDB for rooms of varied size,
// beside a Scan of the same table, and the write rate a big room's joins put
// on its partitions with one partition key per room or several (shards).
//
// Query figures are the simulated store's own accounting (items read, read
// capacity in half units) for the requests the registry core sends, and the
// latency of its page chains (shards in parallel, pages of one shard in
// sequence) with round trips drawn from the lease scenario's default link
// (2 ms + up to 3 ms jitter each way). The store has no Scan (the registry
// never scans): a Scan's figures are computed from the item sizes loaded, by
// DynamoDB's rules (pages of at most 1 MB, each rounded up to 4 KB, half a
// unit per 4 KB for an eventually consistent read).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/time.hpp"

namespace leaseproof::scenarios {

struct RegistryScaleOptions {
  uint64_t seed = 1;
  // Memberships loaded for the room-size table: the measured rooms plus
  // filler rooms of 2..200 members.
  uint64_t memberships = 300'000;
  std::vector<uint32_t> room_sizes = {12, 1'000, 50'000};
  // Table sizes of the seed's chart (items read to find a 12-member room).
  std::vector<uint64_t> table_sizes = {10'000, 100'000, 1'000'000};
  // The hot room: this many members joining at this rate (a mass reconnect).
  uint32_t hot_room_members = 50'000;
  uint32_t joins_per_s = 2'000;
  std::vector<uint32_t> shard_counts = {1, 8};
  uint32_t query_page_items_max = 1'000;

  // "" when valid; otherwise names the field and what is allowed.
  std::string validate() const;
};

struct QueryFigures {
  uint32_t room_members = 0;
  uint32_t shards = 0;
  uint64_t members_returned = 0;
  uint64_t requests = 0;
  uint64_t items_read = 0;  // ScannedCount, summed
  double read_units = 0;    // consumed, eventually consistent
  Duration latency;         // the longest shard's page chain
};

struct ScanFigures {
  uint64_t table_items = 0;
  uint64_t table_bytes = 0;
  uint64_t pages = 0;
  double read_units = 0;
  Duration latency;  // pages in sequence
};

struct TableSizeRow {
  uint64_t table_items = 0;
  QueryFigures query;  // the 12-member room (the first of room_sizes)
  ScanFigures scan;
};

struct HotRoomRow {
  uint32_t shards = 0;
  uint32_t members = 0;
  uint32_t joins_per_s = 0;
  double hottest_key_wcu_per_s = 0;  // writes per second on the busiest partition key
  int64_t partition_wcu_per_s = 0;   // DynamoDB's per-partition limit
  uint32_t table_partitions = 0;     // the simulated table's
  uint64_t joins_throttled = 0;      // answered ProvisionedThroughputExceeded (not retried)
  double broadcast_read_units = 0;   // one broadcast's member query
  double hottest_key_rcu_per_broadcast = 0;
};

struct RegistryScaleReport {
  RegistryScaleOptions options;
  uint64_t table_items = 0;
  std::vector<QueryFigures> rooms;  // by room size, then shard count
  ScanFigures scan;                 // of the same table
  std::vector<TableSizeRow> table_sizes;
  std::vector<HotRoomRow> hot_room;

  std::string markdown() const;
  nlohmann::json to_json() const;
};

// `progress` (optional) is called with a short line before each step.
RegistryScaleReport measure_registry_scale(const RegistryScaleOptions& options,
                                           const std::function<void(const std::string&)>& progress = {});

}  // namespace leaseproof::scenarios
