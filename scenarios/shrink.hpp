#pragma once
// Shrinking a failing lease run: remove and shorten faults, reduce the fleet
// and the run's length while the same property still fails, with the same
// seed (randomness inside a run is seeded, so a candidate either fails or
// not). Greedy, to a fixpoint, in a fixed order: the result depends only on
// the starting run and the budget, never on threads or timing
// (docs/shrink-and-replay.md).

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenarios/lease.hpp"
#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios {

// The properties a lease run's violations name (their violation_kind).
std::span<const std::string_view> property_kinds();

// True for the scenarios whose options are LeaseScenarioOptions (lease-*
// and the lease-backed stream-* scenarios): the ones shrink works on.
bool is_lease_scenario(std::string_view scenario);

// One fault of a run, with the change that takes it out. A fault is an entry
// of a fault list (pause, partition, clock step, stop, hub crash, mass close,
// slow hub, stream cut, crash while recording) or a fault setting that is on
// (periodic crashes, message loss, throttling, a rolling deploy, clock skew,
// a fast worker, clock drift, a relay's idle cut-off). Hub faults count only
// while streaming is on.
struct Fault {
  std::string text;  // e.g. "pause: worker 2 at 3m10s for 20s"
  std::function<void(LeaseScenarioOptions&)> remove;
};
std::vector<Fault> faults_of(const LeaseScenarioOptions& options);

// The smallest parameters that give `options` when applied to the scenario's
// preset for this seed and duration: to_parameters(options) without the
// fields the preset already supplies.
nlohmann::json minimal_parameters(std::string_view scenario, uint64_t seed, const LeaseScenarioOptions& options);

// One accepted change (number 0: the starting run, when it fails).
struct ShrinkStep {
  uint64_t number = 0;      // 1, 2, ...
  std::string change;       // e.g. "removed pause: worker 2 at 3m10s for 20s"
  size_t faults = 0;        // after the change
  uint32_t workers = 0;
  uint32_t connections = 0;
  Duration duration;
  uint64_t runs = 0;        // counted runs so far (the budget's unit)
};

struct ShrinkSettings {
  std::string property;       // empty: the kind of the starting run's first violation
  uint64_t budget_runs = 500;  // counted runs, the starting run included; at least 1
  unsigned jobs = 1;           // runs made at once (ahead of need; never changes the result)
  ParallelFor parallel;       // sequential when unset
  std::function<void(const ShrinkStep&)> on_step;
};

struct ShrinkResult {
  std::string property;
  bool started_failing = false;  // the starting run failed the property
  RunResult first;               // the starting run
  LeaseScenarioOptions first_options;
  // The smallest failing run found (the starting run when nothing shrank);
  // its parameters are minimal_parameters of last_options.
  RunResult last;
  LeaseScenarioOptions last_options;
  uint64_t steps = 0;
  uint64_t runs = 0;              // counted: what a sequential search runs (cache hits are free)
  uint64_t speculative_runs = 0;  // run ahead on other threads and discarded
  bool budget_exhausted = false;
};

// `start` must be valid for `scenario` (a lease scenario) and name a duration.
ShrinkResult shrink(const Scenario& scenario, const RunConfig& start, const ShrinkSettings& settings);

// The first violation of `result` whose kind is `property`; empty if none.
std::string first_violation_of(const RunResult& result, std::string_view property);

}  // namespace leaseproof::scenarios
