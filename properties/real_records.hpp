#pragma once
// What real processes recorded, read as the simulator's trace, so that the
// same checkers judge a real lab (docs/runtime.md, "Checking real records").
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
//
// The hub's records are judged on their own too: two sessions of one channel,
// of different workers, that both sent frames (subscribe, pongs) at once mean
// two workers acting at once, seen by the hub on its one clock.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ids.hpp"
#include "base/time.hpp"
#include "core/lease/config.hpp"
#include "sim/trace.hpp"

namespace leaseproof::properties {

// One line of an input file that the trace is built from.
struct RealRecord {
  int64_t mono_ns = 0;
  int rank = 1;      // within one millisecond: resumes first, then the workers' own lines, then the lab's other acts
  size_t order = 0;  // input order, for ties
  nlohmann::json fields;
};

// Appends the lines of `in` that start with '{': JSON objects with "event"
// and "mono_ms". Other lines (a worker's plain text) are skipped, and so is
// a summary line without "mono_ms" (worker.stop). A '{' line that is not
// such an object is skipped, named once in `problems` ("NAME:LINE: ...") and
// counted; a file without events is named too.
void read_real_records(std::istream& in, const std::string& name, std::vector<RealRecord>& out,
                       std::vector<std::string>& problems);

// Sorts the records into true-time order. The lab sees when it sent SIGCONT,
// not when the kernel ran the process again: a resumed worker is taken as
// running from its first line after the SIGCONT (its first act after a pause
// is to stop acting on the leases whose deadline passed, which it logs).
void order_real_records(std::vector<RealRecord>& records);

// The workers' configuration, from their worker.start lines; all must agree
// (a disagreement is named in `problems`, and the first one is used).
std::optional<lease::LeaseConfig> workers_configuration(const std::vector<RealRecord>& records,
                                                        std::vector<std::string>& problems);

// One session of the hub (`hub --sessions`): a worker's upstream connection.
struct HubSession {
  std::string channel;
  std::string worker;
  std::string process;  // which process of that worker id (?process=); empty: not said
  int64_t lease_epoch = 0;
  double opened_ms = 0;
  double ended_ms = 0;
  std::optional<double> first_in_ms, last_in_ms, last_data_ms;
};

// The records of `in`; a line that is not one is named in `problems` and skipped.
std::vector<HubSession> read_hub_sessions(std::istream& in, const std::string& name,
                                          std::vector<std::string>& problems);

// Two processes with one worker id, told apart. A worker's lines carry
// "process" (its leases' owner_incarnation), and so may the lab's acts and
// the hub's sessions. A process whose worker id has no other process running
// keeps the id as its name: a restart is a new incarnation of the same node,
// as before. One that starts while another of its id runs (neither killed,
// crashed nor exited by the lab's records) is a twin and gets a node of its
// own, "<id>~<k>". Each record's and session's "worker" is rewritten to that
// name; a lab act that names no process goes to the id's latest process.
// Returns the twins found (0: every id had one process at a time).
size_t name_processes(std::vector<RealRecord>& records, std::vector<HubSession>& sessions);

// Node ids by name, in order of first appearance.
class RealNodes {
 public:
  NodeId of(const std::string& name);
  std::string name(NodeId node) const;

 private:
  std::map<std::string, NodeId> ids_;
  std::vector<std::string> names_;
};

// Feeds `observe` one trace event per record and two per hub session
// (upstream.open, upstream.close), in true-time order; returns the time of
// the last. An event's label and detail live only during its call.
Instant replay_real_records(const std::vector<RealRecord>& records, const std::vector<HubSession>& sessions,
                            RealNodes& nodes, const std::function<void(const sim::TraceEvent&)>& observe);

// Two workers acting at once as the hub saw it: both sent frames (subscribe,
// pongs) on sessions of one channel during a common interval. `compared`
// counts the overlapping pairs of one channel.
std::vector<std::string> hub_overlaps(const std::vector<HubSession>& sessions, uint64_t& compared);

// Crash recovery seen by the hub: for each killed worker's sessions open at
// the kill, from the last frame of that session (either way) to the first
// frame the next owner sent on that channel; sorted. `unrecovered` counts
// the sessions no other worker took over.
std::vector<Duration> hub_crash_gaps(const std::vector<HubSession>& sessions, const std::vector<RealRecord>& records,
                                     size_t& unrecovered);

}  // namespace leaseproof::properties
