#include <gtest/gtest.h>

#include "core/dynamo/codec.hpp"
#include "core/dynamo/decimal.hpp"
#include "models/dynamo/expression.hpp"
#include "dynamo_test_support.hpp"

namespace leaseproof::dynamo {
namespace {

using nlohmann::json;
using test::N;
using test::S;

// The lease acquire of DESIGN.md section 6, exactly as a client sends it.
constexpr std::string_view lease_acquire_body = R"({
  "TableName": "leases",
  "Key": {"pk": {"S": "CONN#1"}},
  "UpdateExpression": "SET lease_owner = :me, lease_epoch = if_not_exists(lease_epoch, :zero) + :one, lease_expires_at_ms = :exp",
  "ConditionExpression": "attribute_not_exists(lease_owner) OR lease_expires_at_ms < :now OR lease_owner = :me",
  "ExpressionAttributeValues": {
    ":me": {"S": "worker-a"},
    ":zero": {"N": "0"},
    ":one": {"N": "1"},
    ":exp": {"N": "1700000020000"},
    ":now": {"N": "1700000000000"}
  },
  "ReturnValues": "ALL_NEW",
  "ReturnValuesOnConditionCheckFailure": "ALL_OLD"
})";

TEST(DynamoCodec, DecodesTheLeaseAcquireUpdateItemFromWireJson) {
  auto request = decode_request_text("DynamoDB_20120810.UpdateItem", lease_acquire_body);
  ASSERT_TRUE(request.ok()) << request.error().message;
  ASSERT_EQ(operation_of(*request), Operation::update_item);
  const auto& update = std::get<UpdateItemRequest>(*request);
  EXPECT_EQ(update.table_name, "leases");
  EXPECT_EQ(update.key, (Item{{"pk", S("CONN#1")}}));
  EXPECT_EQ(update.write.return_values, ReturnValues::all_new);
  EXPECT_EQ(update.write.return_values_on_condition_check_failure, ReturnValuesOnConditionCheckFailure::all_old);
  EXPECT_EQ(update.write.expression_attribute_values.at(":exp"), N("1700000020000"));

  // The expressions parse, use every placeholder, and do what a lease needs.
  ExpressionContext context(update.write.expression_attribute_names, update.write.expression_attribute_values);
  auto condition = context.parse_condition(*update.write.condition_expression);
  ASSERT_TRUE(condition.ok()) << condition.error().message;
  auto plan = context.parse_update(*update.update_expression);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(context.check_all_used().ok());

  Item item = update.key;
  EXPECT_TRUE(evaluate(*condition, item));
  ASSERT_TRUE(apply(*plan, {{"pk", KeyType::hash}}, item).ok());
  EXPECT_EQ(item, (Item{{"pk", S("CONN#1")}, {"lease_owner", S("worker-a")}, {"lease_epoch", N("1")},
                        {"lease_expires_at_ms", N("1700000020000")}}));
}

TEST(DynamoCodec, LeaseAcquireReEncodesToTheSameWireJson) {
  const json wire = json::parse(lease_acquire_body);
  auto decoded = decode<UpdateItemRequest>(wire);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(encode(*decoded), wire);
  EXPECT_EQ(encode(Request{*decoded}), wire);
}

TEST(DynamoCodec, AttributeValuesRoundTripInEveryType) {
  const json wire = json::parse(R"({
    "s": {"S": "text"}, "n": {"N": "-1.50"}, "b": {"B": "AAEC"}, "t": {"BOOL": true}, "z": {"NULL": true},
    "m": {"M": {"inner": {"L": [{"N": "1"}, {"S": "x"}]}}}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": ["AA==", "AQ=="]}
  })");
  auto item = decode<Item>(wire);
  ASSERT_TRUE(item.ok()) << item.error().message;
  EXPECT_EQ(item->at("n").text(), "-1.50");  // numbers keep their wire text
  EXPECT_EQ(item->at("m").as_map().at("inner").as_list().size(), 2U);
  EXPECT_EQ(encode(*item), wire);
}

TEST(DynamoCodec, RejectsMalformedAttributeValuesWithDynamoMessages) {
  struct Case {
    const char* wire;
    const char* type;
    const char* message;
  };
  const Case cases[] = {
      {R"({"a": {}})", "ValidationException",
       "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"},
      {R"({"a": {"S": "x", "N": "1"}})", "ValidationException",
       "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes"},
      {R"({"a": {"NULL": false}})", "ValidationException",
       "One or more parameter values were invalid: Null attribute value types must have the value of true"},
      {R"({"a": {"SS": []}})", "ValidationException",
       "One or more parameter values were invalid: An string set  may not be empty"},
      {R"({"a": {"SS": ["x", "x"]}})", "ValidationException",
       "One or more parameter values were invalid: Input collection [x, x] contains duplicates."},
      {R"({"a": {"NS": ["1", "1.0"]}})", "ValidationException",
       "One or more parameter values were invalid: Input collection [1, 1.0] contains duplicates."},
      {R"({"a": {"N": "ten"}})", "ValidationException", "The parameter cannot be converted to a numeric value: ten"},
  };
  for (const auto& one : cases) {
    auto item = decode<Item>(json::parse(one.wire));
    ASSERT_FALSE(item.ok()) << one.wire;
    EXPECT_EQ(item.error().type, one.type) << one.wire;
    EXPECT_EQ(item.error().message, one.message) << one.wire;
  }
  auto wrong_type = decode<Item>(json::parse(R"({"a": {"S": 5}})"));
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.error().type, "SerializationException");
}

TEST(DynamoCodec, RequestValidationFollowsDynamoWording) {
  auto missing = decode_request_text("DynamoDB_20120810.GetItem", R"({"Key": {"pk": {"S": "a"}}})");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "1 validation error detected: Value null at 'tableName' failed to satisfy constraint: Member must not be "
            "null");
  auto bad_enum = decode_request_text("DynamoDB_20120810.PutItem", R"({"TableName": "t", "Item": {}, "ReturnValues": "EVERYTHING"})");
  ASSERT_FALSE(bad_enum.ok());
  EXPECT_EQ(bad_enum.error().message,
            "1 validation error detected: Value 'EVERYTHING' at 'returnValues' failed to satisfy constraint: Member "
            "must satisfy enum value set: [NONE, ALL_OLD, UPDATED_OLD, ALL_NEW, UPDATED_NEW]");
  auto zero_limit = decode_request_text("DynamoDB_20120810.Query", R"({"TableName": "t", "Limit": 0})");
  ASSERT_FALSE(zero_limit.ok());
  EXPECT_EQ(zero_limit.error().message,
            "1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member must have value "
            "greater than or equal to 1");
  auto empty_values = decode_request_text("DynamoDB_20120810.DeleteItem", R"({"TableName": "t", "Key": {}, "ExpressionAttributeValues": {}})");
  ASSERT_FALSE(empty_values.ok());
  EXPECT_EQ(empty_values.error().message, "ExpressionAttributeValues must not be empty");
}

TEST(DynamoCodec, BadBodiesAndTargetsAreErrorValuesNotExceptions) {
  auto not_json = decode_request_text("DynamoDB_20120810.GetItem", std::string_view("{\"TableName\": "));
  ASSERT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.error().type, "SerializationException");
  auto not_object = decode_request_text("DynamoDB_20120810.GetItem", std::string_view("[1, 2]"));
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.error().type, "SerializationException");
  auto unknown = decode_request_text("DynamoDB_20120810.Frobnicate", std::string_view("{}"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().type, "UnknownOperationException");
  EXPECT_EQ(target_of(Operation::transact_write_items), "DynamoDB_20120810.TransactWriteItems");
}

TEST(DynamoCodec, QueryRequestAndResponseRoundTrip) {
  QueryRequest query;
  query.table_name = "leases";
  query.index_name = "by_state";
  query.key_condition_expression = "desired_state = :s AND lease_expires_at_ms < :now";
  query.filter_expression = "attribute_exists(pk)";
  query.projection_expression = "pk, lease_owner";
  query.expression_attribute_values = {{":s", S("STARTED#3")}, {":now", N("5")}};
  query.limit = 25;
  query.exclusive_start_key = Item{{"pk", S("CONN#9")}};
  query.scan_index_forward = false;
  query.select = Select::count;
  query.consistent_read = true;
  query.return_consumed_capacity = ReturnConsumedCapacity::indexes;
  const json wire = encode(query);
  EXPECT_EQ(wire.at("Select"), "COUNT");
  EXPECT_EQ(wire.at("ScanIndexForward"), false);
  auto back = decode<QueryRequest>(wire);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, query);

  QueryResponse response;
  response.items = std::vector<Item>{{{"pk", S("CONN#1")}}, {{"pk", S("CONN#2")}}};
  response.count = 2;
  response.scanned_count = 3;
  response.last_evaluated_key = Item{{"pk", S("CONN#2")}};
  response.consumed_capacity = ConsumedCapacity{"leases", 1.5, std::nullopt, std::nullopt, 0.5, {{"by_state", 1.0}}};
  auto response_back = decode_response(Operation::query, encode(response));
  ASSERT_TRUE(response_back.ok());
  EXPECT_EQ(std::get<QueryResponse>(*response_back), response);
}

TEST(DynamoCodec, BatchAndTransactionRequestsRoundTrip) {
  BatchWriteItemRequest batch;
  batch.request_items["registry"] = {PutRequest{{{"pk", S("a")}, {"n", N("1")}}}, DeleteRequest{{{"pk", S("b")}}}};
  const json batch_wire = encode(batch);
  EXPECT_EQ(batch_wire.at("RequestItems").at("registry").at(1).at("DeleteRequest").at("Key").at("pk").at("S"), "b");
  auto batch_back = decode<BatchWriteItemRequest>(batch_wire);
  ASSERT_TRUE(batch_back.ok());
  EXPECT_EQ(*batch_back, batch);

  TransactCondition condition{"leases", "lease_epoch = :e", {}, {{":e", N("3")}},
                              ReturnValuesOnConditionCheckFailure::all_old};
  TransactWriteItemsRequest transaction;
  transaction.transact_items = {
      TransactPut{{{"pk", S("CKPT#1")}}, TransactCondition{"checkpoints", std::nullopt, {}, {}, {}}},
      TransactUpdate{{{"pk", S("CONN#1")}}, "SET seq = :e", condition},
      TransactDelete{{{"pk", S("OLD#1")}}, TransactCondition{"leases", std::nullopt, {}, {}, {}}},
      TransactConditionCheck{{{"pk", S("CONN#1")}}, condition},
  };
  transaction.client_request_token = "token-1";
  auto transaction_back = decode_request("DynamoDB_20120810.TransactWriteItems", encode(transaction));
  ASSERT_TRUE(transaction_back.ok()) << transaction_back.error().message;
  EXPECT_EQ(std::get<TransactWriteItemsRequest>(*transaction_back), transaction);
}

TEST(DynamoCodec, CreateTableRoundTripsWithGsiAndDescription) {
  CreateTableRequest create;
  create.table_name = "leases";
  create.key_schema = {{"pk", KeyType::hash}};
  create.attribute_definitions = {{"pk", ScalarAttributeType::s}, {"shard", ScalarAttributeType::s},
                                  {"lease_expires_at_ms", ScalarAttributeType::n}};
  create.global_secondary_indexes = {GlobalSecondaryIndex{
      "by_expiry", {{"shard", KeyType::hash}, {"lease_expires_at_ms", KeyType::range}},
      Projection{ProjectionType::include, {"lease_owner"}}, std::nullopt, std::nullopt}};
  create.billing_mode = BillingMode::pay_per_request;
  const json wire = encode(create);
  EXPECT_EQ(wire.at("GlobalSecondaryIndexes").at(0).at("Projection").at("ProjectionType"), "INCLUDE");
  auto back = decode_request("DynamoDB_20120810.CreateTable", wire);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(std::get<CreateTableRequest>(*back), create);

  CreateTableResponse response;
  response.table_description.table_name = "leases";
  response.table_description.table_status = "CREATING";
  response.table_description.key_schema = create.key_schema;
  response.table_description.attribute_definitions = create.attribute_definitions;
  response.table_description.billing_mode = BillingMode::pay_per_request;
  response.table_description.creation_date_time_ms = 1'700'000'000'123;
  auto response_back = decode<CreateTableResponse>(encode(response));
  ASSERT_TRUE(response_back.ok()) << response_back.error().message;
  EXPECT_EQ(*response_back, response);
}

TEST(DynamoCodec, ErrorsCarryTheFullWireTypeAndOptionalOldItem) {
  DynamoError failed{"ConditionalCheckFailedException", "The conditional request failed",
                     Item{{"pk", S("CONN#1")}, {"lease_owner", S("worker-b")}}, {}};
  const json wire = encode(failed);
  EXPECT_EQ(wire.at("__type"), "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException");
  EXPECT_EQ(wire.at("Item").at("lease_owner").at("S"), "worker-b");
  EXPECT_EQ(decode_error(wire), failed);

  EXPECT_EQ(encode(validation_error("x")).at("__type"), "com.amazon.coral.validate#ValidationException");

  DynamoError canceled{"TransactionCanceledException",
                       "Transaction cancelled, please refer cancellation reasons for specific reasons "
                       "[None, ConditionalCheckFailed]",
                       std::nullopt,
                       {CancellationReason{"None", std::nullopt, std::nullopt},
                        CancellationReason{"ConditionalCheckFailed", "The conditional request failed",
                                           Item{{"pk", S("CONN#1")}}}}};
  EXPECT_EQ(decode_error(encode(canceled)), canceled);
  EXPECT_EQ(decode_error(json::parse(R"({"oops": 1})")).type, "InternalServerError");
}

TEST(DynamoCodec, WriteResponsesKeepAttributesAndCapacity) {
  UpdateItemResponse response{Item{{"lease_epoch", N("4")}},
                              ConsumedCapacity{"leases", 1, std::nullopt, std::nullopt, std::nullopt, {}}};
  const json wire = encode(Response{response});
  EXPECT_EQ(wire, json::parse(R"({"Attributes": {"lease_epoch": {"N": "4"}},
                                  "ConsumedCapacity": {"TableName": "leases", "CapacityUnits": 1.0}})"));
  auto back = decode_response(Operation::update_item, wire);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<UpdateItemResponse>(*back), response);

  BatchWriteItemResponse batch;
  EXPECT_EQ(encode(batch), json::parse(R"({"UnprocessedItems": {}})"));
}

TEST(DynamoCodec, ErrorBuildersUseDynamoMessages) {
  const auto failed = conditional_check_failed(Item{{"pk", S("a")}});
  EXPECT_EQ(failed.type, "ConditionalCheckFailedException");
  EXPECT_EQ(failed.message, "The conditional request failed");
  ASSERT_TRUE(failed.item.has_value());
  const auto canceled = transaction_canceled({CancellationReason{"None", std::nullopt, std::nullopt},
                                              CancellationReason{"ConditionalCheckFailed", std::nullopt, std::nullopt}});
  EXPECT_EQ(canceled.message,
            "Transaction cancelled, please refer cancellation reasons for specific reasons [None, "
            "ConditionalCheckFailed]");
  EXPECT_EQ(canceled.cancellation_reasons.size(), 2U);
}

TEST(DynamoCodec, NumbersAreStoredInCanonicalForm) {
  const Item item{{"n", N("1.50")},
                  {"m", AttributeValue::map({{"e", N("1e2")}})},
                  {"ns", AttributeValue::number_set({"010", "-0.0"})}};
  EXPECT_EQ(with_canonical_numbers(item),
            (Item{{"n", N("1.5")}, {"m", AttributeValue::map({{"e", N("100")}})},
                  {"ns", AttributeValue::number_set({"10", "0"})}}));
}

TEST(DynamoCodec, DumpNeverThrowsOnInvalidUtf8) {
  const std::string text = dump_json(encode(Item{{"s", S(std::string("a\xff", 2))}}));
  EXPECT_EQ(text, "{\"s\":{\"S\":\"a\xef\xbf\xbd\"}}");
}

TEST(DynamoCodec, ItemSizeFollowsTheDocumentedRules) {
  // name bytes + value bytes
  EXPECT_EQ(item_size_bytes({{"pk", S("CONN#1")}}), 2U + 6U);
  // numbers: one byte per two significant digits, plus one
  EXPECT_EQ(item_size_bytes({{"n", N("1000000000000")}}), 1U + 2U);  // 1 significant digit
  EXPECT_EQ(item_size_bytes({{"n", N("1700000020000")}}), 1U + 6U);  // 9 significant digits
  EXPECT_EQ(item_size_bytes({{"n", N("12345")}}), 1U + 4U);
  EXPECT_EQ(item_size_bytes({{"b", AttributeValue::binary("AAEC")}}), 1U + 3U);  // decoded bytes
  EXPECT_EQ(item_size_bytes({{"t", AttributeValue::boolean(true)}}), 2U);
  EXPECT_EQ(write_capacity_units(1024), 1);
  EXPECT_EQ(write_capacity_units(1025), 2);
  EXPECT_EQ(write_capacity_units(0), 1);
  EXPECT_EQ(read_capacity_units(4097), 2);
}

}  // namespace
}  // namespace leaseproof::dynamo
