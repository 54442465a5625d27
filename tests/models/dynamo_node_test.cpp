// The simulated DynamoDB as a network node: each fault reaches the caller as a
// real client would see it.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/dynamo/codec.hpp"
#include "models/dynamo/node.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {
namespace {

using namespace literals;
using dynamo::AttributeValue;
using dynamo::Item;

dynamo::Request request(std::string_view target, std::string_view json) {
  auto decoded = dynamo::decode_request(target, nlohmann::json::parse(json));
  LP_ASSERT_MSG(decoded.ok(), "{}", decoded.ok() ? "" : decoded.error().message);
  return *decoded;
}

constexpr std::string_view kCreate = R"J({"TableName":"connections","BillingMode":"PAY_PER_REQUEST",
  "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"desired_state","AttributeType":"S"},
                          {"AttributeName":"lease_expires_at_ms","AttributeType":"N"}],
  "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],
  "GlobalSecondaryIndexes":[{"IndexName":"by_state","Projection":{"ProjectionType":"ALL"},
    "KeySchema":[{"AttributeName":"desired_state","KeyType":"HASH"},{"AttributeName":"lease_expires_at_ms","KeyType":"RANGE"}]}]})J";

// A client process that runs a script of calls, one after another, and keeps
// what came back (nullptr entries: timeouts).
class ScriptedClient final : public sim::Process {
 public:
  struct Step {
    Duration after;  // wait this long (monotonic) before sending
    dynamo::Request request;
  };
  ScriptedClient(NodeId dynamo, std::vector<Step> steps, std::vector<std::optional<dynamo::Result<dynamo::Response>>>& out)
      : dynamo_(dynamo), steps_(std::move(steps)), out_(out) {}
  void on_start(sim::NodeContext& c) override { next(c); }
  void on_message(sim::NodeContext&, const sim::Envelope&) override {}

 private:
  void next(sim::NodeContext& c) {
    if (index_ >= steps_.size()) return;
    c.set_timer(steps_[index_].after, "next", [this, &c] {
      call_dynamo(c, dynamo_, dynamo::Request{steps_[index_].request}, 1_s, [this, &c](const dynamo::Result<dynamo::Response>* r) {
        out_.push_back(r == nullptr ? std::nullopt : std::optional(*r));
        ++index_;
        next(c);
      });
    });
  }
  NodeId dynamo_;
  std::vector<Step> steps_;
  size_t index_ = 0;
  std::vector<std::optional<dynamo::Result<dynamo::Response>>>& out_;
};

class DynamoNodeTest : public ::testing::Test {
 protected:
  explicit DynamoNodeTest(DynamoStoreOptions options = DynamoStoreOptions::faults_off()) : store_(options, 7) {
    world_.set_default_link(sim::LinkConfig{sim::LatencyDistribution{2_ms}, Ratio::zero(), false});
    dynamo_ = world_.add_node("dynamodb", {}, [this] { return std::make_unique<DynamoNode>(store_); });
  }
  NodeId add_client(std::vector<ScriptedClient::Step> steps) {
    return world_.add_node("client", {}, [this, steps] {
      return std::make_unique<ScriptedClient>(dynamo_, steps, results_);
    });
  }
  std::optional<Item> peek(std::string_view pk) {
    return store_.peek("connections", Item{{"pk", AttributeValue::string(std::string{pk})}});
  }

  sim::World world_{3};
  DynamoStore store_;
  NodeId dynamo_;
  std::vector<std::optional<dynamo::Result<dynamo::Response>>> results_;
};

TEST_F(DynamoNodeTest, LostReplyAfterTheWriteAppliedIsATimeoutButTheItemChanged) {
  NodeId client = add_client({{0_s, request("DynamoDB_20120810.CreateTable", kCreate)},
                              {0_s, request("DynamoDB_20120810.PutItem", R"J({"TableName":"connections",
                                 "Item":{"pk":{"S":"CONN#1"},"desired_state":{"S":"STARTED"},"lease_expires_at_ms":{"N":"0"}}})J")},
                              {2_s, request("DynamoDB_20120810.UpdateItem", R"J({"TableName":"connections","Key":{"pk":{"S":"CONN#1"}},
                                 "UpdateExpression":"SET lease_owner = :me","ConditionExpression":"attribute_not_exists(lease_owner)",
                                 "ExpressionAttributeValues":{":me":{"S":"worker-a"}}})J")}});
  // Replies get through until 1 s, then every reply from DynamoDB is lost.
  world_.at(Instant::zero() + 1_s, [&] {
    world_.set_link(dynamo_, client, sim::LinkConfig{sim::LatencyDistribution{2_ms}, Ratio::one(), false});
  });
  world_.run_until(Instant::zero() + 10_s);
  ASSERT_EQ(results_.size(), 3u);
  ASSERT_TRUE(results_[0].has_value());
  ASSERT_TRUE(results_[1].has_value());
  EXPECT_FALSE(results_[2].has_value());  // the caller saw a timeout...
  ASSERT_TRUE(peek("CONN#1").has_value());
  EXPECT_EQ(peek("CONN#1")->at("lease_owner"), AttributeValue::string("worker-a"));  // ...yet the write applied
  EXPECT_EQ(world_.trace().count_of(sim::EventKind::timeout), 1u);
}

// A retried TransactWriteItems answered from its ClientRequestToken is a
// success that applies nothing now: its note says so (checkers must not take
// it for a write at that instant: a lease may have moved on since the first
// attempt, which applied).
TEST_F(DynamoNodeTest, ATransactionRetryAnsweredFromItsTokenIsNotedAsAReplay) {
  std::vector<std::string> outcomes;
  world_.trace().add_observer([&outcomes](const sim::TraceEvent& e) {
    if (e.kind == sim::EventKind::note && e.label == "TransactWriteItems") outcomes.emplace_back(e.detail);
  });
  constexpr std::string_view kTransact = R"J({"ClientRequestToken":"record-c1-1-5","TransactItems":[
      {"Update":{"TableName":"connections","Key":{"pk":{"S":"CONN#1"}},"UpdateExpression":"SET last_seq = :s",
                 "ExpressionAttributeValues":{":s":{"N":"5"}}}}]})J";
  add_client({{0_s, request("DynamoDB_20120810.CreateTable", kCreate)},
              {0_s, request("DynamoDB_20120810.TransactWriteItems", kTransact)},
              {1_s, request("DynamoDB_20120810.TransactWriteItems", kTransact)}});
  world_.run_until(Instant::zero() + 5_s);
  ASSERT_EQ(results_.size(), 3u);
  ASSERT_TRUE(results_[2].has_value());
  EXPECT_TRUE(results_[2]->ok());  // the caller sees the success it missed
  EXPECT_EQ(outcomes, (std::vector<std::string>{"ok", std::string{kIdempotentReplay}}));
  EXPECT_EQ(store_.idempotent_replays(), 1u);
}

class DynamoNodeThrottlingTest : public DynamoNodeTest {
 protected:
  static DynamoStoreOptions throttled() {
    DynamoStoreOptions options = DynamoStoreOptions::faults_off();
    options.throttling = true;
    return options;
  }
  DynamoNodeThrottlingTest() : DynamoNodeTest(throttled()) {}
};

TEST_F(DynamoNodeThrottlingTest, AHotPartitionThrottlesAndTheCallerSeesIt) {
  // One write of about 8 KB (8 WCU) per round trip (~4 ms) to one item: about
  // 2,000 WCU/s, twice the partition's 1,000 WCU/s.
  std::vector<ScriptedClient::Step> steps{{0_s, request("DynamoDB_20120810.CreateTable", kCreate)}};
  const std::string blob(8000, 'x');
  for (int i = 0; i < 1500; ++i) {
    steps.push_back({Duration::zero(), request("DynamoDB_20120810.PutItem",
                                   R"J({"TableName":"connections","Item":{"pk":{"S":"CONN#hot"},"blob":{"S":")J" + blob + R"J("}}})J")});
  }
  add_client(std::move(steps));
  world_.run_until(Instant::zero() + 60_s);
  ASSERT_EQ(results_.size(), 1501u);
  size_t throttled = 0;
  for (const auto& r : results_) {
    ASSERT_TRUE(r.has_value());
    if (!r->ok() && r->error().type == dynamo::error_type::provisioned_throughput_exceeded) ++throttled;
  }
  EXPECT_GT(throttled, 100u);
  EXPECT_LT(throttled, 1500u);  // and the partition still serves its share
  EXPECT_GT(store_.accounting("connections").throttled_requests, 100);
}

class DynamoNodeGsiLagTest : public DynamoNodeTest {
 protected:
  static DynamoStoreOptions lagging() {
    DynamoStoreOptions options = DynamoStoreOptions::faults_off();
    options.gsi_lag = sim::LatencyDistribution{2_s};  // every GSI change takes 2 s
    return options;
  }
  DynamoNodeGsiLagTest() : DynamoNodeTest(lagging()) {}
};

TEST_F(DynamoNodeGsiLagTest, AGsiQueryMissesAJustWrittenItemAndSeesItAfterTheLag) {
  const auto query = request("DynamoDB_20120810.Query", R"J({"TableName":"connections","IndexName":"by_state",
      "KeyConditionExpression":"desired_state = :s","ExpressionAttributeValues":{":s":{"S":"STARTED"}}})J");
  add_client({{0_s, request("DynamoDB_20120810.CreateTable", kCreate)},
              {0_s, request("DynamoDB_20120810.PutItem", R"J({"TableName":"connections",
                 "Item":{"pk":{"S":"CONN#1"},"desired_state":{"S":"STARTED"},"lease_expires_at_ms":{"N":"0"}}})J")},
              {0_s, query},
              {3_s, query}});
  world_.run_until(Instant::zero() + 10_s);
  ASSERT_EQ(results_.size(), 4u);
  auto count = [&](size_t i) { return std::get<dynamo::QueryResponse>(results_[i]->value()).count; };
  EXPECT_EQ(count(2), 0);  // the write is acknowledged, the index has not caught up
  EXPECT_EQ(count(3), 1);
}

}  // namespace
}  // namespace leaseproof::models
