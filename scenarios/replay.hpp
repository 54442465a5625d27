#pragma once
// Replaying a run up to a chosen event: the same run as `leaseproof run`
// (same seed, scenario, duration and parameters, so the same events), stopped
// right after the event with a given trace index, or after the last event at
// or before a given true time. Shows the events just before it and, for
// lease scenarios, who acts as owner of which connection at that point
// (docs/shrink-and-replay.md).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/time.hpp"
#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios {

struct ReplayStop {
  std::optional<uint64_t> event;  // the event with this index (`i` in the trace)
  std::optional<Duration> time;   // else the last event at or before this true time
  size_t context = 20;            // events shown before the stop
  // Lease scenarios: the connection whose owners' accepted writes `why`
  // explains; empty: each connection with more than one acting owner.
  std::string explain;
};

struct ReplayResult {
  bool reached = false;            // false: the run ended before the stop
  uint64_t events = 0;             // events recorded (all of the run's when not reached)
  Duration run_end;                // the run's duration
  uint64_t stop_index = 0;
  Duration stop_time;
  std::vector<std::string> context;  // JSON lines of the events before the stop, oldest first
  std::string stop_line;             // the stop event as a JSON line
  // Lease scenarios: the state after the stop event, one line each (owners
  // per worker, connections with several owners or none, workers' states).
  std::vector<std::string> state;
  // Lease scenarios: why DynamoDB accepted the writes behind each acting
  // owner of the connections `explain` selects: the owner's last accepted
  // acquire and its last accepted renew after it, each with its condition,
  // its values, the item as stored just before, and every wall clock then.
  std::vector<std::string> why;
  // False when `explain` names a connection the run had not seen by the stop.
  bool explained = true;
};

// `config` must be valid for `scenario`. The run is the one `run` makes; it
// stops right after the stop event (nothing later runs; checks are skipped).
ReplayResult replay(const Scenario& scenario, RunConfig config, const ReplayStop& stop);

}  // namespace leaseproof::scenarios
