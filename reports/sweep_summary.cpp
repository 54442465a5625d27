// A sweep's derived figures, computed from its raw records alone, always in
// cell and seed order, so that the same records give the same bytes.
#include "reports/sweep_report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "scenarios/lease.hpp"
#include "scenarios/metrics.hpp"
#include "scenarios/registry.hpp"

namespace leaseproof::report {

namespace {

constexpr const char* kSingleOwnership = "single ownership";

const nlohmann::json& field_or_empty(const nlohmann::json& object, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  return object.is_object() && object.contains(key) ? object[key] : empty;
}

double number_or_zero(const nlohmann::json& object, const char* key) {
  return object.is_object() && object.contains(key) && object[key].is_number() ? object[key].get<double>() : 0;
}

void count_violations(const SeedRecord& record, CellSummary& cell) {
  const nlohmann::json& violations = field_or_empty(record, "violations");
  if (violations.empty()) return;
  ++cell.failing_seeds;
  for (const auto& [kind, count] : violations.items()) {
    KindSummary& summary = cell.kinds[kind];
    if (summary.failing_seeds == 0) {  // records come in seed order: the first is the lowest
      summary.lowest_seed = record["seed"].get<uint64_t>();
      summary.reproduce = record.value("reproduce", std::string{});
    }
    ++summary.failing_seeds;
    summary.violations += count.get<uint64_t>();
  }
}

struct GapLists {
  std::vector<double> judged;
  std::vector<double> excused;
  std::vector<double> watcher;  // of judged, those judged by the watcher's bound
  std::optional<double> bound_ms;
  std::optional<double> watcher_bound_ms;
};

// The largest of a seed's stated bounds.
void widen(std::optional<double>& bound, const nlohmann::json& figures, const char* name) {
  if (figures.contains(name)) bound = std::max(bound.value_or(0.0), figures[name].get<double>());
}

uint64_t count_beyond(const std::vector<double>& sorted, double bound) {
  return static_cast<uint64_t>(sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), bound));
}

void collect_gaps(const SeedRecord& record, std::map<std::string, GapLists>& gaps) {
  for (const auto& [cause, figures] : field_or_empty(field_or_empty(record, "metrics"), "recovery").items()) {
    GapLists& lists = gaps[cause];
    for (const nlohmann::json& gap : field_or_empty(figures, "gaps_ms")) lists.judged.push_back(gap.get<double>());
    for (const nlohmann::json& gap : field_or_empty(figures, "excused_gaps_ms")) lists.excused.push_back(gap.get<double>());
    for (const nlohmann::json& gap : field_or_empty(figures, "watcher_gaps_ms")) lists.watcher.push_back(gap.get<double>());
    widen(lists.bound_ms, figures, "bound_ms");
    widen(lists.watcher_bound_ms, figures, "watcher_bound_ms");
  }
}

GapStats gap_stats(GapLists lists) {
  std::sort(lists.judged.begin(), lists.judged.end());
  std::sort(lists.excused.begin(), lists.excused.end());
  GapStats stats;
  stats.gaps = lists.judged.size();
  stats.excused = lists.excused.size();
  stats.bound_ms = lists.bound_ms;
  std::sort(lists.watcher.begin(), lists.watcher.end());
  stats.watcher_gaps = lists.watcher.size();
  stats.watcher_bound_ms = lists.watcher_bound_ms;
  if (!lists.judged.empty()) {
    stats.p50_ms = nearest_rank(lists.judged, 50);
    stats.p99_ms = nearest_rank(lists.judged, 99);
    stats.max_ms = lists.judged.back();
  }
  if (!lists.excused.empty()) {
    stats.excused_p99_ms = nearest_rank(lists.excused, 99);
    stats.excused_max_ms = lists.excused.back();
  }
  std::vector<double> all = lists.judged;
  all.insert(all.end(), lists.excused.begin(), lists.excused.end());
  std::sort(all.begin(), all.end());
  if (!all.empty()) {
    stats.with_excused_p99_ms = nearest_rank(all, 99);
    stats.with_excused_max_ms = all.back();
  }
  if (stats.bound_ms) {
    // The sweep's bound judges the gaps the watcher's does not.
    stats.beyond_bound = count_beyond(lists.judged, *stats.bound_ms) - count_beyond(lists.watcher, *stats.bound_ms);
  }
  if (stats.watcher_bound_ms) stats.beyond_bound += count_beyond(lists.watcher, *stats.watcher_bound_ms);
  return stats;
}

// Capacity units and requests of one run, added to the cell's totals; a
// base table and each of its GSIs are separate lines (the GSI's share of
// the cost is the point of showing them).
void add_capacity(const SeedRecord& record, std::map<std::string, CapacityUse>& uses, CellSummary& cell) {
  const nlohmann::json& dynamodb = field_or_empty(field_or_empty(record, "metrics"), "dynamodb");
  cell.simulated_s += number_or_zero(dynamodb, "simulated_s");
  for (const auto& [table, figures] : field_or_empty(dynamodb, "tables").items()) {
    CapacityUse& base = uses[table];
    base.table = table;
    base.wcu += number_or_zero(figures, "wcu");
    base.rcu += number_or_zero(figures, "rcu");
    for (const auto& [index, units] : field_or_empty(figures, "indexes").items()) {
      CapacityUse& gsi = uses[table + "/" + index];
      gsi.table = table;
      gsi.index = index;
      gsi.wcu += number_or_zero(units, "wcu");
      gsi.rcu += number_or_zero(units, "rcu");
    }
    for (const auto& [operation, count] : field_or_empty(figures, "requests").items()) {
      cell.requests[operation] += count.get<uint64_t>();
    }
    cell.throttled += static_cast<uint64_t>(number_or_zero(figures, "throttled"));
    cell.conditional_check_failures += static_cast<uint64_t>(number_or_zero(figures, "conditional_check_failures"));
  }
}

void price_capacity(const SweepSpec& spec, CellSummary& cell) {
  if (spec.price_connections && cell.connections > 0) {
    cell.cost_scale = static_cast<double>(*spec.price_connections) / static_cast<double>(cell.connections);
  }
  cell.total_cost.assign(spec.prices.size(), MonthlyCost{});
  for (CapacityUse& use : cell.capacity) {
    if (cell.simulated_s > 0) use.rates = Rates{use.wcu / cell.simulated_s, use.rcu / cell.simulated_s};
    const Rates priced{use.rates.wcu_per_s * cell.cost_scale, use.rates.rcu_per_s * cell.cost_scale};
    for (size_t p = 0; p < spec.prices.size(); ++p) {
      use.cost.push_back(monthly_cost(priced, spec.prices[p]));
      cell.total_cost[p] += use.cost.back();
    }
  }
}

void describe_lease(const SweepSpec& spec, const SweepCell& cell, CellSummary& summary) {
  const std::optional<scenarios::LeaseScenarioOptions> options = lease_options_of(spec, cell.parameters);
  if (!options) return;
  summary.heartbeat_s = static_cast<double>(options->lease.heartbeat_interval.ns()) / 1e9;
  summary.lease_s = static_cast<double>(options->lease.lease_duration.ns()) / 1e9;
  summary.variant = options->lease.algorithm == lease::Algorithm::seed
                        ? "seed"
                        : fmt::format("{}/{}", lease::to_string(options->lease.algorithm),
                                      lease::to_string(options->lease.expiry_mode));
}

void add_histogram(const nlohmann::json& counts, std::vector<uint64_t>& sum) {
  if (!counts.is_array()) return;
  if (sum.size() < counts.size()) sum.resize(counts.size(), 0);
  for (size_t i = 0; i < counts.size(); ++i) sum[i] += counts[i].get<uint64_t>();
}

void add_registry(const SeedRecord& record, RegistryCell& cell) {
  const nlohmann::json& r = field_or_empty(field_or_empty(record, "metrics"), "registry");
  auto count = [&](const char* key) { return static_cast<uint64_t>(number_or_zero(r, key)); };
  cell.broadcasts += count("broadcasts");
  cell.expected_deliveries += count("expected_deliveries");
  cell.delivered += count("delivered");
  cell.misses_not_in_answer += count("misses_not_in_answer");
  cell.misses_gateway += count("misses_gateway");
  cell.connections += count("connections");
  cell.connection_hours += number_or_zero(r, "connection_s") / 3600;
  cell.broadcast_read_units += number_or_zero(field_or_empty(r, "broadcast_units"), "read");
  cell.broadcast_write_units += number_or_zero(field_or_empty(r, "broadcast_units"), "write");
  cell.connection_read_units += number_or_zero(field_or_empty(r, "connection_units"), "read");
  cell.connection_write_units += number_or_zero(field_or_empty(r, "connection_units"), "write");
  const nlohmann::json& staleness = field_or_empty(r, "staleness_ms");
  add_histogram(staleness.value("broadcast", nlohmann::json{}), cell.staleness_broadcast);
  add_histogram(staleness.value("presence", nlohmann::json{}), cell.staleness_presence);
}

// Request units at on-demand prices, in dollars.
double on_demand_dollars(const Prices& prices, double read_units, double write_units) {
  return (read_units * prices.on_demand_read_per_million + write_units * prices.on_demand_write_per_million) / 1e6;
}

void price_registry(const SweepSpec& spec, RegistryCell& cell) {
  const Prices& prices = spec.prices.front();
  if (cell.broadcasts > 0) {
    cell.dollars_per_million_broadcasts =
        on_demand_dollars(prices, cell.broadcast_read_units, cell.broadcast_write_units) /
        static_cast<double>(cell.broadcasts) * 1e6;
  }
  if (cell.connection_hours > 0) {
    cell.dollars_per_thousand_connection_hours =
        on_demand_dollars(prices, cell.connection_read_units, cell.connection_write_units) / cell.connection_hours * 1e3;
  }
}

CellSummary summarize_cell(const SweepSpec& spec, const SweepCell& cell, const std::vector<SeedRecord>& records) {
  CellSummary summary;
  describe_lease(spec, cell, summary);
  if (scenarios::is_registry_scenario(spec.scenario)) summary.registry.emplace();
  summary.seeds_run = records.size();
  std::map<std::string, GapLists> gaps;
  std::map<std::string, CapacityUse> uses;
  for (const SeedRecord& record : records) {
    count_violations(record, summary);
    collect_gaps(record, gaps);
    add_capacity(record, uses, summary);
    const nlohmann::json& fleet = field_or_empty(field_or_empty(record, "metrics"), "fleet");
    if (summary.connections == 0) summary.connections = static_cast<uint64_t>(number_or_zero(fleet, "connections"));
    if (summary.registry) add_registry(record, *summary.registry);
  }
  if (summary.registry) price_registry(spec, *summary.registry);
  for (auto& [cause, lists] : gaps) summary.recovery[cause] = gap_stats(std::move(lists));
  for (auto& [name, use] : uses) summary.capacity.push_back(std::move(use));  // "t" sorts before "t/gsi"
  price_capacity(spec, summary);
  return summary;
}

std::optional<Duration> stress_value(const nlohmann::json& value) {
  return value.is_string() ? parse_duration(value.get<std::string>()) : std::nullopt;
}

// A configuration: the cell's values of every axis but the skew and pause
// axes (a registry sweep: of its configuration axes only).
std::string configuration_label(const SweepSpec& spec, const SweepCell& cell) {
  const bool registry = scenarios::is_registry_scenario(spec.scenario);
  std::string label;
  for (size_t a = 0; a < spec.axes.size(); ++a) {
    if (registry ? !is_registry_configuration_axis(spec.axes[a].name) : is_stress_axis(spec.axes[a].name)) continue;
    label += fmt::format("{}{}={}", label.empty() ? "" : " ", spec.axes[a].name, axis_value_text(cell.values[a]));
  }
  return label.empty() ? "(base)" : label;
}

bool within_margin(const SweepSpec& spec, const SweepCell& cell) {
  for (size_t a = 0; a < spec.axes.size(); ++a) {
    if (!is_stress_axis(spec.axes[a].name)) continue;
    const std::optional<Duration> value = stress_value(cell.values[a]);
    if (!value || *value > spec.safety_margin) return false;
  }
  return true;
}

std::string seconds_text(double ms) { return fmt::format("{:.1f} s", ms / 1000); }

void widen_p99(std::optional<double>& worst, const std::vector<uint64_t>& histogram) {
  if (const auto p99 = RegistryCell::p99_ms(histogram)) worst = std::max(worst.value_or(0.0), *p99);
}

// A registry configuration qualifies with zero violations and broadcasts
// measured in every cell (every workload value).
void judge_registry_cell(const SweepData& data, const SweepCell& cell, const CellSummary& figures, Configuration& config) {
  const RegistryCell& r = *figures.registry;
  widen_p99(config.staleness_broadcast_p99_ms, r.staleness_broadcast);
  widen_p99(config.staleness_presence_p99_ms, r.staleness_presence);
  if (!config.verdict.empty()) return;
  if (figures.failing_seeds > 0) {
    std::string kinds;
    for (const auto& [kind, k] : figures.kinds) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kind, k.failing_seeds);
    config.verdict = fmt::format("{} of {} seeds failed at {} ({})", figures.failing_seeds, figures.seeds_run,
                                 cell_label(data.spec, cell), kinds);
  } else if (r.broadcasts == 0) {
    config.verdict = fmt::format("no broadcast ran at {}: delivery cannot be judged", cell_label(data.spec, cell));
  }
}

// Why a configuration does (not) qualify, judged on its cells within the
// safety margin; the first reason found is the one given.
void judge(const SweepData& data, const SweepSummary& summary, Configuration& config) {
  if (config.judged.empty()) {
    config.verdict = "no cell within the safety margin";
    return;
  }
  for (const size_t index : config.judged) {
    const SweepCell& cell = data.cells[index];
    const CellSummary& figures = summary.cells[index];
    if (!cell.valid()) {
      config.verdict = fmt::format("cell {} is invalid: {}", index, cell.invalid);
      return;
    }
    config.seeds_judged += figures.seeds_run;
    config.on_demand_month = std::max(config.on_demand_month, figures.total_cost.at(0).on_demand());
    config.provisioned_month = std::max(config.provisioned_month, figures.total_cost.at(0).provisioned());
    if (figures.registry) {
      judge_registry_cell(data, cell, figures, config);
      continue;
    }
    // Excused gaps count here: a variant whose gaps overlap the next fault
    // more often must not rank better for it.
    const GapStats* crash = figures.crash();
    if (crash != nullptr && crash->all_gaps() > 0) {
      config.crash_p99_ms = std::max(config.crash_p99_ms.value_or(0.0), crash->with_excused_p99_ms);
      if (crash->bound_ms) config.crash_bound_ms = std::max(config.crash_bound_ms.value_or(0.0), *crash->bound_ms);
      if (crash->watcher_bound_ms) {
        config.crash_watcher_bound_ms = std::max(config.crash_watcher_bound_ms.value_or(0.0), *crash->watcher_bound_ms);
      }
      config.crash_gaps_judged += crash->gaps;
      config.crash_gaps_by_watcher += crash->watcher_gaps;
    }
    if (config.verdict.empty() && figures.failing_seeds > 0) {
      std::string kinds;
      for (const auto& [kind, k] : figures.kinds) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kind, k.failing_seeds);
      config.verdict = fmt::format("{} of {} seeds failed at {} ({})", figures.failing_seeds, figures.seeds_run,
                                   cell_label(data.spec, cell), kinds);
    }
    if (config.verdict.empty() && (crash == nullptr || crash->all_gaps() == 0)) {
      config.verdict = fmt::format("no crash gap was measured at {}: the recovery target cannot be judged",
                                   cell_label(data.spec, cell));
    }
    if (config.verdict.empty() &&
        crash->with_excused_p99_ms > static_cast<double>(data.spec.recovery_target.ns()) / 1e6) {
      config.verdict = fmt::format("crash recovery p99 {} (excused gaps included) > target {} at {}",
                                   seconds_text(crash->with_excused_p99_ms),
                                   format_duration(data.spec.recovery_target), cell_label(data.spec, cell));
    }
  }
  config.qualifies = config.verdict.empty();
  if (config.qualifies) config.verdict = "qualifies";
}

// The largest value each stress axis reaches: a margin beyond it is untested.
std::string untested_margin_note(const SweepSpec& spec) {
  std::string note;
  for (const SweepAxis& axis : spec.axes) {
    if (!is_stress_axis(axis.name)) continue;
    Duration largest = Duration::zero();
    for (const nlohmann::json& value : axis.values) largest = std::max(largest, stress_value(value).value_or(largest));
    if (largest < spec.safety_margin) {
      note += fmt::format(" (the grid's largest {} is {}, below the safety margin {}: untested beyond it)", axis.name,
                          format_duration(largest), format_duration(spec.safety_margin));
    }
  }
  return note;
}

std::vector<Configuration> configurations(const SweepData& data, const SweepSummary& summary) {
  std::vector<Configuration> list;
  std::map<std::string, size_t> by_label;
  for (const SweepCell& cell : data.cells) {
    const std::string label = configuration_label(data.spec, cell);
    auto [it, inserted] = by_label.emplace(label, list.size());
    if (inserted) {
      Configuration config;
      config.label = label;
      list.push_back(std::move(config));
    }
    Configuration& config = list[it->second];
    config.cells.push_back(cell.index);
    if (within_margin(data.spec, cell)) config.judged.push_back(cell.index);
  }
  for (Configuration& config : list) judge(data, summary, config);
  return list;
}

// The worse of the two staleness p99s, then the other.
std::pair<double, double> staleness_key(const Configuration& c) {
  const double broadcast = c.staleness_broadcast_p99_ms.value_or(0);
  const double presence = c.staleness_presence_p99_ms.value_or(0);
  return {std::max(broadcast, presence), std::min(broadcast, presence)};
}

// Registry: among the qualifying configurations within 5% of the cheapest
// (runs of two configurations differ by their draws, not only by what they
// cost), the one whose answers went stale the least (the worse of its
// broadcast and presence p99s, then the other); then the cheaper; then grid
// order.
std::optional<size_t> registry_choice(const std::vector<Configuration>& list) {
  std::optional<double> cheapest;
  for (const Configuration& c : list) {
    if (c.qualifies) cheapest = std::min(cheapest.value_or(c.on_demand_month), c.on_demand_month);
  }
  std::optional<size_t> best;
  for (size_t i = 0; i < list.size(); ++i) {
    const Configuration& a = list[i];
    if (!a.qualifies || a.on_demand_month > *cheapest * 1.05) continue;
    if (!best || staleness_key(a) < staleness_key(list[*best]) ||
        (staleness_key(a) == staleness_key(list[*best]) && a.on_demand_month < list[*best].on_demand_month)) {
      best = i;
    }
  }
  return best;
}

std::optional<size_t> cheapest_qualifying(const std::vector<Configuration>& list) {
  std::optional<size_t> best;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].qualifies) continue;
    if (!best) {
      best = i;
      continue;
    }
    const Configuration& a = list[i];
    const Configuration& b = list[*best];
    // Cheapest first; among equal costs the faster recovery; then grid order.
    if (a.on_demand_month < b.on_demand_month ||
        (a.on_demand_month == b.on_demand_month && a.crash_p99_ms.value_or(0) < b.crash_p99_ms.value_or(0))) {
      best = i;
    }
  }
  return best;
}

std::string stress_axes_text(const SweepSpec& spec) {
  std::string names;
  for (const SweepAxis& axis : spec.axes) {
    if (is_stress_axis(axis.name)) names += (names.empty() ? "" : " and ") + axis.name;
  }
  return names;
}

// When the recommended configuration's own argument guarantees less than
// the safety margin, its zero violations above that are empirical only:
// say so, with the analytic figure.
std::string analytic_note(const SweepSpec& spec, const SweepSummary& summary, const Configuration& best) {
  std::string note;
  std::set<std::string> said;
  for (const UnsafeValue& group : summary.unsafe) {
    const bool ours = std::any_of(group.cells.begin(), group.cells.end(), [&](size_t cell) {
      return std::find(best.cells.begin(), best.cells.end(), cell) != best.cells.end();
    });
    if (!ours || !group.analytic_limit || *group.analytic_limit >= spec.safety_margin || !said.insert(group.axis).second) {
      continue;
    }
    note += fmt::format(" Its own argument guarantees a {} only up to {}; beyond that, up to {}, the zero is "
                        "empirical, for this scenario's faults.",
                        group.axis, group.analytic, format_duration(spec.safety_margin));
  }
  return note;
}

std::string staleness_text(const std::optional<double>& p99_ms) {
  if (!p99_ms) return "-";
  if (std::isinf(*p99_ms)) return fmt::format("> {}", seconds_text(scenarios::histogram_edges_ms().back()));
  return fmt::format("<= {}", seconds_text(*p99_ms));
}


// The bound the recommended configuration's crash gaps were judged by: the
// watcher's when it judged every one, the sweep's when it judged none, both
// (with their shares) otherwise.
std::string crash_bound_text(const Configuration& best) {
  const uint64_t judged = best.crash_gaps_judged;
  const uint64_t watcher = best.crash_gaps_by_watcher;
  if (best.crash_watcher_bound_ms && judged > 0 && watcher == judged) {
    return fmt::format("the watcher's {}, which judged every gap", seconds_text(*best.crash_watcher_bound_ms));
  }
  if (!best.crash_bound_ms) return "none";
  if (!best.crash_watcher_bound_ms || watcher == 0) return seconds_text(*best.crash_bound_ms);
  return fmt::format("the watcher's {} for {} of {} gaps, the sweep's {} for the others",
                     seconds_text(*best.crash_watcher_bound_ms), watcher, judged, seconds_text(*best.crash_bound_ms));
}

std::string registry_recommendation(const SweepData& data, const SweepSummary& summary) {
  const SweepSpec& spec = data.spec;
  std::string workload;
  for (const SweepAxis& axis : spec.axes) {
    if (!is_registry_configuration_axis(axis.name)) workload += (workload.empty() ? "" : ", ") + axis.name;
  }
  const std::string every = workload.empty() ? std::string{} : fmt::format(" at every {}", workload);
  if (!summary.recommended) {
    return fmt::format("No configuration qualifies: none of the {} configurations ran with zero violations{}. See the "
                       "configurations table for the reason of each.",
                       summary.configurations.size(), every);
  }
  const Configuration& best = summary.configurations[*summary.recommended];
  double per_broadcast = 0;
  double per_hour = 0;
  for (const size_t index : best.judged) {
    per_broadcast = std::max(per_broadcast, summary.cells[index].registry->dollars_per_million_broadcasts);
    per_hour = std::max(per_hour, summary.cells[index].registry->dollars_per_thousand_connection_hours);
  }
  return fmt::format(
      "Recommended: {}. Zero violations in {} runs{}; of the configurations within 5% of the cheapest, its answers "
      "went stale the least: staleness p99 {} for broadcasts and {} for presence (the worst cell). DynamoDB on "
      "demand with the '{}' prices: ${:.2f} per million broadcasts and ${:.2f} per thousand connection-hours (the "
      "worst cell), ${:.2f} a month for the fleet as simulated.",
      best.label, best.seeds_judged, every, staleness_text(best.staleness_broadcast_p99_ms),
      staleness_text(best.staleness_presence_p99_ms), spec.prices.front().name, per_broadcast, per_hour,
      best.on_demand_month);
}

std::string recommendation_text(const SweepData& data, const SweepSummary& summary) {
  if (summary.registry) return registry_recommendation(data, summary);
  const SweepSpec& spec = data.spec;
  const std::string stress = stress_axes_text(spec);
  const std::string margin =
      stress.empty() ? std::string{"(the grid has no skew or pause axis)"}
                     : fmt::format("at every {} up to {}", stress, format_duration(spec.safety_margin));
  const std::string fleet = spec.price_connections ? fmt::format("{} connections", *spec.price_connections)
                                                   : std::string{"the simulated fleet"};
  if (!summary.recommended) {
    return fmt::format("No configuration qualifies: none of the {} configurations met the recovery target "
                       "(crash p99 <= {}) with zero violations {}. See the configurations table for the reason of each.",
                       summary.configurations.size(), format_duration(spec.recovery_target), margin);
  }
  const Configuration& best = summary.configurations[*summary.recommended];
  std::string other_prices;
  for (size_t p = 1; p < spec.prices.size(); ++p) {
    double on_demand = 0;
    double provisioned = 0;
    for (const size_t index : best.judged) {
      on_demand = std::max(on_demand, summary.cells[index].total_cost[p].on_demand());
      provisioned = std::max(provisioned, summary.cells[index].total_cost[p].provisioned());
    }
    other_prices += fmt::format("; with the '{}' prices ${:.2f} on demand, ${:.2f} provisioned", spec.prices[p].name,
                                on_demand, provisioned);
  }
  return fmt::format(
      "Recommended: {}. It costs ${:.2f} a month on demand (${:.2f} provisioned at the average rate) for {} "
      "with the '{}' prices{}; crash recovery p99 {} over every crash gap, excused ones included (bound {}, target {}); "
      "zero violations in {} runs {}.{}",
      best.label, best.on_demand_month, best.provisioned_month, fleet, spec.prices[0].name, other_prices,
      seconds_text(best.crash_p99_ms.value_or(0)),
      crash_bound_text(best), format_duration(spec.recovery_target),
      best.seeds_judged, margin, untested_margin_note(spec)) +
         analytic_note(spec, summary, best);
}

// The skew or pause an algorithm tolerates by its own argument, in the
// axis's units (docs/lease-core.md): wall mode 2 x margin between two
// clocks, the seed lease - heartbeat (a renewed lease never looks expired
// sooner), counter mode and the core's pauses: no limit (nullopt).
struct Analytic {
  std::optional<Duration> limit;
  std::string text;
};

Analytic analytic_margin(const std::string& axis, const scenarios::LeaseScenarioOptions& o) {
  const lease::LeaseConfig& c = o.lease;
  const Duration fast = o.fast_worker_offset.is_negative() ? -o.fast_worker_offset : o.fast_worker_offset;
  auto clamp = [](Duration d) { return d.is_negative() ? Duration::zero() : d; };
  const bool seed = c.algorithm == lease::Algorithm::seed;
  const Duration slack = c.lease_duration - c.heartbeat_interval;
  if (axis == "pause") {
    if (!seed) return {std::nullopt, "unlimited: pause-independent (the owner checks its deadline when it resumes)"};
    return {slack, fmt::format("{} (lease - heartbeat = {} - {}: a shorter pause never lets a renewed lease expire)",
                               format_duration(slack), format_duration(c.lease_duration),
                               format_duration(c.heartbeat_interval))};
  }
  if (!seed && c.expiry_mode == lease::ExpiryMode::counter) {
    return {std::nullopt, "unlimited: skew-independent (counter mode never compares two wall clocks)"};
  }
  const Duration pairwise = seed ? slack : c.skew_tolerated();
  const std::string why = seed ? fmt::format("lease - heartbeat = {} - {}", format_duration(c.lease_duration),
                                             format_duration(c.heartbeat_interval))
                               : fmt::format("2 x margin = 2 x {}", format_duration(c.safety_margin));
  if (axis == "fast_worker_offset") {
    if (o.skew_max.is_zero()) return {pairwise, fmt::format("{} ({})", format_duration(pairwise), why)};
    const Duration limit = clamp(pairwise - o.skew_max * 2);
    return {limit, fmt::format("{} ({}, less 2 x skew_max {})", format_duration(limit), why, format_duration(o.skew_max))};
  }
  // skew_max: two workers within +-skew_max differ by up to 2 x skew_max.
  const Duration limit = clamp((pairwise - fast) / 2);
  return {limit, fmt::format("{} (half of {}{})", format_duration(limit), why,
                             fast.is_zero() ? "" : fmt::format(", less the fast worker's {}", format_duration(fast)))};
}

std::vector<UnsafeValue> unsafe_values(const SweepData& data, const SweepSummary& summary) {
  std::vector<UnsafeValue> list;
  for (size_t a = 0; a < data.spec.axes.size(); ++a) {
    const std::string& axis = data.spec.axes[a].name;
    if (!is_stress_axis(axis)) continue;
    std::map<std::string, size_t> groups;
    for (const SweepCell& cell : data.cells) {
      const std::string others = cell_label(data.spec, cell, axis);
      auto [it, inserted] = groups.emplace(others, list.size());
      if (inserted) list.push_back(UnsafeValue{axis, others, {}, std::nullopt, 0, 0, "-", "n/a: every cell is invalid", std::nullopt, false});
      list[it->second].cells.push_back(cell.index);
    }
  }
  for (UnsafeValue& group : list) {
    const size_t a = static_cast<size_t>(
        std::find_if(data.spec.axes.begin(), data.spec.axes.end(), [&](const SweepAxis& x) { return x.name == group.axis; }) -
        data.spec.axes.begin());
    auto value_of = [&](size_t cell) { return stress_value(data.cells[cell].values[a]).value_or(Duration::zero()); };
    std::stable_sort(group.cells.begin(), group.cells.end(), [&](size_t x, size_t y) { return value_of(x) < value_of(y); });
    for (const size_t index : group.cells) {
      const SweepCell& cell = data.cells[index];
      if (!cell.valid() || summary.cells[index].seeds_run == 0) continue;
      group.largest_tried = axis_value_text(cell.values[a]);
      if (!group.ran) {
        group.ran = true;
        const auto options = lease_options_of(data.spec, cell.parameters);
        const Analytic analytic = options ? analytic_margin(group.axis, *options) : Analytic{std::nullopt, "n/a (not a lease scenario)"};
        group.analytic = analytic.text;
        group.analytic_limit = analytic.limit;
      }
      const uint64_t failing = summary.cells[index].failing(kSingleOwnership);
      if (!group.minimal_unsafe && failing > 0) {
        group.minimal_unsafe = axis_value_text(cell.values[a]);
        group.failing_seeds = failing;
        group.seeds = summary.cells[index].seeds_run;
      }
    }
  }
  return list;
}

void choose_timeline(const SweepData& data, SweepSummary& summary) {
  if (summary.registry) {
    summary.timeline_reason = "a registry sweep has no ownership timeline";
    return;
  }
  if (data.spec.timeline) {
    summary.timeline = *data.spec.timeline;
    summary.timeline_reason = "chosen by the spec";
    return;
  }
  for (const SweepCell& cell : data.cells) {
    for (const SeedRecord& record : data.records[cell.index]) {
      if (field_or_empty(record, "violations").empty()) continue;
      summary.timeline = TimelineChoice{cell.index, record["seed"].get<uint64_t>()};
      summary.timeline_reason = "the lowest failing seed of the first cell with a failure";
      return;
    }
  }
  for (const SweepCell& cell : data.cells) {
    if (data.records[cell.index].empty()) continue;
    summary.timeline = TimelineChoice{cell.index, data.records[cell.index].front()["seed"].get<uint64_t>()};
    summary.timeline_reason = "no seed failed: the first seed of the first valid cell";
    return;
  }
}

}  // namespace

const std::vector<std::string>& recovery_causes() {
  static const std::vector<std::string> causes{"crash", "pause", "graceful", "lease_lost"};
  return causes;
}

double nearest_rank(const std::vector<double>& sorted, unsigned percent) {
  LP_ASSERT(!sorted.empty());
  LP_ASSERT_LE(percent, 100u);
  // rank = ceil(percent / 100 x n), at least 1 (integer arithmetic: exact).
  const size_t rank = std::max<size_t>(1, (percent * sorted.size() + 99) / 100);
  return sorted[rank - 1];
}

double RegistryCell::members_per_broadcast() const {
  return broadcasts == 0 ? 0 : static_cast<double>(expected_deliveries) / static_cast<double>(broadcasts);
}

std::optional<double> RegistryCell::p99_ms(const std::vector<uint64_t>& histogram) {
  uint64_t total = 0;
  for (const uint64_t count : histogram) total += count;
  if (total == 0) return std::nullopt;
  const uint64_t rank = std::max<uint64_t>(1, (99 * total + 99) / 100);
  const std::vector<double>& edges = scenarios::histogram_edges_ms();
  uint64_t seen = 0;
  for (size_t i = 0; i < histogram.size(); ++i) {
    seen += histogram[i];
    if (seen >= rank) return i < edges.size() ? edges[i] : std::numeric_limits<double>::infinity();
  }
  return std::numeric_limits<double>::infinity();
}

const GapStats* CellSummary::crash() const {
  const auto it = recovery.find("crash");
  return it == recovery.end() ? nullptr : &it->second;
}

std::string UnsafeValue::minimal_text() const {
  if (!ran) return "not run (invalid cells)";
  if (!minimal_unsafe) return "none";
  return fmt::format("{} ({} of {} seeds)", *minimal_unsafe, failing_seeds, seeds);
}

uint64_t CellSummary::failing(const std::string& kind) const {
  const auto it = kinds.find(kind);
  return it == kinds.end() ? 0 : it->second.failing_seeds;
}

SweepSummary summarize(const SweepData& data) {
  SweepSummary summary;
  summary.registry = scenarios::is_registry_scenario(data.spec.scenario);
  std::set<std::string> kinds;
  std::set<std::string> names;
  for (const SweepCell& cell : data.cells) {
    summary.cells.push_back(summarize_cell(data.spec, cell, data.records[cell.index]));
    for (const auto& [kind, figures] : summary.cells.back().kinds) kinds.insert(kind);
    for (const CapacityUse& use : summary.cells.back().capacity) names.insert(use.name());
  }
  summary.kinds.assign(kinds.begin(), kinds.end());
  summary.capacity_names.assign(names.begin(), names.end());
  summary.configurations = configurations(data, summary);
  summary.recommended =
      summary.registry ? registry_choice(summary.configurations) : cheapest_qualifying(summary.configurations);
  summary.unsafe = unsafe_values(data, summary);
  summary.recommendation = recommendation_text(data, summary);
  choose_timeline(data, summary);
  return summary;
}

}  // namespace leaseproof::report
