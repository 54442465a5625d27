#include <fmt/format.h>

#include <algorithm>
#include "base/assert.hpp"
#include "reports/timeline.hpp"
#include <utility>

#include "reports/lease_notes.hpp"

namespace leaseproof::report {

using sim::EventKind;
using sim::TraceEvent;

namespace {

// Requests whose success says something on its own (a change of owner, the
// reconcile's sweep); the others' successes are routine and fold.
bool always_notable(std::string_view kind) { return kind == "acquire" || kind == "release" || kind == "reconcile"; }

// c9 before c10: shorter names first, then by text.
bool natural_less(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

std::string duration_text(int64_t ns) { return format_duration(Duration::from_ns(ns)); }

}  // namespace

std::string format_clock(Instant at) {
  const int64_t ms = at.ns() / 1'000'000;
  return fmt::format("{}:{:02}:{:02}.{:03}", ms / 3'600'000, ms / 60'000 % 60, ms / 1'000 % 60, ms % 1'000);
}

ConnectionTimeline::ConnectionTimeline(std::string connection) : connection_(std::move(connection)) {}

void ConnectionTimeline::attach(sim::Trace& trace) {
  trace_ = &trace;
  trace.add_observer([this](const TraceEvent& e) { observe(e); });
}

void ConnectionTimeline::observe(const TraceEvent& e) {
  switch (e.kind) {
    case EventKind::note:
      return on_note(e);
    case EventKind::timeout:
      return on_timeout(e);
    case EventKind::crash:
    case EventKind::exit:
    case EventKind::restart:
    case EventKind::pause:
    case EventKind::resume:
    case EventKind::sigterm:
    case EventKind::clock_step:
    case EventKind::fault:
      if (involved_.contains(e.node)) on_node_fault(e);
      return;
    case EventKind::partition_start:
    case EventKind::partition_end:
    case EventKind::clog_start:
    case EventKind::clog_end:
      if (involved_.contains(e.node) || involved_.contains(e.peer)) on_node_fault(e);
      return;
    default:
      return;
  }
}

void ConnectionTimeline::on_note(const TraceEvent& e) {
  const std::string_view label = e.label;
  if (label == "control.started" || label == "lease.open" || label == "upstream.open") {
    connections_.emplace(notes::word(e.detail, 0));
  }
  if (notes::is_dynamodb_operation(label)) return on_answer(e);
  // A hub's restart and a relay's cut reach every stream through it.
  if (label == "hub.epoch") {
    return add(e, fmt::format("hub started: epoch {} ({})", e.value, e.detail == "kept" ? "ring kept" : "new ring"));
  }
  if (label == "relay.idle_cut") {
    return add(e, fmt::format("relay cut idle socket {} after {}", e.detail, duration_text(e.value)));
  }
  if (notes::connection_of(e) != connection_) return;
  found_ = true;
  const std::vector<std::string_view> w = notes::words(e.detail);
  auto at = [&w](size_t i) { return i < w.size() ? w[i] : std::string_view{}; };
  if (label == "lease.request") return on_request(e);
  if (label == "hub.publish") return;  // one a message: the recorded positions say enough
  if (label == "control.started") return add(e, "control plane: desired state STARTED");
  if (label == "control.stopped") return add(e, "control plane: desired state STOPPED");
  if (label == "lease.open") return add(e, fmt::format("opens: acts as the owner, epoch {}", at(1)));
  if (label == "lease.close") return add(e, fmt::format("closes: epoch {}, {}", at(1), at(2)));
  if (label == "upstream.open" || label == "upstream.close") {
    return add(e, fmt::format("upstream session {} by {} (subscribers now {})",
                              label == "upstream.open" ? "opened" : "closed", at(1), e.value));
  }
  if (label == "hub.close") {
    const size_t space = e.detail.find(' ');  // after the connection: "<code> <reason words>"
    return add(e, fmt::format("hub closed the subscriber: {}",
                              space == std::string_view::npos ? e.detail : e.detail.substr(space + 1)));
  }
  if (label == "hub.drop") return add(e, "hub saw a lost frame: the stream is broken");
  if (label == "resume.recorded") {
    return add(e,
               fmt::format("recorded through hub epoch {} seq {} ({} message{})", at(1), at(2), e.value,
                           e.value == 1 ? "" : "s"),
               "recorded");
  }
  if (label == "resume.reset") {
    return add(e, fmt::format("typed reset {}: after {}/{}, resumes at {}/{} (the gap is lost on purpose)", at(1),
                              at(2), at(3), at(4), at(5)));
  }
  if (label == "resume.give_up") return add(e, fmt::format("gave up: the hub refused (close code {})", e.value));
  add(e, fmt::format("{} {}", label, e.detail));
}

void ConnectionTimeline::on_request(const TraceEvent& e) {
  auto parsed = notes::parse_lease_request(e);
  if (!parsed) return add(e, fmt::format("lease.request {}", e.detail));
  Request request;
  request.kind = parsed->second.kind;
  request.epoch = parsed->second.epoch;
  requests_[parsed->first] = entries_.size();
  add(e, {});
  entries_.back().request = std::move(request);
}

void ConnectionTimeline::on_answer(const TraceEvent& e) {
  const auto found = requests_.find(static_cast<uint64_t>(e.value));
  if (found == requests_.end()) return;
  Request& request = *entries_[found->second].request;
  request.operation = e.label;
  request.outcome = e.detail;
  request.answered_at = e.true_time;
  involved_.insert(e.node);
}

void ConnectionTimeline::on_timeout(const TraceEvent& e) {
  const auto found = requests_.find(e.id);
  if (found == requests_.end()) return;
  // Kept in requests_: DynamoDB may still apply it (a request slower than
  // the timeout), which the line then says.
  entries_[found->second].request->timed_out_at = e.true_time;
}

void ConnectionTimeline::on_node_fault(const TraceEvent& e) {
  const std::string peer = node_name(e.peer);
  switch (e.kind) {
    case EventKind::crash:
      return add(e, e.label == "sigkill" ? "killed (SIGKILL)" : "crashed");
    case EventKind::exit:
      return add(e, "exited");
    case EventKind::restart:
      return add(e, fmt::format("restarted (incarnation {})", e.id));
    case EventKind::pause:
      return add(e, fmt::format("paused (planned {})", duration_text(e.value)));
    case EventKind::resume:
      return add(e, fmt::format("resumed ({} events waited)", e.value));
    case EventKind::sigterm:
      return add(e, fmt::format("SIGTERM (stop timeout {})", duration_text(e.value)));
    case EventKind::clock_step:
      return add(e, fmt::format("wall clock stepped {}{}", e.value < 0 ? "" : "+", duration_text(e.value)));
    case EventKind::fault:
      return add(e, fmt::format("fault site fired: {}", e.label));
    case EventKind::partition_start:
      return add(e, fmt::format("partition to {} starts", peer));
    case EventKind::partition_end:
      return add(e, fmt::format("partition to {} ends", peer));
    case EventKind::clog_start:
      return add(e, fmt::format("clog to {} starts", peer));
    case EventKind::clog_end:
      return add(e, fmt::format("clog to {} ends", peer));
    default:
      LP_UNREACHABLE("not a fault: {}", sim::to_string(e.kind));
  }
}

void ConnectionTimeline::add(const TraceEvent& e, std::string text, std::string routine) {
  entries_.push_back(Entry{e.true_time, e.node, node_name(e.node), std::move(text), std::nullopt, std::move(routine)});
  if (e.node.valid()) involved_.insert(e.node);
}

std::string ConnectionTimeline::node_name(NodeId node) const {
  if (!node.valid()) return "-";
  const std::string_view name = trace_ != nullptr ? trace_->node_name(node) : std::string_view{};
  return name.empty() ? fmt::format("node {}", node) : std::string{name};
}

// ---- rendering -------------------------------------------------------------------

namespace {

std::string request_text(const std::string& kind, const std::string& epoch, const std::string& operation,
                         const std::string& outcome, std::optional<Duration> answered_after,
                         std::optional<Duration> timed_out_after) {
  // The epoch a request is fenced by; 0 is none (an acquire, a read).
  std::string text = epoch.empty() || epoch == "0" ? kind : fmt::format("{} epoch {}", kind, epoch);
  const std::string answer = answered_after ? fmt::format("DynamoDB {} {} after {}", operation, outcome,
                                                          notes::format_measured(*answered_after))
                                            : std::string{};
  if (!timed_out_after) {
    return text + ": " + (answered_after ? answer : std::string{"no answer by the end of the run"});
  }
  text += fmt::format(": timed out after {}", notes::format_measured(*timed_out_after));
  if (!answered_after) return text + "; DynamoDB never applied it";
  // The ambiguous outcome: the caller could not tell which of these happened.
  if (*answered_after <= *timed_out_after) return text + "; the reply was lost, " + answer;
  return text + "; too late, " + answer;
}

}  // namespace

std::string ConnectionTimeline::routine_of(const Entry& entry) {
  if (!entry.request) return entry.routine;
  const Request& r = *entry.request;
  if (r.outcome != "ok" || r.timed_out_at || always_notable(r.kind)) return {};
  return fmt::format("{} ok", r.kind);
}

std::string ConnectionTimeline::render(const Entry& entry) const {
  if (!entry.request) return entry.text;
  const Request& r = *entry.request;
  auto since = [&entry](const std::optional<Instant>& at) -> std::optional<Duration> {
    if (!at) return std::nullopt;
    return *at - entry.at;
  };
  return request_text(r.kind, r.epoch, r.operation, r.outcome, since(r.answered_at), since(r.timed_out_at));
}

std::string ConnectionTimeline::render_routine(size_t begin, size_t end) const {
  // Counts by node and kind, each in order of first appearance.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, uint64_t>>>> by_node;
  for (size_t i = begin; i < end; ++i) {
    const std::string routine = routine_of(entries_[i]);
    const std::string& node = entries_[i].node_name;
    auto owner = std::find_if(by_node.begin(), by_node.end(), [&node](const auto& n) { return n.first == node; });
    if (owner == by_node.end()) owner = by_node.insert(by_node.end(), {node, {}});
    auto kind = std::find_if(owner->second.begin(), owner->second.end(),
                             [&routine](const auto& c) { return c.first == routine; });
    if (kind == owner->second.end()) {
      owner->second.emplace_back(routine, 1);
    } else {
      ++kind->second;
    }
  }
  const Entry& last = entries_[end - 1];
  std::string text = fmt::format("{} routine successes until {}:", end - begin, format_clock(last.at));
  for (size_t n = 0; n < by_node.size(); ++n) {
    std::string kinds;
    for (const auto& [routine, count] : by_node[n].second) {
      kinds += fmt::format("{}{}x {}", kinds.empty() ? "" : ", ", count, routine);
    }
    // "worker-1 4x renew ok; worker-0 2x read ok", or without names for one node.
    text += fmt::format("{} {}{}", n == 0 ? "" : ";", by_node.size() > 1 ? by_node[n].first + " " : "", kinds);
  }
  if (!last.text.empty()) text += fmt::format("; last: {}", last.text);
  return text;
}

std::vector<std::string> ConnectionTimeline::lines() const {
  size_t width = std::string_view{"(several)"}.size();
  for (const Entry& entry : entries_) width = std::max(width, entry.node_name.size());
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < entries_.size();) {
    // A run: consecutive routine successes, of one node or several (an
    // owner's renewals interleave with other workers' reads).
    const Entry& first = entries_[begin];
    size_t end = begin + 1;
    bool one_node = true;
    if (!routine_of(first).empty()) {
      while (end < entries_.size() && !routine_of(entries_[end]).empty()) {
        one_node = one_node && entries_[end].node == first.node;
        ++end;
      }
    }
    const std::string text = end - begin == 1 ? render(first) : render_routine(begin, end);
    const std::string_view node = one_node ? std::string_view{first.node_name} : std::string_view{"(several)"};
    lines.push_back(fmt::format("{:>12}  {:<{}}  {}", format_clock(first.at), node, width, text));
    begin = end;
  }
  return lines;
}

std::string ConnectionTimeline::unknown_connection_error(size_t listed_max) const {
  std::vector<std::string> known(connections_.begin(), connections_.end());
  std::sort(known.begin(), known.end(), natural_less);
  if (known.empty()) {
    return fmt::format("--connection: no event of this run names connection '{}', and the run has no connections",
                       connection_);
  }
  std::string listed;
  for (size_t i = 0; i < known.size() && i < listed_max; ++i) listed += (i == 0 ? "" : ", ") + known[i];
  if (known.size() > listed_max) listed += ", ...";
  return fmt::format("--connection: no event of this run names connection '{}'; its {} connections are {}", connection_,
                     known.size(), listed);
}

}  // namespace leaseproof::report
