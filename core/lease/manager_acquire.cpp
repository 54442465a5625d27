// Taking leases: reconcile sweeps, watching leases for expiry, acquiring.
#include "core/lease/manager.hpp"

#include <algorithm>

namespace leaseproof::lease {
namespace {

bool is_error(const dynamo::Result<dynamo::Response>* reply, std::string_view type) {
  return reply != nullptr && !reply->ok() && reply->error().type == type;
}

// The lease in an item that may be absent: a std::optional<Item> (a write's
// ReturnValues) or a std::shared_ptr<const Item> (a GetItem's).
template <typename MaybeItem>
std::optional<LeaseView> item_lease(const MaybeItem& item) {
  if (!item) return std::nullopt;
  return parse_lease(*item);
}

// Rendezvous hashing: a stable score of (connection, worker), so every worker
// that knows the same set of workers picks the same watchers. The
// connection's part is mixed once and shared by every worker's score.
constexpr uint64_t kFnvPrime = 0x100000001B3ULL;

void mix_score(uint64_t& hash, std::string_view text) {
  for (char c : text) hash = (hash ^ static_cast<uint8_t>(c)) * kFnvPrime;
  hash = (hash ^ 0xFF) * kFnvPrime;
}

uint64_t connection_score_part(std::string_view connection) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  mix_score(hash, connection);
  return hash;
}

uint64_t score(uint64_t connection_part, std::string_view worker) {
  uint64_t hash = connection_part;
  mix_score(hash, worker);
  hash ^= hash >> 31;
  hash *= 0x7FB5D329728EA185ULL;
  return hash ^ (hash >> 27);
}

}  // namespace

bool LeaseManager::has_room() const {
  if (liveness() && own_.incarnation == 0) return false;  // nothing to name as its owner yet
  return !draining_ && held_count_ + acquiring_.size() < config_.capacity;
}

uint32_t LeaseManager::room() const {
  return has_room() ? static_cast<uint32_t>(config_.capacity - held_count_ - acquiring_.size()) : 0;
}

void LeaseManager::acquire(std::string_view connection, const AcquireBasis& basis, Clock now, Actions& out,
                           bool from_index) {
  if (!has_room() || holds(connection) || acquiring_.contains(connection)) return;
  if (liveness()) {
    Slot& target = slot(connection);
    if (now.monotonic < target.acquire_retry_at) {
      // Backing off after a failure: the read at the end of it decides.
      reread_at(target, basis.own_epoch.has_value(), target.acquire_retry_at, now);
      return;
    }
  }
  acquiring_.insert(std::string{connection});
  const uint64_t token =
      send(out, RequestKind::acquire, connection, 0,
           acquire_request(config_, connection, worker_id_, now.wall.ms(), basis, tenure_incarnation()), now.monotonic);
  pending_.at(token).acquire_expires_ms = now.wall.ms() + config_.lease_duration.ms();
  pending_.at(token).from_index = from_index;
  pending_.at(token).incarnation = tenure_incarnation();
  pending_.at(token).reclaim = basis.own_epoch.has_value();
  if (Watch* watch = find_watch(connection); watch != nullptr) watch->token = token;
}

void LeaseManager::read_after_ambiguous_acquire(const Pending& acquire, Clock now, Actions& out) {
  const uint64_t token =
      send(out, RequestKind::read, acquire.connection, 0, read_request(config_, acquire.connection), now.monotonic);
  pending_.at(token).acquire_read = true;
  pending_.at(token).sent = acquire.sent;  // the acquire's send time bounds its deadline
  pending_.at(token).acquire_expires_ms = acquire.acquire_expires_ms;
  pending_.at(token).incarnation = acquire.incarnation;
}

void LeaseManager::on_acquire_reply(const Pending& pending, const dynamo::Result<dynamo::Response>* reply,
                                    Clock now, Actions& out) {
  if (reply == nullptr && config_.algorithm != Algorithm::seed) {
    // Applied or not? Read it: the lease may be ours (acquire OR lease_owner = :me).
    out.push_back(Mark{"lease.ambiguous_acquire"});
    read_after_ambiguous_acquire(pending, now, out);
    return;
  }
  acquiring_.erase(pending.connection);
  if (Watch* watch = find_watch(pending.connection); watch != nullptr) watch->token = 0;
  if (reply == nullptr || !reply->ok()) {
    if (is_error(reply, dynamo::error_type::conditional_check_failed)) {
      out.push_back(Mark{"lease.acquire_refused"});
      const std::optional<LeaseView> lease = item_lease(reply->error().item);
      if (pending.from_index && lease && !lease->owner.empty()) {
        // The GSI said free, the table says owned: the index lagged (or
        // someone acquired since the sweep). The condition kept us safe.
        out.push_back(Mark{"lease.index_view_outdated"});
      }
      if (lease) observe(*lease, now, out, false);
    } else if (liveness() && !draining_ && !holds(pending.connection)) {
      // Throttled or failed, so not applied: a lease of this incarnation
      // stays named after it (nobody else may take it while the item
      // lives), and a dead tenure's is still to take. Read it again.
      acquire_failed(pending.connection, pending.reclaim, now, out);
    }
    return;
  }
  const auto& update = std::get<dynamo::UpdateItemResponse>(reply->value());
  const std::optional<LeaseView> lease = item_lease(update.attributes);
  if (liveness() && pending.incarnation != own_.incarnation) {
    // Taken under an incarnation that has since been fenced: the lease names
    // a dead worker, and anyone (this worker too) may take it from that tenure.
    out.push_back(Mark{"lease.acquired_under_lost_incarnation"});
    return;
  }
  Held held;
  held.epoch = lease ? lease->epoch : 0;
  held.ws_url = lease ? lease->ws_url : std::string{};
  held.stream_epoch = lease ? lease->stream_epoch : 0;
  held.last_seq = lease ? lease->last_seq : 0;
  Held& ours = hold(pending.connection, std::move(held), out);
  confirm(pending.connection, ours, pending.sent, now, out);
  if (draining_) release(pending.connection, ours, now, out);  // acquired while draining: hand it back
}

void LeaseManager::on_acquire_read(const Pending& pending, const dynamo::Result<dynamo::Response>* reply,
                                   Clock now, Actions& out) {
  if (reply == nullptr && now.monotonic < pending.sent + config_.lease_duration) {
    // Still unknown. Giving up now would leave a lease that may be ours
    // orphaned until it expires, and then the next taker's acquire may be
    // lost the same way (DESIGN.md 6.3). Read again while the acquire's
    // lease could still be running; the request timeout paces the reads.
    out.push_back(Mark{"lease.ambiguous_acquire_reread"});
    read_after_ambiguous_acquire(pending, now, out);
    return;
  }
  acquiring_.erase(pending.connection);
  const auto* get = reply != nullptr && reply->ok() ? std::get_if<dynamo::GetItemResponse>(&reply->value()) : nullptr;
  const std::optional<LeaseView> lease = get != nullptr ? item_lease(get->item) : std::nullopt;
  const bool this_incarnation =
      lease && lease->owner_incarnation == pending.incarnation && tenure_incarnation() == pending.incarnation;
  if (!lease || lease->owner != worker_id_ || !this_incarnation) {
    if (Watch* watch = find_watch(pending.connection); watch != nullptr) watch->token = 0;
    if (lease) observe(*lease, now, out, false);
    return;
  }
  if (lease->expires_at_ms != pending.acquire_expires_ms) {
    // Ours, but an older lease of ours (its deadline passed): the acquire did
    // not apply, and this lease may be taken by anyone. Ask again.
    out.push_back(Mark{"lease.ambiguous_acquire_not_applied"});
    if (liveness()) {
      acquire_failed(pending.connection, pending.reclaim, now, out);
      return;
    }
    acquire(pending.connection, AcquireBasis{}, now, out);
    return;
  }
  out.push_back(Mark{"lease.ambiguous_acquire_was_ours"});
  Held held;
  held.epoch = lease->epoch;
  held.ws_url = lease->ws_url;
  held.stream_epoch = lease->stream_epoch;
  held.last_seq = lease->last_seq;
  Held& ours = hold(pending.connection, std::move(held), out);
  confirm(pending.connection, ours, pending.sent, now, out);
  if (draining_) release(pending.connection, ours, now, out);  // acquired while draining: hand it back
}

bool LeaseManager::on_released(std::string_view connection, Clock now, Actions& out) {
  expire_deadlines(now, out);
  if (holds(connection) || acquiring_.contains(connection)) return true;
  if (!has_room()) return false;
  acquire(connection, AcquireBasis{}, now, out);
  return true;
}

// ---- watching ------------------------------------------------------------------

// Whether this worker is one of the lease's watchers: the top
// watchers_per_lease workers by rendezvous score among the workers seen
// owning leases (and this one), the lease's owner excluded.
bool LeaseManager::watches(const LeaseView& lease) const {
  // A lease of this id but another process (core algorithm) is watched as
  // any other worker's: a predecessor's, or a second process's.
  if (lease.owner == worker_id_ && (liveness() || lease.owner_incarnation == tenure_incarnation())) return false;
  // This worker is a watcher when fewer than watchers_per_lease others rank
  // before it: by score, highest first, then by name.
  const uint64_t part = connection_score_part(lease.connection);
  const uint64_t mine = score(part, worker_id_);
  size_t before = 0;
  for (const std::string& worker : known_workers_) {
    if (worker == worker_id_ || worker == lease.owner) continue;
    const uint64_t theirs = score(part, worker);
    if ((theirs > mine || (theirs == mine && worker < worker_id_)) && ++before >= config_.watchers_per_lease) {
      return false;
    }
  }
  return true;
}

// Records what a read or a sweep showed of someone else's lease, and decides
// when to look again or whether to take it now.
void LeaseManager::observe(const LeaseView& lease, Clock now, Actions& out, bool from_sweep) {
  if (config_.algorithm == Algorithm::seed) return;  // the articles only reconcile
  if (lease.desired_state != kStarted || holds(lease.connection)) {
    drop_watch(lease.connection, out);
    if (liveness()) forget_peer_lease(lease.connection, out);
    return;
  }
  if (lease.owner.empty()) {
    take_over(lease.connection, lease, now, out);
    return;
  }
  if (liveness()) {
    observe_owned(lease, now, out, from_sweep);
    return;
  }
  Slot& target = slot(lease.connection);
  const bool inserted = !target.watch.has_value();
  if (inserted) {
    target.watch.emplace();
    ++watch_count_;
  }
  Watch& watch = *target.watch;
  if (from_sweep) watch.seen_round = sweep_round_;
  if (inserted || watch.counter != lease.counter || watch.owner != lease.owner) {
    watch.first_seen = now.monotonic;  // a new value: the clock starts again
  }
  if (watch.owner != lease.owner) watch.watcher_workers = 0;  // ranked for another owner
  watch.owner = lease.owner;
  // Watchers look again at the right moment; every other worker keeps what
  // the sweep showed, so that a lease whose watchers are gone (crashed,
  // paused, cut off) is still taken at a later sweep once it has expired.
  // The ranking changes only with the owner and the known workers: a sweep
  // ranks each lease once per set of known workers, not at every sweep.
  if (from_sweep && watch.watcher_workers != known_workers_version_) {
    watch.watcher = watches(lease);
    watch.watcher_workers = known_workers_version_;
  }
  // A draining worker takes nothing over: it watches nothing (a read it
  // had asked before the drain can still arrive).
  const bool watcher = !draining_ && (!from_sweep || watch.watcher);
  arm(lease.connection, watch, watcher, out);
  watch.counter = lease.counter;
  watch.expires_ms = lease.expires_at_ms;
  const Duration margin = config_.safety_margin;
  // Wall mode: when the owner's own stamp says the lease ends, plus the margin.
  const Duration until_expiry = Duration::from_ms(lease.expires_at_ms - now.wall.ms()) + margin;
  if (config_.expiry_mode == ExpiryMode::wall) {
    if (until_expiry < Duration::zero()) {
      take_over(lease.connection, lease, now, out);
      return;
    }
    watch.check_at = watcher ? now.monotonic + until_expiry + Duration::from_ms(1) : Instant::max();
    touch(&target);
    return;
  }
  const Instant unchanged_long_enough = watch.first_seen + config_.lease_duration + margin;
  if (unchanged_long_enough <= now.monotonic) {
    take_over(lease.connection, lease, now, out);
    return;
  }
  // Counter mode looks at no wall clock at all: re-read every watch interval,
  // so the owner's last counter is seen at most one interval after it was
  // written, and the lease is taken lease + margin after that.
  watch.check_at = watcher ? std::min(unchanged_long_enough, now.monotonic + config_.watch_interval) : Instant::max();
  touch(&target);
}

void LeaseManager::forget_unseen(Actions& out) {
  for (auto& [connection, target] : slots_) {
    if (!target.watch) continue;
    const Watch& watch = *target.watch;
    // A watcher's own reads find out that a lease stopped; a read or an
    // acquire in flight will tell too.
    const bool idle_record = watch.check_at == Instant::max() && watch.token == 0;
    if (!idle_record || watch.seen_round == sweep_round_) continue;
    arm(connection, *target.watch, false, out);
    target.watch.reset();
    --watch_count_;
    out.push_back(Mark{"lease.forgot_unseen"});
  }
}

void LeaseManager::take_over(const std::string& connection, const LeaseView& lease, Clock now, Actions& out) {
  AcquireBasis basis;
  if (config_.expiry_mode == ExpiryMode::counter && !lease.owner.empty()) basis.observed_counter = lease.counter;
  if (!lease.owner.empty()) out.push_back(Mark{"lease.takeover_expired"});
  if (!has_room()) {
    drop_watch(connection, out);
    return;
  }
  acquire(connection, basis, now, out);
}

void LeaseManager::check_watch(const std::string& connection, Watch& watch, Clock now, Actions& out) {
  watch.check_at = Instant::max();
  // Liveness: a lease this worker stopped may still name its live
  // incarnation, which nobody else may take: read it even when full, to take
  // it back or let it go (on_watch_read).
  if (!has_room() && !(liveness() && watch.reclaim && own_.incarnation != 0)) {
    arm(connection, watch, false, out);  // full: the sweep's workers with room take it
    return;
  }
  watch.token = send(out, RequestKind::read, connection, 0, read_request(config_, connection), now.monotonic);
}

void LeaseManager::on_watch_read(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                                 Actions& out) {
  Watch* watch = find_watch(pending.connection);
  if (watch == nullptr) return;
  watch->token = 0;
  const auto* get = reply != nullptr && reply->ok() ? std::get_if<dynamo::GetItemResponse>(&reply->value()) : nullptr;
  if (get == nullptr) {
    watch->check_at = now.monotonic + config_.retry_backoff;
    return;
  }
  const std::optional<LeaseView> lease = item_lease(get->item);
  if (!lease) {
    drop_watch(pending.connection, out);
    return;
  }
  if (watch->reclaim) {
    watch->reclaim = false;
    const bool this_incarnation = lease->owner_incarnation == tenure_incarnation();
    if (lease->desired_state == kStarted && lease->owner == worker_id_ && this_incarnation) {
      // Still ours (the sweep's rule: "OR lease_owner = :me" under a new epoch).
      out.push_back(Mark{"lease.reclaim_after_deadline"});
      AcquireBasis basis;
      if (liveness()) basis.own_epoch = lease->epoch;
      if (!has_room()) {
        drop_watch(pending.connection, out);
        if (liveness() && !draining_) release_unheld(pending.connection, lease->epoch, now, out);
        return;
      }
      acquire(pending.connection, basis, now, out);
      return;
    }
    // Someone else's, or free: watched only as any lease is (by its watchers).
    observe(*lease, now, out, !lease->owner.empty());
    return;
  }
  observe(*lease, now, out, false);
}

// ---- reconcile sweeps ----------------------------------------------------------

void LeaseManager::start_sweep(Clock now, Actions& out) {
  sweep_ = Sweep{};
  ++sweep_round_;
  sweep_workers_.clear();
  query_page(now, out, std::nullopt);
}

void LeaseManager::query_page(Clock now, Actions& out, const std::optional<dynamo::Item>& start_key) {
  ++sweep_->pages;
  sweep_->page_start = start_key;
  sweep_->token = send(out, RequestKind::reconcile, "", 0,
                       reconcile_query(config_, sweep_->shard, now.wall.ms(), start_key), now.monotonic);
}

void LeaseManager::on_sweep_reply(const dynamo::Result<dynamo::Response>* reply, Clock now, Actions& out) {
  if (!sweep_) return;
  const auto* query = reply != nullptr && reply->ok() ? std::get_if<dynamo::QueryResponse>(&reply->value()) : nullptr;
  if (query == nullptr) {
    // A lost page is asked again at once: giving up the round would leave
    // expired leases ownerless for a whole extra reconcile interval.
    if (sweep_->page_failures < kSweepPageRetries) {
      ++sweep_->page_failures;
      out.push_back(Mark{"lease.reconcile_page_retried"});
      const std::optional<dynamo::Item> start = sweep_->page_start;
      query_page(now, out, start);
      return;
    }
    out.push_back(Mark{"lease.reconcile_failed"});
    sweep_->complete = false;
    queries_done(now, out);  // try again next round
    return;
  }
  sweep_->page_failures = 0;
  static const std::vector<dynamo::Item> no_items;
  for (const dynamo::Item& item : query->items ? *query->items : no_items) {
    std::optional<LeaseView> lease = parse_lease(item);
    if (!lease) continue;
    // Shown, whatever happens to it below (a free lease is not observed).
    if (Watch* watch = find_watch(lease->connection); watch != nullptr) watch->seen_round = sweep_round_;
    if (config_.algorithm == Algorithm::seed) {
      sweep_saw(std::move(*lease), now, out);  // the articles' index projects every attribute
      continue;
    }
    // The core's index holds keys only (a renew writes the table alone): a
    // candidate is read from the table, strongly consistent, before anything
    // is decided about it. A lease this worker holds is alive: itself.
    if (Held* held = find_held(lease->connection); held != nullptr) {
      sweep_workers_.insert(worker_id_);
      held->shown_round = sweep_round_;
      continue;
    }
    if (acquiring_.contains(lease->connection)) continue;
    sweep_->to_read.push_back(SweepRead{lease->connection, 1});
  }
  read_candidates(now, out);
  // The next page goes out while this page's candidates are read: a sweep
  // takes about its queries' round trips or its slowest read, not their sum.
  next_page(query->last_evaluated_key, now, out);
}

// Sends the waiting candidates' reads, at most kSweepReadsInFlightMax at a time.
void LeaseManager::read_candidates(Clock now, Actions& out) {
  while (!sweep_->to_read.empty() && sweep_->reads_in_flight < kSweepReadsInFlightMax) {
    const SweepRead next = std::move(sweep_->to_read.front());
    sweep_->to_read.pop_front();
    const uint64_t token =
        send(out, RequestKind::read, next.connection, 0, read_request(config_, next.connection), now.monotonic);
    Pending& pending = pending_.at(token);
    pending.sweep_round = sweep_round_;
    pending.sweep_attempt = next.attempt;
    ++sweep_->reads_in_flight;
  }
}

void LeaseManager::on_sweep_read(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                                 Actions& out) {
  if (!sweep_ || pending.sweep_round != sweep_round_) return;  // its round is over
  --sweep_->reads_in_flight;
  const auto* get = reply != nullptr && reply->ok() ? std::get_if<dynamo::GetItemResponse>(&reply->value()) : nullptr;
  if (get == nullptr) {
    // A lost read is asked again at once, like a lost page; after that the
    // candidate waits for the next round.
    if (pending.sweep_attempt <= kSweepReadRetries) {
      out.push_back(Mark{"lease.sweep_read_retried"});
      sweep_->to_read.push_front(SweepRead{pending.connection, pending.sweep_attempt + 1});
    } else {
      out.push_back(Mark{"lease.sweep_read_failed"});
      sweep_->complete = false;
    }
  } else if (get->item) {
    if (std::optional<LeaseView> lease = parse_lease(*get->item)) sweep_saw(std::move(*lease), now, out);
  }
  read_candidates(now, out);
  if (sweep_->queries_done && sweep_->reads_in_flight == 0) finish_sweep(now, out);
}

// What the sweep decides about one lease it was shown: the index's copy (the
// articles' algorithm) or the table's, read just now (the core).
void LeaseManager::sweep_saw(LeaseView lease, Clock now, Actions& out) {
  // Only owners that look alive may be ranked as watchers: a crashed worker
  // stays the owner of its leases until they are taken, and counting it
  // could leave no live watcher for them at all (after a mass crash).
  bool looks_live = lease.expires_at_ms + config_.safety_margin.ms() >= now.wall.ms();
  if (liveness()) {
    // A lease says nothing of its owner's life: its liveness item does, as
    // far as this worker has read it (not yet read: assumed alive).
    const auto peer = peers_.find(lease.owner);
    looks_live = peer == peers_.end() || !peer->second.view ||
                 (peer->second.view->live && peer->second.view->incarnation == lease.owner_incarnation);
  }
  if (!lease.owner.empty() && looks_live) sweep_workers_.insert(lease.owner);
  if (holds(lease.connection) || acquiring_.contains(lease.connection)) return;
  if (lease.desired_state != kStarted) {
    drop_watch(lease.connection, out);  // stopped since the index showed it
    return;
  }
  if (lease.owner == worker_id_ && lease.owner_incarnation == tenure_incarnation()) {
    // Ours in the table but not held: our deadline passed (an outage, a
    // pause). Nobody else may be watching it; "OR lease_owner = :me" lets
    // us take it back under a new epoch.
    out.push_back(Mark{"lease.reclaim_own_stale"});
    sweep_->free.push_back(std::move(lease));
    return;
  }
  if (config_.algorithm == Algorithm::seed) {
    sweep_->free.push_back(std::move(lease));  // the seed's query returns expired leases only
    return;
  }
  if (lease.owner.empty()) {
    sweep_->free.push_back(std::move(lease));
  } else {
    observe(lease, now, out, true);
  }
}

// After a page: the next page of this shard, the next shard, or no more
// queries (the round ends once the last read is answered).
void LeaseManager::next_page(const std::optional<dynamo::Item>& last_evaluated_key, Clock now, Actions& out) {
  if (last_evaluated_key.has_value()) {
    if (sweep_->pages < config_.query_pages_max) {
      query_page(now, out, last_evaluated_key);
      return;
    }
    sweep_->complete = false;  // the rest of this shard waits for the next round
  }
  const bool more_shards = config_.algorithm != Algorithm::seed && sweep_->shard + 1 < config_.table.shards;
  if (more_shards) {
    ++sweep_->shard;
    sweep_->pages = 0;
    query_page(now, out, std::nullopt);
    return;
  }
  queries_done(now, out);
}

AcquireBasis LeaseManager::basis_for(const LeaseView& lease) const {
  AcquireBasis basis;
  if (!liveness() || lease.owner.empty()) return basis;
  if (lease.owner == worker_id_ && lease.owner_incarnation == own_.incarnation) {
    basis.own_epoch = lease.epoch;
  } else {
    basis.dead_tenure = AcquireBasis::Tenure{lease.owner, lease.owner_incarnation, lease.epoch};
  }
  return basis;
}

void LeaseManager::queries_done(Clock now, Actions& out) {
  sweep_->queries_done = true;
  if (sweep_->reads_in_flight == 0 && sweep_->to_read.empty()) finish_sweep(now, out);
}

void LeaseManager::finish_sweep(Clock now, Actions& out) {
  std::vector<LeaseView> free = std::move(sweep_->free);
  const bool complete = sweep_->complete;
  sweep_.reset();
  if (complete) forget_unseen(out);
  if (liveness()) {
    if (complete) forget_unseen_peers(out);
    // No renew tells the owner of a stop: a held lease the index did not
    // show (it leaves the index when STOPPED) is read, and let go if stopped.
    for (Slot* target : held_slots()) {
      Held& held = *target->held;
      if (held.shown_round == sweep_round_ || held.read_token != 0 || held.release_token != 0) continue;
      out.push_back(Mark{"lease.held_not_shown_read"});
      held.read_attempts = 0;
      held.read_token = send(out, RequestKind::read, *target->connection, held.epoch,
                             read_request(config_, *target->connection), now.monotonic);
    }
  }
  if (known_workers_ != sweep_workers_) {
    known_workers_ = sweep_workers_;
    ++known_workers_version_;
  }
  // Random order, so that workers sweeping at the same time spread out.
  for (size_t i = free.size(); i > 1; --i) std::swap(free[i - 1], free[random_.below(i)]);
  uint32_t started = 0;
  for (const LeaseView& lease : free) {
    if (holds(lease.connection) || acquiring_.contains(lease.connection)) continue;
    if (started == config_.acquire_per_round_max || !has_room()) {
      const bool own = lease.owner == worker_id_ && lease.owner_incarnation == own_.incarnation;
      if (liveness() && own && !draining_) release_unheld(lease.connection, lease.epoch, now, out);
      continue;
    }
    acquire(lease.connection, basis_for(lease), now, out, /*from_index=*/true);
    ++started;
  }
  const auto jitter = static_cast<int64_t>(random_.below(static_cast<uint64_t>(config_.reconcile_jitter_max.ns()) + 1));
  next_reconcile_ = now.monotonic + config_.reconcile_interval + Duration::from_ns(jitter);
  touch("");
  drop_idle_slots();
}

}  // namespace leaseproof::lease
