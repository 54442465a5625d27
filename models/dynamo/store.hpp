#pragma once
// The simulated DynamoDB store: a deterministic, in-memory, multi-table engine
// with explicit time. It answers the wire types of core/dynamo exactly as a
// DynamoDB endpoint would (error types and messages included), and adds the
// behaviours that make a real table unkind to its callers: eventually
// consistent reads that may return the previous version, GSIs that catch up
// after a lag, per-partition throttling and late TTL deletes.
//
// Time: every call takes `now`, the DynamoDB node's reading of its wall clock
// as Unix-epoch nanoseconds (TTL attributes are epoch seconds and are compared
// with it). All delays (GSI lag, TTL sweep, stale-read window, capacity
// refill) are measured on that same axis. If `now` goes backwards (a wall
// clock step), buckets do not refill and nothing due is undone.
//
// Determinism: ordered containers only, integer capacity arithmetic, and all
// randomness from one sim::Prng seeded by the constructor's seed.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/ratio.hpp"
#include "base/time.hpp"
#include "core/dynamo/error.hpp"
#include "core/dynamo/types.hpp"
#include "sim/prng.hpp"

namespace leaseproof::models {

struct DynamoStoreOptions {
  // Delay before a base-table write becomes visible in a GSI: normally well
  // under a second, about one write in 200 takes up to 5 s more.
  sim::LatencyDistribution gsi_lag{Duration::from_ms(5), Duration::from_ms(100), Ratio{1, 200},
                                   Duration::from_s(5)};
  // An eventually consistent read of an item written less than this long ago
  // may return the version before that write, with this chance (one draw per
  // read request: a request is served by one replica, lagging or not).
  Duration eventual_read_window = Duration::from_ms(500);
  Ratio stale_read_chance = Ratio{1, 10};

  bool throttling = true;
  // DynamoDB's documented per-partition limits.
  int64_t partition_wcu_per_s = 1000;
  int64_t partition_rcu_per_s = 3000;
  // Items map to partitions by a fixed hash of the partition key value.
  uint32_t partitions_per_table = 4;

  // DynamoDB deletes expired items "typically within a few days"; scaled down
  // here to a uniform lag after the expiry time.
  Duration ttl_sweep_lag_min = Duration::from_s(1);
  Duration ttl_sweep_lag_max = Duration::from_s(60);
  // Table name -> TTL attribute name (TTL enabled for those tables).
  std::map<std::string, std::string> ttl_attribute;

  // No lag, no stale reads, no throttling, immediate TTL sweep: the model
  // answers exactly like a fresh real table (differential test, replay).
  static DynamoStoreOptions faults_off();
};

// Capacity and request counters of one table or one GSI. Read capacity is kept
// in half units (an eventually consistent 4 KB read costs 1), so every counter
// is an exact integer.
struct CapacityAccounting {
  int64_t write_units = 0;
  int64_t read_half_units = 0;

  bool operator==(const CapacityAccounting&) const = default;
};

struct TableAccounting {
  CapacityAccounting table;
  std::map<std::string, CapacityAccounting> indexes;  // GSI name -> consumed

  // Requests that reached this table, by kind (a BatchWriteItem or
  // TransactWriteItems call counts once for every table it touches).
  int64_t get_item = 0;
  int64_t put_item = 0;
  int64_t update_item = 0;
  int64_t delete_item = 0;
  int64_t query = 0;
  int64_t batch_write_item = 0;
  int64_t transact_write_items = 0;
  int64_t scan = 0;  // the model does not implement Scan: always 0, for "no Scan" assertions

  int64_t conditional_check_failures = 0;  // single writes and transaction items
  int64_t transaction_cancellations = 0;
  int64_t throttled_requests = 0;          // includes unprocessed BatchWriteItem items
  int64_t ttl_deletes = 0;                 // free: no write capacity consumed
  int64_t stale_reads = 0;                 // eventual reads served an older version
  int64_t idempotent_replays = 0;          // TransactWriteItems retries answered from the token

  // One kind of write's share of `table`'s write units, for cost reports:
  // those TransactWriteItems charged here (cancelled ones included), and
  // those of UpdateItem calls whose UpdateExpression is `tracked_update`
  // (DynamoStore::track_update; failed conditions included).
  int64_t transact_write_units = 0;
  std::string tracked_update;
  int64_t tracked_update_write_units = 0;

  bool operator==(const TableAccounting&) const = default;
};

class DynamoStore {
 public:
  DynamoStore(DynamoStoreOptions options, uint64_t seed);
  ~DynamoStore();
  DynamoStore(DynamoStore&&) noexcept;
  DynamoStore& operator=(DynamoStore&&) noexcept;
  DynamoStore(const DynamoStore&) = delete;
  DynamoStore& operator=(const DynamoStore&) = delete;

  // Serves one request at `now`. Never throws; a failed or invalid request
  // changes no item. Applies everything due by `now` first (as advance does).
  dynamo::Result<dynamo::Response> apply(const dynamo::Request& request, Instant now);

  // Applies the GSI propagations and TTL deletions due by `now`; returns when
  // the next one is due (Instant::max() when none is pending).
  Instant advance(Instant now);

  // Enables TTL on a table (existing or created later) with this attribute.
  void set_ttl(std::string_view table, std::string attribute);

  // DynamoDB Streams, reduced to what checkers need: `listener` sees every
  // change the table commits (put, update, delete, transaction, batch, TTL),
  // in commit order, with the item before and after (nullptr when absent).
  // Refused and failed writes change nothing and are not streamed.
  using StreamListener = std::function<void(const dynamo::Item* old_item, const dynamo::Item* new_item)>;
  void set_stream(std::string_view table, StreamListener listener);
  // Counts the write units of UpdateItem calls on `table` with exactly this
  // UpdateExpression (TableAccounting::tracked_update_write_units).
  void track_update(std::string_view table, std::string expression);

  // Counters of a table; an unknown table reads as all zero.
  const TableAccounting& accounting(std::string_view table) const;
  // Every table's counters, by table name.
  const std::map<std::string, TableAccounting, std::less<>>& all_accounting() const;
  // TransactWriteItems answered from their ClientRequestToken (a retry of
  // one that succeeded: success, nothing applied again), over all tables.
  uint64_t idempotent_replays() const;

  // Test and debug access: the latest version of an item (strongly
  // consistent, no capacity consumed, nothing counted).
  std::optional<dynamo::Item> peek(std::string_view table, const dynamo::Item& key) const;
  // The latest version's `attribute` of the item at `key`, without a copy;
  // nullptr when the table, the item or the attribute is absent. Valid until
  // the next apply().
  const dynamo::AttributeValue* peek_attribute(std::string_view table, const dynamo::Item& key,
                                               std::string_view attribute) const;
  // Number of live items in a table (0 for an unknown table).
  std::size_t item_count(std::string_view table) const;
  // GSI changes scheduled but not yet visible.
  std::size_t pending_index_changes() const;

  const DynamoStoreOptions& options() const;
  // Turns throttling on or off from now on (a scenario heals its faults).
  void set_throttling(bool throttling);

  // The engine, opaque here (defined with the sources, which split it into
  // one file per operation).
  struct State;

 private:
  std::unique_ptr<State> state_;
};

// DynamoDB's answer to a request beyond a partition's throughput (a hot
// key): ProvisionedThroughputExceededException, with DynamoDB's message.
dynamo::DynamoError hot_partition_error();

}  // namespace leaseproof::models
