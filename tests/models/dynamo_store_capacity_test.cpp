// DynamoStore: capacity accounting (the articles' cost arithmetic), throttling,
// TTL deletes and determinism.

#include <string>

#include <gtest/gtest.h>

#include "core/dynamo/codec.hpp"

#include "dynamo_store_test_support.hpp"

namespace leaseproof::models::test {
namespace {

constexpr int connections = 500;
constexpr int64_t heartbeat_ms = 5'000;
constexpr int64_t run_ms = 60'000;

// 500 leases, each renewed every 5 s for 60 s; returns the store.
DynamoStore run_heartbeats(dynamo::ProjectionType projection, bool gsi_on_expiry) {
  DynamoStore store(DynamoStoreOptions::faults_off(), 21);
  EXPECT_TRUE(store.apply(leases_table(projection, gsi_on_expiry), at_ms(0)).ok());
  for (int i = 0; i < connections; ++i) {
    EXPECT_TRUE(store.apply(put("leases", {{"pk", S("conn-" + std::to_string(i))}, {"desired_state", S("STARTED")},
                                           {"lease_owner", S("w")}, {"lease_expires_at_ms", N(0)}}), at_ms(0)).ok());
  }
  for (int64_t t = heartbeat_ms; t <= run_ms; t += heartbeat_ms) {
    for (int i = 0; i < connections; ++i) {
      auto renew = update_request("leases", {{"pk", S("conn-" + std::to_string(i))}}, "SET lease_expires_at_ms = :until",
                                  {{":until", N(t + 20'000)}, {":me", S("w")}}, "lease_owner = :me");
      EXPECT_TRUE(store.apply(renew, at_ms(t)).ok());
    }
  }
  return store;
}

TEST(DynamoStoreCost, FiveHundredHeartbeatsEveryFiveSecondsCostOneHundredWcuPerSecond) {
  // GSI keyed on desired_state only, keys projected: a heartbeat does not touch the index.
  DynamoStore quiet = run_heartbeats(dynamo::ProjectionType::keys_only, false);
  const auto before = static_cast<int64_t>(connections);  // the initial puts, 1 WCU each
  const auto& accounting = quiet.accounting("leases");
  EXPECT_EQ((accounting.table.write_units - before) * 1000 / run_ms, 100);
  EXPECT_EQ(accounting.indexes.at("by_state").write_units, connections);  // the initial puts only
  EXPECT_EQ(accounting.update_item, connections * (run_ms / heartbeat_ms));
  EXPECT_EQ(accounting.scan, 0);

  // The articles' GSI (desired_state, lease_expires_at_ms): each heartbeat
  // moves the index row, 2 GSI writes on top of the base write: 3 WCU.
  DynamoStore churning = run_heartbeats(dynamo::ProjectionType::all, true);
  const auto& churn = churning.accounting("leases");
  const int64_t heartbeats = connections * (run_ms / heartbeat_ms);
  EXPECT_EQ(churn.table.write_units - before, heartbeats);
  EXPECT_EQ(churn.indexes.at("by_state").write_units - before, 2 * heartbeats);
  EXPECT_EQ((churn.table.write_units + churn.indexes.at("by_state").write_units - 2 * before) / heartbeats, 3);
  EXPECT_EQ((churn.indexes.at("by_state").write_units - before) * 1000 / run_ms, 200);
}

// An index write is sized by the entry it writes (the projected attributes),
// not by the item: the delete of the old entry by the old one, the put of the
// new entry by the new one.
TEST(DynamoStoreCost, IndexWritesAreSizedByTheirProjectedEntries) {
  const std::string kb(1024, 'x');
  for (const auto type : {dynamo::ProjectionType::include, dynamo::ProjectionType::keys_only,
                          dynamo::ProjectionType::all}) {
    SCOPED_TRACE(static_cast<int>(type));
    DynamoStore store(DynamoStoreOptions::faults_off(), 21);
    auto table = leases_table(type);
    if (type == dynamo::ProjectionType::include) {
      table.global_secondary_indexes[0].projection.non_key_attributes = {"note"};
    }
    ASSERT_TRUE(store.apply(table, at_ms(0)).ok());
    auto index_wcu = [&] { return store.accounting("leases").indexes.at("by_state").write_units; };
    // note: 1.5 KB (projected by INCLUDE), blob: 3 KB (projected by ALL only).
    ASSERT_TRUE(store.apply(put("leases", {{"pk", S("a")}, {"desired_state", S("STARTED")},
                                           {"lease_expires_at_ms", N(1)}, {"note", S(kb + kb.substr(512))},
                                           {"blob", S(kb + kb + kb)}}), at_ms(0)).ok());
    const int64_t put_cost = type == dynamo::ProjectionType::all ? 5 : type == dynamo::ProjectionType::include ? 2 : 1;
    EXPECT_EQ(index_wcu(), put_cost);
    // Moving the entry (new range key) and shrinking the note: a delete sized
    // by the old entry, a put sized by the new one.
    ASSERT_TRUE(store.apply(update_request("leases", {{"pk", S("a")}}, "SET lease_expires_at_ms = :t, note = :n",
                                           {{":t", N(2)}, {":n", S("short")}}), at_ms(1)).ok());
    const int64_t move_cost = type == dynamo::ProjectionType::all ? 5 + 4 : type == dynamo::ProjectionType::include ? 2 + 1 : 1 + 1;
    EXPECT_EQ(index_wcu(), put_cost + move_cost);
  }
}

// An update that adds or removes attributes moves the others within the
// item: whether the projected entry changed must not depend on where its
// attributes sit (the store looks them up at their old place first).
TEST(DynamoStoreCost, AnIncludedEntryIsComparedByNameWhenOtherAttributesComeAndGo) {
  DynamoStore store(DynamoStoreOptions::faults_off(), 22);
  auto table = leases_table(dynamo::ProjectionType::include);
  table.global_secondary_indexes[0].projection.non_key_attributes = {"note"};
  ASSERT_TRUE(store.apply(table, at_ms(0)).ok());
  auto index_wcu = [&] { return store.accounting("leases").indexes.at("by_state").write_units; };
  const Item key{{"pk", S("a")}};
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("a")}, {"desired_state", S("STARTED")},
                                         {"lease_expires_at_ms", N(1)}, {"note", S("n")}}), at_ms(0)).ok());
  EXPECT_EQ(index_wcu(), 1);
  // "a_first" sorts before every projected name: each of them moves one place.
  ASSERT_TRUE(store.apply(update_request("leases", key, "SET a_first = :v", {{":v", S("n")}}), at_ms(1)).ok());
  EXPECT_EQ(index_wcu(), 1);  // the entry (keys and note) is unchanged
  ASSERT_TRUE(store.apply(update_request("leases", key, "REMOVE a_first"), at_ms(2)).ok());
  EXPECT_EQ(index_wcu(), 1);
  // A projected attribute changed while another one arrives in front of it.
  ASSERT_TRUE(store.apply(update_request("leases", key, "SET a_first = :v, note = :n",
                                         {{":v", S("n")}, {":n", S("m")}}), at_ms(3)).ok());
  EXPECT_EQ(index_wcu(), 2);
  // The same value under another name in the old place is not the same entry.
  ASSERT_TRUE(store.apply(update_request("leases", key, "REMOVE a_first SET b_second = :v", {{":v", S("m")}}),
                          at_ms(4)).ok());
  EXPECT_EQ(index_wcu(), 2);
}

// An update that names no projected attribute keeps the index entry without
// comparing it (the store's shortcut); one that names a projected attribute
// is compared, and writes the index only if the value changed. The same in a
// transaction, whose writes cost double.
TEST(DynamoStoreCost, OnlyAnUpdateThatChangesAProjectedAttributeWritesTheIndex) {
  for (const bool transact : {false, true}) {
    SCOPED_TRACE(transact ? "TransactWriteItems" : "UpdateItem");
    DynamoStore store(DynamoStoreOptions::faults_off(), 24);
    auto table = leases_table(dynamo::ProjectionType::include);
    table.global_secondary_indexes[0].projection.non_key_attributes = {"note"};
    ASSERT_TRUE(store.apply(table, at_ms(0)).ok());
    auto index_wcu = [&] { return store.accounting("leases").indexes.at("by_state").write_units; };
    ASSERT_TRUE(store.apply(put("leases", {{"pk", S("a")}, {"desired_state", S("STARTED")},
                                           {"lease_expires_at_ms", N(1)}, {"note", S("n")}, {"other_n", N(1)}}),
                            at_ms(0)).ok());
    ASSERT_EQ(index_wcu(), 1);
    int64_t at = 1;
    auto write = [&](std::string update, dynamo::ExpressionAttributeValues values,
                     dynamo::ExpressionAttributeNames names = {}) {
      auto request = update_request("leases", {{"pk", S("a")}}, std::move(update), std::move(values));
      request.write.expression_attribute_names = std::move(names);
      if (!transact) return store.apply(request, at_ms(at++)).ok();
      dynamo::TransactUpdate action;
      action.key = request.key;
      action.update_expression = *request.update_expression;
      action.condition.table_name = "leases";
      action.condition.expression_attribute_names = request.write.expression_attribute_names;
      action.condition.expression_attribute_values = request.write.expression_attribute_values;
      dynamo::TransactWriteItemsRequest transaction;
      transaction.transact_items.emplace_back(std::move(action));
      return store.apply(transaction, at_ms(at++)).ok();
    };
    const int64_t cost = transact ? 2 : 1;
    ASSERT_TRUE(write("SET other_n = :v", {{":v", N(2)}}));  // not projected: entry kept
    EXPECT_EQ(index_wcu(), 1);
    ASSERT_TRUE(write("ADD other_n :v REMOVE gone", {{":v", N(1)}}));
    EXPECT_EQ(index_wcu(), 1);
    ASSERT_TRUE(write("SET note = :n", {{":n", S("n")}}));  // projected, the same value: compared, kept
    EXPECT_EQ(index_wcu(), 1);
    ASSERT_TRUE(write("SET note = :n, other_n = :v", {{":n", S("m")}, {":v", N(3)}}));  // projected, changed
    EXPECT_EQ(index_wcu(), 1 + cost);
    ASSERT_TRUE(write("SET lease_expires_at_ms = :t", {{":t", N(2)}}));  // the index's range key: moved
    EXPECT_EQ(index_wcu(), 1 + 3 * cost);
    // Named through a placeholder: the plan holds the name it stands for.
    ASSERT_TRUE(write("SET #n = :n", {{":n", S("o")}}, {{"#n", "note"}}));
    EXPECT_EQ(index_wcu(), 1 + 4 * cost);
    ASSERT_TRUE(write("SET #n = :v", {{":v", N(4)}}, {{"#n", "other_n"}}));
    EXPECT_EQ(index_wcu(), 1 + 4 * cost);
    EXPECT_EQ(store.peek("leases", {{"pk", S("a")}})->at("other_n").text(), "4");
  }
}

class DynamoStoreCapacity : public ::testing::Test {
 protected:
  DynamoStore store_{DynamoStoreOptions::faults_off(), 23};
  Instant now_ = at_ms(0);
  void SetUp() override { ASSERT_TRUE(store_.apply(leases_table(), now_).ok()); }
  int64_t table_wcu() const { return store_.accounting("leases").table.write_units; }
  int64_t gsi_wcu() const {
    const auto& indexes = store_.accounting("leases").indexes;
    return indexes.contains("by_state") ? indexes.at("by_state").write_units : 0;
  }
};

TEST_F(DynamoStoreCapacity, WritesCostTheLargerItemAndFailedConditionsCostTheExistingOne) {
  const std::string kb(1024, 'x');
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"filler", S(kb + kb + "yy")}}), now_).ok());
  EXPECT_EQ(table_wcu(), 3);  // 2 KB + a few bytes
  ASSERT_TRUE(store_.apply(update_request("leases", {{"pk", S("a")}}, "REMOVE filler"), now_).ok());
  EXPECT_EQ(table_wcu(), 6);  // the larger of old (3 KB) and new
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"filler", S(kb + kb + "yy")}}), now_).ok());
  EXPECT_EQ(table_wcu(), 9);
  auto failing = update_request("leases", {{"pk", S("a")}}, "SET v = :v", {{":v", N(1)}}, "attribute_not_exists(pk)");
  EXPECT_FALSE(store_.apply(failing, now_).ok());
  EXPECT_EQ(table_wcu(), 12);  // sized by the existing 3 KB item
  auto missing = update_request("leases", {{"pk", S("b")}}, "SET v = :v", {{":v", N(1)}}, "attribute_exists(pk)");
  EXPECT_FALSE(store_.apply(missing, now_).ok());
  EXPECT_EQ(table_wcu(), 13);  // no item: 1 WCU
  EXPECT_EQ(store_.accounting("leases").conditional_check_failures, 2);
  EXPECT_EQ(gsi_wcu(), 0);  // none of these items is in the index
}

TEST_F(DynamoStoreCapacity, OneKindOfUpdateAndTransactionsAreCountedApart) {
  store_.track_update("leases", "SET v = :v");
  const std::string kb(1024, 'x');
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"filler", S(kb + "yy")}}), now_).ok());  // 2 WCU
  ASSERT_TRUE(store_.apply(update_request("leases", {{"pk", S("a")}}, "SET v = :v", {{":v", N(1)}}), now_).ok());
  ASSERT_TRUE(store_.apply(update_request("leases", {{"pk", S("a")}}, "SET w = :v", {{":v", N(1)}}), now_).ok());
  auto failing = update_request("leases", {{"pk", S("a")}}, "SET v = :v", {{":v", N(2)}}, "attribute_not_exists(pk)");
  EXPECT_FALSE(store_.apply(failing, now_).ok());
  const auto& counters = store_.accounting("leases");
  EXPECT_EQ(counters.table.write_units, 8);
  EXPECT_EQ(counters.tracked_update_write_units, 4);  // the tracked update and its failed repeat, 2 WCU each
  EXPECT_EQ(counters.transact_write_units, 0);
  dynamo::TransactWriteItemsRequest transaction;
  dynamo::TransactUpdate update;
  update.key = Item{{"pk", S("a")}};
  update.update_expression = "SET v = :v";
  update.condition.table_name = "leases";
  update.condition.expression_attribute_values = {{":v", N(3)}};
  transaction.transact_items.emplace_back(std::move(update));
  ASSERT_TRUE(store_.apply(transaction, now_).ok());
  EXPECT_EQ(counters.transact_write_units, 4);        // 2 KB, doubled in a transaction
  EXPECT_EQ(counters.tracked_update_write_units, 4);  // UpdateItem calls only
  EXPECT_EQ(counters.table.write_units, 12);
}

TEST_F(DynamoStoreCapacity, GsiWritesCountAddsUpdatesMovesAndRemovals) {
  const Item key{{"pk", S("a")}};
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"desired_state", S("STARTED")}, {"lease_expires_at_ms", N(1)}}), now_).ok());
  EXPECT_EQ(gsi_wcu(), 1);  // added
  ASSERT_TRUE(store_.apply(update_request("leases", key, "SET note = :n", {{":n", S("x")}}), now_).ok());
  EXPECT_EQ(gsi_wcu(), 2);  // updated in place (ALL projection)
  ASSERT_TRUE(store_.apply(update_request("leases", key, "SET lease_expires_at_ms = :t", {{":t", N(2)}}), now_).ok());
  EXPECT_EQ(gsi_wcu(), 4);  // index key changed: delete + put
  ASSERT_TRUE(store_.apply(update_request("leases", key, "REMOVE lease_expires_at_ms"), now_).ok());
  EXPECT_EQ(gsi_wcu(), 5);  // left the sparse index
  ASSERT_TRUE(store_.apply(update_request("leases", key, "SET note = :n", {{":n", S("y")}}), now_).ok());
  EXPECT_EQ(gsi_wcu(), 5);  // not in the index: free
}

TEST_F(DynamoStoreCapacity, ReadsCostPerFourKilobytesHalfWhenEventual) {
  const std::string blob(5 * 1024, 'x');
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"filler", S(blob)}, {"desired_state", S("S")}, {"lease_expires_at_ms", N(1)}}), now_).ok());
  ASSERT_TRUE(store_.apply(get("leases", {{"pk", S("a")}}, true), now_).ok());
  EXPECT_EQ(store_.accounting("leases").table.read_half_units, 4);  // 2 RCU
  ASSERT_TRUE(store_.apply(get("leases", {{"pk", S("a")}}, false), now_).ok());
  EXPECT_EQ(store_.accounting("leases").table.read_half_units, 6);  // + 1 RCU
  ASSERT_TRUE(store_.apply(get("leases", {{"pk", S("missing")}}, false), now_).ok());
  EXPECT_EQ(store_.accounting("leases").table.read_half_units, 7);  // + 0.5 RCU minimum
  auto on_index = query_request("leases", "desired_state = :s", {{":s", S("S")}});
  on_index.index_name = "by_state";
  on_index.return_consumed_capacity = dynamo::ReturnConsumedCapacity::total;
  const auto& response = as<dynamo::QueryResponse>(store_.apply(on_index, now_));
  ASSERT_TRUE(response.consumed_capacity.has_value());
  EXPECT_EQ(response.consumed_capacity->capacity_units, 1.0);  // 5 KB -> 8 KB, eventual
  EXPECT_EQ(store_.accounting("leases").indexes.at("by_state").read_half_units, 2);
  EXPECT_EQ(store_.accounting("leases").query, 1);
  EXPECT_EQ(store_.accounting("leases").get_item, 3);
}

TEST(DynamoStoreThrottle, HotPartitionThrottlesAndLeavesItemsUnchanged) {
  DynamoStore store = throttled_leases_store(29, 2);
  const Instant now = at_ms(0);
  auto bump = [&](const std::string& pk, Instant when) {
    return store.apply(update_request("leases", {{"pk", S(pk)}}, "ADD hits :one", {{":one", N(1)}}), when);
  };
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(bump("hot", now).ok()) << i;
  auto throttled = bump("hot", now);
  EXPECT_EQ(error_type(throttled), "ProvisionedThroughputExceededException");
  EXPECT_EQ(store.peek("leases", {{"pk", S("hot")}})->at("hits"), N(1000));
  EXPECT_EQ(store.accounting("leases").throttled_requests, 1);
  int other_partition_writes = 0;
  for (int i = 0; i < 10; ++i) other_partition_writes += bump("cold-" + std::to_string(i), now).ok() ? 1 : 0;
  EXPECT_GT(other_partition_writes, 0);
  EXPECT_LT(other_partition_writes, 10);  // some keys share the hot partition
  EXPECT_TRUE(bump("hot", now + Duration::from_ms(1)).ok());  // refilled 1 WCU per ms
  EXPECT_FALSE(bump("hot", now + Duration::from_ms(1)).ok());
}

TEST(DynamoStoreThrottle, ProvisionedTableAndGsiWithBurst) {
  DynamoStoreOptions options = DynamoStoreOptions::faults_off();
  options.throttling = true;
  DynamoStore store(options, 31);
  const Instant now = at_ms(0);
  auto table = leases_table();
  table.billing_mode.reset();
  table.provisioned_throughput = dynamo::ProvisionedThroughput{100, 5};
  table.global_secondary_indexes[0].provisioned_throughput = dynamo::ProvisionedThroughput{100, 1};
  ASSERT_TRUE(store.apply(table, now).ok());
  // The GSI holds 1 WCU: the first indexed write passes, the second is throttled by the index.
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("i0")}, {"desired_state", S("S")}, {"lease_expires_at_ms", N(0)}}), now).ok());
  auto by_index = store.apply(put("leases", {{"pk", S("i1")}, {"desired_state", S("S")}, {"lease_expires_at_ms", N(0)}}), now);
  EXPECT_EQ(error_type(by_index), "ProvisionedThroughputExceededException");
  EXPECT_NE(error_message(by_index).find("global secondary indexes"), std::string::npos);
  EXPECT_FALSE(store.peek("leases", {{"pk", S("i1")}}).has_value());
  // The table holds 5 WCU: 4 more unindexed writes pass, the next is throttled.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(store.apply(put("leases", {{"pk", S("t" + std::to_string(i))}}), now).ok());
  auto by_table = store.apply(put("leases", {{"pk", S("t9")}}), now);
  EXPECT_EQ(error_message(by_table),
            "The level of configured provisioned throughput for the table was exceeded. Consider increasing your "
            "provisioning level with the UpdateTable API.");
  // 100 idle seconds bank 500 WCU of burst (up to 300 s worth).
  const Instant later = now + Duration::from_s(100);
  int passed = 0;
  while (passed < 1000 && store.apply(put("leases", {{"pk", S("b" + std::to_string(passed))}}), later).ok()) ++passed;
  EXPECT_EQ(passed, 500);
}

TEST(DynamoStoreTtl, ExpiredItemsAreDeletedLateAndForFree) {
  DynamoStoreOptions options = DynamoStoreOptions::faults_off();
  options.ttl_sweep_lag_min = Duration::from_s(10);
  options.ttl_sweep_lag_max = Duration::from_s(10);
  options.ttl_attribute["leases"] = "expires_at";
  DynamoStore store(options, 37);
  const Instant now = at_ms(0);
  const int64_t now_s = now.ns() / 1'000'000'000;
  ASSERT_TRUE(store.apply(leases_table(), now).ok());
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("old")}, {"expires_at", N(now_s - 5)}}), now).ok());
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("later")}, {"expires_at", N(now_s + 30)}}), now).ok());
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("renewed")}, {"expires_at", N(now_s + 1)}}), now).ok());
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("text")}, {"expires_at", S("0")}}), now).ok());
  const int64_t wcu = store.accounting("leases").table.write_units;
  // Expired but not swept yet: reads still see it.
  EXPECT_TRUE(as<dynamo::GetItemResponse>(store.apply(get("leases", {{"pk", S("old")}}), now + Duration::from_s(5))).item);
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("renewed")}, {"expires_at", N(now_s + 3600)}}), now + Duration::from_s(5)).ok());
  EXPECT_EQ(store.advance(now + Duration::from_s(5)), now + Duration::from_s(10));
  store.advance(now + Duration::from_s(11));
  EXPECT_FALSE(store.peek("leases", {{"pk", S("old")}}).has_value());
  EXPECT_TRUE(store.peek("leases", {{"pk", S("later")}}).has_value());
  EXPECT_TRUE(store.peek("leases", {{"pk", S("renewed")}}).has_value());
  store.advance(now + Duration::from_s(41));
  EXPECT_FALSE(store.peek("leases", {{"pk", S("later")}}).has_value());
  EXPECT_TRUE(store.peek("leases", {{"pk", S("renewed")}}).has_value());
  EXPECT_TRUE(store.peek("leases", {{"pk", S("text")}}).has_value());  // not a Number: never expires
  EXPECT_EQ(store.accounting("leases").ttl_deletes, 2);
  EXPECT_EQ(store.accounting("leases").table.write_units, wcu + 1);  // only the renewal
}

std::string run_mixed_workload(uint64_t seed) {
  DynamoStoreOptions options;  // defaults: lag, stale reads, throttling
  options.partition_wcu_per_s = 50;
  DynamoStore store(options, seed);
  std::string transcript;
  Instant now = at_ms(0);
  EXPECT_TRUE(store.apply(leases_table(), now).ok());
  auto record = [&](const Result<Response>& result) {
    transcript += result.ok() ? dynamo::encode(result.value()).dump() : result.error().type;
    transcript += '\n';
  };
  for (int step = 0; step < 300; ++step) {
    now += Duration::from_ms(3);
    const std::string pk = "c" + std::to_string(step % 7);
    record(store.apply(update_request("leases", {{"pk", S(pk)}}, "SET desired_state = :s, lease_expires_at_ms = :t",
                                      {{":s", S(step % 2 ? "STARTED" : "STOPPED")}, {":t", N(step)}}), now));
    record(store.apply(get("leases", {{"pk", S(pk)}}, false), now));
    auto on_index = query_request("leases", "desired_state = :s", {{":s", S("STARTED")}});
    on_index.index_name = "by_state";
    record(store.apply(on_index, now));
  }
  return transcript;
}

TEST(DynamoStoreDeterminism, SameSeedSameResponses) {
  const std::string first = run_mixed_workload(41);
  EXPECT_EQ(first, run_mixed_workload(41));
  EXPECT_NE(first, run_mixed_workload(42));  // the seed does matter (lag and stale draws)
  EXPECT_NE(first.find("ProvisionedThroughputExceededException"), std::string::npos);
}

}  // namespace
}  // namespace leaseproof::models::test
