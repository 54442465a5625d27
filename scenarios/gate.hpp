#pragma once
// The CI property gate (docs/ci-gate.md): the regression runs (runs that once
// failed) first, then new seeds of one or several scenarios until a seed
// count or a wall-time budget; any violation fails it. New failures go to the
// regression file, so that a run that failed once is re-run forever. The
// documents a gate writes (JUnit XML, gate.json) are reports/gate_documents.

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/time.hpp"
#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios {

// Bad input (a regression file, a shard's gate.json): the message names the
// flag, file and line. The CLI prints it and exits with status 2.
struct GateInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One run the gate makes: a regression entry or a new seed.
struct GateRun {
  std::string scenario;
  uint64_t seed = 0;
  Duration duration;
  nlohmann::json parameters = nlohmann::json::object();
  bool regression = false;

  auto key() const { return std::tuple{scenario, seed, duration.ns(), parameters.dump()}; }
};

struct GateOutcome {
  bool ran = false;  // false: skipped, the budget was spent
  RunResult result;  // without digests and lines
  double seconds = 0;
};

// One of n shards (1-based): regression k and new seed i (from the first)
// belong to the shard whose index - 1 is k mod n, i mod n.
struct GateShard {
  uint64_t index = 1;
  uint64_t count = 1;
};

// A scenario of the new seeds, with the duration and parameters it runs.
struct GateScenario {
  const Scenario* scenario = nullptr;
  Duration duration;
  nlohmann::json parameters = nlohmann::json::object();
};

// The new seeds: seed first_seed + i runs scenarios[turn[i % turn.size()]].
struct GateSeeds {
  uint64_t first_seed = 1;
  uint64_t count = 0;
  std::vector<GateScenario> scenarios;
  std::vector<size_t> turn;
};

// The regression file: one JSON object per line,
//   {"scenario": "lease-swarm", "seed": 462, "duration": "10m0s", "parameters": {}, "kind": "recovery"}
// ("kind" is informative; "duration" and "parameters" are optional). Blank
// lines and lines starting with '#' are skipped. A missing file is refused
// (a mistyped path would skip every regression) unless `create` says it is
// a new one. No path: no regressions. Throws GateInputError.
std::vector<GateRun> read_regressions(const std::string& path, bool create);

// The regressions then the new seeds, each only if it belongs to `shard`.
std::vector<GateRun> gate_runs(std::vector<GateRun> regressions, const GateSeeds& seeds,
                               const std::optional<GateShard>& shard);

struct GateLimits {
  uint64_t min_seeds = 0;          // new seeds that run whatever the budget
  std::optional<Duration> budget;  // wall time for the new seeds past min_seeds
};

struct GateResults {
  std::vector<GateOutcome> outcomes;  // by run
  bool budget_reached = false;
  double seconds = 0;  // wall time of the whole gate
};

// Runs `runs` (regressions first, as gate_runs orders them). Regressions
// always run; the budget bounds new seeds only. `on_progress(done, seconds)`
// is called every 100 finished runs, from the thread that finished the run.
GateResults run_gate(const std::vector<GateRun>& runs, const GateLimits& limits, const ParallelFor& parallel,
                     const std::function<void(uint64_t done, double seconds)>& on_progress);

struct GateTally {
  uint64_t regressions_passed = 0;
  uint64_t regressions_failed = 0;
  uint64_t new_passed = 0;
  uint64_t new_failed = 0;
  // Passed, but owned nothing or ended before their recovery bound could be judged.
  uint64_t inconclusive = 0;
  // New failures whose configuration is not meant to pass (RunResult::failure_expected).
  uint64_t expected_failures = 0;
  std::string expected_reason;  // the first of them's

  uint64_t failed() const { return regressions_failed + new_failed; }
  uint64_t new_ran() const { return new_passed + new_failed; }
  uint64_t ran() const { return regressions_passed + regressions_failed + new_ran(); }
};
GateTally tally_gate(const std::vector<GateRun>& runs, const std::vector<GateOutcome>& outcomes);

// The first line of a run's first violation: what one-line reports show.
std::string violation_headline(const RunResult& result);

// A failing run as a line of the regression file (with its newline).
std::string regression_line(const GateRun& run, const RunResult& result);

// Appends the new failures that are not in the file yet (the regressions of
// `runs` are what it holds) and are not expected to fail; creates the file
// with a header comment when it does not exist. `added` counts the lines.
// False when the file could not be written (it is then unchanged).
bool record_regressions(const std::string& path, const std::vector<GateRun>& runs,
                        const std::vector<GateOutcome>& outcomes, uint64_t& added);

}  // namespace leaseproof::scenarios
