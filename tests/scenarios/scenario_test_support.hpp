#pragma once
// Shared by the scenario tests: run a named scenario by seed, read counters.

#include <optional>
#include <string>
#include <string_view>

#include <leaseproof/base/assert.hpp>
#include <leaseproof/scenarios/scenario.hpp>

namespace leaseproof::scenarios::test {

// Runs `scenario` as the CLI would; parameters must be valid (asserted).
inline RunResult run(std::string_view scenario, uint64_t seed, nlohmann::json parameters = nlohmann::json::object(),
                     std::optional<Duration> duration = std::nullopt) {
  const Scenario* found = find_scenario(scenario);
  LP_ASSERT(found != nullptr);
  RunConfig config;
  config.seed = seed;
  config.duration = duration;
  config.parameters = std::move(parameters);
  const std::string error = found->validate(config);
  LP_ASSERT_MSG(error.empty(), "{}", error);
  return found->run(config);
}

inline uint64_t counter_or_zero(const RunResult& result, std::string_view name) {
  for (const auto& [key, value] : result.counters) {
    if (key == name) return value;
  }
  return 0;
}

}  // namespace leaseproof::scenarios::test
