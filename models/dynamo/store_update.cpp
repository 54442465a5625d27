// UpdateItem of the simulated DynamoDB store, and the update helpers that
// TransactWriteItems shares with it.

#include <algorithm>

#include <fmt/format.h>

#include "core/dynamo/decimal.hpp"

#include "models/dynamo/store_internal.hpp"

namespace leaseproof::models {

namespace store_detail {

namespace {

std::optional<DynamoError> check_literal_index_key(const IndexState& index, const KeyAttribute& key,
                                                   const dynamo::UpdateAction& action,
                                                   const dynamo::ExpressionAttributeValues* values) {
  if (action.kind != dynamo::UpdateAction::Kind::set || action.path.size() != 1) return std::nullopt;
  if (action.path[0].name != key.name || action.value.kind != dynamo::UpdateValue::Kind::value) return std::nullopt;
  const dynamo::AttributeType type = dynamo::operand_value(action.value, values).type();
  if (type == key.type) return std::nullopt;
  return dynamo::validation_error(fmt::format(
      "One or more parameter values were invalid: Type mismatch for Index Key {} Expected: {} Actual: {} "
      "IndexName: {}",
      key.name, dynamo::type_descriptor(key.type), dynamo::type_descriptor(type),
      index.definition.index_name));
}

std::optional<DynamoError> check_index_key_value(const IndexState& index, const KeyAttribute& key, const Item& item) {
  const auto found = item.find(key.name);
  if (found == item.end()) return std::nullopt;
  if (found->second.type() != key.type) {
    return dynamo::validation_error(
        "The update expression attempted to update the secondary index key to unsupported type");
  }
  const bool empty_text = (key.type == dynamo::AttributeType::s || key.type == dynamo::AttributeType::b) &&
                          found->second.text().empty();
  if (empty_text) {
    return dynamo::validation_error(fmt::format(
        "One or more parameter values are not valid. A value specified for a secondary index key is not "
        "supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: {}, "
        "IndexKey: {}",
        index.definition.index_name, key.name));
  }
  return std::nullopt;
}

}  // namespace

Result<void> check_update_plan(const TableState& table, const dynamo::BoundUpdatePlan& plan) {
  LP_STORE_TRY_VOID(dynamo::check_key_attributes(*plan.plan, table.description.key_schema));
  for (const auto& index : table.indexes) {
    for (const auto& action : plan.plan->actions) {
      if (auto problem = check_literal_index_key(index, index.hash, action, plan.values)) return std::move(*problem);
      if (index.range) {
        if (auto problem = check_literal_index_key(index, *index.range, action, plan.values)) {
          return std::move(*problem);
        }
      }
    }
  }
  return {};
}

Result<Item> updated_item(const TableState& table, const Item& key_item, const Item* old_item,
                          const std::optional<dynamo::BoundUpdatePlan>& plan) {
  const Item& base = old_item != nullptr ? *old_item : key_item;
  Item next;
  if (plan) {
    LP_STORE_TRY(updated, dynamo::applied(*plan, table.description.key_schema, base));
    next = std::move(updated);
  } else {
    next = base;
  }
  if (plan && old_item != nullptr) {
    // Every stored version is canonical (each write path makes it so): only
    // what the plan wrote can hold a number in another form.
    for (const auto& action : plan->plan->actions) {
      if (action.kind != dynamo::UpdateAction::Kind::remove) dynamo::canonicalize_member(next, action.path[0].name);
    }
    LP_ASSERT_MSG(!kDebugChecks || dynamo::with_canonical_numbers(*old_item) == *old_item,
                  "a stored item with a number not canonical");
    LP_ASSERT_MSG(!kDebugChecks || dynamo::with_canonical_numbers(next) == next,
                  "an updated item with a number not canonical");
  } else {
    dynamo::canonicalize_numbers(next);
  }
  // A stored version's index keys passed these checks when it was written
  // (by a put, or by an update through here): only the keys the plan wrote
  // can fail them now.
  const auto written = [&](const std::string& name) {
    if (!plan || old_item == nullptr) return true;
    return std::any_of(plan->plan->actions.begin(), plan->plan->actions.end(),
                       [&name](const dynamo::UpdateAction& action) { return action.path[0].name == name; });
  };
  auto check = [&](const IndexState& index, const KeyAttribute& key) -> std::optional<DynamoError> {
    if (written(key.name)) return check_index_key_value(index, key, next);
    LP_ASSERT_MSG(!kDebugChecks || !check_index_key_value(index, key, next), "stored index key {} fails its check",
                  key.name);
    return std::nullopt;
  };
  for (const auto& index : table.indexes) {
    if (auto problem = check(index, index.hash)) return std::move(*problem);
    if (index.range) {
      if (auto problem = check(index, *index.range)) return std::move(*problem);
    }
  }
  return next;
}

}  // namespace store_detail

namespace {

using dynamo::ReturnValues;

Item key_item_of(const store_detail::TableState& table, const store_detail::TableKey& key) {
  Item item{{table.hash.name, key.hash}};
  if (table.range) item.emplace(table.range->name, key.range);
  return item;
}

std::optional<Item> update_return_values(ReturnValues mode, const std::optional<dynamo::BoundUpdatePlan>& plan,
                                         const Item* old_item, const Item& new_item) {
  static const dynamo::UpdatePlan no_plan;
  const dynamo::UpdatePlan& actions = plan ? *plan->plan : no_plan;
  Item out;
  switch (mode) {
    case ReturnValues::none: return std::nullopt;
    case ReturnValues::all_old: return old_item != nullptr ? std::optional<Item>(*old_item) : std::nullopt;
    case ReturnValues::all_new: return new_item;
    case ReturnValues::updated_old:
      if (old_item != nullptr) out = dynamo::updated_attributes(actions, *old_item);
      break;
    case ReturnValues::updated_new: out = dynamo::updated_attributes(actions, new_item); break;
  }
  // Assumed: DynamoDB omits Attributes rather than sending an empty map.
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace

Result<dynamo::Response> DynamoStore::State::update_item(const dynamo::UpdateItemRequest& request, Instant now) {
  const dynamo::ConditionalWrite& write = request.write;
  const bool any = request.update_expression.has_value() || write.condition_expression.has_value();
  LP_STORE_TRY_VOID(store_detail::check_expression_params(write.expression_attribute_names,
                                                          write.expression_attribute_values, any, any,
                                                          "UpdateExpression and ConditionExpression are null"));
  LP_STORE_TRY(prepared, dynamo::prepare_write(request.update_expression, write.condition_expression,
                                               write.expression_attribute_names, write.expression_attribute_values,
                                               &expression_cache));
  const std::optional<dynamo::BoundUpdatePlan>& plan = prepared.update;
  const std::optional<dynamo::BoundCondition>& condition = prepared.condition;
  TableState* table = find_table(request.table_name);
  if (table == nullptr) return store_detail::resource_not_found();
  LP_STORE_TRY(key, key_of_key(*table, request.key));
  if (plan) LP_STORE_TRY_VOID(store_detail::check_update_plan(*table, *plan));
  TableAccounting& counters = account(*table);
  ++counters.update_item;
  // What this call is charged, on every path (a failed condition costs too).
  struct TrackedUnits {
    TableAccounting* counters = nullptr;
    int64_t before = 0;
    ~TrackedUnits() {
      if (counters != nullptr) counters->tracked_update_write_units += counters->table.write_units - before;
    }
  } tracked;
  if (!counters.tracked_update.empty() && request.update_expression == counters.tracked_update) {
    tracked.counters = &counters;
    tracked.before = counters.table.write_units;
  }
  store_detail::ItemRecord* record = find_record(*table, key);
  const Item* old_item = record != nullptr ? record->current.get() : nullptr;
  LP_STORE_TRY_VOID(check_condition(*table, key, old_item, condition,
                                    write.return_values_on_condition_check_failure, now));
  // An update of a missing item creates it (upsert) from its key.
  std::optional<Item> key_item;
  if (old_item == nullptr) key_item = key_item_of(*table, key);
  LP_STORE_TRY(next, store_detail::updated_item(*table, old_item != nullptr ? *old_item : *key_item, old_item, plan));
  dynamo::UpdateItemResponse response;
  response.attributes = update_return_values(write.return_values, plan, old_item, next);
  const dynamo::BoundUpdatePlan* changed_by = plan && old_item != nullptr ? &*plan : nullptr;
  LP_STORE_TRY(cost, commit_single(*table, key, old_item, std::move(next), now, record, changed_by));
  response.consumed_capacity = write_consumed(write.return_consumed_capacity, *table, cost);
  return dynamo::Response{std::move(response)};
}

}  // namespace leaseproof::models
