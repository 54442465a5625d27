#pragma once
// What a run keeps for the sweep reports (RunResult::metrics), in the parts
// every scenario with a simulated DynamoDB shares.

#include <vector>

#include <nlohmann/json.hpp>

#include "base/time.hpp"

namespace leaseproof::models {
class DynamoStore;
}

namespace leaseproof::scenarios {

// {"tables": {name: {"wcu", "rcu", "indexes": {gsi: {"wcu", "rcu"}},
// "requests": {operation: count}, "throttled", "conditional_check_failures"}},
// "simulated_s"}: the consumed capacity of every table and GSI.
nlohmann::json dynamodb_metrics(const models::DynamoStore& store, Duration simulated);

// A fixed histogram of millisecond samples, the same edges for every run so
// that a sweep adds runs' counts and takes percentiles of the sum: an array
// of counts, element i the samples at most edge i and above edge i - 1, one
// more element for those above the last edge.
nlohmann::json histogram_ms(const std::vector<double>& samples);
// The edges, in ms: 0, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30 s, 1, 2, 5, 10, 15,
// 20, 30 min, 1, 2, 6, 24 h.
const std::vector<double>& histogram_edges_ms();

}  // namespace leaseproof::scenarios
