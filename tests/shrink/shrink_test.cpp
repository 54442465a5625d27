// Shrinking and replaying (label sim): the exact parameter form of a run's
// options, the shrinker on failing runs of the articles' algorithm, replay
// stopping at the event asked for.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenarios/lease.hpp"
#include "scenarios/replay.hpp"
#include "scenarios/shrink.hpp"

#include "../scenarios/scenario_test_support.hpp"

namespace leaseproof::scenarios {
namespace {

using json = nlohmann::json;
using test::run;

constexpr Duration operator""_min(unsigned long long minutes) { return Duration::from_min(static_cast<int64_t>(minutes)); }

LeaseScenarioOptions derived(std::string_view scenario, uint64_t seed, const json& parameters, Duration duration) {
  RunConfig config;
  config.seed = seed;
  config.duration = duration;
  config.parameters = parameters;
  LeaseScenarioOptions options;
  const std::string error = derive_lease_options(scenario, config, options);
  EXPECT_EQ(error, "") << parameters.dump();
  return options;
}

// A swarm seed's drawn faults as explicit parameters give the same run, in
// every mode (the swarm's clocks are drawn after the parameters: explicit
// clock fields must win over the draw).
TEST(ToParameters, SwarmSeedsRunTheSameWithTheirOptionsAsParameters) {
  const json variants[] = {{{"expiry", "wall"}}, {{"expiry", "counter"}}, {{"algorithm", "seed"}}};
  int compared = 0;
  for (const json& variant : variants) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const LeaseScenarioOptions options = derived("lease-swarm", seed, variant, 2_min);
      const json parameters = to_parameters(options);
      EXPECT_EQ(to_parameters(derived("lease-swarm", seed, parameters, 2_min)), parameters) << parameters.dump();
      const RunResult original = run("lease-swarm", seed, variant, 2_min);
      const RunResult explicit_run = run("lease-swarm", seed, parameters, 2_min);
      EXPECT_EQ(original.trace_hash, explicit_run.trace_hash) << "seed " << seed << " " << variant.dump();
      EXPECT_EQ(original.options, explicit_run.options);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 24);
}

// The same parameters applied to another preset give the same options: the
// list of faults replaces the preset's.
TEST(ToParameters, AppliedToAnotherSeedsPresetGivesTheSameOptions) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const LeaseScenarioOptions options = derived("lease-swarm", seed, json::object(), 10_min);
    const json parameters = to_parameters(options);
    EXPECT_EQ(to_parameters(derived("lease-swarm", seed + 1000, parameters, 10_min)), parameters) << "seed " << seed;
  }
  for (const char* scenario : {"lease-crash", "lease-scale", "lease-pause", "stream-hub-restart", "stream-crash-recording"}) {
    const LeaseScenarioOptions options = derived(scenario, 1, json::object(), 10_min);
    EXPECT_EQ(to_parameters(derived("lease-steady", 1, to_parameters(options), 10_min)), to_parameters(options))
        << scenario;
  }
}

TEST(ToParameters, NamedPresetsRunTheSame) {
  for (const char* scenario : {"lease-crash", "stream-hub-restart"}) {
    const LeaseScenarioOptions options = derived(scenario, 2, json::object(), 3_min);
    EXPECT_EQ(run(scenario, 2, json::object(), 3_min).trace_hash,
              run(scenario, 2, to_parameters(options), 3_min).trace_hash)
        << scenario;
  }
}

TEST(ToParameters, ExplicitClockFieldsWinOverTheSwarmsDraw) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const LeaseScenarioOptions drawn = derived("lease-swarm", seed, {{"expiry", "counter"}}, 10_min);
    const json given = {{"expiry", "counter"}, {"skew_max", "0s"}, {"drift_ppm_max", 0}, {"clock_steps", json::array()}};
    const LeaseScenarioOptions kept = derived("lease-swarm", seed, given, 10_min);
    EXPECT_EQ(kept.skew_max, Duration::zero());
    EXPECT_EQ(kept.drift_ppm_max, 0);
    EXPECT_TRUE(kept.clock_steps.empty());
    // Fields not given are still drawn, as before.
    const LeaseScenarioOptions partly = derived("lease-swarm", seed, {{"expiry", "counter"}, {"skew_max", "1s"}}, 10_min);
    EXPECT_EQ(partly.skew_max, Duration::from_s(1));
    EXPECT_EQ(partly.drift_ppm_max, drawn.drift_ppm_max);
    EXPECT_EQ(to_parameters(partly)["clock_steps"], to_parameters(drawn)["clock_steps"]);
  }
}

TEST(ToParameters, NullTurnsOffAPresetsOptionalFault) {
  const LeaseScenarioOptions deploy = derived("lease-deploy", 1, {{"deploy_at", nullptr}}, 10_min);
  EXPECT_FALSE(deploy.deploy_at.has_value());
  const LeaseScenarioOptions relay = derived("lease-swarm", 1, {{"stream", {{"relay_idle", nullptr}}}}, 10_min);
  EXPECT_FALSE(relay.stream.relay_idle.has_value());
  LeaseScenarioOptions options;
  EXPECT_NE(apply_parameters({{"deploy_at", 5}}, options), "");
}

TEST(MinimalParameters, NameOnlyWhatThePresetDoesNotGive) {
  LeaseScenarioOptions options = derived("lease-crash", 3, json::object(), 10_min);
  EXPECT_EQ(minimal_parameters("lease-crash", 3, options), json::object());
  options.workers = 2;
  options.crash_every = Duration::zero();
  const json minimal = minimal_parameters("lease-crash", 3, options);
  EXPECT_EQ(minimal, (json{{"workers", 2}, {"crash_every", "0s"}}));
  EXPECT_EQ(to_parameters(derived("lease-crash", 3, minimal, 10_min)), to_parameters(options));
}

TEST(Faults, CountsListEntriesAndSettings) {
  LeaseScenarioOptions options;
  EXPECT_EQ(faults_of(options).size(), 0u);
  options.pauses = {{0, Duration::from_s(10), Duration::from_s(5)}, {1, Duration::from_s(20), Duration::from_s(5)}};
  options.crash_every = Duration::from_min(1);
  options.loss = Ratio{1, 100};
  options.fast_worker_offset = Duration::from_s(16);
  options.stream.hub_crashes = {Duration::from_s(30)};  // streaming off: not a fault
  EXPECT_EQ(faults_of(options).size(), 5u);
  options.stream.enabled = true;
  EXPECT_EQ(faults_of(options).size(), 6u);
  const std::vector<Fault> faults = faults_of(options);
  LeaseScenarioOptions removed = options;
  faults.back().remove(removed);
  EXPECT_TRUE(removed.stream.hub_crashes.empty());
}

// ---- shrink ------------------------------------------------------------------------

RunConfig config_of(uint64_t seed, Duration duration, json parameters) {
  RunConfig config;
  config.seed = seed;
  config.duration = duration;
  config.parameters = std::move(parameters);
  return config;
}

ShrinkSettings settings_with_jobs(unsigned jobs) {
  ShrinkSettings settings;
  settings.jobs = jobs;
  settings.parallel = [](size_t count, const std::function<void(size_t)>& body) {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < count; ++i) threads.emplace_back([&body, i] { body(i); });
    for (std::thread& thread : threads) thread.join();
  };
  return settings;
}

void expect_small_reproducing(const ShrinkResult& result, std::string_view scenario) {
  ASSERT_TRUE(result.started_failing);
  EXPECT_EQ(result.property, "single ownership");
  EXPECT_GT(result.steps, 0u);
  EXPECT_LE(faults_of(result.last_options).size(), 2u);
  EXPECT_LE(result.last_options.workers, 2u);
  EXPECT_LE(result.runs, 500u);
  // The reproduce line's parameters give the same run, which fails the same way.
  const RunResult again = run(scenario, result.last.seed, result.last.parameters, result.last.duration);
  EXPECT_EQ(again.trace_hash, result.last.trace_hash);
  EXPECT_NE(first_violation_of(again, "single ownership"), "");
}

// The swarm with the articles' algorithm, seed 3: a pause longer than the
// lease on one of 5 workers, among stops, periodic crashes and streaming.
TEST(Shrink, SwarmSeedOfTheArticlesAlgorithmShrinksToTwoFaultsAndTwoWorkers) {
  const Scenario& swarm = *find_scenario("lease-swarm");
  const ShrinkResult result = shrink(swarm, config_of(3, 10_min, {{"algorithm", "seed"}}), settings_with_jobs(1));
  EXPECT_GE(faults_of(result.first_options).size(), 3u);
  EXPECT_GE(result.first_options.workers, 3u);
  expect_small_reproducing(result, "lease-swarm");
  // Threads never change the outcome.
  const ShrinkResult parallel = shrink(swarm, config_of(3, 10_min, {{"algorithm", "seed"}}), settings_with_jobs(3));
  EXPECT_EQ(parallel.last.parameters, result.last.parameters);
  EXPECT_EQ(parallel.last.duration, result.last.duration);
  EXPECT_EQ(parallel.runs, result.runs);
  EXPECT_EQ(parallel.steps, result.steps);
}

TEST(Shrink, FastClockOfTheArticlesAlgorithmShrinksToOneFault) {
  const json parameters = {{"workers", 3}, {"connections", 50}, {"crash_every", "4m"}, {"algorithm", "seed"},
                           {"fast_worker_offset", "16s"}};
  const ShrinkResult result =
      shrink(*find_scenario("lease-crash"), config_of(3, 10_min, parameters), settings_with_jobs(2));
  expect_small_reproducing(result, "lease-crash");
  EXPECT_EQ(faults_of(result.last_options).size(), 1u);
  // The fast worker 0 takes every lease at the start when there are few,
  // so the failure needs the fast clock on the other worker: the shrinker
  // moves it there (a clock step at 0s) and gets to one connection (it
  // stopped at 42 when it only dropped connections).
  EXPECT_EQ(result.last_options.connections, 1u);
  EXPECT_EQ(result.last_options.fast_worker_offset, Duration::zero());
  ASSERT_EQ(result.last_options.clock_steps.size(), 1u);
  EXPECT_EQ(result.last_options.clock_steps[0].worker, 1u);
  EXPECT_EQ(result.last_options.clock_steps[0].at, Duration::zero());
}

TEST(Shrink, APassingRunIsNotShrunk) {
  const ShrinkResult result = shrink(*find_scenario("lease-swarm"), config_of(7, 10_min, json::object()), {});
  EXPECT_FALSE(result.started_failing);
  EXPECT_TRUE(result.first.passed());
  EXPECT_EQ(result.steps, 0u);
  EXPECT_EQ(result.runs, 1u);
}

TEST(Shrink, AnotherPropertyThanTheOneThatFailsIsNotShrunk) {
  ShrinkSettings settings;
  settings.property = "exactly-once";
  const ShrinkResult result =
      shrink(*find_scenario("lease-swarm"), config_of(3, 10_min, {{"algorithm", "seed"}}), settings);
  EXPECT_FALSE(result.first.passed());
  EXPECT_FALSE(result.started_failing);
}

TEST(Shrink, ABudgetOfOneRunOnlyRunsTheStart) {
  ShrinkSettings settings;
  settings.budget_runs = 1;
  const ShrinkResult result =
      shrink(*find_scenario("lease-swarm"), config_of(3, 10_min, {{"algorithm", "seed"}}), settings);
  EXPECT_TRUE(result.started_failing);
  EXPECT_TRUE(result.budget_exhausted);
  EXPECT_EQ(result.steps, 0u);
  EXPECT_EQ(result.runs, 1u);
}

// ---- replay ------------------------------------------------------------------------

TEST(Replay, StopsAtTheEventAskedAndShowsTheEventsBeforeIt) {
  const Scenario& crash = *find_scenario("lease-crash");
  RunConfig config = config_of(1, 3_min, {{"workers", 3}, {"connections", 20}});
  config.keep_lines = true;
  const RunResult full = crash.run(config);
  config.keep_lines = false;
  const uint64_t index = full.events / 2;
  ReplayStop stop;
  stop.event = index;
  stop.context = 5;
  const ReplayResult replayed = replay(crash, config, stop);
  ASSERT_TRUE(replayed.reached);
  EXPECT_EQ(replayed.stop_index, index);
  EXPECT_EQ(replayed.stop_line, full.lines[index]);
  ASSERT_EQ(replayed.context.size(), 5u);
  for (size_t k = 0; k < 5; ++k) EXPECT_EQ(replayed.context[k], full.lines[index - 5 + k]);
  EXPECT_LT(replayed.events, full.events);  // it stopped: the rest did not run
  ASSERT_FALSE(replayed.state.empty());
  EXPECT_NE(replayed.state.front().find("worker-0#"), std::string::npos) << replayed.state.front();
  EXPECT_EQ(replayed.state[replayed.state.size() - 2], "connections with more than one acting owner: 0");
}

TEST(Replay, StopsAfterTheLastEventAtOrBeforeATime) {
  const Scenario& swarm = *find_scenario("lease-swarm");
  RunConfig config = config_of(5, 2_min, json::object());
  config.keep_lines = true;
  const RunResult full = swarm.run(config);
  config.keep_lines = false;
  ReplayStop stop;
  stop.time = Duration::from_s(61);
  const ReplayResult replayed = replay(swarm, config, stop);
  ASSERT_TRUE(replayed.reached);
  EXPECT_LE(replayed.stop_time, Duration::from_s(61));
  EXPECT_EQ(replayed.context.size(), 20u);
  EXPECT_EQ(replayed.stop_line, full.lines[replayed.stop_index]);
  EXPECT_EQ(json::parse(replayed.stop_line)["i"].get<uint64_t>(), replayed.stop_index);
  const json next = json::parse(full.lines[replayed.stop_index + 1]);
  EXPECT_GT(next["t_ns"].get<int64_t>(), Duration::from_s(61).ns());
  // A time after the last event of the run stops at the run's last event.
  stop.time = 2_min;
  const ReplayResult at_end = replay(swarm, config, stop);
  ASSERT_TRUE(at_end.reached);
  EXPECT_EQ(at_end.stop_index, full.events - 1);
}

TEST(Replay, AnEventBeyondTheEndIsNotReached) {
  const Scenario& kernel = *find_scenario("kernel");
  RunConfig config = config_of(1, Duration::from_s(10), json::object());
  ReplayStop stop;
  stop.event = 1'000'000'000;
  const ReplayResult replayed = replay(kernel, config, stop);
  EXPECT_FALSE(replayed.reached);
  EXPECT_EQ(replayed.events, kernel.run(config).events);
  EXPECT_TRUE(replayed.state.empty());
}

// Replaying at the overlap shows both owners. The parameters are what shrink
// printed for `--seed 3 --algorithm seed` (the test above).
// Replays a failing run of seed 3 to where the checker says its first
// overlap begins ("... from @1m11.69s to ..."); `why` gets the replay's
// explanation as one text.
ReplayResult replay_at_first_overlap(std::string_view scenario, const json& parameters, Duration duration,
                                     std::string& why) {
  const RunResult failing = run(scenario, 3, parameters, duration);
  const std::string violation = first_violation_of(failing, "single ownership");
  EXPECT_NE(violation, "");
  const size_t from = violation.find("from @") + 6;
  const std::optional<Duration> begins = parse_duration(violation.substr(from, violation.find(' ', from) - from));
  EXPECT_TRUE(begins.has_value()) << violation;
  ReplayStop stop;
  stop.time = begins.value_or(Duration::zero());
  ReplayResult replayed = replay(*find_scenario(scenario), config_of(3, duration, parameters), stop);
  EXPECT_TRUE(replayed.reached);
  for (const std::string& line : replayed.why) why += line + "\n";
  return replayed;
}

TEST(Replay, ShowsBothOwnersAtASingleOwnershipViolation) {
  const json parameters = {{"workers", 2}, {"connections", 1}, {"algorithm", "seed"}, {"crash_every", "0s"},
                           {"pauses", {{{"worker", 0}, {"at", "30.836320532s"}, {"length", "40.863140286s"}}}},
                           {"stops", json::array()}, {"stream", {{"enabled", false}}}, {"stable_worker_ids", false}};
  std::string why;
  const ReplayResult replayed = replay_at_first_overlap("lease-swarm", parameters, Duration::from_s(90), why);
  bool overlap = false;
  for (const std::string& line : replayed.state) overlap |= line == "connections with more than one acting owner: 1";
  EXPECT_TRUE(overlap);
  // Why: each owner's last accepted acquire, and the paused owner's renew
  // from before its pause, whose expiry (by true time) the other's acquire
  // came after.
  EXPECT_NE(why.find("c0 acquire by worker-0#1"), std::string::npos) << why;
  EXPECT_NE(why.find("c0 acquire by worker-1#1"), std::string::npos) << why;
  EXPECT_NE(why.find("c0 renew by worker-0#1"), std::string::npos) << why;
  EXPECT_NE(why.find("condition: attribute_not_exists(lease_owner) OR lease_expires_at_ms < :now"), std::string::npos)
      << why;
  // worker-1's acquire replaced worker-0's expired renew: the other worker
  // acted correctly, the paused one kept acting past its lease.
  EXPECT_NE(why.find("lease_owner = worker-0#1"), std::string::npos) << why;
  EXPECT_NE(why.find("at the apply the stored lease had expired"), std::string::npos) << why;
  EXPECT_NE(why.find("wall clocks then: dynamodb on time, worker-0 on time (paused), worker-1 on time"),
            std::string::npos)
      << why;
}

// The articles' fast-clock failure, as shrink reduces it: the replay shows
// that the fast worker's acquire passed the condition with its own "now",
// 16 s ahead, while the owner's renewed expiry was still ahead in true time.
TEST(Replay, ExplainsAnAcquireThatAFastClockGotAccepted) {
  const json parameters = {{"workers", 2}, {"connections", 42}, {"algorithm", "seed"}, {"crash_every", "0s"},
                           {"fast_worker_offset", "16s"}};
  std::string why;
  (void)replay_at_first_overlap("lease-crash", parameters, Duration::from_s(75), why);
  EXPECT_NE(why.find("with the sender's wall clock 16s ahead"), std::string::npos) << why;
  EXPECT_NE(why.find("wall clocks then: dynamodb on time, worker-0 16s ahead, worker-1 on time"), std::string::npos)
      << why;
  // The acquire that made the second owner passed its condition on a lease
  // another worker held and had renewed: still valid in true time.
  EXPECT_NE(why.find("lease_owner = worker-1#1"), std::string::npos) << why;
  EXPECT_NE(why.find("at the apply the stored lease still had"), std::string::npos) << why;
  EXPECT_NE(why.find(", :now @"), std::string::npos) << why;

  // Asked about one connection at a stop without an overlap: its owner's
  // writes; about one that does not exist: says it was not found.
  ReplayStop stop;
  stop.time = Duration::from_s(20);
  stop.explain = "c1";
  const ReplayResult one = replay(*find_scenario("lease-crash"), config_of(3, Duration::from_s(75), parameters), stop);
  ASSERT_FALSE(one.why.empty());
  EXPECT_TRUE(one.why.front().starts_with("c1 acquire by worker-")) << one.why.front();
  stop.explain = "c999";
  const ReplayResult none = replay(*find_scenario("lease-crash"), config_of(3, Duration::from_s(75), parameters), stop);
  EXPECT_TRUE(none.why.empty());
  EXPECT_FALSE(none.explained);
  EXPECT_TRUE(one.explained);
}

}  // namespace
}  // namespace leaseproof::scenarios
