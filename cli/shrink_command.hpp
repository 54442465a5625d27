#pragma once
// `leaseproof shrink`: makes a failing run small (docs/shrink-and-replay.md).

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/cli_common.hpp"

namespace leaseproof::cli {

struct ShrinkArgs {
  RunArgs run;            // --seed, --scenario, --duration and the parameter flags
  std::string property;   // empty: the kind of the run's first violation
  std::string budget = "500";  // runs, the starting run included
  unsigned jobs = 0;      // 0: one per core
};

// Registers the subcommand; returns it so main can test parsed().
CLI::App* add_shrink_command(CLI::App& app, ShrinkArgs& args);
// 0: the run failed the property and the smallest failing run is printed;
// 1: the starting run does not fail the property; UsageError on bad input.
int shrink_command(const ShrinkArgs& args);

}  // namespace leaseproof::cli
