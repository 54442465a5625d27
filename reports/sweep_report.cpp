// The sweep's report files other than the HTML page: sweep.json (raw
// records and derived figures), sweep.csv (a row per cell), sweep.md; and
// writing them so that no reader ever sees half a report.
#include "reports/sweep_report.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/sweep_text.hpp"

namespace leaseproof::report {

namespace {

// Keys whose object values are written on one line, and keys whose arrays
// of objects have one element a line: readable, and short enough to diff.
const std::set<std::string>& compact_values() {
  static const std::set<std::string> keys{"parameters", "base",  "axes",     "violations", "requests",  "monthly",
                                          "cost_check", "crash", "pause",    "graceful",   "lease_lost"};
  return keys;
}
const std::set<std::string>& compact_elements() {
  static const std::set<std::string> keys{"seeds", "axes", "prices", "dynamodb", "configurations", "minimal_unsafe"};
  return keys;
}

bool all_scalars(const nlohmann::json& array) {
  for (const nlohmann::json& element : array) {
    if (element.is_structured()) return false;
  }
  return true;
}

void write_json(std::string& out, const nlohmann::json& value, size_t indent, const std::string& key) {
  const std::string pad(indent + 2, ' ');
  if (value.is_object() && !value.empty() && !compact_values().contains(key)) {
    out += "{\n";
    size_t i = 0;
    for (const auto& [name, child] : value.items()) {
      out += pad + nlohmann::json(name).dump() + ": ";
      write_json(out, child, indent + 2, name);
      out += ++i < value.size() ? ",\n" : "\n";
    }
    out += std::string(indent, ' ') + "}";
  } else if (value.is_array() && !value.empty() && !all_scalars(value)) {
    out += "[\n";
    for (size_t i = 0; i < value.size(); ++i) {
      out += pad;
      if (compact_elements().contains(key)) {
        out += value[i].dump();
      } else {
        write_json(out, value[i], indent + 2, {});
      }
      out += i + 1 < value.size() ? ",\n" : "\n";
    }
    out += std::string(indent, ' ') + "]";
  } else {
    out += value.dump();
  }
}

nlohmann::json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json cost_json(const SweepSpec& spec, const std::vector<MonthlyCost>& costs) {
  nlohmann::json json = nlohmann::json::object();
  for (size_t p = 0; p < spec.prices.size() && p < costs.size(); ++p) {
    json[spec.prices[p].name] = {{"on_demand", costs[p].on_demand()},
                                 {"on_demand_write", costs[p].on_demand_write},
                                 {"on_demand_read", costs[p].on_demand_read},
                                 {"provisioned", costs[p].provisioned()},
                                 {"provisioned_write", costs[p].provisioned_write},
                                 {"provisioned_read", costs[p].provisioned_read}};
  }
  return json;
}

nlohmann::json registry_json(const RegistryCell& r) {
  return {{"broadcasts", r.broadcasts},
          {"members_per_broadcast", r.members_per_broadcast()},
          {"expected_deliveries", r.expected_deliveries},
          {"delivered", r.delivered},
          {"misses_not_in_answer", r.misses_not_in_answer},
          {"misses_gateway", r.misses_gateway},
          {"connections", r.connections},
          {"connection_hours", r.connection_hours},
          {"broadcast_units", {{"read", r.broadcast_read_units}, {"write", r.broadcast_write_units}}},
          {"connection_units", {{"read", r.connection_read_units}, {"write", r.connection_write_units}}},
          {"dollars_per_million_broadcasts", r.dollars_per_million_broadcasts},
          {"dollars_per_thousand_connection_hours", r.dollars_per_thousand_connection_hours},
          {"staleness_broadcast_p99_ms", text::p99_json(RegistryCell::p99_ms(r.staleness_broadcast))},
          {"staleness_presence_p99_ms", text::p99_json(RegistryCell::p99_ms(r.staleness_presence))},
          {"staleness_ms", {{"broadcast", r.staleness_broadcast}, {"presence", r.staleness_presence}}}};
}

nlohmann::json cell_summary_json(const SweepSpec& spec, const CellSummary& cell) {
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, k] : cell.kinds) {
    kinds[kind] = {{"failing_seeds", k.failing_seeds}, {"violations", k.violations}, {"lowest_seed", k.lowest_seed},
                   {"reproduce", k.reproduce}};
  }
  nlohmann::json recovery = nlohmann::json::object();
  for (const auto& [cause, g] : cell.recovery) {
    recovery[cause] = {{"gaps", g.gaps}, {"p50_ms", g.p50_ms}, {"p99_ms", g.p99_ms}, {"max_ms", g.max_ms},
                       {"bound_ms", optional_number(g.bound_ms)}, {"watcher_gaps", g.watcher_gaps},
                       {"watcher_bound_ms", optional_number(g.watcher_bound_ms)}, {"beyond_bound", g.beyond_bound},
                       {"excused", g.excused}, {"excused_p99_ms", g.excused_p99_ms}, {"excused_max_ms", g.excused_max_ms},
                       {"with_excused_p99_ms", g.with_excused_p99_ms}, {"with_excused_max_ms", g.with_excused_max_ms}};
  }
  nlohmann::json capacity = nlohmann::json::array();
  for (const CapacityUse& use : cell.capacity) {
    capacity.push_back({{"name", use.name()}, {"table", use.table}, {"index", use.index}, {"wcu", use.wcu},
                        {"rcu", use.rcu}, {"wcu_per_s", use.rates.wcu_per_s}, {"rcu_per_s", use.rates.rcu_per_s},
                        {"monthly", cost_json(spec, use.cost)}});
  }
  nlohmann::json json = {{"seeds_run", cell.seeds_run},
          {"failing_seeds", cell.failing_seeds},
          {"violations", kinds},
          {"recovery", recovery},
          {"dynamodb", capacity},
          {"requests", cell.requests},
          {"throttled", cell.throttled},
          {"conditional_check_failures", cell.conditional_check_failures},
          {"simulated_s", cell.simulated_s},
          {"connections", cell.connections},
          {"cost_scale", cell.cost_scale},
          {"monthly", cost_json(spec, cell.total_cost)},
          {"variant", cell.variant},
          {"heartbeat_s", optional_number(cell.heartbeat_s)},
          {"lease_s", optional_number(cell.lease_s)}};
  if (cell.registry) json["registry"] = registry_json(*cell.registry);
  return json;
}

nlohmann::json derived_json(const SweepData& data, const SweepSummary& summary,
                            const std::optional<OwnershipTimeline>& timeline) {
  nlohmann::json configurations = nlohmann::json::array();
  for (const Configuration& c : summary.configurations) {
    configurations.push_back({{"label", c.label}, {"cells", c.cells}, {"judged_cells", c.judged},
                              {"qualifies", c.qualifies}, {"verdict", c.verdict},
                              {"on_demand_month", c.on_demand_month}, {"provisioned_month", c.provisioned_month},
                              {"crash_p99_ms", optional_number(c.crash_p99_ms)},
                              {"crash_bound_ms", optional_number(c.crash_bound_ms)}, {"seeds_judged", c.seeds_judged}});
    if (summary.registry) {
      configurations.back()["staleness_broadcast_p99_ms"] = text::p99_json(c.staleness_broadcast_p99_ms);
      configurations.back()["staleness_presence_p99_ms"] = text::p99_json(c.staleness_presence_p99_ms);
    }
  }
  nlohmann::json unsafe = nlohmann::json::array();
  for (const UnsafeValue& u : summary.unsafe) {
    unsafe.push_back({{"axis", u.axis}, {"others", u.others}, {"cells", u.cells},
                      {"minimal_unsafe", u.minimal_unsafe ? nlohmann::json(*u.minimal_unsafe) : nlohmann::json(nullptr)},
                      {"failing_seeds", u.failing_seeds}, {"seeds", u.seeds}, {"largest_tried", u.largest_tried},
                      {"ran", u.ran},
                      {"analytic_margin", u.analytic},
                      {"analytic_margin_s", u.analytic_limit ? nlohmann::json(static_cast<double>(u.analytic_limit->ns()) / 1e9)
                                                             : nlohmann::json(nullptr)}});
  }
  nlohmann::json recommendation = {
      {"text", summary.recommendation},
      {"configuration", summary.recommended ? nlohmann::json(summary.configurations[*summary.recommended].label)
                                            : nlohmann::json(nullptr)}};
  nlohmann::json timeline_json = nullptr;
  if (timeline) {
    timeline_json = {{"cell", timeline->cell}, {"seed", timeline->seed}, {"reason", timeline->reason},
                     {"reproduce", timeline->reproduce}, {"intervals", timeline->intervals.size()}};
  }
  nlohmann::json cost_check = nlohmann::json::object();
  for (const Prices& prices : data.spec.prices) {
    const MonthlyCost cost = monthly_cost(Rates{100, 0}, prices);
    cost_check[prices.name] = {{"wcu_per_s", 100}, {"on_demand", cost.on_demand()}, {"provisioned", cost.provisioned()}};
  }
  return {{"configurations", configurations},
          {"recommendation", recommendation},
          {"minimal_unsafe", unsafe},
          {"timeline", timeline_json},
          {"cost_check", cost_check}};
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string{"\"\""} : std::string{c};
  return quoted + "\"";
}

std::string csv_row(const std::vector<std::string>& fields) {
  std::string row;
  for (size_t i = 0; i < fields.size(); ++i) row += (i == 0 ? "" : ",") + csv_field(fields[i]);
  return row + "\n";
}

std::string fixed(double value, int decimals) { return fmt::format("{:.{}f}", value, decimals); }

std::vector<std::string> csv_header(const SweepData& data, const SweepSummary& summary) {
  std::vector<std::string> header{"cell"};
  for (const SweepAxis& axis : data.spec.axes) header.push_back(axis.name);
  for (const char* name : {"status", "invalid_reason", "variant", "seeds", "failing_seeds"}) header.emplace_back(name);
  for (const std::string& kind : summary.kinds) header.push_back("failing_seeds:" + kind);
  if (summary.registry) {
    for (const char* name : {"broadcasts", "members_per_broadcast", "expected_deliveries", "delivered",
                             "misses_not_in_answer", "misses_gateway", "connections", "connection_hours",
                             "staleness_broadcast_p99_s", "staleness_presence_p99_s", "dollars_per_million_broadcasts",
                             "dollars_per_thousand_connection_hours"}) {
      header.emplace_back(name);
    }
  }
  for (const std::string& cause : summary.registry ? std::vector<std::string>{} : recovery_causes()) {
    for (const char* figure :
         {"gaps", "p50_s", "p99_s", "max_s", "bound_s", "watcher_gaps", "watcher_bound_s", "beyond_bound", "excused",
          "excused_max_s", "p99_with_excused_s"}) {
      header.push_back(fmt::format("{}_{}", cause, figure));
    }
  }
  for (const std::string& name : summary.capacity_names) {
    header.push_back(name + ":wcu_per_s");
    header.push_back(name + ":rcu_per_s");
  }
  for (const Prices& prices : data.spec.prices) {
    header.push_back(prices.name + ":on_demand_month");
    header.push_back(prices.name + ":provisioned_month");
  }
  return header;
}

std::vector<std::string> csv_cell(const SweepData& data, const SweepSummary& summary, const SweepCell& cell) {
  const CellSummary& s = summary.cells[cell.index];
  std::vector<std::string> row{std::to_string(cell.index)};
  for (const nlohmann::json& value : cell.values) row.push_back(axis_value_text(value));
  row.push_back(cell.valid() ? "ok" : "invalid");
  row.push_back(cell.invalid);
  row.push_back(s.variant);
  row.push_back(std::to_string(s.seeds_run));
  row.push_back(std::to_string(s.failing_seeds));
  for (const std::string& kind : summary.kinds) row.push_back(std::to_string(s.failing(kind)));
  if (summary.registry) {
    const RegistryCell& r = *s.registry;
    auto p99 = [](const std::vector<uint64_t>& histogram) {
      const std::optional<double> ms = RegistryCell::p99_ms(histogram);
      return !ms ? std::string{} : std::isinf(*ms) ? std::string{"inf"} : fixed(*ms / 1000, 3);
    };
    row.insert(row.end(), {std::to_string(r.broadcasts), fixed(r.members_per_broadcast(), 2),
                           std::to_string(r.expected_deliveries), std::to_string(r.delivered),
                           std::to_string(r.misses_not_in_answer), std::to_string(r.misses_gateway),
                           std::to_string(r.connections), fixed(r.connection_hours, 3), p99(r.staleness_broadcast),
                           p99(r.staleness_presence), fixed(r.dollars_per_million_broadcasts, 4),
                           fixed(r.dollars_per_thousand_connection_hours, 4)});
  }
  for (const std::string& cause : summary.registry ? std::vector<std::string>{} : recovery_causes()) {
    const auto it = s.recovery.find(cause);
    const GapStats none;
    const GapStats& g = it == s.recovery.end() ? none : it->second;
    const std::string excused_max = g.excused > 0 ? fixed(g.excused_max_ms / 1000, 3) : "";
    const std::string with_excused = g.all_gaps() > 0 ? fixed(g.with_excused_p99_ms / 1000, 3) : "";
    if (g.gaps == 0) {
      row.insert(row.end(), {"0", "", "", "", "", "0", "", "0", std::to_string(g.excused), excused_max, with_excused});
      continue;
    }
    row.insert(row.end(), {std::to_string(g.gaps), fixed(g.p50_ms / 1000, 3), fixed(g.p99_ms / 1000, 3),
                           fixed(g.max_ms / 1000, 3), g.bound_ms ? fixed(*g.bound_ms / 1000, 3) : "",
                           std::to_string(g.watcher_gaps),
                           g.watcher_bound_ms ? fixed(*g.watcher_bound_ms / 1000, 3) : "",
                           std::to_string(g.beyond_bound), std::to_string(g.excused), excused_max, with_excused});
  }
  for (const std::string& name : summary.capacity_names) {
    const auto it = std::find_if(s.capacity.begin(), s.capacity.end(), [&](const CapacityUse& u) { return u.name() == name; });
    row.push_back(it == s.capacity.end() ? "" : fixed(it->rates.wcu_per_s, 3));
    row.push_back(it == s.capacity.end() ? "" : fixed(it->rates.rcu_per_s, 3));
  }
  for (size_t p = 0; p < data.spec.prices.size(); ++p) {
    row.push_back(cell.valid() ? fixed(s.total_cost[p].on_demand(), 2) : "");
    row.push_back(cell.valid() ? fixed(s.total_cost[p].provisioned(), 2) : "");
  }
  return row;
}

}  // namespace

std::string dump_report_json(const nlohmann::json& value) {
  std::string out;
  write_json(out, value, 0, {});
  return out + "\n";
}

std::string render_json(const SweepData& data, const SweepSummary& summary, const std::optional<OwnershipTimeline>& timeline) {
  nlohmann::json json = raw_json(data);
  for (nlohmann::json& cell : json["cells"]) {
    const size_t index = cell["index"].get<size_t>();
    cell["summary"] = cell_summary_json(data.spec, summary.cells[index]);
  }
  json["derived"] = derived_json(data, summary, timeline);
  return dump_report_json(json);
}

std::string render_csv(const SweepData& data, const SweepSummary& summary) {
  std::string csv = csv_row(csv_header(data, summary));
  for (const SweepCell& cell : data.cells) csv += csv_row(csv_cell(data, summary, cell));
  return csv;
}

std::map<std::string, std::string> render_reports(const SweepData& data) {
  if (data.shard) return {{"sweep.json", dump_report_json(raw_json(data))}};
  return render_reports(data, summarize(data));
}

std::map<std::string, std::string> render_reports(const SweepData& data, const SweepSummary& summary) {
  if (data.shard) return {{"sweep.json", dump_report_json(raw_json(data))}};
  const std::optional<OwnershipTimeline> timeline = record_timeline(data, summary);
  return {{"sweep.json", render_json(data, summary, timeline)},
          {"sweep.csv", render_csv(data, summary)},
          {"sweep.md", render_markdown(data, summary)},
          {"sweep.html", render_html(data, summary, timeline)}};
}

void write_report_files(const std::string& directory, const std::map<std::string, std::string>& files) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) throw std::runtime_error(fmt::format("--out: cannot create '{}': {}", directory, error.message()));
  std::vector<std::pair<fs::path, fs::path>> renames;
  auto remove_temporaries = [&] {
    for (const auto& [temporary, final_path] : renames) fs::remove(temporary, error);
  };
  for (const auto& [name, content] : files) {
    const fs::path final_path = fs::path{directory} / name;
    const fs::path temporary = fs::path{directory} / ("." + name + ".tmp");
    renames.emplace_back(temporary, final_path);
    std::ofstream out{temporary, std::ios::binary | std::ios::trunc};
    out << content;
    out.close();
    if (!out) {
      remove_temporaries();
      throw std::runtime_error(fmt::format("--out: cannot write '{}'", temporary.string()));
    }
  }
  for (const auto& [temporary, final_path] : renames) {
    fs::rename(temporary, final_path, error);
    if (error) {
      remove_temporaries();
      throw std::runtime_error(fmt::format("--out: renaming '{}' to '{}' failed: {}", temporary.string(),
                                           final_path.string(), error.message()));
    }
  }
}

}  // namespace leaseproof::report
