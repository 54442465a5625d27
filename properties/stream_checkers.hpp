#pragma once
// Checkers of streaming (DESIGN.md section 4), observers of the trace plus
// the sink's change stream:
//
//   ExactlyOnceChecker  for every connection and hub epoch, the sink holds
//                       each published sequence number exactly once, in
//                       order, with no hole, except ranges a typed reset
//                       (resume.reset in the trace) declared lost; with a
//                       quiet end, every required connection is caught up.
//   DeadPeerChecker     every hub session of a subscriber whose process
//                       crashed is cut within ping interval + pong timeout
//                       (+ slack) of the crash, or of the session's open if
//                       the hub opened it after the crash.
//
// The sink is observed as DynamoDB Streams would show it: every accepted
// write to the sink table, in commit order, which is what a downstream
// consumer acts on; DynamoDB writes it into the trace (kSinkItemNote, from
// the table's change stream). Everything else comes from the trace too:
// hub.epoch and hub.publish (the hub), resume.reset (the clients). Each
// violation names the write that showed it: its sender (node#incarnation, and
// whether that process was still running when DynamoDB applied the write),
// the lease epoch, request message and range of the sink write's
// lease.request note (joined by message id with the sink.item note).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/ids.hpp"
#include "base/lex_compare.hpp"
#include "base/time.hpp"
#include "core/resume/client.hpp"
#include "sim/trace.hpp"

namespace leaseproof::properties {

// DynamoDB's note of one accepted write of the sink: detail "<connection>
// <hub epoch> <seq> new|replaced" (replaced: an item with that key existed
// already), value = the request's message id.
inline constexpr std::string_view kSinkItemNote = "sink.item";

class ExactlyOnceChecker {
 public:
  // `names`: a node's name, to name a write's sender (empty: "node <n>").
  explicit ExactlyOnceChecker(std::function<std::string(NodeId)> names = {}) : names_(std::move(names)) {}
  void observe(const sim::TraceEvent& event);
  // One accepted write of the sink: record (connection, hub epoch, seq);
  // `overwrote`: an item with that key existed already. observe() calls it
  // for each kSinkItemNote.
  // `message`: the writing request's message id (0: unknown), for naming it.
  void on_sink_write(std::string_view connection, uint64_t epoch, int64_t seq, bool overwrote, Instant at,
                     uint64_t message = 0);
  // End of run. `caught_up`: connections that must have recorded everything
  // published (publishing stopped long enough before the end, faults healed).
  void finish(const std::set<std::string, std::less<>>& caught_up);
  // What the hub holds (every message of one size): a ring of `capacity`
  // messages (min of its message bound and its byte bound over the message
  // size) and a replay limit. Given, a typed reset is judged against it: an
  // evicted or epoch_changed reset may declare lost only what the ring no
  // longer held when it arrived, an over_limit one only what lies beyond the
  // replay limit. Unset: resets are taken as declared.
  void set_hub_ring(uint64_t capacity, int64_t replay_messages_max) {
    ring_capacity_ = capacity;
    replay_messages_max_ = replay_messages_max;
  }
  uint64_t resets_judged() const { return resets_judged_; }

  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t violation_count() const { return violation_count_; }
  std::string summary() const;
  uint64_t records() const { return records_; }
  uint64_t published() const { return published_; }
  // Declared lost by resets: gaps a later record jumped over, and (after
  // finish) the tails of epochs a reset left.
  uint64_t excused_messages() const { return excused_messages_; }
  // After finish: published but not recorded at the end, on connections not
  // required to catch up (neither recorded nor declared lost nor a violation).
  uint64_t not_yet_recorded() const { return not_yet_recorded_; }
  const std::map<std::string, uint64_t, std::less<>>& resets_by_kind() const { return resets_by_kind_; }

 private:
  struct EpochState {
    int64_t top = 0;       // last published
    int64_t recorded = 0;  // last recorded
    std::vector<std::pair<int64_t, int64_t>> excused;  // inclusive ranges declared lost
    bool all_excused = false;                          // the whole epoch was declared lost
  };
  using Key = std::pair<std::string, uint64_t>;  // (connection, hub epoch)
  // std::pair's order, with the names compared inline.
  struct KeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const noexcept {
      const int order = lex_compare(a.first, b.first);
      return order != 0 ? order < 0 : a.second < b.second;
    }
  };
  // A sink write as its lease.request note tells it; the note's detail
  // ("<kind> <connection> <lease epoch> <range>") is kept in sink_details_.
  struct SinkRequest {
    uint64_t message = 0;
    NodeId node;
    uint32_t incarnation = 0;
    Instant sent;
    size_t detail_at = 0;
    size_t detail_size = 0;
  };
  // A node's lifecycle: which incarnation runs, and since when it is down.
  struct NodeLife {
    uint32_t incarnation = 0;
    std::optional<Instant> down_since;
  };
  EpochState& epoch_state(std::string_view connection, uint64_t epoch);
  void on_sink_item(const sim::TraceEvent& event);
  void on_sink_request(const sim::TraceEvent& event);
  // " (written by worker-1#2: record c3 2 1:5..1:9, request message 812 sent at @1m; its sender crashed at @1m1s)"
  std::string written_by(uint64_t message) const;
  // The first kept request whose message id is at or after `message`.
  std::vector<SinkRequest>::const_iterator find_sink_request(uint64_t message) const;

  bool excused(std::string_view connection, uint64_t epoch, const EpochState& state, int64_t from, int64_t to) const;
  void on_reset(const sim::TraceEvent& event);
  void judge_reset(const sim::TraceEvent& event, std::string_view connection, std::string_view kind,
                   uint64_t after_epoch, int64_t after_seq, uint64_t resume_epoch, int64_t resume_seq);
  void violation(std::string text);

  static constexpr size_t kViolationsKept = 20;
  std::map<Key, EpochState, KeyLess> epochs_;  // walked in this order by the final check
  // The same states found by connection, then among its few epochs: every
  // publish and record note looks one up. Map nodes stay where they are.
  std::unordered_map<std::string, std::vector<std::pair<uint64_t, EpochState*>>, TextHash, std::equal_to<>>
      epochs_by_connection_;
  std::map<uint32_t, uint64_t> hub_epoch_;  // by hub node
  // Epochs declared lost per connection: (after epoch, resume epoch) ranges.
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>, std::less<>> lost_epochs_;
  std::optional<uint64_t> ring_capacity_;
  int64_t replay_messages_max_ = 0;
  uint64_t resets_judged_ = 0;
  std::vector<std::string> violations_;
  uint64_t violation_count_ = 0;
  uint64_t records_ = 0;
  uint64_t published_ = 0;
  uint64_t excused_messages_ = 0;
  uint64_t not_yet_recorded_ = 0;
  std::map<std::string, uint64_t, std::less<>> resets_by_kind_;
  std::function<std::string(NodeId)> names_;
  // Every sink write of the run, by message id (ascending: a note follows its
  // send); one allocation-free append each, as the checker sees thousands a
  // simulated minute.
  std::vector<SinkRequest> sink_requests_;
  std::string sink_details_;
  std::map<uint32_t, NodeLife> lives_;                        // by node
};

// Reconnect storms: after a mass close (the hub closing at least `min_wave`
// subscribers with one code at one instant, "hub.close" notes), the
// reconnects ("upstream.open" notes) in any one-second window stay within what
// full jitter allows. N clients each waiting uniform in [0, W], W the first
// attempt's window for that code (min(cap, base)), put N x (1 s / W) into one
// second on average; a Poisson count that size rarely passes its mean by five
// standard deviations, so the bound is N/W + 5 x sqrt(N/W) + 5 per second.
// (W under a second: N, all of them; nothing to judge.) Reconnects are counted
// from the close to W + 1 s after it.
class ReconnectStormChecker {
 public:
  using Window = std::function<Duration(uint16_t close_code)>;
  explicit ReconnectStormChecker(Window window, uint64_t min_wave = 50);
  // The clients' first-attempt window: min(cap, the code's base, else the base).
  explicit ReconnectStormChecker(const resume::ClientConfig& client, uint64_t min_wave = 50);

  void observe(const sim::TraceEvent& event);
  // Judges the waves (call once, after the last event).
  void finish();

  struct Wave {
    Instant at;
    uint16_t code = 0;
    uint64_t clients = 0;
    Duration window;
    uint64_t bound = 0;  // reconnects per second
    uint64_t peak = 0;
    uint64_t reconnects = 0;
    // The connections closed: only their first reconnect after the wave
    // counts (others open sessions at the same time for reasons of their
    // own: takeovers, earlier closes).
    std::set<std::string, std::less<>> closed;
  };
  const std::vector<Wave>& waves() const { return waves_; }
  const std::vector<std::string>& violations() const { return violations_; }
  std::string summary() const;

 private:
  void close_instant();

  Window window_;
  uint64_t min_wave_;
  Instant closes_at_;
  std::map<uint16_t, std::set<std::string, std::less<>>> closes_now_;  // connections by code, at closes_at_
  std::vector<Wave> waves_;
  std::vector<std::pair<Instant, std::string>> opens_;  // upstream.open: when, which connection
  std::vector<std::string> violations_;
  bool finished_ = false;
};

// Dead-peer detection: every hub session of a crashed subscriber is cut
// within `bound` of the moment the hub could first know: the crash, or the
// session's open if the subscribe was still on its way when the subscriber
// crashed (the hub then opens a session for a dead process). Sessions are
// matched by (subscriber, channel), oldest first.
class DeadPeerChecker {
 public:
  // `bound`: ping interval + pong timeout + the network's slack.
  DeadPeerChecker(std::function<std::string(NodeId)> names, Duration bound)
      : namer_(std::move(names)), bound_(bound) {}
  void observe(const sim::TraceEvent& event);
  void finish(Instant end);

  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t cut() const { return cut_; }          // dead subscribers the hub cut (all their sessions)
  Duration slowest() const { return slowest_; }  // longest time from death (or a later open) to cut
  std::string summary() const;

 private:
  std::function<std::string(NodeId)> namer_;
  std::map<uint32_t, std::string> names_;          // node -> "name#incarnation" of its process
  std::set<uint32_t> hubs_;                         // nodes that wrote upstream.* notes
  struct Sessions {
    std::map<std::string, std::deque<Instant>, std::less<>> opened;  // by channel: open times, oldest first
    uint64_t open = 0;
  };
  void judge(const std::string& who, std::string_view channel, Instant opened, Instant dead, Instant cut);

  std::map<std::string, Sessions> sessions_;  // hub sessions open, by subscriber name
  std::map<std::string, Instant> dead_since_;  // crashed subscribers (with or without sessions)
  std::vector<std::string> violations_;
  Duration bound_;
  uint64_t cut_ = 0;
  Duration slowest_ = Duration::zero();
};

}  // namespace leaseproof::properties
