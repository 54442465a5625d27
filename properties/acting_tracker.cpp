#include "properties/lease_checkers.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "base/assert.hpp"

#include "properties/lease_text.hpp"

namespace leaseproof::properties {

using sim::EventKind;

namespace {

std::optional<GapCause> cause_of_close(std::string_view reason) {
  if (reason == "released" || reason == "drained") return GapCause::graceful;
  if (reason == "deadline" || reason == "lost") return GapCause::lease_lost;
  if (reason == "stopped") return GapCause::stopped;
  return std::nullopt;
}

}  // namespace

const ActingTracker::NodeView& ActingTracker::node_view(NodeId node) const {
  static const NodeView kUnseen{};
  if (!node.valid() || nodes_.size() <= node.value) return kUnseen;
  return nodes_[node.value];
}

ActingTracker::NodeView ActingTracker::node(NodeId node) const { return node_view(node); }

bool ActingTracker::is_acting(WorkerIdentity worker) const {
  const NodeView& view = node_view(worker.node);
  // A node never seen starting is taken as running: its first event is a note.
  return view.incarnation == worker.incarnation &&
         (view.state == NodeState::running || view.state == NodeState::unknown);
}

std::set<std::string> ActingTracker::take_touched() { return std::exchange(touched_, {}); }

std::vector<std::string> ActingTracker::take_errors() { return std::exchange(errors_, {}); }

std::vector<WorkerIdentity> ActingTracker::acting(const std::string& connection) const {
  std::vector<WorkerIdentity> workers;
  const auto found = connections_.find(connection);
  if (found == connections_.end()) return workers;
  for (const auto& [worker, session] : found->second.sessions) {
    if (is_acting(worker)) workers.push_back(worker);
  }
  return workers;
}

const ActingTracker::Session* ActingTracker::session(const std::string& connection, WorkerIdentity worker) const {
  const auto found = connections_.find(connection);
  if (found == connections_.end()) return nullptr;
  const auto session = found->second.sessions.find(worker);
  return session == found->second.sessions.end() ? nullptr : &session->second;
}

std::optional<ActingTracker::Stop> ActingTracker::last_stop(const std::string& connection) const {
  const auto found = connections_.find(connection);
  if (found == connections_.end()) return std::nullopt;
  return found->second.last_stop;
}

void ActingTracker::apply(const sim::TraceEvent& event) {
  LP_ASSERT_MSG(!any_ || event.true_time >= now_, "trace went back in true time: {} after {}", event.true_time,
                now_);
  now_ = event.true_time;
  any_ = true;
  if (!event.node.valid()) return;
  NodeView& view = node_view(event.node);
  view.seen = true;
  view.read_at = event.true_time;
  view.wall = event.wall;
  view.monotonic = event.monotonic;
  switch (event.kind) {
    case EventKind::note: apply_note(event); break;
    case EventKind::start:
    case EventKind::restart:
    case EventKind::crash:
    case EventKind::exit:
    case EventKind::pause:
    case EventKind::resume: apply_lifecycle(event); break;
    case EventKind::sigterm:
      if (draining_.size() <= event.node.value) draining_.resize(event.node.value + 1);
      draining_[event.node.value] = true;
      break;
    default: return;  // messages, timers, faults: only the readings above
  }
  if (capacity_ > 0) update_room(event.node, event.true_time);
}

bool ActingTracker::has_room(NodeId node) const {
  const NodeView& view = node_view(node);
  if (view.state != NodeState::running) return false;
  if (node.value < draining_.size() && draining_[node.value]) return false;
  const auto sessions = connections_of_.find(WorkerIdentity{node, view.incarnation});
  return sessions == connections_of_.end() || sessions->second.size() < capacity_;
}

void ActingTracker::update_room(NodeId node, Instant at) {
  if (rooms_.size() <= node.value) rooms_.resize(node.value + 1);
  RoomLog& log = rooms_[node.value];
  if (!log.worker) return;
  const bool room = has_room(node);
  if (!room && !log.full_since) {
    log.full_since = at;
  } else if (room && log.full_since) {
    if (*log.full_since < at) log.full.emplace_back(*log.full_since, at);
    log.full_since.reset();
  }
}

bool ActingTracker::had_room_throughout(NodeId node, Instant from, Instant to) const {
  if (capacity_ == 0) return true;
  if (!node.valid() || rooms_.size() <= node.value) return false;
  const RoomLog& log = rooms_[node.value];
  if (!log.worker || log.worker_since > from) return false;
  if (log.full_since && *log.full_since < to) return false;
  // The first interval that ends after `from` is the only one that may
  // overlap [from, to) without an earlier one doing so (they are disjoint
  // and ascending).
  const auto later = std::upper_bound(log.full.begin(), log.full.end(), from,
                                      [](Instant t, const std::pair<Instant, Instant>& interval) {
                                        return t < interval.second;
                                      });
  return later == log.full.end() || later->first >= to;
}

std::optional<Instant> ActingTracker::room_since(NodeId node, Instant from, Instant to) const {
  if (capacity_ == 0) return from;
  if (!node.valid() || rooms_.size() <= node.value) return std::nullopt;
  const RoomLog& log = rooms_[node.value];
  if (!log.worker || log.worker_since >= to) return std::nullopt;
  if (log.full_since && *log.full_since < to) return std::nullopt;
  Instant since = std::max(from, log.worker_since);
  // The last interval that starts before `to`.
  const auto after = std::lower_bound(log.full.begin(), log.full.end(), to,
                                      [](const std::pair<Instant, Instant>& interval, Instant t) {
                                        return interval.first < t;
                                      });
  if (after != log.full.begin()) {
    const std::pair<Instant, Instant>& last = *std::prev(after);
    if (last.second >= to) return std::nullopt;
    since = std::max(since, last.second);
  }
  return since;
}

std::vector<NodeId> ActingTracker::workers() const {
  std::vector<NodeId> out;
  for (uint32_t i = 0; i < rooms_.size(); ++i) {
    if (rooms_[i].worker) out.push_back(NodeId{i});
  }
  return out;
}

void ActingTracker::apply_lifecycle(const sim::TraceEvent& event) {
  NodeView& view = node_view(event.node);
  const WorkerIdentity worker{event.node, view.incarnation};
  switch (event.kind) {
    case EventKind::start:
    case EventKind::restart:
      // A restart without a crash still ends the old process's sessions.
      end_sessions(worker, GapCause::crash, event.true_time);
      view.incarnation = event.id;
      view.state = NodeState::running;
      if (event.node.value < draining_.size()) draining_[event.node.value] = false;
      break;
    case EventKind::crash:
      end_sessions(worker, GapCause::crash, event.true_time);
      view.state = NodeState::down;
      break;
    case EventKind::exit:
      end_sessions(worker, GapCause::graceful, event.true_time);
      view.state = NodeState::down;
      break;
    case EventKind::pause:
      if (view.state != NodeState::down) {
        touch_sessions(worker, GapCause::pause, event.true_time);
        view.state = NodeState::paused;
      }
      break;
    case EventKind::resume:
      if (view.state == NodeState::paused) {
        view.state = NodeState::running;
        touch_sessions(worker, std::nullopt, event.true_time);
      }
      break;
    default:
      break;
  }
}

void ActingTracker::apply_note(const sim::TraceEvent& event) {
  const WorkerIdentity worker = identity_of(event.node);
  if (capacity_ > 0 && event.label == "lease.request") {
    if (rooms_.size() <= event.node.value) rooms_.resize(event.node.value + 1);
    RoomLog& log = rooms_[event.node.value];
    if (!log.worker) {
      log.worker = true;
      log.worker_since = event.true_time;
    }
  }
  if (event.label == "lease.open") {
    on_open(worker, event.detail, event.true_time);
  } else if (event.label == "lease.close") {
    on_close(worker, event.detail, event.true_time);
  }
}

void ActingTracker::on_open(WorkerIdentity worker, std::string_view detail, Instant at) {
  const text::Words words = text::split_words(detail);
  const std::optional<uint64_t> epoch = words.size() == 2 ? text::parse_u64(words[1]) : std::nullopt;
  if (!epoch) {
    errors_.push_back(fmt::format("malformed lease.open detail '{}' at {}", detail, at));
    return;
  }
  const std::string connection(words[0]);
  ConnectionState& state = connections_[connection];
  if (state.sessions.contains(worker)) {
    errors_.push_back(fmt::format("lease.open of {} at {} by {}, whose session is already open", connection, at,
                                  text::worker_name(names_, worker)));
  }
  state.sessions[worker] = Session{*epoch, at, at, false};
  connections_of_[worker].insert(connection);
  touched_.insert(connection);
  ++acting_intervals_;
}

void ActingTracker::on_close(WorkerIdentity worker, std::string_view detail, Instant at) {
  const text::Words words = text::split_words(detail);
  const std::optional<GapCause> cause = words.size() == 3 ? cause_of_close(words[2]) : std::nullopt;
  if (!cause || !text::parse_u64(words[1])) {
    errors_.push_back(fmt::format("malformed lease.close detail '{}' at {}", detail, at));
    return;
  }
  const std::string connection(words[0]);
  const auto found = connections_.find(connection);
  if (found == connections_.end() || found->second.sessions.erase(worker) == 0) {
    errors_.push_back(fmt::format("lease.close of {} at {} by {}, which had no session open", connection, at,
                                  text::worker_name(names_, worker)));
    return;
  }
  // A closing worker is running (a paused or dead one emits nothing): it was acting.
  found->second.last_stop = Stop{*cause, worker, at};
  connections_of_[worker].erase(connection);
  touched_.insert(connection);
}

void ActingTracker::end_sessions(WorkerIdentity worker, GapCause cause, Instant at) {
  const auto found = connections_of_.find(worker);
  if (found == connections_of_.end()) return;
  const bool was_acting = is_acting(worker);
  for (const std::string& connection : found->second) {
    ConnectionState& state = connections_[connection];
    state.sessions.erase(worker);
    // A worker that dies while paused stopped acting at its pause: keep that cause.
    if (was_acting) state.last_stop = Stop{cause, worker, at};
    touched_.insert(connection);
  }
  connections_of_.erase(found);
}

void ActingTracker::touch_sessions(WorkerIdentity worker, std::optional<GapCause> stop_cause, Instant at) {
  const auto found = connections_of_.find(worker);
  if (found == connections_of_.end()) return;
  for (const std::string& connection : found->second) {
    ConnectionState& state = connections_[connection];
    if (stop_cause) {
      state.last_stop = Stop{*stop_cause, worker, at};
    } else {
      Session& session = state.sessions[worker];
      session.acting_since = at;
      session.resumed = true;
      ++acting_intervals_;
    }
    touched_.insert(connection);
  }
}

}  // namespace leaseproof::properties
