// The Perfetto trace of a run: valid Trace Event Format (the fields the
// format requires, with their types; balanced B/E; every track named; slices
// in order per track), one ownership slice per lease.open, slices ended by a
// crash, and the run and its hash unchanged by the writer.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include "reports/perfetto.hpp"
#include "scenarios/scenario.hpp"
#include "sim/trace.hpp"
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "report_test_support.hpp"

namespace leaseproof::report {
namespace {

using nlohmann::json;
using test::SeenEvent;

// ---- a checker of the Trace Event Format ------------------------------------------

using TrackKey = std::pair<int64_t, int64_t>;

std::string where(size_t index, const json& event) { return fmt::format("event {} {}", index, event.dump()); }

// Required fields and their types, per event.
void check_fields(size_t i, const json& e, std::vector<std::string>& errors) {
  if (!e.is_object()) return errors.push_back(where(i, e) + ": not an object");
  if (!e.contains("name") || !e["name"].is_string()) errors.push_back(where(i, e) + ": name is not a string");
  if (!e.contains("ph") || !e["ph"].is_string()) errors.push_back(where(i, e) + ": ph is not a string");
  if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0) {
    errors.push_back(where(i, e) + ": ts is not a non-negative number");
  }
  for (const char* id : {"pid", "tid"}) {
    if (!e.contains(id) || !e[id].is_number_integer() || e[id].get<int64_t>() <= 0 ||
        e[id].get<int64_t>() >= (int64_t{1} << 31)) {
      errors.push_back(where(i, e) + fmt::format(": {} is not an integer in (0, 2^31)", id));
    }
  }
}

// What each phase needs beyond the common fields.
void check_phase(size_t i, const json& e, std::vector<std::string>& errors) {
  const std::string ph = e.value("ph", "");
  static const std::set<std::string> kMetadata{"process_name", "thread_name", "process_sort_index",
                                               "thread_sort_index"};
  if (ph == "X") {
    if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
      errors.push_back(where(i, e) + ": X without a non-negative dur");
    }
  } else if (ph == "i") {
    const std::string scope = e.value("s", "");
    if (scope != "t" && scope != "p" && scope != "g") errors.push_back(where(i, e) + ": instant scope not t, p or g");
  } else if (ph == "C") {
    if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
      errors.push_back(where(i, e) + ": counter without series");
    } else {
      for (const auto& [series, value] : e["args"].items()) {
        if (!value.is_number()) errors.push_back(where(i, e) + ": counter series " + series + " not a number");
      }
    }
  } else if (ph == "M") {
    if (!kMetadata.contains(e.value("name", ""))) errors.push_back(where(i, e) + ": unknown metadata");
    const std::string name = e.value("name", "");
    if ((name == "process_name" || name == "thread_name") &&
        (!e.contains("args") || !e["args"].contains("name") || !e["args"]["name"].is_string())) {
      errors.push_back(where(i, e) + ": metadata without args.name");
    }
  } else if (ph != "B" && ph != "E") {
    errors.push_back(where(i, e) + ": phase " + ph + " is not one this writer should use");
  }
}

// Every problem found; empty when the document is a valid trace.
std::vector<std::string> format_errors(const json& document) {
  std::vector<std::string> errors;
  if (!document.is_object() || !document.contains("traceEvents") || !document["traceEvents"].is_array()) {
    return {"no traceEvents array"};
  }
  if (document.value("displayTimeUnit", "") != "ms") errors.push_back("displayTimeUnit is not \"ms\"");
  std::set<int64_t> named_processes;
  std::set<TrackKey> named_threads;
  std::set<TrackKey> used;
  std::map<TrackKey, int> open_begins;
  std::map<TrackKey, std::pair<double, double>> last_slice;  // start, end of the last slice on the track
  const json& events = document["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    check_fields(i, e, errors);
    if (!errors.empty()) return errors;
    check_phase(i, e, errors);
    const std::string ph = e["ph"];
    const TrackKey track{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()};
    const double ts = e["ts"].get<double>();
    if (ph == "M") {
      if (e["name"] == "process_name") named_processes.insert(track.first);
      if (e["name"] == "thread_name") named_threads.insert(track);
      continue;
    }
    used.insert(track);
    if (ph == "B") ++open_begins[track];
    if (ph == "E" && --open_begins[track] < 0) errors.push_back(where(i, e) + ": E without B");
    if (ph == "X" || ph == "B" || ph == "E") {
      auto [start, end] = last_slice.contains(track) ? last_slice[track] : std::pair{0.0, 0.0};
      if (ts < start) errors.push_back(where(i, e) + ": goes back in time on its track");
      // Complete slices on a track are a sequence here: none starts inside the last.
      if (ph == "X" && ts < end) errors.push_back(where(i, e) + ": overlaps the slice before it on its track");
      last_slice[track] = {ts, ph == "X" ? ts + e["dur"].get<double>() : ts};
    }
  }
  for (const auto& [track, depth] : open_begins) {
    if (depth != 0) errors.push_back(fmt::format("B/E unbalanced on pid {} tid {}", track.first, track.second));
  }
  for (const TrackKey& track : used) {
    if (!named_processes.contains(track.first))
      errors.push_back(fmt::format("pid {} has no process_name", track.first));
    if (!named_threads.contains(track)) {
      errors.push_back(fmt::format("pid {} tid {} has no thread_name", track.first, track.second));
    }
  }
  return errors;
}

TEST(PerfettoFormatChecker, CatchesBrokenDocuments) {
  EXPECT_FALSE(format_errors(json::parse(R"({"events": []})")).empty());
  const std::string named =
      R"({"name":"process_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"p"}},
         {"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"t"}})";
  auto document = [&named](const std::string& event) {
    return json::parse(R"({"displayTimeUnit":"ms","traceEvents":[)" + named + "," + event + "]}");
  };
  EXPECT_TRUE(format_errors(document(R"({"name":"a","ph":"X","ts":1,"dur":2,"pid":1,"tid":1})")).empty());
  EXPECT_FALSE(format_errors(document(R"({"name":"a","ph":"X","ts":1,"dur":-2,"pid":1,"tid":1})")).empty());
  EXPECT_FALSE(format_errors(document(R"({"name":"a","ph":"X","ts":1,"dur":2,"pid":1})")).empty());
  EXPECT_FALSE(format_errors(document(R"({"name":"a","ph":"X","ts":"1","dur":2,"pid":1,"tid":1})")).empty());
  EXPECT_FALSE(format_errors(document(R"({"name":"a","ph":"B","ts":1,"pid":1,"tid":1})")).empty());
  EXPECT_FALSE(format_errors(document(R"({"name":"a","ph":"X","ts":1,"dur":2,"pid":1,"tid":2})")).empty());
  EXPECT_FALSE(format_errors(document(R"({"name":"a","ph":"i","ts":1,"pid":1,"tid":1})")).empty());
  EXPECT_FALSE(format_errors(document(R"({"name":"a","ph":"X","ts":5,"dur":2,"pid":1,"tid":1},
                                          {"name":"b","ph":"X","ts":6,"dur":2,"pid":1,"tid":1})"))
                   .empty());
}

// ---- the small faulty run, once, shared by the tests below ------------------------------

struct PerfettoRun {
  std::string text;
  json document;
  PerfettoFigures figures;
  scenarios::RunResult result;
  std::vector<SeenEvent> events;  // lease opens and closes, crashes, exits
};

const PerfettoRun& perfetto_run() {
  static const PerfettoRun run = [] {
    PerfettoRun made;
    std::ostringstream out;
    PerfettoWriter writer{out};
    scenarios::RunConfig config = test::small_faulty_run();
    config.observe_trace = [&writer, &made](sim::Trace& trace) {
      writer.attach(trace);
      test::keep_events(trace, made.events, [](const sim::TraceEvent& e) {
        return (e.kind == sim::EventKind::note && (e.label == "lease.open" || e.label == "lease.close")) ||
               e.kind == sim::EventKind::crash || e.kind == sim::EventKind::exit;
      });
    };
    made.result = test::lease_crash().run(config);
    writer.finish(Instant::zero() + made.result.duration, {{"seed", "1"}});
    made.text = out.str();
    made.document = json::parse(made.text);
    made.figures = writer.figures();
    return made;
  }();
  return run;
}

std::map<int64_t, std::string> process_names(const json& document) {
  std::map<int64_t, std::string> names;
  for (const json& e : document["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
  }
  return names;
}

std::map<TrackKey, std::string> thread_names(const json& document) {
  std::map<TrackKey, std::string> names;
  for (const json& e : document["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  return names;
}

int64_t to_ns(const json& microseconds) { return std::llround(microseconds.get<double>() * 1000.0); }

TEST(PerfettoTrace, IsValidTraceEventFormat) {
  const PerfettoRun& run = perfetto_run();
  const std::vector<std::string> errors = format_errors(run.document);
  for (size_t i = 0; i < errors.size() && i < 10; ++i) ADD_FAILURE() << errors[i];
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(run.document["traceEvents"].size(), run.figures.events);
  EXPECT_EQ(run.document["otherData"]["seed"], "1");
  // Every kind of content is there: slices, instants, counters, named tracks.
  std::map<std::string, int> phases;
  for (const json& e : run.document["traceEvents"]) ++phases[e["ph"].get<std::string>()];
  EXPECT_GT(phases["X"], 0);
  EXPECT_GT(phases["i"], 0);
  EXPECT_GT(phases["C"], 0);
  EXPECT_GT(phases["M"], 0);
}

TEST(PerfettoTrace, OneOwnershipSlicePerLeaseOpenOnTheWorkersConnectionTrack) {
  const PerfettoRun& run = perfetto_run();
  const auto processes = process_names(run.document);
  const auto threads = thread_names(run.document);
  // (worker, connection, start) of every lease slice, and of every lease.open.
  std::multiset<std::tuple<std::string, std::string, int64_t>> slices;
  for (const json& e : run.document["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "lease") continue;
    const std::string connection = e["args"]["connection"];
    EXPECT_EQ(threads.at({e["pid"], e["tid"]}), connection) << e.dump();
    EXPECT_EQ(e["name"], fmt::format("{} epoch {}", connection, e["args"]["epoch"].get<int64_t>()));
    slices.emplace(processes.at(e["pid"]), connection, to_ns(e["ts"]));
  }
  std::multiset<std::tuple<std::string, std::string, int64_t>> opens;
  for (const SeenEvent& e : run.events) {
    if (e.label == "lease.open") opens.emplace(e.node, e.detail.substr(0, e.detail.find(' ')), e.at.ns());
  }
  EXPECT_GT(opens.size(), 20u);  // every connection once, and again after each crash
  EXPECT_EQ(slices.size(), opens.size());
  EXPECT_EQ(slices, opens);
  EXPECT_EQ(run.figures.lease_slices, opens.size());
}

TEST(PerfettoTrace, ACrashEndsEveryOpenSliceOfThatWorker) {
  const PerfettoRun& run = perfetto_run();
  const auto processes = process_names(run.document);
  // What was open at each worker, replayed from the notes.
  std::map<std::string, std::set<std::string>> open;
  std::map<std::pair<std::string, int64_t>, size_t> open_at_crash;  // (worker, crash time) -> slices open
  for (const SeenEvent& e : run.events) {
    const std::string connection = e.detail.substr(0, e.detail.find(' '));
    if (e.label == "lease.open") open[e.node].insert(connection);
    if (e.label == "lease.close") open[e.node].erase(connection);
    if (e.kind == sim::EventKind::crash) {
      open_at_crash[{e.node, e.at.ns()}] = open[e.node].size();
      open[e.node].clear();
    }
  }
  ASSERT_FALSE(open_at_crash.empty());
  size_t ended_by_crashes = 0;
  for (const auto& [crash, expected] : open_at_crash) {
    const auto& [worker, at_ns] = crash;
    size_t ended = 0;
    for (const json& e : run.document["traceEvents"]) {
      if (e["ph"] != "X" || e["cat"] != "lease" || processes.at(e["pid"]) != worker) continue;
      const int64_t start = to_ns(e["ts"]);
      const int64_t end = start + to_ns(e["dur"]);
      EXPECT_FALSE(start < at_ns && at_ns < end) << worker << " owns across its own crash: " << e.dump();
      if (end == at_ns && e["args"]["closed by"] == "crash") ++ended;
    }
    EXPECT_EQ(ended, expected) << worker << " crashed at " << at_ns << " ns";
    ended_by_crashes += ended;
  }
  EXPECT_GT(ended_by_crashes, 0u);
}

TEST(PerfettoTrace, FaultsAreInstantsAndStatesAreSlices) {
  const PerfettoRun& run = perfetto_run();
  std::map<std::string, int> instants;
  std::map<std::string, int> states;
  for (const json& e : run.document["traceEvents"]) {
    if (e["ph"] == "i") ++instants[e["name"].get<std::string>()];
    if (e["ph"] == "X" && e["cat"] == "lifecycle") ++states[e["name"].get<std::string>()];
  }
  EXPECT_GT(instants["crash"], 0);
  EXPECT_GT(instants["restart"], 0);
  EXPECT_EQ(instants["pause"], 1);
  EXPECT_EQ(instants["resume"], 1);
  EXPECT_GT(instants["partition start"], 0);
  EXPECT_GT(instants["drop loss"], 0);
  EXPECT_GT(instants["acquire ok"], 0);
  EXPECT_EQ(states["paused"], 1);
  EXPECT_EQ(states["down"], instants["crash"]);
  std::set<std::string> network_tracks;
  for (const auto& [track, name] : thread_names(run.document)) {
    if (track.first == 1) network_tracks.insert(name);
  }
  EXPECT_TRUE(network_tracks.contains("partition worker-2 -> dynamodb"))
      << fmt::format("{}", fmt::join(network_tracks, ", "));
  EXPECT_TRUE(network_tracks.contains("partition dynamodb -> worker-2"));
}

TEST(PerfettoTrace, DoesNotChangeTheRunOrItsHash) {
  const scenarios::RunResult without = test::lease_crash().run(test::small_faulty_run());
  const PerfettoRun& with = perfetto_run();
  EXPECT_EQ(with.result.trace_hash, without.trace_hash);
  EXPECT_EQ(with.result.events, without.events);
  EXPECT_EQ(with.result.violations, without.violations);
}

// ---- the writer on hand-made events: exact slice ends ------------------------------------

sim::TraceEvent note(Instant at, NodeId node, std::string_view label, std::string_view detail, int64_t value) {
  sim::TraceEvent e;
  e.kind = sim::EventKind::note;
  e.true_time = at;
  e.node = node;
  e.label = label;
  e.detail = detail;
  e.value = value;
  return e;
}

TEST(PerfettoWriter, ACrashEndsOpenSlicesAndTheEndOfTheRunEndsTheRest) {
  sim::Trace trace;
  const NodeId a{0};
  const NodeId b{1};
  trace.set_node_name(a, "worker-0");
  trace.set_node_name(b, "worker-1");
  std::ostringstream out;
  PerfettoWriter writer{out};
  writer.attach(trace);
  trace.record(note(Instant::from_ms(1000), a, "lease.open", "c1 1", 1));
  trace.record(note(Instant::from_ms(1500), a, "lease.open", "c2 3", 3));
  trace.record(note(Instant::from_ms(1600), a, "lease.close", "c2 3 released", 3));
  trace.record(note(Instant::from_ms(1700), a, "lease.open", "c2 4", 4));
  trace.record(note(Instant::from_ms(1800), b, "lease.open", "c3 1", 1));
  sim::TraceEvent crash;
  crash.kind = sim::EventKind::crash;
  crash.true_time = Instant::from_ms(2000);
  crash.node = a;
  crash.label = "sigkill";
  trace.record(crash);
  writer.finish(Instant::from_ms(5000));
  const json document = json::parse(out.str());
  EXPECT_TRUE(format_errors(document).empty());
  std::map<std::string, std::tuple<double, double, std::string>> slices;  // name -> ts, dur, closed by
  for (const json& e : document["traceEvents"]) {
    if (e["ph"] == "X") slices[e["name"]] = {e["ts"].get<double>(), e["dur"].get<double>(), e["args"]["closed by"]};
  }
  using Slice = std::tuple<double, double, std::string>;
  EXPECT_EQ(slices["c1 epoch 1"], (Slice{1e6, 1e6, "sigkill"}));
  EXPECT_EQ(slices["c2 epoch 3"], (Slice{1.5e6, 0.1e6, "released"}));
  EXPECT_EQ(slices["c2 epoch 4"], (Slice{1.7e6, 0.3e6, "sigkill"}));
  EXPECT_EQ(slices["c3 epoch 1"], (Slice{1.8e6, 3.2e6, "end of run"}));
  EXPECT_EQ(slices["down"], (Slice{2e6, 3e6, "end of run"}));
  EXPECT_EQ(writer.figures().lease_slices, 4u);
}

// ---- the file: whole or absent -------------------------------------------------------------

TEST(PerfettoFile, IsRenamedIntoPlaceOnlyWhenComplete) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "leaseproof-perfetto-file-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "run.json").string();
  std::string error;
  std::string abandoned_temporary;
  {
    std::unique_ptr<PerfettoFile> abandoned = PerfettoFile::create(path, error);
    ASSERT_NE(abandoned, nullptr) << error;
    abandoned_temporary = abandoned->temporary_path();
    EXPECT_TRUE(abandoned_temporary.starts_with(path + ".tmp-")) << abandoned_temporary;  // the process's own
    EXPECT_TRUE(std::filesystem::exists(abandoned_temporary));
  }
  EXPECT_FALSE(std::filesystem::exists(abandoned_temporary));  // dropped without a commit
  EXPECT_FALSE(std::filesystem::exists(path));
  std::unique_ptr<PerfettoFile> file = PerfettoFile::create(path, error);
  ASSERT_NE(file, nullptr) << error;
  const std::string temporary = file->temporary_path();
  EXPECT_NE(temporary, abandoned_temporary);  // two files of one process never share a temporary
  sim::Trace trace;
  file->attach(trace);
  trace.set_node_name(NodeId{0}, "worker-0");
  trace.record(note(Instant::from_ms(10), NodeId{0}, "lease.open", "c1 1", 1));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(file->commit(Instant::from_ms(20)), "");
  EXPECT_FALSE(std::filesystem::exists(temporary));
  std::ifstream in{path};
  EXPECT_TRUE(format_errors(json::parse(in)).empty());
  std::filesystem::remove_all(dir);
}

TEST(PerfettoFile, AnUnwritablePathIsAnErrorNamingIt) {
  std::string error;
  EXPECT_EQ(PerfettoFile::create("/nonexistent-leaseproof-dir/run.json", error), nullptr);
  EXPECT_NE(error.find("/nonexistent-leaseproof-dir/run.json"), std::string::npos) << error;
}

TEST(PerfettoFile, AFailedRenameLeavesNothingBehind) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "leaseproof-perfetto-rename-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "taken" / "inside");  // a non-empty directory cannot be replaced
  const std::string path = (dir / "taken").string();
  std::string error;
  std::unique_ptr<PerfettoFile> file = PerfettoFile::create(path, error);
  ASSERT_NE(file, nullptr) << error;
  const std::string temporary = file->temporary_path();
  EXPECT_NE(file->commit(Instant::zero()), "");
  EXPECT_FALSE(std::filesystem::exists(temporary));
  EXPECT_TRUE(std::filesystem::is_directory(path));
  std::filesystem::remove_all(dir);
}

// ---- a run with a violation: the violations track and request -> reply flows ----------

// The articles' algorithm with a worker 16 s fast (lease 20 s, heartbeat 5 s:
// it tolerates 15 s) takes live leases: the first seed that breaks single
// ownership, found by running, with the writer given its violations.
struct ViolatingRun {
  json document;
  scenarios::RunResult result;
  std::vector<SeenEvent> events;  // lease.request notes and reply deliveries
};

const ViolatingRun& violating_run() {
  static const ViolatingRun run = [] {
    scenarios::RunConfig config;
    config.duration = Duration::from_min(3);
    config.parameters = json::parse(R"({"workers": 3, "connections": 20, "crash_every": "1m", "expiry": "counter",
                                        "heartbeat": "5s", "lease": "20s", "algorithm": "seed",
                                        "fast_worker_offset": "16s"})");
    for (config.seed = 1; config.seed <= 20; ++config.seed) {
      if (!test::lease_crash().run(config).violations.empty()) break;
    }
    ViolatingRun made;
    std::ostringstream out;
    PerfettoWriter writer{out};
    config.observe_trace = [&writer, &made](sim::Trace& trace) {
      writer.attach(trace);
      test::keep_events(trace, made.events, [](const sim::TraceEvent& e) {
        return (e.kind == sim::EventKind::note && e.label == "lease.request") ||
               (e.kind == sim::EventKind::deliver && e.label == "dynamo.reply");
      });
    };
    made.result = test::lease_crash().run(config);
    writer.finish(Instant::zero() + made.result.duration, {}, made.result.violations);
    made.document = json::parse(out.str());
    return made;
  }();
  return run;
}

std::string word_at(const std::string& text, size_t index) {
  std::istringstream in{text};
  std::string word;
  for (size_t i = 0; i <= index; ++i) {
    if (!(in >> word)) return {};
  }
  return word;
}

// "@2m10.399689414s" in a violation's text, as nanoseconds since the start.
int64_t first_true_time_ns(const std::string& text) {
  const size_t at = text.find('@');
  EXPECT_NE(at, std::string::npos) << text;
  const size_t end = text.find_first_of(" ,:;)", at);
  const std::optional<Duration> since_zero = parse_duration(text.substr(at + 1, end - at - 1));
  EXPECT_TRUE(since_zero) << text;
  return since_zero.value_or(Duration::zero()).ns();
}

TEST(PerfettoTrace, EachViolationIsAnInstantOnTheViolationsTrackAtItsTime) {
  const ViolatingRun& run = violating_run();
  ASSERT_FALSE(run.result.violations.empty()) << "no seed of 1..20 failed: the test has nothing to look at";
  const auto threads = thread_names(run.document);
  std::multiset<std::pair<std::string, int64_t>> drawn;  // (text, ts in ns)
  for (const json& e : run.document["traceEvents"]) {
    if (e["ph"] == "M" || threads.at({e["pid"], e["tid"]}) != "violations") continue;
    EXPECT_EQ(e["ph"], "i") << e.dump();
    drawn.emplace(e["args"]["violation"].get<std::string>(), to_ns(e["ts"]));
  }
  std::multiset<std::pair<std::string, int64_t>> expected;
  for (const std::string& text : run.result.violations) expected.emplace(text, first_true_time_ns(text));
  EXPECT_EQ(drawn, expected);
  EXPECT_EQ(process_names(run.document).count(21000), 1u);
  const std::vector<std::string> errors = format_errors(run.document);
  for (size_t i = 0; i < errors.size() && i < 10; ++i) ADD_FAILURE() << errors[i];
}

// Every request of a connection a violation names: a flow from the slice
// where its worker sent it (the lease.request note's instant, id = the
// request's message id) to the slice where the reply reached that worker.
TEST(PerfettoTrace, RequestsOfAViolatingConnectionFlowFromTheirSendToTheirReplysArrival) {
  const ViolatingRun& run = violating_run();
  ASSERT_FALSE(run.result.violations.empty());
  const std::string& first = run.result.violations.front();
  const size_t named = first.find("connection ");
  ASSERT_NE(named, std::string::npos) << first;
  const std::string connection = first.substr(named + 11, first.find(' ', named + 11) - named - 11);
  std::map<uint64_t, std::pair<std::string, int64_t>> flow_out;  // bind_id -> (worker, ts)
  std::map<uint64_t, std::pair<std::string, int64_t>> flow_in;
  const auto processes = process_names(run.document);
  for (const json& e : run.document["traceEvents"]) {
    if (!e.contains("bind_id")) continue;
    EXPECT_EQ(e["ph"], "X");
    auto& side = e.value("flow_out", false) ? flow_out : flow_in;
    EXPECT_TRUE(side.emplace(e["bind_id"].get<uint64_t>(), std::pair{processes.at(e["pid"]), to_ns(e["ts"])}).second)
        << "a second flow point with one id: " << e.dump();
  }
  ASSERT_EQ(flow_out.size(), flow_in.size());
  // (worker, ts) of every reply delivery: where a flow may end.
  std::set<std::pair<std::string, int64_t>> arrivals;
  for (const SeenEvent& e : run.events) {
    if (e.kind == sim::EventKind::deliver) arrivals.emplace(e.node, e.at.ns());
  }
  size_t requests = 0;
  for (const SeenEvent& e : run.events) {
    if (e.kind != sim::EventKind::note || word_at(e.detail, 1) != connection) continue;
    const auto out = flow_out.find(static_cast<uint64_t>(e.value));
    if (out == flow_out.end()) continue;  // its reply never arrived (lost, or after a timeout)
    ++requests;
    EXPECT_EQ(out->second, std::pair(e.node, e.at.ns())) << e.detail;
    const auto in = flow_in.find(out->first);
    ASSERT_NE(in, flow_in.end());
    EXPECT_EQ(in->second.first, e.node);
    EXPECT_GE(in->second.second, e.at.ns());
    EXPECT_TRUE(arrivals.contains(in->second)) << "the flow does not end where a reply arrived: " << e.detail;
  }
  EXPECT_GT(requests, 10u) << "the connection's renewals are drawn, not only its acquires";
}

}  // namespace
}  // namespace leaseproof::report
