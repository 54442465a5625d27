#pragma once
// Scenarios: named simulations the CLI and the tests run by seed. A run's
// whole option set is derived from its seed (swarm style) and printed with it,
// so a seed and a scenario name reproduce a run exactly.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/time.hpp"

namespace leaseproof::sim {
class Trace;
class World;
}
namespace leaseproof::models {
struct AppliedRequest;
}

namespace leaseproof::scenarios {

struct RunConfig {
  uint64_t seed = 0;
  std::optional<Duration> duration;  // the scenario's default when unset
  // Scenario parameters (a JSON object; fields per scenario, docs/scenarios.md).
  nlohmann::json parameters = nlohmann::json::object();
  std::ostream* trace_jsonl = nullptr;
  bool keep_digests = false;  // per-event running hashes, to locate a divergence
  bool keep_lines = false;    // every event as a JSON line, in memory
  // Called with the world's trace before anything runs, to add observers
  // that see every event (the Perfetto writer, a timeline). Observers never
  // change the run or its hash.
  std::function<void(sim::Trace&)> observe_trace;
  // Called after the world is built and before it runs; tests use it to
  // perturb a run (for instance to prove the determinism check catches it).
  std::function<void(sim::World&)> before_run;
  // Lease scenarios: called with every request the simulated DynamoDB
  // applies, the item it named before, and the outcome (`replay` explains
  // accepted writes with it). Changes nothing of the run or its hash.
  std::function<void(const models::AppliedRequest&)> observe_dynamo;
  // Lease scenarios: run the checkers and the trace hash on a thread of
  // their own (sim::Trace::start_background), unless JSON lines, digests or
  // kept lines are asked for. The result is the same either way; `run`
  // turns it on, the commands that run many seeds at once leave it off.
  bool background_checks = false;
};

struct RunResult {
  std::string scenario;
  uint64_t seed = 0;
  nlohmann::json parameters = nlohmann::json::object();
  Duration duration;
  std::string options;                 // the derived option set, human readable
  std::string summary;                 // the checkers' figures (recovery times, overlaps...)
  uint64_t trace_hash = 0;
  uint64_t events = 0;                 // trace events
  uint64_t scheduler_events = 0;       // scheduler callbacks run
  bool background_checks = false;      // the checkers ran on a thread of their own
  std::vector<std::string> violations; // empty: the verdict is PASS
  // Violations found beyond those listed (each checker keeps its first few).
  uint64_t violations_unlisted = 0;
  // Why a failure of this run would be expected, if it would: the articles'
  // algorithm, or faults beyond the algorithm's stated assumptions. Empty:
  // the run is meant to pass, and a failure is a regression (the gate
  // records only those).
  std::string failure_expected;
  std::vector<std::pair<std::string, uint64_t>> counters;  // coverage figures
  // Figures for reports (sweep, gate), as JSON; lease scenarios fill
  // "recovery", "dynamodb" and "fleet" (docs/reports.md). Empty otherwise.
  nlohmann::json metrics = nlohmann::json::object();
  std::vector<uint64_t> digests;
  std::vector<std::string> lines;

  // Why a run without violations proves less than a PASS: it ended before
  // its recovery bound could be judged, with connections still ownerless,
  // or no connection was ever owned.
  // Empty: the verdict is what the violations say.
  std::string inconclusive;

  bool passed() const { return violations.empty(); }
  // "PASS", "INCONCLUSIVE" or "FAIL (N violations)".
  std::string verdict() const;
  uint64_t counter(std::string_view name) const;
};

struct Scenario {
  std::string_view name;
  std::string_view summary;
  Duration default_duration;
  std::function<RunResult(const RunConfig&)> run;
  // Empty when the config's parameters are valid for this scenario; otherwise
  // the error, naming the field. Checked before running.
  std::function<std::string(const RunConfig&)> validate;
};

// Applies the config's trace options (JSON lines, digests, lines, observers)
// to a new world.
void configure_trace(sim::World& world, const RunConfig& config);

// The parts of a result every scenario fills the same way: seed, duration,
// option text (with the world's fault sites), trace figures, digests and lines.
RunResult world_result(const sim::World& world, const RunConfig& config, Duration duration, std::string options);

std::span<const Scenario> scenarios();
const Scenario* find_scenario(std::string_view name);

// Runs a seed twice and compares trace hashes. On a mismatch, names the first
// divergent event and shows both events (from a second pair of runs that keep
// every event's text). `perturb_second` is for tests: it lets one prove that a
// divergence is caught and located.
struct DeterminismCheck {
  bool agreed = false;
  uint64_t first_hash = 0;
  uint64_t second_hash = 0;
  uint64_t events = 0;            // in both runs together
  size_t divergent_index = 0;     // meaningful when !agreed
  bool recurred_with_capture = false;
  std::string first_event;        // JSON lines, when the divergence recurred
  std::string second_event;
};
DeterminismCheck check_determinism(const Scenario& scenario, RunConfig config,
                                   const std::function<void(sim::World&)>& perturb_second = {});

// The property a violation's text names: the text before its first ':' (e.g.
// "single ownership", "recovery", "liveness", "exactly-once").
std::string violation_kind(std::string_view violation);

// Runs `body(i)` for i in [0, count), possibly on several threads: the
// commands that run many seeds get their threads from the caller.
using ParallelFor = std::function<void(size_t count, const std::function<void(size_t)>& body)>;

// The command that reproduces a run, e.g.
// "leaseproof run --seed 7 --scenario kernel --duration 10m0s".
std::string reproduce_command(const RunResult& result);

}  // namespace leaseproof::scenarios
