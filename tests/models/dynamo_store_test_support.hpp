#pragma once
// Builders shared by the DynamoStore tests: short constructors for values,
// items, the lease table of the articles, and typed access to responses.

#include <cstdio>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "core/dynamo/types.hpp"
#include "models/dynamo/store.hpp"

namespace leaseproof::models::test {

using dynamo::AttributeValue;
using dynamo::Item;
using dynamo::Request;
using dynamo::Response;
using dynamo::Result;

inline AttributeValue S(std::string text) { return AttributeValue::string(std::move(text)); }
inline AttributeValue N(int64_t value) { return AttributeValue::number(value); }
inline AttributeValue N(std::string text) { return AttributeValue::number(std::move(text)); }

// A Unix-epoch instant (TTL tests need realistic epoch seconds).
inline Instant at_ms(int64_t ms) { return Instant::from_ms(1'700'000'000'000LL + ms); }

inline dynamo::AttributeDefinition define(std::string name, dynamo::ScalarAttributeType type) {
  return {std::move(name), type};
}

// "leases": pk (S); GSI "by_state" on desired_state (S) + lease_expires_at_ms (N), projection ALL.
inline dynamo::CreateTableRequest leases_table(dynamo::ProjectionType projection = dynamo::ProjectionType::all,
                                               bool gsi_range = true) {
  dynamo::CreateTableRequest request;
  request.table_name = "leases";
  request.key_schema = {{"pk", dynamo::KeyType::hash}};
  request.attribute_definitions = {define("pk", dynamo::ScalarAttributeType::s),
                                   define("desired_state", dynamo::ScalarAttributeType::s)};
  dynamo::GlobalSecondaryIndex index;
  index.index_name = "by_state";
  index.key_schema = {{"desired_state", dynamo::KeyType::hash}};
  if (gsi_range) {
    index.key_schema.push_back({"lease_expires_at_ms", dynamo::KeyType::range});
    request.attribute_definitions.push_back(define("lease_expires_at_ms", dynamo::ScalarAttributeType::n));
  }
  index.projection.projection_type = projection;
  request.global_secondary_indexes.push_back(index);
  request.billing_mode = dynamo::BillingMode::pay_per_request;
  return request;
}

// "events": pk (S) + sk (N), no index.
// A store that throttles, with `partitions` partitions of `partition_wcu_per_s`
// WCU/s each, holding the lease table without its index (created at at_ms(0)).
inline DynamoStore throttled_leases_store(uint64_t seed, uint32_t partitions, int64_t partition_wcu_per_s = 1000) {
  DynamoStoreOptions options = DynamoStoreOptions::faults_off();
  options.throttling = true;
  options.partitions_per_table = partitions;
  options.partition_wcu_per_s = partition_wcu_per_s;
  DynamoStore store(options, seed);
  auto table = leases_table();
  table.global_secondary_indexes.clear();
  table.attribute_definitions.resize(1);
  EXPECT_TRUE(store.apply(table, at_ms(0)).ok());
  return store;
}

// Puts of k0 .. k{count - 1} into the lease table, in one BatchWriteItem.
inline dynamo::BatchWriteItemRequest batch_of_puts(int count) {
  dynamo::BatchWriteItemRequest request;
  for (int i = 0; i < count; ++i) {
    request.request_items["leases"].push_back(dynamo::PutRequest{{{"pk", S("k" + std::to_string(i))}}});
  }
  return request;
}

inline dynamo::CreateTableRequest events_table() {
  dynamo::CreateTableRequest request;
  request.table_name = "events";
  request.key_schema = {{"pk", dynamo::KeyType::hash}, {"sk", dynamo::KeyType::range}};
  request.attribute_definitions = {define("pk", dynamo::ScalarAttributeType::s),
                                   define("sk", dynamo::ScalarAttributeType::n)};
  request.billing_mode = dynamo::BillingMode::pay_per_request;
  return request;
}

inline Request put(std::string table, Item item, std::string condition = {},
                   dynamo::ExpressionAttributeValues values = {}, dynamo::ExpressionAttributeNames names = {}) {
  dynamo::PutItemRequest request;
  request.table_name = std::move(table);
  request.item = std::move(item);
  if (!condition.empty()) request.write.condition_expression = std::move(condition);
  request.write.expression_attribute_values = std::move(values);
  request.write.expression_attribute_names = std::move(names);
  return request;
}

inline Request get(std::string table, Item key, bool consistent = true) {
  dynamo::GetItemRequest request;
  request.table_name = std::move(table);
  request.key = std::move(key);
  request.consistent_read = consistent;
  return request;
}

inline dynamo::UpdateItemRequest update_request(std::string table, Item key, std::string update,
                                                dynamo::ExpressionAttributeValues values = {},
                                                std::string condition = {}) {
  dynamo::UpdateItemRequest request;
  request.table_name = std::move(table);
  request.key = std::move(key);
  if (!update.empty()) request.update_expression = std::move(update);
  if (!condition.empty()) request.write.condition_expression = std::move(condition);
  request.write.expression_attribute_values = std::move(values);
  return request;
}

inline dynamo::QueryRequest query_request(std::string table, std::string key_condition,
                                          dynamo::ExpressionAttributeValues values) {
  dynamo::QueryRequest request;
  request.table_name = std::move(table);
  request.key_condition_expression = std::move(key_condition);
  request.expression_attribute_values = std::move(values);
  return request;
}

// By value: the argument is usually a temporary.
template <typename T>
T as(const Result<Response>& result) {
  // Print before value() asserts, so a failing test says why.
  if (!result.ok()) std::fprintf(stderr, "unexpected %s: %s\n", result.error().type.c_str(), result.error().message.c_str());
  return std::get<T>(result.value());
}

inline std::string error_type(const Result<Response>& result) { return result.ok() ? "ok" : result.error().type; }
inline std::string error_message(const Result<Response>& result) { return result.ok() ? "ok" : result.error().message; }

}  // namespace leaseproof::models::test
