#pragma once
// Shared by the scenario tests: run a named scenario by seed, read counters.

#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "base/assert.hpp"
#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios::test {

// Runs `scenario` as the CLI would; parameters must be valid (asserted).
// With `background_checks`, the checkers run on a thread of their own, as
// under the CLI's `run`.
inline RunResult run(std::string_view scenario, uint64_t seed, nlohmann::json parameters = nlohmann::json::object(),
                     std::optional<Duration> duration = std::nullopt, bool background_checks = false) {
  const Scenario* found = find_scenario(scenario);
  LP_ASSERT(found != nullptr);
  RunConfig config;
  config.seed = seed;
  config.duration = duration;
  config.parameters = std::move(parameters);
  config.background_checks = background_checks;
  const std::string error = found->validate(config);
  LP_ASSERT_MSG(error.empty(), "{}", error);
  return found->run(config);
}

// Everything a run reports, for comparing two runs of one seed.
inline void expect_same_result(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.scheduler_events, b.scheduler_events);
  EXPECT_EQ(a.violations, b.violations);
  EXPECT_EQ(a.summary, b.summary);
  EXPECT_EQ(a.counters, b.counters);
  EXPECT_EQ(a.metrics, b.metrics);
}

inline uint64_t counter_or_zero(const RunResult& result, std::string_view name) {
  for (const auto& [key, value] : result.counters) {
    if (key == name) return value;
  }
  return 0;
}

}  // namespace leaseproof::scenarios::test
