// Holding leases: deadlines, renewals, re-reads, release and drain.
#include "core/lease/manager.hpp"

#include <algorithm>
#include <limits>

namespace leaseproof::lease {

std::string_view to_string(RequestKind kind) {
  switch (kind) {
    case RequestKind::acquire: return "acquire";
    case RequestKind::renew: return "renew";
    case RequestKind::release: return "release";
    case RequestKind::read: return "read";
    case RequestKind::reconcile: return "reconcile";
    case RequestKind::liveness: return "liveness";
  }
  LP_UNREACHABLE("request kind {}", static_cast<int>(kind));
}

std::string_view to_string(CloseReason reason) {
  switch (reason) {
    case CloseReason::released: return "released";
    case CloseReason::deadline: return "deadline";
    case CloseReason::lost: return "lost";
    case CloseReason::drained: return "drained";
    case CloseReason::stopped: return "stopped";
  }
  LP_UNREACHABLE("close reason {}", static_cast<int>(reason));
}

namespace {

bool is_error(const dynamo::Result<dynamo::Response>* reply, std::string_view type) {
  return reply != nullptr && !reply->ok() && reply->error().type == type;
}

// The lease item in a GetItem answer; nullopt when absent or not readable.
std::optional<LeaseView> read_lease(const dynamo::Result<dynamo::Response>* reply) {
  if (reply == nullptr || !reply->ok()) return std::nullopt;
  const auto* get = std::get_if<dynamo::GetItemResponse>(&reply->value());
  if (get == nullptr || !get->item) return std::nullopt;
  return parse_lease(*get->item);
}

}  // namespace

LeaseManager::LeaseManager(LeaseConfig config, std::string worker_id, RandomSource& random, FaultHook& faults)
    : config_(std::move(config)), worker_id_(std::move(worker_id)), random_(random), faults_(faults) {
  LP_ASSERT_MSG(config_.validate().empty(), "invalid lease config: {}", config_.validate());
  LP_ASSERT(!worker_id_.empty());
  static const std::string kNoConnection;  // the liveness slot's: no connection is named ""
  liveness_slot_->connection = &kNoConnection;
}

void LeaseManager::set_process_incarnation(int64_t incarnation) {
  LP_ASSERT_GE(incarnation, 1);
  LP_ASSERT_LE(incarnation, kProcessIncarnationMax);
  process_incarnation_ = incarnation;
}

int64_t LeaseManager::tenure_incarnation() const {
  switch (config_.algorithm) {
    case Algorithm::liveness: return own_.incarnation;
    case Algorithm::core: return process_incarnation_;
    case Algorithm::seed: return 0;
  }
  LP_UNREACHABLE("algorithm {}", static_cast<int>(config_.algorithm));
}

void LeaseManager::start(Clock now, Actions& out) {
  // 1..2^62: a process's own, not 0 (what a lease or a claim written by no
  // process, or by an older release, reads as).
  if (config_.algorithm != Algorithm::seed && process_incarnation_ == 0) {
    process_incarnation_ = 1 + static_cast<int64_t>(random_.below(static_cast<uint64_t>(kProcessIncarnationMax)));
  }
  // A small random delay spreads a fleet that starts at once.
  const auto jitter = static_cast<int64_t>(random_.below(static_cast<uint64_t>(config_.reconcile_jitter_max.ns()) + 1));
  if (liveness()) {
    // Nothing is acquired, and no sweep runs, before this worker has an
    // incarnation to name: the first sweep is scheduled when the claim is in.
    join(now, out);
    on_timer(now, out);
    return;
  }
  next_reconcile_ = now.monotonic + Duration::from_ns(jitter);
  touch("");
  on_timer(now, out);
}

LeaseManager::Slot& LeaseManager::slot(std::string_view connection) {
  LP_ASSERT(!connection.empty());
  if (Slot* found = find_slot(connection); found != nullptr) return *found;
  const auto it = slots_.emplace(std::string{connection}, Slot{}).first;
  it->second.connection = &it->first;
  return it->second;
}

// Slots are node-based map entries: a pointer stays valid until the entry is
// erased (drop_idle_slots erases only slots no wakeup points at).
const LeaseManager::Slot* LeaseManager::find_slot(std::string_view connection) const {
  const auto it = slots_.find(connection);
  return it == slots_.end() ? nullptr : &it->second;
}

LeaseManager::Slot* LeaseManager::find_slot(std::string_view connection) {
  return const_cast<Slot*>(std::as_const(*this).find_slot(connection));  // *this is not const here
}

LeaseManager::Held* LeaseManager::find_held(std::string_view connection) {
  Slot* found = find_slot(connection);
  return found != nullptr && found->held ? &*found->held : nullptr;
}

LeaseManager::Watch* LeaseManager::find_watch(std::string_view connection) {
  Slot* found = find_slot(connection);
  return found != nullptr && found->watch ? &*found->watch : nullptr;
}

bool LeaseManager::holds(std::string_view connection) const {
  const Slot* found = find_slot(connection);
  return found != nullptr && found->held.has_value();
}

LeaseManager::Held& LeaseManager::hold(std::string_view connection, Held held, Actions& out) {
  Slot& target = slot(connection);
  if (target.watch) {
    arm(connection, *target.watch, false, out);
    target.watch.reset();
    --watch_count_;
  }
  if (liveness()) forget_peer_lease(connection, out);
  target.acquire_failures = 0;
  if (!target.held) ++held_count_;
  target.held = std::move(held);
  return *target.held;
}

void LeaseManager::drop_held(Slot& target) {
  LP_ASSERT(target.held.has_value());
  target.held.reset();
  --held_count_;
}

void LeaseManager::drop_watch(std::string_view connection, Actions& out) {
  Slot* found = find_slot(connection);
  if (found == nullptr || !found->watch) return;
  arm(connection, *found->watch, false, out);
  found->watch.reset();
  --watch_count_;
}

void LeaseManager::arm(std::string_view connection, Watch& watch, bool armed, Actions& out) {
  if (watch.armed == armed) return;
  watch.armed = armed;
  out.push_back(WatchChange{std::string(connection), armed});
}

void LeaseManager::drop_idle_slots() {
  std::set<const Slot*> queued;
  for (const Wakeup& wakeup : wakeups_) {
    if (wakeup.slot != nullptr) queued.insert(wakeup.slot);
  }
  std::erase_if(slots_, [&queued](const auto& entry) {
    const Slot& slot = entry.second;
    return !slot.held && !slot.watch && !queued.contains(&slot);
  });
}

Instant LeaseManager::deadline_of(const Held& held) const {
  if (config_.algorithm == Algorithm::seed) return Instant::max();  // acts until a renew is refused
  if (liveness()) {
    // Every lease of this worker lives by its liveness item.
    if (own_.incarnation == 0) return Instant::from_ns(std::numeric_limits<int64_t>::min());
    return own_.confirmed_sent + config_.lease_duration - config_.safety_margin;
  }
  return held.confirmed_sent + config_.lease_duration - config_.safety_margin;
}

uint64_t LeaseManager::send(Actions& out, RequestKind kind, std::string_view connection, int64_t epoch,
                            dynamo::Request request, Instant now_mono) {
  const uint64_t token = next_token_++;
  Pending pending;
  pending.kind = kind;
  pending.connection = std::string{connection};
  pending.sent = now_mono;
  pending.request_sent = now_mono;
  pending.epoch = epoch;
  pending_.emplace(token, std::move(pending));
  // Built in place: the request moves once here, once more into the message.
  out.emplace_back(std::in_place_type<DynamoCall>, token, kind, std::string{connection}, epoch, std::move(request));
  return token;
}

void LeaseManager::close(std::string_view connection, Held& held, CloseReason reason, Actions& out) {
  if (!held.open) return;
  held.open = false;
  out.push_back(CloseSession{std::string{connection}, held.epoch, reason});
}

// Every entry point runs this first: a worker that was paused, or whose
// replies are late, stops acting before it does anything else. Whatever else
// came due (renewals, watch checks, the sweep) runs here too.
void LeaseManager::expire_deadlines(Clock now, Actions& out) {
  const size_t bound = 4 * (held_count_ + watch_count_ + wakeups_.size() + 1);
  for (size_t steps = 0; !wakeups_.empty() && wakeups_.top().at <= now.monotonic; ++steps) {
    LP_ASSERT_LT(steps, bound);
    Slot* due = wakeups_.top().slot;
    pop_wakeup();
    process(due, now, out);
  }
}

Instant LeaseManager::due_time(const Slot* slot) const {
  if (slot == nullptr) return sweep_ || draining_ ? Instant::max() : next_reconcile_;
  if (slot == liveness_slot_.get()) return liveness_due();
  Instant due = Instant::max();
  if (slot->held && !liveness()) {  // liveness: the item's deadline is the liveness slot's
    const Held& held = *slot->held;
    if (held.release_token == 0) due = std::min(due, deadline_of(held));
    if (!draining_ && held.renew_token == 0 && held.read_token == 0) due = std::min(due, held.next_renew);
  }
  if (slot->watch && !draining_ && slot->watch->token == 0) due = std::min(due, slot->watch->check_at);
  return due;
}

void LeaseManager::touch(std::string_view connection) {
  if (connection.empty()) return touch(nullptr);
  if (Slot* found = find_slot(connection); found != nullptr) touch(found);
}

void LeaseManager::touch(Slot* slot) {
  const Instant due = due_time(slot);
  if (due == Instant::max()) return;
  Instant& queued_at = slot != nullptr ? slot->queued_at : sweep_queued_at_;
  if (queued_at == due) return;  // already queued (the queue would keep it once anyway)
  queued_at = due;
  wakeups_.push(Wakeup{due, slot});
}

void LeaseManager::pop_wakeup() const {
  const Wakeup& first = wakeups_.top();
  Instant& queued_at = first.slot != nullptr ? first.slot->queued_at : sweep_queued_at_;
  if (queued_at == first.at) queued_at = Instant::max();
  wakeups_.pop();
}

void LeaseManager::process(Slot* slot, Clock now, Actions& out) {
  if (slot == nullptr) {
    if (!draining_ && !sweep_ && next_reconcile_ <= now.monotonic) start_sweep(now, out);
    touch(nullptr);
    return;
  }
  if (slot == liveness_slot_.get()) {
    process_liveness(now, out);
    touch(slot);
    return;
  }
  const std::string& connection = *slot->connection;
  if (slot->held && !liveness()) {
    Held& held = *slot->held;
    if (deadline_of(held) <= now.monotonic && held.release_token == 0) {
      if (held.open) out.push_back(Mark{"lease.deadline_stop"});
      close(connection, held, CloseReason::deadline, out);
      drop_held(*slot);
      if (!draining_) watch_to_reclaim(*slot, now);
    } else if (!draining_ && held.renew_token == 0 && held.read_token == 0 && held.next_renew <= now.monotonic) {
      renew(connection, held, now, out);
    }
  }
  if (slot->watch && !draining_) {
    Watch& watch = *slot->watch;
    if (watch.token == 0 && watch.check_at <= now.monotonic) check_watch(connection, watch, now, out);
  }
  touch(slot);
}

void LeaseManager::watch_to_reclaim(Slot& target, Clock now) {
  LP_ASSERT(!target.held.has_value());
  if (!target.watch) {
    target.watch.emplace();
    ++watch_count_;
  }
  Watch& watch = *target.watch;
  watch.reclaim = true;
  watch.first_seen = now.monotonic;
  if (watch.token == 0) watch.check_at = now.monotonic;  // touch() queues it
}

// A confirmation (acquire or renew) sent at `sent` is in: the lease is ours
// until sent + lease - margin. Opens the session if it is not open yet.
void LeaseManager::confirm(std::string_view connection, Held& held, Instant sent, Clock now, Actions& out) {
  if (liveness()) {
    // The acquire is in; the lease lives by this worker's liveness item.
    if (held.open || draining_) return;
    if (deadline_of(held) <= now.monotonic) {
      out.push_back(Mark{"lease.confirmed_too_late"});
      own_.unopened = true;  // opened when the next renew of the item is confirmed in time
      return;
    }
    held.open = true;
    out.push_back(OpenSession{std::string{connection}, held.epoch, held.ws_url, held.stream_epoch, held.last_seq});
    return;
  }
  held.confirmed_sent = std::max(held.confirmed_sent, sent);
  held.next_renew = held.confirmed_sent + config_.renew_interval();
  touch(connection);
  if (held.open || draining_) return;
  if (deadline_of(held) <= now.monotonic) {
    out.push_back(Mark{"lease.confirmed_too_late"});
    held.next_renew = now.monotonic;  // renew at once; open when that is confirmed in time
    touch(connection);
    return;
  }
  held.open = true;
  out.push_back(OpenSession{std::string{connection}, held.epoch, held.ws_url, held.stream_epoch, held.last_seq});
}

void LeaseManager::on_timer(Clock now, Actions& out) {
  handle_early_failures(now, out);
  expire_deadlines(now, out);
}

void LeaseManager::handle_early_failures(Clock now, Actions& out) {
  while (!early_failures_.empty() && early_failures_.begin()->first <= now.monotonic) {
    const uint64_t token = early_failures_.begin()->second;
    early_failures_.erase(early_failures_.begin());
    on_reply(token, nullptr, now, out);  // at its timeout now: handled as one
  }
}

Instant LeaseManager::next_deadline() const {
  // Drop entries that later changes made stale (their connection is now due
  // later, or not at all); a fresher entry exists for the real due time.
  while (!wakeups_.empty() && wakeups_.top().at < due_time(wakeups_.top().slot)) pop_wakeup();
  const Instant early = early_failures_.empty() ? Instant::max() : early_failures_.begin()->first;
  return std::min(early, wakeups_.empty() ? Instant::max() : wakeups_.top().at);
}

uint32_t LeaseManager::active_connections() const {
  return static_cast<uint32_t>(std::count_if(slots_.begin(), slots_.end(), [](const auto& entry) {
    return entry.second.held && entry.second.held->open;
  }));
}

bool LeaseManager::owns(std::string_view connection) const {
  const Slot* found = find_slot(connection);
  return found != nullptr && found->held && found->held->open;
}

void LeaseManager::renew(std::string_view connection, Held& held, Clock now, Actions& out) {
  if (faults_.fire("lease.renew.skip")) {  // a missed heartbeat (a GC hiccup, a slow loop)
    held.next_renew = now.monotonic + config_.heartbeat_interval;
    touch(connection);
    return;
  }
  held.renew_sent = now.monotonic;
  held.renew_expires_ms = now.wall.ms() + config_.lease_duration.ms();
  held.renew_token = send(out, RequestKind::renew, connection, held.epoch,
                          renew_request(config_, connection, worker_id_, held.epoch, now.wall.ms()), now.monotonic);
}

void LeaseManager::on_reply(uint64_t token, const dynamo::Result<dynamo::Response>* reply, Clock now, Actions& out) {
  auto it = pending_.find(token);
  LP_ASSERT_MSG(it != pending_.end(), "reply for unknown token {}", token);
  if (reply == nullptr && now.monotonic - it->second.request_sent < config_.request_timeout / 2) {
    // Failed long before its timeout: handled at the timeout (early_failures_).
    early_failures_.emplace(it->second.request_sent + config_.request_timeout, token);
    out.push_back(Mark{"lease.early_failure_held"});
    return;
  }
  const Pending pending = std::move(it->second);
  pending_.erase(it);
  expire_deadlines(now, out);
  if (pending.liveness_op != kNoLivenessOp) {
    on_liveness_reply(pending, reply, now, out);
    finish_drain(now, out);
    touch(liveness_slot_.get());
    touch("");
    on_timer(now, out);
    return;
  }
  switch (pending.kind) {
    case RequestKind::renew: on_renew_reply(pending, reply, now, out); break;
    case RequestKind::acquire: on_acquire_reply(pending, reply, now, out); break;
    case RequestKind::release: on_release_reply(pending, reply, now, out); break;
    case RequestKind::reconcile: on_sweep_reply(reply, now, out); break;
    case RequestKind::liveness: LP_UNREACHABLE("a liveness write without its op"); break;
    case RequestKind::read:
      if (pending.sweep_round != 0) {
        on_sweep_read(pending, reply, now, out);
      } else if (pending.acquire_read) {
        on_acquire_read(pending, reply, now, out);
      } else if (const Held* held = find_held(pending.connection); held != nullptr && held->read_token == token) {
        on_held_read(pending, reply, now, out);
      } else {
        on_watch_read(pending, reply, now, out);
      }
      break;
  }
  finish_drain(now, out);  // the last release or in-flight acquire may have ended
  // The reply may have cleared a token or moved a time: re-arm what is due.
  touch(pending.connection);
  touch("");
  if (liveness()) touch(liveness_slot_.get());
  on_timer(now, out);
}

void LeaseManager::on_renew_reply(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                                  Actions& out) {
  Slot* target = find_slot(pending.connection);
  if (target == nullptr || !target->held || target->held->epoch != pending.epoch) {
    out.push_back(Mark{"lease.renew_after_loss"});  // the deadline passed first
    return;
  }
  Held& held = *target->held;
  held.renew_token = 0;
  if (draining_) return;  // a release is in flight: its reply decides
  if (reply != nullptr && reply->ok()) {
    confirm(pending.connection, held, pending.sent, now, out);
    return;
  }
  if (is_error(reply, dynamo::error_type::provisioned_throughput_exceeded)) {
    out.push_back(Mark{"lease.renew_throttled"});
    held.next_renew = now.monotonic + config_.retry_backoff;
    return;
  }
  if (config_.algorithm == Algorithm::seed) {
    // The articles' loop: a refused renew ends ownership; anything else is
    // retried at the next heartbeat while the worker keeps acting.
    if (is_error(reply, dynamo::error_type::conditional_check_failed)) {
      close(pending.connection, held, CloseReason::lost, out);
      drop_held(*target);
      return;
    }
    held.next_renew = now.monotonic + config_.heartbeat_interval;
    return;
  }
  // Refused or unanswered: read the lease before concluding anything.
  out.push_back(Mark{reply == nullptr ? "lease.renew_timeout_reread" : "lease.renew_refused_reread"});
  held.read_token = send(out, RequestKind::read, pending.connection, held.epoch,
                         read_request(config_, pending.connection), now.monotonic);
}

void LeaseManager::on_held_read(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                                Actions& out) {
  Slot* target = find_slot(pending.connection);
  if (target == nullptr || !target->held) return;
  Held& held = *target->held;
  held.read_token = 0;
  if (draining_) return;  // a release is in flight: its reply decides
  if (reply == nullptr || (!reply->ok() && reply->error().type != dynamo::error_type::conditional_check_failed)) {
    // Still unknown; the deadline protects us. Liveness: read again at once
    // (a stop is seen only by this read), a few times, then at the next sweep.
    if (!liveness()) {
      held.next_renew = now.monotonic + config_.retry_backoff;
    } else if (held.read_attempts++ < kSweepReadRetries) {
      out.push_back(Mark{"lease.held_read_retried"});
      held.read_token = send(out, RequestKind::read, pending.connection, held.epoch,
                             read_request(config_, pending.connection), now.monotonic);
    }
    return;
  }
  const std::optional<LeaseView> lease = read_lease(reply);
  const bool ours = lease && lease->owner == worker_id_ && lease->epoch == held.epoch;
  if (liveness()) {
    // A held lease the sweep did not show: stopped, or (a lost page) merely
    // not shown. Nothing to renew: only a stop or a loss changes anything.
    if (ours && lease->desired_state == kStarted) return;
  } else if (ours && lease->desired_state == kStarted) {
    // In wall mode an expiry at or past the renew's is as good as the renew
    // (whoever wrote it, no one can take the lease before it); a renew is
    // refused when the expiry is already there (a clock stepped back). In
    // counter mode only the renew's own expiry proves it applied: its counter
    // increment is what holds the watchers off.
    const bool as_good = config_.expiry_mode == ExpiryMode::wall ? lease->expires_at_ms >= held.renew_expires_ms
                                                                 : lease->expires_at_ms == held.renew_expires_ms;
    if (as_good) {
      out.push_back(Mark{"lease.renew_confirmed_by_read"});  // it applied, or one as good did; only the reply was lost
      confirm(pending.connection, held, held.renew_sent, now, out);
    } else {
      held.next_renew = now.monotonic;  // it did not apply: renew again
    }
    return;
  }
  out.push_back(Mark{"lease.lost"});
  const bool stopped = lease && lease->desired_state == kStopped;
  close(pending.connection, held, stopped ? CloseReason::stopped : CloseReason::lost, out);
  drop_held(*target);
}

// ---- drain ---------------------------------------------------------------------

constexpr uint32_t kReleaseAttemptsMax = 3;

void LeaseManager::on_sigterm(Clock now, Actions& out) {
  expire_deadlines(now, out);
  if (draining_) return;
  draining_ = true;
  out.push_back(Mark{"lease.drain"});
  for (auto& [connection, entry] : slots_) {
    if (entry.watch) arm(connection, *entry.watch, false, out);
    entry.watch.reset();
  }
  watch_count_ = 0;
  for (auto& [name, peer] : peers_) {
    for (auto& [connection, lease] : peer.leases) arm_peer_lease(connection, peer, lease, false, out);
  }
  // Stop acting first: the release is only written once the session is closed.
  // In connection order, whatever the order of the slots.
  std::vector<Slot*> held;
  held.reserve(held_count_);
  for (auto& [connection, entry] : slots_) {
    if (entry.held) held.push_back(&entry);
  }
  std::sort(held.begin(), held.end(),
            [](const Slot* a, const Slot* b) { return *a->connection < *b->connection; });
  for (Slot* entry : held) {
    close(*entry->connection, *entry->held, CloseReason::drained, out);
    release(*entry->connection, *entry->held, now, out);
  }
  finish_drain(now, out);
}

void LeaseManager::release(std::string_view connection, Held& held, Clock now, Actions& out) {
  ++held.release_attempts;
  held.release_token = send(out, RequestKind::release, connection, held.epoch,
                            release_request(config_, connection, worker_id_, held.epoch), now.monotonic);
}

std::string release_notice_id(std::string_view connection, std::string_view worker_id, int64_t process_incarnation,
                              int64_t epoch) {
  return fmt::format("{}@{}#{}.{}", connection, worker_id, process_incarnation, epoch);
}

void LeaseManager::notify_released(const std::string& connection, int64_t epoch, Actions& out) const {
  out.push_back(NotifyReleased{connection, epoch, release_notice_id(connection, worker_id_, process_incarnation_, epoch)});
}

void LeaseManager::on_release_reply(const Pending& pending, const dynamo::Result<dynamo::Response>* reply, Clock now,
                                    Actions& out) {
  if (pending.unheld_release) {
    if (reply != nullptr && reply->ok()) notify_released(pending.connection, pending.epoch, out);
    return;  // lost or refused: the next sweep sees it again
  }
  Slot* target = find_slot(pending.connection);
  if (target == nullptr || !target->held) return;
  Held& held = *target->held;
  held.release_token = 0;
  if (reply == nullptr && held.release_attempts < kReleaseAttemptsMax) {
    release(pending.connection, held, now, out);  // conditional on our epoch: safe to repeat
    return;
  }
  // Announce only a release that certainly applied: a lease that was not
  // released is left to expire.
  if (reply != nullptr && reply->ok()) notify_released(pending.connection, pending.epoch, out);
  drop_held(*target);
  finish_drain(now, out);
}

void LeaseManager::finish_drain(Clock now, Actions& out) {
  if (!draining_ || drain_complete_ || held_count_ != 0 || !acquiring_.empty()) return;
  if (liveness() && own_.incarnation != 0 && !own_.retired) {
    // Every lease is let go: end this incarnation too, so that a successor
    // under the same id claims the item at once, and watchers do not wait
    // for it to expire. If this is lost, the item expires as a crashed one.
    if (own_.token != 0) return;  // a renew's reply comes first
    own_.token = send(out, RequestKind::liveness, "", 0,
                      liveness_retire_request(config_, worker_id_, own_.incarnation), now.monotonic);
    pending_.at(own_.token).liveness_op = kRetire;
    pending_.at(own_.token).incarnation = own_.incarnation;
    return;
  }
  drain_complete_ = true;
  out.push_back(DrainComplete{});
}

}  // namespace leaseproof::lease
