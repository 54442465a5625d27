// From simulation events to Perfetto tracks (the layout: docs/perfetto.md).
// Slices are written when they end, so memory holds only what is open; the
// Trace Event Format does not need events in time order.

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include "base/assert.hpp"
#include "models/dynamo_node.hpp"
#include "reports/perfetto.hpp"
#include <limits>
#include <optional>
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
  RateCounter* last_counter = nullptr;
  int64_t last_counter_pid = 0;
  std::string last_counter_name;
  Instant last;
  bool finished = false;

  void observe(const TraceEvent& e);
  void finish(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata);

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
      return count(tracks.network_main(), "messages/s", e.true_time, "sent");
    case EventKind::drop:
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

void PerfettoWriter::State::finish(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata) {
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
  Args other;
  for (const auto& [key, value] : metadata) other.add(key, value);
  for (const auto& [category, suppressed] : figures.suppressed_instants) {
    other.add(fmt::format("instants not written ({})", category), suppressed);
  }
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

void PerfettoWriter::finish(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata) {
  state_->finish(end, metadata);
}

const PerfettoFigures& PerfettoWriter::figures() const {
  state_->figures.events = state_->writer.events();
  state_->figures.tracks = state_->tracks.count();
  return state_->figures;
}

// ---- PerfettoFile ----------------------------------------------------------------

PerfettoFile::PerfettoFile(std::string path) : path_(std::move(path)), temporary_(path_ + ".tmp") {}

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

std::string PerfettoFile::commit(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata) {
  LP_ASSERT(!committed_);
  writer_->finish(end, metadata);
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
