// The connection registry's core (core/registry) through the runtime's
// DynamoDB HTTP client against a real dynalite: the table the core creates,
// every access pattern (join, members, presence with the expiry filter,
// removal through byConnection, broadcast with 410 pruning), and seed 003's
// verification command reproduced:
//
//   aws dynamodb query --table-name rt-registry --key-condition-expression 'pk = :pk'
//     --expression-attribute-values '{":pk":{"S":"room#r1#0"}}' --return-consumed-capacity TOTAL
//     --select COUNT
//
// whose consumed capacity must follow the room, not the table (a Scan of the
// same table, sent here only to compare, reads all of it).
//
//   scripts/dynalite.sh install && export LEASEPROOF_DYNALITE_ENDPOINT=$(scripts/dynalite.sh start)
//   build/release/tests/real/registry_real_test

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/dynamo/codec.hpp"
#include "core/registry/client.hpp"
#include "core/registry/requests.hpp"
#include "runtime/aws/dynamo_http_client.hpp"
#include "tests/core/registry_world.hpp"

namespace leaseproof::registry::test {
namespace {

using nlohmann::json;

std::string endpoint() {
  const char* value = std::getenv("LEASEPROOF_DYNALITE_ENDPOINT");
  return value == nullptr ? std::string{} : std::string{value};
}

class RegistryReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (endpoint().empty()) {
      GTEST_FAIL() << "LEASEPROOF_DYNALITE_ENDPOINT is not set. Run\n"
                      "  scripts/dynalite.sh install && export LEASEPROOF_DYNALITE_ENDPOINT=$(scripts/dynalite.sh start)";
    }
    runtime::DynamoHttpClientOptions options;
    options.endpoint_url = endpoint();
    client_.emplace(options);
    config_.table.name = fmt::format("rt-registry-{}-{}", getpid(), ::testing::UnitTest::GetInstance()->random_seed());
    config_.ttl = Duration::from_s(60);
    const auto created = call(create_table_request(config_));
    ASSERT_TRUE(created && created->ok()) << (created && !created->ok() ? created->error().message : "no answer");
    ASSERT_TRUE(runtime::wait_until_table_active(*client_, config_.table.name, Duration::from_s(20)));
  }
  void TearDown() override {
    if (client_) client_->call("DeleteTable", json{{"TableName", config_.table.name}});
  }

  // One typed request through the HTTP client; nullopt when no answer came.
  std::optional<dynamo::Result<dynamo::Response>> call(const dynamo::Request& request) {
    const dynamo::Operation operation = dynamo::operation_of(request);
    runtime::DynamoHttpResult result =
        client_->call(std::string{dynamo::operation_name(operation)}, dynamo::encode(request));
    if (!result.ok()) return std::nullopt;
    const runtime::DynamoHttpResponse& response = result.response();
    if (response.is_success()) return dynamo::decode_response(operation, response.body);
    return dynamo::Result<dynamo::Response>{dynamo::decode_error(response.body)};
  }
  std::unique_ptr<RegistryWorld> make_world() {
    return std::make_unique<RegistryWorld>(config_,
                                           [this](const dynamo::Request& request, Instant) { return call(request); });
  }
  // The consumed capacity of a raw request (JSON in, CapacityUnits out).
  double consumed(const std::string& operation, json body, int64_t* count = nullptr) {
    body["TableName"] = config_.table.name;
    body["ReturnConsumedCapacity"] = "TOTAL";
    runtime::DynamoHttpResult result = client_->call(operation, body);
    EXPECT_TRUE(result.ok() && result.response().is_success());
    if (!result.ok() || !result.response().is_success()) return -1;
    const json& reply = result.response().body;
    if (count != nullptr) *count = reply.value("Count", int64_t{-1});
    return reply.at("ConsumedCapacity").at("CapacityUnits").get<double>();
  }

  std::optional<runtime::BlockingDynamoHttpClient> client_;
  RegistryConfig config_;
};

TEST_F(RegistryReal, EveryAccessPatternAgainstDynalite) {
  const std::unique_ptr<RegistryWorld> world = make_world();
  RegistryWorld& w = *world;
  std::vector<std::string> r1;
  for (int i = 0; i < 12; ++i) {
    r1.push_back(fmt::format("a{:02}", i));
    ASSERT_EQ(w.join("r1", r1.back(), fmt::format("user{}", i % 4)).error, "");
  }
  ASSERT_EQ(w.join("r2", "a00", "user0").error, "");  // a00 is in two rooms
  EXPECT_EQ(member_connections(w.members("r1")), r1);

  // Removal through byConnection: both of a00's rows.
  const Done removed = w.remove("a00");
  EXPECT_EQ(removed.error, "");
  EXPECT_EQ(std::get<RemoveDone>(removed.outcome).rows_deleted, 2u);
  EXPECT_EQ(w.rows_of("a00", {"r1", "r2"}), 0u);

  // Broadcast: two of the eleven left are gone at the gateway.
  for (size_t i = 1; i < r1.size(); ++i) w.live().insert(r1[i]);
  w.live().erase("a05");
  w.live().erase("a06");
  const Done sent = w.broadcast("r1", "hello");
  EXPECT_EQ(sent.error, "");
  const auto& result = std::get<BroadcastDone>(sent.outcome);
  EXPECT_EQ(result.members, 11u);
  EXPECT_EQ(result.delivered, 9u);
  EXPECT_EQ(result.gone, 2u);
  EXPECT_EQ(result.rows_pruned, 2u);
  EXPECT_EQ(member_connections(w.members("r1")).size(), 9u);
  EXPECT_GT(sent.read_units, 0.0);  // dynalite reports consumed capacity too

  // Presence with the expiry filter on byUser (INCLUDE expiresAt): dynalite
  // never deletes expired rows, so the filter alone keeps them out.
  EXPECT_TRUE(std::get<PresenceDone>(w.presence("user1").outcome).online);
  w.advance(config_.ttl + Duration::from_s(1));
  EXPECT_FALSE(std::get<PresenceDone>(w.presence("user1").outcome).online);
  EXPECT_TRUE(member_connections(w.members("r1")).empty());
  ASSERT_EQ(w.join("r1", "b00", "user1").error, "");
  EXPECT_TRUE(std::get<PresenceDone>(w.presence("user1").outcome).online);
  EXPECT_EQ(member_connections(w.members("r1")), std::vector<std::string>{"b00"});
}

TEST_F(RegistryReal, TheSeedsConsumedCapacityCheckFollowsTheRoomNotTheTable) {
  const std::unique_ptr<RegistryWorld> world = make_world();
  RegistryWorld& w = *world;
  for (int i = 0; i < 12; ++i) ASSERT_EQ(w.join("r1", fmt::format("s{:02}", i), "u").error, "");
  int64_t in_shard = 0;
  for (int i = 0; i < 12; ++i) in_shard += shard_of(fmt::format("s{:02}", i), config_.room_shards) == 0 ? 1 : 0;
  ASSERT_GT(in_shard, 0) << "no member of r1 in shard 0: pick other ids";

  // The seed's command, verbatim in substance, and a Scan of the same table.
  struct Costs {
    int64_t count = -1;
    double room = 0;
    int64_t scanned = -1;
    double scan = 0;
  };
  auto measure = [&] {
    Costs costs;
    costs.room = consumed("Query", json{{"KeyConditionExpression", "pk = :pk"},
                                        {"ExpressionAttributeValues", {{":pk", {{"S", "room#r1#0"}}}}},
                                        {"Select", "COUNT"}},
                          &costs.count);
    costs.scan = consumed("Scan", json{{"Select", "COUNT"}}, &costs.scanned);
    return costs;
  };
  const Costs small = measure();
  // 2,400 memberships of other rooms: the table grows 200-fold, the room not.
  for (int i = 0; i < 2400; ++i) ASSERT_EQ(w.join(fmt::format("room{}", i % 40), fmt::format("o{}", i), "v").error, "");
  const Costs large = measure();
  fmt::print("room#r1#0 (Select COUNT): {} rows, {} RCU at table size {}, {} RCU at table size {}; "
             "Scan: {} RCU, then {} RCU\n",
             large.count, small.room, small.scanned, large.room, large.scanned, small.scan, large.scan);
  EXPECT_EQ(small.count, in_shard);
  EXPECT_EQ(large.count, in_shard);
  EXPECT_EQ(small.scanned, 12);
  EXPECT_EQ(large.scanned, 2412);
  EXPECT_EQ(large.room, small.room);  // the room's cost did not move
  EXPECT_LE(large.room, 0.5);         // a few hundred bytes: one half unit, eventually consistent
  EXPECT_GE(large.scan, 40 * large.room);  // the Scan reads the whole table
  EXPECT_GE(large.scan, 10 * small.scan);
}

}  // namespace
}  // namespace leaseproof::registry::test
