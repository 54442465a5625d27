#include "core/lease/requests.hpp"

#include <fmt/format.h>

#include "base/integer_text.hpp"

namespace leaseproof::lease {
namespace {

using dynamo::AttributeValue;
using dynamo::Item;

AttributeValue S(std::string_view text) { return AttributeValue::string(std::string{text}); }
AttributeValue N(int64_t value) { return AttributeValue::number(value); }

}  // namespace

Item key_of(std::string_view connection) {
  Item item;  // every request has one: no brace list to copy from
  item.reserve(1);
  item.emplace_sorted("pk", AttributeValue::string(connection_key(connection)));
  return item;
}

namespace {

dynamo::UpdateItemRequest update(const LeaseConfig& config, std::string_view connection) {
  dynamo::UpdateItemRequest request;
  request.table_name = config.table.name;
  request.key = key_of(connection);
  return request;
}

}  // namespace

std::string connection_key(std::string_view connection) {
  std::string key;
  key.reserve(5 + connection.size());
  return key.append("CONN#").append(connection);
}

std::string reconcile_shard(std::string_view connection, uint32_t shards) {
  // FNV-1a: stable across builds and platforms, so shards never move.
  uint32_t hash = 2166136261u;
  for (char c : connection) hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
  return fmt::format("{}#{}", kStarted, hash % shards);
}

namespace {

// The liveness algorithm's acquire: the lease names the acquirer's
// incarnation, and is taken only when free, from a dead tenure named exactly,
// or back from this incarnation's own stopped tenure. The expiry it writes is
// no lease's expiry (nothing renews it): it tells a read after a lost reply
// whether this acquire applied.
dynamo::Request liveness_acquire_request(const LeaseConfig& config, std::string_view connection,
                                         std::string_view worker, int64_t now_wall_ms, const AcquireBasis& basis,
                                         int64_t incarnation) {
  dynamo::UpdateItemRequest request = update(config, connection);
  auto& values = request.write.expression_attribute_values;
  values[":me"] = S(worker);
  values[":exp"] = N(now_wall_ms + config.lease_duration.ms());
  values[":inc"] = N(incarnation);
  values[":one"] = N(1);
  values[":zero"] = N(0);
  values[":started"] = S(kStarted);
  request.update_expression =
      "SET lease_owner = :me, owner_incarnation = :inc, lease_expires_at_ms = :exp, "
      "lease_epoch = if_not_exists(lease_epoch, :zero) + :one ADD lease_counter :one";
  std::string taken = "attribute_not_exists(lease_owner)";
  if (basis.dead_tenure) {
    taken += " OR (lease_owner = :old AND owner_incarnation = :old_inc AND lease_epoch = :old_epoch)";
    values[":old"] = S(basis.dead_tenure->owner);
    values[":old_inc"] = N(basis.dead_tenure->incarnation);
    values[":old_epoch"] = N(basis.dead_tenure->epoch);
  }
  if (basis.own_epoch) {
    taken += " OR (lease_owner = :me AND owner_incarnation = :inc AND lease_epoch = :own_epoch)";
    values[":own_epoch"] = N(*basis.own_epoch);
  }
  request.write.condition_expression = fmt::format("desired_state = :started AND ({})", taken);
  request.write.return_values = dynamo::ReturnValues::all_new;
  request.write.return_values_on_condition_check_failure = dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  return request;
}

}  // namespace

dynamo::Request acquire_request(const LeaseConfig& config, std::string_view connection, std::string_view worker,
                                int64_t now_wall_ms, const AcquireBasis& basis, int64_t incarnation) {
  if (config.algorithm == Algorithm::liveness) {
    return liveness_acquire_request(config, connection, worker, now_wall_ms, basis, incarnation);
  }
  dynamo::UpdateItemRequest request = update(config, connection);
  auto& values = request.write.expression_attribute_values;
  values[":me"] = S(worker);
  values[":exp"] = N(now_wall_ms + config.lease_duration.ms());
  if (config.algorithm == Algorithm::seed) {
    // The articles' acquire, verbatim in substance: no margin, no epoch, an
    // owner whose acquire reply was lost cannot retry.
    request.update_expression = "SET lease_owner = :me, lease_expires_at_ms = :exp";
    request.write.condition_expression = "attribute_not_exists(lease_owner) OR lease_expires_at_ms < :now";
    values[":now"] = N(now_wall_ms);
    return request;
  }
  // owner_incarnation: the acquiring process's own number, so that a second
  // process started with this worker id is another owner (manager.hpp,
  // tenure_incarnation).
  request.update_expression =
      "SET lease_owner = :me, owner_incarnation = :inc, lease_expires_at_ms = :exp, "
      "lease_epoch = if_not_exists(lease_epoch, :zero) + :one ADD lease_counter :one";
  values[":inc"] = N(incarnation);
  values[":one"] = N(1);
  values[":zero"] = N(0);
  values[":started"] = S(kStarted);
  std::string expiry;
  if (basis.observed_counter) {
    expiry = " OR lease_counter = :counter";
    values[":counter"] = N(*basis.observed_counter);
  } else if (config.expiry_mode == ExpiryMode::wall) {
    expiry = " OR lease_expires_at_ms < :expired_before";
    values[":expired_before"] = N(now_wall_ms - config.safety_margin.ms());
  }
  // Counter mode never compares wall clocks: without an observed counter it
  // only takes a free lease (or its own), whatever the acquirer's clock says.
  // "OR lease_owner = :me AND owner_incarnation = :inc": an acquire this
  // process retries after a lost reply succeeds; a second process with this
  // worker id is another owner and waits for the expiry as any other.
  // In wall mode only one that moves the expiry forward: an acquire held in
  // the network past a newer tenure of the same worker must not start
  // another with an expiry already past (others would take it while that
  // tenure still acts).
  const std::string_view own =
      config.expiry_mode == ExpiryMode::wall
          ? std::string_view{"(lease_owner = :me AND owner_incarnation = :inc AND lease_expires_at_ms < :exp)"}
          : std::string_view{"(lease_owner = :me AND owner_incarnation = :inc)"};
  request.write.condition_expression = fmt::format(
      "desired_state = :started AND (attribute_not_exists(lease_owner) OR {}{})", own, expiry);
  request.write.return_values = dynamo::ReturnValues::all_new;
  request.write.return_values_on_condition_check_failure = dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  return request;
}

dynamo::Request renew_request(const LeaseConfig& config, std::string_view connection, std::string_view worker,
                              int64_t epoch, int64_t now_wall_ms) {
  dynamo::UpdateItemRequest request = update(config, connection);
  auto& values = request.write.expression_attribute_values;
  const bool seed = config.algorithm == Algorithm::seed;
  // The heartbeat, sent for every held lease every few seconds: placeholders
  // in name order, each appended (no search) to room reserved for all.
  values.reserve(seed ? 2 : 5);
  if (!seed) values.emplace_sorted(":epoch", N(epoch));
  values.emplace_sorted(":exp", N(now_wall_ms + config.lease_duration.ms()));
  values.emplace_sorted(":me", S(worker));
  if (seed) {
    request.update_expression = "SET lease_expires_at_ms = :exp";
    request.write.condition_expression = "lease_owner = :me";
    return request;
  }
  values.emplace_sorted(":one", N(1));
  values.emplace_sorted(":started", S(kStarted));
  request.update_expression = "SET lease_expires_at_ms = :exp ADD lease_counter :one";
  if (config.expiry_mode == ExpiryMode::wall) {
    // The expiry only moves forward: a renew held in the network past a
    // newer one of the same tenure (a proxy queue, a retransmission) must not
    // pull it back, or others could take the lease while its owner, trusting
    // the newer renew, still acts. Counter mode's takeovers never read it.
    request.write.condition_expression =
        "lease_owner = :me AND lease_epoch = :epoch AND desired_state = :started AND lease_expires_at_ms < :exp";
  } else {
    request.write.condition_expression = "lease_owner = :me AND lease_epoch = :epoch AND desired_state = :started";
  }
  return request;
}

dynamo::Request release_request(const LeaseConfig& config, std::string_view connection, std::string_view worker,
                                int64_t epoch) {
  dynamo::UpdateItemRequest request = update(config, connection);
  auto& values = request.write.expression_attribute_values;
  values[":me"] = S(worker);
  values[":zero"] = N(0);
  if (config.algorithm == Algorithm::seed) {
    request.update_expression = "SET lease_expires_at_ms = :zero";
    request.write.condition_expression = "lease_owner = :me";
    return request;
  }
  request.update_expression = "SET lease_expires_at_ms = :zero REMOVE lease_owner, owner_incarnation ADD lease_counter :one";
  request.write.condition_expression = "lease_owner = :me AND lease_epoch = :epoch";
  values[":epoch"] = N(epoch);
  values[":one"] = N(1);
  return request;
}

dynamo::Request read_request(const LeaseConfig& config, std::string_view connection) {
  dynamo::GetItemRequest request;
  request.table_name = config.table.name;
  request.key = key_of(connection);
  request.consistent_read = true;
  return request;
}

dynamo::Request reconcile_query(const LeaseConfig& config, uint32_t shard, int64_t now_wall_ms,
                                const std::optional<dynamo::Item>& exclusive_start_key) {
  dynamo::QueryRequest request;
  request.table_name = config.table.name;
  request.limit = config.query_page_items_max;
  request.exclusive_start_key = exclusive_start_key;
  if (config.algorithm == Algorithm::seed) {
    request.index_name = config.table.state_index;
    request.key_condition_expression = "desired_state = :started AND lease_expires_at_ms < :now";
    request.expression_attribute_values = {{":started", S(kStarted)}, {":now", N(now_wall_ms)}};
    return request;
  }
  request.index_name = config.table.shard_index;
  request.key_condition_expression = "reconcile_shard = :shard";
  request.expression_attribute_values = {{":shard", S(fmt::format("{}#{}", kStarted, shard))}};
  return request;
}

dynamo::Request create_table_request(const LeaseConfig& config) {
  using dynamo::AttributeDefinition;
  using dynamo::KeySchemaElement;
  using dynamo::KeyType;
  using dynamo::ScalarAttributeType;
  dynamo::CreateTableRequest request;
  request.table_name = config.table.name;
  request.billing_mode = dynamo::BillingMode::pay_per_request;
  request.key_schema = {KeySchemaElement{"pk", KeyType::hash}};
  request.attribute_definitions = {AttributeDefinition{"pk", ScalarAttributeType::s}};
  dynamo::GlobalSecondaryIndex index;
  if (config.algorithm == Algorithm::seed) {
    // The articles' GSI: every heartbeat moves the item within it (a key change).
    index.index_name = config.table.state_index;
    index.key_schema = {KeySchemaElement{"desired_state", KeyType::hash},
                        KeySchemaElement{"lease_expires_at_ms", KeyType::range}};
    index.projection.projection_type = dynamo::ProjectionType::all;
    request.attribute_definitions.push_back(AttributeDefinition{"desired_state", ScalarAttributeType::s});
    request.attribute_definitions.push_back(AttributeDefinition{"lease_expires_at_ms", ScalarAttributeType::n});
  } else {
    // Sharded, sparse, keyed on attributes only starting and stopping a
    // connection change, and projecting nothing else: a renew, an acquire, a
    // release or a checkpoint changes neither the index's keys nor its
    // projection, so DynamoDB writes the table alone (one write per
    // heartbeat). A sweep finds candidates here, spread over `shards`
    // partitions, and reads each from the table before deciding.
    index.index_name = config.table.shard_index;
    index.key_schema = {KeySchemaElement{"reconcile_shard", KeyType::hash}, KeySchemaElement{"pk", KeyType::range}};
    index.projection.projection_type = dynamo::ProjectionType::keys_only;
    request.attribute_definitions.push_back(AttributeDefinition{"reconcile_shard", ScalarAttributeType::s});
  }
  request.global_secondary_indexes = {index};
  return request;
}

dynamo::Request create_connection_request(const LeaseConfig& config, std::string_view connection,
                                          std::string_view ws_url) {
  dynamo::PutItemRequest request;
  request.table_name = config.table.name;
  // lease_expires_at_ms = 0 from the start: the seed's sparse GSI on
  // (desired_state, lease_expires_at_ms) would never show the item otherwise.
  request.item = Item{{"pk", S(connection_key(connection))},     {"desired_state", S(kStarted)},
                      {"ws_url", S(ws_url)},                     {"lease_epoch", N(0)},
                      {"lease_expires_at_ms", N(0)},             {"lease_counter", N(0)},
                      {"last_seq", N(0)}};
  if (config.algorithm != Algorithm::seed) {
    request.item["reconcile_shard"] = S(reconcile_shard(connection, config.table.shards));
  }
  request.write.condition_expression = "attribute_not_exists(pk)";
  return request;
}

dynamo::Request stop_connection_request(const LeaseConfig& config, std::string_view connection) {
  dynamo::UpdateItemRequest request = update(config, connection);
  request.update_expression = "SET desired_state = :stopped REMOVE reconcile_shard";
  request.write.expression_attribute_values = {{":stopped", S(kStopped)}};
  request.write.condition_expression = "attribute_exists(pk)";
  return request;
}

dynamo::Request restart_connection_request(const LeaseConfig& config, std::string_view connection,
                                           std::string_view ws_url) {
  dynamo::UpdateItemRequest request = update(config, connection);
  std::string expression = "SET desired_state = :started, ws_url = :url";
  request.write.expression_attribute_values = {{":started", S(kStarted)}, {":url", S(ws_url)},
                                               {":stopped", S(kStopped)}};
  if (config.algorithm != Algorithm::seed) {
    // Back in its reconcile shard: the sweep's index shows it again.
    expression += ", reconcile_shard = :shard";
    request.write.expression_attribute_values[":shard"] = S(reconcile_shard(connection, config.table.shards));
  }
  request.update_expression = std::move(expression);
  request.write.condition_expression = "desired_state = :stopped";
  return request;
}

// One pass over the item's attributes (sorted by name), each name told apart
// by its length first: the lease manager parses every item a read, a sweep page
// or a refused write returns. A missing or mistyped attribute reads as empty or
// 0, as a lookup by name would give.
std::optional<LeaseView> parse_lease(const Item& item) {
  LeaseView view;
  bool keyed = false;
  auto as_text = [](const dynamo::AttributeValue& value) -> const std::string* {
    return value.is(dynamo::AttributeType::s) ? &value.text() : nullptr;
  };
  auto as_integer = [](const dynamo::AttributeValue& value) -> int64_t {
    if (!value.is(dynamo::AttributeType::n)) return 0;
    return parse_integer<int64_t>(value.text()).value_or(0);
  };
  for (const auto& [name, value] : item) {
    const std::string_view n = name;
    if (n == "pk") {
      const std::string* key = as_text(value);
      if (key == nullptr || !key->starts_with("CONN#")) return std::nullopt;
      view.connection = key->substr(5);
      keyed = true;
    } else if (n == "desired_state") {
      if (const std::string* state = as_text(value)) view.desired_state = *state;
    } else if (n == "lease_owner") {
      if (const std::string* owner = as_text(value)) view.owner = *owner;
    } else if (n == "ws_url") {
      if (const std::string* url = as_text(value)) view.ws_url = *url;
    } else if (n == "lease_epoch") {
      view.epoch = as_integer(value);
    } else if (n == "lease_expires_at_ms") {
      view.expires_at_ms = as_integer(value);
    } else if (n == "lease_counter") {
      view.counter = as_integer(value);
    } else if (n == "last_seq") {
      view.last_seq = as_integer(value);
    } else if (n == "stream_epoch") {
      view.stream_epoch = as_integer(value);
    } else if (n == "owner_incarnation") {
      view.owner_incarnation = as_integer(value);
    }
  }
  if (!keyed) return std::nullopt;
  return view;
}

// ---- liveness items ----------------------------------------------------------------

std::string worker_key(std::string_view worker) {
  std::string key;
  key.reserve(7 + worker.size());
  return key.append("WORKER#").append(worker);
}

namespace {

dynamo::UpdateItemRequest liveness_update(const LeaseConfig& config, std::string_view worker) {
  dynamo::UpdateItemRequest request;
  request.table_name = config.table.name;
  request.key = Item{{"pk", S(worker_key(worker))}};
  request.write.return_values_on_condition_check_failure = dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  return request;
}

// The condition that `seen`, a live incarnation, has expired as its observer
// judged: wall mode checks the stamp against the observer's clock at send
// (less the margin) in DynamoDB too; counter mode requires the counter the
// observer saw unchanged for a lease plus the margin.
std::string expired_condition(const LeaseConfig& config, const LivenessView& seen, int64_t now_wall_ms,
                              dynamo::Item& values) {
  values[":seen"] = N(seen.incarnation);
  if (config.expiry_mode == ExpiryMode::wall) {
    values[":expired_before"] = N(now_wall_ms - config.safety_margin.ms());
    return "worker_incarnation = :seen AND worker_expires_at_ms < :expired_before";
  }
  values[":counter"] = N(seen.counter);
  return "worker_incarnation = :seen AND worker_counter = :counter";
}

}  // namespace

dynamo::Request liveness_read_request(const LeaseConfig& config, std::string_view worker) {
  dynamo::GetItemRequest request;
  request.table_name = config.table.name;
  request.key = Item{{"pk", S(worker_key(worker))}};
  request.consistent_read = true;
  return request;
}

dynamo::Request liveness_claim_request(const LeaseConfig& config, std::string_view worker, int64_t now_wall_ms,
                                       const std::optional<LivenessView>& seen, int64_t claimant) {
  dynamo::UpdateItemRequest request = liveness_update(config, worker);
  auto& values = request.write.expression_attribute_values;
  values[":inc"] = N(seen ? seen->incarnation + 1 : 1);
  values[":live"] = S(kLive);
  values[":exp"] = N(now_wall_ms + config.lease_duration.ms());
  values[":one"] = N(1);
  values[":claimant"] = N(claimant);
  request.update_expression =
      "SET worker_incarnation = :inc, worker_state = :live, worker_expires_at_ms = :exp, worker_claimant = :claimant "
      "ADD worker_counter :one";
  if (!seen) {
    request.write.condition_expression = "attribute_not_exists(pk)";
  } else if (!seen->live) {
    values[":seen"] = N(seen->incarnation);
    values[":fenced"] = S(kFenced);
    request.write.condition_expression = "worker_incarnation = :seen AND worker_state = :fenced";
  } else {
    request.write.condition_expression = expired_condition(config, *seen, now_wall_ms, values);
  }
  return request;
}

dynamo::Request liveness_renew_request(const LeaseConfig& config, std::string_view worker, int64_t incarnation,
                                       int64_t now_wall_ms) {
  dynamo::UpdateItemRequest request = liveness_update(config, worker);
  auto& values = request.write.expression_attribute_values;
  values[":inc"] = N(incarnation);
  values[":exp"] = N(now_wall_ms + config.lease_duration.ms());
  values[":one"] = N(1);
  request.update_expression = "SET worker_expires_at_ms = :exp ADD worker_counter :one";
  // Wall mode: the stamp only moves forward, as a lease renew's does (a
  // renew held in the network must not pull it back).
  request.write.condition_expression = config.expiry_mode == ExpiryMode::wall
                                           ? "worker_incarnation = :inc AND worker_expires_at_ms < :exp"
                                           : "worker_incarnation = :inc";
  return request;
}

dynamo::Request liveness_fence_request(const LeaseConfig& config, const LivenessView& seen, int64_t now_wall_ms) {
  dynamo::UpdateItemRequest request = liveness_update(config, seen.worker);
  auto& values = request.write.expression_attribute_values;
  values[":next"] = N(seen.incarnation + 1);
  values[":fenced"] = S(kFenced);
  values[":one"] = N(1);
  request.update_expression = "SET worker_incarnation = :next, worker_state = :fenced ADD worker_counter :one";
  request.write.condition_expression = expired_condition(config, seen, now_wall_ms, values);
  return request;
}

dynamo::Request liveness_retire_request(const LeaseConfig& config, std::string_view worker, int64_t incarnation) {
  dynamo::UpdateItemRequest request = liveness_update(config, worker);
  auto& values = request.write.expression_attribute_values;
  values[":inc"] = N(incarnation);
  values[":next"] = N(incarnation + 1);
  values[":fenced"] = S(kFenced);
  values[":one"] = N(1);
  request.update_expression = "SET worker_incarnation = :next, worker_state = :fenced ADD worker_counter :one";
  request.write.condition_expression = "worker_incarnation = :inc";
  return request;
}

std::optional<LivenessView> parse_liveness(const Item& item) {
  LivenessView view;
  bool keyed = false;
  for (const auto& [name, value] : item) {
    const std::string_view n = name;
    const bool text = value.is(dynamo::AttributeType::s);
    const bool number = value.is(dynamo::AttributeType::n);
    if (n == "pk") {
      if (!text || !value.text().starts_with("WORKER#")) return std::nullopt;
      view.worker = value.text().substr(7);
      keyed = true;
    } else if (n == "worker_state") {
      view.live = text && value.text() == kLive;
    } else if (number && n == "worker_incarnation") {
      view.incarnation = parse_integer<int64_t>(value.text()).value_or(0);
    } else if (number && n == "worker_expires_at_ms") {
      view.expires_at_ms = parse_integer<int64_t>(value.text()).value_or(0);
    } else if (number && n == "worker_counter") {
      view.counter = parse_integer<int64_t>(value.text()).value_or(0);
    } else if (number && n == "worker_claimant") {
      view.claimant = parse_integer<int64_t>(value.text()).value_or(0);
    }
  }
  if (!keyed) return std::nullopt;
  return view;
}

}  // namespace leaseproof::lease
