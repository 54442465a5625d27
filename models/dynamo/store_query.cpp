// Query of the simulated DynamoDB store, on the table or on a GSI. Limit
// counts the items evaluated before the filter, a page stops at 1 MB read,
// and LastEvaluatedKey is returned whenever a page stopped on either limit
// (even when nothing follows, as DynamoDB and dynalite do). A table query sees
// the latest items (strong) or possibly the version before a recent write
// (eventual); a GSI query sees what has propagated to the index so far.

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/dynamo/decimal.hpp"

#include "models/dynamo/store_internal.hpp"

namespace leaseproof::models {

namespace {

using dynamo::Condition;
using dynamo::ExpressionKind;
using dynamo::KeyCondition;
using store_detail::IndexEntryKey;
using store_detail::IndexState;
using store_detail::KeyAttribute;
using store_detail::TableKey;
using store_detail::TableState;

struct QueryPlan {
  KeyCondition key_condition;
  std::optional<Condition> filter;
  std::optional<dynamo::ProjectionPlan> projection;
  KeyAttribute hash;
  std::optional<KeyAttribute> range;
  std::vector<std::string> start_key_names;  // table key, then index key attributes
};

void collect_heads(const Condition& condition, std::set<std::string>& heads) {
  for (const auto& operand : condition.operands) {
    if (operand.kind != dynamo::Operand::Kind::value && !operand.path.empty()) heads.insert(operand.path[0].name);
  }
  for (const auto& child : condition.children) collect_heads(child, heads);
}

DynamoError invalid_start_key() { return dynamo::validation_error("The provided starting key is invalid"); }

Result<void> check_query_shape(const dynamo::QueryRequest& request, const QueryPlan& plan, const IndexState* index) {
  const auto& key_condition = plan.key_condition;
  const bool sort_types_match =
      !key_condition.sort || (plan.range && key_condition.sort->value.type() == plan.range->type &&
                              (!key_condition.sort->upper || key_condition.sort->upper->type() == plan.range->type));
  if (key_condition.partition_value.type() != plan.hash.type || !sort_types_match) {
    return dynamo::validation_error(
        "One or more parameter values were invalid: Condition parameter type does not match schema type");
  }
  if (plan.filter) {
    std::set<std::string> heads;
    collect_heads(*plan.filter, heads);
    for (const auto* key : {&plan.hash, plan.range ? &*plan.range : nullptr}) {
      if (key != nullptr && heads.contains(key->name)) {
        return dynamo::validation_error(fmt::format(
            "Filter Expression can only contain non-primary key attributes: Primary key attribute: {}", key->name));
      }
    }
  }
  if (index != nullptr && request.select == dynamo::Select::all_attributes &&
      index->definition.projection.projection_type != dynamo::ProjectionType::all) {
    return dynamo::validation_error(fmt::format(
        "One or more parameter values were invalid: Select type ALL_ATTRIBUTES is not supported for global "
        "secondary index {} because its projection type is not ALL",
        index->definition.index_name));
  }
  return {};
}

// ExclusiveStartKey checks, in dynalite's order and wording.
Result<void> check_start_key(const Item& start, const QueryPlan& plan, const TableState& table) {
  if (start.size() != plan.start_key_names.size()) return invalid_start_key();
  for (const auto* key : {&plan.hash, plan.range ? &*plan.range : nullptr}) {
    if (key == nullptr) continue;
    const auto found = start.find(key->name);
    if (found == start.end()) return invalid_start_key();
    if (found->second.type() != key->type) {
      return dynamo::validation_error("The provided key element does not match the schema");
    }
  }
  for (const auto* key : {&table.hash, table.range ? &*table.range : nullptr}) {
    if (key == nullptr) continue;
    const auto found = start.find(key->name);
    if (found == start.end() || found->second.type() != key->type) {
      return dynamo::validation_error(
          "The provided starting key is invalid: The provided key element does not match the schema");
    }
  }
  const bool same_hash = store_detail::compare_keys(start.at(plan.hash.name), plan.key_condition.partition_value) == 0;
  if (!plan.range || !plan.key_condition.sort) {
    if (!same_hash) {
      return dynamo::validation_error(
          "The provided starting key is outside query boundaries based on provided conditions");
    }
    return {};
  }
  if (!dynamo::evaluate(*plan.key_condition.sort, start.at(plan.range->name))) {
    return dynamo::validation_error("The provided starting key does not match the range key predicate");
  }
  if (!same_hash) {
    return dynamo::validation_error("The query can return at most one row and cannot be restarted");
  }
  return {};
}

// Accumulates one page in scan order.
class PageBuilder {
 public:
  PageBuilder(const dynamo::QueryRequest& request, const QueryPlan& plan) : request_(request), plan_(plan) {}

  // False once the page is full: the caller stops scanning.
  // An item of the table, or an index entry made for this visit (moved into
  // the page instead of copied).
  template <typename ItemRef>
  bool visit(ItemRef&& item) {
    if (full()) return false;
    if (plan_.key_condition.sort) {
      const auto sort_value = item.find(plan_.key_condition.sort->attribute_name);
      if (sort_value == item.end() || !dynamo::evaluate(*plan_.key_condition.sort, sort_value->second)) return true;
    }
    ++scanned_;
    bytes_ += dynamo::item_size_bytes(item);
    any_scanned_ = true;
    // The page's LastEvaluatedKey is the key of the item that fills it (no
    // item is visited after that one): picked only then.
    if (full()) last_key_ = store_detail::pick(item, plan_.start_key_names);
    if (plan_.filter && !dynamo::evaluate(*plan_.filter, item)) return true;
    if (plan_.projection) {
      results_.push_back(dynamo::project(*plan_.projection, item));
    } else {
      results_.push_back(std::forward<ItemRef>(item));
    }
    return true;
  }

  std::size_t bytes() const { return bytes_; }
  // Whether the page holds its Limit of items or its 1 MB.
  bool full() const {
    return (request_.limit && scanned_ >= *request_.limit) || bytes_ >= store_detail::query_page_bytes_max;
  }

  dynamo::QueryResponse finish() {
    dynamo::QueryResponse response;
    response.scanned_count = scanned_;
    response.count = static_cast<int64_t>(results_.size());
    if (full() && any_scanned_) {
      response.last_evaluated_key = std::move(last_key_);
    }
    if (request_.select != dynamo::Select::count) response.items = std::move(results_);
    return response;
  }

 private:
  const dynamo::QueryRequest& request_;
  const QueryPlan& plan_;
  int64_t scanned_ = 0;
  std::size_t bytes_ = 0;
  bool any_scanned_ = false;
  Item last_key_;
  std::vector<Item> results_;
};

// Visits a sorted map's values after `start` (if any) in the scan direction.
template <typename Map, typename Visit>
void scan_ordered(const Map& map, const std::optional<typename Map::key_type>& start, bool forward, Visit&& visit) {
  if (forward) {
    auto it = start ? map.upper_bound(*start) : map.begin();
    for (; it != map.end(); ++it) {
      if (!visit(it->second)) return;
    }
    return;
  }
  auto it = start ? map.lower_bound(*start) : map.end();
  while (it != map.begin()) {
    --it;
    if (!visit(it->second)) return;
  }
}

}  // namespace

Result<dynamo::Response> DynamoStore::State::query(const dynamo::QueryRequest& request, Instant now) {
  const bool has_key = request.key_condition_expression.has_value();
  const bool has_filter = request.filter_expression.has_value();
  LP_STORE_TRY_VOID(store_detail::check_expression_params(
      request.expression_attribute_names, request.expression_attribute_values,
      has_key || has_filter || request.projection_expression.has_value(), has_key || has_filter,
      "FilterExpression and KeyConditionExpression are null"));
  if (!has_key) {
    return dynamo::validation_error(
        "Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.");
  }
  auto context = dynamo::ExpressionContext::borrowing(request.expression_attribute_names,
                                                     request.expression_attribute_values, &expression_cache);
  LP_STORE_TRY_VOID(context.check_keys());
  TableState* table = find_table(request.table_name);
  const IndexState* index = table != nullptr && request.index_name ? table->find_index(*request.index_name) : nullptr;
  const bool schema_known = table != nullptr && (!request.index_name || index != nullptr);
  QueryPlan plan;
  if (schema_known) {
    const dynamo::KeySchema schema = index ? index->definition.key_schema : table->key_schema();
    LP_STORE_TRY(parsed, context.parse_key_condition(*request.key_condition_expression, schema));
    plan.key_condition = dynamo::KeyCondition{parsed.partition_key_name,
                                              dynamo::with_canonical_numbers(parsed.partition_value), parsed.sort};
  }
  if (has_filter) {
    LP_STORE_TRY(parsed, context.parse_condition(*request.filter_expression, ExpressionKind::filter));
    plan.filter = std::move(parsed);
  }
  if (request.projection_expression) {
    LP_STORE_TRY(parsed, context.parse_projection(*request.projection_expression));
    plan.projection = std::move(parsed);
  }
  // Known divergence: DynamoDB checks the key condition's syntax before it
  // looks the table up; the parser needs the key schema, so for an unknown
  // table or index the key condition (and so the unused-placeholder check) is
  // skipped and the lookup error wins.
  if (schema_known) LP_STORE_TRY_VOID(context.check_all_used());
  if (table == nullptr) return store_detail::resource_not_found();
  if (index == nullptr && request.index_name) {
    return dynamo::validation_error("The table does not have the specified index: " + *request.index_name);
  }
  if (index != nullptr && request.consistent_read) {
    return dynamo::validation_error("Consistent reads are not supported on global secondary indexes");
  }
  plan.hash = index ? index->hash : table->hash;
  plan.range = index ? index->range : table->range;
  plan.start_key_names = {table->hash.name};
  if (table->range) plan.start_key_names.push_back(table->range->name);
  for (const auto* key : {&plan.hash, plan.range ? &*plan.range : nullptr}) {
    if (key != nullptr && std::find(plan.start_key_names.begin(), plan.start_key_names.end(), key->name) ==
                              plan.start_key_names.end()) {
      plan.start_key_names.push_back(key->name);
    }
  }
  LP_STORE_TRY_VOID(check_query_shape(request, plan, index));
  std::optional<Item> start;
  if (request.exclusive_start_key) {
    start = dynamo::with_canonical_numbers(*request.exclusive_start_key);
    LP_STORE_TRY_VOID(check_start_key(*start, plan, *table));
  }
  ++account(*table).query;
  const uint32_t partition = store_detail::partition_of(plan.key_condition.partition_value, options.partitions_per_table);
  if (auto throttled = check_read_capacity(*table, index, partition, now)) {
    ++account(*table).throttled_requests;
    return std::move(*throttled);
  }
  PageBuilder page(request, plan);
  const bool forward = request.scan_index_forward;
  if (index == nullptr) {
    const bool stale = draw_stale_replica(request.consistent_read);
    const auto found = table->items.find(plan.key_condition.partition_value);
    if (found != table->items.end()) {
      std::optional<AttributeValue> start_range;
      if (start) start_range = table->range ? start->at(table->range->name) : AttributeValue{};
      scan_ordered(found->second, start_range, forward, [&](const store_detail::ItemRecord& record) {
        const Item* item = request.consistent_read ? record.current.get()
                                                   : eventual(*table, record, stale, now).get();
        return item == nullptr || page.visit(*item);
      });
    }
  } else {
    const auto found = index->entries.find(plan.key_condition.partition_value);
    if (found != index->entries.end()) {
      std::optional<IndexEntryKey> start_entry;
      if (start) {
        start_entry = IndexEntryKey{index->range ? start->at(index->range->name) : AttributeValue{},
                                    TableKey{start->at(table->hash.name),
                                             table->range ? start->at(table->range->name) : AttributeValue{}}};
      }
      scan_ordered(found->second, start_entry, forward, [&](const std::shared_ptr<const Item>& version) {
        if (index->projected.empty()) return page.visit(*version);  // ALL: the entry is the item
        return page.visit(store_detail::pick_sorted(*version, index->projected));
      });
    }
  }
  // The whole page's bytes, rounded up to 4 KB (at least one unit); eventual
  // reads, and so every GSI read, cost half.
  const int64_t units = dynamo::read_capacity_units(page.bytes());
  const int64_t half_units = request.consistent_read ? 2 * units : units;
  charge_read(*table, index, partition, half_units);
  dynamo::QueryResponse response = page.finish();
  response.consumed_capacity =
      store_detail::read_consumed(request.return_consumed_capacity, table->name, index, half_units);
  return dynamo::Response{std::move(response)};
}

}  // namespace leaseproof::models
