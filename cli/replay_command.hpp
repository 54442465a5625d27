#pragma once
// `leaseproof replay`: re-runs a reproduce line and stops at a chosen event
// (docs/shrink-and-replay.md).

#include <cstddef>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/cli_common.hpp"

namespace leaseproof::cli {

struct ReplayArgs {
  RunArgs run;             // --seed, --scenario, --duration and the parameter flags
  std::string until_event; // trace index
  std::string until_time;  // true time, e.g. 5m16s
  size_t context = 20;
  std::string explain;     // a connection whose owners' writes to explain
};

CLI::App* add_replay_command(CLI::App& app, ReplayArgs& args);
// 0 when the stop event was reached and printed; UsageError (exit 2) when the
// run ends before it or the flags are wrong.
int replay_command(const ReplayArgs& args);

}  // namespace leaseproof::cli
