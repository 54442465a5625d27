// DynamoStore: CreateTable, schema validation and malformed requests
// (nothing in the table may change when a request is rejected).

#include <string>

#include <gtest/gtest.h>

#include "dynamo_store_test_support.hpp"

namespace leaseproof::models::test {
namespace {

class DynamoStoreTable : public ::testing::Test {
 protected:
  DynamoStore store_{DynamoStoreOptions::faults_off(), 1};
  Instant now_ = at_ms(0);

  void SetUp() override {
    ASSERT_TRUE(store_.apply(leases_table(), now_).ok());
    ASSERT_TRUE(store_.apply(events_table(), now_).ok());
  }
};

TEST_F(DynamoStoreTable, CreatedTableServesRequestsAtOnce) {
  auto created = store_.apply(leases_table(), now_);  // duplicate
  EXPECT_EQ(error_type(created), "ResourceInUseException");
  EXPECT_EQ(error_message(created), "Table already exists: leases");

  auto other = leases_table();
  other.table_name = "other";
  const auto& description = as<dynamo::CreateTableResponse>(store_.apply(other, now_)).table_description;
  EXPECT_EQ(description.table_name, "other");
  ASSERT_EQ(description.global_secondary_indexes.size(), 1u);
  EXPECT_TRUE(store_.apply(put("other", {{"pk", S("a")}}), now_).ok());
  EXPECT_EQ(store_.item_count("other"), 1u);
}

TEST_F(DynamoStoreTable, UnknownTableIsResourceNotFound) {
  for (const Request& request : {put("nope", {{"pk", S("a")}}), get("nope", {{"pk", S("a")}})}) {
    auto result = store_.apply(request, now_);
    EXPECT_EQ(error_type(result), "ResourceNotFoundException");
    EXPECT_EQ(error_message(result), "Requested resource not found");
  }
  auto query = query_request("nope", "pk = :p", {{":p", S("a")}});
  EXPECT_EQ(error_type(store_.apply(query, now_)), "ResourceNotFoundException");
  auto on_index = query_request("leases", "desired_state = :s", {{":s", S("a")}});
  on_index.index_name = "missing";
  EXPECT_EQ(error_message(store_.apply(on_index, now_)), "The table does not have the specified index: missing");
}

TEST_F(DynamoStoreTable, TableNamesAreValidatedFirst) {
  for (const std::string& name : {std::string("ab"), std::string(256, 'a'), std::string("leases!")}) {
    auto create = leases_table();
    create.table_name = name;
    EXPECT_EQ(error_type(store_.apply(create, now_)), "ValidationException") << name;
    // Checked before the table is looked up: not ResourceNotFound.
    auto result = store_.apply(get(name, {{"pk", S("a")}}), now_);
    EXPECT_EQ(error_type(result), "ValidationException") << name;
    EXPECT_NE(error_message(result).find("at 'tableName' failed to satisfy constraint"), std::string::npos)
        << error_message(result);
  }
  auto longest = leases_table();
  longest.table_name = std::string(255, 'z');
  EXPECT_TRUE(store_.apply(longest, now_).ok());
  auto shortest = leases_table();
  shortest.table_name = "a.-";
  EXPECT_TRUE(store_.apply(shortest, now_).ok());
}

TEST_F(DynamoStoreTable, CreateTableValidatesBillingAndKeys) {
  auto provisioned = events_table();
  provisioned.table_name = "provisioned";
  provisioned.billing_mode.reset();
  EXPECT_EQ(error_message(store_.apply(provisioned, now_)),
            "One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits must both be "
            "specified when BillingMode is PROVISIONED");
  auto undefined = events_table();
  undefined.table_name = "undefined";
  undefined.attribute_definitions.pop_back();
  EXPECT_EQ(error_message(store_.apply(undefined, now_)),
            "Invalid KeySchema: Some index key attribute have no definition");
  auto swapped = events_table();
  swapped.table_name = "swapped";
  std::swap(swapped.key_schema[0].key_type, swapped.key_schema[1].key_type);
  EXPECT_EQ(error_message(store_.apply(swapped, now_)),
            "Invalid KeySchema: The first KeySchemaElement is not a HASH key type");
}

TEST_F(DynamoStoreTable, ItemKeysAreValidatedAgainstTheSchema) {
  EXPECT_EQ(error_message(store_.apply(put("leases", {{"pk", N(1)}}), now_)),
            "One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N");
  EXPECT_EQ(error_message(store_.apply(put("leases", {{"other", S("x")}}), now_)),
            "One or more parameter values were invalid: Missing the key pk in the item");
  EXPECT_EQ(error_message(store_.apply(put("leases", {{"pk", S("")}}), now_)),
            "One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an "
            "empty string value. Key: pk");
  EXPECT_EQ(error_message(store_.apply(put("leases", {{"pk", S("a")}, {"desired_state", N(1)}}), now_)),
            "One or more parameter values were invalid: Type mismatch for Index Key desired_state Expected: S "
            "Actual: N IndexName: by_state");
  EXPECT_EQ(error_message(store_.apply(get("leases", {{"pk", N(1)}}), now_)),
            "The provided key element does not match the schema");
  EXPECT_EQ(error_message(store_.apply(get("leases", {{"pk", S("a")}, {"extra", S("b")}}), now_)),
            "The provided key element does not match the schema");
  EXPECT_EQ(error_message(store_.apply(get("events", {{"pk", S("a")}}), now_)),
            "The provided key element does not match the schema");
  EXPECT_EQ(store_.item_count("leases"), 0u);
}

TEST_F(DynamoStoreTable, MalformedRequestsLeaveTheTableUnchanged) {
  const Item original{{"pk", S("a")}, {"count", N(1)}, {"desired_state", S("STARTED")}, {"lease_expires_at_ms", N(5)}};
  ASSERT_TRUE(store_.apply(put("leases", original), now_).ok());
  const auto before = store_.accounting("leases");
  const Item key{{"pk", S("a")}};

  auto bad_syntax = update_request("leases", key, "SET count = count +", {{":one", N(1)}});
  EXPECT_EQ(error_type(store_.apply(bad_syntax, now_)), "ValidationException");
  auto unknown_placeholder = update_request("leases", key, "SET hits = :missing", {{":one", N(1)}});
  EXPECT_EQ(error_type(store_.apply(unknown_placeholder, now_)), "ValidationException");
  auto unused_value = update_request("leases", key, "SET hits = :one", {{":one", N(1)}, {":two", N(2)}});
  EXPECT_EQ(error_message(store_.apply(unused_value, now_)),
            "Value provided in ExpressionAttributeValues unused in expressions: keys: {:two}");
  auto wrong_key_type = update_request("leases", {{"pk", N(7)}}, "SET hits = :one", {{":one", N(1)}});
  EXPECT_EQ(error_message(store_.apply(wrong_key_type, now_)), "The provided key element does not match the schema");
  auto key_update = update_request("leases", key, "SET pk = :v", {{":v", S("b")}});
  EXPECT_EQ(error_message(store_.apply(key_update, now_)),
            "One or more parameter values were invalid: Cannot update attribute pk. This attribute is part of the key");
  auto wrong_operand = update_request("leases", key, "SET desired_state = desired_state + :one", {{":one", N(1)}});
  EXPECT_EQ(error_message(store_.apply(wrong_operand, now_)),
            "An operand in the update expression has an incorrect data type");
  const std::string big(400 * 1024, 'x');
  auto oversized_update = update_request("leases", key, "SET filler = :b", {{":b", S(big)}});
  EXPECT_EQ(error_message(store_.apply(oversized_update, now_)),
            "Item size to update has exceeded the maximum allowed size");
  EXPECT_EQ(error_message(store_.apply(put("leases", {{"pk", S("a")}, {"filler", S(big)}}), now_)),
            "Item size has exceeded the maximum allowed size");
  auto names_without_expression = put("leases", original, "", {}, {{"#n", "count"}});
  EXPECT_EQ(error_message(store_.apply(names_without_expression, now_)),
            "ExpressionAttributeNames can only be specified when using expressions");
  dynamo::PutItemRequest all_new = std::get<dynamo::PutItemRequest>(put("leases", original));
  all_new.write.return_values = dynamo::ReturnValues::all_new;
  EXPECT_EQ(error_message(store_.apply(all_new, now_)), "ReturnValues can only be ALL_OLD or NONE");

  EXPECT_EQ(store_.peek("leases", key), original);
  EXPECT_EQ(store_.item_count("leases"), 1u);
  EXPECT_EQ(store_.accounting("leases").table, before.table);  // rejected requests consume nothing
  auto gsi = query_request("leases", "desired_state = :s", {{":s", S("STARTED")}});
  gsi.index_name = "by_state";
  EXPECT_EQ(as<dynamo::QueryResponse>(store_.apply(gsi, now_)).count, 1);
}

TEST_F(DynamoStoreTable, NumbersAreStoredCanonically) {
  ASSERT_TRUE(store_.apply(put("events", {{"pk", S("a")}, {"sk", N("1.50")}, {"v", N("007")}}), now_).ok());
  auto read = store_.apply(get("events", {{"pk", S("a")}, {"sk", N("1.5")}}), now_);
  const auto& item = as<dynamo::GetItemResponse>(read).item;
  ASSERT_NE(item, nullptr);
  EXPECT_EQ(item->at("sk"), N("1.5"));
  EXPECT_EQ(item->at("v"), N("7"));
}

}  // namespace
}  // namespace leaseproof::models::test
