#pragma once
// The connection registry (seed 003) as a seeded simulation: API Gateway and
// its clients (models/registry_world.hpp), the registry core in a handler,
// the simulated DynamoDB with GSI lag, TTL deletion lag and throttling, and
// the registry's properties (properties/registry_checker.hpp).
//
// Time is scaled so that a run covers whole row lifetimes: the gateway's
// connection cap is 15 minutes (API Gateway: 2 hours) and the rows' TTL the
// cap plus 5 minutes (seed 003: 2 h + 10 min); DynamoDB's per-partition
// limits are scaled down with the fleet (100 clients instead of tens of
// thousands), so that the load that throttles a real service's hot partition
// throttles this one's. Every figure is a parameter.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios {

// `name`: "registry" (the churn mix), "registry-swarm" (every option drawn
// from the seed) or "registry-big-room" (one room of 2,000 members, a
// broadcast every 100 ms).
RunResult run_registry(std::string_view name, const RunConfig& config);
// "" when the parameters are valid.
std::string validate_registry(std::string_view name, const RunConfig& config);

}  // namespace leaseproof::scenarios

namespace leaseproof::scenarios {

// Shrinking a failing registry run: the same greedy search as the lease
// shrinker (docs/shrink-and-replay.md), over the registry's parameters:
// take out the maintenance, the mass close, quiet rooms, abrupt losses and
// lost $disconnects; halve the clients, the rooms, the rooms per client and
// the run, then take one client at a time; keep each change while the same
// property still fails with the same seed.
struct RegistryShrinkStep {
  uint64_t number = 0;  // 0: the starting run
  std::string change;
  std::string size;     // e.g. "12 clients, 3 rooms (2 each), 7m30s"
  uint64_t runs = 0;
};
struct RegistryShrinkResult {
  std::string property;
  bool started_failing = false;
  RunResult first;
  RunResult last;  // the smallest failing run (the first when nothing shrank)
  uint64_t steps = 0;
  uint64_t runs = 0;
  bool budget_exhausted = false;
};
bool is_registry_scenario(std::string_view scenario);
// `start` must be valid for `scenario` and name a duration; `property` empty:
// the kind of the starting run's first violation.
RegistryShrinkResult shrink_registry(const Scenario& scenario, const RunConfig& start, const std::string& property,
                                     uint64_t budget_runs, const std::function<void(const RegistryShrinkStep&)>& on_step);

}  // namespace leaseproof::scenarios
