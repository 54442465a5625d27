#include "properties/real_records.hpp"

#include <algorithm>
#include <istream>
#include <tuple>

#include <fmt/format.h>

#include "base/json_depth.hpp"

namespace leaseproof::properties {

namespace {

using sim::EventKind;

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

std::optional<double> optional_ms(const nlohmann::json& fields, const char* name) {
  const auto it = fields.find(name);
  return it != fields.end() && it->is_number() ? std::optional<double>{it->get<double>()} : std::nullopt;
}

// "process": a number in a worker's lines, text in a hub's records.
std::string process_field(const nlohmann::json& fields) {
  const auto it = fields.find("process");
  if (it == fields.end()) return {};
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return it->is_string() ? it->get<std::string>() : std::string{};
}

int64_t ms_to_ns(double ms) { return static_cast<int64_t>(ms * 1e6); }

void sort_records(std::vector<RealRecord>& records) {
  std::stable_sort(records.begin(), records.end(), [](const RealRecord& a, const RealRecord& b) {
    return std::tie(a.mono_ns, a.rank, a.order) < std::tie(b.mono_ns, b.rank, b.order);
  });
}

// A worker.start line's configuration; lease_duration zero when it has none.
lease::LeaseConfig configuration_of(const nlohmann::json& fields) {
  auto ms = [&](const char* name) { return Duration::from_ms(integer_field(fields, name).value_or(0)); };
  lease::LeaseConfig c;
  c.algorithm = lease::parse_algorithm(string_field(fields, "algorithm")).value_or(lease::Algorithm::core);
  c.expiry_mode = string_field(fields, "expiry") == "counter" ? lease::ExpiryMode::counter : lease::ExpiryMode::wall;
  c.lease_duration = ms("lease_ms");
  c.heartbeat_interval = ms("heartbeat_ms");
  c.safety_margin = ms("margin_ms");
  c.reconcile_interval = ms("reconcile_ms");
  c.reconcile_jitter_max = ms("reconcile_jitter_ms");
  c.watch_interval = ms("watch_ms");
  c.request_timeout = ms("request_timeout_ms");
  return c;
}

std::string configuration_text(const lease::LeaseConfig& c) {
  return fmt::format("{} {} lease {} heartbeat {} margin {} reconcile {}(+{}) watch {} timeout {}",
                     lease::to_string(c.algorithm), lease::to_string(c.expiry_mode), c.lease_duration,
                     c.heartbeat_interval, c.safety_margin, c.reconcile_interval, c.reconcile_jitter_max,
                     c.watch_interval, c.request_timeout);
}

// The notes a lease or control line becomes; false for other events.
bool set_note(const std::string& event, const nlohmann::json& fields, sim::TraceEvent& e, std::string& detail) {
  const std::string connection = string_field(fields, "connection");
  const int64_t epoch = integer_field(fields, "epoch").value_or(0);
  if (event == "lease.open") {
    e.label = "lease.open";
    detail = fmt::format("{} {}", connection, epoch);
  } else if (event == "lease.watch" || event == "lease.unwatch") {
    e.label = event == "lease.watch" ? "lease.watch" : "lease.unwatch";
    detail = connection;
  } else if (event == "lease.close") {
    e.label = "lease.close";
    detail = fmt::format("{} {} {}", connection, epoch, string_field(fields, "reason"));
  } else if (event == "control.started" || event == "control.stopped") {
    e.label = event == "control.started" ? "control.started" : "control.stopped";
    detail = connection;
  } else {
    return false;
  }
  e.kind = EventKind::note;
  return true;
}

// What the lab did to a process, as the simulator's fault events; false for other events.
bool set_lab_act(const std::string& event, const nlohmann::json& fields, RealNodes& nodes, sim::TraceEvent& e) {
  if (event == "lab.kill" || event == "lab.crash") {
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
    e.peer = nodes.of(string_field(fields, "peer"));
  } else {
    return false;
  }
  return true;
}

// The hub's sessions as upstream.open/close notes, in time order.
struct HubNote {
  int64_t at_ns;
  bool open;
  const HubSession* session;
};

std::vector<HubNote> hub_notes(const std::vector<HubSession>& sessions) {
  std::vector<HubNote> hub;
  for (const HubSession& s : sessions) {
    hub.push_back({ms_to_ns(s.opened_ms), true, &s});
    hub.push_back({ms_to_ns(s.ended_ms), false, &s});
  }
  std::stable_sort(hub.begin(), hub.end(), [](const HubNote& a, const HubNote& b) { return a.at_ns < b.at_ns; });
  return hub;
}

}  // namespace

void read_real_records(std::istream& in, const std::string& name, std::vector<RealRecord>& out,
                       std::vector<std::string>& problems) {
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
        problems.push_back(fmt::format("{}:{}: not a JSON object with \"event\" and \"mono_ms\" (skipped)", name, number));
      }
      continue;
    }
    const std::string event = fields["event"].get<std::string>();
    out.push_back(RealRecord{ms_to_ns(mono->get<double>()), rank_of(event), out.size(), std::move(fields)});
    ++taken;
  }
  if (bad > 1) problems.push_back(fmt::format("{}: {} such lines in all", name, bad));
  if (taken == 0) problems.push_back(fmt::format("{}: no events", name));
}

void order_real_records(std::vector<RealRecord>& records) {
  sort_records(records);
  for (RealRecord& r : records) {
    if (string_field(r.fields, "event") != "lab.cont") continue;
    const std::string worker = string_field(r.fields, "worker");
    for (const RealRecord& later : records) {
      if (later.mono_ns >= r.mono_ns && string_field(later.fields, "worker") == worker &&
          !string_field(later.fields, "event").starts_with("lab.")) {
        r.fields["sigcont_mono_ms"] = r.fields["mono_ms"];
        r.mono_ns = later.mono_ns;
        break;
      }
    }
  }
  sort_records(records);
}

std::optional<lease::LeaseConfig> workers_configuration(const std::vector<RealRecord>& records,
                                                        std::vector<std::string>& problems) {
  std::optional<lease::LeaseConfig> config;
  std::string first;
  for (const RealRecord& r : records) {
    if (string_field(r.fields, "event") != "worker.start") continue;
    const lease::LeaseConfig c = configuration_of(r.fields);
    const std::string text = configuration_text(c);
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

std::vector<HubSession> read_hub_sessions(std::istream& in, const std::string& name,
                                          std::vector<std::string>& problems) {
  std::vector<HubSession> out;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    bool too_deep = false;
    const nlohmann::json j = parse_json_bounded(line, too_deep);
    if (!j.is_object() || !optional_ms(j, "opened_ms") || !optional_ms(j, "ended_ms")) {
      problems.push_back(fmt::format("{}:{}: not a hub session record (skipped)", name, number));
      continue;
    }
    HubSession s;
    s.channel = string_field(j, "channel");
    s.worker = string_field(j, "worker");
    s.process = process_field(j);
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

size_t name_processes(std::vector<RealRecord>& records, std::vector<HubSession>& sessions) {
  struct Process {
    std::string token;
    std::string name;
  };
  std::map<std::pair<std::string, std::string>, std::string> names;  // (worker id, process) -> name
  std::map<std::string, std::vector<Process>> running;                 // worker id -> its processes, in start order
  std::map<std::string, size_t> twins;
  size_t found = 0;
  for (RealRecord& r : records) {
    const std::string worker = string_field(r.fields, "worker");
    if (worker.empty()) continue;
    const std::string event = string_field(r.fields, "event");
    const std::string token = process_field(r.fields);
    std::vector<Process>& live = running[worker];
    if (event.starts_with("lab.")) {
      // Which process: the one it names, else the id's latest.
      auto target = live.end();
      for (auto it = live.begin(); it != live.end(); ++it) {
        if (token.empty() || it->token == token) target = it;
      }
      if (target == live.end()) continue;
      r.fields["worker"] = target->name;
      if (event == "lab.kill" || event == "lab.crash" || event == "lab.exit") live.erase(target);
      continue;
    }
    if (token.empty()) continue;
    const auto [known, added] = names.try_emplace({worker, token});
    if (added) {
      known->second = live.empty() ? worker : fmt::format("{}~{}", worker, ++twins[worker]);
      if (!live.empty()) ++found;
      live.push_back(Process{token, known->second});
    }
    r.fields["worker"] = known->second;
  }
  for (HubSession& s : sessions) {
    const auto named = names.find({s.worker, s.process});
    if (named != names.end()) s.worker = named->second;
  }
  return found;
}

NodeId RealNodes::of(const std::string& name) {
  const auto [it, added] = ids_.try_emplace(name, NodeId{static_cast<uint32_t>(names_.size())});
  if (added) names_.push_back(name);
  return it->second;
}

std::string RealNodes::name(NodeId node) const {
  return node.value < names_.size() ? names_[node.value] : fmt::format("node{}", node.value);
}

Instant replay_real_records(const std::vector<RealRecord>& records, const std::vector<HubSession>& sessions,
                            RealNodes& nodes, const std::function<void(const sim::TraceEvent&)>& observe) {
  std::map<std::string, uint64_t> incarnations;
  const std::vector<HubNote> hub = hub_notes(sessions);
  const NodeId hub_node = nodes.of("hub");
  const NodeId control = nodes.of("control");
  Instant end = Instant::zero();
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
      observe(e);
      end = std::max(end, at);
    }
  };
  for (const RealRecord& r : records) {
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
    if (event == "worker.start" || event == "lab.restart") {
      e.kind = event == "worker.start" ? EventKind::start : EventKind::restart;
      e.id = ++incarnations[node_name];
    } else if (set_note(event, r.fields, e, detail)) {
      if (event.starts_with("control.")) e.node = control;
    } else if (!set_lab_act(event, r.fields, nodes, e)) {
      // Other worker events (records, resets, ...) carry the node's readings only.
      e.kind = EventKind::note;
      e.label = "real.event";
    }
    e.detail = detail;
    observe(e);
    end = std::max(end, at);
  }
  emit_hub_until(INT64_MAX);
  return end;
}

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

std::vector<Duration> hub_crash_gaps(const std::vector<HubSession>& sessions, const std::vector<RealRecord>& records,
                                     size_t& unrecovered) {
  std::vector<Duration> out;
  for (const RealRecord& r : records) {
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

}  // namespace leaseproof::properties
