#pragma once
// The lease checkers: single ownership and the recovery-time bound (DESIGN.md
// section 4), decided from the trace alone (docs/trace-format.md, "Lease
// events"); they never see a model's internals.
//
// Acting is judged per instant of true time. All events that share one true
// time are applied first; the state they leave is what held until the next,
// later instant. So a worker that resumes and closes its sessions in the same
// instant (its deadline passed while it was paused) never acted again, two
// workers whose acting overlaps only inside one instant do not overlap, and a
// handover inside one instant leaves no ownerless gap. Every overlap and every
// gap reported has a positive length.
//
// A worker identity is (node, incarnation): a restarted process is a new worker.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/assert.hpp"
#include "base/lex_compare.hpp"
#include "base/ids.hpp"
#include "base/time.hpp"
#include "properties/acquire_rate_checker.hpp"
#include "properties/request_rate_checker.hpp"
#include "sim/trace.hpp"

namespace leaseproof::properties {

// Names nodes in messages, e.g. [&trace](NodeId n) { return std::string(trace.node_name(n)); }.
// An empty namer prints "node<index>".
using NodeNamer = std::function<std::string(NodeId)>;

struct WorkerIdentity {
  NodeId node;
  uint64_t incarnation = 0;  // 0 when no start/restart of the node was seen
  auto operator<=>(const WorkerIdentity&) const = default;
};

// What ended the acting that left a connection ownerless.
enum class GapCause : uint8_t {
  initial,     // never owned since control.started (measured, never judged)
  crash,       // crash or SIGKILL of the last owner
  pause,       // stop-the-world pause of the last owner
  graceful,    // lease.close released/drained, or exit
  lease_lost,  // lease.close deadline/lost
  stopped,     // lease.close stopped while the connection is still STARTED (never judged)
};
std::string_view to_string(GapCause cause);

// Nearest-rank percentile of values sorted ascending: the value at rank
// ceil(percent * n / 100) (rank at least 1). Zero for an empty list.
Duration nearest_rank(const std::vector<Duration>& ascending, uint32_t percent);

// Follows who acts as owner of which connection: sessions per (connection,
// worker identity), minus paused and dead workers. Shared by both checkers.
class ActingTracker {
 public:
  enum class NodeState : uint8_t { unknown, running, paused, down };
  struct NodeView {
    NodeState state = NodeState::unknown;
    uint64_t incarnation = 0;
    Instant read_at;  // true time of the node's most recent event (its readings)
    Instant wall;
    Instant monotonic;
    bool seen = false;
  };
  struct Session {
    uint64_t epoch = 0;
    Instant opened_at;
    Instant acting_since;  // the open, or the latest resume
    bool resumed = false;
  };
  struct Stop {
    GapCause cause = GapCause::initial;
    WorkerIdentity worker;
    Instant at;
  };

  explicit ActingTracker(NodeNamer names = {}) : names_(std::move(names)) {}

  // True when `event` begins a later instant than the events applied so far:
  // the caller settles the current instant before applying it.
  bool begins_new_instant(const sim::TraceEvent& event) const { return any_ && event.true_time > now_; }
  void apply(const sim::TraceEvent& event);

  Instant now() const { return now_; }
  // Connections whose acting may have changed since the last call, by name.
  std::set<std::string> take_touched();
  // The same without taking them, for several readers (LeaseCheckers): read
  // touched() from each, then clear_touched() once.
  const std::set<std::string>& touched() const { return touched_; }
  void clear_touched() { touched_.clear(); }
  // Trace-contract breaks (malformed details, a close without an open).
  std::vector<std::string> take_errors();

  std::vector<WorkerIdentity> acting(const std::string& connection) const;  // ascending
  const Session* session(const std::string& connection, WorkerIdentity worker) const;
  std::optional<Stop> last_stop(const std::string& connection) const;
  NodeView node(NodeId node) const;
  WorkerIdentity identity_of(NodeId node) const { return WorkerIdentity{node, node_view(node).incarnation}; }
  uint64_t acting_intervals() const { return acting_intervals_; }

  // Room to take one more lease (off until set_capacity): a worker node has
  // room while it runs (neither paused nor down), has not been sent SIGTERM
  // since it started, and its process acts in fewer than `capacity`
  // sessions. The worker nodes are those that noted a lease.request. Sessions
  // count acting only, so a worker that holds a lease it does not act on is
  // taken to have room: the stricter reading for the recovery bounds.
  void set_capacity(uint32_t capacity) { capacity_ = capacity; }
  uint32_t capacity() const { return capacity_; }
  // Whether `node` was a worker with room at every instant of [from, to).
  bool had_room_throughout(NodeId node, Instant from, Instant to) const;
  // The earliest instant t in [from, to) such that `node` was a worker with
  // room throughout [t, to); nullopt when it had none just before `to`.
  std::optional<Instant> room_since(NodeId node, Instant from, Instant to) const;
  // The worker nodes, ascending.
  std::vector<NodeId> workers() const;

 private:
  // When a worker node had no room: closed intervals [start, end), ascending,
  // and the one still open.
  struct RoomLog {
    bool worker = false;
    Instant worker_since;
    std::optional<Instant> full_since;
    std::vector<std::pair<Instant, Instant>> full;
  };
  struct ConnectionState {
    std::map<WorkerIdentity, Session> sessions;
    std::optional<Stop> last_stop;
  };
  NodeView& node_view(NodeId node) {  // every event: inline
    LP_ASSERT(node.valid());
    if (nodes_.size() <= node.value) nodes_.resize(node.value + 1);
    return nodes_[node.value];
  }
  const NodeView& node_view(NodeId node) const;
  bool is_acting(WorkerIdentity worker) const;
  void apply_lifecycle(const sim::TraceEvent& event);
  void apply_note(const sim::TraceEvent& event);
  void on_open(WorkerIdentity worker, std::string_view detail, Instant at);
  void on_close(WorkerIdentity worker, std::string_view detail, Instant at);
  // Ends every session of `worker` (crash, exit, a restart without a crash).
  void end_sessions(WorkerIdentity worker, GapCause cause, Instant at);
  // Marks the worker's connections touched; on a pause, records the stop.
  void touch_sessions(WorkerIdentity worker, std::optional<GapCause> stop_cause, Instant at);
  bool has_room(NodeId node) const;
  void update_room(NodeId node, Instant at);

  NodeNamer names_;
  std::vector<NodeView> nodes_;
  uint32_t capacity_ = 0;
  std::vector<RoomLog> rooms_;     // by node, while capacity_ is set
  std::vector<bool> draining_;     // by node: SIGTERM since its (re)start
  std::map<std::string, ConnectionState, LexLess> connections_;
  std::map<WorkerIdentity, std::set<std::string>> connections_of_;
  std::set<std::string> touched_;
  std::vector<std::string> errors_;
  Instant now_;
  bool any_ = false;
  uint64_t acting_intervals_ = 0;
};

// Single ownership: (1) no two worker identities act as owner of one
// connection during a positive length of true time; (2) no renew, release,
// checkpoint or record is accepted by DynamoDB under a stale epoch (an epoch
// below the item's, as DynamoDB's "dynamo.item" notes give it), whoever sent
// it, nor from a worker that is not the connection's latest acquirer in
// DynamoDB's own order of applied writes; (3) every tenure opens under an
// epoch above every earlier tenure's of its connection (lease.open notes;
// not judged for the articles' algorithm, which has no epoch:
// set_tenure_epochs_judged(false)).
// Hub-side session overlaps are figures, not violations.
class OwnershipChecker {
 public:
  explicit OwnershipChecker(NodeNamer names = {});

  void observe(const sim::TraceEvent& event);
  // Settles the last instant; overlaps still open end at `end`. Call once.
  void finish(Instant end);

  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t violation_count() const { return violation_count_; }

  // Coverage: a checker that passes because nothing happened shows zeros here.
  uint64_t acting_intervals() const { return tracker_->acting_intervals(); }
  uint64_t writes_checked() const { return writes_checked_; }
  // Writes judged against the item's epoch, and requests of an older epoch
  // than the item's that DynamoDB refused (the fence at work).
  uint64_t writes_judged_by_epoch() const { return writes_judged_by_epoch_; }
  uint64_t stale_epoch_refused() const { return stale_epoch_refused_; }
  // Tenures whose epoch was compared with an earlier tenure's of their connection.
  uint64_t tenures_judged_by_epoch() const { return tenures_judged_by_epoch_; }
  void set_tenure_epochs_judged(bool judged) { tenure_epochs_judged_ = judged; }
  uint64_t overlaps_checked() const { return overlaps_checked_; }
  // DynamoDB notes whose message id matched no lease.request (value 0 included).
  uint64_t unmatched_dynamodb_notes() const { return unmatched_dynamodb_notes_; }

  struct HubOverlap {
    uint64_t episodes = 0;  // periods of positive length with two or more sessions open
    Duration total = Duration::zero();
    Duration longest = Duration::zero();
  };
  const std::map<std::string, HubOverlap>& hub_overlaps() const { return hub_overlaps_; }
  uint64_t hub_overlap_episodes() const;
  Duration hub_overlap_time() const;

  std::string summary() const;

  static constexpr size_t kViolationsKept = 50;

 private:
  struct Reading {
    Instant read_at;
    Instant wall;
    Instant monotonic;
  };
  struct OverlapStart {
    Instant began;
    Reading first_reading;
    Reading second_reading;
    ActingTracker::Session first_session;
    ActingTracker::Session second_session;
  };
  using Pair = std::pair<WorkerIdentity, WorkerIdentity>;
  struct Request {
    WorkerIdentity worker;
    std::string kind;
    std::string connection;
    uint64_t epoch = 0;
  };
  struct Acquirer {
    WorkerIdentity worker;
    uint64_t epoch = 0;
    Instant at;
  };
  struct DynamoView {
    std::optional<Acquirer> latest;  // nullopt: never acquired, or released
    std::optional<Instant> released_at;
    std::optional<uint64_t> epoch;  // the item's, after the last applied write DynamoDB noted it for
  };
  struct HubState {
    std::map<std::string, uint32_t> open_by_worker;
    std::optional<Instant> overlap_since;
  };

  friend class LeaseCheckers;
  // Reads a tracker that LeaseCheckers feeds (one for both checkers).
  OwnershipChecker(NodeNamer names, ActingTracker& shared);
  // observe() is: settle at a new instant, before_apply, the tracker's
  // apply, after_apply.
  void before_apply(const sim::TraceEvent& event);
  // A message sent: the control plane's requests are told from the workers'.
  void on_send(const sim::TraceEvent& event);
  void after_apply(const sim::TraceEvent& event);
  // Settles the tracker's touched connections (read, not taken) and the hub's.
  void settle(Instant at);
  void settle_acting(const std::string& connection, Instant at);
  void settle_hub(const std::string& connection, Instant at);
  void drop_hub_sessions(const std::string& worker);
  void drop_all_hub_sessions();
  void end_hub_overlap(const std::string& connection, HubState& hub, Instant at);
  void report_overlap(const std::string& connection, const Pair& pair, const OverlapStart& start, Instant ended);
  void on_request(const sim::TraceEvent& event);
  void on_dynamodb(const sim::TraceEvent& event);
  void check_write(const Request& request, Instant at, uint64_t message);
  void on_item_note(const sim::TraceEvent& event);
  void on_open(const sim::TraceEvent& event);
  void on_upstream(const sim::TraceEvent& event);
  void violation(std::string text);
  std::string name(WorkerIdentity worker) const;
  Reading reading_of(NodeId node) const;

  NodeNamer names_;
  std::unique_ptr<ActingTracker> own_tracker_;  // null when shared
  ActingTracker* tracker_;
  std::map<std::string, std::map<Pair, OverlapStart>> overlaps_;
  std::unordered_map<uint64_t, Request> requests_;  // by DynamoDB request message id; never iterated
  std::unordered_map<std::string, DynamoView, TextHash, std::equal_to<>> dynamo_;  // never iterated
  std::map<std::string, HubState> hub_;
  // The nodes that note upstream sessions (the hub): when one crashes, every
  // session it held ends with it, closes or not.
  std::set<NodeId> upstream_nodes_;
  std::set<std::string> hub_touched_;
  std::map<std::string, HubOverlap> hub_overlaps_;
  std::vector<std::string> violations_;
  uint64_t violation_count_ = 0;
  uint64_t writes_checked_ = 0;
  uint64_t writes_judged_by_epoch_ = 0;
  uint64_t stale_epoch_refused_ = 0;
  uint64_t tenures_judged_by_epoch_ = 0;
  bool tenure_epochs_judged_ = true;
  struct Tenure {
    WorkerIdentity worker;
    uint64_t epoch = 0;
    Instant opened_at;
  };
  std::unordered_map<std::string, Tenure, TextHash, std::equal_to<>> highest_tenure_;  // never iterated
  // The last applied write's message and connection: DynamoDB's item note
  // for it follows at once.
  uint64_t last_applied_message_ = 0;
  std::string last_applied_connection_;
  uint64_t overlaps_checked_ = 0;
  uint64_t unmatched_dynamodb_notes_ = 0;
  uint64_t control_dynamodb_notes_ = 0;  // DynamoDB notes of the control plane's requests
  NodeId control_node_;                   // the node named "control", once it started
  std::set<uint64_t> control_requests_;   // its messages, until DynamoDB notes them
  bool finished_ = false;
};

// A recovery bound, term by term, e.g. for a crash:
// {{"lease", 20s}, {"margin", 2s}, {"watch granularity", 5s}, {"round trips", 1s}, {"reconnect", 500ms}}.
struct RecoveryBound {
  std::vector<std::pair<std::string, Duration>> terms;
  Duration total() const;
  std::string formula() const;  // "lease 20s + margin 2s + ... = 28.5s"
};

// An interval during which faults may prevent recovery. `node`/`peer` name the
// nodes it happened at (kNoNode when none): windows at a gap's last owner are
// that gap's own cause and never excuse it.
struct FaultWindow {
  Instant start;
  Instant end;  // Instant::max() while open
  std::string label;
  NodeId node;
  NodeId peer;
  // A clog (or requests held in flight): what was sent in it arrives late,
  // possibly after the window, so it reaches into every gap it overlaps.
  bool delays_delivery = false;
};

struct OwnerlessGap {
  enum class Verdict : uint8_t {
    pending,     // not judged yet (before finish)
    within,      // judged, within its bound
    beyond,      // judged, longer than its bound: a violation
    excused,     // a fault window overlapped [start, end]
    not_judged,  // cause initial or stopped, no bound for the cause, or still open and within it
  };
  std::string connection;
  GapCause cause = GapCause::initial;
  Instant began;
  std::optional<Instant> ended;  // nullopt: still ownerless at the end
  std::optional<WorkerIdentity> last_owner;
  // The bound that judges it: the watcher's path when another worker was
  // armed to take the lease over at its expiry (lease.watch) when the gap
  // began and stayed armed until the gap ended (or ended it), the sweep's
  // path otherwise (RecoveryChecker::set_watcher_bounds).
  enum class Path : uint8_t { sweep, watcher };
  Path path = Path::sweep;
  // The watcher's path: the workers armed throughout (or that took it over).
  std::vector<NodeId> watchers;
  // With a capacity (ActingTracker::set_capacity): whether a worker that
  // could take it had room throughout the gap. For the watcher's path one of
  // `watchers`; for a graceful release (the notice's bound) any worker but
  // the releaser's node. Without, the sweep's bound judges it: it waits for
  // a worker with room (a restart, a new worker, a release elsewhere).
  bool taker_had_room = true;
  // With a capacity: whether a worker other than the last owner's node had
  // room throughout the gap. When none had, the gap waited for one to have
  // room (a lease let go elsewhere, the owner's node back from its own
  // fault, a new worker): it is judged from `counted_from`, the earliest
  // instant from which some worker had room until the gap ended (the
  // owner's node counts once its own fault windows are over).
  bool others_had_room = true;
  std::optional<Instant> counted_from;
  // Requests about this connection (any worker's) that timed out during the
  // gap. The watcher's bound counts two; a gap with more is judged by the
  // sweep's bound instead (RecoveryChecker::kWatcherTimeoutsAssumed).
  uint64_t watcher_timeouts = 0;
  Verdict verdict = Verdict::pending;
  std::string excuse;  // the excusing window's label
};

struct GapStatistics {
  uint64_t count = 0;
  Duration p50 = Duration::zero();
  Duration p99 = Duration::zero();
  Duration max = Duration::zero();
};
struct CauseStatistics {
  GapStatistics all;     // every gap that ended
  GapStatistics judged;  // those judged against the bound
  uint64_t excused = 0;
  uint64_t beyond_bound = 0;
  uint64_t unfinished = 0;  // still ownerless at the end
  uint64_t judged_by_watcher = 0;  // of `judged`, those judged by the watcher's bound
};

// The recovery-time bound. An ownerless gap of a STARTED connection begins at
// the instant its last acting worker stopped acting and ends at the instant
// some worker acts again. Gaps are judged at finish(), so fault windows
// declared at any time count.
//
// Excusal rule: a gap is judged against its cause's bound only if no fault
// window overlaps [gap start, gap end], not counting windows at the
// gap's last owner's node that began by the gap's start (its own crash,
// pause, partitions, clogs, faults, clock steps: those are the gap's own
// cause), nor the faults declared irrelevant (ignore_faults_at,
// ignore_fault_site). Otherwise it is excused:
// counted and listed, never a violation. Windows observed: partition and clog
// (start to end), pause (to resume) and crash (to restart) of a node, fault
// and clock_step (one instant), and those added by add_fault_window.
class RecoveryChecker {
 public:
  RecoveryChecker(NodeNamer names, std::map<GapCause, RecoveryBound> bounds);

  void observe(const sim::TraceEvent& event);
  // E.g. DynamoDB throttling; `end` may be Instant::max() for "until the end".
  // At `node` (a worker whose writes are throttled, say): like its other
  // faults, it is no excuse for the gaps of its own leases that began after
  // it did (those are its doing) and excuses the others it overlaps.
  void add_fault_window(Instant start, Instant end, std::string label, NodeId node = kNoNode);
  // Faults that cannot delay a lease's recovery, so excuse no gap: those at
  // `node` or on its links (the upstream hub, a relay: leases never go
  // through them), and firings of the fault site `site` (one that acts on a
  // single lease of its worker, whose loss is then that gap's own cause).
  void ignore_faults_at(NodeId node);
  void ignore_fault_site(std::string site);
  // Stops: a connection whose desired_state became STOPPED (control.stopped)
  // must have no acting owner once `bound` has passed since the stop (its
  // owner learns at its next renew, or its deadline stops it). Checked at
  // every instant the checker settles, so an owner that acts past the bound
  // is caught at the first event after it. Unset: stops are not judged.
  void set_stop_bound(Duration bound) { stop_bound_ = bound; }
  uint64_t stops_judged() const { return stops_judged_; }
  // The watcher's path (DESIGN.md section 4): a gap whose lease another
  // worker watched (lease.watch notes) is judged by `bounds`' entry for its
  // cause when there is one, by the constructor's (the sweep's path) else.
  void set_watcher_bounds(std::map<GapCause, RecoveryBound> bounds) { watcher_bounds_ = std::move(bounds); }
  // Every worker takes at most `capacity` leases: a watcher, or for a
  // graceful release any other worker, that had no room throughout a gap
  // could not end it, and the sweep's bound judges it
  // (OwnerlessGap::taker_had_room). Call before the first event.
  void set_capacity(uint32_t capacity) { tracker_->set_capacity(capacity); }
  // The watcher's bound counts kWatcherTimeoutsAssumed timed-out requests.
  // A watched gap during which more requests about its connection
  // (lease.request notes, any worker's: the watchers' reads, the winning
  // acquire and its reads) timed out (message loss does this) is beyond that
  // assumption: the sweep's bound judges it, the path that recovers the
  // lease when the watch is slow. Counted.
  static constexpr uint64_t kWatcherTimeoutsAssumed = 2;
  uint64_t gaps_past_watcher_timeouts() const { return gaps_past_watcher_timeouts_; }
  // STARTED connections that had an acting owner at some instant of the run.
  uint64_t connections_owned() const { return connections_owned_; }
  const RecoveryBound* bound_for(const OwnerlessGap& gap) const;
  // Whether the watcher's bound judges it (its cause has one, and a watcher
  // was armed throughout).
  bool judged_by_watcher(const OwnerlessGap& gap) const {
    return gap.path == OwnerlessGap::Path::watcher && gap.watcher_timeouts <= kWatcherTimeoutsAssumed &&
           gap.taker_had_room && watcher_bounds_.contains(gap.cause);
  }
  // Gaps judged (not excused) by the sweep's bound because no worker that
  // could take them had room throughout (OwnerlessGap::taker_had_room).
  uint64_t gaps_without_room() const { return gaps_without_room_; }
  // Gaps judged from when a worker had room (OwnerlessGap::counted_from),
  // and gaps still open at the end with no worker with room (excused).
  uint64_t gaps_counted_from_room() const { return gaps_counted_from_room_; }
  // A watched gap the sweep's bound judges instead: more timeouts than assumed.
  bool past_watcher_timeouts(const OwnerlessGap& gap) const {
    return gap.path == OwnerlessGap::Path::watcher && gap.watcher_timeouts > kWatcherTimeoutsAssumed &&
           watcher_bounds_.contains(gap.cause);
  }
  // "watcher's" or "sweep's": whose bound judges it; empty when its cause
  // has one bound only.
  std::string_view path_name(const OwnerlessGap& gap) const;
  // Settles the last instant and judges every gap (once; later calls do nothing).
  void finish(Instant end);
  // Every STARTED connection must have an acting owner throughout
  // [max(healed_at, started_at) + bound, end]; each that has not is a
  // violation. Calls finish(end) first.
  void check_liveness(Instant healed_at, Duration bound, Instant end);

  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t violation_count() const { return violation_count_; }
  const std::vector<std::string>& excused() const { return excused_; }
  uint64_t excused_count() const { return excused_count_; }
  const std::vector<OwnerlessGap>& gaps() const { return gaps_; }
  const std::vector<FaultWindow>& fault_windows() const { return windows_; }
  std::map<GapCause, CauseStatistics> statistics() const;
  std::string summary() const;

  static constexpr size_t kViolationsKept = 50;
  static constexpr size_t kExcusedKept = 50;

 private:
  struct ConnectionView {
    bool started = false;
    Instant started_at;
    bool owned_since_started = false;
    bool ever_owned = false;
    std::optional<OwnerlessGap> open_gap;  // moves to gaps_ when it ends
    std::set<NodeId> armed;                // workers watching it (lease.watch)
    std::set<NodeId> gap_watchers;         // of those, armed since the open gap began
    std::optional<Instant> watcher_left;   // when the last of gap_watchers disarmed
    std::vector<NodeId> left_at;           // the gap watchers that disarmed at watcher_left
    std::vector<uint64_t> watched_requests;  // keys of watched_requests_ for the open gap
  };
  struct OpenWindow {
    Instant start;
    uint32_t depth = 0;
  };
  // (kind, node, peer) of a window that is still open.
  using WindowKey = std::tuple<sim::EventKind, NodeId, NodeId>;

  friend class LeaseCheckers;
  // Reads a tracker that LeaseCheckers feeds (one for both checkers).
  RecoveryChecker(NodeNamer names, std::map<GapCause, RecoveryBound> bounds, ActingTracker& shared);
  // observe() is: settle at a new instant, the tracker's apply, after_apply.
  void after_apply(const sim::TraceEvent& event);
  // Settles the tracker's touched connections (read, not taken) and this
  // checker's own.
  void settle(Instant at);
  void settle_connection(const std::string& connection, Instant at);
  void on_control(const sim::TraceEvent& event);
  void on_watch(const sim::TraceEvent& event);
  void disarm(ConnectionView& view, NodeId node, Instant at);
  // Ends every watch of `node` (it crashed or exited).
  void disarm_all(NodeId node, Instant at);
  void on_fault_event(const sim::TraceEvent& event);
  void on_request(const sim::TraceEvent& event);
  void on_timeout(const sim::TraceEvent& event);
  void close_gap(ConnectionView& view, bool keep);
  void open_window(WindowKey key, Instant at);
  void close_window(WindowKey key, Instant at, std::string label);
  const FaultWindow* excusing_window(const OwnerlessGap& gap, Instant until) const;
  void judge(OwnerlessGap& gap, Instant end);
  bool taker_had_room(const OwnerlessGap& gap, Instant end) const;
  bool others_had_room(const OwnerlessGap& gap, Instant end) const;
  // The gap's end, or its start plus its cause's bound in `bounds` if sooner.
  Instant while_bound_runs(const OwnerlessGap& gap, Instant end, const std::map<GapCause, RecoveryBound>& bounds) const;
  // Marks the gap excused for `why`, counted and listed.
  void excuse(OwnerlessGap& gap, Instant until, std::string why);
  // The earliest instant from which some worker had room until the gap's
  // end (see OwnerlessGap::counted_from); for the owner's node, also after
  // its own fault windows. nullopt: no worker had room just before the end.
  std::optional<Instant> room_from(const OwnerlessGap& gap, Instant until) const;
  std::string describe(const OwnerlessGap& gap, Instant until) const;
  std::string name(NodeId node) const;
  void violation(std::string text);

  NodeNamer names_;
  std::map<GapCause, RecoveryBound> bounds_;
  std::map<GapCause, RecoveryBound> watcher_bounds_;
  // Requests (message ids) about a connection sent while its gap is open:
  // their timeouts count against the watcher's bound.
  std::unordered_map<uint64_t, ConnectionView*> watched_requests_;  // map nodes stay put
  uint64_t open_gaps_ = 0;  // connections with an open gap
  uint64_t gaps_past_watcher_timeouts_ = 0;
  uint64_t gaps_without_room_ = 0;
  uint64_t gaps_counted_from_room_ = 0;
  uint64_t connections_owned_ = 0;
  std::unique_ptr<ActingTracker> own_tracker_;  // null when shared
  ActingTracker* tracker_;
  std::map<std::string, ConnectionView, std::less<>> connections_;
  std::set<std::string> touched_;
  std::vector<OwnerlessGap> gaps_;
  std::vector<FaultWindow> windows_;
  std::map<WindowKey, OpenWindow> open_windows_;
  std::vector<NodeId> ignored_nodes_;
  std::vector<std::string> ignored_sites_;
  std::vector<std::string> violations_;
  std::vector<std::string> excused_;
  uint64_t violation_count_ = 0;
  uint64_t excused_count_ = 0;
  uint64_t gaps_dropped_by_stop_ = 0;
  std::optional<Instant> finished_at_;
  std::optional<Duration> stop_bound_;
  std::map<std::string, Instant> stopping_;  // STOPPED connections still owned, since when
  uint64_t stops_judged_ = 0;
  void check_stops(Instant at);
};

// Both checkers fed from one observer, for a run's output. They read one
// ActingTracker, which this feeds once an event (each checker alone keeps its
// own).
class LeaseCheckers {
 public:
  LeaseCheckers(NodeNamer names, std::map<GapCause, RecoveryBound> bounds);
  // The checkers point at tracker_: not copied, not moved.
  LeaseCheckers(const LeaseCheckers&) = delete;
  LeaseCheckers& operator=(const LeaseCheckers&) = delete;

  void observe(const sim::TraceEvent& event);
  void add_fault_window(Instant start, Instant end, std::string label, NodeId node = kNoNode);
  void ignore_faults_at(NodeId node) { recovery_.ignore_faults_at(node); }
  void ignore_fault_site(std::string site) { recovery_.ignore_fault_site(std::move(site)); }
  void set_stop_bound(Duration bound) { recovery_.set_stop_bound(bound); }
  void set_watcher_bounds(std::map<GapCause, RecoveryBound> bounds) { recovery_.set_watcher_bounds(std::move(bounds)); }
  void set_capacity(uint32_t capacity) { recovery_.set_capacity(capacity); }
  // Judges acquire storms too (AcquireRateChecker), for leases of this length.
  void judge_acquire_rate(Duration lease_duration) { acquire_rate_.emplace(names_, lease_duration); }
  // Judges request storms of every kind too (RequestRateChecker).
  void judge_request_rate(RequestRateBounds bounds) { request_rate_.emplace(names_, bounds); }
  void finish(Instant end);
  void check_liveness(Instant healed_at, Duration bound, Instant end);
  // Appended to every violation, so each one says how to replay it.
  void set_reproduce_command(std::string command) { reproduce_ = std::move(command); }

  OwnershipChecker& ownership() { return ownership_; }
  RecoveryChecker& recovery() { return recovery_; }
  const OwnershipChecker& ownership() const { return ownership_; }
  const RecoveryChecker& recovery() const { return recovery_; }
  const AcquireRateChecker* acquire_rate() const { return acquire_rate_ ? &*acquire_rate_ : nullptr; }
  const RequestRateChecker* request_rate() const { return request_rate_ ? &*request_rate_ : nullptr; }

  std::vector<std::string> violations() const;
  uint64_t violation_count() const {
    return ownership_.violation_count() + recovery_.violation_count() +
           (acquire_rate_ ? acquire_rate_->violation_count() : 0) +
           (request_rate_ ? request_rate_->violation_count() : 0);
  }
  std::string summary() const;

 private:
  // Settles both checkers at the tracker's instant, then clears its touched set.
  void settle();

  NodeNamer names_;
  ActingTracker tracker_;
  OwnershipChecker ownership_;
  RecoveryChecker recovery_;
  std::optional<AcquireRateChecker> acquire_rate_;
  std::optional<RequestRateChecker> request_rate_;
  std::string reproduce_;
  bool finished_ = false;
};

}  // namespace leaseproof::properties
