// The simulated DynamoDB store: construction, request dispatch, CreateTable
// and the public accessors. The operations live in dynamo_store_*.cpp.

#include "models/dynamo/store.hpp"

#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/dynamo/store_internal.hpp"

namespace leaseproof::models {

namespace {

using dynamo::DynamoError;
using dynamo::Result;

DynamoError invalid(std::string message) {
  return dynamo::validation_error("One or more parameter values were invalid: " + std::move(message));
}

std::vector<std::string> names_of(const dynamo::KeySchema& schema) {
  std::vector<std::string> names;
  for (const auto& element : schema) names.push_back(element.attribute_name);
  return names;
}

Result<void> check_billing(const dynamo::CreateTableRequest& request) {
  if (request.billing_mode == dynamo::BillingMode::pay_per_request) {
    if (request.provisioned_throughput) {
      return invalid("Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is "
                     "PAY_PER_REQUEST");
    }
    return {};
  }
  const auto& throughput = request.provisioned_throughput;
  if (!throughput || throughput->read_capacity_units < 1 || throughput->write_capacity_units < 1) {
    return invalid("ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED");
  }
  return {};
}

// Checks shared by the table's and each index's key schema.
Result<void> check_key_schema(const dynamo::KeySchema& schema, const std::vector<std::string>& defined) {
  if (schema.empty() || schema.size() > 2) {
    return dynamo::validation_error(
        "1 validation error detected: Value at 'keySchema' failed to satisfy constraint: Member must have length "
        "less than or equal to 2 and greater than or equal to 1");
  }
  const auto keys = names_of(schema);
  for (const auto& key : keys) {
    if (std::find(defined.begin(), defined.end(), key) == defined.end()) {
      return invalid(fmt::format("Some index key attributes are not defined in AttributeDefinitions. Keys: [{}], "
                                 "AttributeDefinitions: [{}]",
                                 fmt::join(keys, ", "), fmt::join(defined, ", ")));
    }
  }
  if (keys.size() == 2 && keys[0] == keys[1]) {
    return dynamo::validation_error("Both the Hash Key and the Range Key element in the KeySchema have the same name");
  }
  if (schema[0].key_type != dynamo::KeyType::hash) {
    return dynamo::validation_error("Invalid KeySchema: The first KeySchemaElement is not a HASH key type");
  }
  if (schema.size() == 2 && schema[1].key_type != dynamo::KeyType::range) {
    return dynamo::validation_error("Invalid KeySchema: The second KeySchemaElement is not a RANGE key type");
  }
  return {};
}

Result<void> check_indexes(const dynamo::CreateTableRequest& request, const std::vector<std::string>& defined) {
  const bool on_demand = request.billing_mode == dynamo::BillingMode::pay_per_request;
  std::set<std::string> seen;
  for (const auto& index : request.global_secondary_indexes) {
    LP_STORE_TRY_VOID(check_key_schema(index.key_schema, defined));
    const auto type = index.projection.projection_type;
    if (!index.projection.non_key_attributes.empty() && type != dynamo::ProjectionType::include) {
      return invalid(fmt::format("ProjectionType is {}, but NonKeyAttributes is specified",
                                 type == dynamo::ProjectionType::all ? "ALL" : "KEYS_ONLY"));
    }
    if (on_demand && index.provisioned_throughput) {
      return invalid(fmt::format("ProvisionedThroughput should not be specified for index: {} when BillingMode is "
                                 "PAY_PER_REQUEST",
                                 index.index_name));
    }
    // DynamoDB's rule (dynalite does not check it).
    if (!on_demand && !index.provisioned_throughput) {
      return invalid(fmt::format("ProvisionedThroughput must be specified for index: {}", index.index_name));
    }
    if (!seen.insert(index.index_name).second) {
      return invalid(fmt::format("Duplicate index name: {}", index.index_name));
    }
  }
  if (request.global_secondary_indexes.size() > 20) {
    return invalid("GlobalSecondaryIndex count exceeds the per-table limit of 20");
  }
  return {};
}

Result<void> check_create_table(const dynamo::CreateTableRequest& request) {
  LP_STORE_TRY_VOID(check_billing(request));
  std::vector<std::string> defined;
  for (const auto& definition : request.attribute_definitions) defined.push_back(definition.attribute_name);
  if (request.key_schema.size() > defined.size()) {
    return dynamo::validation_error("Invalid KeySchema: Some index key attribute have no definition");
  }
  LP_STORE_TRY_VOID(check_key_schema(request.key_schema, defined));
  if (request.global_secondary_indexes.empty() && request.key_schema.size() != defined.size()) {
    return invalid("Number of attributes in KeySchema does not exactly match number of attributes defined in "
                   "AttributeDefinitions");
  }
  return check_indexes(request, defined);
}

store_detail::KeyAttribute key_attribute(const dynamo::CreateTableRequest& request, const std::string& name) {
  for (const auto& definition : request.attribute_definitions) {
    if (definition.attribute_name == name) {
      return {name, store_detail::attribute_type_of(definition.attribute_type)};
    }
  }
  LP_UNREACHABLE("key attribute {} has no definition (validated before)", name);
}

store_detail::Throughput partition_throughput(const DynamoStoreOptions& options, Instant now) {
  return {store_detail::TokenBucket(options.partition_wcu_per_s, options.partition_wcu_per_s,
                                    options.partition_wcu_per_s, now),
          store_detail::TokenBucket(2 * options.partition_rcu_per_s, 2 * options.partition_rcu_per_s,
                                    2 * options.partition_rcu_per_s, now)};
}

// Provisioned capacity with burst: up to 300 s of unused capacity accumulates;
// a new table starts with one second's worth (assumed: the guide does not say
// how much burst a fresh table holds).
store_detail::Throughput provisioned_throughput(const dynamo::ProvisionedThroughput& throughput, Instant now) {
  const int64_t write = throughput.write_capacity_units;
  const int64_t read_half = 2 * throughput.read_capacity_units;
  return {store_detail::TokenBucket(write, write * store_detail::burst_seconds, write, now),
          store_detail::TokenBucket(read_half, read_half * store_detail::burst_seconds, read_half, now)};
}

dynamo::TableDescription describe_new_table(const dynamo::CreateTableRequest& request, Instant now) {
  // DynamoDB (and dynalite) answer CreateTable with status CREATING; the model
  // serves the table at once, as dynalite with --createTableMs 0 does.
  dynamo::TableDescription description;
  description.table_name = request.table_name;
  description.table_status = "CREATING";
  description.key_schema = request.key_schema;
  description.attribute_definitions = request.attribute_definitions;
  description.global_secondary_indexes = request.global_secondary_indexes;
  for (auto& index : description.global_secondary_indexes) {
    index.index_status = "CREATING";
    if (!index.provisioned_throughput) index.provisioned_throughput = dynamo::ProvisionedThroughput{};
  }
  if (request.billing_mode == dynamo::BillingMode::pay_per_request) {
    description.billing_mode = dynamo::BillingMode::pay_per_request;
  }
  description.provisioned_throughput = request.provisioned_throughput.value_or(dynamo::ProvisionedThroughput{});
  description.creation_date_time_ms = now.ms();
  return description;
}

}  // namespace

DynamoStoreOptions DynamoStoreOptions::faults_off() {
  DynamoStoreOptions options;
  options.gsi_lag = sim::LatencyDistribution{Duration::zero(), Duration::zero(), Ratio::zero(), Duration::zero()};
  options.eventual_read_window = Duration::zero();
  options.stale_read_chance = Ratio::zero();
  options.throttling = false;
  options.ttl_sweep_lag_min = Duration::zero();
  options.ttl_sweep_lag_max = Duration::zero();
  return options;
}

// The sub-seed's name is the store's file name before it moved to
// models/dynamo/: another name would draw other lags and change every run.
DynamoStore::State::State(DynamoStoreOptions options_, uint64_t seed)
    : options(std::move(options_)), prng(sim::derive_seed(seed, "models/dynamo_store")) {
  LP_ASSERT_GT(options.partitions_per_table, 0u);
  LP_ASSERT_GT(options.partition_wcu_per_s, 0);
  LP_ASSERT_GT(options.partition_rcu_per_s, 0);
  LP_ASSERT_LE(options.ttl_sweep_lag_min, options.ttl_sweep_lag_max);
  LP_ASSERT(options.stale_read_chance.is_probability());
  for (const auto& [table, attribute] : options.ttl_attribute) ttl_attributes[table] = attribute;
}

DynamoStore::State::TableState* DynamoStore::State::find_table(std::string_view name) {
  // Requests alternate between a fleet's two or three tables: the last one
  // found is asked first (map nodes stay put, and tables are never dropped).
  if (last_table != nullptr && lex_equal(last_table->name, name)) return last_table;
  const auto found = tables.find(name);
  if (found == tables.end()) return nullptr;
  last_table = &found->second;
  return last_table;
}

TableAccounting& DynamoStore::State::account(std::string_view table) {
  auto found = accounting.find(table);
  if (found == accounting.end()) found = accounting.emplace(std::string(table), TableAccounting{}).first;
  return found->second;
}

Result<dynamo::Response> DynamoStore::State::create_table(const dynamo::CreateTableRequest& request, Instant now) {
  LP_STORE_TRY_VOID(check_create_table(request));
  if (tables.contains(request.table_name)) {
    return DynamoError{std::string(dynamo::error_type::resource_in_use),
                       "Table already exists: " + request.table_name, std::nullopt, {}};
  }
  TableState table;
  table.name = request.table_name;
  table.description = describe_new_table(request, now);
  table.hash = key_attribute(request, request.key_schema[0].attribute_name);
  if (request.key_schema.size() == 2) table.range = key_attribute(request, request.key_schema[1].attribute_name);
  for (uint32_t i = 0; i < options.partitions_per_table; ++i) table.partitions.push_back(partition_throughput(options, now));
  if (request.provisioned_throughput) table.provisioned = provisioned_throughput(*request.provisioned_throughput, now);
  for (const auto& definition : request.global_secondary_indexes) {
    IndexState index;
    index.definition = definition;
    index.hash = key_attribute(request, definition.key_schema[0].attribute_name);
    if (definition.key_schema.size() == 2) index.range = key_attribute(request, definition.key_schema[1].attribute_name);
    for (uint32_t i = 0; i < options.partitions_per_table; ++i) index.partitions.push_back(partition_throughput(options, now));
    if (definition.provisioned_throughput) index.provisioned = provisioned_throughput(*definition.provisioned_throughput, now);
    if (definition.projection.projection_type != dynamo::ProjectionType::all) {
      index.projected = {table.hash.name, index.hash.name};
      if (table.range) index.projected.push_back(table.range->name);
      if (index.range) index.projected.push_back(index.range->name);
      if (definition.projection.projection_type == dynamo::ProjectionType::include) {
        const auto& included = definition.projection.non_key_attributes;
        index.projected.insert(index.projected.end(), included.begin(), included.end());
      }
      std::sort(index.projected.begin(), index.projected.end());
      index.projected.erase(std::unique(index.projected.begin(), index.projected.end()), index.projected.end());
      const auto position = [&index](const std::string& name) {
        return static_cast<std::size_t>(std::find(index.projected.begin(), index.projected.end(), name) -
                                        index.projected.begin());
      };
      index.hash_at = position(index.hash.name);
      if (index.range) index.range_at = position(index.range->name);
    }
    table.indexes.push_back(std::move(index));
  }
  dynamo::CreateTableResponse response{table.description};
  table.accounting = &account(table.name);  // map nodes stay put
  tables.emplace(request.table_name, std::move(table));
  return dynamo::Response{std::move(response)};
}

DynamoStore::DynamoStore(DynamoStoreOptions options, uint64_t seed)
    : state_(std::make_unique<State>(std::move(options), seed)) {}
DynamoStore::~DynamoStore() = default;
DynamoStore::DynamoStore(DynamoStore&&) noexcept = default;
DynamoStore& DynamoStore::operator=(DynamoStore&&) noexcept = default;

namespace {

// DynamoDB's TableName constraint: 3 to 255 characters of [a-zA-Z0-9_.-],
// checked before anything else and worded as a framework constraint
// violation, except a bad length in CreateTable (both as dynalite, whose
// wording follows DynamoDB's, answers them).
// [a-zA-Z0-9_.-], by byte: every request's table name is checked.
constexpr std::array<bool, 256> kTableNameBytes = [] {
  std::array<bool, 256> allowed{};
  for (int c = 0; c < 256; ++c) {
    allowed[static_cast<std::size_t>(c)] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  }
  return allowed;
}();

std::optional<dynamo::DynamoError> check_table_name(std::string_view name, bool create) {
  const bool allowed = std::all_of(name.begin(), name.end(),
                                   [](char c) { return kTableNameBytes[static_cast<uint8_t>(c)]; });
  const bool length_ok = name.size() >= 3 && name.size() <= 255;
  if (create && !length_ok) {
    return dynamo::validation_error("TableName must be at least 3 characters long and at most 255 characters long");
  }
  std::string constraint;
  if (name.size() < 3) constraint = "Member must have length greater than or equal to 3";
  else if (name.size() > 255) constraint = "Member must have length less than or equal to 255";
  else if (!allowed) constraint = "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+";
  else return std::nullopt;
  return dynamo::validation_error(fmt::format(
      "1 validation error detected: Value '{}' at 'tableName' failed to satisfy constraint: {}", name, constraint));
}

}  // namespace

dynamo::Result<dynamo::Response> DynamoStore::apply(const dynamo::Request& request, Instant now) {
  State& state = *state_;
  state.advance(now);
  auto result = std::visit(
      [&](const auto& typed) -> Result<dynamo::Response> {
        using T = std::decay_t<decltype(typed)>;
        if constexpr (requires { typed.table_name; }) {
          if (auto error = check_table_name(typed.table_name, std::is_same_v<T, dynamo::CreateTableRequest>)) {
            return *error;
          }
        }
        if constexpr (std::is_same_v<T, dynamo::GetItemRequest>) return state.get_item(typed, now);
        if constexpr (std::is_same_v<T, dynamo::PutItemRequest>) return state.put_item(typed, now);
        if constexpr (std::is_same_v<T, dynamo::UpdateItemRequest>) return state.update_item(typed, now);
        if constexpr (std::is_same_v<T, dynamo::DeleteItemRequest>) return state.delete_item(typed, now);
        if constexpr (std::is_same_v<T, dynamo::QueryRequest>) return state.query(typed, now);
        if constexpr (std::is_same_v<T, dynamo::BatchWriteItemRequest>) return state.batch_write_item(typed, now);
        if constexpr (std::is_same_v<T, dynamo::TransactWriteItemsRequest>) {
          return state.transact_write_items(typed, now);
        }
        if constexpr (std::is_same_v<T, dynamo::CreateTableRequest>) return state.create_table(typed, now);
      },
      request);
  // Changes due at once (zero lag, faults off) are visible to the next request.
  state.advance(now);
  return result;
}

Instant DynamoStore::advance(Instant now) { return state_->advance(now); }

void DynamoStore::set_ttl(std::string_view table, std::string attribute) {
  state_->ttl_attributes[std::string(table)] = std::move(attribute);
}

void DynamoStore::set_stream(std::string_view table, StreamListener listener) {
  state_->streams.insert_or_assign(std::string(table), std::move(listener));
}

void DynamoStore::track_update(std::string_view table, std::string expression) {
  state_->account(table).tracked_update = std::move(expression);
}

const TableAccounting& DynamoStore::accounting(std::string_view table) const {
  static const TableAccounting empty;
  const auto found = state_->accounting.find(table);
  return found == state_->accounting.end() ? empty : found->second;
}

const std::map<std::string, TableAccounting, std::less<>>& DynamoStore::all_accounting() const {
  return state_->accounting;
}

uint64_t DynamoStore::idempotent_replays() const { return state_->idempotent_replays; }

std::optional<dynamo::Item> DynamoStore::peek(std::string_view table, const dynamo::Item& key) const {
  State::TableState* found = state_->find_table(table);
  if (found == nullptr) return std::nullopt;
  auto table_key = state_->key_of_key(*found, key);
  if (!table_key) return std::nullopt;
  const dynamo::Item* item = state_->latest(*found, *table_key);
  if (item == nullptr) return std::nullopt;
  return *item;
}

const dynamo::AttributeValue* DynamoStore::peek_attribute(std::string_view table, const dynamo::Item& key,
                                                          std::string_view attribute) const {
  State::TableState* found = state_->find_table(table);
  if (found == nullptr) return nullptr;
  auto table_key = state_->key_of_key(*found, key);
  if (!table_key) return nullptr;
  const dynamo::Item* item = state_->latest(*found, *table_key);
  if (item == nullptr) return nullptr;
  const auto value = item->find(attribute);
  return value == item->end() ? nullptr : &value->second;
}

std::size_t DynamoStore::item_count(std::string_view table) const {
  const auto found = state_->tables.find(table);
  return found == state_->tables.end() ? 0 : found->second.live_items;
}

std::size_t DynamoStore::pending_index_changes() const { return state_->gsi_changes.size(); }

const DynamoStoreOptions& DynamoStore::options() const { return state_->options; }

void DynamoStore::set_throttling(bool throttling) { state_->options.throttling = throttling; }

}  // namespace leaseproof::models
