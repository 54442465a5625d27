#pragma once
// Shared by the report tests: a small lease run with every kind of fault the
// reports draw (crashes, a pause, a partition, a stop, lost messages), and an
// observer that keeps the events the tests compare the reports with.

#include "base/assert.hpp"
#include "scenarios/scenario.hpp"
#include "sim/trace.hpp"
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace leaseproof::report::test {

inline scenarios::RunConfig small_faulty_run(uint64_t seed = 1) {
  scenarios::RunConfig config;
  config.seed = seed;
  config.duration = Duration::from_min(3);
  config.parameters = nlohmann::json::parse(R"({
    "workers": 3, "connections": 20, "crash_every": "40s", "loss": "1/200",
    "pauses": [{"worker": 2, "at": "50s", "length": "25s"}],
    "partitions": [{"worker": 2, "at": "100s", "length": "20s"}],
    "stops": [{"connection": 3, "at": "60s"}]})");
  return config;
}

inline const scenarios::Scenario& lease_crash() {
  const scenarios::Scenario* scenario = scenarios::find_scenario("lease-crash");
  LP_ASSERT(scenario != nullptr);
  return *scenario;
}

// An event as the tests need it: its strings copied out of the trace.
struct SeenEvent {
  sim::EventKind kind;
  Instant at;
  std::string node;
  std::string peer;
  std::string label;
  std::string detail;
  int64_t value = 0;
};

// Keeps the events `wanted` accepts, with node names.
template <typename Wanted>
void keep_events(sim::Trace& trace, std::vector<SeenEvent>& out, Wanted wanted) {
  trace.add_observer([&trace, &out, wanted](const sim::TraceEvent& e) {
    if (!wanted(e)) return;
    out.push_back(SeenEvent{e.kind, e.true_time, std::string{trace.node_name(e.node)},
                            std::string{trace.node_name(e.peer)}, std::string{e.label}, std::string{e.detail},
                            e.value});
  });
}

}  // namespace leaseproof::report::test
