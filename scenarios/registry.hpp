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

#include <string>

#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios {

// `name`: "registry" (the churn mix), "registry-swarm" (every option drawn
// from the seed) or "registry-big-room" (one room of 2,000 members, a
// broadcast every 100 ms).
RunResult run_registry(std::string_view name, const RunConfig& config);
// "" when the parameters are valid.
std::string validate_registry(std::string_view name, const RunConfig& config);

}  // namespace leaseproof::scenarios
