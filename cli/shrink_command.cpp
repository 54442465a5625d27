// `leaseproof shrink`: runs the starting run, then smaller and smaller
// variants of it while the same property still fails; prints each step, the
// smallest run's reproduce line, its faults and its violation.

#include "cli/shrink_command.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "scenarios/lease.hpp"
#include "scenarios/registry.hpp"
#include "scenarios/shrink.hpp"
#include "sim/trace.hpp"

#include "cli/cli_common.hpp"

namespace leaseproof::cli {

namespace {

namespace sc = scenarios;

std::string plural(size_t count, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", count, count == 1 ? one : many);
}

std::string size_of(size_t faults, uint32_t workers, uint32_t connections, Duration duration) {
  return fmt::format("{}, {}, {}, {}", plural(faults, "fault", "faults"), plural(workers, "worker", "workers"),
                     plural(connections, "connection", "connections"), duration);
}

std::string size_of(const sc::LeaseScenarioOptions& o) {
  return size_of(sc::faults_of(o).size(), o.workers, o.connections, o.duration);
}

void check_property(const std::string& property) {
  if (property.empty()) return;
  std::string known;
  for (const std::string_view kind : sc::property_kinds()) {
    if (kind == property) return;
    known += fmt::format("{}'{}'", known.empty() ? "" : ", ", kind);
  }
  throw UsageError{fmt::format("--property: unknown property '{}'; known: {}", property, known)};
}

uint64_t parse_budget(const std::string& text) {
  uint64_t runs = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), runs);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) {
    throw UsageError{fmt::format("--budget: '{}' is not a number of runs; expected an integer such as 500", text)};
  }
  if (runs == 0) throw UsageError{"--budget: must be at least 1 run (the starting run counts)"};
  return runs;
}

void print_outcome(const sc::ShrinkResult& result, uint64_t budget, double seconds) {
  const sc::LeaseScenarioOptions& first = result.first_options;
  const sc::LeaseScenarioOptions& last = result.last_options;
  fmt::print("shrunk: {} still fails after {}; {} runs of the budget of {}{} ({} more run ahead on other threads), "
             "{:.1f} s\n",
             result.property, plural(result.steps, "step", "steps"), result.runs, budget,
             result.budget_exhausted ? " (budget exhausted: smaller may exist)" : ", fixpoint reached",
             result.speculative_runs, seconds);
  fmt::print("  from: {}\n  to:   {}\n", size_of(first), size_of(last));
  fmt::print("reproduce: {}\n", sc::reproduce_command(result.last));
  const std::vector<sc::Fault> faults = sc::faults_of(last);
  fmt::print("faults: {}\n", faults.size());
  for (const sc::Fault& fault : faults) fmt::print("  {}\n", fault.text);
  fmt::print("violation: {}\n", sc::first_violation_of(result.last, result.property));
  fmt::print("trace hash: {}\n", sim::format_hash(result.last.trace_hash));
}

// The registry scenarios: their own search (scenarios/registry.hpp).
int shrink_registry_command(const sc::Scenario& scenario, const sc::RunConfig& config, const std::string& property,
                            uint64_t budget) {
  if (!property.empty() && property != "delivery" && property != "staleness" && property != "membership") {
    throw UsageError{fmt::format("--property: unknown registry property '{}'; known: 'delivery', 'staleness', "
                                 "'membership'",
                                 property)};
  }
  fmt::print("leaseproof shrink: scenario {}, seed {}, duration {}, property {}, budget {} runs, 1 thread\n",
             scenario.name, config.seed, format_duration(*config.duration),
             property.empty() ? "(the first violation's)" : property, budget);
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const sc::RegistryShrinkResult result =
      sc::shrink_registry(scenario, config, property, budget, [](const sc::RegistryShrinkStep& step) {
        if (step.number == 0) {
          fmt::print("start (run {}): {}: {}\n", step.runs, step.change, step.size);
        } else {
          fmt::print("step {} (run {}): {} -> {}\n", step.number, step.runs, step.change, step.size);
        }
        std::fflush(stdout);
      });
  if (!result.started_failing) {
    fmt::print("nothing to shrink: the run {}\nreproduce: {}\n",
               result.first.passed() ? std::string{"passes"}
                                     : fmt::format("does not fail {}", result.property),
               sc::reproduce_command(result.first));
    return kExitFailed;
  }
  fmt::print("shrunk: {} still fails after {}; {} runs of the budget of {}{}, {:.1f} s\n", result.property,
             plural(result.steps, "step", "steps"), result.runs, budget,
             result.budget_exhausted ? " (budget exhausted: smaller may exist)" : ", fixpoint reached",
             seconds_since(start));
  fmt::print("reproduce: {}\n", sc::reproduce_command(result.last));
  fmt::print("violation: {}\n", sc::first_violation_of(result.last, result.property));
  fmt::print("trace hash: {}\n", sim::format_hash(result.last.trace_hash));
  return 0;
}

}  // namespace

CLI::App* add_shrink_command(CLI::App& app, ShrinkArgs& args) {
  CLI::App* command = app.add_subcommand(
      "shrink", "Make a failing run small: remove and shorten faults, fewer workers and connections, a shorter run, "
                "while the same property fails (docs/shrink-and-replay.md)");
  add_run_flags(command, args.run);
  command->add_option("--property", args.property,
                      "The property that must keep failing, e.g. 'single ownership' (default: the run's first "
                      "violation's)")
      ->type_name("KIND");
  command->add_option("--budget", args.budget, "Most runs to make, the starting run included")
      ->capture_default_str()
      ->type_name("RUNS");
  command->add_option("--jobs", args.jobs, "Threads (default: one per core; the result does not depend on it)")
      ->check(CLI::Range(1u, 256u))
      ->type_name("N");
  return command;
}

int shrink_command(const ShrinkArgs& args) {
  auto [scenario, config] = resolve_run_args(args.run);
  if (sc::is_registry_scenario(scenario->name)) {
    return shrink_registry_command(*scenario, config, args.property, parse_budget(args.budget));
  }
  if (!sc::is_lease_scenario(scenario->name)) {
    throw UsageError{fmt::format("--scenario: shrink works on the lease scenarios (lease-*, and stream-* with "
                                 "leases) and the registry scenarios; '{}' has no fault parameters to shrink",
                                 scenario->name)};
  }
  check_property(args.property);
  const uint64_t budget = parse_budget(args.budget);
  const unsigned jobs = std::max(1u, args.jobs != 0 ? args.jobs : std::thread::hardware_concurrency());
  fmt::print("leaseproof shrink: scenario {}, seed {}, duration {}, property {}, budget {} runs, {} threads\n",
             scenario->name, config.seed, format_duration(*config.duration),
             args.property.empty() ? "(the first violation's)" : args.property, budget, jobs);
  std::fflush(stdout);

  sc::ShrinkSettings settings;
  settings.property = args.property;
  settings.budget_runs = budget;
  settings.jobs = jobs;
  settings.parallel = [jobs](size_t count, const std::function<void(size_t)>& body) {
    parallel_for(count, jobs, [&body](uint64_t i) { body(static_cast<size_t>(i)); });
  };
  settings.on_step = [](const sc::ShrinkStep& step) {
    const std::string size = size_of(step.faults, step.workers, step.connections, step.duration);
    if (step.number == 0) {
      fmt::print("start (run {}): {}: {}\n", step.runs, step.change, size);
    } else {
      fmt::print("step {} (run {}): {} -> {}\n", step.number, step.runs, step.change, size);
    }
    std::fflush(stdout);
  };
  const auto start = std::chrono::steady_clock::now();
  const sc::ShrinkResult result = sc::shrink(*scenario, config, settings);
  const double seconds = seconds_since(start);
  if (!result.started_failing) {
    const std::string verdict = result.first.passed()
                                    ? std::string{"passes"}
                                    : fmt::format("fails only other properties ({})",
                                                  sc::violation_kind(result.first.violations.front()));
    fmt::print("nothing to shrink: the run {}{}\nreproduce: {}\n", verdict,
               result.property.empty() ? "" : fmt::format(", it does not fail {}", result.property),
               sc::reproduce_command(result.first));
    return kExitFailed;
  }
  print_outcome(result, budget, seconds);
  return 0;
}

}  // namespace leaseproof::cli
