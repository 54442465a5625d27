#pragma once
// The trace: every observable event of a run, in execution order. Each event is
// folded into a running 64-bit hash of a canonical binary encoding (always), and
// written as one JSON line (when asked). Checkers observe the same stream.
// docs/trace-format.md is the contract for both encodings; change it with them.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.hpp"
#include "base/inline_function.hpp"
#include "base/time.hpp"

namespace leaseproof::sim {

// Numbering is part of the canonical encoding: append only, never renumber.
enum class EventKind : uint8_t {
  send = 1,             // node -> peer, id = message id, label = message type, value = bytes
  deliver = 2,          // at node, from peer
  drop = 3,             // message lost; label = reason (loss, partition, receiver_down, ...)
  timer = 4,            // a node's timer fired; label = timer name
  crash = 5,            // SIGKILL or crash: no code runs; volatile state is gone
  restart = 6,          // process started again; id = new incarnation
  pause = 7,            // stop-the-world pause begins; value = planned length in ns
  resume = 8,           // pause ends; value = events that waited
  sigterm = 9,          // SIGTERM delivered; value = stop timeout in ns
  exit = 10,            // process exited by itself (after SIGTERM)
  clock_step = 11,      // node's wall clock jumped; value = jump in ns
  fault = 12,           // a named fault site fired; label = site
  timeout = 13,         // an RPC's caller gave up; id = request id
  partition_start = 14, // node -> peer link cut (directed)
  partition_end = 15,
  clog_start = 16,      // node -> peer link holds messages until the clog ends
  clog_end = 17,
  note = 18,            // a model's own event; label = what, detail = free text
  start = 19,           // process started for the first time; id = incarnation
  queued = 20,          // message reached a paused node; it is delivered at resume
};

std::string_view to_string(EventKind kind);

struct TraceEvent {
  EventKind kind = EventKind::note;
  Instant true_time;
  NodeId node;        // kNoNode for world events
  Instant wall;       // node's readings at the event (zero for world events)
  Instant monotonic;
  NodeId peer;        // the other end, where there is one
  uint64_t id = 0;
  int64_t value = 0;
  std::string_view label;
  std::string_view detail;
};

// Hash folding: a bijective mix per 64-bit word, so changing any single field of
// any single event always changes the final hash.
class TraceHash {
 public:
  static constexpr uint64_t kInitial = 0x6C65617365707266ULL;  // "leaseprf"
  void add_word(uint64_t word) {
    state_ ^= word;
    state_ *= 0x9E3779B97F4A7C15ULL;
    state_ ^= state_ >> 29;
  }
  void add_string(std::string_view text);
  void add_event(const TraceEvent& event);
  uint64_t value() const { return state_; }

 private:
  uint64_t state_ = kInitial;
};

class CheckerThread;

class Trace {
 public:
  using Observer = std::function<void(const TraceEvent&)>;
  // Work for the checkers that is not an event (a sink write the store saw).
  using Task = InlineFunction<void(), 80>;

  Trace();
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // Names used for nodes in JSON output; index = NodeId.value.
  void set_node_name(NodeId node, std::string name);
  std::string_view node_name(NodeId node) const;

  void set_jsonl_output(std::ostream* out) { jsonl_ = out; }
  // Keep the hash after each event (8 bytes an event), to locate divergence.
  void keep_digests(bool keep) { keep_digests_ = keep; }
  // Keep every event's JSON line in memory (for printing a divergence).
  void keep_lines(bool keep) { keep_lines_ = keep; }
  // Observers run on the simulation's thread, at the event, and may act on
  // the world (a fault that waits for an event).
  void add_observer(Observer observer) { observers_.push_back(std::move(observer)); }
  // Checkers only read what they are given: the events, the tasks posted to
  // them, and checker_node_name(). They see each event in the order added,
  // on the checkers' thread while one runs; nothing orders them against the
  // observers, which share nothing with them.
  void add_checker(Observer checker) { checkers_.push_back(std::move(checker)); }
  // Runs `task` in order with the events: now, or on the checkers' thread.
  void post(Task task);
  // A node's name, for checkers (kept in step with the events they see).
  std::string_view checker_node_name(NodeId node) const;

  // Checkers on a thread of their own (docs/architecture.md, "Checkers in
  // the background"): the hash and the checkers follow the events through a
  // bounded queue, so the simulation's thread only encodes each event. Not
  // with JSON lines, digests or kept lines. Nothing read from the checkers
  // or hash() is valid until finish_background() returns; the result is
  // the same, bit for bit, as without.
  void start_background();
  void finish_background();
  bool background() const { return thread_ != nullptr; }

  void record(const TraceEvent& event);

  uint64_t hash() const;
  uint64_t event_count() const { return count_; }
  const std::vector<uint64_t>& digests() const { return digests_; }
  const std::vector<std::string>& lines() const { return lines_; }
  uint64_t count_of(EventKind kind) const { return kind_counts_[static_cast<size_t>(kind)]; }

  std::string to_json_line(uint64_t index, const TraceEvent& event) const;

 private:
  // The hash is the checkers' thread's while one runs, the count the
  // simulation's: on separate cache lines.
  alignas(64) TraceHash hash_;
  alignas(64) uint64_t count_ = 0;
  std::ostream* jsonl_ = nullptr;
  bool keep_digests_ = false;
  bool keep_lines_ = false;
  std::vector<uint64_t> digests_;
  std::vector<std::string> lines_;
  std::vector<std::string> node_names_;
  std::vector<Observer> observers_;
  std::vector<Observer> checkers_;
  std::vector<std::string> checker_names_;
  std::unique_ptr<CheckerThread> thread_;
  uint64_t kind_counts_[32] = {};

  friend class CheckerThread;
  void check(const TraceEvent& event);  // the hash and the checkers
};

std::string format_hash(uint64_t hash);  // "0x" + 16 hex digits
// Appends `text` as a JSON string: quoted, with \", \\, \n, \t and \u00XX escapes.
void append_json_string(std::string& out, std::string_view text);

}  // namespace leaseproof::sim
