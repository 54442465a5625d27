// The registry end to end (label sim): the core passes the churn mix with
// every fault it guards against happening; each of the seed's three flaws,
// turned on alone, is caught by the property it breaks; runs replay exactly.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scenario_test_support.hpp"
#include "scenarios/registry.hpp"
#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios::test {
namespace {

// The property each violation names ("staleness", "delivery", "membership"),
// and for staleness which answer showed it.
std::vector<std::string> kinds(const RunResult& result) {
  std::vector<std::string> out;
  for (const std::string& v : result.violations) {
    if (v.starts_with("staleness: presence")) {
      out.push_back("staleness (presence)");
    } else if (v.starts_with("staleness:") && v.find("reported removed") != std::string::npos) {
      out.push_back("staleness (after a removal)");
    } else {
      out.push_back(violation_kind(v));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

TEST(RegistryScenario, TheCorePassesTheChurnMixAndEveryFaultHappened) {
  uint64_t throttled = 0, retried = 0, ghosts = 0, presence_ghosts = 0, ttl_deletes = 0, gave_up = 0, left = 0,
           leave_deletes = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const RunResult result = run("registry", seed);
    EXPECT_TRUE(result.passed()) << "seed " << seed << ": " << (result.violations.empty() ? "" : result.violations[0]);
    EXPECT_GT(result.counter("registry.delivered"), 10'000u);
    EXPECT_EQ(result.counter("registry.delivered"), result.counter("registry.expected_deliveries"));
    throttled += result.counter("dynamodb.throttled_requests");
    retried += counter_or_zero(result, "registry.unprocessed_retried");
    ghosts += result.counter("registry.ghost_posts");
    presence_ghosts += result.counter("registry.presence_online_ghosts");
    ttl_deletes += result.counter("dynamodb.ttl_deletes");
    gave_up += result.counter("registry.removals_failed");
    left += result.counter("registry.leaves_ok");
    leave_deletes += result.counter("registry.leave_deletes");
  }
  // What the properties guard against did happen: throttled batches whose
  // UnprocessedItems were retried, posts to dead connections, presence from
  // rows of dead connections, rows that lived until TTL deleted them.
  EXPECT_GT(throttled, 1000u);
  EXPECT_GT(retried, 100u);
  EXPECT_GT(ghosts, 1000u);
  EXPECT_GT(presence_ghosts, 1000u);
  EXPECT_GT(ttl_deletes, 5u);
  EXPECT_GT(gave_up, 0u);  // removals that ran out of attempts: reported, and excused
  // Clients left rooms while connected: the leave deleted their live rows.
  EXPECT_GT(left, 100u);
  EXPECT_GT(leave_deletes, 100u);
}

TEST(RegistryScenario, DroppedUnprocessedItemsAreCaughtByStaleness) {
  const RunResult result = run("registry", 1, {{"flaws", {"drop_unprocessed"}}});
  EXPECT_EQ(kinds(result), std::vector<std::string>{"staleness (after a removal)"});
  EXPECT_GT(counter_or_zero(result, "registry.unprocessed_dropped"), 0u);
  EXPECT_FALSE(result.failure_expected.empty());
}

TEST(RegistryScenario, ANoExpiryFilterPresenceIsCaughtByStaleness) {
  const RunResult result = run("registry", 1, {{"flaws", {"no_expiry_filter"}}});
  EXPECT_EQ(kinds(result), std::vector<std::string>{"staleness (presence)"});
  // The same seed with the filter passes.
  EXPECT_TRUE(run("registry", 1).passed());
}

TEST(RegistryScenario, OnePartitionPerBigRoomIsCaughtByMembership) {
  // A broadcast a second instead of ten: the joins, not the posts, overload
  // the one key (and the run is ten times cheaper).
  const RunResult result =
      run("registry-big-room", 1, {{"flaws", {"one_partition"}}, {"broadcast_interval", "1s"}}, Duration::from_min(2));
  EXPECT_EQ(kinds(result), std::vector<std::string>{"membership"});
  EXPECT_GT(result.counter("dynamodb.throttled_requests"), 1000u);
  const RunResult sharded = run("registry-big-room", 1, {{"broadcast_interval", "1s"}}, Duration::from_min(2));
  EXPECT_TRUE(sharded.passed()) << (sharded.violations.empty() ? "" : sharded.violations[0]);
  EXPECT_EQ(sharded.counter("dynamodb.throttled_requests"), 0u);
}

// The handler cut off from DynamoDB for 45 s: broadcasts in the partition
// fail and say so (counted, not violations), everything else waits and
// retries, and the run passes: joins within their bound, no stale answer
// (a retried query filters with the clock of its send).
TEST(RegistryScenario, AHandlerCutOffFromDynamoFailsBroadcastsOpenlyAndRecovers) {
  const RunResult result = run("registry", 1, {{"dynamo_cut_at", "10m"}, {"dynamo_cut_for", "45s"}});
  EXPECT_TRUE(result.passed()) << (result.violations.empty() ? "" : result.violations[0]);
  EXPECT_GT(result.counter("registry.broadcasts_failed_in_cut"), 10u);
  EXPECT_GT(counter_or_zero(result, "registry.operation_failed"), 10u);  // ran out of attempts in the partition
  EXPECT_NE(result.options.find("handler-DynamoDB cut at 10m0s for 45s"), std::string::npos) << result.options;
  EXPECT_EQ(run("registry", 1).counter("registry.broadcasts_failed_in_cut"), 0u);
}

// Seed 003's largest room: 50,000 members at DynamoDB's own per-partition
// limits, every connection closed at 30 s and back within seconds. The core's
// 8 shards absorb the burst of removals and joins; the seed's one key per
// room throttles them past the clients' join bound.
// Two tests, one run each, so that CTest runs them side by side (about 50 s
// each in Release).
TEST(RegistryScenario, AFiftyThousandMemberRoomAtDynamosOwnLimits) {
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan the two runs take five minutes of CI; the release tier runs them
  // (and the sanitized tier runs the same code paths at 2,000 members).
  GTEST_SKIP() << "50,000 members run in the release tier";
#endif
  const RunResult core = run("registry-huge-room", 1);
  EXPECT_TRUE(core.passed()) << (core.violations.empty() ? "" : core.violations[0]);
  EXPECT_GT(core.counter("registry.expected_deliveries") / core.counter("registry.broadcasts"), 30'000u);
  EXPECT_EQ(core.counter("registry.delivered"), core.counter("registry.expected_deliveries"));
  EXPECT_GT(core.counter("dynamodb.throttled_requests"), 1000u);  // the burst did throttle
}

TEST(RegistryScenario, AFiftyThousandMemberRoomOnOneKeyFailsMembership) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "50,000 members run in the release tier";
#endif
  const RunResult seed = run("registry-huge-room", 1, {{"flaws", {"one_partition"}}});
  EXPECT_EQ(kinds(seed), std::vector<std::string>{"membership"});
}

TEST(RegistryScenario, TheSwarmDrawsItsOptionsFromTheSeedAndReplaysExactly) {
  const RunResult a = run("registry-swarm", 7);
  const RunResult b = run("registry-swarm", 7);
  expect_same_result(a, b);
  EXPECT_NE(a.options, run("registry-swarm", 8).options);
  EXPECT_TRUE(a.passed()) << (a.violations.empty() ? "" : a.violations[0]);
}

TEST(RegistryScenario, ShrinkMakesADroppedUnprocessedItemsFailureSmall) {
  const Scenario* registry = find_scenario("registry");
  ASSERT_NE(registry, nullptr);
  RunConfig start;
  start.seed = 1;
  start.duration = Duration::from_min(30);
  start.parameters = {{"flaws", {"drop_unprocessed"}}};
  std::vector<std::string> changes;
  const RegistryShrinkResult result = shrink_registry(*registry, start, "", 100, [&](const RegistryShrinkStep& step) {
    changes.push_back(step.change);
  });
  ASSERT_TRUE(result.started_failing);
  EXPECT_EQ(result.property, "staleness");
  EXPECT_FALSE(result.budget_exhausted);
  EXPECT_FALSE(result.last.passed());
  EXPECT_LE(result.last.parameters.value("clients", 100), 3);  // from 100
  EXPECT_LT(result.last.duration, Duration::from_min(30));
  EXPECT_EQ(changes.front(), "fails staleness");
  // The reproduce line runs the shrunk failure again.
  RunConfig again = start;
  again.parameters = result.last.parameters;
  again.duration = result.last.duration;
  EXPECT_EQ(registry->run(again).trace_hash, result.last.trace_hash);
}

TEST(RegistryScenario, BadParametersNameTheField) {
  const Scenario* registry = find_scenario("registry");
  ASSERT_NE(registry, nullptr);
  RunConfig config;
  config.parameters = {{"flaws", {"no_filter"}}};
  EXPECT_NE(registry->validate(config).find("flaws: expected an array of"), std::string::npos);
  config.parameters = {{"ttl", "10m"}};
  EXPECT_NE(registry->validate(config).find("ttl (10m0s) must be longer than connection_cap (15m0s)"),
            std::string::npos)
      << registry->validate(config);
  config.parameters = {{"clients", 0}};
  EXPECT_NE(registry->validate(config).find("clients: expected an integer in 1..50000"), std::string::npos);
  config.parameters = {{"colour", 1}};
  EXPECT_NE(registry->validate(config).find("colour: unknown field"), std::string::npos);
  config.parameters = {{"clients", 50'000}, {"users", 50'000}, {"rooms", 5}, {"rooms_per_client", 3}};
  EXPECT_NE(registry->validate(config).find("clients x rooms_per_client (50000 x 3) must be at most 100,000"),
            std::string::npos)
      << registry->validate(config);
  config.parameters = {{"room", 5}};  // a prefix of a known field is no field
  EXPECT_NE(registry->validate(config).find("room: unknown field"), std::string::npos);
}

}  // namespace
}  // namespace leaseproof::scenarios::test
