// The `leaseproof` command. Exit status: 0 success, 1 a run failed its checks
// (or diverged), 2 bad input (an unknown flag, a malformed value).

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>
#include <vector>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "scenarios/scenario.hpp"

#include "cli/check_real_command.hpp"
#include "cli/cli_common.hpp"
#include "base/temporary_file.hpp"
#include "cli/registry_command.hpp"
#include "cli/gate_command.hpp"
#include "cli/replay_command.hpp"
#include "cli/runtime_commands.hpp"
#include "cli/report_commands.hpp"
#include "cli/shrink_command.hpp"
#include "cli/sweep_command.hpp"
#include "sim/trace.hpp"

namespace {

using leaseproof::Duration;
namespace scenarios = leaseproof::scenarios;
using namespace leaseproof::cli;  // the command helpers (cli_common.hpp)

// After a FAIL: the commands that lead from the verdict to the story, with
// this binary's own path: shrink the run, stop it at its first violation,
// read the connection's timeline. The time and the connection are read from
// the first violation's text (its first "@TIME" and "connection cN").
void print_next_commands(const scenarios::RunResult& result) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string binary = error ? std::string{"leaseproof"} : self.string();
  const std::string reproduce = scenarios::reproduce_command(result);
  constexpr std::string_view kRun = "leaseproof run ";
  if (!reproduce.starts_with(kRun)) return;
  const std::string args = reproduce.substr(kRun.size());
  const std::string& first = result.violations.front();
  std::string at;
  if (const size_t sign = first.find('@'); sign != std::string::npos) {
    const size_t stop = first.find_first_not_of("0123456789hmsun.", sign + 1);
    at = first.substr(sign + 1, (stop == std::string::npos ? first.size() : stop) - sign - 1);
  }
  std::string connection;
  if (const size_t word = first.find("connection c"); word != std::string::npos) {
    const size_t begin = word + std::string_view{"connection "}.size();
    connection = first.substr(begin, first.find_first_not_of("c0123456789", begin + 1) - begin);
  }
  fmt::print("next:\n  {} shrink {}   # the same failure, smaller\n", binary, args);
  if (!at.empty()) fmt::print("  {} replay {} --until-time {}   # the events up to the first violation\n", binary, args, at);
  if (!connection.empty()) {
    fmt::print("  {} timeline {} --connection {}   # that connection's story\n", binary, args, connection);
  }
}

void print_result(const scenarios::RunResult& result, double wall_seconds, double cpu_seconds) {
  fmt::print("options: {}\n", result.options);
  std::string counters;
  for (const auto& [name, value] : result.counters) counters += fmt::format(" {}={}", name, value);
  fmt::print("counters:{}\n", counters);
  if (!result.summary.empty()) fmt::print("{}\n", result.summary);
  const double simulated = static_cast<double>(result.duration.ns()) / 1e9;
  fmt::print(
      "events: {} trace, {} scheduled   simulated: {}   wall: {:.3f} s   cpu: {:.3f} s ({})   events/s: {:.0f}   "
      "speed-up: {:.0f}x\n",
      result.events, result.scheduler_events, leaseproof::format_duration(result.duration), wall_seconds, cpu_seconds,
      result.background_checks ? "checkers on a second thread" : "one thread",
      static_cast<double>(result.scheduler_events) / std::max(wall_seconds, 1e-9), simulated / std::max(wall_seconds, 1e-9));
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < result.violations.size() && i < kShown; ++i) fmt::print("violation: {}\n", result.violations[i]);
  const uint64_t found = result.violations.size() + result.violations_unlisted;
  if (found > kShown) {
    fmt::print("... and {} more violations (each checker's line above counts its own)\n",
               found - std::min(kShown, result.violations.size()));
  }
  if (result.passed() && !result.inconclusive.empty()) fmt::print("inconclusive: {}\n", result.inconclusive);
  fmt::print("verdict: {}\n", result.verdict());
  fmt::print("trace hash: {}\n", leaseproof::sim::format_hash(result.trace_hash));
  fmt::print("reproduce: {}\n", scenarios::reproduce_command(result));
  if (!result.passed()) print_next_commands(result);
}


int run_command(const RunArgs& args, bool inline_checks) {
  auto [scenario_found, config] = resolve_run_args(args);
  config.background_checks = !inline_checks && std::thread::hardware_concurrency() >= 2;
  const scenarios::Scenario& scenario = *scenario_found;
  // The trace goes to a temporary file, renamed into place only when the run
  // completed: a reader never sees half a trace under the requested name.
  check_output_file("--trace", args.trace_path);
  check_output_file("--perfetto", args.perfetto_path);
  check_distinct_outputs({{"--trace", args.trace_path}, {"--perfetto", args.perfetto_path}});
  std::ofstream trace_file;
  const std::string temporary = leaseproof::unique_temporary_path(args.trace_path);
  const RemoveOnInterrupt trace_guard{args.trace_path.empty() ? std::string{} : temporary};
  if (!args.trace_path.empty()) {
    trace_file.open(temporary, std::ios::out | std::ios::trunc);
    if (!trace_file) throw UsageError{fmt::format("--trace: cannot write '{}'", args.trace_path)};
    config.trace_jsonl = &trace_file;
  }
  std::unique_ptr<leaseproof::report::PerfettoFile> perfetto;
  std::unique_ptr<RemoveOnInterrupt> perfetto_guard;
  if (!args.perfetto_path.empty()) {
    perfetto = leaseproof::cli::open_perfetto(args.perfetto_path, config);
    perfetto_guard = std::make_unique<RemoveOnInterrupt>(perfetto->temporary_path());
  }
  fmt::print("leaseproof run: scenario {}, seed {}, duration {}\n", scenario.name, config.seed,
             leaseproof::format_duration(*config.duration));
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  scenarios::RunResult result = scenario.run(config);
  const double wall_seconds = seconds_since(start);
  const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  if (!args.trace_path.empty()) {
    trace_file.close();
    if (!trace_file) {
      std::filesystem::remove(temporary);
      fmt::print(stderr, "leaseproof: error: writing the trace to '{}' failed\n", args.trace_path);
      return kExitFailed;
    }
    if (std::string error = leaseproof::rename_into_place(temporary, args.trace_path); !error.empty()) {
      fmt::print(stderr, "leaseproof: error: --trace: {}\n", error);
      return kExitFailed;
    }
    fmt::print("trace: {} ({} events, JSON lines; format in docs/trace-format.md)\n", args.trace_path, result.events);
  }
  if (perfetto && !leaseproof::cli::commit_perfetto(*perfetto, result)) return kExitFailed;
  print_result(result, wall_seconds, cpu_seconds);
  return exit_status(result);
}

// ---- timeline ------------------------------------------------------------------

struct TimelineArgs {
  RunArgs run;  // --seed, --scenario, --duration and the parameter flags
  std::string connection;
};

int timeline_command(const TimelineArgs& args) {
  auto [scenario, config] = resolve_run_args(args.run);
  return leaseproof::cli::timeline_command(*scenario, std::move(config), args.connection);
}

// ---- check-determinism -------------------------------------------------------

struct DeterminismArgs {
  std::string seeds;
  std::string scenario = "lease-swarm";
  std::string duration;
  RunArgs parameters;  // --params, --config, --algorithm, --expiry
  bool print_hashes = false;
  unsigned jobs = 0;  // 0: one per core
};

// A seed range of one scenario with one set of parameters, validated.
struct SeedRangeJob {
  uint64_t first_seed;
  uint64_t last_seed;
  const scenarios::Scenario* scenario;
  Duration duration;
  nlohmann::json parameters;
  unsigned jobs;

  uint64_t count() const { return last_seed - first_seed + 1; }
  scenarios::RunConfig config_for(uint64_t seed) const {
    scenarios::RunConfig config;
    config.seed = seed;
    config.duration = duration;
    config.parameters = parameters;
    return config;
  }
};

SeedRangeJob resolve_job(const DeterminismArgs& args) {
  const auto [first_seed, last_seed] = parse_seed_range(args.seeds);
  const scenarios::Scenario& scenario = parse_scenario(args.scenario);
  const Duration duration = args.duration.empty() ? scenario.default_duration
                                                  : parse_positive_duration(args.duration, "--duration");
  const unsigned jobs = std::max(1u, args.jobs != 0 ? args.jobs : std::thread::hardware_concurrency());
  SeedRangeJob job{first_seed, last_seed, &scenario, duration, scenario_parameters(args.parameters), jobs};
  validate_seeds(scenario, first_seed, job.count(), duration, job.parameters);
  return job;
}

int check_determinism_command(const DeterminismArgs& args) {
  const SeedRangeJob job = resolve_job(args);
  const auto [first_seed, last_seed] = std::pair{job.first_seed, job.last_seed};
  const scenarios::Scenario& scenario = *job.scenario;
  const Duration duration = job.duration;
  fmt::print("leaseproof check-determinism: scenario {}, seeds {}..{}, duration {}, each seed run twice\n",
             scenario.name, first_seed, last_seed, leaseproof::format_duration(duration));
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  // Seeds are independent worlds: run them on every core, report in seed order.
  const uint64_t count = job.count();
  std::vector<scenarios::DeterminismCheck> checks(count);
  parallel_for(count, job.jobs, [&](uint64_t i) { checks[i] = scenarios::check_determinism(scenario, job.config_for(first_seed + i)); });
  uint64_t agreed = 0;
  uint64_t diverged = 0;
  uint64_t events = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const scenarios::DeterminismCheck& check = checks[i];
    const uint64_t seed = first_seed + i;
    events += check.events;
    if (check.agreed) {
      ++agreed;
      if (args.print_hashes) fmt::print("seed {} hash {}\n", seed, leaseproof::sim::format_hash(check.first_hash));
      continue;
    }
    ++diverged;
    fmt::print("seed {}: DIVERGED, hashes {} and {}\n  first divergent event: index {}\n", seed,
               leaseproof::sim::format_hash(check.first_hash), leaseproof::sim::format_hash(check.second_hash),
               check.divergent_index);
    if (check.recurred_with_capture) {
      fmt::print("  run 1: {}\n  run 2: {}\n", check.first_event, check.second_event);
    } else {
      fmt::print("  (the divergence did not recur when the pair ran again with event capture)\n");
    }
    fmt::print("  reproduce: leaseproof check-determinism --seeds {}..{} --scenario {} --duration {}\n", seed, seed,
               scenario.name, leaseproof::format_duration(duration));
  }
  const double wall_seconds = seconds_since(start);
  fmt::print("determinism: {} seeds agreed, {} diverged ({} runs on {} threads, {} events, {:.2f} s, {:.0f} runs/s)\n",
             agreed, diverged, 2 * (agreed + diverged), std::min<uint64_t>(job.jobs, count), events, wall_seconds,
             static_cast<double>(2 * (agreed + diverged)) / std::max(wall_seconds, 1e-9));
  return diverged == 0 ? 0 : kExitFailed;
}

// ---- check: many seeds, once each -----------------------------------------------

int check_command(const DeterminismArgs& args) {
  const SeedRangeJob job = resolve_job(args);
  const auto [first_seed, last_seed] = std::pair{job.first_seed, job.last_seed};
  const scenarios::Scenario& scenario = *job.scenario;
  const Duration duration = job.duration;
  const uint64_t count = job.count();
  const unsigned jobs = job.jobs;
  auto config_for = [&job](uint64_t seed) { return job.config_for(seed); };
  fmt::print("leaseproof check: scenario {}, seeds {}..{}, duration {}, {} threads\n", scenario.name, first_seed,
             last_seed, leaseproof::format_duration(duration), std::min<uint64_t>(jobs, count));
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  std::vector<scenarios::RunResult> results(count);
  std::atomic<uint64_t> finished{0};
  parallel_for(count, jobs, [&](uint64_t i) {
    scenarios::RunResult result = scenario.run(config_for(first_seed + i));
    result.digests.clear();
    result.lines.clear();
    results[i] = std::move(result);
    // A progress line every 100 seeds (a long check is not silent); the
    // verdicts come at the end, in seed order.
    if (const uint64_t done = ++finished; done % 100 == 0 && done < count) {
      fmt::print("check: {} of {} seeds done, {:.1f} s\n", done, count, seconds_since(start));
      std::fflush(stdout);
    }
  });
  const double wall_seconds = seconds_since(start);
  uint64_t failed = 0;
  uint64_t inconclusive = 0;
  uint64_t events = 0;
  std::map<std::string, uint64_t> totals;
  for (const scenarios::RunResult& result : results) {
    events += result.events;
    for (const auto& [name, value] : result.counters) totals[name] += value;
    if (result.passed() && !result.inconclusive.empty() && ++inconclusive <= 10) {
      fmt::print("seed {}: INCONCLUSIVE: {}\n", result.seed, result.inconclusive);
    }
    if (result.passed()) continue;
    ++failed;
    fmt::print("seed {}: {}: {}\n  reproduce: {}\n", result.seed, result.verdict(),
               result.violations.front().substr(0, result.violations.front().find('\n')),
               scenarios::reproduce_command(result));
  }
  // Totals over every seed, one line per family of counters (lease.*,
  // mark.lease.*, dynamo.*, ...): a person reads them, a script splits them.
  fmt::print("totals:\n");
  std::string family;
  std::string line;
  for (const auto& [name, value] : totals) {
    const size_t dot = name.find('.', name.starts_with("mark.") ? 5 : 0);
    const std::string this_family = name.substr(0, dot == std::string::npos ? name.size() : dot);
    if (this_family != family && !line.empty()) fmt::print("  {}\n", line);
    if (this_family != family) line.clear();
    family = this_family;
    line += fmt::format("{}{}={}", line.empty() ? "" : " ", name, value);
  }
  if (!line.empty()) fmt::print("  {}\n", line);
  if (inconclusive > 10) fmt::print("... and {} more inconclusive seeds\n", inconclusive - 10);
  fmt::print("check: {} seeds, {} passed, {} failed, {} inconclusive; {} events in {:.2f} s ({:.1f} seeds/s)\n", count,
             count - failed - inconclusive, failed, inconclusive, events, wall_seconds,
             static_cast<double>(count) / std::max(wall_seconds, 1e-9));
  if (failed > 0) return kExitFailed;
  return inconclusive == 0 ? 0 : kExitInconclusive;
}

int list_scenarios() {
  for (const auto& scenario : scenarios::scenarios()) {
    fmt::print("{:<10} default duration {:<8} {}\n", scenario.name,
               leaseproof::format_duration(scenario.default_duration), scenario.summary);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const int status = forward_runtime_command(argc, argv); status >= 0) return status;
  CLI::App app{"leaseproof: deterministic simulation and verification of DynamoDB-lease worker fleets"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "leaseproof 0.1.0");

  RunArgs run_args;
  CLI::App* run = app.add_subcommand("run", "Run one seeded simulation; print its verdict, trace hash and reproduce line");
  add_run_flags(run, run_args);
  run->add_option("--trace", run_args.trace_path, "Write every event as JSON lines to FILE (docs/trace-format.md)")
      ->type_name("FILE");
  bool inline_checks = false;
  run->add_flag("--inline-checks", inline_checks,
                "Run the checkers and the trace hash on the simulation's thread (default: on a second thread when "
                "the machine has two cores; the result is the same)");
  run->add_option("--perfetto", run_args.perfetto_path,
                  "Write the run as a Perfetto trace (JSON) to FILE, for https://ui.perfetto.dev (docs/perfetto.md)")
      ->type_name("FILE");

  TimelineArgs timeline_args;
  CLI::App* timeline = app.add_subcommand(
      "timeline", "Run one seeded simulation and print one connection's timeline (requests, ownership, faults)");
  add_run_flags(timeline, timeline_args.run);
  timeline->add_option("--connection", timeline_args.connection, "The connection, e.g. c17")->required()->type_name("ID");

  DeterminismArgs det_args;
  CLI::App* det = app.add_subcommand("check-determinism", "Run each seed twice and compare trace hashes");
  det->add_option("--seeds", det_args.seeds, "Seed range A..B (inclusive)")->required()->type_name("A..B");
  det->add_option("--scenario", det_args.scenario, "Scenario name")->capture_default_str()->type_name("NAME");
  det->add_option("--duration", det_args.duration, "Simulated time per run (default: the scenario's)")
      ->type_name("DURATION");
  det->add_flag("--print-hashes", det_args.print_hashes, "Print each seed's trace hash");
  add_parameter_flags(det, det_args.parameters);
  det->add_option("--jobs", det_args.jobs, "Threads (default: one per core)")
      ->check(CLI::Range(1u, 256u))
      ->type_name("N");

  DeterminismArgs check_args;
  check_args.scenario = "lease-swarm";
  CLI::App* check = app.add_subcommand("check", "Run each seed of a range once; report every failing seed with its reproduce line");
  check->add_option("--seeds", check_args.seeds, "Seed range A..B (inclusive)")->required()->type_name("A..B");
  check->add_option("--scenario", check_args.scenario, "Scenario name")->capture_default_str()->type_name("NAME");
  check->add_option("--duration", check_args.duration, "Simulated time per run (default: the scenario's)")
      ->type_name("DURATION");
  check->add_option("--jobs", check_args.jobs, "Threads (default: one per core)")->check(CLI::Range(1u, 256u))->type_name("N");
  add_parameter_flags(check, check_args.parameters);

  GateArgs gate_args;
  CLI::App* gate = add_gate_command(app, gate_args);

  ShrinkArgs shrink_args;
  CLI::App* shrink = add_shrink_command(app, shrink_args);
  ReplayArgs run_replay_args;  // `replay` (a reproduce line); `dynamo replay` is the other
  CLI::App* run_replay = add_replay_command(app, run_replay_args);
  SweepArgs sweep_args;
  CLI::App* sweep = add_sweep_command(app, sweep_args);
  MergeArgs merge_args;
  CLI::App* merge = add_report_merge_command(app, merge_args);

  CLI::App* list = app.add_subcommand("scenarios", "List the scenarios");

  leaseproof::cli::CheckRealArgs check_real_args;
  CLI::App* check_real = leaseproof::cli::add_check_real_command(app, check_real_args);
  leaseproof::cli::RegistryScaleArgs registry_scale_args;
  CLI::App* registry_scale = leaseproof::cli::add_registry_command(app, registry_scale_args);

  // The commands of leaseproof-runtime, listed here; forwarded above, before any parsing.
  for (const RuntimeCommand& command : runtime_commands()) {
    app.add_subcommand(std::string{command.name}, std::string{command.description})
        ->group("Commands on real sockets (run by leaseproof-runtime, beside this binary)");
  }

  return parse_and_run(app, argc, argv, [&] {
    if (run->parsed()) return run_command(run_args, inline_checks);
    if (timeline->parsed()) return timeline_command(timeline_args);
    if (det->parsed()) return check_determinism_command(det_args);
    if (list->parsed()) return list_scenarios();
    if (check->parsed()) return check_command(check_args);
    if (gate->parsed()) return gate_command(gate_args);
    if (shrink->parsed()) return shrink_command(shrink_args);
    if (run_replay->parsed()) return replay_command(run_replay_args);
    if (sweep->parsed()) return sweep_command(sweep_args);
    if (merge->parsed()) return report_merge_command(merge_args);
    if (registry_scale->parsed()) return leaseproof::cli::registry_scale_command(registry_scale_args);
    if (check_real->parsed()) return leaseproof::cli::check_real_command(check_real_args);
    return kExitUsage;
  });
}
