#include "properties/stream_checkers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "properties/lease_text.hpp"
#include "properties/reading.hpp"

namespace leaseproof::properties {

using sim::EventKind;

namespace {

constexpr int64_t kAll = std::numeric_limits<int64_t>::max();

std::optional<int64_t> parse_i64(std::string_view text) {
  const std::optional<uint64_t> value = text::parse_u64(text);
  if (!value || *value > static_cast<uint64_t>(kAll)) return std::nullopt;
  return static_cast<int64_t>(*value);
}

// A worker's lease.request note of a sink write: "record ...", "record_put
// ...", "checkpoint ..." (docs/trace-format.md). Every request of every worker
// is noted, renews most: the first letters decide before any string compare.
bool is_sink_request(const sim::TraceEvent& event) {
  const std::string_view label = event.label;
  const std::string_view detail = event.detail;
  // "lease.request" is the only 13-letter label with an 'r' at 6; "rec" and
  // "che" begin only the sink kinds (and reconcile, which the compare drops).
  if (label.size() != 13 || label[6] != 'r' || detail.size() < 8 ||
      (detail[2] != 'e' && detail[2] != 'c')) {
    return false;
  }
  if (label != "lease.request") return false;
  return detail.starts_with("record ") || detail.starts_with("record_put ") || detail.starts_with("checkpoint ");
}

}  // namespace

void ExactlyOnceChecker::violation(std::string text) {
  ++violation_count_;
  if (violations_.size() < kViolationsKept) violations_.push_back(std::move(text));
}

ExactlyOnceChecker::EpochState& ExactlyOnceChecker::epoch_state(std::string_view connection, uint64_t epoch) {
  auto found = epochs_by_connection_.find(connection);
  if (found == epochs_by_connection_.end()) found = epochs_by_connection_.try_emplace(std::string{connection}).first;
  for (const auto& [known, state] : found->second) {
    if (known == epoch) return *state;
  }
  EpochState& state = epochs_.emplace(Key{std::string{connection}, epoch}, EpochState{}).first->second;
  found->second.emplace_back(epoch, &state);
  return state;
}

void ExactlyOnceChecker::observe(const sim::TraceEvent& event) {
  if (event.kind != EventKind::note) {
    if (event.kind < EventKind::crash) return;  // the bulk: sends, deliveries, drops, timers
    if (event.kind == EventKind::start || event.kind == EventKind::restart) {
      if (event.node.valid()) lives_[event.node.value] = NodeLife{lives_[event.node.value].incarnation + 1, {}};
    } else if (event.kind == EventKind::crash || event.kind == EventKind::exit) {
      if (event.node.valid()) lives_[event.node.value].down_since = event.true_time;
    }
    return;
  }
  if (is_sink_request(event)) {
    on_sink_request(event);
  } else if (event.label == "hub.epoch") {
    hub_epoch_[event.node.value] = static_cast<uint64_t>(event.value);
  } else if (event.label == "hub.publish") {
    EpochState& state = epoch_state(event.detail, hub_epoch_[event.node.value]);
    if (event.value != state.top + 1) {
      violation(fmt::format("hub: published {} seq {} after {} at {}", event.detail, event.value, state.top,
                            event.true_time));
    }
    state.top = event.value;
    ++published_;
  } else if (event.label == "resume.reset") {
    on_reset(event);
  } else if (event.label == kSinkItemNote) {
    on_sink_item(event);
  }
}

void ExactlyOnceChecker::on_sink_item(const sim::TraceEvent& event) {
  const text::Words words = text::split_words(event.detail);
  const std::optional<uint64_t> epoch = words.size() == 4 ? text::parse_u64(words[1]) : std::nullopt;
  const std::optional<int64_t> seq = words.size() == 4 ? parse_i64(words[2]) : std::nullopt;
  const bool known = words.size() == 4 && (words[3] == "new" || words[3] == "replaced");
  if (!epoch || !seq || !known) {
    violation(fmt::format("trace contract: malformed {} '{}' at {}", kSinkItemNote, event.detail, event.true_time));
    return;
  }
  on_sink_write(words[0], *epoch, *seq, words[3] == "replaced", event.true_time,
                event.value > 0 ? static_cast<uint64_t>(event.value) : 0);
}

// The sink writes among the workers' requests: "record ...", "record_put ...",
// "checkpoint ..." (docs/trace-format.md); kept by message id until the end.
void ExactlyOnceChecker::on_sink_request(const sim::TraceEvent& event) {
  if (event.value <= 0) return;  // malformed: the ownership checker reports it
  const auto message = static_cast<uint64_t>(event.value);
  const auto found = lives_.find(event.node.value);
  SinkRequest request{message, event.node, found == lives_.end() ? 0 : found->second.incarnation, event.true_time,
                      sink_details_.size(), event.detail.size()};
  sink_details_ += event.detail;
  if (sink_requests_.empty() || sink_requests_.back().message < message) {
    sink_requests_.push_back(request);
  } else {  // not in send order (a hand-built trace): kept sorted
    sink_requests_.insert(find_sink_request(message), request);
  }
}

std::vector<ExactlyOnceChecker::SinkRequest>::const_iterator ExactlyOnceChecker::find_sink_request(
    uint64_t message) const {
  return std::lower_bound(sink_requests_.begin(), sink_requests_.end(), message,
                          [](const SinkRequest& r, uint64_t m) { return r.message < m; });
}

std::string ExactlyOnceChecker::written_by(uint64_t message) const {
  const auto found = find_sink_request(message);
  if (message == 0) return "";
  if (found == sink_requests_.end() || found->message != message) {
    return fmt::format(" (request message {}, no lease.request note)", message);
  }
  const SinkRequest& request = *found;
  const std::string node = names_ ? names_(request.node) : fmt::format("node {}", request.node.value);
  std::string sender = fmt::format("{}#{}", node, request.incarnation);
  std::string fate;
  if (const auto life = lives_.find(request.node.value); life != lives_.end()) {
    if (life->second.incarnation != request.incarnation) {
      fate = fmt::format("; its sender is gone: {}#{} runs now", node, life->second.incarnation);
    } else if (life->second.down_since) {
      fate = fmt::format("; its sender is down since {}", *life->second.down_since);
    }
  }
  return fmt::format(" (written by {}: {}, request message {} sent at {}{})", sender,
                     std::string_view{sink_details_}.substr(request.detail_at, request.detail_size), message,
                     request.sent, fate);
}

// "resume.reset <connection> <kind> <after epoch> <after seq> <resume epoch> <resume seq>"
void ExactlyOnceChecker::on_reset(const sim::TraceEvent& event) {
  const text::Words words = text::split_words(event.detail);
  std::optional<int64_t> numbers[4];
  if (words.size() == 6) {
    for (size_t i = 0; i < 4; ++i) numbers[i] = parse_i64(words[2 + i]);
  }
  if (words.size() != 6 || !numbers[0] || !numbers[1] || !numbers[2] || !numbers[3]) {
    violation(fmt::format("trace contract: malformed resume.reset '{}' at {}", event.detail, event.true_time));
    return;
  }
  const std::string connection{words[0]};
  ++resets_by_kind_[std::string{words[1]}];
  const auto after_epoch = static_cast<uint64_t>(*numbers[0]);
  const auto resume_epoch = static_cast<uint64_t>(*numbers[2]);
  const int64_t after_seq = *numbers[1];
  const int64_t resume_seq = *numbers[3];
  judge_reset(event, connection, words[1], after_epoch, after_seq, resume_epoch, resume_seq);
  if (after_epoch == resume_epoch) {
    if (resume_seq > after_seq) epoch_state(connection, after_epoch).excused.emplace_back(after_seq + 1, resume_seq);
    return;
  }
  // Another epoch: the rest of the old one, every epoch between, and the
  // new one up to the resume position are gone.
  if (after_epoch != 0) epoch_state(connection, after_epoch).excused.emplace_back(after_seq + 1, kAll);
  lost_epochs_[connection].emplace_back(after_epoch, resume_epoch);
  if (resume_seq >= 1) epoch_state(connection, resume_epoch).excused.emplace_back(1, resume_seq);
}

// What the hub held when the reset arrived (its ring and top only grow
// between the hub's decision and the arrival, so this judges leniently):
// the ring keeps the last ring_capacity_ messages of the resume epoch.
void ExactlyOnceChecker::judge_reset(const sim::TraceEvent& event, std::string_view connection, std::string_view kind,
                                     uint64_t after_epoch, int64_t after_seq, uint64_t resume_epoch,
                                     int64_t resume_seq) {
  if (!ring_capacity_ || resume_seq < 1) return;
  const int64_t top = epoch_state(connection, resume_epoch).top;
  const int64_t first_lost = after_epoch == resume_epoch ? after_seq + 1 : 1;
  if (kind == "evicted" || kind == "epoch_changed") {
    ++resets_judged_;
    const int64_t held_from = std::max<int64_t>(1, top - static_cast<int64_t>(*ring_capacity_) + 1);
    if (resume_seq >= held_from && first_lost <= resume_seq && held_from <= top) {
      violation(fmt::format("exactly-once: reset {} of {} at {} declares {}:{}..{}:{} lost while the hub still held "
                            "{}:{}..{}:{} (a ring of {} messages): it could have replayed {}:{}..{}:{}",
                            kind, connection, event.true_time, resume_epoch, first_lost, resume_epoch, resume_seq,
                            resume_epoch, held_from, resume_epoch, top, *ring_capacity_, resume_epoch,
                            std::max(first_lost, held_from), resume_epoch, resume_seq));
    }
  } else if (kind == "over_limit") {
    ++resets_judged_;
    if (resume_seq > top - replay_messages_max_) {
      violation(fmt::format("exactly-once: reset over_limit of {} at {} declares up to {}:{} lost, but only what lies "
                            "more than the replay limit ({} messages) behind the top {}:{} may be",
                            connection, event.true_time, resume_epoch, resume_seq, replay_messages_max_,
                            resume_epoch, top));
    }
  }
}

bool ExactlyOnceChecker::excused(std::string_view connection, uint64_t epoch, const EpochState& state, int64_t from,
                                 int64_t to) const {
  if (const auto lost = lost_epochs_.find(connection); lost != lost_epochs_.end()) {
    for (const auto& [after, resume] : lost->second) {
      if (after < epoch && epoch < resume) return true;
    }
  }
  std::vector<std::pair<int64_t, int64_t>> ranges = state.excused;
  std::sort(ranges.begin(), ranges.end());
  int64_t next = from;  // the first seq not yet shown excused
  for (const auto& [first, last] : ranges) {
    if (first > next) break;
    if (last >= next) next = last == kAll ? kAll : last + 1;
    if (next > to) return true;
  }
  return next > to;
}

void ExactlyOnceChecker::on_sink_write(std::string_view connection, uint64_t epoch, int64_t seq, bool overwrote,
                                       Instant at, uint64_t message) {
  ++records_;
  EpochState& state = epoch_state(connection, epoch);
  if (overwrote) {
    violation(fmt::format("exactly-once: connection {} epoch {} seq {} recorded twice (again at {}){}", connection,
                          epoch, seq, at, written_by(message)));
  }
  if (seq <= state.recorded) {
    if (!overwrote) {
      violation(fmt::format("exactly-once: connection {} epoch {} recorded seq {} after seq {}, out of order, at {}{}",
                            connection, epoch, seq, state.recorded, at, written_by(message)));
    }
    return;
  }
  if (seq > state.top) {
    violation(fmt::format("exactly-once: connection {} epoch {} recorded seq {} at {}, but the hub published only "
                          "up to {}{}",
                          connection, epoch, seq, at, state.top, written_by(message)));
  }
  if (seq > state.recorded + 1) {
    if (excused(connection, epoch, state, state.recorded + 1, seq - 1)) {
      excused_messages_ += static_cast<uint64_t>(seq - 1 - state.recorded);
    } else {
      violation(fmt::format("exactly-once: connection {} epoch {}: seq {}..{} never recorded and no reset declared "
                            "them lost; seq {} recorded next, at {}{}",
                            connection, epoch, state.recorded + 1, seq - 1, seq, at, written_by(message)));
    }
  }
  state.recorded = seq;
}

void ExactlyOnceChecker::finish(const std::set<std::string, std::less<>>& caught_up) {
  for (const auto& [key, state] : epochs_) {
    if (state.top <= state.recorded) continue;
    const auto rest = static_cast<uint64_t>(state.top - state.recorded);
    // The tail of an epoch a reset left behind is declared lost as surely as
    // a gap a later record jumped over.
    if (excused(key.first, key.second, state, state.recorded + 1, state.top)) {
      excused_messages_ += rest;
      continue;
    }
    if (!caught_up.contains(key.first)) {
      not_yet_recorded_ += rest;  // in flight at the end, or its connection awaiting an owner
      continue;
    }
    violation(fmt::format("exactly-once (liveness): connection {} epoch {} recorded up to seq {} of {} published, "
                          "and no reset declared the rest lost",
                          key.first, key.second, state.recorded, state.top));
  }
}

std::string ExactlyOnceChecker::summary() const {
  std::string resets;
  for (const auto& [kind, count] : resets_by_kind_) resets += fmt::format(" {}={}", kind, count);
  return fmt::format("exactly-once recording: {} violations; {} published, {} recorded, {} declared lost by "
                     "resets, {} not recorded by the end (connections not required to catch up: in flight or "
                     "awaiting an owner) (resets:{})",
                     violation_count_, published_, records_, excused_messages_, not_yet_recorded_,
                     resets.empty() ? " none" : resets);
}

// ---- reconnect storms ------------------------------------------------------------

ReconnectStormChecker::ReconnectStormChecker(Window window, uint64_t min_wave)
    : window_(std::move(window)), min_wave_(min_wave) {}

ReconnectStormChecker::ReconnectStormChecker(const resume::ClientConfig& client, uint64_t min_wave)
    : ReconnectStormChecker(
          [client](uint16_t code) {
            const auto it = client.reconnect_base_by_code.find(code);
            return std::min(client.reconnect_cap, it != client.reconnect_base_by_code.end() ? it->second
                                                                                             : client.reconnect_base);
          },
          min_wave) {}

void ReconnectStormChecker::close_instant() {
  for (auto& [code, closed] : closes_now_) {
    const uint64_t clients = closed.size();
    if (clients < min_wave_) continue;
    Wave wave{closes_at_, code, clients, window_(code), 0, 0, 0, std::move(closed)};
    const double per_second =
        wave.window <= Duration::from_s(1)
            ? static_cast<double>(clients)
            : static_cast<double>(clients) * 1e9 / static_cast<double>(wave.window.ns());
    wave.bound = std::min<uint64_t>(clients, static_cast<uint64_t>(std::ceil(per_second + 5 * std::sqrt(per_second) + 5)));
    waves_.push_back(wave);
  }
  closes_now_.clear();
}

void ReconnectStormChecker::observe(const sim::TraceEvent& event) {
  if (event.kind != EventKind::note) return;
  if (event.label == "hub.close") {
    if (event.true_time != closes_at_) close_instant();
    closes_at_ = event.true_time;
    // "<channel> <code> <reason>"
    const text::Words words = text::split_words(event.detail);
    const std::optional<uint64_t> code = words.size() >= 2 ? text::parse_u64(words[1]) : std::nullopt;
    if (code && *code <= UINT16_MAX) closes_now_[static_cast<uint16_t>(*code)].emplace(words[0]);
  } else if (event.label == "upstream.open") {
    // "<connection> <worker id>"
    const text::Words words = text::split_words(event.detail);
    if (!words.empty()) opens_.emplace_back(event.true_time, std::string{words[0]});
  }
}

void ReconnectStormChecker::finish() {
  if (finished_) return;
  finished_ = true;
  close_instant();
  for (Wave& wave : waves_) {
    // The first reconnect of each connection the wave closed, in time order
    // (opens_ is), up to a second after the wave's window.
    const Instant end = wave.at + wave.window + Duration::from_s(1);
    const auto from = std::lower_bound(opens_.begin(), opens_.end(), wave.at,
                                       [](const auto& open, Instant at) { return open.first < at; });
    std::set<std::string_view> back;
    std::vector<Instant> reconnects;
    for (auto it = from; it != opens_.end() && it->first <= end; ++it) {
      if (wave.closed.contains(it->second) && back.insert(it->second).second) reconnects.push_back(it->first);
    }
    size_t begin = 0;
    for (size_t i = 0; i < reconnects.size(); ++i) {
      while (reconnects[i] - reconnects[begin] >= Duration::from_s(1)) ++begin;
      wave.peak = std::max<uint64_t>(wave.peak, i - begin + 1);
    }
    wave.reconnects = reconnects.size();
    if (wave.peak > wave.bound) {
      violations_.push_back(fmt::format(
          "reconnect storm: after {} subscribers were closed with {} at {}, {} reconnected within one second; full "
          "jitter over {} allows at most {} per second",
          wave.clients, wave.code, wave.at, wave.peak, wave.window, wave.bound));
    }
  }
}

std::string ReconnectStormChecker::summary() const {
  if (waves_.empty()) return "reconnect storms: no mass close";
  std::string out = fmt::format("reconnect storms: {} violations; {} mass closes", violations_.size(), waves_.size());
  for (const Wave& wave : waves_) {
    out += fmt::format("; {} x {} at {}: peak {} per second (bound {}, full jitter over {})", wave.clients, wave.code,
                       wave.at, wave.peak, wave.bound, wave.window);
  }
  return out;
}

// ---- dead peers ----------------------------------------------------------------

void DeadPeerChecker::observe(const sim::TraceEvent& event) {
  if (!event.node.valid()) return;
  const uint32_t node = event.node.value;
  if (event.kind == EventKind::start || event.kind == EventKind::restart) {
    names_[node] = fmt::format("{}#{}", namer_ ? namer_(event.node) : fmt::format("node{}", node), event.id);
    return;
  }
  if (event.kind == EventKind::crash) {
    if (hubs_.contains(node)) {  // the hub's sessions die with it
      sessions_.clear();
      return;
    }
    const auto name = names_.find(node);
    if (name != names_.end()) dead_since_.emplace(name->second, event.true_time);
    return;
  }
  if (event.kind != EventKind::note || (event.label != "upstream.open" && event.label != "upstream.close")) return;
  hubs_.insert(node);
  const text::Words words = text::split_words(event.detail);
  if (words.size() != 2) return;
  const std::string_view channel = words[0];
  const std::string who{words[1]};
  Sessions& sessions = sessions_[who];
  auto on_channel = sessions.opened.find(channel);
  if (event.label == "upstream.open") {
    if (on_channel == sessions.opened.end()) on_channel = sessions.opened.emplace(std::string{channel}, std::deque<Instant>{}).first;
    on_channel->second.push_back(event.true_time);
    ++sessions.open;
    return;
  }
  if (on_channel == sessions.opened.end() || on_channel->second.empty()) return;
  const Instant opened = on_channel->second.front();
  on_channel->second.pop_front();
  if (on_channel->second.empty()) sessions.opened.erase(on_channel);
  --sessions.open;
  const auto dead = dead_since_.find(who);
  if (dead == dead_since_.end()) return;
  judge(who, channel, opened, dead->second, event.true_time);
  if (sessions.open == 0) ++cut_;
}

void DeadPeerChecker::judge(const std::string& who, std::string_view channel, Instant opened, Instant dead,
                            Instant cut) {
  const Instant since = std::max(opened, dead);
  const Duration took = cut - since;
  slowest_ = std::max(slowest_, took);
  if (took <= bound_) return;
  if (opened > dead) {
    violations_.push_back(fmt::format("dead peer: the hub cut {}'s session on {} {} after opening it at {}, {} after "
                                      "the subscriber crashed (bound {})",
                                      who, channel, took, opened, opened - dead, bound_));
  } else {
    violations_.push_back(fmt::format("dead peer: the hub cut {} {} after it crashed at {} (session on {}; bound {})",
                                      who, took, dead, channel, bound_));
  }
}

void DeadPeerChecker::finish(Instant end) {
  for (const auto& [who, dead] : dead_since_) {
    const auto sessions = sessions_.find(who);
    if (sessions == sessions_.end()) continue;
    for (const auto& [channel, opened] : sessions->second.opened) {
      for (const Instant open : opened) {
        const Instant since = std::max(open, dead);
        if (end - since > bound_) {
          violations_.push_back(fmt::format("dead peer: the hub never cut {}'s session on {}, dead since {} (bound {})",
                                            who, channel, since, bound_));
        }
      }
    }
  }
}

std::string DeadPeerChecker::summary() const {
  return fmt::format("dead peers: {} violations; {} crashed subscribers cut, slowest after {} (bound {})",
                     violations_.size(), cut_, for_reading(slowest_), bound_);
}

}  // namespace leaseproof::properties
