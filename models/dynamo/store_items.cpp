// Single-item operations of the simulated DynamoDB store: GetItem, PutItem,
// UpdateItem, DeleteItem. Validation runs in DynamoDB's order (request
// parameters and expressions, then the table, then the key schema), and every
// write decides against the latest version of its item, atomically.

#include <fmt/format.h>

#include "core/dynamo/decimal.hpp"

#include "models/dynamo/store_internal.hpp"

namespace leaseproof::models {

namespace store_detail {

Result<void> check_expression_params(const dynamo::ExpressionAttributeNames& names,
                                     const dynamo::ExpressionAttributeValues& values, bool any_expression,
                                     bool any_value_expression, std::string_view value_expressions_null) {
  if (!names.empty() && !any_expression) {
    return dynamo::validation_error("ExpressionAttributeNames can only be specified when using expressions");
  }
  if (!values.empty() && !any_value_expression) {
    return dynamo::validation_error(
        fmt::format("ExpressionAttributeValues can only be specified when using expressions: {}",
                    value_expressions_null));
  }
  return {};
}

}  // namespace store_detail

namespace {

using dynamo::Condition;
using dynamo::ExpressionContext;
using dynamo::ReturnValues;
using store_detail::TableKey;
using store_detail::WriteCost;

// What PutItem and DeleteItem check alike before touching any table: the
// expression parameters and a ReturnValues they support.
Result<void> check_put_or_delete(const dynamo::ConditionalWrite& write) {
  const bool has_condition = write.condition_expression.has_value();
  LP_STORE_TRY_VOID(store_detail::check_expression_params(write.expression_attribute_names,
                                                          write.expression_attribute_values, has_condition,
                                                          has_condition, "ConditionExpression is null"));
  if (write.return_values != ReturnValues::none && write.return_values != ReturnValues::all_old) {
    return dynamo::validation_error("ReturnValues can only be ALL_OLD or NONE");
  }
  return Result<void>{};
}

// Parses the optional condition of a single-item write in its own context, so
// the unused-placeholder check sees the whole request.
Result<std::optional<dynamo::BoundCondition>> parse_write_condition(const dynamo::ConditionalWrite& write,
                                                                    dynamo::ExpressionCache& cache) {
  LP_STORE_TRY(prepared, dynamo::prepare_write(std::nullopt, write.condition_expression,
                                               write.expression_attribute_names, write.expression_attribute_values,
                                               &cache));
  return std::move(prepared.condition);
}

std::optional<Item> copy_of(const Item* item) {
  if (item == nullptr) return std::nullopt;
  return *item;
}

}  // namespace

Result<void> DynamoStore::State::check_condition(TableState& table, const TableKey& key,
                                                 const Item* old_item,
                                                 const std::optional<dynamo::BoundCondition>& condition,
                                                 dynamo::ReturnValuesOnConditionCheckFailure on_failure, Instant now) {
  if (!condition) return {};
  static const Item no_item;
  if (dynamo::evaluate(*condition, old_item != nullptr ? *old_item : no_item)) return {};
  const WriteCost cost = failed_write_cost(table, key, old_item, 1);
  if (auto throttled = check_write_capacity(table, cost, now)) {
    ++account(table).throttled_requests;
    return std::move(*throttled);
  }
  charge_write(table, cost);
  ++account(table).conditional_check_failures;
  const bool return_old = on_failure == dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  return dynamo::conditional_check_failed(return_old ? copy_of(old_item) : std::nullopt);
}

Result<WriteCost> DynamoStore::State::commit_single(TableState& table, const TableKey& key,
                                                    const Item* old_item, std::optional<Item> new_item,
                                                    Instant now, store_detail::ItemRecord* record,
                                                    const dynamo::BoundUpdatePlan* changed_by) {
  const WriteCost cost = write_cost(table, key, old_item, new_item ? &*new_item : nullptr, 1, changed_by);
  if (auto throttled = check_write_capacity(table, cost, now)) {
    ++account(table).throttled_requests;
    return std::move(*throttled);
  }
  charge_write(table, cost);
  // Deleting an item that does not exist still costs 1 WCU, and changes nothing.
  if (old_item != nullptr || new_item) commit_write(table, key, std::move(new_item), now, &cost, record);
  return cost;
}

Result<dynamo::Response> DynamoStore::State::get_item(const dynamo::GetItemRequest& request, Instant now) {
  const bool has_projection = request.projection_expression.has_value();
  LP_STORE_TRY_VOID(store_detail::check_expression_params(request.expression_attribute_names, {}, has_projection,
                                                          false, ""));
  ExpressionContext context(request.expression_attribute_names, {});
  LP_STORE_TRY_VOID(context.check_keys());
  std::optional<dynamo::ProjectionPlan> projection;
  if (has_projection) {
    LP_STORE_TRY(parsed, context.parse_projection(*request.projection_expression));
    projection = std::move(parsed);
  }
  LP_STORE_TRY_VOID(context.check_all_used());
  TableState* table = find_table(request.table_name);
  if (table == nullptr) return store_detail::resource_not_found();
  LP_STORE_TRY(key, key_of_key(*table, request.key));
  ++account(*table).get_item;
  const uint32_t partition = store_detail::partition_of(key.hash, options.partitions_per_table);
  if (auto throttled = check_read_capacity(*table, nullptr, partition, now)) {
    ++account(*table).throttled_requests;
    return std::move(*throttled);
  }
  const store_detail::ItemRecord* record = find_record(*table, key);
  static const std::shared_ptr<const Item> none;
  const std::shared_ptr<const Item>& item =
      record == nullptr         ? none
      : request.consistent_read ? record->current
                                : eventual(*table, *record, draw_stale_replica(false), now);
  // A missing item still costs the minimum (1 RCU strong, 0.5 eventual).
  const int64_t units = dynamo::read_capacity_units(item ? dynamo::item_size_bytes(*item) : 0);
  const int64_t half_units = request.consistent_read ? 2 * units : units;
  charge_read(*table, nullptr, partition, half_units);
  dynamo::GetItemResponse response;
  // The version itself, shared: versions are immutable.
  if (item) response.item = projection ? std::make_shared<const Item>(dynamo::project(*projection, *item)) : item;
  response.consumed_capacity =
      store_detail::read_consumed(request.return_consumed_capacity, table->name, nullptr, half_units);
  return dynamo::Response{std::move(response)};
}

Result<dynamo::Response> DynamoStore::State::put_item(const dynamo::PutItemRequest& request, Instant now) {
  const dynamo::ConditionalWrite& write = request.write;
  LP_STORE_TRY_VOID(check_put_or_delete(write));
  if (dynamo::item_size_bytes(request.item) > dynamo::item_size_bytes_max) {
    return dynamo::validation_error("Item size has exceeded the maximum allowed size");
  }
  LP_STORE_TRY(condition, parse_write_condition(write, expression_cache));
  TableState* table = find_table(request.table_name);
  if (table == nullptr) return store_detail::resource_not_found();
  Item item = dynamo::with_canonical_numbers(request.item);
  LP_STORE_TRY(key, key_of_item(*table, item));
  ++account(*table).put_item;
  store_detail::ItemRecord* record = find_record(*table, key);
  const Item* old_item = record != nullptr ? record->current.get() : nullptr;
  LP_STORE_TRY_VOID(check_condition(*table, key, old_item, condition,
                                    write.return_values_on_condition_check_failure, now));
  dynamo::PutItemResponse response;
  if (write.return_values == ReturnValues::all_old) response.attributes = copy_of(old_item);
  LP_STORE_TRY(cost, commit_single(*table, key, old_item, std::move(item), now, record));
  response.consumed_capacity = write_consumed(write.return_consumed_capacity, *table, cost);
  return dynamo::Response{std::move(response)};
}

Result<dynamo::Response> DynamoStore::State::delete_item(const dynamo::DeleteItemRequest& request, Instant now) {
  const dynamo::ConditionalWrite& write = request.write;
  LP_STORE_TRY_VOID(check_put_or_delete(write));
  LP_STORE_TRY(condition, parse_write_condition(write, expression_cache));
  TableState* table = find_table(request.table_name);
  if (table == nullptr) return store_detail::resource_not_found();
  LP_STORE_TRY(key, key_of_key(*table, request.key));
  ++account(*table).delete_item;
  store_detail::ItemRecord* record = find_record(*table, key);
  const Item* old_item = record != nullptr ? record->current.get() : nullptr;
  LP_STORE_TRY_VOID(check_condition(*table, key, old_item, condition,
                                    write.return_values_on_condition_check_failure, now));
  dynamo::DeleteItemResponse response;
  if (write.return_values == ReturnValues::all_old) response.attributes = copy_of(old_item);
  LP_STORE_TRY(cost, commit_single(*table, key, old_item, std::nullopt, now, record));
  response.consumed_capacity = write_consumed(write.return_consumed_capacity, *table, cost);
  return dynamo::Response{std::move(response)};
}

}  // namespace leaseproof::models
