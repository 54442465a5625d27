#pragma once
// Number and label formatting shared by the sweep's Markdown and HTML
// reports, so that both say the same thing the same way. Private to
// reports/.

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "reports/sweep_report.hpp"

namespace leaseproof::report::text {

inline std::string seconds(double ms) { return fmt::format("{:.2f}", ms / 1000); }
inline std::string money(double dollars) { return fmt::format("${:.2f}", dollars); }
inline std::string rate(double per_s) { return fmt::format("{:.2f}", per_s); }

// "p50 / p99 / max" of a cause in seconds, or "-" without gaps.
inline std::string gap_triple(const CellSummary& cell, const std::string& cause) {
  const auto it = cell.recovery.find(cause);
  if (it == cell.recovery.end() || it->second.gaps == 0) return "-";
  const GapStats& g = it->second;
  return fmt::format("{} / {} / {}", seconds(g.p50_ms), seconds(g.p99_ms), seconds(g.max_ms));
}

// A cause's bound: "27.22 (201 of 203 gaps), else 96.93" where the watcher's
// path judged some of its gaps, the sweep's judging the rest.
inline std::string bound_of(const GapStats& g) {
  if (!g.bound_ms) return "-";
  if (!g.watcher_bound_ms || g.watcher_gaps == 0) return seconds(*g.bound_ms);
  // Most gaps of a fleet with watchers are judged by theirs.
  return fmt::format("{} ({} of {} gaps), else {}", seconds(*g.watcher_bound_ms), g.watcher_gaps, g.gaps,
                     seconds(*g.bound_ms));
}

inline std::string bound(const CellSummary& cell, const std::string& cause) {
  const auto it = cell.recovery.find(cause);
  return it == cell.recovery.end() ? "-" : bound_of(it->second);
}

// "single ownership 12, liveness 1" (failing seeds per property), or "none".
inline std::string kinds(const CellSummary& cell) {
  std::string out;
  for (const auto& [kind, k] : cell.kinds) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", kind, k.failing_seeds);
  return out.empty() ? "none" : out;
}

// Total capacity rates of a cell (tables and GSIs together), as simulated.
inline Rates total_rates(const CellSummary& cell) {
  Rates total;
  for (const CapacityUse& use : cell.capacity) {
    total.wcu_per_s += use.rates.wcu_per_s;
    total.rcu_per_s += use.rates.rcu_per_s;
  }
  return total;
}

inline std::string axes_summary(const SweepSpec& spec) {
  std::string out;
  for (const SweepAxis& axis : spec.axes) {
    std::string values;
    for (const nlohmann::json& value : axis.values) values += (values.empty() ? "" : ", ") + axis_value_text(value);
    out += fmt::format("{}{} {{{}}}", out.empty() ? "" : " x ", axis.name, values);
  }
  return out.empty() ? "none (one cell)" : out;
}

inline std::string fleet_text(const SweepSpec& spec) {
  return spec.price_connections
             ? fmt::format("scaled to {} connections (price_connections)", *spec.price_connections)
             : std::string{"for the fleet as simulated"};
}

// A registry staleness p99 (a histogram's upper edge): "<= 2.00", "> 86400.00"
// above the last edge, "-" without samples.
inline std::string staleness(const std::optional<double>& p99_ms, double last_edge_ms) {
  if (!p99_ms) return "-";
  if (*p99_ms > last_edge_ms) return "> " + seconds(last_edge_ms);
  return "<= " + seconds(*p99_ms);
}

// A p99 in JSON: the edge in ms, "inf" above the last edge, null without samples.
inline nlohmann::json p99_json(const std::optional<double>& p99_ms) {
  if (!p99_ms) return nullptr;
  if (*p99_ms > 1e300) return "inf";
  return *p99_ms;
}

}  // namespace leaseproof::report::text
