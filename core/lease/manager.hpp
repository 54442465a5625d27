#pragma once
// One worker's lease manager for many connections. Sans-IO: every entry point
// takes the worker's own clock readings and appends the actions the caller must
// carry out (DynamoDB calls to send, upstream sessions to open or close, a
// release to announce); the caller calls on_timer() at next_deadline().
//
// Safety (core algorithm): a session is open only while the lease is ours by a
// margin. The owner closes it at a monotonic deadline measured from when it
// *sent* its last confirmed acquire or renew (lease - margin), whatever the
// replies do; every write is conditional on owner and epoch. See
// docs/lease-core.md for the argument and the bounds.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "base/lex_compare.hpp"  // TextHash
#include "base/wakeup_queue.hpp"
#include "base/random.hpp"
#include "base/time.hpp"
#include "core/dynamo/error.hpp"
#include "core/dynamo/types.hpp"
#include "core/lease/config.hpp"
#include "core/lease/requests.hpp"

namespace leaseproof::lease {

// The worker's own clock readings at the moment of a call.
using Clock = ClockReading;

// liveness: a write of a liveness item (the liveness algorithm's claim, renew
// and fence); reads of liveness items are `read`.
enum class RequestKind : uint8_t { acquire, renew, release, read, reconcile, liveness };
enum class CloseReason : uint8_t { released, deadline, lost, drained, stopped };
std::string_view to_string(RequestKind kind);
std::string_view to_string(CloseReason reason);

struct DynamoCall {
  uint64_t token = 0;  // pass back to on_reply
  RequestKind kind = RequestKind::read;
  std::string connection;  // empty for reconcile queries
  int64_t epoch = 0;       // the lease epoch the request is fenced by (0: none)
  dynamo::Request request;
};
struct OpenSession {
  std::string connection;
  int64_t epoch = 0;
  std::string ws_url;
  // The checkpoint as the acquire read it: resume after it.
  int64_t stream_epoch = 0;
  int64_t last_seq = 0;
};
struct CloseSession {
  std::string connection;
  int64_t epoch = 0;
  CloseReason reason = CloseReason::lost;
};
// Tell the other workers that `connection` is free. `deduplication_id`
// names this one release (the connection, the epoch released, this worker
// and process): a resend of the same notice is dropped by a FIFO queue, a
// later release of the same connection never is (its epoch is higher).
struct NotifyReleased {
  std::string connection;
  int64_t epoch = 0;
  std::string deduplication_id;  // release_notice_id(...)
};
// "<connection>@<worker>#<process incarnation>.<epoch>": one release.
std::string release_notice_id(std::string_view connection, std::string_view worker_id, int64_t process_incarnation,
                              int64_t epoch);
struct DrainComplete {};
// A rare path was taken (coverage marks: tests assert they were hit).
struct Mark {
  const char* name;
};
// This worker started (armed) or stopped watching another worker's lease for
// its expiry: while armed, it takes the lease over on its own once it
// expires, without waiting for a reconcile sweep. Checkers pick the recovery
// bound of a lost owner's gap by it (docs/lease-core.md, "Taking over").
struct WatchChange {
  std::string connection;
  bool armed = false;
};

using Action = std::variant<DynamoCall, OpenSession, CloseSession, NotifyReleased, DrainComplete, Mark, WatchChange>;
using Actions = std::vector<Action>;

class LeaseManager {
 public:
  // `config` must be valid (config.validate() empty).
  LeaseManager(LeaseConfig config, std::string worker_id, RandomSource& random, FaultHook& faults);
  // Slots and wakeups point into the slot map's nodes: a copy would point
  // into the original. A move keeps the nodes.
  LeaseManager(const LeaseManager&) = delete;
  LeaseManager& operator=(const LeaseManager&) = delete;
  LeaseManager(LeaseManager&&) = default;

  void start(Clock now, Actions& out);
  // The answer to a DynamoCall, or nullptr when it timed out (ambiguous).
  void on_reply(uint64_t token, const dynamo::Result<dynamo::Response>* reply, Clock now, Actions& out);
  // Another worker released this connection (e.g. an SQS message). False
  // when this worker has no room for it (at capacity, or draining): the
  // notice is for another worker, so the runtime hands it back to the queue
  // instead of deleting it. True when acted on (or already held or being
  // acquired here): the notice is done with.
  bool on_released(std::string_view connection, Clock now, Actions& out);
  void on_timer(Clock now, Actions& out);
  // Stop every session, release every lease, announce the releases, then
  // DrainComplete. Nothing is acquired after this.
  void on_sigterm(Clock now, Actions& out);

  // Monotonic time of the next on_timer() call needed; Instant::max() if none.
  Instant next_deadline() const;
  uint32_t active_connections() const;  // open sessions: the ActiveConnections metric
  // Connections this worker may still start acquiring (0 while draining):
  // how many release notices it can act on.
  uint32_t room() const;
  // Connections this manager keeps state for (held, watched, or due to be
  // looked at): bounded by those, not by every connection it ever met.
  size_t tracked_connections() const { return slots_.size(); }
  bool owns(std::string_view connection) const;
  const std::string& worker_id() const { return worker_id_; }
  // Liveness algorithm: this worker's incarnation (0 until it has claimed one).
  int64_t incarnation() const { return own_.incarnation; }
  // What the leases this process acquires name in owner_incarnation, beside
  // its worker id: the liveness incarnation, or in the core algorithm this
  // process's own random number, so that two processes started with one
  // worker id are two owners (docs/lease-core.md, "One worker id, two
  // processes"). 0 for the seed algorithm, which names the worker alone.
  int64_t tenure_incarnation() const;
  // This process's number (1..2^62), which the core algorithm's leases and
  // the liveness algorithm's claims (worker_claimant) name.
  // Drawn from the RandomSource at start() unless given before it: a real
  // process whose jitter is seeded for a reproducible run gives one from the
  // operating system, so that two processes given one seed still differ.
  void set_process_incarnation(int64_t incarnation);
  int64_t process_incarnation() const { return process_incarnation_; }
  static constexpr int64_t kProcessIncarnationMax = int64_t{1} << 62;
  const LeaseConfig& config() const { return config_; }
  bool draining() const { return draining_; }

 private:
  struct Held {
    int64_t epoch = 0;
    std::string ws_url;
    int64_t stream_epoch = 0;  // checkpoint at acquire
    int64_t last_seq = 0;
    Instant confirmed_sent;  // send time of the last confirmed acquire or renew
    Instant next_renew;
    bool open = false;
    uint64_t renew_token = 0;  // in flight
    Instant renew_sent;
    int64_t renew_expires_ms = 0;  // what the in-flight renew writes
    uint64_t read_token = 0;       // a re-read in flight
    uint64_t release_token = 0;
    uint32_t release_attempts = 0;
    uint64_t shown_round = 0;  // liveness: the last sweep round whose index showed it
    uint32_t read_attempts = 0;  // liveness: of the read of a held lease the sweep did not show
  };
  struct Watch {
    std::string owner;
    int64_t counter = 0;
    int64_t expires_ms = 0;
    Instant first_seen;  // when this counter value was first seen
    Instant check_at = Instant::max();
    uint64_t token = 0;  // a read or acquire in flight
    uint64_t seen_round = 0;  // the last sweep round that showed this lease
    // watches() of this lease's owner, as of known_workers_version_
    // `watcher_workers` (0: not ranked yet, or ranked for another owner).
    uint64_t watcher_workers = 0;
    bool watcher = false;
    // A lease this worker stopped acting on at its deadline: read it until a
    // read gets through, and take it back at once if it is still ours (the
    // sweep would, a reconcile interval later; nobody else may have room).
    bool reclaim = false;
    bool armed = false;  // the last WatchChange said armed
  };
  struct Pending {
    RequestKind kind = RequestKind::read;
    std::string connection;
    Instant sent;
    Instant request_sent;  // this request's own send (`sent` may be an earlier one's: an acquire's)
    int64_t epoch = 0;
    bool acquire_read = false;  // a read after an ambiguous acquire
    int64_t acquire_expires_ms = 0;  // what the acquire writes: tells whether it applied
    bool from_index = false;         // an acquire of a lease the GSI showed free
    uint64_t sweep_round = 0;        // a sweep's read of a candidate (0: not one)
    uint32_t sweep_attempt = 0;      // of that read: 1 for the first send
    // Liveness algorithm: what a request about a liveness item does, whose
    // item it is (another worker's), and the incarnation it names (an
    // acquire's or renew's own, a claim's new one, a fence's fenced one).
    uint8_t liveness_op = 0;  // LivenessOp
    bool unheld_release = false;  // a release of a lease this worker does not hold (release_unheld)
    bool reclaim = false;         // an acquire taking back this incarnation's own lease
    std::string peer;
    int64_t incarnation = 0;
  };
  enum LivenessOp : uint8_t { kNoLivenessOp, kClaim, kLivenessRenew, kReadOwn, kReadPeer, kFence, kRetire };
  // This worker's own liveness item (liveness algorithm).
  struct Own {
    int64_t incarnation = 0;  // 0: none claimed yet (or lost)
    Instant confirmed_sent;   // send time of the last confirmed claim or renew
    Instant next_renew = Instant::max();
    uint64_t token = 0;  // a claim, renew or read of the item in flight
    Instant renew_sent;
    int64_t renew_expires_ms = 0;
    bool renew_pending = false;  // a renew's outcome is being read
    // Joining: the item as last seen (none: absent), when its counter was
    // first seen, and when to look at it again.
    std::optional<LivenessView> seen;
    Instant seen_first;
    Instant join_check_at = Instant::max();
    // A claim whose reply was lost, recognised by the incarnation and stamp it wrote.
    int64_t claim_incarnation = 0;
    int64_t claim_expires_ms = 0;
    Instant claim_sent;
    bool stopped = false;   // the deadline passed: sessions are closed until a renew is confirmed
    bool unopened = false;  // a lease acquired past the deadline waits for a confirmed renew to open
    bool retired = false;   // drained: the item was fenced by its own worker (or that was tried)
  };
  // Another worker, as this one knows it: its liveness item, and those of its
  // leases this worker has seen (liveness algorithm).
  struct PeerLease {
    int64_t incarnation = 0;
    int64_t epoch = 0;
    uint64_t seen_round = 0;
    bool armed = false;  // this worker is one of the lease's watchers
  };
  struct Peer {
    std::optional<LivenessView> view;
    Instant first_seen;  // when view's counter (and incarnation) was first seen
    Instant check_at = Instant::max();
    uint64_t token = 0;  // a read or fence in flight
    uint64_t read_round = 0;  // the sweep round that last read the item
    uint32_t armed = 0;       // leases with armed set
    std::map<std::string, PeerLease, std::less<>> leases;
  };
  static constexpr uint32_t kSweepPageRetries = 3;  // per page, then the round is given up
  static constexpr uint32_t kSweepReadsInFlightMax = 128;  // a sweep's candidate reads sent at once
  // A page lost 4 times gives up one shard's round; a read lost as often
  // gives up one candidate's, and a sweep sends a read per candidate: more
  // tries, so that a sweep under heavy loss still decides about each.
  static constexpr uint32_t kSweepReadRetries = 6;
  struct SweepRead {
    std::string connection;
    uint32_t attempt = 1;  // 1 for the first send; a lost read is asked again kSweepReadRetries times
  };
  struct Sweep {
    uint32_t shard = 0;
    uint32_t pages = 0;
    uint64_t token = 0;
    std::optional<dynamo::Item> page_start;  // ExclusiveStartKey of the page in flight
    uint32_t page_failures = 0;
    // Candidates the index showed, read from the table (the core's index
    // holds keys only): waiting, and sent.
    std::deque<SweepRead> to_read;
    uint32_t reads_in_flight = 0;
    bool queries_done = false;  // every page asked (or given up): the round ends with its last read
    std::vector<LeaseView> free;  // candidates to acquire at the end
    // Every page of every shard was read: a lease this round did not show is
    // no longer STARTED (or not yet in the index).
    bool complete = true;
  };

  // Everything this worker keeps about one connection: held, watched, or
  // neither (then it is only a name). The wakeup queue points at slots, so a
  // slot is only erased when no wakeup does (drop_idle_slots).
  struct Slot {
    const std::string* connection = nullptr;  // the key of this slot in slots_
    std::optional<Held> held;
    std::optional<Watch> watch;
    // The due time of this slot's latest wakeup while that wakeup is queued
    // (max otherwise): a touch with the same due time queues nothing.
    Instant queued_at = Instant::max();
    // Liveness: acquires that failed in a row (throttled, or not applied
    // after a lost reply), and when the next may go out. The backoff doubles
    // up to a third of a lease, so a throttled partition is not hammered.
    uint32_t acquire_failures = 0;
    Instant acquire_retry_at;
  };
  Slot& slot(std::string_view connection);  // made on first use
  Slot* find_slot(std::string_view connection);
  const Slot* find_slot(std::string_view connection) const;
  Held* find_held(std::string_view connection);
  Watch* find_watch(std::string_view connection);
  bool holds(std::string_view connection) const;
  Held& hold(std::string_view connection, Held held, Actions& out);  // replaces any earlier one; ends a watch
  void drop_held(Slot& slot);
  void drop_watch(std::string_view connection, Actions& out);
  // Says (WatchChange) when this worker's will to take the lease over at its
  // expiry changes.
  void arm(std::string_view connection, Watch& watch, bool armed, Actions& out);
  // Drops the slots that hold nothing and that no wakeup points at (once a
  // reconcile round): a long-lived worker meets connections that come and go.
  void drop_idle_slots();
  // After a complete sweep: drops what this worker kept of leases it does not
  // watch and that the sweep did not show (stopped or deleted connections
  // leave the STARTED-only index and would never be observed again).
  void forget_unseen(Actions& out);

  Instant deadline_of(const Held& held) const;
  // Timers: every connection with something due (deadline, renew, watch
  // check; the sweep has no slot) has an entry at its due time, so a call
  // touches only what is due instead of scanning every lease. Entries made
  // stale by later changes are dropped when they surface.
  Instant due_time(const Slot* slot) const;  // null: the reconcile sweep
  void touch(std::string_view connection);   // "": the reconcile sweep
  void touch(Slot* slot);
  void process(Slot* slot, Clock now, Actions& out);
  uint64_t send(Actions& out, RequestKind kind, std::string_view connection, int64_t epoch, dynamo::Request request,
                Instant now_mono);
  void expire_deadlines(Clock now, Actions& out);
  void close(std::string_view connection, Held& held, CloseReason reason, Actions& out);
  void confirm(std::string_view connection, Held& held, Instant sent, Clock now, Actions& out);

  // Holding (manager.cpp).
  void renew(std::string_view connection, Held& held, Clock now, Actions& out);
  void on_renew_reply(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now, Actions& out);
  void on_held_read(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now, Actions& out);
  void on_release_reply(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                        Actions& out);
  void release(std::string_view connection, Held& held, Clock now, Actions& out);
  void notify_released(const std::string& connection, int64_t epoch, Actions& out) const;
  void finish_drain(Clock now, Actions& out);

  // Taking (manager_acquire.cpp).
  bool has_room() const;
  // `from_index`: the reconcile sweep's GSI view showed the lease free.
  void acquire(std::string_view connection, const AcquireBasis& basis, Clock now, Actions& out,
               bool from_index = false);
  void on_acquire_reply(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                        Actions& out);
  // After an acquire whose outcome is unknown: read the lease (again).
  void read_after_ambiguous_acquire(const Pending& acquire, Clock now, Actions& out);
  void on_acquire_read(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                       Actions& out);
  void take_over(const std::string& connection, const LeaseView& lease, Clock now, Actions& out);
  void observe(const LeaseView& lease, Clock now, Actions& out, bool from_sweep);
  bool watches(const LeaseView& lease) const;
  void check_watch(const std::string& connection, Watch& watch, Clock now, Actions& out);
  void watch_to_reclaim(Slot& target, Clock now);  // after a deadline stop (manager.cpp)
  void on_watch_read(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                     Actions& out);
  void start_sweep(Clock now, Actions& out);
  void query_page(Clock now, Actions& out, const std::optional<dynamo::Item>& start_key);
  void on_sweep_reply(const dynamo::Result<dynamo::Response>* reply, Clock now, Actions& out);
  void finish_sweep(Clock now, Actions& out);
  void read_candidates(Clock now, Actions& out);
  void on_sweep_read(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now, Actions& out);
  void sweep_saw(LeaseView lease, Clock now, Actions& out);
  void next_page(const std::optional<dynamo::Item>& last_evaluated_key, Clock now, Actions& out);
  void queries_done(Clock now, Actions& out);
  AcquireBasis basis_for(const LeaseView& lease) const;  // a lease the sweep found free to take

  // The liveness algorithm (manager_liveness.cpp).
  bool liveness() const { return config_.algorithm == Algorithm::liveness; }
  Instant liveness_due() const;
  void process_liveness(Clock now, Actions& out);
  void join(Clock now, Actions& out);
  void read_own(Clock now, Actions& out);
  void renew_liveness(Clock now, Actions& out);
  void on_liveness_reply(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                         Actions& out);
  void own_item_seen(const std::optional<LivenessView>& view, Clock now, Actions& out);
  void joined(int64_t incarnation, Instant sent, Clock now, Actions& out);
  void confirm_liveness(Instant sent, Clock now, Actions& out);
  void liveness_deadline(Clock now, Actions& out);
  void lose_incarnation(const std::optional<LivenessView>& view, Clock now, Actions& out);
  std::vector<Slot*> held_slots();  // in connection order
  void observe_owned(const LeaseView& lease, Clock now, Actions& out, bool from_sweep);
  void forget_peer_lease(std::string_view connection, Actions& out);
  void arm_peer_lease(std::string_view connection, Peer& peer, PeerLease& lease, bool armed, Actions& out);
  void peer_saw(const std::string& name, Peer& peer, const LivenessView& view, Clock now, Actions& out,
                bool take_all);
  void check_peer(const std::string& name, Peer& peer, Clock now, Actions& out);
  void take_dead(const std::string& connection, const std::string& owner, const PeerLease& lease, Clock now,
                 Actions& out);
  void forget_unseen_peers(Actions& out);
  // A lease naming this live incarnation that it cannot take back (no room):
  // nobody else may take it while the item lives, so it is released.
  void release_unheld(const std::string& connection, int64_t epoch, Clock now, Actions& out);
  // An acquire that failed (liveness): back off, then read the lease again.
  void acquire_failed(std::string_view connection, bool reclaim, Clock now, Actions& out);
  // Reads the lease again at `at` (liveness), taking it back if `reclaim`.
  void reread_at(Slot& target, bool reclaim, Instant at, Clock now);

  LeaseConfig config_;
  std::string worker_id_;
  // The core algorithm's owner_incarnation: drawn once, at start.
  int64_t process_incarnation_ = 0;
  RandomSource& random_;
  FaultHook& faults_;
  uint64_t next_token_ = 1;
  // Hashed: found by name on every reply and timer; nothing depends on the
  // order of its walks (the drain sorts what it sends).
  std::unordered_map<std::string, Slot, TextHash, std::equal_to<>> slots_;
  size_t held_count_ = 0;
  size_t watch_count_ = 0;
  std::unordered_map<uint64_t, Pending> pending_;  // by token; found, never walked
  // Replies with no answer that came back in less than half the request
  // timeout (a refused connection, a TLS failure, a reset): each is handled
  // when its request would have timed out, as if it had, so every retry the
  // core makes after a failure is paced by the timeout whatever the
  // transport. Without this, the paths that retry at once (a read after an
  // ambiguous acquire, a renew's read, a release) send one request per round
  // trip. By due time (monotonic), then token.
  std::set<std::pair<Instant, uint64_t>> early_failures_;
  void handle_early_failures(Clock now, Actions& out);
  std::set<std::string, std::less<>> acquiring_;
  std::set<std::string, std::less<>> known_workers_;  // owners seen by the last sweep
  uint64_t known_workers_version_ = 1;             // +1 whenever known_workers_ changes
  std::set<std::string, std::less<>> sweep_workers_;
  std::optional<Sweep> sweep_;
  uint64_t sweep_round_ = 0;
  // By due time, then connection name (the sweep first): renews sent
  // together come due together, and the names decide among them.
  struct Wakeup {
    Instant at;
    Slot* slot = nullptr;  // null: the reconcile sweep
  };
  struct WakeupLess {
    bool operator()(const Wakeup& a, const Wakeup& b) const {
      if (a.at != b.at) return a.at < b.at;
      if (a.slot == b.slot) return false;
      if (a.slot == nullptr || b.slot == nullptr) return a.slot == nullptr;
      return *a.slot->connection < *b.slot->connection;
    }
  };
  // Removes the first wakeup (every copy of it) and notes that it is gone.
  void pop_wakeup() const;
  mutable WakeupQueue<Wakeup, WakeupLess> wakeups_;
  mutable Instant sweep_queued_at_ = Instant::max();  // Slot::queued_at, for the sweep
  Instant next_reconcile_ = Instant::max();
  // Liveness algorithm: this worker's item and the other workers'. The
  // liveness slot is no connection's: its wakeups are the item's renew and
  // deadline and the peers' checks.
  Own own_;
  std::map<std::string, Peer, std::less<>> peers_;
  std::unordered_map<std::string, std::string, TextHash, std::equal_to<>> peer_of_;  // connection -> owner in peers_
  // On the heap: wakeups point at it, and a moved manager keeps it.
  std::unique_ptr<Slot> liveness_slot_ = std::make_unique<Slot>();
  bool draining_ = false;
  bool drain_complete_ = false;
};

}  // namespace leaseproof::lease
