// Replaying a run up to a chosen event (docs/shrink-and-replay.md): an
// observer keeps the last events and follows ownership as the checkers do;
// at the stop it describes the state and asks the world to stop.
#include "scenarios/replay.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "properties/lease_checkers.hpp"
#include "scenarios/shrink.hpp"
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
    if (ownership) result.state = ownership->describe();
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
      if (ownership) ownership->observe(event);
      ring.push(i, event);
      if (stop.event && i == *stop.event) finish();
    });
  };
  config.before_run = [&](sim::World& built) {
    world = &built;
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
