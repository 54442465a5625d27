// sweep.md: the sweep for people reading it in a repository or a CI log.
#include "reports/sweep_report.hpp"

#include <fmt/format.h>

#include "reports/sweep_text.hpp"
#include "scenarios/metrics.hpp"

namespace leaseproof::report {

namespace {

std::string cell_text(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string{"\\|"} : c == '\n' ? std::string{" "} : std::string{c};
  return out;
}

std::string row(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& cell : cells) out += " " + cell_text(cell) + " |";
  return out + "\n";
}

std::string table_head(const std::vector<std::string>& names) {
  std::string rule = "|";
  for (size_t i = 0; i < names.size(); ++i) rule += "---|";
  return row(names) + rule + "\n";
}

// A cell's first fields: its index and its axis values.
std::vector<std::string> cell_fields(const SweepCell& cell) {
  std::vector<std::string> fields{std::to_string(cell.index)};
  for (const nlohmann::json& value : cell.values) fields.push_back(axis_value_text(value));
  return fields;
}

// An invalid cell's row: its first fields, why, and empty columns.
std::string invalid_row(std::vector<std::string> fields, size_t columns, const SweepCell& cell) {
  fields.push_back("invalid: " + cell.invalid);
  fields.resize(columns, "");
  return row(fields);
}

std::string header(const SweepData& data, const SweepSummary& summary) {
  const SweepSpec& spec = data.spec;
  uint64_t invalid = 0;
  uint64_t runs = 0;
  for (const SweepCell& cell : data.cells) invalid += cell.valid() ? 0 : 1;
  for (const CellSummary& cell : summary.cells) runs += cell.seeds_run;
  std::string out = fmt::format("# Sweep: {}\n\n", spec.title.empty() ? spec.scenario : spec.title);
  out += fmt::format("Scenario `{}`, {} simulated per run, {} seeds per cell ({}..{}); {} cells ({} invalid), {} runs.\n\n",
                     spec.scenario, format_duration(spec.duration), spec.seeds, spec.first_seed,
                     spec.first_seed + spec.seeds - 1, data.cells.size(), invalid, runs);
  out += fmt::format("- Base parameters: `{}`\n- Axes: {}\n", spec.base.dump(), text::axes_summary(spec));
  if (summary.registry) {
    out += "- A registry sweep: the configuration axes are room_shards, ttl, algorithm and flaws; the others describe "
           "the workload, and a configuration must run with zero violations at each of their values.\n";
  } else {
    out += fmt::format("- Recovery target: crash p99 <= {}. Safety margin: {} (every skew and pause value up to it must be safe).\n",
                       format_duration(spec.recovery_target), format_duration(spec.safety_margin));
  }
  for (const Prices& prices : spec.prices) out += fmt::format("- Prices `{}`: {}.\n", prices.name, prices.source);
  out += fmt::format("- Monthly costs are the runs' average consumed capacity, {}.\n\n", text::fleet_text(spec));
  return out;
}

std::string unsafe_section(const SweepSummary& summary) {
  if (summary.unsafe.empty()) return "## Smallest unsafe skew and pause values\n\nThe grid has no skew or pause axis.\n\n";
  std::string out = "## Smallest unsafe skew and pause values\n\nThe smallest value at which single ownership broke, "
                    "per combination of the other axes, next to the margin the algorithm's own argument gives.\n\n";
  out += table_head({"axis", "other axes", "smallest unsafe value", "failing seeds there", "largest tried", "analytic margin"});
  for (const UnsafeValue& u : summary.unsafe) {
    out += row({u.axis, u.others, u.ran ? u.minimal_unsafe.value_or("none") : "not run (invalid cells)",
                u.minimal_unsafe ? fmt::format("{} of {}", u.failing_seeds, u.seeds) : "-", u.largest_tried, u.analytic});
  }
  return out + "\n";
}

double last_edge_ms() { return scenarios::histogram_edges_ms().back(); }

std::string registry_configurations_section(const SweepData& data, const SweepSummary& summary) {
  std::string out = fmt::format(
      "## Configurations\n\nEach configuration judged on all of its cells; cost with the `{}` prices and staleness "
      "p99 (s), the worst of its cells.\n\n",
      data.spec.prices.front().name);
  out += table_head({"configuration", "verdict", "$/month on demand", "$/month provisioned", "broadcast staleness p99 (s)",
                     "presence staleness p99 (s)", "runs judged"});
  for (const Configuration& c : summary.configurations) {
    const bool costed = c.seeds_judged > 0;
    out += row({c.label, c.verdict, costed ? text::money(c.on_demand_month) : "-",
                costed ? text::money(c.provisioned_month) : "-",
                text::staleness(c.staleness_broadcast_p99_ms, last_edge_ms()),
                text::staleness(c.staleness_presence_p99_ms, last_edge_ms()), std::to_string(c.seeds_judged)});
  }
  return out + "\n";
}

std::string registry_cells_section(const SweepData& data, const SweepSummary& summary) {
  const Prices& prices = data.spec.prices.front();
  std::vector<std::string> names{"cell"};
  for (const SweepAxis& axis : data.spec.axes) names.push_back(axis.name);
  for (const std::string name :
       {"seeds", "failing seeds", "broadcasts", "members per broadcast", "delivered / expected", "left out of the answer",
        "refused by the gateway", "connection-hours", "broadcast staleness p99 (s)", "presence staleness p99 (s)"}) {
    names.push_back(name);
  }
  names.push_back(fmt::format("{} $ per million broadcasts", prices.name));
  names.push_back(fmt::format("{} $ per thousand connection-hours", prices.name));
  std::string out =
      "## Registry cells\n\nSummed over each cell's seeds. Members per broadcast: the live members a broadcast had to "
      "reach, on average. Staleness: how long after a connection died a broadcast still posted to it (per dead "
      "connection), and how long after a user's last connection died presence still said online (per such stretch); "
      "p99 by nearest rank over a histogram, given as its bucket's upper edge. Cost: DynamoDB on demand, the "
      "broadcasts' member queries and prunes per broadcast, the joins, leaves, removals and presence queries per "
      "connection-hour.\n\n" +
      table_head(names);
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    std::vector<std::string> fields = cell_fields(cell);
    if (!cell.valid()) {
      out += invalid_row(std::move(fields), names.size(), cell);
      continue;
    }
    const RegistryCell& r = *s.registry;
    fields.insert(fields.end(),
                  {std::to_string(s.seeds_run),
                   s.failing_seeds == 0 ? "0" : fmt::format("{} ({})", s.failing_seeds, text::kinds(s)),
                   std::to_string(r.broadcasts), fmt::format("{:.1f}", r.members_per_broadcast()),
                   fmt::format("{} / {}", r.delivered, r.expected_deliveries), std::to_string(r.misses_not_in_answer),
                   std::to_string(r.misses_gateway), fmt::format("{:.1f}", r.connection_hours),
                   text::staleness(RegistryCell::p99_ms(r.staleness_broadcast), last_edge_ms()),
                   text::staleness(RegistryCell::p99_ms(r.staleness_presence), last_edge_ms()),
                   fmt::format("${:.4f}", r.dollars_per_million_broadcasts),
                   fmt::format("${:.4f}", r.dollars_per_thousand_connection_hours)});
    out += row(fields);
  }
  return out + "\n";
}

std::string configurations_section(const SweepData& data, const SweepSummary& summary) {
  std::string out = fmt::format(
      "## Configurations\n\nEach configuration judged on its cells within the safety margin; cost with the `{}` prices "
      "(the worst of those cells).\n\n",
      data.spec.prices.front().name);
  out += table_head({"configuration", "verdict", "$/month on demand", "$/month provisioned",
                     "crash p99, excused gaps included (s)", "runs judged"});
  for (const Configuration& c : summary.configurations) {
    const bool costed = c.seeds_judged > 0;
    out += row({c.label, c.verdict, costed ? text::money(c.on_demand_month) : "-",
                costed ? text::money(c.provisioned_month) : "-",
                c.crash_p99_ms ? text::seconds(*c.crash_p99_ms) : "-", std::to_string(c.seeds_judged)});
  }
  return out + "\n";
}

std::string cells_section(const SweepData& data, const SweepSummary& summary) {
  const Prices& prices = data.spec.prices.front();
  std::vector<std::string> names{"cell"};
  for (const SweepAxis& axis : data.spec.axes) names.push_back(axis.name);
  for (const std::string name : {"variant", "seeds", "failing seeds", "crash p50 / p99 / max (s)", "crash bound (s)",
                                 "handover p99 (s)", "WCU/s", "RCU/s"}) {
    names.push_back(name);
  }
  names.push_back(fmt::format("{} $/month on demand", prices.name));
  names.push_back(fmt::format("{} $/month provisioned", prices.name));
  std::string out = "## Cells\n\nRecovery: nearest-rank percentiles over every judged gap of every seed; WCU/s and RCU/s "
                    "as simulated (all tables and GSIs).\n\n" + table_head(names);
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    std::vector<std::string> fields = cell_fields(cell);
    if (!cell.valid()) {
      out += invalid_row(std::move(fields), names.size(), cell);
      continue;
    }
    const Rates rates = text::total_rates(s);
    const auto graceful = s.recovery.find("graceful");
    fields.insert(fields.end(),
                  {s.variant, std::to_string(s.seeds_run),
                   s.failing_seeds == 0 ? "0" : fmt::format("{} ({})", s.failing_seeds, text::kinds(s)),
                   text::gap_triple(s, "crash"), text::bound(s, "crash"),
                   graceful == s.recovery.end() || graceful->second.gaps == 0 ? "-" : text::seconds(graceful->second.p99_ms),
                   text::rate(rates.wcu_per_s), text::rate(rates.rcu_per_s), text::money(s.total_cost[0].on_demand()),
                   text::money(s.total_cost[0].provisioned())});
    out += row(fields);
  }
  return out + "\n";
}

std::string recovery_section(const SweepData& data, const SweepSummary& summary) {
  std::string out = "## Recovery by cause\n\nGaps judged against their path's bound (the watcher's where another worker "
                    "watched the lease when it was lost, the sweep's else); excused gaps overlapped another fault and "
                    "are counted apart, then together with the judged ones: the configurations are ranked and judged "
                    "by that p99 (graceful = handover on release or drain).\n\n";
  out += table_head({"cell", "cause", "gaps", "p50 (s)", "p99 (s)", "max (s)", "bound (s)", "beyond bound", "excused (max s)",
                     "p99 with excused (s)"});
  for (const SweepCell& cell : data.cells) {
    for (const auto& [cause, g] : summary.cells[cell.index].recovery) {
      out += row({std::to_string(cell.index), cause, std::to_string(g.gaps), g.gaps ? text::seconds(g.p50_ms) : "-",
                  g.gaps ? text::seconds(g.p99_ms) : "-", g.gaps ? text::seconds(g.max_ms) : "-",
                  text::bound_of(g), std::to_string(g.beyond_bound),
                  fmt::format("{} ({})", g.excused, g.excused ? text::seconds(g.excused_max_ms) : "-"),
                  g.all_gaps() ? text::seconds(g.with_excused_p99_ms) : "-"});
    }
  }
  return out + "\n";
}

std::string cost_check(const SweepSpec& spec) {
  std::string out = "Cost model check: 100 WCU/s (the articles' 500 connections x one write per 5 s) costs";
  for (size_t p = 0; p < spec.prices.size(); ++p) {
    const MonthlyCost cost = monthly_cost(Rates{100, 0}, spec.prices[p]);
    out += fmt::format("{} {} on demand and {} provisioned with the `{}` prices", p == 0 ? "" : ";",
                       text::money(cost.on_demand()), text::money(cost.provisioned()), spec.prices[p].name);
  }
  return out + ".\n\n";
}

std::string capacity_section(const SweepData& data, const SweepSummary& summary) {
  std::vector<std::string> names{"cell", "table / GSI", "WCU/s", "RCU/s"};
  for (const Prices& prices : data.spec.prices) {
    names.push_back(prices.name + " on demand");
    names.push_back(prices.name + " provisioned");
  }
  names.push_back("share of on demand");
  std::string out = fmt::format("## DynamoDB capacity and monthly cost by table and GSI\n\nRates as simulated; costs {}. "
                                "Provisioned = the average rate provisioned all month (a floor: no headroom).\n\n",
                                text::fleet_text(data.spec));
  out += cost_check(data.spec) + table_head(names);
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    for (const CapacityUse& use : s.capacity) {
      std::vector<std::string> fields{std::to_string(cell.index), use.name(), text::rate(use.rates.wcu_per_s),
                                      text::rate(use.rates.rcu_per_s)};
      for (const MonthlyCost& cost : use.cost) {
        fields.push_back(text::money(cost.on_demand()));
        fields.push_back(text::money(cost.provisioned()));
      }
      const double total = s.total_cost[0].on_demand();
      fields.push_back(total > 0 ? fmt::format("{:.0f}%", 100 * use.cost[0].on_demand() / total) : "-");
      out += row(fields);
    }
  }
  return out + "\n";
}

std::string reproduce_section(const SweepData& data, const SweepSummary& summary) {
  std::string out = "## Reproduce\n\nThe lowest failing seed of each cell, per property:\n\n";
  bool any = false;
  for (const SweepCell& cell : data.cells) {
    for (const auto& [kind, k] : summary.cells[cell.index].kinds) {
      out += fmt::format("- cell {} ({}), {}: {} of {} seeds failed; lowest seed {}:\n  `{}`\n", cell.index,
                         cell_label(data.spec, cell), kind, k.failing_seeds, summary.cells[cell.index].seeds_run,
                         k.lowest_seed, k.reproduce);
      any = true;
    }
  }
  if (!any) out += "No seed failed.\n";
  return out + "\n";
}

std::string invalid_section(const SweepData& data) {
  std::string out;
  for (const SweepCell& cell : data.cells) {
    if (!cell.valid()) out += fmt::format("- cell {} ({}): {}\n", cell.index, cell_label(data.spec, cell), cell.invalid);
  }
  return out.empty() ? out : "## Invalid cells\n\nRejected by the scenario's validation, not run:\n\n" + out + "\n";
}

}  // namespace

std::string render_markdown(const SweepData& data, const SweepSummary& summary) {
  if (summary.registry) {
    return header(data, summary) + "## Recommendation\n\n" + summary.recommendation + "\n\n" +
           registry_configurations_section(data, summary) + registry_cells_section(data, summary) +
           capacity_section(data, summary) + reproduce_section(data, summary) + invalid_section(data);
  }
  return header(data, summary) + "## Recommendation\n\n" + summary.recommendation + "\n\n" + unsafe_section(summary) +
         configurations_section(data, summary) + cells_section(data, summary) + recovery_section(data, summary) +
         capacity_section(data, summary) + reproduce_section(data, summary) + invalid_section(data);
}

}  // namespace leaseproof::report
