#include "properties/registry_checker.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "base/assert.hpp"

namespace leaseproof::properties {
namespace {

constexpr uint64_t kViolationsListedPerKind = 5;

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string{text}};
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

std::string at(Instant t) { return fmt::format("@{}", t - Instant{}); }

double ms(Duration d) { return static_cast<double>(d.ns()) / 1e6; }

}  // namespace

void RegistryChecker::violation(std::string_view kind, std::string text) {
  auto it = listed_by_kind_.find(kind);
  if (it == listed_by_kind_.end()) it = listed_by_kind_.emplace(std::string{kind}, 0).first;
  if (it->second < kViolationsListedPerKind) {
    ++it->second;
    violations_.push_back(std::move(text));
  } else {
    ++unlisted_;
  }
}

bool RegistryChecker::expired(const std::string& connection, const std::string& room, Instant when) const {
  const auto it = rows_.find({connection, room});
  return it != rows_.end() && when > it->second + bounds_.ttl + bounds_.ttl_slack;
}

void RegistryChecker::observe(const sim::TraceEvent& event) {
  if (event.kind == sim::EventKind::partition_start) {
    ++open_cuts_;
    return;
  }
  if (event.kind == sim::EventKind::partition_end) {
    LP_ASSERT_GT(open_cuts_, 0u);
    if (--open_cuts_ == 0) last_cut_end_ = event.true_time;
    return;
  }
  if (event.kind != sim::EventKind::note) return;
  const std::string_view label = event.label;
  if (!label.starts_with("gw.") && !label.starts_with("registry.")) return;
  const Instant now = event.true_time;
  check_joins(now);
  if (label == "gw.join") {
    const auto w = words(event.detail);
    std::pair key{w.at(0), w.at(1)};
    if (event.value == 0) {
      ++figures_.joins_asked;
      if (!rows_.contains(key) && joins_waiting_.emplace(key, now).second) {
        join_deadlines_.emplace(now + bounds_.join_bound, std::move(key));
      }
    } else {
      ++figures_.join_retries;
    }
  } else if (label == "gw.connect") {
    const auto w = words(event.detail);
    Connection& c = connections_[w.at(0)];
    c.user = w.at(1);
    c.connected = now;
    users_[c.user].insert(w.at(0));
    ++figures_.connections;
    if (const auto offline = offline_.find(c.user); offline != offline_.end()) {
      staleness_.presence_ms.push_back(ms(offline->second.second));
      offline_.erase(offline);
    }
  } else if (label == "gw.gone") {
    const std::string connection = words(event.detail).at(0);
    Connection& c = connections_[connection];
    c.alive = false;
    c.died = now;
    figures_.connection_s += static_cast<double>((now - c.connected).ns()) / 1e9;
    const auto& others = users_[c.user];
    if (std::none_of(others.begin(), others.end(), [&](const std::string& o) { return connections_[o].alive; })) {
      offline_.emplace(c.user, std::pair{now, Duration::zero()});
    }
    for (auto it = joins_waiting_.lower_bound({connection, ""}); it != joins_waiting_.end() && it->first.first == connection;) {
      it = joins_waiting_.erase(it);
    }
  } else if (label == "gw.leave") {
    const auto w = words(event.detail);
    ++figures_.leaves_asked;
    left_.insert_or_assign({w.at(0), w.at(1)}, Leave{now, std::nullopt});
  } else if (label == "registry.leave") {
    const auto w = words(event.detail);
    leave_ops_[event.value] = {w.at(0), w.at(1)};
  } else if (label == "registry.left") {
    const auto w = words(event.detail);  // connection room error
    leave_ops_.erase(event.value);
    if (w.at(2) != "-") {
      ++figures_.leaves_failed;
    } else {
      ++figures_.leaves_ok;
      const auto it = left_.find({w.at(0), w.at(1)});
      if (it != left_.end() && !it->second.done) it->second.done = now;
    }
  } else if (label == "registry.joined") {
    const auto w = words(event.detail);
    // A join that completes after a leave did (a retry still in flight) wrote
    // the row again: a member again. One that completes while the leave runs
    // is what the leave deletes.
    if (const auto leave = left_.find({w.at(0), w.at(1)}); leave != left_.end() && leave->second.done) left_.erase(leave);
    rows_[{w.at(0), w.at(1)}] = now;
    rooms_[w.at(1)].insert(w.at(0));
    joins_waiting_.erase({w.at(0), w.at(1)});
  } else if (label == "registry.delete") {
    const auto w = words(event.detail);  // connection room
    ++figures_.row_deletes;
    const auto it = connections_.find(w.at(0));
    const auto leave = leave_ops_.find(event.value);
    if (leave != leave_ops_.end() && leave->second == std::pair{w.at(0), w.at(1)} && left_.contains(leave->second)) {
      if (it != connections_.end() && it->second.alive) ++figures_.leave_deletes;  // the row it asked to leave
    } else if (it != connections_.end() && it->second.alive) {
      violation("lost", fmt::format("lost membership: operation {} deleted the row of {} in {} at {}, a live connection "
                                    "(connected {}): another connection's cleanup removed it",
                                    event.value, w.at(0), w.at(1), at(now), at(it->second.connected)));
    }
  } else if (label == "registry.remove") {
    removals_[event.value] = {std::string{event.detail}, now};
  } else if (label == "registry.removed") {
    const auto w = words(event.detail);
    const auto it = removals_.find(event.value);
    LP_ASSERT(it != removals_.end());
    if (w.at(3) == "-") {
      ++figures_.removals_ok;
      auto& removed = connections_[w.at(0)].removed;
      if (!removed) removed = std::pair{it->second.second, now};
    } else {
      ++figures_.removals_failed;
    }
    removals_.erase(it);
  } else if (label == "registry.broadcast") {
    Broadcast& b = broadcasts_[event.value];
    b.room = std::string{event.detail};
    b.began = now;
    ++figures_.broadcasts;
    for (const std::string& connection : rooms_[b.room]) {
      const bool settled = rows_.at({connection, b.room}) + bounds_.read_window <= now;
      if (connections_[connection].alive && settled && !left_.contains({connection, b.room})) {
        b.expected.push_back(connection);
      }
    }
  } else if (label == "gw.post") {
    on_post(event);
  } else if (label == "registry.broadcast_end") {
    on_broadcast_end(event);
  } else if (label == "registry.presence") {
    on_presence(event);
  }
}

void RegistryChecker::check_joins(Instant now) {
  while (!join_deadlines_.empty() && join_deadlines_.begin()->first < now) {
    auto node = join_deadlines_.extract(join_deadlines_.begin());
    const auto waiting = joins_waiting_.find(node.mapped());
    if (waiting == joins_waiting_.end() || waiting->second + bounds_.join_bound != node.key()) continue;
    violation("membership", fmt::format("membership: {} asked to join {} at {} and, still connected, was not a member "
                                        "{} later (the join bound)",
                                        waiting->first.first, waiting->first.second, at(waiting->second),
                                        bounds_.join_bound));
    joins_waiting_.erase(waiting);
  }
}

void RegistryChecker::finish(Instant end) {
  check_joins(end);
  for (const auto& [id, c] : connections_) {
    if (c.alive) {
      figures_.connection_s += static_cast<double>((end - c.connected).ns()) / 1e9;
    } else {
      staleness_.broadcast_ms.push_back(ms(c.counted_dead));
    }
  }
  for (const auto& [user, offline] : offline_) staleness_.presence_ms.push_back(ms(offline.second));
  offline_.clear();
}

void RegistryChecker::on_post(const sim::TraceEvent& event) {
  const auto w = words(event.detail);
  const std::string& connection = w.at(0);
  const auto b = broadcasts_.find(event.value);
  if (b == broadcasts_.end()) return;
  b->second.last_status[connection] = w.at(1);
  Connection& c = connections_[connection];
  const Instant now = event.true_time;
  if (!c.alive) {
    ++figures_.ghost_posts;
    c.counted_dead = std::max(c.counted_dead, now - c.died);
  }
  if (expired(connection, b->second.room, now)) {
    violation("ttl", fmt::format("staleness: broadcast {} to {} posted to {} at {}, whose row there expired at {} (joined "
                          "{} + ttl {}): an answer counted a row past its TTL",
                          event.value, b->second.room, connection, at(now),
                          at(rows_.at({connection, b->second.room}) + bounds_.ttl),
                          at(rows_.at({connection, b->second.room})), bounds_.ttl));
  }
  if (const auto leave = left_.find({connection, b->second.room});
      leave != left_.end() && leave->second.done && b->second.began > *leave->second.done + bounds_.read_window) {
    violation("left", fmt::format("staleness: broadcast {} to {} (began {}) posted to {}, which left {} (asked {}, reported "
                                  "done {})",
                                  event.value, b->second.room, at(b->second.began), connection, b->second.room,
                                  at(leave->second.asked), at(*leave->second.done)));
  }
  if (c.removed && b->second.began > c.removed->second + bounds_.read_window) {
    const auto row = rows_.find({connection, b->second.room});
    const bool written_too_late = row != rows_.end() && row->second + bounds_.gsi_lag_max >= c.removed->first;
    if (!written_too_late) {
      violation("removed", fmt::format("staleness: broadcast {} to {} (began {}) posted to {}, whose rows a removal ({} .. {}) "
                            "reported removed; its row there was written {}",
                            event.value, b->second.room, at(b->second.began), connection, at(c.removed->first),
                            at(c.removed->second), row != rows_.end() ? at(row->second) : std::string{"never"}));
    }
  }
}

void RegistryChecker::on_broadcast_end(const sim::TraceEvent& event) {
  const auto it = broadcasts_.find(event.value);
  if (it == broadcasts_.end()) return;
  const Broadcast b = std::move(it->second);
  broadcasts_.erase(it);
  const auto w = words(event.detail);  // room members delivered gone failed rows_left prune_failures error...
  std::string error = w.size() > 7 ? w[7] : "-";
  for (size_t i = 8; i < w.size(); ++i) error += " " + w[i];
  const bool prunes_ok = w.at(6) == "0";
  // DynamoDB was out of the handler's reach during the broadcast: its member
  // query failing is the partition's doing, and the broadcast said so.
  const bool cut = open_cuts_ > 0 || (last_cut_end_ && *last_cut_end_ >= b.began);
  if (error != "-" && cut) {
    ++figures_.broadcasts_failed_in_cut;
    for (const std::string& connection : b.expected) {
      if (connections_[connection].alive && !b.last_status.contains(connection)) ++figures_.misses_in_cut;
    }
    return;
  }
  for (const std::string& connection : b.expected) {
    const Connection& c = connections_[connection];
    if (!c.alive || left_.contains({connection, b.room})) continue;  // not a member for the whole broadcast
    ++figures_.expected_deliveries;
    const auto status = b.last_status.find(connection);
    if (status != b.last_status.end() && status->second == "ok") {
      ++figures_.delivered;
    } else if (status != b.last_status.end()) {
      ++figures_.misses_gateway;
    } else {
      ++figures_.misses_not_in_answer;
      const std::string cause =
          error != "-" ? fmt::format("the member query failed ({})", error)
          : c.removed ? fmt::format("its rows were removed by a removal that began {} while it lived", at(c.removed->first))
                           : std::string{"the answer left it out"};
      violation("delivery", fmt::format("delivery: broadcast {} to {} ({} .. {}) missed {}, a live member since {}: {}",
                            event.value, b.room, at(b.began), at(event.true_time), connection,
                            at(rows_.at({connection, b.room})), cause));
    }
  }
  // A 410's prune that reported success removes the connection everywhere.
  if (prunes_ok) {
    for (const auto& [connection, status] : b.last_status) {
      if (status != "gone") continue;
      auto& removed = connections_[connection].removed;
      if (!removed) removed = std::pair{b.began, event.true_time};
    }
  }
}

void RegistryChecker::on_presence(const sim::TraceEvent& event) {
  const auto w = words(event.detail);
  if (w.at(1) != "online") return;
  ++figures_.presence_answers;
  const Instant now = event.true_time;
  bool live_row = false;
  bool ghost = false;
  uint64_t rows = 0;
  // A join in flight may have written its row before the handler saw the
  // answer (registry.joined): a presence read in between finds the row.
  bool joining = false;
  for (const std::string& connection : users_[w.at(0)]) {
    for (const auto& [room, members] : rooms_) {
      if (!members.contains(connection)) continue;
      ++rows;
      if (expired(connection, room, now)) continue;
      live_row = true;
      if (!connections_[connection].alive) ghost = true;
    }
    const auto join = joins_waiting_.lower_bound({connection, ""});
    if (join != joins_waiting_.end() && join->first.first == connection) joining = true;
  }
  if (!live_row && !joining) {
    violation("presence", rows == 0 ? fmt::format("staleness: presence answered {} online at {}, but the user has no "
                                                  "row and no join in flight",
                                                  w.at(0), at(now))
                                    : fmt::format("staleness: presence answered {} online at {}, but every row of the "
                                                  "user ({}) is past its TTL (ttl {}) and no join is in flight",
                                                  w.at(0), at(now), rows, bounds_.ttl));
  } else if (!live_row) {
    ++figures_.presence_online_joining;
  } else if (ghost) {
    ++figures_.presence_online_ghosts;
  }
  if (const auto offline = offline_.find(w.at(0)); offline != offline_.end()) {
    offline->second.second = std::max(offline->second.second, now - offline->second.first);
  }
}

std::string RegistryChecker::summary() const {
  const Figures& f = figures_;
  return fmt::format("registry: {} joins asked ({} asked again after a failure); {} broadcasts, {} of {} expected deliveries made ({} left out of the answer, {} "
                     "refused by the gateway past every attempt; {} broadcasts failed while DynamoDB was cut off); {} posts to dead connections; {} presence answers "
                     "online ({} from rows of dead connections within the TTL); leaves {} asked, {} reported ok, {} failed; removals {} reported ok, {} failed",
                     f.joins_asked, f.join_retries, f.broadcasts, f.delivered, f.expected_deliveries, f.misses_not_in_answer, f.misses_gateway,
                     f.broadcasts_failed_in_cut, f.ghost_posts, f.presence_answers, f.presence_online_ghosts, f.leaves_asked, f.leaves_ok,
                     f.leaves_failed, f.removals_ok, f.removals_failed);
}

}  // namespace leaseproof::properties
