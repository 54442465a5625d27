#pragma once
// Internals of the simulated DynamoDB store, shared by its source files.
// DynamoStore::State is the engine; each operation lives in its own file.

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/arrival_map.hpp"
#include "base/assert.hpp"
#include "base/lex_compare.hpp"
#include "models/dynamo/expression.hpp"
#include "models/dynamo/store.hpp"
#include "sim/prng.hpp"

// Propagates the error of a Result-returning expression, else binds its value.
#define LP_STORE_TRY(target, expression)                                  \
  auto target##_result_ = (expression);                                   \
  if (!target##_result_.ok()) return std::move(target##_result_).error(); \
  auto target = std::move(target##_result_).value()

#define LP_STORE_TRY_VOID(expression)                             \
  do {                                                            \
    auto lp_store_result_ = (expression);                         \
    if (!lp_store_result_.ok()) return std::move(lp_store_result_).error(); \
  } while (false)

namespace leaseproof::models::store_detail {

using dynamo::AttributeValue;
using dynamo::DynamoError;
using dynamo::Item;
using dynamo::Result;

// Debug builds also check what the store's fast paths take for granted.
#ifdef NDEBUG
inline constexpr bool kDebugChecks = false;
#else
inline constexpr bool kDebugChecks = true;
#endif

// DynamoDB's documented limits.
inline constexpr std::size_t transact_items_max = 100;
inline constexpr std::size_t batch_write_items_max = 25;
inline constexpr std::size_t query_page_bytes_max = 1024 * 1024;
inline constexpr std::size_t hash_key_bytes_max = 2048;
inline constexpr std::size_t range_key_bytes_max = 1024;
inline constexpr Duration idempotency_window = Duration::from_min(10);
// Burst capacity: up to 300 seconds of unused provisioned capacity.
inline constexpr int64_t burst_seconds = 300;
// TTL: items whose expiry is more than five years in the past are ignored by
// the sweeper (per the DynamoDB TTL documentation).
inline constexpr int64_t ttl_ignore_older_than_s = 5LL * 365 * 24 * 3600;
// TTL values beyond this (year 2255) never expire within a simulation; keeps
// the seconds -> nanoseconds conversion inside int64.
inline constexpr int64_t ttl_seconds_max = 9'000'000'000LL;

// Total order on key values: by type, then S/B by bytes, N numerically (the
// sort-key order of Query). NULL is used for "no range key" and sorts first.
int compare_keys(const AttributeValue& a, const AttributeValue& b);
struct KeyLess {
  bool operator()(const AttributeValue& a, const AttributeValue& b) const { return compare_keys(a, b) < 0; }
};

// Hashing of key values: store keys hold canonical numbers, so equal keys
// have equal text, and structural equality is key equality.
struct KeyValueHash {
  std::size_t operator()(const AttributeValue& value) const;
};
struct KeyValueEqual {
  bool operator()(const AttributeValue& a, const AttributeValue& b) const { return a == b; }
};

struct TableKey {
  AttributeValue hash;
  AttributeValue range;  // NULL for hash-only tables
};
struct TableKeyLess {
  bool operator()(const TableKey& a, const TableKey& b) const;
};

// Position of an entry inside one GSI partition-key value: the index range
// key, then the table key (DynamoDB leaves the order of equal index keys
// unspecified; the table key makes ours total and stable for paging).
struct IndexEntryKey {
  AttributeValue range;  // NULL for hash-only indexes
  TableKey table_key;
};
struct IndexEntryKeyLess {
  bool operator()(const IndexEntryKey& a, const IndexEntryKey& b) const;
};

// One item's latest version and the one before it (for stale eventual reads).
// current == nullptr marks a recent delete, kept until the stale window ends.
// Versions are immutable and shared with the GSI entries that show them.
struct ItemRecord {
  std::shared_ptr<const Item> current;
  std::shared_ptr<const Item> previous;
  Instant written_at;
};

// Token bucket with integer arithmetic: tokens are kept in unit-nanoseconds
// (1 unit = 1e9), so continuous refill at `rate_per_s` adds rate_per_s per
// elapsed nanosecond exactly. A request may start while the bucket holds any
// tokens and may drive it negative (debt repaid by refill): a request's read
// size is unknown until it has run, as in DynamoDB.
class TokenBucket {
 public:
  TokenBucket() = default;
  TokenBucket(int64_t rate_per_s, int64_t capacity_units, int64_t initial_units, Instant now);

  void refill(Instant now);
  bool has_tokens() const { return scaled_ > 0; }
  void take(int64_t units);
  int64_t rate_per_s() const { return rate_per_s_; }

 private:
  int64_t rate_per_s_ = 0;
  int64_t capacity_scaled_ = 0;
  int64_t scaled_ = 0;
  Instant refilled_at_;
};

// Write bucket in WCU, read bucket in half RCU.
struct Throughput {
  TokenBucket write;
  TokenBucket read;
};

enum class AttributeRole : uint8_t { hash, range };

struct KeyAttribute {
  std::string name;
  dynamo::AttributeType type = dynamo::AttributeType::s;
};

// Where a table item's entry sits in its index: the entry's keys and its slot
// (std::map nodes do not move, so the slot stays valid until it is erased).
struct IndexPosition {
  AttributeValue hash;
  IndexEntryKey key;
  std::shared_ptr<const Item>* entry = nullptr;
};

// One table item's place in an index: where its entry sits (none while the
// item is not in the index), and its changes still on their way (the lag),
// so that one item's changes become visible in order. Kept while either is.
struct IndexItem {
  std::optional<IndexPosition> position;
  Instant last_due;     // due time of its last scheduled change
  int64_t pending = 0;  // changes scheduled and not applied yet
};
// Hashed (an index's items are only ever looked up by key, never walked in
// order). Store keys hold canonical numbers, so equal keys have equal text.
struct TableKeyHash {
  std::size_t operator()(const TableKey& key) const;
};
struct TableKeyEqual {
  bool operator()(const TableKey& a, const TableKey& b) const { return a.hash == b.hash && a.range == b.range; }
};
using IndexItems = std::unordered_map<TableKey, IndexItem, TableKeyHash, TableKeyEqual>;

struct IndexState {
  IndexState() = default;
  // Positions point into `entries`: moved, never copied.
  IndexState(const IndexState&) = delete;
  IndexState& operator=(const IndexState&) = delete;
  IndexState(IndexState&&) = default;
  IndexState& operator=(IndexState&&) = default;

  dynamo::GlobalSecondaryIndex definition;
  KeyAttribute hash;
  std::optional<KeyAttribute> range;
  // Visible entries: index hash value -> position -> the version of the table
  // item the entry shows, shared with the table (and with later entries of
  // unchanged versions): the projection is applied when a query reads it.
  std::map<AttributeValue, std::map<IndexEntryKey, std::shared_ptr<const Item>, IndexEntryKeyLess>, KeyLess> entries;
  // Per table item in the index or with a change pending.
  IndexItems items;
  std::vector<Throughput> partitions;
  std::optional<Throughput> provisioned;
  // KEYS_ONLY and INCLUDE: the attributes an entry keeps (table key, index
  // key, included attributes), sorted and unique; empty for ALL.
  std::vector<std::string> projected;
  // Where the index keys sit in `projected` (KEYS_ONLY and INCLUDE; no
  // range key: past the end).
  std::size_t hash_at = 0;
  std::size_t range_at = static_cast<std::size_t>(-1);

  // Whether an update plan names a projected attribute (index keys
  // included), for the plans seen last: a fleet sends the same few update
  // expressions again and again, and the expression cache shares each
  // one's plan. Holding the plans keeps their addresses from being reused.
  bool touches_projection(const std::shared_ptr<const dynamo::UpdatePlan>& plan) const;
  struct PlanTouch {
    std::shared_ptr<const dynamo::UpdatePlan> plan;
    bool touches = true;
  };
  mutable std::array<PlanTouch, 4> plan_touches;
  mutable std::size_t plan_touches_next = 0;
};

struct TableState {
  std::string name;
  dynamo::TableDescription description;
  KeyAttribute hash;
  std::optional<KeyAttribute> range;
  // hash value -> range value (NULL when hash-only) -> record. Partitions
  // are hashed (only ever found by their value), ranges ordered (Query).
  std::unordered_map<AttributeValue, std::map<AttributeValue, ItemRecord, KeyLess>, KeyValueHash, KeyValueEqual> items;
  std::size_t live_items = 0;
  std::vector<IndexState> indexes;
  std::vector<Throughput> partitions;
  std::optional<Throughput> provisioned;
  TableAccounting* accounting = nullptr;  // the store's counters of this table

  dynamo::KeySchema key_schema() const { return description.key_schema; }
  const IndexState* find_index(std::string_view index_name) const;
  IndexState* find_index(std::string_view index_name);
};

// The key's record, made empty if the table has none (the tree node a write
// fills in).
ItemRecord& record_for(TableState& table, const TableKey& key);

// Capacity a write needs, per bucket. An index lists one (partition, units)
// pair per index write: two when an index key changes (delete + put).
struct IndexWrites {
  using Write = std::pair<uint32_t, int64_t>;
  std::array<Write, 2> writes{};  // in place: one write cost per changed entry, no allocation
  uint8_t count = 0;

  void emplace_back(uint32_t partition, int64_t units) {
    LP_ASSERT_LT(count, writes.size());
    writes[count++] = Write{partition, units};
  }
  const Write* begin() const { return writes.data(); }
  const Write* end() const { return writes.data() + count; }
};
struct IndexWriteCost {
  std::size_t index = 0;
  IndexWrites writes;
  bool new_in = false;  // the new version is in the (sparse) index

  int64_t units() const {
    int64_t total = 0;
    for (const auto& write : writes) total += write.second;
    return total;
  }
};
struct WriteCost {
  uint32_t partition = 0;
  int64_t base_units = 0;
  std::vector<IndexWriteCost> indexes;  // the indexes whose entry the write changes

  // The cost of the index's entry change; nullptr when its entry is unchanged.
  const IndexWriteCost* of_index(std::size_t index) const {
    for (const auto& cost : indexes) {
      if (cost.index == index) return &cost;
    }
    return nullptr;
  }
};

// Indexes are made with their table and tables are never dropped, and an
// index item with a change pending is never erased: both stay valid (a node
// of an unordered_map keeps its address when the map grows).
struct GsiChange {
  IndexState* index = nullptr;
  IndexItems::value_type* item = nullptr;
  std::shared_ptr<const Item> entry;  // the version the entry shows; null: remove the item from the index
};
struct TtlCheck {
  std::string table;
  TableKey key;
};
struct Tombstone {
  Instant at;
  std::string table;
  TableKey key;
};
// A transaction's payload, reduced to 128 bits: a retry with the same token
// must carry the same payload, and comparing fingerprints spares keeping a
// copy of every transaction for ten minutes.
struct PayloadFingerprint {
  uint64_t first = 0;
  uint64_t second = 0;
  bool operator==(const PayloadFingerprint&) const = default;
};
// Every field of every action (kind, item or key, update expression, table,
// condition, names, values, ReturnValuesOnConditionCheckFailure), encoded
// without ambiguity and hashed twice with unrelated functions.
PayloadFingerprint fingerprint(const std::vector<dynamo::TransactWriteItem>& items);

using EventKey = std::pair<Instant, uint64_t>;  // (due, insertion sequence)

// Background work by due time: a binary heap (no node per entry, unlike a
// std::map). Keys are unique, so the order is total and the same as a map's.
template <typename T>
class EventQueue {
 public:
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const EventKey& top_key() const { return heap_.front().first; }
  void push(EventKey key, T value) {
    heap_.emplace_back(key, std::move(value));
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  T pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    T value = std::move(heap_.back().second);
    heap_.pop_back();
    return value;
  }

 private:
  struct Later {
    bool operator()(const std::pair<EventKey, T>& a, const std::pair<EventKey, T>& b) const {
      return a.first > b.first;
    }
  };
  std::vector<std::pair<EventKey, T>> heap_;
};

dynamo::AttributeType attribute_type_of(dynamo::ScalarAttributeType type);
uint32_t partition_of(const AttributeValue& hash_value, uint32_t partitions);
// ResourceNotFoundException as DynamoDB words it.
DynamoError resource_not_found();
// Attributes of `item` named by `names` (absent ones skipped).
Item pick(const Item& item, const std::vector<std::string>& names);
// The same for names sorted as an item's are (an index's projection): one walk.
Item pick_sorted(const Item& item, const std::vector<std::string>& sorted_names);
// Whether an item appears in the index (GSIs are sparse: it needs every index
// key attribute).
bool indexed(const IndexState& index, const Item& item);
// What two versions of an item (nullptr: absent) show in one index, each
// projected attribute looked up in both: whether each
// is in the (sparse) index, its index key values, the new entry's size, and
// whether the two entries are equal (the projected attributes, or the whole
// item for ALL).
struct IndexEntryPair {
  bool old_in = false;
  bool new_in = false;
  bool same = true;
  const AttributeValue* old_hash = nullptr;
  const AttributeValue* new_hash = nullptr;
  const AttributeValue* old_range = nullptr;  // null for hash-only indexes
  const AttributeValue* new_range = nullptr;
  std::size_t new_bytes = 0;  // the new entry's size, when in the index
};
IndexEntryPair index_entries(const IndexState& index, const Item* old_item, const Item* new_item);
// The size of an item's entry in the index (its projected attributes, or the
// whole item for ALL). The old entry's size is needed only when the entry
// moves or leaves: asked for then, not for every write.
std::size_t entry_bytes(const IndexState& index, const Item& item);
// ConsumedCapacity of a read charged to the table or to one index.
std::optional<dynamo::ConsumedCapacity> read_consumed(dynamo::ReturnConsumedCapacity mode, const std::string& table,
                                                      const IndexState* index, int64_t half_units);
// Before the item is read: an update must not touch a key attribute, and a
// literal SET of an index key must have the index key's type.
Result<void> check_update_plan(const TableState& table, const dynamo::BoundUpdatePlan& plan);
// The item an update produces from the old one (or from the key alone when
// there is none), numbers canonical, index keys checked.
Result<Item> updated_item(const TableState& table, const Item& key_item, const Item* old_item,
                          const std::optional<dynamo::BoundUpdatePlan>& plan);
// "ExpressionAttributeNames/Values can only be specified when using
// expressions" (DynamoDB checks this before parsing any expression).
Result<void> check_expression_params(const dynamo::ExpressionAttributeNames& names,
                                     const dynamo::ExpressionAttributeValues& values, bool any_expression,
                                     bool any_value_expression, std::string_view value_expressions_null);

}  // namespace leaseproof::models::store_detail

namespace leaseproof::models {

// Internal sources only: the wire types by their short names.
using dynamo::AttributeValue;
using dynamo::DynamoError;
using dynamo::Item;
using dynamo::Result;

struct DynamoStore::State {
  using TableKey = store_detail::TableKey;
  using TableState = store_detail::TableState;
  using IndexState = store_detail::IndexState;
  using WriteCost = store_detail::WriteCost;

  State(DynamoStoreOptions options_, uint64_t seed);

  DynamoStoreOptions options;
  sim::Prng prng;
  std::map<std::string, TableState, LexLess> tables;
  TableState* last_table = nullptr;  // what find_table found last
  std::map<std::string, TableAccounting, std::less<>> accounting;
  std::map<std::string, std::string, std::less<>> ttl_attributes;
  std::map<std::string, DynamoStore::StreamListener, std::less<>> streams;
  store_detail::EventQueue<store_detail::GsiChange> gsi_changes;
  store_detail::EventQueue<store_detail::TtlCheck> ttl_checks;
  std::deque<store_detail::Tombstone> tombstones;
  // Idempotency tokens of the last 10 minutes (a streaming fleet's sink
  // transactions: hundreds of thousands), with the fingerprint of the payload
  // each came with. Looked up, and forgotten in order of arrival.
  ArrivalMap<store_detail::PayloadFingerprint> tokens;
  uint64_t idempotent_replays = 0;  // TransactWriteItems answered from their token, every table
  uint64_t next_sequence = 0;
  // Parsed expressions reused across requests (pure memory: answers are the
  // same with or without it).
  dynamo::ExpressionCache expression_cache;

  // Operations (one file each).
  Result<dynamo::Response> create_table(const dynamo::CreateTableRequest& request, Instant now);
  Result<dynamo::Response> get_item(const dynamo::GetItemRequest& request, Instant now);
  Result<dynamo::Response> put_item(const dynamo::PutItemRequest& request, Instant now);
  Result<dynamo::Response> update_item(const dynamo::UpdateItemRequest& request, Instant now);
  Result<dynamo::Response> delete_item(const dynamo::DeleteItemRequest& request, Instant now);
  Result<dynamo::Response> query(const dynamo::QueryRequest& request, Instant now);
  Result<dynamo::Response> batch_write_item(const dynamo::BatchWriteItemRequest& request, Instant now);
  Result<dynamo::Response> transact_write_items(const dynamo::TransactWriteItemsRequest& request, Instant now);

  TableState* find_table(std::string_view name);
  TableAccounting& account(std::string_view table);
  static TableAccounting& account(const TableState& table) { return *table.accounting; }

  // Keys (dynamo_store_keys.cpp).
  Result<TableKey> key_of_item(const TableState& table, const Item& item) const;
  Result<TableKey> key_of_key(const TableState& table, const Item& key) const;
  store_detail::ItemRecord* find_record(TableState& table, const TableKey& key);
  const Item* latest(TableState& table, const TableKey& key);
  // Item as an eventually consistent read sees it; counts stale answers.
  const std::shared_ptr<const Item>& eventual(TableState& table, const store_detail::ItemRecord& record, bool stale,
                                              Instant now);
  bool draw_stale_replica(bool consistent_read);

  // Capacity (dynamo_store_capacity.cpp).
  // Items by pointer (nullptr: absent); they must stay valid for the call only.
  // `changed_by`: the update that made `new_item` from `old_item` (both
  // present), when there is one: an index whose projected attributes it does
  // not touch keeps its entry, known without comparing them.
  WriteCost write_cost(const TableState& table, const TableKey& key, const Item* old_item, const Item* new_item,
                       int64_t multiplier, const dynamo::BoundUpdatePlan* changed_by = nullptr) const;
  WriteCost failed_write_cost(const TableState& table, const TableKey& key, const Item* old_item,
                              int64_t multiplier) const;
  std::optional<DynamoError> check_write_capacity(TableState& table, const WriteCost& cost, Instant now);
  void charge_write(TableState& table, const WriteCost& cost);
  std::optional<DynamoError> check_read_capacity(TableState& table, const IndexState* index, uint32_t partition,
                                                 Instant now);
  void charge_read(TableState& table, const IndexState* index, uint32_t partition, int64_t half_units);
  // A condition that fails consumes write capacity (unless throttled) and
  // answers ConditionalCheckFailedException; ok when there is no condition or
  // it holds.
  Result<void> check_condition(TableState& table, const TableKey& key, const Item* old_item,
                               const std::optional<dynamo::BoundCondition>& condition,
                               dynamo::ReturnValuesOnConditionCheckFailure on_failure, Instant now);
  // Capacity check, charge and commit of one unconditional write.
  // `old_item` is the latest version (nullptr: none); it is replaced by the
  // commit, so the caller must not use it afterwards.
  // `record`, when given, is find_record(table, key), found by the caller
  // (it is looked up again otherwise).
  // `changed_by`: as for write_cost.
  Result<WriteCost> commit_single(TableState& table, const TableKey& key, const Item* old_item,
                                  std::optional<Item> new_item, Instant now,
                                  store_detail::ItemRecord* record = nullptr,
                                  const dynamo::BoundUpdatePlan* changed_by = nullptr);
  std::optional<dynamo::ConsumedCapacity> write_consumed(dynamo::ReturnConsumedCapacity mode, const TableState& table,
                                                         const WriteCost& cost) const;

  // Commits and background work (dynamo_store_background.cpp).
  // `cost`, when given, is write_cost() of this very change (old and new
  // item): its index list says which entries change, so they are not compared
  // again.
  // `record`: as for commit_single.
  void commit_write(TableState& table, const TableKey& key, std::optional<Item> new_item, Instant now,
                    const store_detail::WriteCost* cost = nullptr, store_detail::ItemRecord* record = nullptr);
  // The version an index entry shows (the projection is applied when read),
  // or null when the item is not in the (sparse) index.
  std::shared_ptr<const Item> index_entry(const IndexState& index, const std::shared_ptr<const Item>& item) const;
  void apply_gsi_change(store_detail::GsiChange&& change);
  void settle_gsi_change(store_detail::IndexState& index, store_detail::IndexItems::value_type* item);
  void schedule_ttl(TableState& table, const TableKey& key, const Item& item, Instant now);
  void run_ttl_check(const store_detail::TtlCheck& check, Instant now);
  Instant advance(Instant now);
};

}  // namespace leaseproof::models
