#pragma once
// What a sweep's reports show, derived from its raw records only (so that an
// unsharded run and merged shards derive the same figures): per cell the
// violations by property, recovery percentiles per cause against the bound,
// DynamoDB capacity per table and GSI with its monthly cost; per skew or
// pause axis the smallest unsafe value next to the analytic margin; the
// recommendation. And the four report files (docs/reports.md).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/cost.hpp"
#include "reports/sweep.hpp"

namespace leaseproof::report {

// The causes of ownerless gaps a report lists, in this order (graceful is a
// handover: release on SIGTERM or drain).
const std::vector<std::string>& recovery_causes();

struct KindSummary {
  uint64_t failing_seeds = 0;
  uint64_t violations = 0;
  uint64_t lowest_seed = 0;
  std::string reproduce;  // the lowest failing seed's command
};

// Nearest-rank percentiles over every judged gap of every seed of a cell;
// excused gaps (overlapping another fault) are counted apart, and again
// together with the judged ones: excusing a gap must never make a variant
// look faster, so what ranks and judges a configuration is the p99 of all.
struct GapStats {
  uint64_t gaps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  uint64_t beyond_bound = 0;
  uint64_t excused = 0;
  double excused_p99_ms = 0;
  double excused_max_ms = 0;
  double with_excused_p99_ms = 0;  // judged and excused gaps together
  double with_excused_max_ms = 0;
  std::optional<double> bound_ms;  // the largest bound any seed stated
  // Of `gaps`, those judged by the watcher's path and its bound (the largest
  // stated); beyond_bound counts each gap against its own path's bound.
  uint64_t watcher_gaps = 0;
  std::optional<double> watcher_bound_ms;

  uint64_t all_gaps() const { return gaps + excused; }
};

// Consumed capacity of a base table (index empty) or one of its GSIs.
struct CapacityUse {
  std::string table;
  std::string index;
  double wcu = 0;  // totals over the cell's seeds
  double rcu = 0;
  Rates rates;     // per simulated second, as simulated
  std::vector<MonthlyCost> cost;  // per price set, scaled to price_connections

  std::string name() const { return index.empty() ? table : table + "/" + index; }
};

// A registry scenario's cell (seed 003; docs/reports.md, "Registry
// sweeps"): its broadcasts and connections, what each cost and how stale
// its answers were, summed over the cell's seeds.
struct RegistryCell {
  uint64_t broadcasts = 0;
  uint64_t expected_deliveries = 0;  // live members for the whole broadcast
  uint64_t delivered = 0;
  uint64_t misses_not_in_answer = 0;  // delivery violations
  uint64_t misses_gateway = 0;        // posts the gateway refused past every attempt
  uint64_t connections = 0;
  double connection_hours = 0;
  double broadcast_read_units = 0;  // member queries and their prunes
  double broadcast_write_units = 0;
  double connection_read_units = 0;  // joins, leaves, removals, presence
  double connection_write_units = 0;
  // Summed histograms (scenarios/metrics.hpp's edges): how long after a
  // connection died a broadcast still posted to it; how long after a user's
  // last connection died presence still said online.
  std::vector<uint64_t> staleness_broadcast;
  std::vector<uint64_t> staleness_presence;
  // With the first price set, on demand.
  double dollars_per_million_broadcasts = 0;
  double dollars_per_thousand_connection_hours = 0;

  double members_per_broadcast() const;
  // The histogram's upper edge at the 99th percentile (nearest rank); nullopt
  // without samples; infinity above the last edge.
  static std::optional<double> p99_ms(const std::vector<uint64_t>& histogram);
};

struct CellSummary {
  uint64_t seeds_run = 0;
  uint64_t failing_seeds = 0;
  std::map<std::string, KindSummary> kinds;
  std::map<std::string, GapStats> recovery;
  std::vector<CapacityUse> capacity;  // each table, then its GSIs
  std::map<std::string, uint64_t> requests;  // per operation, all tables
  uint64_t throttled = 0;
  uint64_t conditional_check_failures = 0;
  double simulated_s = 0;           // over all seeds
  uint64_t connections = 0;         // as simulated
  double cost_scale = 1;            // price_connections / connections
  std::vector<MonthlyCost> total_cost;  // per price set
  std::optional<double> heartbeat_s, lease_s;
  std::string variant;              // "core/wall", "core/counter", "seed"
  std::optional<RegistryCell> registry;  // registry scenarios

  const GapStats* crash() const;
  uint64_t failing(const std::string& kind) const;
};

// Cells that differ only in skew/pause values form a configuration: the
// recommendation picks the cheapest whose cells, at every such value up to
// the safety margin, had no violation and met the recovery target.
struct Configuration {
  std::string label;
  std::vector<size_t> cells;   // all of its cells
  std::vector<size_t> judged;  // those within the safety margin
  bool qualifies = false;
  std::string verdict;         // why it does or does not qualify
  double on_demand_month = 0;  // worst judged cell, first price set
  double provisioned_month = 0;
  std::optional<double> crash_p99_ms;  // worst judged cell, excused gaps included
  std::optional<double> crash_bound_ms;          // the sweep's path (worst judged cell)
  std::optional<double> crash_watcher_bound_ms;  // the watcher's path (worst judged cell)
  uint64_t crash_gaps_judged = 0;                // over the judged cells
  uint64_t crash_gaps_by_watcher = 0;            // of those, judged by the watcher's bound
  uint64_t seeds_judged = 0;
  // Registry sweeps: the worst judged cell's staleness p99s.
  std::optional<double> staleness_broadcast_p99_ms;
  std::optional<double> staleness_presence_p99_ms;
};

// For one skew or pause axis and one combination of the other axes: the
// smallest value at which single ownership broke.
struct UnsafeValue {
  std::string axis;
  std::string others;  // the other axes' values
  std::vector<size_t> cells;  // by increasing value
  std::optional<std::string> minimal_unsafe;  // the axis value, as in the spec
  uint64_t failing_seeds = 0;  // at that value
  uint64_t seeds = 0;
  std::string largest_tried;
  std::string analytic;  // e.g. "15s (lease - heartbeat = 20s - 5s)"
  std::optional<Duration> analytic_limit;  // nullopt: no limit (or not a lease scenario)
  bool ran = false;  // false: every cell of the group is invalid

  // "16s (2 of 6 seeds)", "none", or "not run (invalid cells)".
  std::string minimal_text() const;
};

struct SweepSummary {
  bool registry = false;  // a registry scenario: registry figures, no lease sections
  std::vector<CellSummary> cells;
  std::vector<std::string> kinds;  // every violation kind seen, sorted
  std::vector<std::string> capacity_names;  // every table and GSI seen, sorted
  std::vector<Configuration> configurations;
  std::optional<size_t> recommended;  // index into configurations
  std::string recommendation;         // in words, with its numbers
  std::vector<UnsafeValue> unsafe;
  std::optional<TimelineChoice> timeline;
  std::string timeline_reason;
};

SweepSummary summarize(const SweepData& data);

// Nearest rank: the smallest value with at least p% of the values at or
// below it. `sorted` must be sorted and non-empty.
double nearest_rank(const std::vector<double>& sorted, unsigned percent);

// The chosen run's ownership, per connection: a rerun of that seed with an
// observer of lease.open / lease.close and the workers' faults.
struct OwnershipTimeline {
  struct Interval {
    std::string connection;
    std::string worker;
    double begin_s = 0;
    double end_s = 0;
    uint64_t epoch = 0;
    std::string reason;  // how it ended: released, deadline, lost, crash, end of run...
  };
  struct Fault {
    std::string worker;
    std::string kind;  // crash, restart, pause, sigterm
    double at_s = 0;
    double length_s = 0;  // pauses
  };
  size_t cell = 0;
  uint64_t seed = 0;
  std::string reason;  // why this run
  std::string reproduce;
  double duration_s = 0;
  std::vector<std::string> connections;  // in order of first appearance by number
  std::vector<Interval> intervals;
  std::vector<Fault> faults;
  std::vector<std::string> violations;   // of the rerun, first few
};
std::optional<OwnershipTimeline> record_timeline(const SweepData& data, const SweepSummary& summary);

// The report files by name: sweep.json, sweep.csv, sweep.md, sweep.html; a
// shard writes sweep.json only (raw, with its "shard" field).
std::map<std::string, std::string> render_reports(const SweepData& data);
std::map<std::string, std::string> render_reports(const SweepData& data, const SweepSummary& summary);

// The pieces, for tests and for render_reports.
std::string render_json(const SweepData& data, const SweepSummary& summary, const std::optional<OwnershipTimeline>& timeline);
std::string render_csv(const SweepData& data, const SweepSummary& summary);
std::string render_markdown(const SweepData& data, const SweepSummary& summary);
std::string render_html(const SweepData& data, const SweepSummary& summary,
                        const std::optional<OwnershipTimeline>& timeline);

// Writes the files into `directory` (created if missing): each to a
// temporary name first, all renamed into place once all are written, so no
// reader sees a half-written report. Throws std::runtime_error on failure.
void write_report_files(const std::string& directory, const std::map<std::string, std::string>& files);

// JSON as the reports write it: objects one key a line, arrays of numbers and
// per-seed records one line each (diff-able, and byte-stable).
std::string dump_report_json(const nlohmann::json& value);

}  // namespace leaseproof::report
