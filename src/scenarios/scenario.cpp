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

namespace {

size_t first_divergence(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

std::pair<RunResult, RunResult> run_pair(const Scenario& scenario, const RunConfig& config,
                                         const std::function<void(sim::World&)>& perturb_second) {
  RunResult first = scenario.run(config);
  RunConfig second_config = config;
  if (perturb_second) second_config.before_run = perturb_second;
  RunResult second = scenario.run(second_config);
  return {std::move(first), std::move(second)};
}

}  // namespace

DeterminismCheck check_determinism(const Scenario& scenario, RunConfig config,
                                   const std::function<void(sim::World&)>& perturb_second) {
  config.keep_digests = true;
  config.keep_lines = false;
  config.trace_jsonl = nullptr;
  auto [first, second] = run_pair(scenario, config, perturb_second);
  DeterminismCheck check;
  check.first_hash = first.trace_hash;
  check.second_hash = second.trace_hash;
  check.events = first.events + second.events;
  check.agreed = first.trace_hash == second.trace_hash;
  if (check.agreed) return check;
  check.divergent_index = first_divergence(first.digests, second.digests);
  config.keep_lines = true;
  auto [again_first, again_second] = run_pair(scenario, config, perturb_second);
  if (again_first.trace_hash == again_second.trace_hash) return check;
  check.recurred_with_capture = true;
  check.divergent_index = first_divergence(again_first.digests, again_second.digests);
  auto line = [](const RunResult& r, size_t i) {
    return i < r.lines.size() ? r.lines[i] : std::string{"<no event: the run ended>"};
  };
  check.first_event = line(again_first, check.divergent_index);
  check.second_event = line(again_second, check.divergent_index);
  return check;
}

std::string reproduce_command(const RunResult& result) {
  return fmt::format("leaseproof run --seed {} --scenario {} --duration {}", result.seed, result.scenario,
                     format_duration(result.duration));
}

}  // namespace leaseproof::scenarios
