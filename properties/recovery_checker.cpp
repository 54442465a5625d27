#include "properties/lease_checkers.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "base/assert.hpp"

#include "properties/lease_text.hpp"
#include "properties/reading.hpp"

namespace leaseproof::properties {

using sim::EventKind;

namespace {

GapStatistics statistics_of(std::vector<Duration> values) {
  std::sort(values.begin(), values.end());
  GapStatistics out;
  out.count = values.size();
  if (values.empty()) return out;
  out.p50 = nearest_rank(values, 50);
  out.p99 = nearest_rank(values, 99);
  out.max = values.back();
  return out;
}

std::string format_statistics(const GapStatistics& figures) {
  if (figures.count == 0) return "0";
  return fmt::format("{} (p50 {}, p99 {}, max {})", figures.count, for_reading(figures.p50), for_reading(figures.p99),
                     for_reading(figures.max));
}

bool judgeable(GapCause cause) { return cause != GapCause::initial && cause != GapCause::stopped; }

}  // namespace

std::string_view RecoveryChecker::path_name(const OwnerlessGap& gap) const {
  if (gap.cause == GapCause::graceful && !gap.taker_had_room && bounds_.contains(GapCause::crash)) {
    return "sweep's";
  }
  if (!watcher_bounds_.contains(gap.cause)) return {};  // one bound for the cause
  return judged_by_watcher(gap) ? "watcher's" : "sweep's";
}

RecoveryChecker::RecoveryChecker(NodeNamer names, std::map<GapCause, RecoveryBound> bounds)
    : names_(names),
      bounds_(std::move(bounds)),
      own_tracker_(std::make_unique<ActingTracker>(std::move(names))),
      tracker_(own_tracker_.get()) {}

RecoveryChecker::RecoveryChecker(NodeNamer names, std::map<GapCause, RecoveryBound> bounds, ActingTracker& shared)
    : names_(std::move(names)), bounds_(std::move(bounds)), tracker_(&shared) {}

std::string RecoveryChecker::name(NodeId node) const { return text::node_name(names_, node); }

void RecoveryChecker::violation(std::string text) {
  ++violation_count_;
  if (violations_.size() < kViolationsKept) violations_.push_back(std::move(text));
}

void RecoveryChecker::observe(const sim::TraceEvent& event) {
  LP_ASSERT_MSG(own_tracker_ != nullptr, "a shared tracker is fed by LeaseCheckers");
  LP_ASSERT_MSG(!finished_at_, "event at {} observed after finish", event.true_time);
  if (tracker_->begins_new_instant(event)) {
    settle(tracker_->now());
    tracker_->clear_touched();
  }
  tracker_->apply(event);
  tracker_->take_errors();  // the ownership checker reports trace-contract breaks
  after_apply(event);
}

void RecoveryChecker::after_apply(const sim::TraceEvent& event) {
  LP_ASSERT_MSG(!finished_at_, "event at {} observed after finish", event.true_time);
  if (event.kind == EventKind::note) {
    if (event.label == "control.started" || event.label == "control.stopped") on_control(event);
    if (event.label == "lease.watch" || event.label == "lease.unwatch") on_watch(event);
    if (event.label == "lease.request") on_request(event);
  } else if (event.kind == EventKind::timeout) {
    on_timeout(event);
  } else {
    on_fault_event(event);
  }
}

// A request about a connection while it is ownerless (any worker's: the
// watcher's, or the one that wins the acquire): its timeout (the sim's
// timeout event carries the request's message id) counts.
void RecoveryChecker::on_request(const sim::TraceEvent& event) {
  // Most requests are renews of owned leases: with no gap open (or no
  // watcher's bound to judge by) there is nothing to count them against.
  if (open_gaps_ == 0 || watcher_bounds_.empty()) return;
  const std::string_view detail = event.detail;  // "kind connection epoch"
  const size_t first = detail.find(' ');
  if (first == std::string_view::npos) return;
  const size_t second = detail.find(' ', first + 1);
  const std::string_view connection = detail.substr(first + 1, second - first - 1);
  const auto found = connections_.find(connection);
  if (found == connections_.end() || !found->second.open_gap) return;
  ConnectionView& view = found->second;
  const auto message = static_cast<uint64_t>(event.value);
  watched_requests_.emplace(message, &view);
  view.watched_requests.push_back(message);
}

// The open gap ends: its watched requests are forgotten, and it is kept
// (judged at finish) or, for a connection that stopped, dropped.
void RecoveryChecker::close_gap(ConnectionView& view, bool keep) {
  for (const uint64_t message : view.watched_requests) watched_requests_.erase(message);
  view.watched_requests.clear();
  if (keep) gaps_.push_back(std::move(*view.open_gap));
  view.open_gap.reset();
  --open_gaps_;
}

void RecoveryChecker::on_timeout(const sim::TraceEvent& event) {
  if (watched_requests_.empty()) return;
  const auto found = watched_requests_.find(event.id);
  if (found == watched_requests_.end()) return;
  // Present only while its gap is open (forgotten as the gap closes).
  ++found->second->open_gap->watcher_timeouts;
  watched_requests_.erase(found);
}

void RecoveryChecker::on_watch(const sim::TraceEvent& event) {
  ConnectionView& view = connections_[std::string(event.detail)];
  if (event.label == "lease.watch") {
    view.armed.insert(event.node);
  } else {
    disarm(view, event.node, event.true_time);
  }
}

void RecoveryChecker::disarm(ConnectionView& view, NodeId node, Instant at) {
  view.armed.erase(node);
  if (view.gap_watchers.erase(node) == 0) return;
  if (view.watcher_left != at) view.left_at.clear();
  view.left_at.push_back(node);
  if (view.gap_watchers.empty()) view.watcher_left = at;
}

void RecoveryChecker::on_control(const sim::TraceEvent& event) {
  const std::string connection(event.detail);
  ConnectionView& view = connections_[connection];
  if (event.label == "control.started") {
    if (view.started) return;  // already STARTED: nothing changes
    view.started = true;
    view.started_at = event.true_time;
    view.owned_since_started = false;
  } else {
    view.started = false;
    // A STOPPED connection is not owed an owner: its gap is not a recovery.
    if (view.open_gap) {
      ++gaps_dropped_by_stop_;
      close_gap(view, false);
    }
  }
  if (event.label == "control.started") {
    stopping_.erase(connection);
  } else if (stop_bound_) {
    stopping_.try_emplace(connection, event.true_time);
  }
  touched_.insert(connection);
}

void RecoveryChecker::check_stops(Instant at) {
  for (auto it = stopping_.begin(); it != stopping_.end();) {
    const std::vector<WorkerIdentity> acting = tracker_->acting(it->first);
    if (acting.empty()) {
      ++stops_judged_;
      it = stopping_.erase(it);
      continue;
    }
    if (at - it->second > *stop_bound_) {
      ++stops_judged_;
      std::string owners;
      for (const WorkerIdentity& worker : acting) owners += (owners.empty() ? "" : ", ") + text::worker_name(names_, worker);
      violation(fmt::format("stop: connection {} was STOPPED at {} and {} still acted as its owner at {}, {} later "
                            "(bound {}: the owner's next renew is refused, or its deadline stops it)",
                            it->first, it->second, owners, at, at - it->second, *stop_bound_));
      it = stopping_.erase(it);
      continue;
    }
    ++it;
  }
}

void RecoveryChecker::settle(Instant at) {
  // Both sets, in one ascending walk, each connection once.
  const std::set<std::string>& acting = tracker_->touched();
  auto a = acting.begin();
  auto c = touched_.begin();
  while (a != acting.end() || c != touched_.end()) {
    if (c == touched_.end() || (a != acting.end() && *a < *c)) {
      settle_connection(*a++, at);
    } else {
      if (a != acting.end() && *a == *c) ++a;
      settle_connection(*c++, at);
    }
  }
  touched_.clear();
  if (!stopping_.empty()) check_stops(at);
}

void RecoveryChecker::settle_connection(const std::string& connection, Instant at) {
  const auto found = connections_.find(connection);
  if (found == connections_.end() || !found->second.started) return;
  ConnectionView& view = found->second;
  if (!tracker_->acting(connection).empty()) {
    view.owned_since_started = true;
    if (!view.ever_owned) {
      view.ever_owned = true;
      ++connections_owned_;
    }
    if (view.open_gap) {
      view.open_gap->ended = at;
      // A watcher that took the lease over stops watching as it does.
      if (!view.gap_watchers.empty() || view.watcher_left == at) {
        OwnerlessGap& gap = *view.open_gap;
        gap.path = OwnerlessGap::Path::watcher;
        gap.watchers.assign(view.gap_watchers.begin(), view.gap_watchers.end());
        if (view.watcher_left == at) gap.watchers.insert(gap.watchers.end(), view.left_at.begin(), view.left_at.end());
      }
      close_gap(view, true);
    }
    return;
  }
  if (view.open_gap) return;
  OwnerlessGap gap;
  gap.connection = connection;
  gap.began = at;
  const std::optional<ActingTracker::Stop> stop = tracker_->last_stop(connection);
  if (view.owned_since_started && stop) {
    gap.cause = stop->cause;
    gap.last_owner = stop->worker;
  }
  view.gap_watchers = view.armed;
  if (gap.last_owner) view.gap_watchers.erase(gap.last_owner->node);
  view.watcher_left.reset();
  view.left_at.clear();
  view.open_gap = std::move(gap);
  ++open_gaps_;
}

void RecoveryChecker::open_window(WindowKey key, Instant at) {
  OpenWindow& window = open_windows_[key];
  if (window.depth == 0) window.start = at;
  ++window.depth;
}

void RecoveryChecker::close_window(WindowKey key, Instant at, std::string label) {
  const auto found = open_windows_.find(key);
  if (found == open_windows_.end()) return;  // ended without a start we saw
  if (--found->second.depth > 0) return;
  const bool clog = std::get<0>(key) == EventKind::clog_start;
  windows_.push_back(
      FaultWindow{found->second.start, at, std::move(label), std::get<1>(key), std::get<2>(key), clog});
  open_windows_.erase(found);
}

void RecoveryChecker::on_fault_event(const sim::TraceEvent& event) {
  const Instant at = event.true_time;
  const WindowKey link_key{event.kind, event.node, event.peer};
  const WindowKey node_key{event.kind, event.node, kNoNode};
  switch (event.kind) {
    case EventKind::partition_start:
    case EventKind::clog_start:
      open_window(link_key, at);
      break;
    case EventKind::pause:
      open_window(node_key, at);
      break;
    case EventKind::exit:
      // A process that exits watches nothing more (a drained worker).
      disarm_all(event.node, at);
      break;
    case EventKind::crash:
      // What it watched is gone with its memory.
      disarm_all(event.node, at);
      // A node killed while paused never resumes: its crash window takes over.
      close_window({EventKind::pause, event.node, kNoNode}, at, fmt::format("pause of {}", name(event.node)));
      open_window(node_key, at);
      break;
    case EventKind::partition_end:
      close_window({EventKind::partition_start, event.node, event.peer}, at,
                   fmt::format("partition {} -> {}", name(event.node), name(event.peer)));
      break;
    case EventKind::clog_end:
      close_window({EventKind::clog_start, event.node, event.peer}, at,
                   fmt::format("clog {} -> {}", name(event.node), name(event.peer)));
      break;
    case EventKind::resume:
      close_window({EventKind::pause, event.node, kNoNode}, at, fmt::format("pause of {}", name(event.node)));
      break;
    case EventKind::start:
    case EventKind::restart:
      close_window({EventKind::crash, event.node, kNoNode}, at, fmt::format("crash of {}", name(event.node)));
      break;
    case EventKind::fault:
      if (std::find(ignored_sites_.begin(), ignored_sites_.end(), event.label) != ignored_sites_.end()) break;
      windows_.push_back(
          FaultWindow{at, at, fmt::format("fault {} at {}", event.label, name(event.node)), event.node, kNoNode});
      break;
    case EventKind::clock_step:
      windows_.push_back(FaultWindow{
          at, at, fmt::format("clock step of {} by {}", name(event.node), Duration::from_ns(event.value)),
          event.node, kNoNode});
      break;
    default:
      break;
  }
}

void RecoveryChecker::disarm_all(NodeId node, Instant at) {
  for (auto& [connection, view] : connections_) {
    if (view.armed.contains(node)) disarm(view, node, at);
  }
}

void RecoveryChecker::ignore_faults_at(NodeId node) { ignored_nodes_.push_back(node); }

void RecoveryChecker::ignore_fault_site(std::string site) { ignored_sites_.push_back(std::move(site)); }

void RecoveryChecker::add_fault_window(Instant start, Instant end, std::string label, NodeId node) {
  LP_ASSERT_LE(start, end);
  windows_.push_back(FaultWindow{start, end, std::move(label), node, kNoNode});
}

const FaultWindow* RecoveryChecker::excusing_window(const OwnerlessGap& gap, Instant until) const {
  // Only a fault during the gap can stop the workers that would end it. One
  // over before the gap began has left at most stale views (a restarted
  // worker that knows nothing yet, a lost watch), which the bound's sweep
  // terms cover. (Until the ninth session, faults up to a bound before the
  // gap excused it too; that hid a core defect: docs/lease-core.md.)
  //
  // A crash or pause of the owner is the gap's cause, not an excuse. A
  // graceful release, though, needs the owner to reach DynamoDB and SQS: a
  // fault at the owner's node (a partition, say) does excuse it. So does a
  // fault there that begins after the gap did: the owner's node crashing
  // again once restarted is a new fault (with one worker, it is the one that
  // would recover), like a fault anywhere else. So is a clog or hold of the
  // owner's requests that overlaps the gap: what it held lands during the
  // gap, and in counter mode every landed renew restarts the watchers' count.
  const bool graceful = gap.cause == GapCause::graceful;
  const NodeId owner = gap.last_owner && !graceful ? gap.last_owner->node : kNoNode;
  const auto ignored = [&](NodeId node) {
    return node.valid() && std::find(ignored_nodes_.begin(), ignored_nodes_.end(), node) != ignored_nodes_.end();
  };
  for (const FaultWindow& window : windows_) {
    if (ignored(window.node) || ignored(window.peer)) continue;
    const bool at_owner = owner.valid() && (window.node == owner || window.peer == owner) &&
                          window.start <= gap.began && !window.delays_delivery;
    if (!at_owner && window.start <= until && window.end >= gap.began) return &window;
  }
  return nullptr;
}

std::string RecoveryChecker::describe(const OwnerlessGap& gap, Instant until) const {
  const std::string owner =
      gap.last_owner ? fmt::format(" of {}", text::worker_name(names_, *gap.last_owner)) : std::string();
  return fmt::format("connection {} ownerless for {} after {}{}, from {} to {}{}", gap.connection,
                     until - gap.began, to_string(gap.cause), owner, gap.began, until,
                     gap.ended ? "" : " (still ownerless at the end)");
}

const RecoveryBound* RecoveryChecker::bound_for(const OwnerlessGap& gap) const {
  if (judged_by_watcher(gap)) {
    if (const auto found = watcher_bounds_.find(gap.cause); found != watcher_bounds_.end()) return &found->second;
  }
  // A release no worker had room for waits for one, as a crash's leases do
  // when no watcher takes them: the sweep's bound for a crash judges it.
  if (gap.cause == GapCause::graceful && !gap.taker_had_room) {
    if (const auto found = bounds_.find(GapCause::crash); found != bounds_.end()) return &found->second;
  }
  const auto found = bounds_.find(gap.cause);
  return found == bounds_.end() ? nullptr : &found->second;
}

void RecoveryChecker::excuse(OwnerlessGap& gap, Instant until, std::string why) {
  gap.verdict = OwnerlessGap::Verdict::excused;
  gap.excuse = std::move(why);
  ++excused_count_;
  if (excused_.size() < kExcusedKept) excused_.push_back(fmt::format("{}: excused by {}", describe(gap, until), gap.excuse));
}

Instant RecoveryChecker::while_bound_runs(const OwnerlessGap& gap, Instant end,
                                          const std::map<GapCause, RecoveryBound>& bounds) const {
  const Instant until = gap.ended.value_or(end);
  const auto found = bounds.find(gap.cause);
  return found == bounds.end() ? until : std::min(until, gap.began + found->second.total());
}

void RecoveryChecker::judge(OwnerlessGap& gap, Instant end) {
  const Instant until = gap.ended.value_or(end);
  if (past_watcher_timeouts(gap)) ++gaps_past_watcher_timeouts_;
  const RecoveryBound* bound = bound_for(gap);
  if (!judgeable(gap.cause) || bound == nullptr) {
    gap.verdict = OwnerlessGap::Verdict::not_judged;
    return;
  }
  const Duration limit = bound->total();
  if (const FaultWindow* window = excusing_window(gap, until); window != nullptr) {
    const std::string window_end = window->end == Instant::max() ? "the end" : fmt::format("{}", window->end);
    excuse(gap, until, fmt::format("{} from {} to {}", window->label, window->start, window_end));
    return;
  }
  // Waiting for a worker with room: counted from when one had it.
  if (tracker_->capacity() > 0 && !judged_by_watcher(gap)) {
    const std::optional<Instant> room = room_from(gap, until);
    if (!room && !gap.ended) {
      excuse(gap, until, "no worker had room at the end");
      ++gaps_counted_from_room_;
      return;
    }
    if (room && *room > gap.began) {
      gap.counted_from = *room;
      ++gaps_counted_from_room_;
    }
  }
  const Instant from = gap.counted_from.value_or(gap.began);
  if (until - from > limit) {
    gap.verdict = OwnerlessGap::Verdict::beyond;
    const std::string_view path = path_name(gap);
    const std::string fell_back =
        past_watcher_timeouts(gap)
            ? fmt::format(" ({} requests about it timed out during the gap, more than the watcher's bound's {})",
                          gap.watcher_timeouts, kWatcherTimeoutsAssumed)
            : std::string();
    std::string no_room =
        gap.taker_had_room ? std::string() : " (no worker that could take it had room throughout the gap)";
    if (gap.counted_from) {
      no_room += fmt::format(" (counted from {}, when a worker had room from then on: {})", *gap.counted_from,
                             until - *gap.counted_from);
    }
    violation(fmt::format("recovery: {}: beyond the {}{}bound {}{}{}", describe(gap, until), path,
                          path.empty() ? "" : " ", bound->formula(), fell_back, no_room));
    return;
  }
  gap.verdict = gap.ended ? OwnerlessGap::Verdict::within : OwnerlessGap::Verdict::not_judged;
}

void RecoveryChecker::finish(Instant end) {
  if (finished_at_) return;
  LP_ASSERT_GE(end, tracker_->now());
  settle(tracker_->now());
  if (own_tracker_) tracker_->clear_touched();
  finished_at_ = end;
  if (!stopping_.empty()) check_stops(end);
  for (const auto& [key, window] : open_windows_) {
    const auto [kind, node, peer] = key;
    std::string label = fmt::format("{} {}", sim::to_string(kind), name(node));
    if (peer.valid()) label += fmt::format(" -> {}", name(peer));
    windows_.push_back(
        FaultWindow{window.start, Instant::max(), std::move(label), node, peer, kind == EventKind::clog_start});
  }
  open_windows_.clear();
  for (auto& [connection, view] : connections_) {
    if (!view.open_gap) continue;
    if (!view.gap_watchers.empty()) {
      view.open_gap->path = OwnerlessGap::Path::watcher;
      view.open_gap->watchers.assign(view.gap_watchers.begin(), view.gap_watchers.end());
    }
    close_gap(view, true);
  }
  for (OwnerlessGap& gap : gaps_) {
    gap.others_had_room = others_had_room(gap, end);
    gap.taker_had_room = taker_had_room(gap, end);
    judge(gap, end);
    const bool judged = gap.verdict == OwnerlessGap::Verdict::within || gap.verdict == OwnerlessGap::Verdict::beyond;
    if (!gap.taker_had_room && judged) ++gaps_without_room_;
  }
}

// Room is asked for while the bound runs (or the gap, if shorter): a worker
// with room for the whole of a bound should have taken the lease within it.
bool RecoveryChecker::others_had_room(const OwnerlessGap& gap, Instant end) const {
  if (tracker_->capacity() == 0) return true;
  const Instant until = while_bound_runs(gap, end, bounds_);
  if (until <= gap.began) return true;
  const NodeId owner = gap.last_owner ? gap.last_owner->node : kNoNode;
  const std::vector<NodeId> workers = tracker_->workers();
  return std::any_of(workers.begin(), workers.end(), [&](NodeId node) {
    return node != owner && tracker_->had_room_throughout(node, gap.began, until);
  });
}

bool RecoveryChecker::taker_had_room(const OwnerlessGap& gap, Instant end) const {
  if (tracker_->capacity() == 0) return true;
  const Instant until = while_bound_runs(gap, end, watcher_bounds_);
  if (until <= gap.began) return true;
  const auto room = [&](NodeId node) { return tracker_->had_room_throughout(node, gap.began, until); };
  if (gap.path == OwnerlessGap::Path::watcher) return std::any_of(gap.watchers.begin(), gap.watchers.end(), room);
  // The sweep's bound waits for a worker with room (see room_from).
  return gap.cause != GapCause::graceful || gap.others_had_room;
}

std::optional<Instant> RecoveryChecker::room_from(const OwnerlessGap& gap, Instant until) const {
  if (until <= gap.began) return gap.began;
  const NodeId owner = gap.last_owner ? gap.last_owner->node : kNoNode;
  std::optional<Instant> earliest;
  for (const NodeId node : tracker_->workers()) {
    std::optional<Instant> since = tracker_->room_since(node, gap.began, until);
    if (!since) continue;
    if (node == owner && gap.cause != GapCause::graceful) {
      // Its own faults (a partition from DynamoDB, say) keep it from
      // taking the lease back, though it runs with room.
      for (bool moved = true; moved && since;) {
        moved = false;
        for (const FaultWindow& window : windows_) {
          if (window.node != owner && window.peer != owner) continue;
          if (window.start >= until || window.end <= *since) continue;
          since = window.end >= until ? std::nullopt : std::optional<Instant>(window.end);
          moved = true;
          if (!since) break;
        }
      }
      if (!since) continue;
    }
    if (!earliest || *since < *earliest) earliest = since;
  }
  return earliest;
}

void RecoveryChecker::check_liveness(Instant healed_at, Duration bound, Instant end) {
  finish(end);
  // The latest gap of each connection that overlaps its required-owned window.
  std::map<std::string, const OwnerlessGap*> offending;
  for (const OwnerlessGap& gap : gaps_) {
    const auto view = connections_.find(gap.connection);
    if (view == connections_.end() || !view->second.started) continue;
    const Instant required_from = std::max(healed_at, view->second.started_at) + bound;
    const Instant until = std::min(gap.ended.value_or(end), end);
    if (until > std::max(gap.began, required_from)) offending[gap.connection] = &gap;
  }
  for (const auto& [connection, gap] : offending) {
    const Instant required_from = std::max(healed_at, connections_.at(connection).started_at) + bound;
    violation(fmt::format("liveness: {}; every STARTED connection must be owned from {} (faults healed at {} + "
                          "bound {}) until {}",
                          describe(*gap, gap->ended.value_or(end)), required_from, healed_at, bound, end));
  }
}

std::map<GapCause, CauseStatistics> RecoveryChecker::statistics() const {
  std::map<GapCause, std::vector<Duration>> all;
  std::map<GapCause, std::vector<Duration>> judged;
  std::map<GapCause, CauseStatistics> out;
  for (const OwnerlessGap& gap : gaps_) {
    CauseStatistics& figures = out[gap.cause];
    if (gap.verdict == OwnerlessGap::Verdict::excused) ++figures.excused;
    if (gap.verdict == OwnerlessGap::Verdict::beyond) ++figures.beyond_bound;
    if (!gap.ended) {
      ++figures.unfinished;
      continue;
    }
    const Duration length = *gap.ended - gap.began;
    all[gap.cause].push_back(length);
    if (gap.verdict == OwnerlessGap::Verdict::within || gap.verdict == OwnerlessGap::Verdict::beyond) {
      judged[gap.cause].push_back(length);
      if (judged_by_watcher(gap)) ++figures.judged_by_watcher;
    }
  }
  for (auto& [cause, figures] : out) {
    figures.all = statistics_of(std::move(all[cause]));
    figures.judged = statistics_of(std::move(judged[cause]));
  }
  return out;
}

std::string RecoveryChecker::summary() const {
  std::string out = fmt::format(
      "recovery: {} violations; {} gaps, {} excused by fault windows, {} dropped when their connection stopped",
      violation_count_, gaps_.size(), excused_count_, gaps_dropped_by_stop_);
  if (stop_bound_) {
    out += fmt::format("\n  stops: {} judged (a STOPPED connection has no acting owner after {})", stops_judged_,
                       *stop_bound_);
  }
  if (gaps_without_room_ > 0) {
    out += fmt::format(
        "\n  {} gaps judged by the sweep's bound: no worker that could take them had room throughout (capacity {})",
        gaps_without_room_, tracker_->capacity());
  }
  if (gaps_counted_from_room_ > 0) {
    out += fmt::format(
        "\n  {} gaps counted from when a worker had room (none had at their start), or excused for none having "
        "any at the end",
        gaps_counted_from_room_);
  }
  if (gaps_past_watcher_timeouts_ > 0) {
    out += fmt::format(
        "\n  {} watched gaps judged by the sweep's bound: more requests about their lease timed out during the gap "
        "than the {} the watcher's bound counts",
        gaps_past_watcher_timeouts_, kWatcherTimeoutsAssumed);
  }
  for (const auto& [cause, figures] : statistics()) {
    const auto bound = bounds_.find(cause);
    const auto watcher = watcher_bounds_.find(cause);
    const std::string sweep = bound == bounds_.end() ? "none (not judged)" : bound->second.formula();
    if (watcher == watcher_bounds_.end()) {
      out += fmt::format("\n  {}: gaps {}; judged {}; excused {}, beyond bound {}, unfinished {}; bound {}",
                         to_string(cause), format_statistics(figures.all), format_statistics(figures.judged),
                         figures.excused, figures.beyond_bound, figures.unfinished, sweep);
      continue;
    }
    out += fmt::format(
        "\n  {}: gaps {}; judged {} ({} by the watcher's bound, {} by the sweep's); excused {}, beyond bound {}, "
        "unfinished {}\n    watcher's bound {}\n    sweep's bound {}",
        to_string(cause), format_statistics(figures.all), format_statistics(figures.judged), figures.judged_by_watcher,
        figures.judged.count - figures.judged_by_watcher, figures.excused, figures.beyond_bound, figures.unfinished,
        watcher->second.formula(), sweep);
  }
  return out;
}

}  // namespace leaseproof::properties
