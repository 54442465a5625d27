// `leaseproof gate`: the options of the CI gate, checked before anything
// runs, then scenarios/gate (the runs, the regression file) and
// reports/gate_documents (JUnit XML, gate.json, the merge of shards).

#include "cli/gate_command.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "base/temporary_file.hpp"
#include "base/time.hpp"
#include "reports/gate_documents.hpp"
#include "reports/sweep.hpp"
#include "scenarios/gate.hpp"

namespace leaseproof::cli {

namespace {

using scenarios::GateOutcome;
using scenarios::GateRun;

// The gate the options ask for: its new seeds, gate.json's configuration
// fields, and the budget.
struct GatePlan {
  scenarios::GateSeeds seeds;
  report::GateConfiguration configuration;
  std::optional<Duration> budget;
  bool combined = false;  // several scenarios take the new seeds in turn
};

// --scenario: one scenario, or several that new seeds take in turn
// ("lease-swarm,registry-swarm"); NAME*K takes K consecutive seeds of every turn.
void parse_gate_scenarios(const std::string& text, scenarios::GateSeeds& seeds) {
  for (size_t begin = 0; begin <= text.size();) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    std::string_view entry = std::string_view{text}.substr(begin, comma - begin);
    uint64_t weight = 1;
    if (const size_t star = entry.find('*'); star != std::string_view::npos) {
      const std::string_view digits = entry.substr(star + 1);
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), weight);
      if (error != std::errc{} || end != digits.data() + digits.size() || weight < 1 || weight > 100) {
        throw UsageError{fmt::format("--scenario: '{}': the weight after '*' must be a whole number from 1 to 100",
                                     entry)};
      }
      entry = entry.substr(0, star);
    }
    const scenarios::Scenario* one = &parse_scenario(std::string{entry});
    for (const scenarios::GateScenario& listed : seeds.scenarios) {
      if (listed.scenario == one) throw UsageError{fmt::format("--scenario: '{}' is listed twice", one->name)};
    }
    seeds.scenarios.push_back({one, {}, {}});
    seeds.turn.insert(seeds.turn.end(), weight, seeds.scenarios.size() - 1);
    begin = comma + 1;
  }
}

// Each scenario's duration: --duration, or the scenario's own.
std::string set_durations(const std::string& flag, scenarios::GateSeeds& seeds) {
  std::string text;
  for (scenarios::GateScenario& one : seeds.scenarios) {
    one.duration = flag.empty() ? one.scenario->default_duration : parse_positive_duration(flag, "--duration");
    text += (text.empty() ? "" : ",") + format_duration(one.duration);
  }
  return text;
}

// A combined gate's --expiry and --algorithm go to the scenarios that take
// them (the lease scenarios); the others run their defaults.
void set_parameters(const GateArgs& args, const nlohmann::json& parameters, bool combined,
                    scenarios::GateSeeds& seeds) {
  if (combined && (!args.run.params.empty() || !args.run.config_path.empty())) {
    throw UsageError{fmt::format("--params: a combined gate (--scenario {}) runs each scenario with its own "
                                 "defaults; parameters belong to a gate of one scenario",
                                 args.run.scenario)};
  }
  bool taken = false;
  for (scenarios::GateScenario& one : seeds.scenarios) {
    one.parameters = parameters;
    if (!combined || parameters.empty()) continue;
    scenarios::RunConfig config;
    config.seed = seeds.first_seed;
    config.duration = one.duration;
    config.parameters = parameters;
    if (one.scenario->validate && !one.scenario->validate(config).empty()) {
      one.parameters = nlohmann::json::object();
    } else {
      taken = true;
    }
  }
  if (combined && !parameters.empty() && !taken) {
    throw UsageError{fmt::format("--expiry/--algorithm: none of the scenarios {} takes them", args.run.scenario)};
  }
}

void validate_gate_seeds(const scenarios::GateSeeds& seeds, bool combined) {
  if (!combined) {
    const scenarios::GateScenario& one = seeds.scenarios.front();
    validate_seeds(*one.scenario, seeds.first_seed, seeds.count, one.duration, one.parameters);
    return;
  }
  for (uint64_t i = 0; i < seeds.count; ++i) {
    const scenarios::GateScenario& one = seeds.scenarios[seeds.turn[i % seeds.turn.size()]];
    validate_seeds(*one.scenario, seeds.first_seed + i, 1, one.duration, one.parameters);
  }
}

// Output files are checked before anything runs: a gate that cannot report
// must not spend its budget first. A shard records no regressions.
std::optional<scenarios::GateShard> check_gate_outputs(const GateArgs& args) {
  check_output_file("--junit", args.junit_path);
  if (!args.no_record) check_output_file("--regressions", args.regressions_path);
  if (args.create_regressions && args.regressions_path.empty()) {
    throw UsageError{"--create-regressions: needs --regressions FILE"};
  }
  std::optional<scenarios::GateShard> shard;
  if (!args.shard.empty()) {
    try {
      const report::Shard parsed = report::parse_shard(args.shard);
      shard = scenarios::GateShard{parsed.index, parsed.count};
    } catch (const report::SweepInputError& error) {
      throw UsageError{error.what()};
    }
    if (!args.no_record) {
      throw UsageError{"--shard: a shard does not record regressions (shards would race on one file): add --no-record"};
    }
  }
  if (!args.out.empty()) check_output_directory("--out", args.out);
  return shard;
}

// Every option checked, in the order a user meets the errors.
GatePlan plan_gate(const GateArgs& args, const nlohmann::json& parameters) {
  GatePlan plan;
  scenarios::GateSeeds& seeds = plan.seeds;
  parse_gate_scenarios(args.run.scenario, seeds);
  plan.combined = seeds.scenarios.size() > 1;
  seeds.count = args.seeds;
  seeds.first_seed = parse_seed(args.first_seed, "--first-seed");
  if (seeds.first_seed > UINT64_MAX - (args.seeds - 1)) {
    throw UsageError{
        fmt::format("--first-seed: {} + {} seeds runs past the largest seed", seeds.first_seed, args.seeds)};
  }
  const std::string duration_text = set_durations(args.run.duration, seeds);
  if (!args.budget.empty()) plan.budget = parse_positive_duration(args.budget, "--budget");
  set_parameters(args, parameters, plan.combined, seeds);
  validate_gate_seeds(seeds, plan.combined);
  plan.configuration = {args.run.scenario, seeds.first_seed, args.seeds, duration_text, parameters,
                        args.regressions_path, check_gate_outputs(args)};
  return plan;
}

// Each failing run, and the first inconclusive one, in run order.
void print_run_verdicts(const std::vector<GateRun>& runs, const std::vector<GateOutcome>& outcomes) {
  bool inconclusive_shown = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!outcomes[i].ran) continue;
    const scenarios::RunResult& result = outcomes[i].result;
    const char* kind = runs[i].regression ? "regression" : "new";
    if (result.passed() && !result.inconclusive.empty() && !inconclusive_shown) {
      fmt::print("{} seed {}: INCONCLUSIVE: {}\n", kind, runs[i].seed, result.inconclusive);
      inconclusive_shown = true;
    }
    if (result.passed()) continue;
    fmt::print("{} seed {}: FAIL ({}): {}\n  reproduce: {}\n", kind, runs[i].seed,
               scenarios::violation_kind(result.violations.front()), scenarios::violation_headline(result),
               scenarios::reproduce_command(result));
  }
}

// --junit and --out; kExitFailed when one could not be written.
int write_gate_documents(const GateArgs& args, const GatePlan& plan, const std::vector<GateRun>& runs,
                         const scenarios::GateResults& results) {
  int status = 0;
  if (!args.junit_path.empty()) {
    if (write_whole_file(args.junit_path, report::gate_junit_xml(runs, results.outcomes, results.seconds))) {
      fmt::print("gate: JUnit XML written to {}\n", args.junit_path);
    } else {
      fmt::print(stderr, "leaseproof: error: cannot write the JUnit XML to '{}'\n", args.junit_path);
      status = kExitFailed;
    }
  }
  if (args.out.empty()) return status;
  const std::string path = (std::filesystem::path{args.out} / "gate.json").string();
  std::error_code made;
  std::filesystem::create_directories(args.out, made);
  const nlohmann::json document =
      report::gate_document(plan.configuration, runs, results.outcomes, results.budget_reached);
  if (!made && write_whole_file(path, document.dump(2) + "\n")) {
    fmt::print("gate: results written to {}{}\n", path,
               plan.configuration.shard ? "; combine every shard with: leaseproof report merge --out DIR SHARD_DIR..."
                                        : "");
  } else {
    fmt::print(stderr, "leaseproof: error: cannot write '{}'\n", path);
    status = kExitFailed;
  }
  return status;
}

// New failures go to the regression file, unless they are expected to fail;
// kExitFailed when the file could not be updated.
int record_new_failures(const GateArgs& args, const std::vector<GateRun>& runs,
                        const std::vector<GateOutcome>& outcomes, const scenarios::GateTally& tally) {
  if (tally.expected_failures > 0) {
    fmt::print("gate: {} of the failing runs are expected to fail and are not recorded as regressions ({}{})\n",
               tally.expected_failures, tally.expected_failures > 1 ? "the first: " : "", tally.expected_reason);
  }
  if (args.regressions_path.empty() || args.no_record || tally.new_failed <= tally.expected_failures) return 0;
  uint64_t added = 0;
  if (!scenarios::record_regressions(args.regressions_path, runs, outcomes, added)) {
    fmt::print(stderr, "leaseproof: error: cannot update the regression file '{}'\n", args.regressions_path);
    return kExitFailed;
  }
  fmt::print("gate: {} new failing runs added to {}\n", added, args.regressions_path);
  return 0;
}

// The last line, for a gate and for merged shards alike.
int print_gate_verdict(uint64_t failed, uint64_t inconclusive, int status) {
  if (failed > 0) {
    fmt::print("gate: FAIL ({} failing runs)\n", failed);
    return kExitFailed;
  }
  if (status == 0 && inconclusive > 0) {
    fmt::print("gate: INCONCLUSIVE ({} of the passing runs owned no connection or ended before their recovery bound "
               "could be judged)\n",
               inconclusive);
    return kExitInconclusive;
  }
  fmt::print("gate: {}\n", status == 0 ? "PASS" : "FAIL (every run passed, but a report could not be written)");
  return status;
}

void print_gate_start(const GateArgs& args, const GatePlan& plan, uint64_t regressions, uint64_t new_seeds,
                      unsigned jobs) {
  const std::optional<scenarios::GateShard>& shard = plan.configuration.shard;
  fmt::print("leaseproof gate: {} regression runs, then scenario{} {} seeds {}..{}{}{} (duration {}{}), {} threads\n",
             regressions, plan.combined ? "s" : "", args.run.scenario, plan.seeds.first_seed,
             plan.seeds.first_seed + args.seeds - 1, plan.combined ? " in turn" : "",
             shard ? fmt::format(", shard {}/{}: {} of them", shard->index, shard->count, new_seeds) : "",
             plan.configuration.duration, plan.budget ? fmt::format(", budget {}", format_duration(*plan.budget)) : "",
             jobs);
  std::fflush(stdout);
}

void print_gate_counts(const scenarios::GateTally& tally, uint64_t new_seeds, bool budget_reached, double seconds,
                       unsigned jobs) {
  fmt::print("gate: regressions {} passed, {} failed; new seeds {} of {} ran{}: {} passed, {} failed\n",
             tally.regressions_passed, tally.regressions_failed, tally.new_ran(), new_seeds,
             budget_reached ? " (budget reached)" : "", tally.new_passed, tally.new_failed);
  fmt::print("gate: {} runs in {:.2f} s on {} threads: {:.1f} seeds/s\n", tally.ran(), seconds, jobs,
             static_cast<double>(tally.ran()) / std::max(seconds, 1e-9));
}

}  // namespace

CLI::App* add_gate_command(CLI::App& app, GateArgs& args) {
  CLI::App* gate = app.add_subcommand(
      "gate", "CI gate: re-run the regression seeds, then new swarm seeds until --seeds or --budget; fail on any violation");
  gate->add_option("--seeds", args.seeds, "New seeds to run (from --first-seed)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}))
      ->type_name("N");
  gate->add_option("--first-seed", args.first_seed, "First new seed")->capture_default_str()->type_name("SEED");
  gate->add_option("--budget", args.budget, "Wall-time budget for the new seeds, e.g. 60s, 10m (default: none)")
      ->type_name("DURATION");
  gate->add_option("--min-seeds", args.min_seeds,
                   "New seeds that run whatever the budget: a gate that judged fewer proves little (at most --seeds)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}))
      ->type_name("N");
  // Empty until given: the default depends on --params and --config.
  args.run.scenario.clear();
  gate->add_option("--scenario", args.run.scenario,
                   fmt::format("Scenario name, or several comma-separated (NAME*K: K of every turn): new seeds take "
                               "them in turn, each with its own duration (default: {}; lease-swarm alone with "
                               "--params or --config)",
                               kDefaultGateScenarios))
      ->type_name("NAME[*K][,NAME...]");
  gate->add_option("--duration", args.run.duration, "Simulated time per run (default: the scenario's)")
      ->type_name("DURATION");
  add_parameter_flags(gate, args.run);
  gate->add_option("--jobs", args.jobs, "Threads (default: one per core)")->check(CLI::Range(1u, 256u))->type_name("N");
  gate->add_option("--junit", args.junit_path, "Write the results as JUnit XML to FILE")->type_name("FILE");
  gate->add_option("--regressions", args.regressions_path,
                   "Regression file (JSON lines): its runs go first; new failures are appended")
      ->type_name("FILE");
  gate->add_flag("--no-record", args.no_record, "Do not append new failures to the regression file");
  gate->add_flag("--create-regressions", args.create_regressions,
                 "Start the regression file if it does not exist (otherwise a missing file is an error)");
  gate->add_option("--shard", args.shard,
                   "Run shard i of n (1-based; i may be 'index': $JOB_COMPLETION_INDEX + 1): every n-th regression "
                   "and new seed; a shard records no regressions; combine shards' --out with 'report merge'")
      ->type_name("i/n");
  gate->add_option("--out", args.out, "Write DIR/gate.json: every run's verdict and trace hash (for 'report merge')")
      ->type_name("DIR");
  return gate;
}

int gate_command(const GateArgs& given) {
  GateArgs args = given;
  const nlohmann::json parameters = scenario_parameters(args.run);
  if (args.run.scenario.empty()) {
    args.run.scenario = args.run.params.empty() && args.run.config_path.empty() ? std::string{kDefaultGateScenarios}
                                                                               : std::string{"lease-swarm"};
  }
  const GatePlan plan = plan_gate(args, parameters);
  std::vector<GateRun> runs;
  try {
    runs = scenarios::gate_runs(scenarios::read_regressions(args.regressions_path, args.create_regressions),
                                plan.seeds, plan.configuration.shard);
  } catch (const scenarios::GateInputError& error) {
    throw UsageError{error.what()};
  }
  const auto regressions = static_cast<uint64_t>(
      std::count_if(runs.begin(), runs.end(), [](const GateRun& run) { return run.regression; }));
  const uint64_t new_seeds = runs.size() - regressions;
  const unsigned jobs = std::max(1u, args.jobs != 0 ? args.jobs : std::thread::hardware_concurrency());
  print_gate_start(args, plan, regressions, new_seeds, jobs);

  const scenarios::GateResults results = scenarios::run_gate(
      runs, {std::min(args.min_seeds, new_seeds), plan.budget},
      [jobs](size_t count, const std::function<void(size_t)>& body) { parallel_for(count, jobs, body); },
      [](uint64_t done, double seconds) {
        fmt::print("gate: {} runs done, {:.1f} s\n", done, seconds);
        std::fflush(stdout);
      });
  print_run_verdicts(runs, results.outcomes);
  const scenarios::GateTally tally = scenarios::tally_gate(runs, results.outcomes);
  print_gate_counts(tally, new_seeds, results.budget_reached, results.seconds, jobs);
  int status = tally.failed() == 0 ? 0 : kExitFailed;
  if (write_gate_documents(args, plan, runs, results) != 0) status = kExitFailed;
  if (record_new_failures(args, runs, results.outcomes, tally) != 0) status = kExitFailed;
  return print_gate_verdict(tally.failed(), tally.inconclusive, status);
}

bool is_gate_shard(const std::string& directory) {
  return std::filesystem::exists(std::filesystem::path{directory} / "gate.json");
}

int merge_gate_shards(const std::vector<std::string>& directories, const std::string& out) {
  std::vector<report::ShardDocument> shards;
  for (const std::string& directory : directories) {
    const std::string file = (std::filesystem::path{directory} / "gate.json").string();
    shards.push_back({file, read_json_file(file, "report merge")});
  }
  report::MergedGate merged;
  try {
    merged = report::merge_gate_shards(shards);
  } catch (const scenarios::GateInputError& error) {
    throw UsageError{error.what()};
  }
  check_output_directory("--out", out);
  for (const report::GateFailure& failure : merged.failures) {
    fmt::print("{} seed {}: FAIL ({}): {}\n  reproduce: {}\n", failure.regression ? "regression" : "new",
               failure.seed, failure.kind, failure.violation, failure.reproduce);
  }
  const std::string path = (std::filesystem::path{out} / "gate.json").string();
  std::error_code made;
  std::filesystem::create_directories(out, made);
  if (made || !write_whole_file(path, merged.document.dump(2) + "\n")) {
    fmt::print(stderr, "leaseproof: error: cannot write '{}'\n", path);
    return kExitFailed;
  }
  fmt::print("report merge: {} gate shards, {} runs: {} failed, {} inconclusive{}; written to {}\n", merged.shards,
             merged.document["runs"].size(), merged.failed, merged.inconclusive,
             merged.budget_reached ? " (a shard reached its budget)" : "", path);
  return print_gate_verdict(merged.failed, merged.inconclusive, 0);
}

}  // namespace leaseproof::cli
