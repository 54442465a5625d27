// Replaying a run up to a chosen event (docs/shrink-and-replay.md): an
// observer keeps the last events and follows ownership as the checkers do;
// at the stop it describes the state and asks the world to stop.
#include "scenarios/replay.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "core/dynamo/codec.hpp"
#include "models/dynamo/node.hpp"
#include "properties/lease_checkers.hpp"
#include "properties/reading.hpp"
#include "scenarios/shrink.hpp"
#include "sim/clock.hpp"
#include "sim/world.hpp"

namespace leaseproof::scenarios {

namespace {

// The last `capacity` events, with their own copies of the strings the
// trace's views point into.
class EventRing {
 public:
  explicit EventRing(size_t capacity) : entries_(capacity) { LP_ASSERT_GT(capacity, 0u); }

  void push(uint64_t index, const sim::TraceEvent& event) {
    Entry& entry = entries_[stored_ % entries_.size()];
    entry.index = index;
    entry.event = event;
    entry.label.assign(event.label);
    entry.detail.assign(event.detail);
    ++stored_;
  }

  bool empty() const { return stored_ == 0; }
  uint64_t newest_index() const { return newest().index; }
  Instant newest_time() const { return newest().event.true_time; }

  // JSON lines of the stored events, oldest first.
  std::vector<std::string> lines(const sim::Trace& trace) const {
    std::vector<std::string> out;
    const uint64_t count = std::min<uint64_t>(stored_, entries_.size());
    for (uint64_t n = stored_ - count; n < stored_; ++n) {
      const Entry& entry = entries_[n % entries_.size()];
      sim::TraceEvent event = entry.event;
      event.label = entry.label;
      event.detail = entry.detail;
      out.push_back(trace.to_json_line(entry.index, event));
    }
    return out;
  }

 private:
  struct Entry {
    uint64_t index = 0;
    sim::TraceEvent event;
    std::string label;
    std::string detail;
  };
  const Entry& newest() const {
    LP_ASSERT(!empty());
    return entries_[(stored_ - 1) % entries_.size()];
  }
  std::vector<Entry> entries_;
  uint64_t stored_ = 0;  // events pushed; the ring holds the last of them
};

// "" or ": a b c".
std::string listed(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? ": " : " ") + name;
  return text;
}

// Connection names in their numeric order: c2 before c10.
struct NaturalOrder {
  bool operator()(const std::string& a, const std::string& b) const {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  }
};

// "a = 1, b = x": an item or a set of expression values, S and N as text,
// other types as their DynamoDB JSON.
std::string attributes_text(const dynamo::Item& item) {
  std::string text;
  for (const auto& [name, value] : item) {
    const bool plain = value.is(dynamo::AttributeType::s) || value.is(dynamo::AttributeType::n);
    text += fmt::format("{}{} = {}", text.empty() ? "" : ", ", name, plain ? value.text() : dynamo::encode(value).dump());
  }
  return text.empty() ? "(none)" : text;
}

// A wall-clock time in ms (a lease's expiry, a sender's "now") as the true
// time a perfect clock shows it at; nullopt for what is not such a time
// (not an integer, or before the run's epoch: the 0 of a lease never held).
std::optional<Instant> wall_ms_as_true_time(std::string_view ms_text) {
  int64_t ms = 0;
  auto [end, error] = std::from_chars(ms_text.data(), ms_text.data() + ms_text.size(), ms);
  if (error != std::errc{} || end != ms_text.data() + ms_text.size()) return std::nullopt;
  const Instant wall = Instant::from_ms(ms);
  if (wall < sim::kWallEpoch) return std::nullopt;
  return Instant::zero() + (wall - sim::kWallEpoch);
}

// "@1m8.048s", or the text itself when it is no time of the run.
std::string as_true_time_text(std::string_view ms_text) {
  const std::optional<Instant> at = wall_ms_as_true_time(ms_text);
  return at ? fmt::format("@{}", at->since_zero()) : std::string{ms_text};
}

// Why DynamoDB accepted the lease writes behind each owner: for every
// accepted acquire and renew, the condition and its values, the item as
// stored just before, and every clock at that instant. `replay` prints
// those of the connections the stop shows with more than one acting owner
// (or the one it is asked about).
class WriteExplainer {
 public:
  WriteExplainer() = default;

  void set_world(const sim::World& world) { world_ = &world; }

  // lease.request notes: which request is whose.
  void observe(const sim::TraceEvent& event, const std::string& sender) {
    if (event.kind != sim::EventKind::note || event.label != "lease.request") return;
    const std::string_view detail = event.detail;
    const size_t kind_end = detail.find(' ');
    if (kind_end == std::string_view::npos) return;
    const std::string_view kind = detail.substr(0, kind_end);
    if (kind != "acquire" && kind != "renew") return;
    const size_t connection_end = detail.find(' ', kind_end + 1);
    const std::string_view connection = detail.substr(kind_end + 1, connection_end - kind_end - 1);
    Sent& sent = sent_[static_cast<uint64_t>(event.value)];
    sent.kind = std::string{kind};
    sent.connection = std::string{connection};
    sent.sender = sender;
    sent.at = event.true_time;
    sent.wall_offset = event.wall - (sim::kWallEpoch + (event.true_time - Instant::zero()));
  }

  // The DynamoDB node's hook: an applied request, before its note.
  void applied(const models::AppliedRequest& applied) {
    const auto found = sent_.find(applied.message);
    if (found == sent_.end()) return;
    Sent sent = std::move(found->second);
    sent_.erase(found);
    if (applied.outcome != "ok") return;
    const auto* update = std::get_if<dynamo::UpdateItemRequest>(&applied.request);
    if (update == nullptr) return;
    std::vector<std::string> lines;
    const Instant now = world_->now();
    lines.push_back(fmt::format("{} by {} (message {}), sent at {} with the sender's wall clock {}, applied at {}:",
                                sent.kind, sent.sender, applied.message, sent.at.since_zero(),
                                offset_text(sent.wall_offset), now.since_zero()));
    lines.push_back(fmt::format("  condition: {}", update->write.condition_expression.value_or("(none)")));
    lines.push_back(fmt::format("  values: {}", attributes_text(update->write.expression_attribute_values)));
    lines.push_back(fmt::format("  item before: {}", applied.before ? attributes_text(*applied.before) : "(none)"));
    const auto& values = update->write.expression_attribute_values;
    const dynamo::AttributeValue* stored = nullptr;
    if (applied.before) {
      const auto expiry = applied.before->find("lease_expires_at_ms");
      if (expiry != applied.before->end() && expiry->second.is(dynamo::AttributeType::n)) stored = &expiry->second;
    }
    std::string times;
    if (stored != nullptr) times += fmt::format("stored expiry {}", as_true_time_text(stored->text()));
    for (const std::string_view name : {":now", ":expired_before", ":exp"}) {
      const auto value = values.find(name);
      if (value == values.end() || !value->second.is(dynamo::AttributeType::n)) continue;
      times += fmt::format("{}{} {}", times.empty() ? "" : ", ", name, as_true_time_text(value->second.text()));
    }
    if (!times.empty()) lines.push_back(fmt::format("  as true times: {}", times));
    // The comparison a person wants: how much of the stored lease was left
    // in true time when DynamoDB accepted this write.
    const std::optional<Instant> expiry = stored != nullptr ? wall_ms_as_true_time(stored->text()) : std::nullopt;
    if (expiry) {
      const Duration left = properties::for_reading(*expiry - now);
      lines.push_back(left.is_negative()
                          ? fmt::format("  at the apply the stored lease had expired {} before (true time)", -left)
                          : fmt::format("  at the apply the stored lease still had {} left (true time)", left));
    }
    std::string clocks;
    for (uint32_t n = 0; n < world_->node_count(); ++n) {
      const NodeId node{n};
      const std::string_view name = world_->node_name(node);
      if (!name.starts_with("worker-") && name != "dynamodb") continue;
      const Duration offset = world_->clock(node).wall(now) - (sim::kWallEpoch + (now - Instant::zero()));
      const sim::ProcessState state = world_->state(node);
      const std::string note = state == sim::ProcessState::running ? "" : fmt::format(" ({})", to_string(state));
      clocks += fmt::format("{}{} {}{}", clocks.empty() ? "" : ", ", name, offset_text(offset), note);
    }
    lines.push_back(fmt::format("  wall clocks then: {}", clocks));
    Writes& writes = writes_[{sent.connection, sent.sender}];
    (sent.kind == "acquire" ? writes.acquire : writes.renew) = std::move(lines);
    if (sent.kind == "acquire") writes.renew.clear();
  }

  // The lines for one connection's owner `sender` (name#incarnation): its
  // last accepted acquire and its last accepted renew after it.
  std::vector<std::string> explain(const std::string& connection, const std::string& sender) const {
    const auto found = writes_.find({connection, sender});
    if (found == writes_.end()) return {fmt::format("{} {}: no accepted acquire or renew in this run", connection, sender)};
    std::vector<std::string> lines;
    for (const std::vector<std::string>* write : {&found->second.acquire, &found->second.renew}) {
      for (const std::string& line : *write) lines.push_back(line.starts_with(' ') ? "  " + line : connection + " " + line);
    }
    return lines;
  }

 private:
  struct Sent {
    std::string kind;
    std::string connection;
    std::string sender;
    Instant at;
    Duration wall_offset;
  };
  struct Writes {
    std::vector<std::string> acquire;
    std::vector<std::string> renew;  // the last one after the acquire
  };
  static std::string offset_text(Duration offset) {
    if (offset == Duration::zero()) return "on time";
    return offset.is_negative() ? fmt::format("{} behind", -offset) : fmt::format("{} ahead", offset);
  }

  const sim::World* world_ = nullptr;
  std::unordered_map<uint64_t, Sent> sent_;  // by message id, until DynamoDB applies it
  std::map<std::pair<std::string, std::string>, Writes> writes_;  // by (connection, owner)
};

// Who acts as owner of which connection: the checkers' own view
// (properties::ActingTracker over lease.open/lease.close and the lifecycle).
class OwnershipView {
 public:
  explicit OwnershipView(const sim::Trace& trace)
      : trace_(trace), tracker_([this](NodeId node) { return name_of(node); }) {}

  void observe(const sim::TraceEvent& event) {
    remember(event.node);
    remember(event.peer);
    tracker_.apply(event);
    for (const std::string& connection : tracker_.take_touched()) connections_.insert(connection);
    (void)tracker_.take_errors();  // the checker reports them
    if (event.kind != sim::EventKind::note) return;
    if (event.label == "control.started") {
      connections_.insert(std::string{event.detail});
      stopped_.erase(std::string{event.detail});
    } else if (event.label == "control.stopped") {
      stopped_.insert(std::string{event.detail});
    }
  }

  std::vector<std::string> describe() const;

  // Connections with more than one acting owner, each with its owners
  // (name#incarnation); or only `connection`, with its owners, if given.
  std::vector<std::pair<std::string, std::vector<std::string>>> owners(const std::string& connection) const {
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    for (const std::string& name : connections_) {
      if (!connection.empty() && name != connection) continue;
      const std::vector<properties::WorkerIdentity> acting = tracker_.acting(name);
      if (connection.empty() && acting.size() < 2) continue;
      std::vector<std::string> identities;
      for (const properties::WorkerIdentity& worker : acting) identities.push_back(identity(worker));
      out.emplace_back(name, std::move(identities));
    }
    return out;
  }
  std::string identity_of(NodeId node) const { return identity(tracker_.identity_of(node)); }

 private:
  void remember(NodeId node) {
    if (!node.valid()) return;
    if (names_.size() <= node.value) names_.resize(node.value + 1);
    if (names_[node.value].empty()) names_[node.value] = std::string{trace_.node_name(node)};
  }
  std::string name_of(NodeId node) const {
    return node.valid() && node.value < names_.size() ? names_[node.value] : fmt::format("node{}", node.value);
  }
  std::string identity(properties::WorkerIdentity worker) const {
    return fmt::format("{}#{}", name_of(worker.node), worker.incarnation);
  }
  std::string worker_line(NodeId node, const std::vector<std::string>& connections) const;

  const sim::Trace& trace_;
  std::vector<std::string> names_;  // by node index, as events named them
  properties::ActingTracker tracker_;
  std::set<std::string, NaturalOrder> connections_;
  std::set<std::string> stopped_;
};

std::string OwnershipView::worker_line(NodeId node, const std::vector<std::string>& connections) const {
  const properties::ActingTracker::NodeView view = tracker_.node(node);
  const std::string count = fmt::format("{} connection{}", connections.size(), connections.size() == 1 ? "" : "s");
  const std::string who = identity(tracker_.identity_of(node));
  using State = properties::ActingTracker::NodeState;
  switch (view.state) {
    case State::down:
      return who + " down";
    case State::paused:
      return fmt::format("{} paused: holds {}, acting again when it resumes{}", who, count, listed(connections));
    case State::running:
    case State::unknown:
      break;
  }
  return fmt::format("{} running: acts as owner of {}{}", who, count, listed(connections));
}

std::vector<std::string> OwnershipView::describe() const {
  std::map<uint32_t, std::vector<std::string>> held;  // by node index: the sessions it holds
  std::vector<std::string> several;
  std::vector<std::string> none;
  for (const std::string& connection : connections_) {
    for (uint32_t n = 0; n < names_.size(); ++n) {
      if (tracker_.session(connection, tracker_.identity_of(NodeId{n})) != nullptr) held[n].push_back(connection);
    }
    const std::vector<properties::WorkerIdentity> acting = tracker_.acting(connection);
    if (acting.size() > 1) {
      std::string owners;
      for (const properties::WorkerIdentity& worker : acting) {
        const properties::ActingTracker::Session* session = tracker_.session(connection, worker);
        owners += fmt::format("{}{} (epoch {}, since {})", owners.empty() ? "" : ", ", identity(worker), session->epoch,
                              session->opened_at.since_zero());
      }
      several.push_back(fmt::format("{}: {}", connection, owners));
    } else if (acting.empty()) {
      none.push_back(stopped_.contains(connection) ? connection + "(stopped)" : connection);
    }
  }
  std::vector<std::string> lines;
  for (uint32_t n = 0; n < names_.size(); ++n) {
    if (!names_[n].starts_with("worker-") && !held.contains(n)) continue;
    lines.push_back(worker_line(NodeId{n}, held[n]));
  }
  lines.push_back(fmt::format("connections with more than one acting owner: {}", several.size()));
  for (const std::string& line : several) lines.push_back("  " + line);
  lines.push_back(fmt::format("connections with no acting owner: {}{}", none.size(), listed(none)));
  return lines;
}

}  // namespace

ReplayResult replay(const Scenario& scenario, RunConfig config, const ReplayStop& stop) {
  LP_ASSERT(stop.event.has_value() != stop.time.has_value());
  if (!config.duration) config.duration = scenario.default_duration;
  ReplayResult result;
  EventRing ring{stop.context + 1};  // the stop event is the newest
  const sim::Trace* trace = nullptr;
  sim::World* world = nullptr;
  std::unique_ptr<OwnershipView> ownership;
  WriteExplainer explainer;
  uint64_t index = 0;
  // The ring's newest event is the stop: describe the state after it and
  // ask the world to stop (at once, or when it is built).
  auto finish = [&] {
    if (result.reached || ring.empty()) return;
    result.reached = true;
    result.stop_index = ring.newest_index();
    result.stop_time = ring.newest_time().since_zero();
    result.context = ring.lines(*trace);
    result.stop_line = result.context.back();
    result.context.pop_back();
    if (ownership) {
      result.state = ownership->describe();
      for (const auto& [connection, owners] : ownership->owners(stop.explain)) {
        if (owners.empty()) result.why.push_back(fmt::format("{}: no acting owner", connection));
        for (const std::string& owner : owners) {
          for (std::string& line : explainer.explain(connection, owner)) result.why.push_back(std::move(line));
        }
      }
      result.explained = stop.explain.empty() || !result.why.empty();
    }
    if (world != nullptr) world->request_stop();
  };
  config.trace_jsonl = nullptr;
  config.keep_digests = false;
  config.keep_lines = false;
  config.observe_trace = [&](sim::Trace& observed) {
    trace = &observed;
    if (is_lease_scenario(scenario.name)) ownership = std::make_unique<OwnershipView>(observed);
    observed.add_observer([&](const sim::TraceEvent& event) {
      const uint64_t i = index++;
      if (result.reached) return;  // the rest of the stop event's step
      if (stop.time && event.true_time > Instant::zero() + *stop.time) return finish();
      if (ownership) {
        ownership->observe(event);
        explainer.observe(event, ownership->identity_of(event.node));
      }
      ring.push(i, event);
      if (stop.event && i == *stop.event) finish();
    });
  };
  if (is_lease_scenario(scenario.name)) {
    config.observe_dynamo = [&explainer](const models::AppliedRequest& applied) { explainer.applied(applied); };
  }
  config.before_run = [&](sim::World& built) {
    world = &built;
    explainer.set_world(built);
    if (result.reached) return built.request_stop();
    // By time: the last event at or before T. The first later event stops
    // the run; this covers a run with none (it ends within 1 ns after T).
    if (stop.time) {
      const Instant end = Instant::zero() + *config.duration;
      built.at(std::min(Instant::zero() + *stop.time + Duration::from_ns(1), end), [&finish] { finish(); });
    }
  };
  const RunResult run = scenario.run(config);
  result.run_end = run.duration;
  result.events = index;
  // Not reached: the observer saw every event of the run.
  if (!result.reached) LP_ASSERT_EQ(index, run.events);
  return result;
}

}  // namespace leaseproof::scenarios
