// DynamoStore: TransactWriteItems (all or nothing, cancellation reasons,
// idempotency tokens) and BatchWriteItem (limits, unprocessed items).

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "dynamo_store_test_support.hpp"

namespace leaseproof::models::test {
namespace {

dynamo::TransactCondition on(std::string table, std::string condition = {},
                             dynamo::ExpressionAttributeValues values = {}) {
  dynamo::TransactCondition out;
  out.table_name = std::move(table);
  if (!condition.empty()) out.condition_expression = std::move(condition);
  out.expression_attribute_values = std::move(values);
  return out;
}

dynamo::TransactWriteItemsRequest increment(const std::string& token) {
  dynamo::TransactWriteItemsRequest request;
  request.transact_items.push_back(dynamo::TransactUpdate{{{"pk", S("counter")}}, "ADD hits :one",
                                                          on("leases", {}, {{":one", N(1)}})});
  request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("log")}, {"token", S(token)}}, on("leases")});
  request.client_request_token = token;
  return request;
}

class DynamoStoreTransact : public ::testing::Test {
 protected:
  DynamoStore store_{DynamoStoreOptions::faults_off(), 13};
  Instant now_ = at_ms(0);
  void SetUp() override { ASSERT_TRUE(store_.apply(leases_table(), now_).ok()); }
};

// One item named twice, its number key written two ways (1 and 1.0 are one
// key): still one item. Other numbers of the same partition are not.
TEST_F(DynamoStoreTransact, AnItemNamedTwiceIsFoundWhateverFormItsNumberKeyTakes) {
  ASSERT_TRUE(store_.apply(events_table(), now_).ok());
  dynamo::TransactWriteItemsRequest request;
  request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("p")}, {"sk", N("1")}}, on("events")});
  request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("p")}, {"sk", N("10")}}, on("events")});
  request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("p")}, {"sk", N("2")}}, on("events")});
  ASSERT_TRUE(store_.apply(request, now_).ok());
  request.transact_items.push_back(dynamo::TransactDelete{{{"pk", S("p")}, {"sk", N("1.0")}}, on("events")});
  EXPECT_EQ(error_message(store_.apply(request, now_)),
            "Transaction request cannot include multiple operations on one item");
  request.transact_items.back() = dynamo::TransactDelete{{{"pk", S("p")}, {"sk", N("100")}}, on("events")};
  EXPECT_TRUE(store_.apply(request, now_).ok());
}

TEST_F(DynamoStoreTransact, AFailedConditionCancelsEveryAction) {
  const Item held{{"pk", S("b")}, {"holder", S("x")}};
  ASSERT_TRUE(store_.apply(put("leases", held), now_).ok());
  dynamo::TransactWriteItemsRequest request;
  request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("a")}}, on("leases")});
  auto check = on("leases", "holder = :me", {{":me", S("y")}});
  check.return_values_on_condition_check_failure = dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  request.transact_items.push_back(dynamo::TransactConditionCheck{{{"pk", S("b")}}, check});
  request.transact_items.push_back(dynamo::TransactDelete{{{"pk", S("b")}}, on("leases")});
  auto duplicate = store_.apply(request, now_);
  EXPECT_EQ(error_message(duplicate), "Transaction request cannot include multiple operations on one item");
  request.transact_items.pop_back();
  auto result = store_.apply(request, now_);
  ASSERT_EQ(error_type(result), "TransactionCanceledException");
  EXPECT_EQ(error_message(result),
            "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]");
  ASSERT_EQ(result.error().cancellation_reasons.size(), 2u);
  EXPECT_EQ(result.error().cancellation_reasons[0].code, "None");
  EXPECT_EQ(result.error().cancellation_reasons[1].code, "ConditionalCheckFailed");
  EXPECT_EQ(result.error().cancellation_reasons[1].item, held);
  EXPECT_FALSE(store_.peek("leases", {{"pk", S("a")}}).has_value());
  EXPECT_EQ(store_.accounting("leases").transaction_cancellations, 1);
}

TEST_F(DynamoStoreTransact, SuccessAppliesEverythingAtDoubleCost) {
  const auto before = store_.accounting("leases").table.write_units;
  ASSERT_TRUE(store_.apply(increment("t-1"), now_).ok());
  EXPECT_EQ(store_.peek("leases", {{"pk", S("counter")}})->at("hits"), N(1));
  EXPECT_TRUE(store_.peek("leases", {{"pk", S("log")}}).has_value());
  EXPECT_EQ(store_.accounting("leases").table.write_units - before, 4);  // two 1 KB items, twice each
  EXPECT_EQ(store_.accounting("leases").transact_write_items, 1);
}

TEST_F(DynamoStoreTransact, RetryWithTheSameTokenDoesNotApplyAgain) {
  ASSERT_TRUE(store_.apply(increment("t-1"), now_).ok());
  ASSERT_TRUE(store_.apply(increment("t-1"), now_ + Duration::from_min(9)).ok());
  EXPECT_EQ(store_.peek("leases", {{"pk", S("counter")}})->at("hits"), N(1));
  EXPECT_EQ(store_.accounting("leases").idempotent_replays, 1);
  auto changed = increment("t-1");
  std::get<dynamo::TransactPut>(changed.transact_items[1]).item["extra"] = S("x");
  EXPECT_EQ(error_type(store_.apply(changed, now_ + Duration::from_min(9))), "IdempotentParameterMismatchException");
  // After the 10-minute window the token is forgotten: the same request applies again.
  ASSERT_TRUE(store_.apply(increment("t-1"), now_ + Duration::from_min(11)).ok());
  EXPECT_EQ(store_.peek("leases", {{"pk", S("counter")}})->at("hits"), N(2));
}

// The store keeps a fingerprint of each token's payload, not a copy: a change
// to any one field of any action must still count as a different payload.
TEST_F(DynamoStoreTransact, ARetryDifferingInAnyFieldIsAMismatch) {
  auto base = [] {
    dynamo::TransactWriteItemsRequest request;
    auto condition = on("leases", "attribute_not_exists(#p) OR v = :v", {{":v", N(1)}});
    condition.expression_attribute_names = {{"#p", "pk"}};
    request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("a")}, {"m", dynamo::AttributeValue::map({{"x", N(1)}})}}, condition});
    request.transact_items.push_back(dynamo::TransactUpdate{{{"pk", S("b")}}, "SET v = :v", on("leases", {}, {{":v", N(2)}})});
    request.transact_items.push_back(dynamo::TransactDelete{{{"pk", S("c")}}, on("leases")});
    request.transact_items.push_back(dynamo::TransactConditionCheck{{{"pk", S("d")}}, on("leases", "attribute_not_exists(pk)")});
    request.client_request_token = "same-token";
    return request;
  };
  using Change = std::function<void(dynamo::TransactWriteItemsRequest&)>;
  const std::vector<std::pair<std::string, Change>> changes = {
      {"put item value", [](auto& r) { std::get<dynamo::TransactPut>(r.transact_items[0]).item["pk"] = S("a2"); }},
      {"nested map", [](auto& r) { std::get<dynamo::TransactPut>(r.transact_items[0]).item["m"] = dynamo::AttributeValue::map({{"x", N(2)}}); }},
      {"value type", [](auto& r) { std::get<dynamo::TransactPut>(r.transact_items[0]).item["m"] = S("x"); }},
      {"condition text", [](auto& r) { std::get<dynamo::TransactPut>(r.transact_items[0]).condition.condition_expression = "attribute_not_exists(#p) OR v <> :v"; }},
      {"names", [](auto& r) { std::get<dynamo::TransactPut>(r.transact_items[0]).condition.expression_attribute_names["#p"] = "sk"; }},
      {"values", [](auto& r) { std::get<dynamo::TransactPut>(r.transact_items[0]).condition.expression_attribute_values[":v"] = N(3); }},
      {"return values on failure", [](auto& r) {
         std::get<dynamo::TransactPut>(r.transact_items[0]).condition.return_values_on_condition_check_failure =
             dynamo::ReturnValuesOnConditionCheckFailure::all_old; }},
      {"update expression", [](auto& r) { std::get<dynamo::TransactUpdate>(r.transact_items[1]).update_expression = "SET w = :v"; }},
      {"update key", [](auto& r) { std::get<dynamo::TransactUpdate>(r.transact_items[1]).key["pk"] = S("b2"); }},
      {"table", [](auto& r) { std::get<dynamo::TransactDelete>(r.transact_items[2]).condition.table_name = "other"; }},
      {"action kind", [](auto& r) {
         r.transact_items[2] = dynamo::TransactConditionCheck{{{"pk", S("c")}}, on("leases")}; }},
      {"order", [](auto& r) { std::swap(r.transact_items[2], r.transact_items[3]); }},
      {"one action fewer", [](auto& r) { r.transact_items.pop_back(); }},
      // The end of the encoding (the fingerprint folds it in words, the last
      // one partial).
      {"last action's return values on failure", [](auto& r) {
         std::get<dynamo::TransactConditionCheck>(r.transact_items[3]).condition.return_values_on_condition_check_failure =
             dynamo::ReturnValuesOnConditionCheckFailure::all_old; }},
      {"last action's condition", [](auto& r) {
         std::get<dynamo::TransactConditionCheck>(r.transact_items[3]).condition.condition_expression =
             "attribute_not_exists(pl)"; }},
  };
  auto other = leases_table();
  other.table_name = "other";
  ASSERT_TRUE(store_.apply(other, now_).ok());
  ASSERT_TRUE(store_.apply(base(), now_).ok());
  ASSERT_TRUE(store_.apply(base(), now_ + Duration::from_s(1)).ok());  // the same payload is a replay
  EXPECT_EQ(store_.accounting("leases").idempotent_replays, 1);
  for (const auto& [name, change] : changes) {
    auto request = base();
    change(request);
    EXPECT_EQ(error_type(store_.apply(request, now_ + Duration::from_s(2))), "IdempotentParameterMismatchException")
        << name;
  }
}

// A long payload, folded 8 bytes a word: a byte changed anywhere (in any
// word, the last partial one too) still counts as another payload, one byte
// more too, and the same payload still replays.
TEST_F(DynamoStoreTransact, ALongPayloadDifferingInAnyByteIsAMismatch) {
  const std::string text(700, 'x');
  auto request_with = [](std::string value) {
    dynamo::TransactWriteItemsRequest request;
    request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("long")}, {"v", S(std::move(value))}}, on("leases")});
    request.client_request_token = "long-token";
    return request;
  };
  ASSERT_TRUE(store_.apply(request_with(text), now_).ok());
  ASSERT_TRUE(store_.apply(request_with(text), now_ + Duration::from_s(1)).ok());
  EXPECT_EQ(store_.accounting("leases").idempotent_replays, 1);
  for (std::size_t at = 0; at < text.size(); ++at) {
    std::string changed = text;
    changed[at] = 'y';
    EXPECT_EQ(error_type(store_.apply(request_with(changed), now_ + Duration::from_s(2))),
              "IdempotentParameterMismatchException")
        << "byte " << at;
  }
  EXPECT_EQ(error_type(store_.apply(request_with(text + "x"), now_ + Duration::from_s(2))),
            "IdempotentParameterMismatchException");
  EXPECT_TRUE(store_.apply(request_with(text), now_ + Duration::from_s(3)).ok());
  EXPECT_EQ(store_.accounting("leases").idempotent_replays, 2);
}

TEST_F(DynamoStoreTransact, RejectsMoreThanOneHundredActions) {
  dynamo::TransactWriteItemsRequest request;
  for (int i = 0; i < 101; ++i) {
    request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("k" + std::to_string(i))}}, on("leases")});
  }
  EXPECT_EQ(error_type(store_.apply(request, now_)), "ValidationException");
  request.transact_items.pop_back();
  EXPECT_TRUE(store_.apply(request, now_).ok());
  EXPECT_EQ(store_.item_count("leases"), 100u);
}

TEST_F(DynamoStoreTransact, BatchWriteLimitsAndDuplicates) {
  dynamo::BatchWriteItemRequest request;
  for (int i = 0; i < 26; ++i) request.request_items["leases"].push_back(dynamo::PutRequest{{{"pk", S("k" + std::to_string(i))}}});
  // Over 25 for one table: the request's shape is invalid (DynamoDB's wording).
  EXPECT_EQ(error_message(store_.apply(request, now_)),
            "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must "
            "satisfy constraint: [Member must have length less than or equal to 25, Member must have length greater "
            "than or equal to 1]");
  // Over 25 across tables: the batch limit.
  dynamo::BatchWriteItemRequest split;
  for (int i = 0; i < 13; ++i) {
    split.request_items["leases"].push_back(dynamo::PutRequest{{{"pk", S("a" + std::to_string(i))}}});
    split.request_items["other"].push_back(dynamo::PutRequest{{{"pk", S("b" + std::to_string(i))}}});
  }
  EXPECT_EQ(error_message(store_.apply(split, now_)), "Too many items requested for the BatchWriteItem call");
  request.request_items["leases"].resize(24);
  request.request_items["leases"].push_back(dynamo::DeleteRequest{{{"pk", S("k0")}}});
  EXPECT_EQ(error_message(store_.apply(request, now_)), "Provided list of item keys contains duplicates");
  request.request_items["leases"].back() = dynamo::PutRequest{{{"pk", N(3)}}};
  EXPECT_EQ(error_message(store_.apply(request, now_)), "The provided key element does not match the schema");
  EXPECT_EQ(store_.item_count("leases"), 0u);
  request.request_items["leases"].pop_back();
  const auto& response = as<dynamo::BatchWriteItemResponse>(store_.apply(request, now_));
  EXPECT_TRUE(response.unprocessed_items.empty());
  EXPECT_EQ(store_.item_count("leases"), 24u);
}

TEST_F(DynamoStoreTransact, ReportsConsumedCapacityPerTableOnlyWhenAsked) {
  auto request = increment("t-1");
  const auto& quiet = as<dynamo::TransactWriteItemsResponse>(store_.apply(request, now_));
  EXPECT_TRUE(quiet.consumed_capacity.empty());
  request.client_request_token = "t-2";
  request.transact_items.push_back(dynamo::TransactPut{{{"pk", S("log-2")}, {"sk", N(1)}}, on("events")});
  ASSERT_TRUE(store_.apply(events_table(), now_).ok());
  request.return_consumed_capacity = dynamo::ReturnConsumedCapacity::total;
  const auto& told = as<dynamo::TransactWriteItemsResponse>(store_.apply(request, now_));
  ASSERT_EQ(told.consumed_capacity.size(), 2u);  // one entry per table, in name order
  EXPECT_EQ(told.consumed_capacity[0].table_name, "events");
  EXPECT_EQ(told.consumed_capacity[0].capacity_units, 2.0);  // one 1 KB item, twice
  EXPECT_EQ(told.consumed_capacity[1].table_name, "leases");
  EXPECT_EQ(told.consumed_capacity[1].capacity_units, 4.0);  // two
  EXPECT_EQ(store_.accounting("events").transact_write_items, 1);
  EXPECT_EQ(store_.accounting("leases").transact_write_items, 2);
}

TEST(DynamoStoreTransactThrottle, ThrottledActionsAreNamedAndNothingIsApplied) {
  DynamoStore store = throttled_leases_store(17, 1, 3);
  const Instant now = at_ms(0);
  // 3 of 5 go through: the partition has no tokens left.
  ASSERT_TRUE(store.apply(batch_of_puts(5), now).ok());
  const auto throttled_before = store.accounting("leases").throttled_requests;
  auto result = store.apply(increment("t-1"), now);
  ASSERT_EQ(error_type(result), "TransactionCanceledException");
  ASSERT_EQ(result.error().cancellation_reasons.size(), 2u);
  EXPECT_EQ(result.error().cancellation_reasons[0].code, "ThrottlingError");
  EXPECT_EQ(result.error().cancellation_reasons[1].code, "ThrottlingError");
  EXPECT_FALSE(store.peek("leases", {{"pk", S("counter")}}).has_value());
  EXPECT_EQ(store.accounting("leases").throttled_requests, throttled_before + 1);
  EXPECT_EQ(store.accounting("leases").transaction_cancellations, 0);
  // One second later the partition has refilled.
  EXPECT_TRUE(store.apply(increment("t-2"), now + Duration::from_s(1)).ok());
}

TEST(DynamoStoreBatchThrottle, ReturnsUnprocessedItemsThenFails) {
  DynamoStore store = throttled_leases_store(17, 1, 3);
  const Instant now = at_ms(0);
  const dynamo::BatchWriteItemRequest request = batch_of_puts(5);
  const auto& first = as<dynamo::BatchWriteItemResponse>(store.apply(request, now));
  ASSERT_EQ(first.unprocessed_items.count("leases"), 1u);
  EXPECT_EQ(first.unprocessed_items.at("leases").size(), 2u);
  EXPECT_EQ(store.item_count("leases"), 3u);
  auto second = store.apply(request, now);
  EXPECT_EQ(error_type(second), "ProvisionedThroughputExceededException");
  EXPECT_EQ(store.item_count("leases"), 3u);
  // One second later the partition has refilled.
  EXPECT_TRUE(store.apply(request, now + Duration::from_s(1)).ok());
}

}  // namespace
}  // namespace leaseproof::models::test
