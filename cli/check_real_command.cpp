#include "cli/check_real_command.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/json_depth.hpp"
#include "cli/cli_common.hpp"
#include "cli/process_common.hpp"
#include "properties/lease_checkers.hpp"
#include "properties/reading.hpp"
#include "scenarios/lease.hpp"
#include "sim/trace.hpp"

namespace leaseproof::cli {
namespace {

using properties::GapCause;
using properties::RecoveryBound;
using sim::EventKind;

// One line of an input file that the trace is built from.
struct Record {
  int64_t mono_ns = 0;
  int rank = 1;  // within one millisecond: resumes first, then the workers' own lines, then the lab's other acts
  size_t order = 0;  // input order, for ties
  nlohmann::json fields;
};

// Within one millisecond: a resume before what the resumed process did; a
// kill, stop or exit after what the process did before it (a dead or stopped
// process logs nothing).
int rank_of(const std::string& event) {
  if (event == "lab.cont") return 0;
  if (event.starts_with("lab.") || event.starts_with("control.")) return 2;
  return 1;
}

std::string string_field(const nlohmann::json& fields, const char* name) {
  const auto it = fields.find(name);
  return it != fields.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

std::optional<int64_t> integer_field(const nlohmann::json& fields, const char* name) {
  const auto it = fields.find(name);
  if (it == fields.end() || !it->is_number()) return std::nullopt;
  return it->is_number_float() ? static_cast<int64_t>(it->get<double>()) : it->get<int64_t>();
}

int64_t ms_to_ns(double ms) { return static_cast<int64_t>(ms * 1e6); }

// Reads the lines that start with '{' of a file: JSON objects with "event"
// and "mono_ms". Other lines (a worker's plain text) are skipped; a '{' line
// that is not such an object is counted and named once.
void read_records(const std::string& path, std::vector<Record>& out, std::vector<std::string>& problems) {
  std::ifstream in(path);
  if (!in) throw UsageError{fmt::format("--events: cannot read '{}'", path)};
  std::string line;
  size_t number = 0, bad = 0, taken = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line.front() != '{') continue;
    bool too_deep = false;  // a line too deep is not an event: skipped and counted like any other
    nlohmann::json fields = parse_json_bounded(line, too_deep);
    const auto mono = fields.is_object() ? fields.find("mono_ms") : fields.end();
    // A summary line (worker.stop) carries no time: not an event.
    if (fields.is_object() && fields.contains("event") && mono == fields.end()) continue;
    if (!fields.is_object() || !fields.contains("event") || !fields["event"].is_string() || mono == fields.end() ||
        !mono->is_number()) {
      if (bad++ == 0) {
        problems.push_back(fmt::format("{}:{}: not a JSON object with \"event\" and \"mono_ms\" (skipped)", path, number));
      }
      continue;
    }
    const std::string event = fields["event"].get<std::string>();
    out.push_back(Record{ms_to_ns(mono->get<double>()), rank_of(event), out.size(), std::move(fields)});
    ++taken;
  }
  if (bad > 1) problems.push_back(fmt::format("{}: {} such lines in all", path, bad));
  if (taken == 0) problems.push_back(fmt::format("{}: no events", path));
}

struct HubSession {
  std::string channel;
  std::string worker;
  int64_t lease_epoch = 0;
  double opened_ms = 0, ended_ms = 0;
  std::optional<double> first_in_ms, last_in_ms, last_data_ms;
};

std::vector<HubSession> read_sessions(const std::string& path, std::vector<std::string>& problems) {
  std::ifstream in(path);
  if (!in) throw UsageError{fmt::format("--sessions: cannot read '{}'", path)};
  std::vector<HubSession> out;
  std::string line;
  size_t number = 0;
  auto optional_ms = [](const nlohmann::json& j, const char* name) -> std::optional<double> {
    const auto it = j.find(name);
    return it != j.end() && it->is_number() ? std::optional<double>{it->get<double>()} : std::nullopt;
  };
  while (std::getline(in, line)) {
    ++number;
    bool too_deep = false;
    const nlohmann::json j = parse_json_bounded(line, too_deep);
    if (!j.is_object() || !optional_ms(j, "opened_ms") || !optional_ms(j, "ended_ms")) {
      problems.push_back(fmt::format("{}:{}: not a hub session record (skipped)", path, number));
      continue;
    }
    HubSession s;
    s.channel = string_field(j, "channel");
    s.worker = string_field(j, "worker");
    s.lease_epoch = integer_field(j, "lease_epoch").value_or(0);
    s.opened_ms = *optional_ms(j, "opened_ms");
    s.ended_ms = *optional_ms(j, "ended_ms");
    s.first_in_ms = optional_ms(j, "first_in_ms");
    s.last_in_ms = optional_ms(j, "last_in_ms");
    s.last_data_ms = optional_ms(j, "last_data_ms");
    if (!s.channel.empty() && !s.worker.empty()) out.push_back(std::move(s));
  }
  return out;
}

// Node ids by name, in order of first appearance.
class Nodes {
 public:
  NodeId of(const std::string& name) {
    const auto [it, added] = ids_.try_emplace(name, NodeId{static_cast<uint32_t>(names_.size())});
    if (added) names_.push_back(name);
    return it->second;
  }
  std::string name(NodeId node) const {
    return node.value < names_.size() ? names_[node.value] : fmt::format("node{}", node.value);
  }

 private:
  std::map<std::string, NodeId> ids_;
  std::vector<std::string> names_;
};

// The workers' configuration, from their worker.start lines; all must agree.
std::optional<lease::LeaseConfig> configuration(const std::vector<Record>& records, std::vector<std::string>& problems) {
  std::optional<lease::LeaseConfig> config;
  std::string first;
  for (const Record& r : records) {
    if (string_field(r.fields, "event") != "worker.start") continue;
    auto ms = [&](const char* name) { return Duration::from_ms(integer_field(r.fields, name).value_or(0)); };
    lease::LeaseConfig c;
    c.algorithm = lease::parse_algorithm(string_field(r.fields, "algorithm")).value_or(lease::Algorithm::core);
    c.expiry_mode = string_field(r.fields, "expiry") == "counter" ? lease::ExpiryMode::counter : lease::ExpiryMode::wall;
    c.lease_duration = ms("lease_ms");
    c.heartbeat_interval = ms("heartbeat_ms");
    c.safety_margin = ms("margin_ms");
    c.reconcile_interval = ms("reconcile_ms");
    c.reconcile_jitter_max = ms("reconcile_jitter_ms");
    c.watch_interval = ms("watch_ms");
    c.request_timeout = ms("request_timeout_ms");
    const std::string text = fmt::format("{} {} lease {} heartbeat {} margin {} reconcile {}(+{}) watch {} timeout {}",
                                         lease::to_string(c.algorithm), lease::to_string(c.expiry_mode),
                                         c.lease_duration, c.heartbeat_interval, c.safety_margin, c.reconcile_interval,
                                         c.reconcile_jitter_max, c.watch_interval, c.request_timeout);
    if (c.lease_duration <= Duration::zero()) {
      problems.push_back(fmt::format("a worker.start line without its configuration (lease_ms): {}", r.fields.dump()));
      continue;
    }
    if (!config) {
      config = c;
      first = text;
    } else if (text != first) {
      problems.push_back(fmt::format("workers configured differently: '{}' and '{}' (the bounds are the first one's)",
                                     first, text));
    }
  }
  return config;
}

// Feeds the checkers one trace event per record, in true-time order.
void replay(const std::vector<Record>& records, const std::vector<HubSession>& sessions, Nodes& nodes,
            properties::LeaseCheckers& checkers, Instant& end) {
  std::map<std::string, uint64_t> incarnations;
  // The hub's sessions as upstream.open/close notes, merged in.
  struct HubNote {
    int64_t at_ns;
    bool open;
    const HubSession* session;
  };
  std::vector<HubNote> hub;
  for (const HubSession& s : sessions) {
    hub.push_back({ms_to_ns(s.opened_ms), true, &s});
    hub.push_back({ms_to_ns(s.ended_ms), false, &s});
  }
  std::stable_sort(hub.begin(), hub.end(), [](const HubNote& a, const HubNote& b) { return a.at_ns < b.at_ns; });
  const NodeId hub_node = nodes.of("hub");
  const NodeId control = nodes.of("control");
  auto h = hub.begin();
  auto emit_hub_until = [&](int64_t until_ns) {
    for (; h != hub.end() && h->at_ns <= until_ns; ++h) {
      const std::string detail = fmt::format("{} {}", h->session->channel, h->session->worker);
      const Instant at = Instant::from_ns(h->at_ns);
      sim::TraceEvent e;
      e.kind = EventKind::note;
      e.true_time = e.wall = e.monotonic = at;
      e.node = hub_node;
      e.label = h->open ? "upstream.open" : "upstream.close";
      e.detail = detail;
      checkers.observe(e);
      end = std::max(end, at);
    }
  };
  for (const Record& r : records) {
    emit_hub_until(r.mono_ns - 1);
    const std::string event = string_field(r.fields, "event");
    const std::string worker = string_field(r.fields, "worker");
    const std::string node_name = worker.empty() ? string_field(r.fields, "node") : worker;
    const Instant at = Instant::from_ns(r.mono_ns);
    const auto wall_ms = integer_field(r.fields, "t_ms");
    sim::TraceEvent e;
    e.true_time = e.monotonic = at;
    e.node = node_name.empty() ? control : nodes.of(node_name);
    e.wall = wall_ms ? Instant::from_ms(*wall_ms) : at;
    std::string detail;
    const std::string connection = string_field(r.fields, "connection");
    const int64_t epoch = integer_field(r.fields, "epoch").value_or(0);
    if (event == "worker.start" || event == "lab.restart") {
      e.kind = event == "worker.start" ? EventKind::start : EventKind::restart;
      e.id = ++incarnations[node_name];
    } else if (event == "lease.open") {
      e.kind = EventKind::note;
      e.label = "lease.open";
      detail = fmt::format("{} {}", connection, epoch);
    } else if (event == "lease.watch" || event == "lease.unwatch") {
      e.kind = EventKind::note;
      e.label = event == "lease.watch" ? "lease.watch" : "lease.unwatch";
      detail = connection;
    } else if (event == "lease.close") {
      e.kind = EventKind::note;
      e.label = "lease.close";
      detail = fmt::format("{} {} {}", connection, epoch, string_field(r.fields, "reason"));
    } else if (event == "control.started" || event == "control.stopped") {
      e.kind = EventKind::note;
      e.node = control;
      e.label = event == "control.started" ? "control.started" : "control.stopped";
      detail = connection;
    } else if (event == "lab.kill" || event == "lab.crash") {
      e.kind = EventKind::crash;
      e.label = event == "lab.kill" ? "sigkill" : "crash";
    } else if (event == "lab.stop") {
      e.kind = EventKind::pause;
    } else if (event == "lab.cont") {
      e.kind = EventKind::resume;
    } else if (event == "lab.term") {
      e.kind = EventKind::sigterm;
    } else if (event == "lab.exit") {
      e.kind = EventKind::exit;
    } else if (event == "lab.partition_start" || event == "lab.partition_end") {
      e.kind = event == "lab.partition_start" ? EventKind::partition_start : EventKind::partition_end;
      e.peer = nodes.of(string_field(r.fields, "peer"));
    } else {
      // Other worker events (records, resets, ...) carry the node's readings only.
      e.kind = EventKind::note;
      e.label = "real.event";
    }
    e.detail = detail;
    checkers.observe(e);
    end = std::max(end, at);
  }
  emit_hub_until(INT64_MAX);
}

// Two workers acting at once as the hub saw it: both sent frames (subscribe,
// pongs) on sessions of one channel during a common interval.
std::vector<std::string> hub_overlaps(const std::vector<HubSession>& sessions, uint64_t& compared) {
  std::map<std::string, std::vector<const HubSession*>> by_channel;
  for (const HubSession& s : sessions) {
    if (s.first_in_ms && s.last_in_ms) by_channel[s.channel].push_back(&s);
  }
  std::vector<std::string> out;
  for (auto& [channel, list] : by_channel) {
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return *a->first_in_ms < *b->first_in_ms; });
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size() && *list[j]->first_in_ms < *list[i]->last_in_ms; ++j) {
        ++compared;
        if (list[j]->worker == list[i]->worker) continue;
        out.push_back(fmt::format(
            "hub: {}: {} (lease epoch {}) sent frames until {:.3f} s and {} (lease epoch {}) from {:.3f} s: both "
            "acting for {:.3f} s",
            channel, list[i]->worker, list[i]->lease_epoch, *list[i]->last_in_ms / 1e3, list[j]->worker,
            list[j]->lease_epoch, *list[j]->first_in_ms / 1e3, (*list[i]->last_in_ms - *list[j]->first_in_ms) / 1e3));
      }
    }
  }
  return out;
}

// Crash recovery seen by the hub: for each killed worker's sessions open at
// the kill, from the last frame of that session (either way) to the first
// frame the next owner sent on that channel.
std::vector<Duration> hub_crash_gaps(const std::vector<HubSession>& sessions, const std::vector<Record>& records,
                                     size_t& unrecovered) {
  std::vector<Duration> out;
  for (const Record& r : records) {
    if (string_field(r.fields, "event") != "lab.kill") continue;
    const std::string victim = string_field(r.fields, "worker");
    const double killed_ms = static_cast<double>(r.mono_ns) / 1e6;
    for (const HubSession& s : sessions) {
      if (s.worker != victim || s.opened_ms > killed_ms || s.ended_ms < killed_ms) continue;
      const double last = std::max(s.last_in_ms.value_or(s.opened_ms), s.last_data_ms.value_or(s.opened_ms));
      std::optional<double> next;
      for (const HubSession& t : sessions) {
        if (t.channel == s.channel && t.worker != victim && t.first_in_ms && *t.first_in_ms > killed_ms &&
            (!next || *t.first_in_ms < *next)) {
          next = t.first_in_ms;
        }
      }
      if (next) {
        out.push_back(Duration::from_ns(ms_to_ns(*next - last)));
      } else {
        ++unrecovered;
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

CLI::App* add_check_real_command(CLI::App& app, CheckRealArgs& args) {
  CLI::App* check = app.add_subcommand(
      "check-real",
      "Judge real processes' records with the simulator's checkers: single ownership and the recovery bound "
      "(docs/runtime.md)");
  check->add_option("--events", args.events,
                    "JSON lines with mono_ms and event: workers' logs and the lab's own events (repeatable)")
      ->required()
      ->type_name("FILE");
  check->add_option("--sessions", args.sessions, "The hub's session records (hub --sessions)")->type_name("FILE");
  check->add_flag("--notices", args.notices,
                  "The workers sent release notices: judge graceful handovers against the notice bound, not reconcile");
  check->add_option("--fast-worker-offset", args.fast_worker_offset,
                    "A worker's wall clock runs this far ahead (faketime): a term of the expiry bound")
      ->capture_default_str();
  return check;
}

int check_real_command(const CheckRealArgs& args) {
  const Duration fast_offset = duration_flag(args.fast_worker_offset, "--fast-worker-offset", true);
  std::vector<std::string> problems;
  std::vector<Record> records;
  for (const std::string& path : args.events) read_records(path, records, problems);
  std::vector<HubSession> sessions;
  if (!args.sessions.empty()) sessions = read_sessions(args.sessions, problems);
  std::stable_sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
    return std::tie(a.mono_ns, a.rank, a.order) < std::tie(b.mono_ns, b.rank, b.order);
  });
  // The lab sees when it sent SIGCONT, not when the kernel ran the process
  // again: a resumed worker is taken as running from its first line after
  // the SIGCONT (its first act after a pause is to stop acting on the leases
  // whose deadline passed, which it logs).
  for (Record& r : records) {
    if (string_field(r.fields, "event") != "lab.cont") continue;
    const std::string worker = string_field(r.fields, "worker");
    for (const Record& later : records) {
      if (later.mono_ns >= r.mono_ns && string_field(later.fields, "worker") == worker &&
          !string_field(later.fields, "event").starts_with("lab.")) {
        r.fields["sigcont_mono_ms"] = r.fields["mono_ms"];
        r.mono_ns = later.mono_ns;
        break;
      }
    }
  }
  std::stable_sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
    return std::tie(a.mono_ns, a.rank, a.order) < std::tie(b.mono_ns, b.rank, b.order);
  });
  const std::optional<lease::LeaseConfig> config = configuration(records, problems);
  for (const std::string& p : problems) print_line(fmt::format("check-real: {}", p));
  if (!config) throw UsageError{"--events: no worker.start line with the workers' configuration"};

  scenarios::LeaseScenarioOptions options;
  options.lease = *config;
  options.fast_worker_offset = fast_offset;
  std::map<GapCause, RecoveryBound> bounds = scenarios::lease_recovery_bounds(options);
  if (!args.notices && config->algorithm != lease::Algorithm::seed) {
    // Without notices a released lease is found by the next reconcile, as the
    // articles' algorithm finds it (the simulator's bound for that case).
    scenarios::LeaseScenarioOptions seed = options;
    seed.lease.algorithm = lease::Algorithm::seed;
    bounds[GapCause::graceful] = scenarios::lease_recovery_bounds(seed).at(GapCause::graceful);
  }

  Nodes nodes;
  properties::LeaseCheckers checkers([&nodes](NodeId n) { return nodes.name(n); }, bounds);
  // The hub carries streams, not leases: its faults excuse no lease's gap.
  checkers.ignore_faults_at(nodes.of("hub"));
  // Gaps a live watcher saw through (the workers' lease.watch lines) are
  // judged by the watcher's path, the others by the sweep's, as in the simulator.
  checkers.set_watcher_bounds(scenarios::lease_watcher_bounds(options));
  Instant end = Instant::zero();
  replay(records, sessions, nodes, checkers, end);
  checkers.finish(end);

  print_line(fmt::format("check-real: {} events from {} files, {} hub sessions; configuration: {} {}, lease {}, "
                         "heartbeat {}, margin {}, reconcile {}",
                         records.size(), args.events.size(), sessions.size(), lease::to_string(config->algorithm),
                         lease::to_string(config->expiry_mode), config->lease_duration, config->heartbeat_interval,
                         config->safety_margin, config->reconcile_interval));
  print_line(checkers.summary());
  const std::vector<std::string> violations = checkers.violations();
  for (const std::string& v : violations) print_line(fmt::format("  violation: {}", v));
  for (const std::string& e : checkers.recovery().excused()) print_line(fmt::format("  excused: {}", e));

  size_t violation_count = checkers.violation_count();
  if (!args.sessions.empty()) {
    uint64_t compared = 0;
    const std::vector<std::string> hub = hub_overlaps(sessions, compared);
    print_line(fmt::format("hub judge: {} violations; {} sessions of workers, {} pairs of one channel whose frames "
                           "(subscribe, pongs) overlapped in time (one clock: the hub's)",
                           hub.size(), sessions.size(), compared));
    for (size_t i = 0; i < std::min<size_t>(hub.size(), 20); ++i) print_line(fmt::format("  violation: {}", hub[i]));
    violation_count += hub.size();
    size_t unrecovered = 0;
    const std::vector<Duration> gaps = hub_crash_gaps(sessions, records, unrecovered);
    if (!gaps.empty() || unrecovered > 0) {
      const Duration bound = bounds.at(GapCause::crash).total();
      const size_t beyond = static_cast<size_t>(std::count_if(gaps.begin(), gaps.end(), [&](Duration d) { return d > bound; }));
      print_line(fmt::format("hub crash recovery: {} sessions of killed workers; last frame to the next owner's first: "
                             "p50 {}, p99 {}, max {}; {} beyond the crash bound {}; {} never taken over",
                             gaps.size() + unrecovered, properties::for_reading(properties::nearest_rank(gaps, 50)),
                             properties::for_reading(properties::nearest_rank(gaps, 99)),
                             properties::for_reading(gaps.empty() ? Duration::zero() : gaps.back()), beyond,
                             bound, unrecovered));
      violation_count += beyond + unrecovered;
    }
  }
  const bool nothing = checkers.ownership().acting_intervals() == 0;
  if (nothing) print_line("check-real: no acting interval in the records: nothing was checked");
  const bool pass = violation_count == 0 && !nothing;
  print_line(fmt::format("verdict: {}", pass ? "PASS" : "FAIL"));
  return pass ? 0 : kExitFailed;
}

}  // namespace leaseproof::cli
