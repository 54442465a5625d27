// The liveness algorithm: one heartbeat item per worker instead of a renew
// per lease (docs/lease-core.md, "The liveness algorithm").
//
// A worker claims an incarnation of its liveness item and renews it every
// heartbeat, conditional on that incarnation. Its leases name it and that
// incarnation, and it acts on all of them until one deadline: lease - margin
// after it sent its last confirmed claim or renew, on its monotonic clock.
// Another worker takes a lease only from a dead tenure: it first observes the
// owner's item expired (wall: the stamp plus the margin is behind its clock;
// counter: the counter unchanged for a lease plus the margin of its own
// time) and fences it (a new incarnation, FENCED, conditional on exactly what
// it observed), or sees that someone did; then every lease naming the older
// incarnation may be taken, each conditional on its owner, incarnation and
// epoch. The owner's renews are refused from the fence on, so a renew held
// in the network can no longer extend a dead incarnation.
#include <algorithm>
#include <limits>

#include "core/lease/manager.hpp"

namespace leaseproof::lease {
namespace {

bool is_error(const dynamo::Result<dynamo::Response>* reply, std::string_view type) {
  return reply != nullptr && !reply->ok() && reply->error().type == type;
}

// The liveness item a refused write returned (ALL_OLD); none when the reply
// carries no item (dynalite returns none).
std::optional<LivenessView> refused_item(const dynamo::Result<dynamo::Response>* reply) {
  if (!is_error(reply, dynamo::error_type::conditional_check_failed) || !reply->error().item) return std::nullopt;
  return parse_liveness(*reply->error().item);
}

}  // namespace

Instant LeaseManager::liveness_due() const {
  Instant due = Instant::max();
  if (own_.incarnation != 0) {
    if (!own_.stopped && held_count_ > 0) {
      due = std::min(due, own_.confirmed_sent + config_.lease_duration - config_.safety_margin);
    }
    if (!draining_ && own_.token == 0) due = std::min(due, own_.next_renew);
  } else if (!draining_ && own_.token == 0) {
    due = std::min(due, own_.join_check_at);
  }
  if (draining_) return due;
  for (const auto& [name, peer] : peers_) {
    if (peer.token == 0) due = std::min(due, peer.check_at);
  }
  return due;
}

void LeaseManager::process_liveness(Clock now, Actions& out) {
  const Instant deadline = own_.confirmed_sent + config_.lease_duration - config_.safety_margin;
  if (own_.incarnation != 0 && !own_.stopped && held_count_ > 0 && deadline <= now.monotonic) {
    liveness_deadline(now, out);
  }
  if (draining_) return;
  if (own_.token == 0) {
    if (own_.incarnation != 0 && own_.next_renew <= now.monotonic) {
      renew_liveness(now, out);
    } else if (own_.incarnation == 0 && own_.join_check_at <= now.monotonic) {
      own_.join_check_at = Instant::max();
      read_own(now, out);
    }
  }
  for (auto& [name, peer] : peers_) {
    if (peer.token == 0 && peer.check_at <= now.monotonic) check_peer(name, peer, now, out);
  }
}

// ---- this worker's own item ----------------------------------------------------

void LeaseManager::join(Clock now, Actions& out) {
  own_.claim_incarnation = own_.seen ? own_.seen->incarnation + 1 : 1;
  own_.claim_expires_ms = now.wall.ms() + config_.lease_duration.ms();
  own_.claim_sent = now.monotonic;
  own_.token = send(out, RequestKind::liveness, "", 0,
                    liveness_claim_request(config_, worker_id_, now.wall.ms(), own_.seen, process_incarnation_),
                    now.monotonic);
  Pending& pending = pending_.at(own_.token);
  pending.liveness_op = kClaim;
  pending.incarnation = own_.claim_incarnation;
}

void LeaseManager::read_own(Clock now, Actions& out) {
  own_.token = send(out, RequestKind::read, "", 0, liveness_read_request(config_, worker_id_), now.monotonic);
  pending_.at(own_.token).liveness_op = kReadOwn;
}

void LeaseManager::renew_liveness(Clock now, Actions& out) {
  if (faults_.fire("lease.renew.skip")) {  // a missed heartbeat (a GC hiccup, a slow loop)
    own_.next_renew = now.monotonic + config_.heartbeat_interval;
    return;
  }
  own_.renew_sent = now.monotonic;
  own_.renew_expires_ms = now.wall.ms() + config_.lease_duration.ms();
  own_.renew_pending = true;
  own_.token = send(out, RequestKind::liveness, "", 0,
                    liveness_renew_request(config_, worker_id_, own_.incarnation, now.wall.ms()), now.monotonic);
  Pending& pending = pending_.at(own_.token);
  pending.liveness_op = kLivenessRenew;
  pending.incarnation = own_.incarnation;
}

void LeaseManager::on_liveness_reply(const Pending& pending, const dynamo::Result<dynamo::Response>* reply,
                                     Clock now, Actions& out) {
  if (pending.liveness_op == kReadPeer || pending.liveness_op == kFence) {
    const auto found = peers_.find(pending.peer);
    if (found == peers_.end()) return;
    Peer& peer = found->second;
    peer.token = 0;
    const bool from_sweep = pending.sweep_round != 0;
    if (pending.liveness_op == kFence && reply != nullptr && reply->ok() && peer.view &&
        peer.view->incarnation == pending.incarnation) {
      out.push_back(Mark{"lease.liveness_fenced_peer"});
      LivenessView fenced = *peer.view;
      fenced.incarnation += 1;
      fenced.live = false;
      fenced.counter += 1;
      peer_saw(found->first, peer, fenced, now, out, from_sweep);
      return;
    }
    std::optional<LivenessView> view;
    if (pending.liveness_op == kReadPeer && reply != nullptr && reply->ok()) {
      const auto* get = std::get_if<dynamo::GetItemResponse>(&reply->value());
      if (get != nullptr && get->item) {
        view = parse_liveness(*get->item);
      } else if (get != nullptr) {
        // Never deleted by this protocol: a lease naming a worker without an
        // item names no live worker. Taken from its exact tenure.
        out.push_back(Mark{"lease.liveness_item_missing"});
        view = LivenessView{pending.peer, std::numeric_limits<int64_t>::max() - 1, false, 0, 0};
      }
    } else if (pending.liveness_op == kFence) {
      out.push_back(Mark{"lease.liveness_fence_refused"});
      view = refused_item(reply);
    }
    if (view) {
      peer_saw(found->first, peer, *view, now, out, from_sweep);
    } else if (peer.armed > 0 || pending.liveness_op == kFence) {
      // Lost, or refused without the item: look again.
      peer.check_at = now.monotonic + config_.retry_backoff;
    }
    return;
  }
  own_.token = 0;
  if (draining_) {
    // Renews stopped; whatever this was, the drain's last step is the retire.
    if (pending.liveness_op == kRetire) {
      own_.retired = true;
      out.push_back(Mark{reply != nullptr && reply->ok() ? "lease.liveness_retired" : "lease.liveness_retire_failed"});
    }
    return;
  }
  switch (pending.liveness_op) {
    case kClaim:
      if (reply != nullptr && reply->ok()) {
        joined(pending.incarnation, pending.sent, now, out);
      } else if (std::optional<LivenessView> view = refused_item(reply)) {
        own_item_seen(view, now, out);
      } else if (is_error(reply, dynamo::error_type::provisioned_throughput_exceeded)) {
        own_.join_check_at = now.monotonic + config_.retry_backoff;
      } else {
        read_own(now, out);  // lost, or refused without the item: what is there?
      }
      return;
    case kLivenessRenew:
      if (pending.incarnation != own_.incarnation) return;  // an incarnation since lost
      if (reply != nullptr && reply->ok()) {
        own_.renew_pending = false;
        confirm_liveness(pending.sent, now, out);
      } else if (is_error(reply, dynamo::error_type::provisioned_throughput_exceeded)) {
        out.push_back(Mark{"lease.renew_throttled"});
        own_.renew_pending = false;
        own_.next_renew = now.monotonic + config_.retry_backoff;
      } else if (std::optional<LivenessView> view = refused_item(reply)) {
        own_item_seen(view, now, out);
      } else {
        out.push_back(Mark{reply == nullptr ? "lease.renew_timeout_reread" : "lease.renew_refused_reread"});
        read_own(now, out);
      }
      return;
    case kReadOwn:
      if (reply == nullptr || !reply->ok()) {
        // Still unknown: try again after the backoff (the deadline protects us).
        if (own_.incarnation != 0) {
          own_.renew_pending = false;
          own_.next_renew = now.monotonic + config_.retry_backoff;
        } else {
          own_.join_check_at = now.monotonic + config_.retry_backoff;
        }
        return;
      }
      if (const auto* get = std::get_if<dynamo::GetItemResponse>(&reply->value()); get != nullptr) {
        own_item_seen(get->item ? parse_liveness(*get->item) : std::nullopt, now, out);
      }
      return;
    default: LP_UNREACHABLE("liveness op {}", static_cast<int>(pending.liveness_op));
  }
}

// What this worker's own item holds: after a refused write or a read.
void LeaseManager::own_item_seen(const std::optional<LivenessView>& view, Clock now, Actions& out) {
  if (own_.incarnation != 0) {
    if (!view || view->incarnation != own_.incarnation) {
      lose_incarnation(view, now, out);
      return;
    }
    if (own_.renew_pending) {
      own_.renew_pending = false;
      // As a lease renew's read: in wall mode a stamp at or past the renew's
      // is as good as it (a clock stepped back); in counter mode only the
      // renew's own stamp shows that its counter increment applied.
      const bool as_good = config_.expiry_mode == ExpiryMode::wall ? view->expires_at_ms >= own_.renew_expires_ms
                                                                   : view->expires_at_ms == own_.renew_expires_ms;
      if (as_good) {
        out.push_back(Mark{"lease.renew_confirmed_by_read"});
        confirm_liveness(own_.renew_sent, now, out);
        return;
      }
    }
    own_.next_renew = now.monotonic;  // it did not apply: renew again
    return;
  }
  // Ours only if this process wrote it: another process with this worker id
  // claims the same incarnation number, and its stamp may equal ours to the
  // millisecond (lease-swarm seed 700493 with twins: both acted for 46 s).
  if (view && view->live && view->incarnation == own_.claim_incarnation && view->claimant == process_incarnation_ &&
      view->expires_at_ms == own_.claim_expires_ms) {
    out.push_back(Mark{"lease.liveness_claim_was_ours"});  // applied; only its reply was lost
    joined(own_.claim_incarnation, own_.claim_sent, now, out);
    return;
  }
  if (!own_.seen || !view || own_.seen->incarnation != view->incarnation || own_.seen->counter != view->counter) {
    own_.seen_first = now.monotonic;
  }
  own_.seen = view;
  if (!view || !view->live) {
    join(now, out);  // none, or fenced: a new incarnation at once
    return;
  }
  // A live incarnation of this worker's id (a predecessor that may still
  // act): claimed only once it is seen expired, as a taker would fence it.
  out.push_back(Mark{"lease.liveness_join_waits_for_predecessor"});
  const Duration margin = config_.safety_margin;
  if (config_.expiry_mode == ExpiryMode::wall) {
    const Duration until = Duration::from_ms(view->expires_at_ms - now.wall.ms()) + margin;
    if (until < Duration::zero()) {
      join(now, out);
      return;
    }
    own_.join_check_at = now.monotonic + until + Duration::from_ms(1);
    return;
  }
  const Instant unchanged_long_enough = own_.seen_first + config_.lease_duration + margin;
  if (unchanged_long_enough <= now.monotonic) {
    join(now, out);
    return;
  }
  own_.join_check_at = std::min(unchanged_long_enough, now.monotonic + config_.watch_interval);
}

void LeaseManager::joined(int64_t incarnation, Instant sent, Clock now, Actions& out) {
  out.push_back(Mark{"lease.liveness_joined"});
  own_.incarnation = incarnation;
  own_.seen.reset();
  own_.join_check_at = Instant::max();
  own_.renew_pending = false;
  own_.stopped = false;
  own_.confirmed_sent = sent;
  own_.next_renew = sent + config_.renew_interval();
  if (next_reconcile_ == Instant::max() && !draining_) {
    const auto jitter =
        static_cast<int64_t>(random_.below(static_cast<uint64_t>(config_.reconcile_jitter_max.ns()) + 1));
    next_reconcile_ = now.monotonic + Duration::from_ns(jitter);
    touch("");
  }
  confirm_liveness(sent, now, out);
}

void LeaseManager::confirm_liveness(Instant sent, Clock now, Actions& out) {
  own_.confirmed_sent = std::max(own_.confirmed_sent, sent);
  own_.next_renew = own_.confirmed_sent + config_.renew_interval();
  if (own_.confirmed_sent + config_.lease_duration - config_.safety_margin <= now.monotonic) {
    out.push_back(Mark{"lease.confirmed_too_late"});
    own_.next_renew = now.monotonic;  // renew at once; open when that is confirmed in time
    return;
  }
  own_.stopped = false;
  if (!own_.unopened || draining_) return;
  own_.unopened = false;
  for (Slot* target : held_slots()) {
    Held& held = *target->held;
    if (held.open || held.release_token != 0) continue;
    held.open = true;
    out.push_back(OpenSession{*target->connection, held.epoch, held.ws_url, held.stream_epoch, held.last_seq});
  }
}

std::vector<LeaseManager::Slot*> LeaseManager::held_slots() {
  std::vector<Slot*> held;
  held.reserve(held_count_);
  for (auto& [connection, entry] : slots_) {
    if (entry.held) held.push_back(&entry);
  }
  std::sort(held.begin(), held.end(), [](const Slot* a, const Slot* b) { return *a->connection < *b->connection; });
  return held;
}

// The deadline of the whole worker: every session stops, and each lease is
// taken back under a new epoch once a read shows it still this
// incarnation's (a tenure reopened under its old epoch would share that
// epoch with writes of the one that stopped).
void LeaseManager::liveness_deadline(Clock now, Actions& out) {
  own_.stopped = true;
  for (Slot* target : held_slots()) {
    Held& held = *target->held;
    if (held.release_token != 0) continue;
    if (held.open) out.push_back(Mark{"lease.deadline_stop"});
    close(*target->connection, held, CloseReason::deadline, out);
    drop_held(*target);
    if (!draining_) watch_to_reclaim(*target, now);
    touch(target);
  }
}

// The item names another incarnation: this one was fenced (or its id
// claimed anew). Stop acting at once, let every lease go (they name a dead
// tenure now), and claim a new incarnation.
void LeaseManager::lose_incarnation(const std::optional<LivenessView>& view, Clock now, Actions& out) {
  out.push_back(Mark{"lease.liveness_lost"});
  for (Slot* target : held_slots()) {
    Held& held = *target->held;
    close(*target->connection, held, CloseReason::lost, out);
    drop_held(*target);
    touch(target);
  }
  own_ = Own{};
  own_.seen = view;
  own_.seen_first = now.monotonic;
  if (draining_) {
    finish_drain(now, out);
    return;
  }
  if (!view || !view->live) {
    join(now, out);
  } else {
    own_item_seen(view, now, out);
  }
}

// ---- other workers -------------------------------------------------------------

void LeaseManager::arm_peer_lease(std::string_view connection, Peer& peer, PeerLease& lease, bool armed,
                                  Actions& out) {
  if (lease.armed == armed) return;
  lease.armed = armed;
  if (armed) {
    ++peer.armed;
  } else {
    --peer.armed;
  }
  out.push_back(WatchChange{std::string(connection), armed});
}

void LeaseManager::forget_peer_lease(std::string_view connection, Actions& out) {
  const auto owner = peer_of_.find(connection);
  if (owner == peer_of_.end()) return;
  const auto peer = peers_.find(owner->second);
  peer_of_.erase(owner);
  if (peer == peers_.end()) return;
  const auto lease = peer->second.leases.find(connection);
  if (lease == peer->second.leases.end()) return;
  arm_peer_lease(connection, peer->second, lease->second, false, out);
  peer->second.leases.erase(lease);
  if (peer->second.armed == 0) peer->second.check_at = Instant::max();
}

// Another worker's lease, or one of this worker's earlier incarnation's:
// what it says of its owner decides whether it may be taken now (a dead
// tenure), or waits for the owner's item to be seen expired.
void LeaseManager::observe_owned(const LeaseView& lease, Clock now, Actions& out, bool from_sweep) {
  if (lease.owner == worker_id_ && lease.owner_incarnation == own_.incarnation) {
    // This incarnation's, not held: an acquire of ours applied unseen, or a
    // tenure stopped at the deadline. Taken back under a new epoch.
    if (holds(lease.connection) || acquiring_.contains(lease.connection) || draining_) return;
    if (!has_room()) {
      release_unheld(lease.connection, lease.epoch, now, out);
      return;
    }
    out.push_back(Mark{"lease.reclaim_own_stale"});
    AcquireBasis basis;
    basis.own_epoch = lease.epoch;
    acquire(lease.connection, basis, now, out);
    return;
  }
  if (lease.owner == worker_id_ && own_.incarnation != 0 && lease.owner_incarnation < own_.incarnation) {
    forget_peer_lease(lease.connection, out);
    out.push_back(Mark{"lease.own_dead_tenure"});
    take_dead(lease.connection, lease.owner, PeerLease{lease.owner_incarnation, lease.epoch, 0, false}, now, out);
    return;
  }
  if (const auto owner = peer_of_.find(lease.connection); owner != peer_of_.end() && owner->second != lease.owner) {
    forget_peer_lease(lease.connection, out);
  }
  const auto [entry, inserted] = peers_.try_emplace(lease.owner);
  Peer& peer = entry->second;
  peer_of_[lease.connection] = lease.owner;
  PeerLease& known = peer.leases[lease.connection];
  known.incarnation = lease.owner_incarnation;
  known.epoch = lease.epoch;
  if (from_sweep) known.seen_round = sweep_round_;
  // The sweep ranks the watchers (as the core's); a lease this worker read
  // or was refused on is watched by it too. A draining worker watches nothing.
  const bool watcher = !draining_ && (!from_sweep || watches(lease));
  arm_peer_lease(lease.connection, peer, known, watcher, out);
  const bool read_this_round = from_sweep && peer.read_round == sweep_round_;
  if (peer.view && (read_this_round || !from_sweep)) {
    if (peer.view->incarnation > known.incarnation) {
      if (known.armed || from_sweep) take_dead(lease.connection, lease.owner, known, now, out);
      return;
    }
    if (known.armed && peer.token == 0 && peer.check_at == Instant::max()) {
      peer_saw(entry->first, peer, *peer.view, now, out, false);
    }
    return;
  }
  if (peer.token != 0) return;  // a read or fence in flight tells soon
  if (from_sweep) peer.read_round = sweep_round_;
  check_peer(entry->first, peer, now, out);
  if (from_sweep) pending_.at(peer.token).sweep_round = sweep_round_;
}

void LeaseManager::check_peer(const std::string& name, Peer& peer, Clock now, Actions& out) {
  peer.check_at = Instant::max();
  peer.token = send(out, RequestKind::read, "", 0, liveness_read_request(config_, name), now.monotonic);
  Pending& pending = pending_.at(peer.token);
  pending.liveness_op = kReadPeer;
  pending.peer = name;
}

// What another worker's item shows. Leases naming an older incarnation are
// taken (those this worker watches; every one a sweep showed, when a sweep
// asked); a live incarnation is fenced once seen expired, or looked at
// again when it could be.
void LeaseManager::peer_saw(const std::string& name, Peer& peer, const LivenessView& view, Clock now, Actions& out,
                            bool take_all) {
  if (!peer.view || peer.view->counter != view.counter || peer.view->incarnation != view.incarnation) {
    peer.first_seen = now.monotonic;  // a new value: the clock starts again
  }
  peer.view = view;
  peer.check_at = Instant::max();
  std::vector<std::pair<std::string, PeerLease>> dead;
  bool wanted = false;  // a lease of the live incarnation this worker would take
  for (const auto& [connection, lease] : peer.leases) {
    if (!lease.armed && !take_all) continue;
    if (view.incarnation > lease.incarnation) {
      dead.emplace_back(connection, lease);
    } else {
      wanted = true;
    }
  }
  for (const auto& [connection, lease] : dead) take_dead(connection, name, lease, now, out);
  if (!wanted || !view.live || draining_) return;
  const Duration margin = config_.safety_margin;
  bool expired = false;
  if (config_.expiry_mode == ExpiryMode::wall) {
    const Duration until = Duration::from_ms(view.expires_at_ms - now.wall.ms()) + margin;
    expired = until < Duration::zero();
    if (!expired && peer.armed > 0) peer.check_at = now.monotonic + until + Duration::from_ms(1);
  } else {
    const Instant unchanged_long_enough = peer.first_seen + config_.lease_duration + margin;
    expired = unchanged_long_enough <= now.monotonic;
    if (!expired && peer.armed > 0) {
      peer.check_at = std::min(unchanged_long_enough, now.monotonic + config_.watch_interval);
    }
  }
  if (!expired) return;
  if (!has_room()) {
    // Full: the workers with room fence it and take its leases (this one
    // stops watching them, as the core's watcher does at its check).
    for (auto& [connection, lease] : peer.leases) arm_peer_lease(connection, peer, lease, false, out);
    return;
  }
  out.push_back(Mark{"lease.liveness_fence"});
  peer.token = send(out, RequestKind::liveness, "", 0, liveness_fence_request(config_, view, now.wall.ms()),
                    now.monotonic);
  Pending& pending = pending_.at(peer.token);
  pending.liveness_op = kFence;
  pending.peer = name;
  pending.incarnation = view.incarnation;
  if (take_all) pending.sweep_round = sweep_round_;
}

void LeaseManager::release_unheld(const std::string& connection, int64_t epoch, Clock now, Actions& out) {
  out.push_back(Mark{"lease.released_unheld"});
  const uint64_t token = send(out, RequestKind::release, connection, epoch,
                              release_request(config_, connection, worker_id_, epoch), now.monotonic);
  pending_.at(token).unheld_release = true;
}

void LeaseManager::acquire_failed(std::string_view connection, bool reclaim, Clock now, Actions& out) {
  out.push_back(Mark{"lease.acquire_failed_backoff"});
  Slot& target = slot(connection);
  const uint32_t doublings = std::min<uint32_t>(target.acquire_failures++, 16);
  target.acquire_retry_at =
      now.monotonic + std::min(config_.retry_backoff * (int64_t{1} << doublings), config_.lease_duration / 3);
  if (target.watch) target.watch->token = 0;  // the acquire it waited on is over
  reread_at(target, reclaim, target.acquire_retry_at, now);
}

void LeaseManager::reread_at(Slot& target, bool reclaim, Instant at, Clock now) {
  if (target.held) return;
  watch_to_reclaim(target, now);
  Watch& watch = *target.watch;
  watch.reclaim = reclaim;
  if (watch.token == 0) watch.check_at = at;
  touch(&target);
}

void LeaseManager::take_dead(const std::string& connection, const std::string& owner, const PeerLease& lease,
                             Clock now, Actions& out) {
  if (holds(connection) || acquiring_.contains(connection)) return;
  if (!has_room()) {
    if (const auto peer = peers_.find(owner); peer != peers_.end()) {
      if (const auto known = peer->second.leases.find(connection); known != peer->second.leases.end()) {
        arm_peer_lease(connection, peer->second, known->second, false, out);
      }
    }
    return;
  }
  out.push_back(Mark{"lease.takeover_expired"});
  AcquireBasis basis;
  basis.dead_tenure = AcquireBasis::Tenure{owner, lease.incarnation, lease.epoch};
  acquire(connection, basis, now, out);
}

// After a complete sweep: what this worker knows of other workers' leases
// the sweep did not show (stopped, or taken by this worker) is dropped, and
// so are the workers left with none.
void LeaseManager::forget_unseen_peers(Actions& out) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& peer = it->second;
    for (auto lease = peer.leases.begin(); lease != peer.leases.end();) {
      if (lease->second.seen_round == sweep_round_ || acquiring_.contains(lease->first)) {
        ++lease;
        continue;
      }
      arm_peer_lease(lease->first, peer, lease->second, false, out);
      peer_of_.erase(lease->first);
      lease = peer.leases.erase(lease);
    }
    if (peer.leases.empty() && peer.token == 0) {
      it = peers_.erase(it);
    } else {
      if (peer.armed == 0) peer.check_at = Instant::max();
      ++it;
    }
  }
}

}  // namespace leaseproof::lease
