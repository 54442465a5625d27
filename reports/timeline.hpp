#pragma once
// One connection's story in a run, as compact text for a person: the control
// plane's decisions, each worker's lease requests with what DynamoDB did with
// them, ownership opened and closed (epoch, reason), the upstream's sessions,
// resume positions and resets, and the faults of every node that took part.
// An observer of sim::Trace, like the checkers: the run is unchanged.

#include <cstddef>
#include <cstdint>
#include "base/ids.hpp"
#include "base/time.hpp"
#include "sim/trace.hpp"
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace leaseproof::report {

class ConnectionTimeline {
 public:
  explicit ConnectionTimeline(std::string connection);

  // Observes every later event of `trace`; the timeline must outlive the run,
  // and may outlive the trace (node names are copied as events arrive).
  void attach(sim::Trace& trace);
  void observe(const sim::TraceEvent& event);

  const std::string& connection() const { return connection_; }
  // Some event of the run named the connection.
  bool found() const { return found_; }
  // "0:02:15.321  worker-3  ..." lines, oldest first. A run of routine
  // successes of one node (renewals, reads, recorded batches) is one line.
  std::vector<std::string> lines() const;
  // For a connection no event named: says so and lists some that exist.
  std::string unknown_connection_error(size_t listed_max = 12) const;

 private:
  // A lease request of this connection and what became of it.
  struct Request {
    std::string kind;
    std::string epoch;
    std::string operation;  // DynamoDB's label, once it answered
    std::string outcome;    // "ok" or the error type; empty while unanswered
    std::optional<Instant> answered_at;
    std::optional<Instant> timed_out_at;
  };
  struct Entry {
    Instant at;
    NodeId node;
    std::string node_name;  // copied: the trace is gone when lines() runs
    std::string text;       // empty for a request: rendered from `request`
    std::optional<Request> request;
    std::string routine;  // non-empty: what this routine success is, e.g. "renew ok"
  };

  void on_note(const sim::TraceEvent& event);
  void on_request(const sim::TraceEvent& event);
  void on_answer(const sim::TraceEvent& event);
  void on_timeout(const sim::TraceEvent& event);
  void on_node_fault(const sim::TraceEvent& event);
  void add(const sim::TraceEvent& event, std::string text, std::string routine = {});
  std::string node_name(NodeId node) const;
  // What a routine success is ("renew ok", "recorded"), or empty.
  static std::string routine_of(const Entry& entry);
  std::string render(const Entry& entry) const;
  std::string render_routine(size_t begin, size_t end) const;

  std::string connection_;
  const sim::Trace* trace_ = nullptr;
  bool found_ = false;
  std::vector<Entry> entries_;
  std::map<uint64_t, size_t> requests_;  // DynamoDB request message id -> entry index
  std::set<NodeId> involved_;            // nodes that took part: their faults are shown
  std::set<std::string> connections_;    // every connection the run started or opened
};

// "H:MM:SS.mmm" of true time since the start of the run.
std::string format_clock(Instant at);

}  // namespace leaseproof::report
