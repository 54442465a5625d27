#pragma once
// `leaseproof check-real`: the simulator's lease checkers (properties/) on what
// real processes recorded (docs/runtime.md, "Checking real records").
//
// The records are read as the simulator's trace by properties/real_records
// (what each input holds is described there); OwnershipChecker and
// RecoveryChecker judge it with the bounds the simulator computes from the
// workers' configuration (scenarios::lease_recovery_bounds), and the hub's
// session records are judged on their own too.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace leaseproof::cli {

struct CheckRealArgs {
  std::vector<std::string> events;  // files of JSON lines
  std::string sessions;             // the hub's session records
  bool notices = false;             // workers send release notices (graceful bound)
  std::string fast_worker_offset = "0s";
};

CLI::App* add_check_real_command(CLI::App& app, CheckRealArgs& args);
int check_real_command(const CheckRealArgs& args);

}  // namespace leaseproof::cli
