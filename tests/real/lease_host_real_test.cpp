// The embeddable runtime's LeaseHost (runtime/worker/lease_host.hpp) against a real
// dynalite: a connection gained, its messages recorded and checkpointed as the
// owner, a checkpoint refused by DynamoDB once another worker took the lease
// (`fenced`, the lease epoch in the condition), the stop that follows
// (`lost`), and writes after the stop refused in the process (`stopped`).
//
//   scripts/dynalite.sh install && export LEASEPROOF_DYNALITE_ENDPOINT=$(scripts/dynalite.sh start)
//   build/release/tests/real/lease_host_real_test

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/dynamo/codec.hpp"
#include "core/lease/requests.hpp"
#include "core/resume/recording.hpp"
#include "runtime/aws/dynamo_http_client.hpp"
#include "runtime/worker/lease_host.hpp"

namespace leaseproof::runtime {
namespace {

using nlohmann::json;

std::string endpoint() {
  const char* value = std::getenv("LEASEPROOF_DYNALITE_ENDPOINT");
  return value == nullptr ? std::string{} : std::string{value};
}

class LeaseHostReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (endpoint().empty()) {
      GTEST_FAIL() << "LEASEPROOF_DYNALITE_ENDPOINT is not set. Run\n"
                      "  scripts/dynalite.sh install && export LEASEPROOF_DYNALITE_ENDPOINT=$(scripts/dynalite.sh start)";
    }
    DynamoHttpClientOptions client;
    client.endpoint_url = endpoint();
    client_.emplace(client);
    const std::string suffix = fmt::format("{}-{}", getpid(), ::testing::UnitTest::GetInstance()->random_seed());
    options_.worker_id = "w1";
    options_.dynamo.endpoint_url = endpoint();
    options_.lease.table.name = "lh-leases-" + suffix;
    options_.sink.name = "lh-records-" + suffix;
    options_.lease.lease_duration = Duration::from_s(6);
    options_.lease.heartbeat_interval = Duration::from_ms(500);
    options_.lease.safety_margin = Duration::from_s(1);
    options_.lease.reconcile_interval = Duration::from_s(1);
    options_.lease.reconcile_jitter_max = Duration::from_ms(200);
    for (const dynamo::Request& request :
         {lease::create_table_request(options_.lease), resume::create_sink_table_request(options_.sink)}) {
      ASSERT_TRUE(send(request)) << "CreateTable failed";
    }
    ASSERT_TRUE(wait_until_table_active(*client_, options_.lease.table.name, Duration::from_s(20)));
    ASSERT_TRUE(wait_until_table_active(*client_, options_.sink.name, Duration::from_s(20)));
    ASSERT_TRUE(send(lease::create_connection_request(options_.lease, "c0", "ws://127.0.0.1:9/")));
  }
  void TearDown() override {
    if (!client_) return;
    client_->call("DeleteTable", json{{"TableName", options_.lease.table.name}});
    client_->call("DeleteTable", json{{"TableName", options_.sink.name}});
  }

  bool send(const dynamo::Request& request) {
    const DynamoHttpResult result =
        client_->call(std::string{dynamo::operation_name(dynamo::operation_of(request))}, dynamo::encode(request));
    return result.ok() && result.response().is_success();
  }

  // Runs the io_context until `done` or `timeout`.
  template <typename Done>
  bool run_until(Done done, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(20));
    }
    return done();
  }

  // A write's outcome, run to completion.
  template <typename Start>
  std::optional<WriteOutcome> outcome_of(Start start) {
    std::optional<WriteOutcome> outcome;
    start([&](WriteOutcome o) { outcome = o; });
    run_until([&] { return outcome.has_value(); }, std::chrono::seconds(10));
    return outcome;
  }

  boost::asio::io_context io_;
  std::optional<BlockingDynamoHttpClient> client_;
  LeaseHostOptions options_;
};

TEST_F(LeaseHostReal, WritesAsOwnerAreFencedOnceTheLeaseIsTakenAndStopAfter) {
  OwnedConnectionPtr owned;
  std::optional<StopReason> stopped;
  std::vector<std::string> log;
  LeaseHostCallbacks callbacks;
  callbacks.gained = [&](const OwnedConnectionPtr& o) { owned = o; };
  callbacks.stopped = [&](const OwnedConnectionPtr& o, StopReason reason) {
    EXPECT_EQ(o, owned);
    EXPECT_FALSE(o->acting());
    stopped = reason;
  };
  callbacks.log = [&](std::string_view line) { log.emplace_back(line); };
  LeaseHost host(io_, options_, callbacks);
  host.start();
  ASSERT_TRUE(run_until([&] { return owned != nullptr; }, std::chrono::seconds(10))) << "c0 never gained";
  EXPECT_EQ(owned->connection(), "c0");
  EXPECT_EQ(owned->epoch(), 1);
  EXPECT_EQ(owned->checkpoint(), (resume::Position{0, 0}));
  EXPECT_EQ(host.owned(), 1u);

  // As the owner: two messages recorded, the checkpoint advanced to 1.2.
  EXPECT_EQ(outcome_of([&](auto done) { owned->record({{1, 1, 64}, {1, 2, 64}}, done); }), WriteOutcome::written);
  EXPECT_EQ(owned->checkpoint(), (resume::Position{1, 2}));
  // Out of order: refused before anything is sent.
  EXPECT_THROW(owned->record({{1, 2, 64}}, [](WriteOutcome) {}), std::invalid_argument);

  // Another worker takes the lease (epoch 2) behind this one's back.
  const json steal{{"TableName", options_.lease.table.name},
                   {"Key", {{"pk", {{"S", lease::connection_key("c0")}}}}},
                   {"UpdateExpression", "SET lease_owner = :o, lease_epoch = :e"},
                   {"ExpressionAttributeValues", {{":o", {{"S", "w2"}}}, {":e", {{"N", "2"}}}}}};
  const DynamoHttpResult stolen = client_->call("UpdateItem", steal);
  ASSERT_TRUE(stolen.ok() && stolen.response().is_success());

  // Its checkpoint is refused by DynamoDB: the condition names epoch 1.
  const uint64_t calls_before = host.counters().calls_by_kind.at("sink_checkpoint");
  EXPECT_EQ(outcome_of([&](auto done) { owned->checkpoint({1, 3}, done); }), WriteOutcome::fenced);
  EXPECT_EQ(host.counters().calls_by_kind.at("sink_checkpoint"), calls_before + 1);
  EXPECT_EQ(owned->checkpoint(), (resume::Position{1, 2}));

  // The next renew fails: the host stops the connection as lost.
  ASSERT_TRUE(run_until([&] { return stopped.has_value(); }, std::chrono::seconds(10))) << "never stopped";
  EXPECT_EQ(*stopped, StopReason::lost);
  EXPECT_EQ(host.owned(), 0u);

  // After the stop nothing is sent: refused in the process.
  const uint64_t calls = host.counters().dynamo_calls;
  EXPECT_EQ(outcome_of([&](auto done) { owned->checkpoint({1, 9}, done); }), WriteOutcome::stopped);
  EXPECT_EQ(outcome_of([&](auto done) { owned->record({{1, 3, 64}}, done); }), WriteOutcome::stopped);
  EXPECT_EQ(host.counters().dynamo_calls, calls);
  EXPECT_EQ(host.counters().stops_by_reason.at("lost"), 1u);
  EXPECT_NE(host.metrics_text().find("leaseproof_worker_active_connections 0"), std::string::npos);
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& line) {
    return line.find(R"("event":"lease.close")") != std::string::npos && line.find(R"("reason":"lost")") != std::string::npos;
  }));
}

TEST_F(LeaseHostReal, DrainStopsEveryConnectionAndCallsDone) {
  std::vector<OwnedConnectionPtr> owned;
  std::vector<StopReason> reasons;
  LeaseHostCallbacks callbacks;
  callbacks.gained = [&](const OwnedConnectionPtr& o) { owned.push_back(o); };
  callbacks.stopped = [&](const OwnedConnectionPtr&, StopReason reason) { reasons.push_back(reason); };
  LeaseHost host(io_, options_, callbacks);
  host.start();
  ASSERT_TRUE(run_until([&] { return !owned.empty(); }, std::chrono::seconds(10)));
  bool drained = false;
  host.drain([&] { drained = true; });
  EXPECT_TRUE(host.draining());
  ASSERT_TRUE(run_until([&] { return drained; }, std::chrono::seconds(10)));
  EXPECT_EQ(reasons, std::vector<StopReason>{StopReason::drained});
  EXPECT_FALSE(owned.front()->acting());
}

// /readyz's answer: not ready before DynamoDB has answered, ready once it
// has, not ready while draining; a worker whose endpoint refuses every
// connection is never ready.
TEST_F(LeaseHostReal, ReadinessFollowsDynamoAnswersAndTheDrain) {
  std::vector<OwnedConnectionPtr> owned;
  LeaseHostCallbacks callbacks;
  callbacks.gained = [&](const OwnedConnectionPtr& o) { owned.push_back(o); };
  LeaseHost host(io_, options_, callbacks);
  EXPECT_EQ(host.readiness(), "no answer from DynamoDB yet");
  host.start();
  ASSERT_TRUE(run_until([&] { return !owned.empty(); }, std::chrono::seconds(10)));
  EXPECT_EQ(host.readiness(), "");
  bool drained = false;
  host.drain([&] { drained = true; });
  EXPECT_EQ(host.readiness(), "draining");
  ASSERT_TRUE(run_until([&] { return drained; }, std::chrono::seconds(10)));

  // A worker whose DynamoDB never answers (a port nothing listens on).
  boost::asio::ip::tcp::acceptor closed(io_, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const uint16_t port = closed.local_endpoint().port();
  closed.close();
  LeaseHostOptions unreachable = options_;
  unreachable.worker_id = "w2";
  unreachable.dynamo.endpoint_url = fmt::format("http://127.0.0.1:{}", port);
  LeaseHost lonely(io_, unreachable, LeaseHostCallbacks{});
  lonely.start();
  run_until([] { return false; }, std::chrono::seconds(1));
  EXPECT_EQ(lonely.readiness(), "no answer from DynamoDB yet");
  EXPECT_GT(lonely.counters().dynamo_transport_errors, 0u);
}

}  // namespace
}  // namespace leaseproof::runtime
