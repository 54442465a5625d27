// DynamoStore: conditional single-item writes, ReturnValues, the lease
// acquire race of the articles, and eventually consistent GetItem.

#include <gtest/gtest.h>

#include "dynamo_store_test_support.hpp"

namespace leaseproof::models::test {
namespace {

constexpr const char* acquire_condition =
    "attribute_not_exists(lease_owner) OR lease_expires_at_ms < :now OR lease_owner = :me";

dynamo::UpdateItemRequest acquire(const std::string& worker, int64_t now_ms, int64_t lease_ms) {
  return update_request("leases", {{"pk", S("conn-1")}}, "SET lease_owner = :me, lease_expires_at_ms = :until",
                        {{":me", S(worker)}, {":now", N(now_ms)}, {":until", N(now_ms + lease_ms)}},
                        acquire_condition);
}

class DynamoStoreWrite : public ::testing::Test {
 protected:
  DynamoStore store_{DynamoStoreOptions::faults_off(), 7};
  Instant now_ = at_ms(0);
  void SetUp() override { ASSERT_TRUE(store_.apply(leases_table(), now_).ok()); }
};

TEST_F(DynamoStoreWrite, FailedConditionReturnsTheOldItemOnRequest) {
  const Item old{{"pk", S("a")}, {"v", N(1)}};
  ASSERT_TRUE(store_.apply(put("leases", old), now_).ok());
  auto conditional = std::get<dynamo::PutItemRequest>(
      put("leases", {{"pk", S("a")}, {"v", N(2)}}, "attribute_not_exists(pk)"));
  auto plain = store_.apply(conditional, now_);
  EXPECT_EQ(error_type(plain), "ConditionalCheckFailedException");
  EXPECT_EQ(error_message(plain), "The conditional request failed");
  EXPECT_FALSE(plain.error().item.has_value());
  conditional.write.return_values_on_condition_check_failure = dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  auto with_old = store_.apply(conditional, now_);
  ASSERT_FALSE(with_old.ok());
  EXPECT_EQ(with_old.error().item, old);
  EXPECT_EQ(store_.peek("leases", {{"pk", S("a")}}), old);
  EXPECT_EQ(store_.accounting("leases").conditional_check_failures, 2);
}

TEST_F(DynamoStoreWrite, UpdateReturnValuesInEveryMode) {
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"v", N(1)}, {"w", S("keep")}}), now_).ok());
  auto request = update_request("leases", {{"pk", S("a")}}, "SET v = v + :one", {{":one", N(1)}});
  auto attributes = [&](dynamo::ReturnValues mode) {
    request.write.return_values = mode;
    return as<dynamo::UpdateItemResponse>(store_.apply(request, now_)).attributes;
  };
  EXPECT_EQ(attributes(dynamo::ReturnValues::none), std::nullopt);
  EXPECT_EQ(attributes(dynamo::ReturnValues::all_old), (Item{{"pk", S("a")}, {"v", N(2)}, {"w", S("keep")}}));
  EXPECT_EQ(attributes(dynamo::ReturnValues::updated_old), (Item{{"v", N(3)}}));
  EXPECT_EQ(attributes(dynamo::ReturnValues::all_new), (Item{{"pk", S("a")}, {"v", N(5)}, {"w", S("keep")}}));
  EXPECT_EQ(attributes(dynamo::ReturnValues::updated_new), (Item{{"v", N(6)}}));
}

TEST_F(DynamoStoreWrite, UpdateOfAMissingItemCreatesItUnlessTheConditionFails) {
  auto guarded = update_request("leases", {{"pk", S("new")}}, "SET v = :v", {{":v", N(1)}}, "attribute_exists(pk)");
  EXPECT_EQ(error_type(store_.apply(guarded, now_)), "ConditionalCheckFailedException");
  EXPECT_EQ(store_.item_count("leases"), 0u);
  auto upsert = update_request("leases", {{"pk", S("new")}}, "SET v = :v", {{":v", N(1)}});
  ASSERT_TRUE(store_.apply(upsert, now_).ok());
  EXPECT_EQ(store_.peek("leases", {{"pk", S("new")}}), (Item{{"pk", S("new")}, {"v", N(1)}}));
}

TEST_F(DynamoStoreWrite, PutAndDeleteReturnTheOldItem) {
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"v", N(1)}}), now_).ok());
  auto replace = std::get<dynamo::PutItemRequest>(put("leases", {{"pk", S("a")}, {"v", N(2)}}));
  replace.write.return_values = dynamo::ReturnValues::all_old;
  EXPECT_EQ(as<dynamo::PutItemResponse>(store_.apply(replace, now_)).attributes, (Item{{"pk", S("a")}, {"v", N(1)}}));
  dynamo::DeleteItemRequest remove{"leases", {{"pk", S("a")}}, {}};
  remove.write.condition_expression = "v = :two";
  remove.write.expression_attribute_values = {{":two", N(2)}};
  remove.write.return_values = dynamo::ReturnValues::all_old;
  EXPECT_EQ(as<dynamo::DeleteItemResponse>(store_.apply(remove, now_)).attributes,
            (Item{{"pk", S("a")}, {"v", N(2)}}));
  EXPECT_EQ(store_.item_count("leases"), 0u);
  EXPECT_EQ(error_type(store_.apply(remove, now_)), "ConditionalCheckFailedException");
}

TEST_F(DynamoStoreWrite, LeaseAcquireRaceHasExactlyOneWinner) {
  // Two workers race for a free lease at the same instant: the first applied wins.
  ASSERT_TRUE(store_.apply(acquire("worker-a", 1'000, 20'000), now_).ok());
  auto loser = store_.apply(acquire("worker-b", 1'000, 20'000), now_);
  EXPECT_EQ(error_type(loser), "ConditionalCheckFailedException");
  EXPECT_EQ(store_.peek("leases", {{"pk", S("conn-1")}})->at("lease_owner"), S("worker-a"));
  // The winner's retry after a lost reply succeeds (`lease_owner = :me`).
  EXPECT_TRUE(store_.apply(acquire("worker-a", 2'000, 20'000), now_).ok());
  // Before expiry (22 s) B still loses; after it, B takes over and A's renew fails.
  EXPECT_FALSE(store_.apply(acquire("worker-b", 21'999, 20'000), now_).ok());
  EXPECT_TRUE(store_.apply(acquire("worker-b", 22'001, 20'000), now_).ok());
  auto renew = update_request("leases", {{"pk", S("conn-1")}}, "SET lease_expires_at_ms = :until",
                              {{":me", S("worker-a")}, {":until", N(50'000)}}, "lease_owner = :me");
  EXPECT_EQ(error_type(store_.apply(renew, now_)), "ConditionalCheckFailedException");
  EXPECT_EQ(store_.peek("leases", {{"pk", S("conn-1")}})->at("lease_owner"), S("worker-b"));
}

// A GetItem answers with the version the store keeps, shared: later writes
// make new versions and never change one a reader holds.
TEST_F(DynamoStoreWrite, AnItemReadStaysAsReadWhileLaterWritesChangeTheTable) {
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"v", N(1)}}), now_).ok());
  const auto first = store_.apply(get("leases", {{"pk", S("a")}}, true), now_);
  const std::shared_ptr<const Item> held = as<dynamo::GetItemResponse>(first).item;
  ASSERT_NE(held, nullptr);
  ASSERT_TRUE(store_.apply(update_request("leases", {{"pk", S("a")}}, "SET v = :v", {{":v", N(2)}}), now_).ok());
  ASSERT_TRUE(store_.apply(dynamo::DeleteItemRequest{"leases", {{"pk", S("a")}}, {}}, now_).ok());
  EXPECT_EQ(*held, (Item{{"pk", S("a")}, {"v", N(1)}}));
  EXPECT_EQ(store_.peek("leases", {{"pk", S("a")}}), std::nullopt);
}

// Responses compare by value: two reads of one version, or equal items held
// apart, are equal; an absent item equals only an absent item.
TEST(DynamoGetItemResponse, ComparesItemsByValue) {
  const Item item{{"pk", S("a")}, {"v", N(1)}};
  dynamo::GetItemResponse shared{std::make_shared<const Item>(item), std::nullopt};
  dynamo::GetItemResponse apart{std::make_shared<const Item>(item), std::nullopt};
  dynamo::GetItemResponse other{std::make_shared<const Item>(Item{{"pk", S("a")}, {"v", N(2)}}), std::nullopt};
  dynamo::GetItemResponse absent;
  EXPECT_EQ(shared, shared);
  EXPECT_EQ(shared, apart);
  EXPECT_NE(shared, other);
  EXPECT_NE(shared, absent);
  EXPECT_NE(absent, shared);
  EXPECT_EQ(absent, dynamo::GetItemResponse{});
}

TEST(DynamoStoreEventualRead, MayReturnThePreviousVersionWithinTheWindow) {
  DynamoStoreOptions options = DynamoStoreOptions::faults_off();
  options.eventual_read_window = Duration::from_ms(500);
  options.stale_read_chance = Ratio::one();
  DynamoStore store(options, 3);
  const Instant start = at_ms(0);
  ASSERT_TRUE(store.apply(leases_table(), start).ok());
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("a")}, {"v", N(1)}}), start).ok());
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("a")}, {"v", N(2)}}), start + Duration::from_s(1)).ok());
  auto read = [&](Instant when, bool consistent) {
    return as<dynamo::GetItemResponse>(store.apply(get("leases", {{"pk", S("a")}}, consistent), when)).item->at("v");
  };
  const Instant soon = start + Duration::from_ms(1'100);
  EXPECT_EQ(read(soon, false), N(1));
  EXPECT_EQ(read(soon, true), N(2));
  EXPECT_EQ(read(start + Duration::from_ms(1'600), false), N(2));
  EXPECT_EQ(store.accounting("leases").stale_reads, 1);
  // A just-deleted item may still be seen by an eventual read.
  dynamo::DeleteItemRequest remove{"leases", {{"pk", S("a")}}, {}};
  ASSERT_TRUE(store.apply(remove, start + Duration::from_s(2)).ok());
  auto stale = store.apply(get("leases", {{"pk", S("a")}}, false), start + Duration::from_ms(2'100));
  EXPECT_NE(as<dynamo::GetItemResponse>(stale).item, nullptr);
  auto strong = store.apply(get("leases", {{"pk", S("a")}}, true), start + Duration::from_ms(2'100));
  EXPECT_EQ(as<dynamo::GetItemResponse>(strong).item, nullptr);
}

TEST(DynamoStoreEventualRead, ProjectionExpressionReducesTheItem) {
  DynamoStore store(DynamoStoreOptions::faults_off(), 3);
  ASSERT_TRUE(store.apply(leases_table(), at_ms(0)).ok());
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("a")}, {"v", N(1)}, {"w", N(2)}}), at_ms(0)).ok());
  auto request = std::get<dynamo::GetItemRequest>(get("leases", {{"pk", S("a")}}));
  request.projection_expression = "#w";
  request.expression_attribute_names = {{"#w", "w"}};
  const auto read = store.apply(request, at_ms(0));
  ASSERT_NE(as<dynamo::GetItemResponse>(read).item, nullptr);
  EXPECT_EQ(*as<dynamo::GetItemResponse>(read).item, (Item{{"w", N(2)}}));
}

}  // namespace
}  // namespace leaseproof::models::test
