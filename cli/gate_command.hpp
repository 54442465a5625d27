#pragma once
// `leaseproof gate`: the CI property gate (docs/ci-gate.md).

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli/cli_common.hpp"

namespace leaseproof::cli {

// What `gate` runs without --scenario, --params or --config: the lease swarm
// for eight seeds of every ten, then one seed each of the reconnect wave (the
// only scenario a missing reconnect jitter fails) and the registry swarm.
inline constexpr std::string_view kDefaultGateScenarios = "lease-swarm*8,stream-wave,registry-swarm";

struct GateArgs {
  RunArgs run;              // --scenario, --duration and the parameter flags
  uint64_t seeds = 1000;    // new seeds to run, from first_seed
  std::string first_seed = "1";
  std::string budget;       // wall time, e.g. 60s; empty: none
  uint64_t min_seeds = 10;  // new seeds that run whatever the budget (at most `seeds`)
  unsigned jobs = 0;        // 0: one per core
  std::string junit_path;
  std::string regressions_path;
  bool no_record = false;   // do not add new failures to the regression file
  bool create_regressions = false;  // a missing regression file is a new, empty one
  std::string shard;        // "i/n": this shard's share of the regressions and the new seeds
  std::string out;          // a directory for gate.json (every run's verdict), for 'report merge'
};

// Registers the subcommand; returns it so main can test parsed().
CLI::App* add_gate_command(CLI::App& app, GateArgs& args);
int gate_command(const GateArgs& args);
// 'report merge' of gate shards: true when DIR holds a gate --out result.
bool is_gate_shard(const std::string& directory);
// Merges the shards (every one of them) into OUT/gate.json, prints the
// failures and the verdict; the gate's exit status.
int merge_gate_shards(const std::vector<std::string>& directories, const std::string& out);

}  // namespace leaseproof::cli
