// Multi-item writes of the simulated DynamoDB store: BatchWriteItem (each item
// on its own, unprocessed under throttling) and TransactWriteItems (all or
// nothing, idempotent by ClientRequestToken for 10 minutes, double cost).

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "base/bytes.hpp"
#include "core/dynamo/decimal.hpp"

#include "models/dynamo/store_internal.hpp"

namespace leaseproof::models {

namespace {

using dynamo::CancellationReason;
using dynamo::Condition;
using store_detail::TableKey;
using store_detail::TableKeyLess;
using store_detail::TableState;
using store_detail::WriteCost;

constexpr int64_t transaction_cost_multiplier = 2;

std::optional<Item> copy_of(const Item* item) {
  if (item == nullptr) return std::nullopt;
  return *item;
}

struct BatchWrite {
  TableState* table = nullptr;
  TableKey key;
  std::optional<Item> item;  // nullopt: delete
  const dynamo::WriteRequest* request = nullptr;
};

Result<void> check_batch_shape(const dynamo::BatchWriteItemRequest& request) {
  // One table's list over the limit fails the request's shape validation (as
  // DynamoDB words it; the model leaves the value out of the message), the
  // total over several tables the batch limit.
  for (const auto& [table, writes] : request.request_items) {
    if (writes.size() > store_detail::batch_write_items_max || writes.empty()) {
      return dynamo::validation_error(
          "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy "
          "constraint: [Member must have length less than or equal to 25, Member must have length greater than or "
          "equal to 1]");
    }
  }
  std::size_t total = 0;
  for (const auto& [table, writes] : request.request_items) total += writes.size();
  if (total > store_detail::batch_write_items_max) {
    return dynamo::validation_error("Too many items requested for the BatchWriteItem call");
  }
  for (const auto& [table, writes] : request.request_items) {
    for (const auto& write : writes) {
      const auto* put = std::get_if<dynamo::PutRequest>(&write);
      if (put != nullptr && dynamo::item_size_bytes(put->item) > dynamo::item_size_bytes_max) {
        return dynamo::validation_error("Item size has exceeded the maximum allowed size");
      }
    }
  }
  return {};
}

// BatchWriteItem reports an item's bad key with the key-schema message.
DynamoError batch_key_error(DynamoError error) {
  if (error.message.find("Missing the key") != std::string::npos ||
      error.message.find("Type mismatch for key") != std::string::npos) {
    error.message = "The provided key element does not match the schema";
  }
  return error;
}

}  // namespace

Result<dynamo::Response> DynamoStore::State::batch_write_item(const dynamo::BatchWriteItemRequest& request,
                                                              Instant now) {
  LP_STORE_TRY_VOID(check_batch_shape(request));
  std::vector<BatchWrite> writes;
  for (const auto& [table_name, requests] : request.request_items) {
    TableState* table = find_table(table_name);
    if (table == nullptr) return store_detail::resource_not_found();
    std::set<TableKey, TableKeyLess> seen;
    for (const auto& write : requests) {
      BatchWrite prepared{table, {}, std::nullopt, &write};
      if (const auto* put = std::get_if<dynamo::PutRequest>(&write)) {
        prepared.item = dynamo::with_canonical_numbers(put->item);
        auto key = key_of_item(*table, *prepared.item);
        if (!key) return batch_key_error(std::move(key).error());
        prepared.key = std::move(key).value();
      } else {
        LP_STORE_TRY(key, key_of_key(*table, std::get<dynamo::DeleteRequest>(write).key));
        prepared.key = std::move(key);
      }
      if (!seen.insert(prepared.key).second) {
        return dynamo::validation_error("Provided list of item keys contains duplicates");
      }
      writes.push_back(std::move(prepared));
    }
    ++account(table_name).batch_write_item;
  }
  dynamo::BatchWriteItemResponse response;
  std::map<std::string, WriteCost> consumed;  // per table: base and index units summed
  std::size_t processed = 0;
  std::optional<DynamoError> last_throttle;
  for (auto& write : writes) {
    const Item* old_item = latest(*write.table, write.key);
    const WriteCost cost = write_cost(*write.table, write.key, old_item, write.item ? &*write.item : nullptr, 1);
    if (auto throttled = check_write_capacity(*write.table, cost, now)) {
      ++account(*write.table).throttled_requests;
      response.unprocessed_items[write.table->name].push_back(*write.request);
      last_throttle = std::move(throttled);
      continue;
    }
    charge_write(*write.table, cost);
    if (old_item != nullptr || write.item) commit_write(*write.table, write.key, std::move(write.item), now, &cost);
    ++processed;
    WriteCost& total = consumed[write.table->name];
    total.base_units += cost.base_units;
    total.indexes.insert(total.indexes.end(), cost.indexes.begin(), cost.indexes.end());
  }
  // Only when no item at all could be written does the call itself fail.
  if (processed == 0 && last_throttle) return std::move(*last_throttle);
  for (const auto& [table_name, cost] : consumed) {
    if (auto capacity = write_consumed(request.return_consumed_capacity, *find_table(table_name), cost)) {
      response.consumed_capacity.push_back(std::move(*capacity));
    }
  }
  return dynamo::Response{std::move(response)};
}

namespace {

enum class ActionKind : uint8_t { put, update, remove, check };

struct PreparedAction {
  ActionKind kind = ActionKind::put;
  TableState* table = nullptr;
  TableKey key;
  Item key_item;
  std::optional<Item> put_item;
  std::optional<dynamo::BoundUpdatePlan> plan;       // bound to the request's values
  std::optional<dynamo::BoundCondition> condition;  // bound to the request's values
  dynamo::ReturnValuesOnConditionCheckFailure on_failure = dynamo::ReturnValuesOnConditionCheckFailure::none;
};

const dynamo::TransactCondition& condition_of(const dynamo::TransactWriteItem& item) {
  return std::visit([](const auto& action) -> const dynamo::TransactCondition& { return action.condition; }, item);
}

// Parses one action's expressions in its own context, as DynamoDB validates
// each action like the single-item request it resembles.
Result<void> parse_action(const dynamo::TransactWriteItem& item, PreparedAction& action,
                          dynamo::ExpressionCache& cache) {
  const dynamo::TransactCondition& condition = condition_of(item);
  const auto* update = std::get_if<dynamo::TransactUpdate>(&item);
  const bool any = condition.condition_expression.has_value() || update != nullptr;
  LP_STORE_TRY_VOID(store_detail::check_expression_params(
      condition.expression_attribute_names, condition.expression_attribute_values, any, any,
      update != nullptr ? "UpdateExpression and ConditionExpression are null" : "ConditionExpression is null"));
  const std::optional<std::string> update_expression =
      update != nullptr ? std::optional<std::string>(update->update_expression) : std::nullopt;
  LP_STORE_TRY(prepared, dynamo::prepare_write(update_expression, condition.condition_expression,
                                               condition.expression_attribute_names,
                                               condition.expression_attribute_values, &cache));
  action.plan = std::move(prepared.update);
  action.condition = std::move(prepared.condition);
  action.on_failure = condition.return_values_on_condition_check_failure;
  return Result<void>{};
}

}  // namespace

namespace {

// Validates one action against its table; fills key and put item.
Result<void> bind_action(DynamoStore::State& state, const dynamo::TransactWriteItem& item, PreparedAction& action) {
  TableState& table = *action.table;
  if (const auto* put = std::get_if<dynamo::TransactPut>(&item)) {
    if (dynamo::item_size_bytes(put->item) > dynamo::item_size_bytes_max) {
      return dynamo::validation_error("Item size has exceeded the maximum allowed size");
    }
    action.kind = ActionKind::put;
    action.put_item = dynamo::with_canonical_numbers(put->item);
    LP_STORE_TRY(key, state.key_of_item(table, *action.put_item));
    action.key = std::move(key);
  } else {
    const Item& key_item = std::visit(
        [](const auto& typed) -> const Item& {
          if constexpr (std::is_same_v<std::decay_t<decltype(typed)>, dynamo::TransactPut>) {
            return typed.item;
          } else {
            return typed.key;
          }
        },
        item);
    LP_STORE_TRY(key, state.key_of_key(table, key_item));
    action.key = std::move(key);
    action.key_item = dynamo::with_canonical_numbers(key_item);
    action.kind = std::holds_alternative<dynamo::TransactUpdate>(item)   ? ActionKind::update
                  : std::holds_alternative<dynamo::TransactDelete>(item) ? ActionKind::remove
                                                                         : ActionKind::check;
  }
  if (action.plan) LP_STORE_TRY_VOID(store_detail::check_update_plan(table, *action.plan));
  return {};
}

Result<std::vector<PreparedAction>> prepare_transaction(DynamoStore::State& state,
                                                        const dynamo::TransactWriteItemsRequest& request) {
  const std::size_t count = request.transact_items.size();
  if (count == 0 || count > store_detail::transact_items_max) {
    return dynamo::validation_error(fmt::format(
        "1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have "
        "length less than or equal to {} and greater than or equal to 1",
        store_detail::transact_items_max));
  }
  std::vector<PreparedAction> actions(count);
  for (std::size_t i = 0; i < count; ++i) LP_STORE_TRY_VOID(parse_action(request.transact_items[i], actions[i], state.expression_cache));
  for (std::size_t i = 0; i < count; ++i) {
    actions[i].table = state.find_table(condition_of(request.transact_items[i]).table_name);
    if (actions[i].table == nullptr) return store_detail::resource_not_found();
    LP_STORE_TRY_VOID(bind_action(state, request.transact_items[i], actions[i]));
    // An item named twice: compared with every earlier action (at most 99,
    // usually a few: cheaper than building a set). Keys hold canonical
    // numbers, so equal keys are equal values, compared without parsing.
    const PreparedAction& action = actions[i];
    const auto same_item = [&](const PreparedAction& earlier) {
      return earlier.table == action.table && store_detail::TableKeyEqual{}(earlier.key, action.key);
    };
    if (std::any_of(actions.begin(), actions.begin() + static_cast<std::ptrdiff_t>(i), same_item)) {
      return dynamo::validation_error("Transaction request cannot include multiple operations on one item");
    }
  }
  return actions;
}

// Length-prefixed, tagged encoding, in 64-bit words: a tag or a count is a
// word; a text is its length, then its bytes 8 to a word (the last one
// zero-padded). Each element's kind and size are known from what precedes
// it, so two different payloads never encode alike. The words are folded as
// they are made, read straight from the strings (a transaction's payload can
// be hundreds of kilobytes, and one is fingerprinted for every transaction
// with a token): two unrelated folds, xor-multiply-xorshift and
// add-multiply-rotate with other constants, so that one collision does not
// imply the other; then the number of words. Only ever compared within one
// process.
class PayloadEncoder {
 public:
  void byte(uint8_t value) { fold(value); }
  void count(std::size_t value) { fold(value); }
  void text(std::string_view value) {
    fold(value.size());
    for_each_le_word(value, [this](uint64_t word) { fold(word); });
  }
  void value(const AttributeValue& value) {
    byte(static_cast<uint8_t>(value.type()));
    switch (value.type()) {
      case dynamo::AttributeType::s:
      case dynamo::AttributeType::n:
      case dynamo::AttributeType::b: text(value.text()); break;
      case dynamo::AttributeType::boolean: byte(value.as_bool() ? 1 : 0); break;
      case dynamo::AttributeType::null: break;
      case dynamo::AttributeType::m: item(value.as_map()); break;
      case dynamo::AttributeType::l:
        count(value.as_list().size());
        for (const auto& element : value.as_list()) this->value(element);
        break;
      case dynamo::AttributeType::ss:
      case dynamo::AttributeType::ns:
      case dynamo::AttributeType::bs:
        count(value.as_set().size());
        for (const auto& member : value.as_set()) text(member);
        break;
    }
  }
  void item(const Item& item) {
    count(item.size());
    for (const auto& [name, member] : item) {
      text(name);
      value(member);
    }
  }
  void condition(const dynamo::TransactCondition& condition) {
    text(condition.table_name);
    byte(condition.condition_expression.has_value() ? 1 : 0);
    if (condition.condition_expression) text(*condition.condition_expression);
    count(condition.expression_attribute_names.size());
    for (const auto& [key, name] : condition.expression_attribute_names) {
      text(key);
      text(name);
    }
    count(condition.expression_attribute_values.size());
    for (const auto& [key, member] : condition.expression_attribute_values) {
      text(key);
      value(member);
    }
    byte(static_cast<uint8_t>(condition.return_values_on_condition_check_failure));
  }
  store_detail::PayloadFingerprint finish() {
    fold(words_);
    return out_;
  }

 private:
  void fold(uint64_t word) {
    ++words_;
    out_.first = (out_.first ^ word) * 0x9E3779B97F4A7C15ULL;
    out_.first ^= out_.first >> 29;
    out_.second = (out_.second + word) * 0xC2B2AE3D27D4EB4FULL;
    out_.second = (out_.second << 31) | (out_.second >> 33);
  }

  uint64_t words_ = 0;
  store_detail::PayloadFingerprint out_{0xCBF29CE484222325ULL, 0x6C65617365707266ULL};
};

}  // namespace

store_detail::PayloadFingerprint store_detail::fingerprint(const std::vector<dynamo::TransactWriteItem>& items) {
  PayloadEncoder encoder;
  encoder.count(items.size());
  for (const auto& action : items) {
    encoder.byte(static_cast<uint8_t>(action.index()));
    std::visit(
        [&](const auto& typed) {
          using Action = std::decay_t<decltype(typed)>;
          if constexpr (std::is_same_v<Action, dynamo::TransactPut>) {
            encoder.item(typed.item);
          } else {
            encoder.item(typed.key);
          }
          if constexpr (std::is_same_v<Action, dynamo::TransactUpdate>) encoder.text(typed.update_expression);
          encoder.condition(typed.condition);
        },
        action);
  }
  return encoder.finish();
}

namespace {

DynamoError idempotent_mismatch() {
  return DynamoError{std::string(dynamo::error_type::idempotent_parameter_mismatch),
                     "DynamoDB rejected the request because you retried a request with a different payload but "
                     "with an idempotent token that was already used.",
                     std::nullopt,
                     {}};
}

}  // namespace

Result<dynamo::Response> DynamoStore::State::transact_write_items(const dynamo::TransactWriteItemsRequest& request,
                                                                  Instant now) {
  LP_STORE_TRY(actions, prepare_transaction(*this, request));
  // The tables the actions touch, each once, in name order (as a set of
  // names would hold them): a transaction touches one or two.
  std::vector<const std::string*> touched;
  for (const auto& action : actions) {
    const std::string& name = action.table->name;
    const auto at = std::lower_bound(touched.begin(), touched.end(), &name,
                                     [](const std::string* a, const std::string* b) { return *a < *b; });
    if (at == touched.end() || **at != name) touched.insert(at, &name);
  }
  for (const std::string* name : touched) ++account(*name).transact_write_items;
  if (request.client_request_token) {
    const auto* token = tokens.find(*request.client_request_token);
    if (token != nullptr && now < token->at + store_detail::idempotency_window) {
      if (token->value != store_detail::fingerprint(request.transact_items)) return idempotent_mismatch();
      // A retry of a transaction that succeeded: success, nothing applied again.
      for (const std::string* name : touched) ++account(*name).idempotent_replays;
      ++idempotent_replays;
      return dynamo::Response{dynamo::TransactWriteItemsResponse{}};
    }
  }
  // Decide every action against the latest items before changing any.
  // Latest versions, by pointer: each stays valid until its own item is
  // committed (the actions' items are distinct), and is not used after.
  std::vector<const Item*> old_items;
  std::vector<std::optional<Item>> new_items;
  old_items.reserve(actions.size());
  new_items.reserve(actions.size());
  // One per action, made only once an action fails: "None" for the others.
  std::vector<CancellationReason> reasons;
  const auto fail = [&](std::size_t i, CancellationReason reason) {
    if (reasons.empty()) reasons.assign(actions.size(), CancellationReason{"None", std::nullopt, std::nullopt});
    reasons[i] = std::move(reason);
  };
  static const Item no_item;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    PreparedAction& action = actions[i];
    old_items.push_back(latest(*action.table, action.key));
    const Item* old_item = old_items.back();
    std::optional<Item> next;
    if (action.condition && !dynamo::evaluate(*action.condition, old_item != nullptr ? *old_item : no_item)) {
      CancellationReason reason{"ConditionalCheckFailed", "The conditional request failed", std::nullopt};
      if (action.on_failure == dynamo::ReturnValuesOnConditionCheckFailure::all_old) reason.item = copy_of(old_item);
      fail(i, std::move(reason));
      ++account(*action.table).conditional_check_failures;
    } else if (action.kind == ActionKind::put) {
      next = std::move(action.put_item);  // not read again
    } else if (action.kind == ActionKind::update) {
      auto updated = store_detail::updated_item(*action.table, action.key_item, old_item, action.plan);
      if (updated) {
        next = std::move(updated).value();
      } else {
        fail(i, CancellationReason{"ValidationError", updated.error().message, std::nullopt});
      }
    }
    // A ConditionCheck changes nothing: only its cost matters.
    new_items.push_back(std::move(next));
  }
  if (!reasons.empty()) {
    // Assumed: a cancelled transaction still consumes its (double) write
    // capacity, sized by the existing items, as a failed condition does.
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const WriteCost cost =
          failed_write_cost(*actions[i].table, actions[i].key, old_items[i], transaction_cost_multiplier);
      charge_write(*actions[i].table, cost);
      account(*actions[i].table).transact_write_units += cost.base_units;
    }
    for (const std::string* name : touched) ++account(*name).transaction_cancellations;
    return dynamo::transaction_canceled(std::move(reasons));
  }
  std::vector<WriteCost> costs;
  costs.reserve(actions.size());
  bool throttled = false;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const auto& action = actions[i];
    costs.push_back(action.kind == ActionKind::check
                        ? failed_write_cost(*action.table, action.key, old_items[i], transaction_cost_multiplier)
                        : write_cost(*action.table, action.key, old_items[i],
                                     new_items[i] ? &*new_items[i] : nullptr, transaction_cost_multiplier,
                                     action.kind == ActionKind::update && action.plan && old_items[i] != nullptr
                                         ? &*action.plan
                                         : nullptr));
    if (auto problem = check_write_capacity(*action.table, costs.back(), now)) {
      fail(i, CancellationReason{"ThrottlingError", problem->message, std::nullopt});
      throttled = true;
    }
  }
  if (throttled) {
    for (const std::string* name : touched) ++account(*name).throttled_requests;
    return dynamo::transaction_canceled(std::move(reasons));
  }
  // Per table, what the reply reports (only when the request asks for it).
  const bool report = request.return_consumed_capacity != dynamo::ReturnConsumedCapacity::none;
  std::map<std::string, WriteCost> consumed;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    auto& action = actions[i];
    charge_write(*action.table, costs[i]);
    account(*action.table).transact_write_units += costs[i].base_units;
    if (report) {
      WriteCost& total = consumed[action.table->name];
      total.base_units += costs[i].base_units;
      total.indexes.insert(total.indexes.end(), costs[i].indexes.begin(), costs[i].indexes.end());
    }
    if (action.kind == ActionKind::check) continue;
    if (old_items[i] != nullptr || new_items[i]) {
      commit_write(*action.table, action.key, std::move(new_items[i]), now, &costs[i]);
    }
  }
  if (request.client_request_token) {
    tokens.put(*request.client_request_token, store_detail::fingerprint(request.transact_items), now);
  }
  dynamo::TransactWriteItemsResponse response;
  for (const auto& [table_name, cost] : consumed) {
    if (auto capacity = write_consumed(request.return_consumed_capacity, *find_table(table_name), cost)) {
      response.consumed_capacity.push_back(std::move(*capacity));
    }
  }
  return dynamo::Response{std::move(response)};
}

}  // namespace leaseproof::models
