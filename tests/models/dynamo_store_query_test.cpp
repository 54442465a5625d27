// DynamoStore: Query on the table and on GSIs: sort order, Limit and paging,
// filters, COUNT, the 1 MB page, sparse and lagging GSIs.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dynamo_store_test_support.hpp"

namespace leaseproof::models::test {
namespace {

std::vector<AttributeValue> column(const dynamo::QueryResponse& response, const std::string& name) {
  std::vector<AttributeValue> values;
  for (const auto& item : *response.items) values.push_back(item.at(name));
  return values;
}

class DynamoStoreQuery : public ::testing::Test {
 protected:
  DynamoStore store_{DynamoStoreOptions::faults_off(), 11};
  Instant now_ = at_ms(0);

  void SetUp() override {
    ASSERT_TRUE(store_.apply(events_table(), now_).ok());
    ASSERT_TRUE(store_.apply(leases_table(), now_).ok());
  }
  void put_event(int64_t sk, int64_t value) {
    ASSERT_TRUE(store_.apply(put("events", {{"pk", S("p")}, {"sk", N(sk)}, {"v", N(value)}}), now_).ok());
  }
  dynamo::QueryResponse run(const dynamo::QueryRequest& request) {
    return as<dynamo::QueryResponse>(store_.apply(request, now_));
  }
};

TEST_F(DynamoStoreQuery, SortsNumbersNumericallyBothWays) {
  for (int64_t sk : {10, -3, 2, 100, 0}) put_event(sk, sk);
  ASSERT_TRUE(store_.apply(put("events", {{"pk", S("q")}, {"sk", N(1)}}), now_).ok());  // other partition key
  auto request = query_request("events", "pk = :p", {{":p", S("p")}});
  EXPECT_EQ(column(run(request), "sk"), (std::vector<AttributeValue>{N(-3), N(0), N(2), N(10), N(100)}));
  request.scan_index_forward = false;
  EXPECT_EQ(column(run(request), "sk"), (std::vector<AttributeValue>{N(100), N(10), N(2), N(0), N(-3)}));
  auto ranged = query_request("events", "pk = :p AND sk BETWEEN :lo AND :hi", {{":p", S("p")}, {":lo", N(0)}, {":hi", N(10)}});
  EXPECT_EQ(column(run(ranged), "sk"), (std::vector<AttributeValue>{N(0), N(2), N(10)}));
}

// Integer keys are compared as integers, others as decimals: mixed, they
// still sort by value.
TEST_F(DynamoStoreQuery, SortsIntegerAndDecimalNumbersTogether) {
  for (const char* sk : {"10", "-3", "2.5", "100", "0", "-0.5", "99.99", "-1000000000000000000", "3"}) {
    ASSERT_TRUE(store_.apply(put("events", {{"pk", S("p")}, {"sk", N(std::string{sk})}}), now_).ok());
  }
  auto request = query_request("events", "pk = :p", {{":p", S("p")}});
  EXPECT_EQ(column(run(request), "sk"),
            (std::vector<AttributeValue>{N("-1000000000000000000"), N(-3), N("-0.5"), N(0), N("2.5"), N(3), N(10),
                                         N("99.99"), N(100)}));
}

TEST_F(DynamoStoreQuery, SortsStringsByBytes) {
  auto table = events_table();
  table.table_name = "strings";
  table.attribute_definitions[1].attribute_type = dynamo::ScalarAttributeType::s;
  ASSERT_TRUE(store_.apply(table, now_).ok());
  for (const char* sk : {"b", "a", "B", "aa"}) {
    ASSERT_TRUE(store_.apply(put("strings", {{"pk", S("p")}, {"sk", S(sk)}}), now_).ok());
  }
  auto request = query_request("strings", "pk = :p", {{":p", S("p")}});
  EXPECT_EQ(column(run(request), "sk"), (std::vector<AttributeValue>{S("B"), S("a"), S("aa"), S("b")}));
}

TEST_F(DynamoStoreQuery, PagesConcatenateToTheSingleQuery) {
  for (int64_t sk = 0; sk < 50; ++sk) put_event(sk, sk % 3);
  auto whole = query_request("events", "pk = :p AND sk >= :from", {{":p", S("p")}, {":from", N(5)}, {":zero", N(0)}});
  whole.filter_expression = "v = :zero";
  const auto expected = run(whole);
  EXPECT_FALSE(expected.last_evaluated_key.has_value());
  std::vector<Item> paged;
  int64_t scanned = 0;
  auto page_request = whole;
  page_request.limit = 7;
  int pages = 0;
  while (true) {
    const auto page = run(page_request);
    ++pages;
    EXPECT_LE(page.scanned_count, 7);
    scanned += page.scanned_count;
    paged.insert(paged.end(), page.items->begin(), page.items->end());
    if (!page.last_evaluated_key) break;
    EXPECT_EQ(page.last_evaluated_key->size(), 2u);  // table key only
    page_request.exclusive_start_key = page.last_evaluated_key;
  }
  EXPECT_EQ(paged, *expected.items);
  EXPECT_EQ(scanned, expected.scanned_count);
  EXPECT_EQ(scanned, 45);
  // 45 items in pages of 7: the 7th page is short, so it carries no key.
  EXPECT_EQ(pages, 7);
}

TEST_F(DynamoStoreQuery, LimitCountsItemsBeforeTheFilterAndCountSelectOmitsItems) {
  for (int64_t sk = 0; sk < 10; ++sk) put_event(sk, sk % 2);
  auto request = query_request("events", "pk = :p", {{":p", S("p")}, {":one", N(1)}});
  request.filter_expression = "v = :one";
  request.limit = 5;
  auto page = run(request);
  EXPECT_EQ(page.scanned_count, 5);
  EXPECT_EQ(page.count, 2);
  ASSERT_TRUE(page.last_evaluated_key.has_value());
  EXPECT_EQ(page.last_evaluated_key->at("sk"), N(4));
  request.limit.reset();
  request.select = dynamo::Select::count;
  auto counted = run(request);
  EXPECT_FALSE(counted.items.has_value());
  EXPECT_EQ(counted.count, 5);
  // Limit equal to what is left still returns a key (as DynamoDB does).
  auto exact = query_request("events", "pk = :p", {{":p", S("p")}});
  exact.limit = 10;
  EXPECT_TRUE(run(exact).last_evaluated_key.has_value());
}

TEST_F(DynamoStoreQuery, PageStopsAtOneMegabyte) {
  const std::string blob(100 * 1024, 'x');
  for (int64_t sk = 0; sk < 30; ++sk) {
    ASSERT_TRUE(store_.apply(put("events", {{"pk", S("p")}, {"sk", N(sk)}, {"blob", S(blob)}}), now_).ok());
  }
  auto page = run(query_request("events", "pk = :p", {{":p", S("p")}}));
  EXPECT_EQ(page.count, 11);  // 10 items are just under 1 MB; the 11th crosses it
  ASSERT_TRUE(page.last_evaluated_key.has_value());
  EXPECT_EQ(page.last_evaluated_key->at("sk"), N(10));
}

TEST_F(DynamoStoreQuery, GsiIsSparseAndRejectsConsistentReads) {
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("a")}, {"desired_state", S("STARTED")}, {"lease_expires_at_ms", N(0)}}), now_).ok());
  ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("b")}, {"desired_state", S("STARTED")}}), now_).ok());  // no range key
  auto request = query_request("leases", "desired_state = :s", {{":s", S("STARTED")}});
  request.index_name = "by_state";
  EXPECT_EQ(column(run(request), "pk"), (std::vector<AttributeValue>{S("a")}));
  request.consistent_read = true;
  EXPECT_EQ(error_message(store_.apply(request, now_)), "Consistent reads are not supported on global secondary indexes");
}

TEST_F(DynamoStoreQuery, GsiPagingKeyHoldsTableAndIndexKeys) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store_.apply(put("leases", {{"pk", S("c" + std::to_string(i))}, {"desired_state", S("STARTED")},
                                            {"lease_expires_at_ms", N(100 - i)}}), now_).ok());
  }
  auto request = query_request("leases", "desired_state = :s AND lease_expires_at_ms < :now", {{":s", S("STARTED")}, {":now", N(99)}});
  request.index_name = "by_state";
  request.limit = 2;
  auto first = run(request);
  EXPECT_EQ(column(first, "pk"), (std::vector<AttributeValue>{S("c4"), S("c3")}));
  ASSERT_TRUE(first.last_evaluated_key.has_value());
  EXPECT_EQ(*first.last_evaluated_key,
            (Item{{"pk", S("c3")}, {"desired_state", S("STARTED")}, {"lease_expires_at_ms", N(97)}}));
  request.exclusive_start_key = first.last_evaluated_key;
  EXPECT_EQ(column(run(request), "pk"), (std::vector<AttributeValue>{S("c2")}));
}

// An index entry holds only what its projection names (the table and index
// keys, plus INCLUDE's attributes), and shows the version the lag allows,
// while the table itself holds and shows every attribute of the latest one.
TEST(DynamoStoreGsiProjection, EntriesHoldTheProjectedAttributesOfTheVersionTheyShow) {
  DynamoStoreOptions options = DynamoStoreOptions::faults_off();
  options.gsi_lag = sim::LatencyDistribution{Duration::from_ms(200), Duration::zero(), Ratio::zero(), Duration::zero()};
  for (const auto type : {dynamo::ProjectionType::keys_only, dynamo::ProjectionType::include,
                          dynamo::ProjectionType::all}) {
    SCOPED_TRACE(static_cast<int>(type));
    DynamoStore store(options, 5);
    Instant now = at_ms(0);
    auto table = leases_table(type);
    if (type == dynamo::ProjectionType::include) {
      table.global_secondary_indexes[0].projection.non_key_attributes = {"lease_owner"};
    }
    ASSERT_TRUE(store.apply(table, now).ok());
    const Item keys = {{"pk", S("a")}, {"desired_state", S("STARTED")}, {"lease_expires_at_ms", N(5)}};
    Item first = keys;
    first.emplace("lease_owner", S("w1"));
    first.emplace("ws_url", S("wss://one"));
    ASSERT_TRUE(store.apply(put("leases", first), now).ok());
    now += Duration::from_ms(300);
    store.advance(now);
    Item second = first;
    second["lease_owner"] = S("w2");
    second["ws_url"] = S("wss://two");
    ASSERT_TRUE(store.apply(put("leases", second), now).ok());

    auto request = query_request("leases", "desired_state = :s", {{":s", S("STARTED")}});
    request.index_name = "by_state";
    auto expected = [&](const Item& version) {
      if (type == dynamo::ProjectionType::all) return version;
      Item entry = keys;
      if (type == dynamo::ProjectionType::include) entry.emplace("lease_owner", version.at("lease_owner"));
      return entry;
    };
    auto seen = as<dynamo::QueryResponse>(store.apply(request, now + Duration::from_ms(1)));
    ASSERT_EQ(seen.items->size(), 1u);
    EXPECT_EQ(seen.items->front(), expected(first));  // the lag still shows the first version
    now += Duration::from_ms(300);
    store.advance(now);
    seen = as<dynamo::QueryResponse>(store.apply(request, now));
    ASSERT_EQ(seen.items->size(), 1u);
    EXPECT_EQ(seen.items->front(), expected(second));
    EXPECT_EQ(store.peek("leases", {{"pk", S("a")}}), second);
  }
}

TEST(DynamoStoreGsiLag, ReadMissesAJustWrittenItemUntilTheLagPasses) {
  DynamoStoreOptions options = DynamoStoreOptions::faults_off();
  options.gsi_lag = sim::LatencyDistribution{Duration::from_ms(200), Duration::zero(), Ratio::zero(), Duration::zero()};
  DynamoStore store(options, 5);
  const Instant start = at_ms(0);
  ASSERT_TRUE(store.apply(leases_table(), start).ok());
  ASSERT_TRUE(store.apply(put("leases", {{"pk", S("a")}, {"desired_state", S("STARTED")}, {"lease_expires_at_ms", N(0)}}), start).ok());
  auto request = query_request("leases", "desired_state = :s", {{":s", S("STARTED")}});
  request.index_name = "by_state";
  EXPECT_EQ(as<dynamo::QueryResponse>(store.apply(request, start + Duration::from_ms(1))).count, 0);
  EXPECT_EQ(store.pending_index_changes(), 1u);
  const Instant due = store.advance(start + Duration::from_ms(1));
  EXPECT_EQ(due, start + Duration::from_ms(200));
  EXPECT_EQ(store.advance(due), Instant::max());
  EXPECT_EQ(as<dynamo::QueryResponse>(store.apply(request, due)).count, 1);
  // The base table itself is current at once.
  EXPECT_TRUE(store.peek("leases", {{"pk", S("a")}}).has_value());
}

TEST(DynamoStoreGsiLag, ChangesOfOneItemBecomeVisibleInOrder) {
  DynamoStoreOptions options = DynamoStoreOptions::faults_off();
  options.gsi_lag = sim::LatencyDistribution{Duration::from_ms(5), Duration::from_ms(100), Ratio{1, 2}, Duration::from_s(5)};
  DynamoStore store(options, 9);
  Instant now = at_ms(0);
  ASSERT_TRUE(store.apply(leases_table(), now).ok());
  for (int i = 0; i < 40; ++i) {
    now += Duration::from_ms(10);
    ASSERT_TRUE(store.apply(put("leases", {{"pk", S("a")}, {"desired_state", S(i % 2 ? "STOPPED" : "STARTED")},
                                           {"lease_expires_at_ms", N(i)}}), now).ok());
  }
  store.advance(now + Duration::from_s(10));
  auto request = query_request("leases", "desired_state = :s", {{":s", S("STOPPED")}});
  request.index_name = "by_state";
  const auto& stopped = as<dynamo::QueryResponse>(store.apply(request, now + Duration::from_s(10)));
  ASSERT_EQ(stopped.count, 1);
  EXPECT_EQ(stopped.items->at(0).at("lease_expires_at_ms"), N(39));
  request.expression_attribute_values[":s"] = S("STARTED");
  EXPECT_EQ(as<dynamo::QueryResponse>(store.apply(request, now + Duration::from_s(10))).count, 0);
}

TEST_F(DynamoStoreQuery, FilterOnKeyAttributesIsRejected) {
  auto request = query_request("events", "pk = :p", {{":p", S("p")}, {":v", N(1)}});
  request.filter_expression = "sk = :v";
  EXPECT_EQ(error_message(store_.apply(request, now_)),
            "Filter Expression can only contain non-primary key attributes: Primary key attribute: sk");
}

}  // namespace
}  // namespace leaseproof::models::test
