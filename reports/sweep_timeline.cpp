// The ownership timeline the HTML report draws: one run of the sweep again,
// observed (lease.open / lease.close notes and the workers' faults,
// docs/trace-format.md). Observers never change the run, so this is the run
// the sweep's record describes.
#include "reports/sweep_report.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "scenarios/scenario.hpp"
#include "sim/trace.hpp"

namespace leaseproof::report {

namespace {

constexpr size_t kViolationsKept = 5;
constexpr size_t kViolationChars = 400;

double seconds_at(Instant at) { return static_cast<double>(at.ns()) / 1e9; }

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string{text}};
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// "c2" before "c10": by length, then by text.
bool natural_less(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

class TimelineBuilder {
 public:
  explicit TimelineBuilder(OwnershipTimeline& out) : out_(out) {}

  void attach(sim::Trace& trace) {
    trace_ = &trace;
    trace.add_observer([this](const sim::TraceEvent& event) { observe(event); });
  }

  void finish(double end_s) {
    for (const auto& [key, open] : open_) add(key.first, key.second, open, end_s, "end of run");
    open_.clear();
    out_.connections.assign(connections_.begin(), connections_.end());
    std::sort(out_.connections.begin(), out_.connections.end(), natural_less);
  }

 private:
  struct Open {
    double begin_s = 0;
    uint64_t epoch = 0;
  };
  using Key = std::pair<std::string, std::string>;  // worker, connection

  void observe(const sim::TraceEvent& event) {
    const std::string node{trace_->node_name(event.node)};
    if (!node.starts_with("worker-")) return;
    const double at = seconds_at(event.true_time);
    switch (event.kind) {
      case sim::EventKind::note: return on_note(node, event, at);
      case sim::EventKind::crash:
      case sim::EventKind::exit:
        close_all(node, at, event.kind == sim::EventKind::crash ? "crash" : "exit");
        out_.faults.push_back({node, event.kind == sim::EventKind::crash ? "crash" : "exit", at, 0});
        return;
      case sim::EventKind::restart: out_.faults.push_back({node, "restart", at, 0}); return;
      case sim::EventKind::sigterm: out_.faults.push_back({node, "sigterm", at, 0}); return;
      case sim::EventKind::pause:
        out_.faults.push_back({node, "pause", at, static_cast<double>(event.value) / 1e9});
        return;
      default: return;
    }
  }

  void on_note(const std::string& worker, const sim::TraceEvent& event, double at) {
    const std::vector<std::string> words = split_words(event.detail);
    if (words.empty()) return;
    if (event.label == "lease.open") {
      connections_.insert(words[0]);
      open_[{worker, words[0]}] = Open{at, static_cast<uint64_t>(event.value)};
    } else if (event.label == "lease.close") {
      const auto it = open_.find({worker, words[0]});
      if (it == open_.end()) return;
      add(worker, words[0], it->second, at, words.size() > 2 ? words[2] : "closed");
      open_.erase(it);
    }
  }

  void close_all(const std::string& worker, double at, const std::string& reason) {
    for (auto it = open_.begin(); it != open_.end();) {
      if (it->first.first != worker) {
        ++it;
        continue;
      }
      add(worker, it->first.second, it->second, at, reason);
      it = open_.erase(it);
    }
  }

  void add(const std::string& worker, const std::string& connection, const Open& open, double end_s, std::string reason) {
    out_.intervals.push_back({connection, worker, open.begin_s, end_s, open.epoch, std::move(reason)});
  }

  OwnershipTimeline& out_;
  const sim::Trace* trace_ = nullptr;
  std::map<Key, Open> open_;
  std::set<std::string> connections_;
};

}  // namespace

std::optional<OwnershipTimeline> record_timeline(const SweepData& data, const SweepSummary& summary) {
  if (!summary.timeline) return std::nullopt;
  const SweepCell& cell = data.cells.at(summary.timeline->cell);
  if (!cell.valid()) return std::nullopt;
  OwnershipTimeline timeline;
  timeline.cell = cell.index;
  timeline.seed = summary.timeline->seed;
  timeline.reason = summary.timeline_reason;
  timeline.duration_s = static_cast<double>(data.spec.duration.ns()) / 1e9;
  TimelineBuilder builder{timeline};
  scenarios::RunConfig config;
  config.seed = timeline.seed;
  config.duration = data.spec.duration;
  config.parameters = cell.parameters;
  config.observe_trace = [&builder](sim::Trace& trace) { builder.attach(trace); };
  const scenarios::RunResult result = data.spec.find_scenario().run(config);
  builder.finish(timeline.duration_s);
  timeline.reproduce = scenarios::reproduce_command(result);
  for (size_t i = 0; i < result.violations.size() && i < kViolationsKept; ++i) {
    timeline.violations.push_back(result.violations[i].substr(0, kViolationChars));
  }
  return timeline;
}

}  // namespace leaseproof::report
