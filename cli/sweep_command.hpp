#pragma once
// `leaseproof sweep` and `leaseproof report merge` (docs/reports.md).

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace leaseproof::cli {

struct SweepArgs {
  std::string spec_path;
  std::string out;
  std::string seeds;  // overrides the spec's seeds per cell; empty: the spec's
  unsigned jobs = 0;  // 0: one per core
  std::string shard;  // "i/n"; empty: the whole sweep
};

struct MergeArgs {
  std::string out;
  std::vector<std::string> shards;
};

// Register the subcommands; return them so that main can test parsed().
CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args);
CLI::App* add_report_merge_command(CLI::App& app, MergeArgs& args);

int sweep_command(const SweepArgs& args);
int report_merge_command(const MergeArgs& args);

}  // namespace leaseproof::cli
