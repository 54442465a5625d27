#include "core/registry/requests.hpp"

#include <fmt/format.h>

#include "base/assert.hpp"
#include "base/integer_text.hpp"

namespace leaseproof::registry {
namespace {

using dynamo::AttributeValue;
using dynamo::Item;

AttributeValue S(std::string_view text) { return AttributeValue::string(std::string{text}); }
AttributeValue N(int64_t value) { return AttributeValue::number(value); }

int64_t floor_div(int64_t value, int64_t divisor) {
  const int64_t quotient = value / divisor;
  return (value % divisor != 0 && value < 0) ? quotient - 1 : quotient;
}

dynamo::QueryRequest query(const RegistryConfig& config, const std::optional<Item>& exclusive_start_key) {
  dynamo::QueryRequest request;
  request.table_name = config.table.name;
  request.exclusive_start_key = exclusive_start_key;
  request.return_consumed_capacity = dynamo::ReturnConsumedCapacity::total;
  return request;
}

}  // namespace

uint32_t room_shards(const RegistryConfig& config) {
  return config.has(Flaw::one_partition) ? 1 : config.room_shards;
}

uint32_t shard_of(std::string_view connection, uint32_t shards) {
  LP_ASSERT(shards > 0);
  uint32_t hash = 0;
  for (char c : connection) hash = hash * 31u + static_cast<uint8_t>(c);
  return hash % shards;
}

std::string room_key(std::string_view room, uint32_t shard) { return fmt::format("room#{}#{}", room, shard); }

std::string connection_sort_key(std::string_view connection) { return fmt::format("conn#{}", connection); }

Item membership_key(const RegistryConfig& config, std::string_view room, std::string_view connection) {
  Item key;
  key.emplace_sorted("pk", S(room_key(room, shard_of(connection, room_shards(config)))));
  key.emplace_sorted("sk", S(connection_sort_key(connection)));
  return key;
}

dynamo::Request join_request(const RegistryConfig& config, std::string_view room, std::string_view connection,
                             std::string_view user, int64_t now_wall_ms) {
  dynamo::PutItemRequest request;
  request.table_name = config.table.name;
  request.item = membership_key(config, room, connection);
  request.item["connectionId"] = S(connection);
  request.item["userId"] = S(user);
  request.item["joinedAt"] = N(now_wall_ms);
  request.item["expiresAt"] = N(floor_div(now_wall_ms, 1000) + config.ttl.s());
  request.write.return_consumed_capacity = dynamo::ReturnConsumedCapacity::total;
  return request;
}

dynamo::Request leave_request(const RegistryConfig& config, std::string_view room, std::string_view connection) {
  dynamo::DeleteItemRequest request;
  request.table_name = config.table.name;
  request.key = membership_key(config, room, connection);
  request.write.return_consumed_capacity = dynamo::ReturnConsumedCapacity::total;
  return request;
}

dynamo::Request members_query(const RegistryConfig& config, std::string_view room, uint32_t shard,
                              int64_t now_wall_ms, const std::optional<Item>& exclusive_start_key) {
  LP_ASSERT_LT(shard, room_shards(config));
  dynamo::QueryRequest request = query(config, exclusive_start_key);
  request.key_condition_expression = "pk = :pk";
  request.expression_attribute_values[":pk"] = S(room_key(room, shard));
  request.projection_expression = "connectionId, userId, expiresAt";
  request.limit = config.query_page_items_max;
  if (!config.has(Flaw::no_expiry_filter)) {
    request.filter_expression = "expiresAt > :now";
    request.expression_attribute_values[":now"] = N(floor_div(now_wall_ms, 1000));
  }
  return request;
}

dynamo::Request connection_rooms_query(const RegistryConfig& config, std::string_view connection,
                                       const std::optional<Item>& exclusive_start_key) {
  dynamo::QueryRequest request = query(config, exclusive_start_key);
  request.index_name = config.table.by_connection_index;
  request.key_condition_expression = "connectionId = :c";
  request.expression_attribute_values[":c"] = S(connection);
  request.projection_expression = "pk, sk";
  request.limit = config.query_page_items_max;
  return request;
}

dynamo::Request delete_batch_request(const RegistryConfig& config, const std::vector<Item>& keys) {
  LP_ASSERT(!keys.empty());
  LP_ASSERT_LE(keys.size(), config.batch_items_max);
  dynamo::BatchWriteItemRequest request;
  request.return_consumed_capacity = dynamo::ReturnConsumedCapacity::total;
  auto& writes = request.request_items[config.table.name];
  writes.reserve(keys.size());
  for (const Item& key : keys) writes.emplace_back(dynamo::DeleteRequest{key});
  return request;
}

dynamo::Request presence_query(const RegistryConfig& config, std::string_view user, int64_t now_wall_ms,
                               const std::optional<Item>& exclusive_start_key) {
  dynamo::QueryRequest request = query(config, exclusive_start_key);
  request.index_name = config.table.by_user_index;
  request.key_condition_expression = "userId = :u";
  request.expression_attribute_values[":u"] = S(user);
  request.select = dynamo::Select::count;
  if (config.has(Flaw::no_expiry_filter)) {
    request.limit = 1;  // the seed's isOnline: Limit 1, Select COUNT, no filter
    return request;
  }
  request.filter_expression = "expiresAt > :now";
  request.expression_attribute_values[":now"] = N(floor_div(now_wall_ms, 1000));
  return request;
}

void refresh_expiry_clock(dynamo::Request& request, int64_t now_wall_ms) {
  auto* query = std::get_if<dynamo::QueryRequest>(&request);
  if (query == nullptr) return;
  const auto now = query->expression_attribute_values.find(":now");
  if (now != query->expression_attribute_values.end()) now->second = N(floor_div(now_wall_ms, 1000));
}

dynamo::Request create_table_request(const RegistryConfig& config) {
  using dynamo::AttributeDefinition;
  using dynamo::KeySchemaElement;
  using dynamo::KeyType;
  using dynamo::ScalarAttributeType;
  dynamo::CreateTableRequest request;
  request.table_name = config.table.name;
  request.billing_mode = dynamo::BillingMode::pay_per_request;
  request.key_schema = {KeySchemaElement{"pk", KeyType::hash}, KeySchemaElement{"sk", KeyType::range}};
  request.attribute_definitions = {AttributeDefinition{"pk", ScalarAttributeType::s},
                                   AttributeDefinition{"sk", ScalarAttributeType::s},
                                   AttributeDefinition{"connectionId", ScalarAttributeType::s},
                                   AttributeDefinition{"userId", ScalarAttributeType::s}};
  // Cleanup needs only the keys of a connection's rows.
  dynamo::GlobalSecondaryIndex by_connection;
  by_connection.index_name = config.table.by_connection_index;
  by_connection.key_schema = {KeySchemaElement{"connectionId", KeyType::hash}};
  by_connection.projection.projection_type = dynamo::ProjectionType::keys_only;
  // Presence filters on the expiry, so the index carries it.
  dynamo::GlobalSecondaryIndex by_user;
  by_user.index_name = config.table.by_user_index;
  by_user.key_schema = {KeySchemaElement{"userId", KeyType::hash}, KeySchemaElement{"connectionId", KeyType::range}};
  by_user.projection.projection_type = dynamo::ProjectionType::include;
  by_user.projection.non_key_attributes = {"expiresAt"};
  request.global_secondary_indexes = {by_connection, by_user};
  return request;
}

std::optional<Member> parse_member(const Item& item) {
  Member member;
  for (const auto& [name, value] : item) {
    const std::string_view n = name;
    if (n == "connectionId" && value.is(dynamo::AttributeType::s)) {
      member.connection = value.text();
    } else if (n == "userId" && value.is(dynamo::AttributeType::s)) {
      member.user = value.text();
    } else if (n == "expiresAt" && value.is(dynamo::AttributeType::n)) {
      member.expires_at_s = parse_integer<int64_t>(value.text()).value_or(0);
    }
  }
  if (member.connection.empty()) return std::nullopt;
  return member;
}

}  // namespace leaseproof::registry
