#pragma once
// Sweeps: a grid of scenario parameters (the cartesian product of the spec's
// axes) times N seeds per cell, run on every core, optionally one shard of
// the (cell, seed) pairs at a time. What a sweep keeps of each run is a
// small raw record (violations by kind, recovery gaps, consumed capacity);
// everything a report shows is derived from these records alone, so shards
// merge into exactly the report an unsharded run writes (docs/reports.md).

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/time.hpp"
#include "reports/cost.hpp"

namespace leaseproof::scenarios {
struct Scenario;
struct LeaseScenarioOptions;
}

namespace leaseproof::report {

// Bad input (a spec, a flag, a shard directory): the message names the field
// or flag. The CLI prints it and exits with status 2, having written nothing.
struct SweepInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kSweepSchemaVersion = 1;

struct SweepAxis {
  std::string name;  // a scenario parameter, or "ratio" / "pause" (derived)
  std::vector<nlohmann::json> values;
};

// Which run the report's ownership timeline shows.
struct TimelineChoice {
  size_t cell = 0;
  uint64_t seed = 0;
};

struct SweepSpec {
  std::string title;
  std::string scenario;
  Duration duration;
  uint64_t seeds = 10;  // per cell: first_seed .. first_seed + seeds - 1
  uint64_t first_seed = 1;
  nlohmann::json base = nlohmann::json::object();
  std::vector<SweepAxis> axes;
  std::vector<Prices> prices;  // the first set ranks the recommendation
  std::optional<uint64_t> price_connections;
  Duration recovery_target = Duration::from_s(90);  // crash gaps, p99
  Duration safety_margin = Duration::zero();        // skew / pause values that must be safe
  Duration pause_at;                                // when the `pause` axis's pause starts
  std::optional<TimelineChoice> timeline;

  const scenarios::Scenario& find_scenario() const;
  // Every field, defaults filled in: what reports and shards carry, and what
  // merge compares.
  nlohmann::json to_json() const;
};

// Parses and checks a spec; throws SweepInputError naming the field.
SweepSpec parse_sweep_spec(const nlohmann::json& spec);

// Axes whose values are skews or pauses: the recommendation must be safe at
// every value up to the safety margin; reports give the smallest unsafe one.
bool is_stress_axis(std::string_view axis);
// A registry sweep's configuration axes (room_shards, ttl, algorithm,
// flaws); its other axes describe the workload, and a configuration is
// judged at every workload value.
bool is_registry_configuration_axis(std::string_view axis);

struct SweepCell {
  size_t index = 0;
  std::vector<nlohmann::json> values;  // one per axis, in axis order
  nlohmann::json parameters;           // base + axes, as the scenario gets them
  std::string invalid;                 // the scenario's validation message; empty: valid

  bool valid() const { return invalid.empty(); }
};

// "heartbeat=5s lease=20s algorithm=core": a cell's axis values.
std::string cell_label(const SweepSpec& spec, const SweepCell& cell, std::string_view skip_axis = {});
std::string axis_value_text(const nlohmann::json& value);

// The cartesian product, first axis slowest, each cell validated by the
// scenario (an invalid cell is reported, never run).
std::vector<SweepCell> expand_cells(const SweepSpec& spec);

// The lease options a cell's runs use (nullopt for scenarios without leases
// or parameters the scenario rejects); the reports read heartbeat, lease,
// margin, algorithm and expiry mode from them.
std::optional<scenarios::LeaseScenarioOptions> lease_options_of(const SweepSpec& spec, const nlohmann::json& parameters);

// One of n shards (1-based). The (cell, seed) pairs are numbered seed-major,
// pair = (seed - first_seed) x cells + cell, and shard i takes the pairs with
// pair mod n = i - 1: every shard gets every cell's seeds in turn.
struct Shard {
  uint64_t index = 1;
  uint64_t count = 1;
};
// "i/n"; i may be kShardIndexFromEnvironment: JOB_COMPLETION_INDEX + 1 (a
// Kubernetes Indexed Job's pods are numbered from 0). Throws SweepInputError
// naming --shard.
inline constexpr std::string_view kShardIndexFromEnvironment = "index";
Shard parse_shard(const std::string& text);
bool in_shard(const Shard& shard, size_t cells, size_t cell, uint64_t seed_offset);

// What the sweep keeps of one run, as JSON (the report's raw data):
// {"seed", "trace_hash", "violations": {kind: count}, "reproduce" (when it
// failed), "metrics": the scenario's metrics}.
using SeedRecord = nlohmann::json;

struct SweepData {
  SweepSpec spec;
  std::vector<SweepCell> cells;
  std::vector<std::vector<SeedRecord>> records;  // per cell, by seed
  std::optional<Shard> shard;                    // set: a shard's partial data
};

struct SweepProgress {
  uint64_t runs_done = 0;
  uint64_t runs_total = 0;
  uint64_t cells_done = 0;
  uint64_t cells_total = 0;
};

// Runs the spec's (cell, seed) pairs of `shard` (all when unset) on `jobs`
// threads; `on_progress` is called from the calling thread about every
// 200 ms and once at the end. Records land by (cell, seed) whatever the
// threads did, so the data never depends on jobs or timing.
SweepData run_sweep(const SweepSpec& spec, std::optional<Shard> shard, unsigned jobs,
                    const std::function<void(const SweepProgress&)>& on_progress = {});

// The report's raw part ({"schema_version", "generator", "spec", "shard"?,
// "cells": [{"index", "axes", "parameters", "invalid"?, "seeds": [...]}]}).
nlohmann::json raw_json(const SweepData& data);

// Combines the sweep.json documents of shards: same spec, same shard count,
// every shard once, each holding exactly its pairs. Throws SweepInputError
// naming the offending shard (by its `origin`, e.g. its directory).
struct ShardDocument {
  std::string origin;
  nlohmann::json document;
};
SweepData merge_shards(const std::vector<ShardDocument>& shards);

}  // namespace leaseproof::report
