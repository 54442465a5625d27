#pragma once
// `leaseproof check-real`: the simulator's lease checkers (properties/) on what
// real processes recorded (docs/runtime.md, "Checking real records").
//
// Inputs, JSON lines with `mono_ms` (CLOCK_MONOTONIC of the one machine the
// lab runs on, the true time of the trace) and `event`:
//   - the workers' logs (`leaseproof worker` prints one line per event);
//   - the lab's own events: what it did to which process and when
//     (lab.kill, lab.stop, lab.cont, lab.term, lab.exit, lab.partition_start,
//     lab.partition_end, lab.crash, lab.restart, control.started);
//   - optionally the hub's session records (`hub --sessions FILE`).
// They become one trace in the simulator's vocabulary (docs/trace-format.md):
// worker.start is a start (a new incarnation), lease.open/lease.close are the
// notes the checkers follow, the lab's events are crashes, pauses, resumes,
// exits and partitions, and the hub's sessions are upstream.open/close notes.
// OwnershipChecker and RecoveryChecker judge it with the bounds the simulator
// computes from the workers' configuration (scenarios::lease_recovery_bounds).
//
// The hub's records are judged on their own too: two sessions of one channel,
// of different workers, that both sent frames (subscribe, pongs) at once mean
// two workers acting at once, seen by the hub on its one clock.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace leaseproof::cli {

struct CheckRealArgs {
  std::vector<std::string> events;  // files of JSON lines
  std::string sessions;             // the hub's session records
  bool notices = false;             // workers send release notices (graceful bound)
  std::string fast_worker_offset = "0s";
};

CLI::App* add_check_real_command(CLI::App& app, CheckRealArgs& args);
int check_real_command(const CheckRealArgs& args);

}  // namespace leaseproof::cli
