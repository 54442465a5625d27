// From simulation events to Perfetto tracks (the layout: docs/perfetto.md).
// Slices are written when they end, so memory holds only what is open; the
// Trace Event Format does not need events in time order.

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include "base/assert.hpp"
#include "models/dynamo/node.hpp"
#include "reports/perfetto.hpp"
#include "base/temporary_file.hpp"
#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <set>
#include <tuple>
#include <ostream>
#include <string_view>

#include "reports/lease_notes.hpp"
#include "reports/perfetto_tracks.hpp"
#include "reports/trace_event_writer.hpp"

namespace leaseproof::report {

using sim::EventKind;
using sim::TraceEvent;

namespace {

// Longer than any request's way to its timeout, a caller's pause included.
constexpr Duration kRequestHorizon = Duration::from_min(10);
constexpr Duration kCounterBucket = Duration::from_s(1);

struct OpenSlice {
  Track track;
  std::string name;
  Instant start;
  Args args;
};

// What a node's "state" track shows: nothing while it runs, else one slice
// per stretch of being down, paused or stopping (never overlapping, so the
// track nests trivially).
struct NodeLife {
  bool down = false;
  bool paused = false;
  bool stopping = false;
  std::optional<OpenSlice> slice;

  std::string_view label() const {
    if (down) return "down";
    if (paused) return stopping ? "paused while stopping" : "paused";
    if (stopping) return "stopping";
    return {};
  }
};

// A partition or clog of one directed link; nested starts merge into one slice.
struct LinkCut {
  int depth = 0;
  std::optional<OpenSlice> slice;
};

// Events per second of true time, one series per argument: a sample at the
// start of every second with activity, and a zero sample after a quiet
// stretch begins (a counter holds its value until the next sample).
class RateCounter {
 public:
  RateCounter(Track track, std::string name) : track_(track), name_(std::move(name)) {}

  void add(TraceEventWriter& writer, PerfettoFigures& figures, Instant at, std::string_view series, uint64_t count) {
    const int64_t second = at.ns() / kCounterBucket.ns();
    if (second != second_) flush(writer, figures, second, std::numeric_limits<int64_t>::max());
    auto found = counts_.find(series);
    if (found == counts_.end()) found = counts_.emplace(std::string{series}, 0).first;
    found->second += count;
  }

  void finish(TraceEventWriter& writer, PerfettoFigures& figures, Instant end) {
    flush(writer, figures, std::numeric_limits<int64_t>::max(), end.ns() / kCounterBucket.ns());
  }

 private:
  void flush(TraceEventWriter& writer, PerfettoFigures& figures, int64_t next_second, int64_t last_second) {
    if (second_ >= 0) {
      sample(writer, figures, second_);
      for (auto& [series, count] : counts_) count = 0;
      if (next_second > second_ + 1 && second_ + 1 <= last_second) sample(writer, figures, second_ + 1);
    }
    second_ = next_second;
  }

  void sample(TraceEventWriter& writer, PerfettoFigures& figures, int64_t second) {
    Args series;
    for (const auto& [name, count] : counts_) series.add(name, count);
    writer.counter(track_, name_, Instant::zero() + kCounterBucket * second, series);
    ++figures.counter_samples;
  }

  Track track_;
  std::string name_;
  int64_t second_ = -1;
  std::map<std::string, uint64_t, std::less<>> counts_;  // every series seen stays, at 0 when quiet
};

bool always_shown(std::string_view request_kind) {
  return request_kind == "acquire" || request_kind == "release" || request_kind == "reconcile";
}

std::string describe(const notes::LeaseRequest& request) {
  return fmt::format("{} {} fenced by epoch {}", request.kind, request.connection, request.epoch);
}

constexpr std::string_view kReplyType = "dynamo.reply";  // models/dynamo/node.cpp

// A DynamoDB request on its way: sent, then answered by DynamoDB (whose
// reply is the next "dynamo.reply" that node sends), then its reply arrives.
struct RequestTrip {
  uint64_t request = 0;  // message ids
  uint64_t reply = 0;
  NodeId caller;
  Instant sent_at;
  Instant answered_at;
  Instant arrived_at;
  std::string operation;
  std::string outcome;
  std::string kind;        // the lease request's (renew, acquire...), or empty
  std::string connection;  // the lease request's, or empty
};

// A flow for a request whose answer the trace shows anyway (an acquire, a
// release, a reconcile, any error); the others only for the connections a
// violation names.
bool notable(const RequestTrip& trip) {
  const bool refused = trip.outcome != "ok" && trip.outcome != models::kIdempotentReplay;
  return refused || always_shown(trip.kind);
}

// The time a violation happened: the first "@<duration>" of its text (the
// checkers write true times so); nullopt when it names none.
std::optional<Instant> violation_time(std::string_view text) {
  const size_t at = text.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  size_t end = at + 1;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  const std::optional<Duration> since_zero = parse_duration(text.substr(at + 1, end - at - 1));
  if (!since_zero) return std::nullopt;
  return Instant::zero() + *since_zero;
}

// The connections a violation's text names ("connection c17").
std::set<std::string, std::less<>> violation_connections(std::string_view text) {
  std::set<std::string, std::less<>> out;
  constexpr std::string_view kWord = "connection ";
  for (size_t at = text.find(kWord); at != std::string_view::npos; at = text.find(kWord, at + 1)) {
    const std::string_view name = notes::word(text.substr(at + kWord.size()), 0);
    if (name.size() > 1 && name[0] == 'c') out.emplace(name.substr(0, name.find_first_of(",:;)")));
  }
  return out;
}

}  // namespace

struct PerfettoWriter::State {
  explicit State(std::ostream& out) : writer(out), tracks(writer) {}

  TraceEventWriter writer;
  Tracks tracks;
  PerfettoFigures figures;
  notes::RequestBook requests{kRequestHorizon};
  std::map<NodeId, std::map<std::string, OpenSlice, std::less<>>> leases;  // node -> connection -> slice
  std::map<NodeId, NodeLife> lives;
  std::map<std::string, LinkCut, std::less<>> links;                // by "partition a -> b"
  std::map<std::pair<int64_t, std::string>, RateCounter> counters;  // by pid and name
  std::map<std::string, uint64_t, std::less<>> instants_by_category;
  // Request -> reply flows: DynamoDB requests sent, by message id; the
  // request each DynamoDB node answered last (its reply follows at once);
  // replies on their way, by message id; and the trips whose reply arrived.
  std::map<uint64_t, std::pair<NodeId, Instant>> dynamodb_sent;
  std::map<NodeId, RequestTrip> answering;
  std::map<uint64_t, RequestTrip> replies;
  std::vector<RequestTrip> trips;
  uint64_t trips_not_kept = 0;
  RateCounter* last_counter = nullptr;
  int64_t last_counter_pid = 0;
  std::string last_counter_name;
  Instant last;
  bool finished = false;

  void observe(const TraceEvent& e);
  void finish(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata,
              const std::vector<std::string>& violations);

 private:
  void on_world_event(const TraceEvent& e);
  void on_down(const TraceEvent& e);
  void on_up(const TraceEvent& e);
  void on_life_change(const TraceEvent& e);
  void on_link(const TraceEvent& e);
  void on_drop(const TraceEvent& e);
  void on_timeout(const TraceEvent& e);
  void on_note(const TraceEvent& e);
  void on_lease_open(const TraceEvent& e);
  void on_lease_close(const TraceEvent& e);
  void on_dynamodb(const TraceEvent& e);
  void on_session(const TraceEvent& e);
  void on_send(const TraceEvent& e);
  void on_deliver(const TraceEvent& e);
  void forget_old_requests(Instant now);
  void write_violations(Instant end, const std::vector<std::string>& violations);
  void write_flows(const std::vector<std::string>& violations);

  void instant(std::string_view category, Track track, std::string_view name, Instant at, const Args& args);
  void close(OpenSlice& slice, std::string_view category, Instant end, std::string_view closed_by);
  void update_life(NodeId node, Instant at);
  void count(Track track, std::string_view name, Instant at, std::string_view series, uint64_t amount = 1);
  Track request_track(const notes::LeaseRequest& request);
};

// ---- dispatch ----------------------------------------------------------------

void PerfettoWriter::State::observe(const TraceEvent& e) {
  LP_ASSERT(!finished);
  last = e.true_time;
  requests.forget_older_than_horizon(e.true_time);
  if (!e.node.valid()) return on_world_event(e);
  switch (e.kind) {
    case EventKind::send:
      return on_send(e);
    case EventKind::drop:
      replies.erase(e.id);  // a lost reply draws no flow
      return on_drop(e);
    case EventKind::crash:
    case EventKind::exit:
      return on_down(e);
    case EventKind::start:
    case EventKind::restart:
      return on_up(e);
    case EventKind::pause:
    case EventKind::resume:
    case EventKind::sigterm:
      return on_life_change(e);
    case EventKind::clock_step:
      return instant("fault", tracks.node_main(e.node), fmt::format("clock step {}", Duration::from_ns(e.value)),
                     e.true_time, Args{}.add("jump_ns", e.value));
    case EventKind::fault:
      // Its own category: a chatty site must not use up the bound of crashes and pauses.
      return instant("fault site", tracks.node_main(e.node), fmt::format("fault {}", e.label), e.true_time,
                     Args{}.add("site", e.label));
    case EventKind::timeout:
      return on_timeout(e);
    case EventKind::partition_start:
    case EventKind::partition_end:
    case EventKind::clog_start:
    case EventKind::clog_end:
      return on_link(e);
    case EventKind::note:
      return on_note(e);
    case EventKind::deliver:
      return on_deliver(e);
    case EventKind::timer:
    case EventKind::queued:
      return;  // too many to draw; the rates show the load
  }
}

void PerfettoWriter::State::on_world_event(const TraceEvent& e) {
  const std::string_view name = e.kind == EventKind::note ? e.label : sim::to_string(e.kind);
  Args args;
  if (!e.detail.empty()) args.add("detail", e.detail);
  if (e.value != 0) args.add("value", e.value);
  instant(name, tracks.network_main(), name, e.true_time, args);
}

// ---- processes: lifecycle and faults --------------------------------------------

void PerfettoWriter::State::on_down(const TraceEvent& e) {
  const std::string_view reason = e.kind == EventKind::exit ? std::string_view{"exit"} : e.label;
  // A process that is gone no longer acts as the owner of anything.
  if (auto found = leases.find(e.node); found != leases.end()) {
    for (auto& [connection, slice] : found->second) close(slice, "lease", e.true_time, reason);
    leases.erase(found);
  }
  NodeLife& life = lives[e.node];
  life.down = true;
  life.paused = false;
  life.stopping = false;
  update_life(e.node, e.true_time);
  instant(e.kind == EventKind::exit ? "lifecycle" : "fault", tracks.node_main(e.node), reason, e.true_time, Args{});
}

void PerfettoWriter::State::on_up(const TraceEvent& e) {
  NodeLife& life = lives[e.node];
  life.down = false;
  life.paused = false;
  life.stopping = false;
  update_life(e.node, e.true_time);
  instant("lifecycle", tracks.node_main(e.node), sim::to_string(e.kind), e.true_time, Args{}.add("incarnation", e.id));
}

void PerfettoWriter::State::on_life_change(const TraceEvent& e) {
  NodeLife& life = lives[e.node];
  Args args;
  if (e.kind == EventKind::pause) {
    life.paused = true;
    args.add("planned", format_duration(Duration::from_ns(e.value)));
  } else if (e.kind == EventKind::resume) {
    life.paused = false;
    args.add("events that waited", e.value);
  } else {
    life.stopping = true;
    args.add("stop timeout", format_duration(Duration::from_ns(e.value)));
  }
  update_life(e.node, e.true_time);
  instant("fault", tracks.node_main(e.node), sim::to_string(e.kind), e.true_time, args);
}

void PerfettoWriter::State::update_life(NodeId node, Instant at) {
  NodeLife& life = lives[node];
  const std::string_view label = life.label();
  if (life.slice && life.slice->name == label) return;
  if (life.slice) {
    close(*life.slice, "lifecycle", at, label.empty() ? std::string_view{"running"} : label);
    life.slice.reset();
  }
  if (!label.empty()) life.slice = OpenSlice{tracks.node_named(node, "state"), std::string{label}, at, Args{}};
}

// ---- network -------------------------------------------------------------------

void PerfettoWriter::State::on_link(const TraceEvent& e) {
  const bool partition = e.kind == EventKind::partition_start || e.kind == EventKind::partition_end;
  const bool starts = e.kind == EventKind::partition_start || e.kind == EventKind::clog_start;
  const std::string_view what = partition ? "partition" : "clog";
  const std::string peer = tracks.node_name(e.peer);
  const std::string key = fmt::format("{} {} -> {}", what, tracks.node_name(e.node), peer);
  LinkCut& link = links[key];
  if (starts && link.depth++ == 0) {
    link.slice = OpenSlice{tracks.network_named(key), std::string{what}, e.true_time, Args{}};
  } else if (!starts && link.depth > 0 && --link.depth == 0) {
    close(*link.slice, "network", e.true_time, "healed");
    link.slice.reset();
  }
  instant("fault", tracks.node_main(e.node), fmt::format("{} {}", what, starts ? "start" : "end"), e.true_time,
          Args{}.add("to", peer));
}

void PerfettoWriter::State::on_drop(const TraceEvent& e) {
  count(tracks.network_main(), "drops/s", e.true_time, e.label);
  Args args;
  args.add("at", tracks.node_name(e.node)).add("peer", tracks.node_name(e.peer)).add("message", e.id);
  if (const std::optional<notes::LeaseRequest> request = requests.find(e.id)) {
    args.add("request", describe(*request));
  }
  instant("drop", tracks.network_named("drops"), fmt::format("drop {}", e.label), e.true_time, args);
}

void PerfettoWriter::State::on_timeout(const TraceEvent& e) {
  const std::optional<notes::LeaseRequest> request = requests.timed_out(e.id);
  if (!request) {
    return instant("timeout", tracks.node_main(e.node), "timeout", e.true_time, Args{}.add("request", e.id));
  }
  // The ambiguous outcome: say what DynamoDB did, which the worker cannot know.
  const std::string dynamodb =
      request->outcome.empty()
          ? std::string{"never applied (request lost, or still on its way)"}
          : fmt::format("{} {} (the reply was lost or late)", request->operation, request->outcome);
  instant("lease request", request_track(*request), fmt::format("{} timed out", request->kind), e.true_time,
          Args{}.add("fenced by epoch", request->epoch).add("request", e.id).add("dynamodb", dynamodb));
}

// ---- notes ---------------------------------------------------------------------

void PerfettoWriter::State::on_note(const TraceEvent& e) {
  const std::string_view label = e.label;
  if (label == "lease.open") return on_lease_open(e);
  if (label == "lease.close") return on_lease_close(e);
  if (label == "lease.request") {
    if (const auto request = notes::parse_lease_request(e)) requests.add(request->first, request->second);
    return;
  }
  if (notes::is_dynamodb_operation(label)) return on_dynamodb(e);
  if (label == "upstream.open" || label == "upstream.close") return on_session(e);
  if (label == "hub.publish") return count(tracks.node_main(e.node), "published/s", e.true_time, "messages");
  if (label == "resume.recorded") {
    return count(tracks.node_main(e.node), "recorded/s", e.true_time, "messages", static_cast<uint64_t>(e.value));
  }
  Args args;
  if (!e.detail.empty()) args.add("detail", e.detail);
  if (e.value != 0) args.add("value", e.value);
  if (label == "resume.reset" || label == "resume.give_up") {
    const std::string_view connection = notes::word(e.detail, 0);
    return instant(label, tracks.node_connection(e.node, connection), label, e.true_time, args);
  }
  if (label == "mark")
    return instant(fmt::format("mark {}", e.detail), tracks.node_main(e.node), e.detail, e.true_time, args);
  instant(label, tracks.node_main(e.node), label, e.true_time, args);
}

void PerfettoWriter::State::on_lease_open(const TraceEvent& e) {
  const std::string connection{notes::word(e.detail, 0)};
  auto& open = leases[e.node];
  // Opened again without a close in between: end the first slice here, so
  // the track stays a sequence and the slice count matches the opens.
  if (auto found = open.find(connection); found != open.end()) {
    close(found->second, "lease", e.true_time, "opened again");
    open.erase(found);
  }
  OpenSlice slice{tracks.node_connection(e.node, connection), fmt::format("{} epoch {}", connection, e.value),
                  e.true_time, Args{}};
  slice.args.add("connection", connection).add("epoch", e.value);
  open.emplace(connection, std::move(slice));
}

void PerfettoWriter::State::on_lease_close(const TraceEvent& e) {
  const std::string_view connection = notes::word(e.detail, 0);
  auto& open = leases[e.node];
  const auto found = open.find(connection);
  if (found == open.end()) {
    return instant("lease.close", tracks.node_connection(e.node, connection), "lease.close without an open",
                   e.true_time, Args{}.add("detail", e.detail));
  }
  close(found->second, "lease", e.true_time, notes::word(e.detail, 2));
  open.erase(found);
}

void PerfettoWriter::State::on_dynamodb(const TraceEvent& e) {
  const Track main = tracks.node_main(e.node);
  const std::string_view outcome = e.detail;
  count(main, "requests/s", e.true_time, e.label);
  if (outcome != "ok" && outcome != models::kIdempotentReplay) {  // a replay is a success
    count(main, "errors/s", e.true_time, outcome);
    instant("dynamodb error", tracks.node_named(e.node, "errors"), fmt::format("{} {}", e.label, outcome), e.true_time,
            Args{}.add("request", e.value));
  }
  const std::optional<notes::LeaseRequest> request =
      requests.answered(static_cast<uint64_t>(e.value), e.label, outcome);
  const auto sent = dynamodb_sent.find(static_cast<uint64_t>(e.value));
  if (sent != dynamodb_sent.end()) {
    answering[e.node] = RequestTrip{sent->first, 0, sent->second.first, sent->second.second, e.true_time, e.true_time,
                                    std::string{e.label}, std::string{outcome},
                                    request ? std::string{request->kind} : std::string{},
                                    request && request->connection != "-" ? std::string{request->connection} : std::string{}};
    dynamodb_sent.erase(sent);
  }
  if (!request || (outcome == "ok" && !always_shown(request->kind))) return;
  // On the requesting worker's track, at the instant DynamoDB decided.
  instant("lease request", request_track(*request), fmt::format("{} {}", request->kind, outcome), e.true_time,
          Args{}
              .add("fenced by epoch", request->epoch)
              .add("operation", e.label)
              .add("request", e.value)
              .add("answered after", notes::format_measured(e.true_time - request->sent_at)));
}

void PerfettoWriter::State::on_session(const TraceEvent& e) {
  const std::string_view connection = notes::word(e.detail, 0);
  const std::string_view who = notes::word(e.detail, 1);
  const bool opens = e.label == "upstream.open";
  instant(e.label, tracks.node_named(e.node, "sessions"),
          fmt::format("{} {} by {}", connection, opens ? "opened" : "closed", who), e.true_time,
          Args{}.add("connection", connection).add("by", who).add("subscribers after", e.value));
}

// ---- request -> reply flows ----------------------------------------------------

void PerfettoWriter::State::on_send(const TraceEvent& e) {
  count(tracks.network_main(), "messages/s", e.true_time, "sent");
  if (notes::is_dynamodb_operation(e.label)) {
    forget_old_requests(e.true_time);
    dynamodb_sent.emplace(e.id, std::pair{e.node, e.true_time});
    return;
  }
  if (e.label != kReplyType) return;
  const auto answer = answering.find(e.node);
  if (answer == answering.end() || answer->second.caller != e.peer) return;
  answer->second.reply = e.id;
  replies.emplace(e.id, std::move(answer->second));
  answering.erase(answer);
}

void PerfettoWriter::State::on_deliver(const TraceEvent& e) {
  const auto found = replies.find(e.id);
  if (found == replies.end()) return;
  RequestTrip trip = std::move(found->second);
  replies.erase(found);
  trip.arrived_at = e.true_time;
  // Routine answers of requests that name no connection can never be chosen.
  if (trip.connection.empty() && !notable(trip)) return;
  if (trips.size() >= kTripsKeptMax) {
    ++trips_not_kept;
    return;
  }
  trips.push_back(std::move(trip));
}

// Requests never answered, and replies never delivered, are dropped after
// kRequestHorizon: the maps stay bounded by the load of that window.
void PerfettoWriter::State::forget_old_requests(Instant now) {
  if (now - Instant::zero() < kRequestHorizon) return;
  const Instant horizon = now - kRequestHorizon;
  while (!dynamodb_sent.empty() && dynamodb_sent.begin()->second.second < horizon) dynamodb_sent.erase(dynamodb_sent.begin());
  while (!replies.empty() && replies.begin()->second.sent_at < horizon) replies.erase(replies.begin());
}

// One instant per violation on the "violations" track, at the time its text
// gives (else at the end of the run, saying so), the text in its arguments.
void PerfettoWriter::State::write_violations(Instant end, const std::vector<std::string>& violations) {
  std::vector<std::pair<Instant, const std::string*>> placed;
  for (const std::string& text : violations) placed.emplace_back(violation_time(text).value_or(end), &text);
  std::stable_sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [at, text] : placed) {
    Args args;
    args.add("violation", *text);
    if (!violation_time(*text)) args.add("time", "not in the text: placed at the end of the run");
    std::string connections;
    for (const std::string& c : violation_connections(*text)) connections += (connections.empty() ? "" : " ") + c;
    if (!connections.empty()) args.add("connections", connections);
    const std::string kind = text->substr(0, text->find(':'));
    writer.instant(tracks.checkers_named("violations"), "violation", kind, std::min(at, end), args);
    ++figures.violations;
  }
}

// The chosen trips, earliest first, at most kFlowsMax: a slice of no
// duration where the caller sent the request and one where the reply
// reached it, joined by a flow (id: the request's message id). Written per
// track in time order, as every track's slices are.
void PerfettoWriter::State::write_flows(const std::vector<std::string>& violations) {
  std::set<std::string, std::less<>> involved;
  for (const std::string& text : violations) involved.merge(violation_connections(text));
  struct Point {
    Instant at;
    uint64_t request;
    bool out;
    const RequestTrip* trip;
  };
  std::vector<Point> points;
  for (const RequestTrip& trip : trips) {  // in order of arrival
    if (!notable(trip) && !involved.contains(trip.connection)) continue;
    if (figures.flows >= kFlowsMax) {
      ++figures.flows_not_written;
      continue;
    }
    ++figures.flows;
    points.push_back({trip.sent_at, trip.request, true, &trip});
    points.push_back({trip.arrived_at, trip.request, false, &trip});
  }
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return std::tuple{a.at, a.request, !a.out} < std::tuple{b.at, b.request, !b.out};
  });
  for (const Point& p : points) {
    const RequestTrip& t = *p.trip;
    const std::string what = t.kind.empty()         ? t.operation
                             : t.connection.empty() ? t.kind
                                                    : fmt::format("{} {}", t.kind, t.connection);
    Args args;
    args.add("request", t.request).add("operation", t.operation);
    if (!p.out) {
      args.add("reply", t.reply).add("dynamodb", t.outcome);
      args.add("answered after", notes::format_measured(t.answered_at - t.sent_at));
      args.add("round trip", notes::format_measured(t.arrived_at - t.sent_at));
    }
    writer.flow_point(tracks.node_named(t.caller, "dynamodb requests"), "request",
                      p.out ? fmt::format("{} sent", what) : fmt::format("{} reply: {}", what, t.outcome), p.at, args,
                      t.request, p.out);
  }
}

// ---- emitting ------------------------------------------------------------------

void PerfettoWriter::State::instant(std::string_view category, Track track, std::string_view name, Instant at,
                                    const Args& args) {
  auto found = instants_by_category.find(category);
  if (found == instants_by_category.end()) found = instants_by_category.emplace(std::string{category}, 0).first;
  if (found->second >= kInstantsPerCategoryMax) {
    ++figures.suppressed_instants[std::string{category}];
    return;
  }
  ++found->second;
  writer.instant(track, category, name, at, args);
  ++figures.instants;
}

void PerfettoWriter::State::close(OpenSlice& slice, std::string_view category, Instant end,
                                  std::string_view closed_by) {
  slice.args.add("closed by", closed_by);
  writer.complete(slice.track, category, slice.name, slice.start, end, slice.args);
  ++figures.slices;
  if (category == "lease") ++figures.lease_slices;
}

void PerfettoWriter::State::count(Track track, std::string_view name, Instant at, std::string_view series,
                                  uint64_t amount) {
  // The last counter used is asked for again most of the time (a send after a send).
  if (last_counter == nullptr || last_counter_pid != track.pid || last_counter_name != name) {
    auto key = std::pair{track.pid, std::string{name}};
    auto found = counters.find(key);
    if (found == counters.end()) found = counters.emplace(key, RateCounter{track, std::string{name}}).first;
    last_counter = &found->second;  // std::map nodes stay where they are
    last_counter_pid = track.pid;
    last_counter_name = name;
  }
  last_counter->add(writer, figures, at, series, amount);
}

Track PerfettoWriter::State::request_track(const notes::LeaseRequest& request) {
  if (request.connection == "-") return tracks.node_main(request.worker);
  return tracks.node_connection(request.worker, request.connection);
}

void PerfettoWriter::State::finish(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata,
                                   const std::vector<std::string>& violations) {
  LP_ASSERT(!finished);
  LP_ASSERT_GE(end, last);
  tracks.set_trace(nullptr);  // the run, and maybe its trace, is over: names are all known
  for (auto& [node, open] : leases) {
    for (auto& [connection, slice] : open) close(slice, "lease", end, "end of run");
  }
  leases.clear();
  for (auto& [node, life] : lives) {
    if (life.slice) close(*life.slice, "lifecycle", end, "end of run");
  }
  for (auto& [key, link] : links) {
    if (link.slice) close(*link.slice, "network", end, "end of run");
  }
  for (auto& [key, counter] : counters) counter.finish(writer, figures, end);
  write_violations(end, violations);
  write_flows(violations);
  Args other;
  for (const auto& [key, value] : metadata) other.add(key, value);
  for (const auto& [category, suppressed] : figures.suppressed_instants) {
    other.add(fmt::format("instants not written ({})", category), suppressed);
  }
  other.add("flows", figures.flows);
  if (figures.flows_not_written > 0) other.add("flows not written (over the bound)", figures.flows_not_written);
  if (trips_not_kept > 0) other.add("requests not considered for flows (over the bound)", trips_not_kept);
  figures.tracks = tracks.count();
  writer.close(other);
  figures.events = writer.events();
  finished = true;
}

// ---- PerfettoWriter --------------------------------------------------------------

PerfettoWriter::PerfettoWriter(std::ostream& out) : state_(std::make_unique<State>(out)) {}
PerfettoWriter::~PerfettoWriter() = default;

void PerfettoWriter::attach(sim::Trace& trace) {
  state_->tracks.set_trace(&trace);
  trace.add_observer([this](const TraceEvent& e) { observe(e); });
}

void PerfettoWriter::observe(const TraceEvent& event) { state_->observe(event); }

void PerfettoWriter::finish(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata,
                            const std::vector<std::string>& violations) {
  state_->finish(end, metadata, violations);
}

const PerfettoFigures& PerfettoWriter::figures() const {
  state_->figures.events = state_->writer.events();
  state_->figures.tracks = state_->tracks.count();
  return state_->figures;
}

// ---- PerfettoFile ----------------------------------------------------------------

PerfettoFile::PerfettoFile(std::string path) : path_(std::move(path)), temporary_(unique_temporary_path(path_)) {}

std::unique_ptr<PerfettoFile> PerfettoFile::create(const std::string& path, std::string& error) {
  std::unique_ptr<PerfettoFile> file{new PerfettoFile{path}};
  file->out_.open(file->temporary_, std::ios::out | std::ios::trunc);
  if (!file->out_) {
    error = fmt::format("cannot write '{}' (creating '{}' failed)", path, file->temporary_);
    return nullptr;
  }
  file->writer_ = std::make_unique<PerfettoWriter>(file->out_);
  return file;
}

PerfettoFile::~PerfettoFile() {
  if (committed_) return;
  out_.close();
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

std::string PerfettoFile::commit(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata,
                                 const std::vector<std::string>& violations) {
  LP_ASSERT(!committed_);
  writer_->finish(end, metadata, violations);
  out_.close();
  std::error_code error;
  if (!out_) {
    std::filesystem::remove(temporary_, error);
    return fmt::format("writing '{}' failed", temporary_);
  }
  std::filesystem::rename(temporary_, path_, error);
  if (error) {
    const std::string message = fmt::format("renaming '{}' to '{}' failed: {}", temporary_, path_, error.message());
    std::filesystem::remove(temporary_, error);
    return message;
  }
  committed_ = true;
  return {};
}

}  // namespace leaseproof::report
