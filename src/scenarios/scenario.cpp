#include <leaseproof/scenarios/scenario.hpp>

#include <array>

#include <fmt/format.h>

#include <leaseproof/scenarios/kernel.hpp>

namespace leaseproof::scenarios {

uint64_t RunResult::counter(std::string_view name) const {
  for (const auto& [key, value] : counters) {
    if (key == name) return value;
  }
  LP_UNREACHABLE("no counter named '{}'", name);
}

std::span<const Scenario> scenarios() {
  static const std::array<Scenario, 1> kScenarios{{
      {"kernel",
       "clients and servers exchanging timed requests under skew, loss, partitions, crashes, pauses and "
       "SIGTERM (exercises sim/ alone)",
       Duration::from_min(10),
       [](const RunConfig& config) {
         const Duration duration = config.duration.value_or(Duration::from_min(10));
         RunResult result = run_kernel(kernel_options_from_seed(config.seed, duration), config);
         result.scenario = "kernel";
         return result;
       }},
  }};
  return kScenarios;
}

const Scenario* find_scenario(std::string_view name) {
  for (const Scenario& scenario : scenarios()) {
    if (scenario.name == name) return &scenario;
  }
  return nullptr;
}

std::string reproduce_command(const RunResult& result) {
  return fmt::format("leaseproof run --seed {} --scenario {} --duration {}", result.seed, result.scenario,
                     format_duration(result.duration));
}

}  // namespace leaseproof::scenarios
