// `leaseproof check-real`: reads the files the options name
// (properties/real_records), judges them with the simulator's checkers and
// the bounds the simulator computes (scenarios::lease_recovery_bounds), and
// prints the verdict.

#include "cli/check_real_command.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cli_common.hpp"
#include "cli/process_common.hpp"
#include "properties/lease_checkers.hpp"
#include "properties/reading.hpp"
#include "properties/real_records.hpp"
#include "scenarios/lease.hpp"

namespace leaseproof::cli {
namespace {

using properties::GapCause;
using properties::HubSession;
using properties::RealRecord;
using properties::RecoveryBound;

// The records of every --events file in true-time order, and the hub's sessions.
struct RealInputs {
  std::vector<RealRecord> records;
  std::vector<HubSession> sessions;
  std::vector<std::string> problems;
  size_t twins = 0;  // processes that ran beside another of their worker id
};

RealInputs read_inputs(const CheckRealArgs& args) {
  RealInputs inputs;
  for (const std::string& path : args.events) {
    std::ifstream in(path);
    if (!in) throw UsageError{fmt::format("--events: cannot read '{}'", path)};
    properties::read_real_records(in, path, inputs.records, inputs.problems);
  }
  if (!args.sessions.empty()) {
    std::ifstream in(args.sessions);
    if (!in) throw UsageError{fmt::format("--sessions: cannot read '{}'", args.sessions)};
    inputs.sessions = properties::read_hub_sessions(in, args.sessions, inputs.problems);
  }
  properties::order_real_records(inputs.records);
  inputs.twins = properties::name_processes(inputs.records, inputs.sessions);
  return inputs;
}

std::map<GapCause, RecoveryBound> recovery_bounds(const scenarios::LeaseScenarioOptions& options, bool notices) {
  std::map<GapCause, RecoveryBound> bounds = scenarios::lease_recovery_bounds(options);
  if (!notices && options.lease.algorithm != lease::Algorithm::seed) {
    // Without notices a released lease is found by the next reconcile, as the
    // articles' algorithm finds it (the simulator's bound for that case).
    scenarios::LeaseScenarioOptions seed = options;
    seed.lease.algorithm = lease::Algorithm::seed;
    bounds[GapCause::graceful] = scenarios::lease_recovery_bounds(seed).at(GapCause::graceful);
  }
  return bounds;
}

// The hub's own judgement (one clock: the hub's); the violations it found.
size_t judge_hub(const RealInputs& inputs, Duration crash_bound) {
  uint64_t compared = 0;
  const std::vector<std::string> hub = properties::hub_overlaps(inputs.sessions, compared);
  print_line(fmt::format("hub judge: {} violations; {} sessions of workers, {} pairs of one channel whose frames "
                         "(subscribe, pongs) overlapped in time (one clock: the hub's)",
                         hub.size(), inputs.sessions.size(), compared));
  for (size_t i = 0; i < std::min<size_t>(hub.size(), 20); ++i) print_line(fmt::format("  violation: {}", hub[i]));
  size_t unrecovered = 0;
  const std::vector<Duration> gaps = properties::hub_crash_gaps(inputs.sessions, inputs.records, unrecovered);
  if (gaps.empty() && unrecovered == 0) return hub.size();
  const size_t beyond =
      static_cast<size_t>(std::count_if(gaps.begin(), gaps.end(), [&](Duration d) { return d > crash_bound; }));
  print_line(fmt::format("hub crash recovery: {} sessions of killed workers; last frame to the next owner's first: "
                         "p50 {}, p99 {}, max {}; {} beyond the crash bound {}; {} never taken over",
                         gaps.size() + unrecovered, properties::for_reading(properties::nearest_rank(gaps, 50)),
                         properties::for_reading(properties::nearest_rank(gaps, 99)),
                         properties::for_reading(gaps.empty() ? Duration::zero() : gaps.back()), beyond, crash_bound,
                         unrecovered));
  return hub.size() + beyond + unrecovered;
}

}  // namespace

CLI::App* add_check_real_command(CLI::App& app, CheckRealArgs& args) {
  CLI::App* check = app.add_subcommand(
      "check-real",
      "Judge real processes' records with the simulator's checkers: single ownership and the recovery bound "
      "(docs/runtime.md)");
  check->add_option("--events", args.events,
                    "JSON lines with mono_ms and event: workers' logs and the lab's own events (repeatable)")
      ->required()
      ->type_name("FILE");
  check->add_option("--sessions", args.sessions, "The hub's session records (hub --sessions)")->type_name("FILE");
  check->add_flag("--notices", args.notices,
                  "The workers sent release notices: judge graceful handovers against the notice bound, not reconcile");
  check->add_option("--fast-worker-offset", args.fast_worker_offset,
                    "A worker's wall clock runs this far ahead (faketime): a term of the expiry bound")
      ->capture_default_str();
  return check;
}

int check_real_command(const CheckRealArgs& args) {
  const Duration fast_offset = duration_flag(args.fast_worker_offset, "--fast-worker-offset", true);
  RealInputs inputs = read_inputs(args);
  const std::optional<lease::LeaseConfig> config = properties::workers_configuration(inputs.records, inputs.problems);
  for (const std::string& p : inputs.problems) print_line(fmt::format("check-real: {}", p));
  if (!config) throw UsageError{"--events: no worker.start line with the workers' configuration"};

  scenarios::LeaseScenarioOptions options;
  options.lease = *config;
  options.fast_worker_offset = fast_offset;
  const std::map<GapCause, RecoveryBound> bounds = recovery_bounds(options, args.notices);
  properties::RealNodes nodes;
  properties::LeaseCheckers checkers([&nodes](NodeId n) { return nodes.name(n); }, bounds);
  // The hub carries streams, not leases: its faults excuse no lease's gap.
  checkers.ignore_faults_at(nodes.of("hub"));
  // Gaps a live watcher saw through (the workers' lease.watch lines) are
  // judged by the watcher's path, the others by the sweep's, as in the simulator.
  checkers.set_watcher_bounds(scenarios::lease_watcher_bounds(options));
  // No set_capacity: the records carry no lease.request lines, by which the
  // room rule knows the workers, so every gap is judged as if some worker
  // had room (the stricter reading).
  const Instant end = properties::replay_real_records(inputs.records, inputs.sessions, nodes,
                                                      [&checkers](const sim::TraceEvent& e) { checkers.observe(e); });
  checkers.finish(end);

  print_line(fmt::format("check-real: {} events from {} files, {} hub sessions, {} processes beside another of their "
                         "worker id; configuration: {} {}, lease {}, heartbeat {}, margin {}, reconcile {}",
                         inputs.records.size(), args.events.size(), inputs.sessions.size(), inputs.twins,
                         lease::to_string(config->algorithm), lease::to_string(config->expiry_mode),
                         config->lease_duration, config->heartbeat_interval, config->safety_margin,
                         config->reconcile_interval));
  print_line(checkers.summary());
  for (const std::string& v : checkers.violations()) print_line(fmt::format("  violation: {}", v));
  for (const std::string& e : checkers.recovery().excused()) print_line(fmt::format("  excused: {}", e));
  size_t violation_count = checkers.violation_count();
  if (!args.sessions.empty()) violation_count += judge_hub(inputs, bounds.at(GapCause::crash).total());
  const bool nothing = checkers.ownership().acting_intervals() == 0;
  if (nothing) print_line("check-real: no acting interval in the records: nothing was checked");
  const bool pass = violation_count == 0 && !nothing;
  print_line(fmt::format("verdict: {}", pass ? "PASS" : "FAIL"));
  return pass ? 0 : kExitFailed;
}

}  // namespace leaseproof::cli
