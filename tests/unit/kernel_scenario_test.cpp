// The kernel scenario end to end: golden trace hashes, determinism, the
// determinism check's own ability to catch and locate a divergence, and proof
// that the faults it claims to inject actually happened.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "scenarios/kernel.hpp"
#include "scenarios/scenario.hpp"
#include "sim/world.hpp"

namespace leaseproof::scenarios {
namespace {

using namespace literals;

RunResult run_seed(uint64_t seed, Duration duration = 10_min) {
  RunConfig config;
  config.seed = seed;
  config.duration = duration;
  return find_scenario("kernel")->run(config);
}

// tests/golden/kernel-trace-hashes.txt: "seed duration hash" per line. The same
// file is checked by the Debug and the Release build, so both must agree with it
// (and so with each other). docs/determinism.md says how to update it on purpose.
TEST(KernelScenario, GoldenTraceHashesAreUnchanged) {
  std::ifstream golden{LEASEPROOF_GOLDEN_DIR "/kernel-trace-hashes.txt"};
  ASSERT_TRUE(golden) << "missing " LEASEPROOF_GOLDEN_DIR "/kernel-trace-hashes.txt";
  std::string line;
  int checked = 0;
  while (std::getline(golden, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields{line};
    uint64_t seed = 0;
    std::string duration_text;
    std::string expected;
    ASSERT_TRUE(fields >> seed >> duration_text >> expected) << line;
    const auto duration = parse_duration(duration_text);
    ASSERT_TRUE(duration.has_value()) << line;
    const RunResult result = run_seed(seed, *duration);
    EXPECT_EQ(sim::format_hash(result.trace_hash), expected)
        << "seed " << seed << ": the trace changed; if on purpose, regenerate with scripts/update-golden.sh";
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

TEST(KernelScenario, SameSeedSameHashOtherSeedOtherHash) {
  EXPECT_EQ(run_seed(7).trace_hash, run_seed(7).trace_hash);
  EXPECT_NE(run_seed(7).trace_hash, run_seed(8).trace_hash);
}

TEST(KernelScenario, DeterminismCheckAgreesOnAnUnperturbedSeed) {
  RunConfig config;
  config.seed = 3;
  const DeterminismCheck check = check_determinism(*find_scenario("kernel"), config);
  EXPECT_TRUE(check.agreed);
  EXPECT_EQ(check.first_hash, check.second_hash);
}

TEST(KernelScenario, DeterminismCheckLocatesAnInjectedDivergence) {
  RunConfig config;
  config.seed = 3;
  config.duration = 1_min;
  // The second run gets one extra world event at 30 s: everything before it
  // matches, so the first divergent event is the first event at or after 30 s.
  const DeterminismCheck check = check_determinism(*find_scenario("kernel"), config, [](sim::World& world) {
    world.at(Instant::zero() + 30_s, [&world] {
      sim::TraceEvent extra;
      extra.true_time = world.now();
      extra.label = "perturbation";
      world.trace().record(extra);
    });
  });
  ASSERT_FALSE(check.agreed);
  ASSERT_TRUE(check.recurred_with_capture);
  EXPECT_GT(check.divergent_index, 0u);
  EXPECT_NE(check.first_event, check.second_event);
  EXPECT_NE(check.second_event.find(R"("t_ns":30000000000,"ev":"note")"), std::string::npos) << check.second_event;
}

TEST(KernelScenario, ShortRunsSkipTheLivenessCheckAndSayTheyDid) {
  const RunResult result = run_seed(1, 5_s);
  EXPECT_TRUE(result.passed());
  EXPECT_EQ(result.counter("liveness_checked"), 0u);
}

// Over a few dozen seeds every kind of fault must actually happen, and every
// run must pass: a kernel that injected nothing would pass trivially.
TEST(KernelScenario, SwarmOfSeedsPassesAndExercisesEveryFault) {
  std::map<std::string, uint64_t> totals;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const RunResult result = run_seed(seed);
    EXPECT_TRUE(result.passed()) << "seed " << seed << ": " << (result.violations.empty() ? "" : result.violations[0]);
    for (const auto& [name, value] : result.counters) totals[name] += value;
  }
  for (const char* name : {"replies", "timeouts", "drops.loss", "drops.partition", "drops.receiver_down",
                           "drops.late_reply", "crashes", "sigkills", "restarts", "pauses",
                           "resumes_with_waiting_work", "sigterms", "exits", "clock_steps", "partitions", "clogs",
                           "faults_fired", "liveness_checked"}) {
    EXPECT_GT(totals[name], 0u) << name << " never happened across the swarm";
  }
}

}  // namespace
}  // namespace leaseproof::scenarios
