#include "scenarios/gate.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "base/json_input.hpp"
#include "base/temporary_file.hpp"

namespace leaseproof::scenarios {

namespace {

// One line of the regression file as a run; `fail` makes the error that
// names the file and line.
template <typename Fail>
GateRun regression_of(const nlohmann::json& entry, const Fail& fail) {
  if (!entry.is_object()) throw fail("not a JSON object");
  if (!entry.contains("scenario") || !entry["scenario"].is_string()) throw fail("\"scenario\" must be a string");
  if (!entry.contains("seed") || !entry["seed"].is_number_unsigned()) {
    throw fail("\"seed\" must be an unsigned integer");
  }
  GateRun run;
  run.regression = true;
  run.scenario = entry["scenario"].get<std::string>();
  const Scenario* scenario = find_scenario(run.scenario);
  if (scenario == nullptr) throw fail(fmt::format("unknown scenario '{}'", run.scenario));
  run.seed = entry["seed"].get<uint64_t>();
  run.duration = scenario->default_duration;
  if (entry.contains("duration")) {
    if (!entry["duration"].is_string()) throw fail("\"duration\" must be a string such as \"10m\"");
    const auto duration = parse_duration(entry["duration"].get<std::string>());
    if (!duration || *duration <= Duration::zero()) throw fail("\"duration\" is not a positive duration");
    run.duration = *duration;
  }
  if (entry.contains("parameters")) {
    if (!entry["parameters"].is_object()) throw fail("\"parameters\" must be a JSON object");
    run.parameters = entry["parameters"];
  }
  for (const auto& [key, value] : entry.items()) {
    if (key != "scenario" && key != "seed" && key != "duration" && key != "parameters" && key != "kind") {
      throw fail(fmt::format("unknown field \"{}\" (allowed: scenario, seed, duration, parameters, kind)", key));
    }
  }
  RunConfig config;
  config.seed = run.seed;
  config.duration = run.duration;
  config.parameters = run.parameters;
  if (scenario->validate) {
    if (std::string error = scenario->validate(config); !error.empty()) throw fail(error);
  }
  return run;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<GateRun> read_regressions(const std::string& path, bool create) {
  std::vector<GateRun> runs;
  if (path.empty()) return runs;
  if (!std::filesystem::exists(path)) {
    if (create) return runs;
    throw GateInputError{fmt::format(
        "--regressions: '{}' does not exist (check the path, or add --create-regressions to start a new file)", path)};
  }
  std::ifstream in{path};
  if (!in) throw GateInputError{fmt::format("--regressions: cannot read '{}'", path)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::string source = fmt::format("--regressions: '{}' line {}", path, number);
    const auto fail = [&](std::string_view what) { return GateInputError{fmt::format("{}: {}", source, what)}; };
    try {
      runs.push_back(regression_of(parse_json_strict(line, source), fail));
    } catch (const JsonInputError& error) {
      throw GateInputError{error.what()};
    }
  }
  return runs;
}

std::vector<GateRun> gate_runs(std::vector<GateRun> regressions, const GateSeeds& seeds,
                               const std::optional<GateShard>& shard) {
  std::vector<GateRun> runs;
  for (size_t k = 0; k < regressions.size(); ++k) {
    if (!shard || k % shard->count == shard->index - 1) runs.push_back(std::move(regressions[k]));
  }
  for (uint64_t i = 0; i < seeds.count; ++i) {
    if (shard && i % shard->count != shard->index - 1) continue;
    const GateScenario& one = seeds.scenarios[seeds.turn[i % seeds.turn.size()]];
    runs.push_back({std::string{one.scenario->name}, seeds.first_seed + i, one.duration, one.parameters, false});
  }
  return runs;
}

GateResults run_gate(const std::vector<GateRun>& runs, const GateLimits& limits, const ParallelFor& parallel,
                     const std::function<void(uint64_t done, double seconds)>& on_progress) {
  const auto regressions = static_cast<uint64_t>(
      std::count_if(runs.begin(), runs.end(), [](const GateRun& run) { return run.regression; }));
  const auto start = std::chrono::steady_clock::now();
  std::vector<GateOutcome> outcomes(runs.size());
  std::atomic<uint64_t> finished{0};
  std::atomic<bool> budget_reached{false};
  parallel(runs.size(), [&](size_t i) {
    // The budget bounds new seeds only, past the first min_seeds: regressions always run.
    if (!runs[i].regression && i - regressions >= limits.min_seeds && limits.budget &&
        seconds_since(start) >= static_cast<double>(limits.budget->ns()) / 1e9) {
      budget_reached = true;
      return;
    }
    const auto run_start = std::chrono::steady_clock::now();
    RunConfig config;
    config.seed = runs[i].seed;
    config.duration = runs[i].duration;
    config.parameters = runs[i].parameters;
    RunResult result = find_scenario(runs[i].scenario)->run(config);
    result.digests.clear();
    result.lines.clear();
    outcomes[i] = GateOutcome{true, std::move(result), seconds_since(run_start)};
    if (const uint64_t done = ++finished; done % 100 == 0 && on_progress) on_progress(done, seconds_since(start));
  });
  return {std::move(outcomes), budget_reached.load(), seconds_since(start)};
}

GateTally tally_gate(const std::vector<GateRun>& runs, const std::vector<GateOutcome>& outcomes) {
  GateTally tally;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!outcomes[i].ran) continue;
    const RunResult& result = outcomes[i].result;
    if (result.passed()) {
      ++(runs[i].regression ? tally.regressions_passed : tally.new_passed);
      if (!result.inconclusive.empty()) ++tally.inconclusive;
      continue;
    }
    ++(runs[i].regression ? tally.regressions_failed : tally.new_failed);
    if (runs[i].regression || result.failure_expected.empty()) continue;
    if (++tally.expected_failures == 1) tally.expected_reason = result.failure_expected;
  }
  return tally;
}

std::string violation_headline(const RunResult& result) {
  const std::string& first = result.violations.front();
  return first.substr(0, first.find('\n'));
}

std::string regression_line(const GateRun& run, const RunResult& result) {
  nlohmann::json entry{{"scenario", run.scenario},
                       {"seed", run.seed},
                       {"duration", format_duration(run.duration)},
                       {"parameters", run.parameters},
                       {"kind", violation_kind(result.violations.front())}};
  return entry.dump() + "\n";
}

bool record_regressions(const std::string& path, const std::vector<GateRun>& runs,
                        const std::vector<GateOutcome>& outcomes, uint64_t& added) {
  std::set<std::tuple<std::string, uint64_t, int64_t, std::string>> known;
  for (const GateRun& run : runs) {
    if (run.regression) known.insert(run.key());
  }
  std::string existing;
  if (std::filesystem::exists(path)) {
    std::ifstream in{path};
    std::stringstream text;
    text << in.rdbuf();
    existing = text.str();
    if (!existing.empty() && existing.back() != '\n') existing += '\n';
  } else {
    existing = "# Runs that once failed the gate; `leaseproof gate --regressions FILE` re-runs them first.\n";
  }
  added = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].regression || !outcomes[i].ran || outcomes[i].result.passed()) continue;
    if (!outcomes[i].result.failure_expected.empty()) continue;
    if (!known.insert(runs[i].key()).second) continue;
    existing += regression_line(runs[i], outcomes[i].result);
    ++added;
  }
  return added == 0 || write_whole_file(path, existing);
}

}  // namespace leaseproof::scenarios
