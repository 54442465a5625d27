// `leaseproof gate`: runs the regression seeds (runs that once failed), then
// new seeds of the swarm until a seed count or a wall-time budget, and fails
// on any violation. Writes JUnit XML for CI systems and appends new failures
// to the regression file, so a seed that failed once is re-run forever.

#include "cli/gate_command.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "base/time.hpp"
#include "reports/markup.hpp"
#include "base/temporary_file.hpp"
#include "reports/sweep.hpp"
#include "sim/trace.hpp"

namespace leaseproof::cli {

namespace {

// One run the gate makes: a regression entry or a new seed.
struct GateRun {
  std::string scenario;
  uint64_t seed = 0;
  Duration duration;
  nlohmann::json parameters = nlohmann::json::object();
  bool regression = false;

  auto key() const { return std::tuple{scenario, seed, duration.ns(), parameters.dump()}; }
};

struct GateOutcome {
  bool ran = false;
  scenarios::RunResult result;
  double seconds = 0;
};

// Regression file: one JSON object per line,
//   {"scenario": "lease-swarm", "seed": 462, "duration": "10m0s", "parameters": {}, "kind": "recovery"}
// ("kind" is informative). Blank lines and lines starting with '#' are skipped.
// A missing file is refused (a mistyped path would skip every regression)
// unless `create` says it is a new one.
std::vector<GateRun> read_regressions(const std::string& path, bool create) {
  std::vector<GateRun> runs;
  if (path.empty()) return runs;
  if (!std::filesystem::exists(path)) {
    if (create) return runs;
    throw UsageError{fmt::format(
        "--regressions: '{}' does not exist (check the path, or add --create-regressions to start a new file)", path)};
  }
  std::ifstream in{path};
  if (!in) throw UsageError{fmt::format("--regressions: cannot read '{}'", path)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    auto fail = [&](std::string_view what) {
      return UsageError{fmt::format("--regressions: '{}' line {}: {}", path, number, what)};
    };
    const nlohmann::json entry = parse_json_input(line, fmt::format("--regressions: '{}' line {}", path, number));
    if (!entry.is_object()) throw fail("not a JSON object");
    if (!entry.contains("scenario") || !entry["scenario"].is_string()) throw fail("\"scenario\" must be a string");
    if (!entry.contains("seed") || !entry["seed"].is_number_unsigned()) {
      throw fail("\"seed\" must be an unsigned integer");
    }
    GateRun run;
    run.regression = true;
    run.scenario = entry["scenario"].get<std::string>();
    if (scenarios::find_scenario(run.scenario) == nullptr) throw fail(fmt::format("unknown scenario '{}'", run.scenario));
    run.seed = entry["seed"].get<uint64_t>();
    const scenarios::Scenario& scenario = *scenarios::find_scenario(run.scenario);
    run.duration = scenario.default_duration;
    if (entry.contains("duration")) {
      if (!entry["duration"].is_string()) throw fail("\"duration\" must be a string such as \"10m\"");
      const auto duration = parse_duration(entry["duration"].get<std::string>());
      if (!duration || *duration <= Duration::zero()) throw fail("\"duration\" is not a positive duration");
      run.duration = *duration;
    }
    if (entry.contains("parameters")) {
      if (!entry["parameters"].is_object()) throw fail("\"parameters\" must be a JSON object");
      run.parameters = entry["parameters"];
    }
    for (const auto& [key, value] : entry.items()) {
      if (key != "scenario" && key != "seed" && key != "duration" && key != "parameters" && key != "kind") {
        throw fail(fmt::format("unknown field \"{}\" (allowed: scenario, seed, duration, parameters, kind)", key));
      }
    }
    scenarios::RunConfig config;
    config.seed = run.seed;
    config.duration = run.duration;
    config.parameters = run.parameters;
    if (scenario.validate) {
      if (std::string error = scenario.validate(config); !error.empty()) throw fail(error);
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

// Writes to a temporary of this process's own, then renames: a reader never
// sees half a file.
bool write_whole_file(const std::string& path, const std::string& text) {
  const std::string temporary = unique_temporary_path(path);
  {
    std::ofstream out{temporary, std::ios::out | std::ios::trunc};
    out << text;
    out.close();
    if (!out) {
      std::filesystem::remove(temporary);
      return false;
    }
  }
  return rename_into_place(temporary, path).empty();
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// JUnit XML as Jenkins, GitLab and GitHub test reporters read it: one
// testsuite per kind of run (regressions, new seeds), one testcase per run.
std::string junit_xml(const std::vector<GateRun>& runs, const std::vector<GateOutcome>& outcomes, double seconds) {
  struct Suite {
    std::string name;
    std::string cases;
    uint64_t tests = 0;
    uint64_t failures = 0;
    double seconds = 0;
  };
  Suite suites[2] = {{"leaseproof.gate.regressions", {}, 0, 0, 0}, {"leaseproof.gate.seeds", {}, 0, 0, 0}};
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!outcomes[i].ran) continue;
    Suite& suite = suites[runs[i].regression ? 0 : 1];
    const scenarios::RunResult& result = outcomes[i].result;
    ++suite.tests;
    suite.seconds += outcomes[i].seconds;
    suite.cases += fmt::format("    <testcase classname=\"{}.{}\" name=\"seed {}\" time=\"{:.3f}\"", suite.name,
                               report::escape_markup(runs[i].scenario), runs[i].seed, outcomes[i].seconds);
    if (result.passed()) {
      suite.cases += "/>\n";
      continue;
    }
    ++suite.failures;
    std::string body;
    for (const std::string& violation : result.violations) body += violation + "\n";
    body += "reproduce: " + scenarios::reproduce_command(result) + "\n";
    suite.cases += fmt::format(">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                               report::escape_markup(scenarios::violation_kind(result.violations.front())),
                               report::escape_markup(first_line(result.violations.front())), report::escape_markup(body));
  }
  std::string xml = fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"leaseproof gate\" "
                                "tests=\"{}\" failures=\"{}\" time=\"{:.3f}\">\n",
                                suites[0].tests + suites[1].tests, suites[0].failures + suites[1].failures, seconds);
  for (const Suite& suite : suites) {
    xml += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\" "
                       "time=\"{:.3f}\">\n{}  </testsuite>\n",
                       suite.name, suite.tests, suite.failures, suite.seconds, suite.cases);
  }
  return xml + "</testsuites>\n";
}

std::string regression_line(const GateRun& run, const scenarios::RunResult& result) {
  nlohmann::json entry{{"scenario", run.scenario},
                       {"seed", run.seed},
                       {"duration", format_duration(run.duration)},
                       {"parameters", run.parameters},
                       {"kind", scenarios::violation_kind(result.violations.front())}};
  return entry.dump() + "\n";
}

// Appends the new failures that are not in the file yet.
bool record_regressions(const std::string& path, const std::vector<GateRun>& runs,
                        const std::vector<GateOutcome>& outcomes, uint64_t& added) {
  std::set<std::tuple<std::string, uint64_t, int64_t, std::string>> known;
  for (const GateRun& run : runs) {
    if (run.regression) known.insert(run.key());
  }
  std::string existing;
  if (std::filesystem::exists(path)) {
    std::ifstream in{path};
    std::stringstream text;
    text << in.rdbuf();
    existing = text.str();
    if (!existing.empty() && existing.back() != '\n') existing += '\n';
  } else {
    existing = "# Runs that once failed the gate; `leaseproof gate --regressions FILE` re-runs them first.\n";
  }
  added = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].regression || !outcomes[i].ran || outcomes[i].result.passed()) continue;
    if (!outcomes[i].result.failure_expected.empty()) continue;
    if (!known.insert(runs[i].key()).second) continue;
    existing += regression_line(runs[i], outcomes[i].result);
    ++added;
  }
  return added == 0 || write_whole_file(path, existing);
}

// gate.json: what every run of the gate decided, in run order, and the
// gate's configuration; shards of one gate merge into the unsharded result.
nlohmann::json gate_document(const GateArgs& args, const std::vector<GateRun>& runs,
                             const std::vector<GateOutcome>& outcomes, const std::optional<report::Shard>& shard,
                             uint64_t first_seed, const std::string& duration, const nlohmann::json& parameters,
                             bool out_of_budget) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!outcomes[i].ran) continue;
    const scenarios::RunResult& result = outcomes[i].result;
    nlohmann::json entry{{"scenario", runs[i].scenario},
                         {"seed", runs[i].seed},
                         {"duration", format_duration(runs[i].duration)},
                         {"parameters", runs[i].parameters},
                         {"regression", runs[i].regression},
                         {"verdict", !result.passed() ? "fail" : result.inconclusive.empty() ? "pass" : "inconclusive"},
                         {"trace_hash", sim::format_hash(result.trace_hash)}};
    if (!result.passed()) {
      entry["kind"] = scenarios::violation_kind(result.violations.front());
      entry["violation"] = first_line(result.violations.front());
      entry["reproduce"] = scenarios::reproduce_command(result);
      if (!result.failure_expected.empty()) entry["failure_expected"] = result.failure_expected;
    }
    list.push_back(std::move(entry));
  }
  return nlohmann::json{{"leaseproof_gate", 1},
                        {"scenario", args.run.scenario},
                        {"first_seed", first_seed},
                        {"seeds", args.seeds},
                        {"duration", duration},
                        {"parameters", parameters},
                        {"regressions", args.regressions_path},
                        {"shard", shard ? nlohmann::json{{"index", shard->index}, {"count", shard->count}}
                                        : nlohmann::json(nullptr)},
                        {"budget_reached", out_of_budget},
                        {"runs", std::move(list)}};
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
  // One scenario, or several new seeds take in turn ("lease-swarm,registry-swarm");
  // NAME*K takes K consecutive seeds of every turn.
  std::vector<const scenarios::Scenario*> scenario_list;
  std::vector<size_t> turn;  // index into scenario_list, per seed of a turn
  for (size_t begin = 0; begin <= args.run.scenario.size();) {
    const size_t comma = std::min(args.run.scenario.find(',', begin), args.run.scenario.size());
    std::string_view entry = std::string_view{args.run.scenario}.substr(begin, comma - begin);
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
    if (std::find(scenario_list.begin(), scenario_list.end(), one) != scenario_list.end()) {
      throw UsageError{fmt::format("--scenario: '{}' is listed twice", one->name)};
    }
    scenario_list.push_back(one);
    turn.insert(turn.end(), weight, scenario_list.size() - 1);
    begin = comma + 1;
  }
  const bool combined = scenario_list.size() > 1;
  const scenarios::Scenario& scenario = *scenario_list.front();
  const uint64_t first_seed = parse_seed(args.first_seed, "--first-seed");
  if (first_seed > UINT64_MAX - (args.seeds - 1)) {
    throw UsageError{fmt::format("--first-seed: {} + {} seeds runs past the largest seed", first_seed, args.seeds)};
  }
  std::vector<Duration> durations;
  for (const scenarios::Scenario* one : scenario_list) {
    durations.push_back(args.run.duration.empty() ? one->default_duration
                                                  : parse_positive_duration(args.run.duration, "--duration"));
  }
  const Duration duration = durations.front();
  std::string duration_text;
  for (const Duration d : durations) duration_text += (duration_text.empty() ? "" : ",") + format_duration(d);
  const std::optional<Duration> budget =
      args.budget.empty() ? std::nullopt : std::optional{parse_positive_duration(args.budget, "--budget")};
  if (combined && (!args.run.params.empty() || !args.run.config_path.empty())) {
    throw UsageError{fmt::format("--params: a combined gate (--scenario {}) runs each scenario with its own "
                                 "defaults; parameters belong to a gate of one scenario",
                                 args.run.scenario)};
  }
  // A combined gate's --expiry and --algorithm go to the scenarios that take
  // them (the lease scenarios); the others run their defaults.
  std::vector<nlohmann::json> scenario_parameters_of(scenario_list.size(), parameters);
  if (combined && !parameters.empty()) {
    bool taken = false;
    for (size_t k = 0; k < scenario_list.size(); ++k) {
      scenarios::RunConfig config;
      config.seed = first_seed;
      config.duration = durations[k];
      config.parameters = parameters;
      if (scenario_list[k]->validate && !scenario_list[k]->validate(config).empty()) {
        scenario_parameters_of[k] = nlohmann::json::object();
      } else {
        taken = true;
      }
    }
    if (!taken) {
      throw UsageError{fmt::format("--expiry/--algorithm: none of the scenarios {} takes them", args.run.scenario)};
    }
  }
  if (!combined) {
    validate_seeds(scenario, first_seed, args.seeds, duration, parameters);
  } else {
    for (uint64_t i = 0; i < args.seeds; ++i) {
      const size_t k = turn[i % turn.size()];
      validate_seeds(*scenario_list[k], first_seed + i, 1, durations[k], scenario_parameters_of[k]);
    }
  }
  // Output files are checked before anything runs: a gate that cannot
  // report must not spend its budget first.
  check_output_file("--junit", args.junit_path);
  if (!args.no_record) check_output_file("--regressions", args.regressions_path);
  if (args.create_regressions && args.regressions_path.empty()) {
    throw UsageError{"--create-regressions: needs --regressions FILE"};
  }
  std::optional<report::Shard> shard;
  if (!args.shard.empty()) {
    try {
      shard = report::parse_shard(args.shard);
    } catch (const report::SweepInputError& error) {
      throw UsageError{error.what()};
    }
    if (!args.no_record) {
      throw UsageError{"--shard: a shard does not record regressions (shards would race on one file): add --no-record"};
    }
  }
  if (!args.out.empty()) check_output_directory("--out", args.out);
  std::vector<GateRun> runs = read_regressions(args.regressions_path, args.create_regressions);
  if (shard) {
    std::vector<GateRun> mine;
    for (size_t k = 0; k < runs.size(); ++k) {
      if (k % shard->count == shard->index - 1) mine.push_back(std::move(runs[k]));
    }
    runs = std::move(mine);
  }
  const size_t regressions = runs.size();
  for (uint64_t i = 0; i < args.seeds; ++i) {
    if (shard && i % shard->count != shard->index - 1) continue;
    const size_t k = turn[i % turn.size()];
    runs.push_back({std::string{scenario_list[k]->name}, first_seed + i, durations[k], scenario_parameters_of[k],
                    false});
  }
  const uint64_t new_seeds = runs.size() - regressions;
  const uint64_t min_seeds = std::min(args.min_seeds, new_seeds);
  const unsigned jobs = std::max(1u, args.jobs != 0 ? args.jobs : std::thread::hardware_concurrency());
  fmt::print("leaseproof gate: {} regression runs, then scenario{} {} seeds {}..{}{}{} (duration {}{}), {} threads\n",
             regressions, combined ? "s" : "", args.run.scenario, first_seed, first_seed + args.seeds - 1,
             combined ? " in turn" : "",
             shard ? fmt::format(", shard {}/{}: {} of them", shard->index, shard->count, new_seeds) : "",
             duration_text, budget ? fmt::format(", budget {}", format_duration(*budget)) : "", jobs);
  std::fflush(stdout);

  const auto start = std::chrono::steady_clock::now();
  std::vector<GateOutcome> outcomes(runs.size());
  std::atomic<uint64_t> finished{0};
  std::atomic<bool> out_of_budget{false};
  parallel_for(runs.size(), jobs, [&](uint64_t i) {
    // The budget bounds new seeds only, past the first min_seeds:
    // regressions always run.
    if (!runs[i].regression && i - regressions >= min_seeds && budget &&
        seconds_since(start) >= static_cast<double>(budget->ns()) / 1e9) {
      out_of_budget = true;
      return;
    }
    const auto run_start = std::chrono::steady_clock::now();
    scenarios::RunConfig config;
    config.seed = runs[i].seed;
    config.duration = runs[i].duration;
    config.parameters = runs[i].parameters;
    scenarios::RunResult result = scenarios::find_scenario(runs[i].scenario)->run(config);
    result.digests.clear();
    result.lines.clear();
    outcomes[i] = GateOutcome{true, std::move(result), seconds_since(run_start)};
    const uint64_t done = ++finished;
    if (done % 100 == 0) {
      fmt::print("gate: {} runs done, {:.1f} s\n", done, seconds_since(start));
      std::fflush(stdout);
    }
  });
  const double seconds = seconds_since(start);

  uint64_t counts[2][2] = {};  // [regression][failed]
  uint64_t inconclusive = 0;   // passed, but owned nothing or ended before their recovery bound could be judged
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!outcomes[i].ran) continue;
    const scenarios::RunResult& result = outcomes[i].result;
    ++counts[runs[i].regression ? 1 : 0][result.passed() ? 0 : 1];
    if (result.passed() && !result.inconclusive.empty() && ++inconclusive == 1) {
      fmt::print("{} seed {}: INCONCLUSIVE: {}\n", runs[i].regression ? "regression" : "new", runs[i].seed,
                 result.inconclusive);
    }
    if (result.passed()) continue;
    fmt::print("{} seed {}: FAIL ({}): {}\n  reproduce: {}\n", runs[i].regression ? "regression" : "new",
               runs[i].seed, scenarios::violation_kind(result.violations.front()),
               first_line(result.violations.front()), scenarios::reproduce_command(result));
  }
  const uint64_t new_ran = counts[0][0] + counts[0][1];
  const uint64_t failed = counts[0][1] + counts[1][1];
  fmt::print("gate: regressions {} passed, {} failed; new seeds {} of {} ran{}: {} passed, {} failed\n",
             counts[1][0], counts[1][1], new_ran, new_seeds, out_of_budget ? " (budget reached)" : "", counts[0][0],
             counts[0][1]);
  fmt::print("gate: {} runs in {:.2f} s on {} threads: {:.1f} seeds/s\n", new_ran + counts[1][0] + counts[1][1],
             seconds, jobs, static_cast<double>(new_ran + counts[1][0] + counts[1][1]) / std::max(seconds, 1e-9));

  int status = failed == 0 ? 0 : kExitFailed;
  if (!args.junit_path.empty()) {
    if (write_whole_file(args.junit_path, junit_xml(runs, outcomes, seconds))) {
      fmt::print("gate: JUnit XML written to {}\n", args.junit_path);
    } else {
      fmt::print(stderr, "leaseproof: error: cannot write the JUnit XML to '{}'\n", args.junit_path);
      status = kExitFailed;
    }
  }
  if (!args.out.empty()) {
    const std::string path = (std::filesystem::path{args.out} / "gate.json").string();
    std::error_code made;
    std::filesystem::create_directories(args.out, made);
    const nlohmann::json document =
        gate_document(args, runs, outcomes, shard, first_seed, duration_text, parameters, out_of_budget);
    if (!made && write_whole_file(path, document.dump(2) + "\n")) {
      fmt::print("gate: results written to {}{}\n", path,
                 shard ? "; combine every shard with: leaseproof report merge --out DIR SHARD_DIR..." : "");
    } else {
      fmt::print(stderr, "leaseproof: error: cannot write '{}'\n", path);
      status = kExitFailed;
    }
  }
  uint64_t expected = 0;  // new failures whose configuration is not meant to pass
  std::string_view expected_reason;
  for (size_t i = 0; i < runs.size(); ++i) {
    const scenarios::RunResult& result = outcomes[i].result;
    if (runs[i].regression || !outcomes[i].ran || result.passed() || result.failure_expected.empty()) continue;
    if (++expected == 1) expected_reason = result.failure_expected;
  }
  if (expected > 0) {
    fmt::print("gate: {} of the failing runs are expected to fail and are not recorded as regressions ({}{})\n",
               expected, expected > 1 ? "the first: " : "", expected_reason);
  }
  if (!args.regressions_path.empty() && !args.no_record && counts[0][1] > expected) {
    uint64_t added = 0;
    if (record_regressions(args.regressions_path, runs, outcomes, added)) {
      fmt::print("gate: {} new failing runs added to {}\n", added, args.regressions_path);
    } else {
      fmt::print(stderr, "leaseproof: error: cannot update the regression file '{}'\n", args.regressions_path);
      status = kExitFailed;
    }
  }
  if (failed > 0) {
    fmt::print("gate: FAIL ({} failing runs)\n", failed);
  } else if (status == 0 && inconclusive > 0) {
    fmt::print("gate: INCONCLUSIVE ({} of the passing runs owned no connection or ended before their recovery bound "
               "could be judged)\n",
               inconclusive);
    status = kExitInconclusive;
  } else {
    fmt::print("gate: {}\n", status == 0 ? "PASS" : "FAIL (every run passed, but a report could not be written)");
  }
  return status;
}

bool is_gate_shard(const std::string& directory) {
  return std::filesystem::exists(std::filesystem::path{directory} / "gate.json");
}

// The shards of one gate (each its --out directory) back into the unsharded
// gate.json: the same runs in the same order, so that a sharded gate and an
// unsharded one give the same file.
int merge_gate_shards_checked(const std::vector<std::string>& directories, const std::string& out);

int merge_gate_shards(const std::vector<std::string>& directories, const std::string& out) {
  try {
    return merge_gate_shards_checked(directories, out);
  } catch (const nlohmann::json::exception& error) {
    // A gate.json edited by hand (a field of another type): bad input, not a crash.
    throw UsageError{fmt::format("report merge: a gate.json is not shaped as gate --out writes it: {}", error.what())};
  }
}

int merge_gate_shards_checked(const std::vector<std::string>& directories, const std::string& out) {
  struct Part {
    std::string origin;
    nlohmann::json document;
  };
  std::vector<Part> parts;
  for (const std::string& directory : directories) {
    const std::string file = (std::filesystem::path{directory} / "gate.json").string();
    parts.push_back({file, read_json_file(file, "report merge")});
  }
  const auto fail = [](const Part& part, std::string_view what) {
    return UsageError{fmt::format("report merge: '{}': {}", part.origin, what)};
  };
  uint64_t count = 0;
  std::vector<const Part*> by_index;
  for (const Part& part : parts) {
    const nlohmann::json& d = part.document;
    if (!d.is_object() || d.value("leaseproof_gate", 0) != 1 || !d.contains("runs") || !d["runs"].is_array()) {
      throw fail(part, "not a gate --out result (gate.json of leaseproof gate)");
    }
    const nlohmann::json& shard = d["shard"];
    if (!shard.is_object() || !shard.contains("index") || !shard.contains("count") ||
        !shard["index"].is_number_unsigned() || !shard["count"].is_number_unsigned()) {
      throw fail(part, "not a shard (the gate ran without --shard)");
    }
    const uint64_t n = shard["count"].get<uint64_t>();
    const uint64_t i = shard["index"].get<uint64_t>();
    if (count == 0) {
      count = n;
      by_index.assign(n, nullptr);
    }
    if (n != count) throw fail(part, fmt::format("shard of {}, the first shard given is of {}", n, count));
    if (i < 1 || i > n) throw fail(part, fmt::format("shard index {} is not 1..{}", i, n));
    if (by_index[i - 1] != nullptr) throw fail(part, fmt::format("shard {}/{} is also '{}'", i, n, by_index[i - 1]->origin));
    for (const char* field : {"scenario", "first_seed", "seeds", "duration", "parameters", "regressions"}) {
      if (d[field] != parts.front().document[field]) {
        throw fail(part, fmt::format("its {} differs from '{}': shards of different gates", field, parts.front().origin));
      }
    }
    by_index[i - 1] = &part;
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (by_index[i] == nullptr) throw UsageError{fmt::format("report merge: shard {}/{} is missing", i + 1, count)};
  }
  check_output_directory("--out", out);
  // Regression k ran on shard k mod n, as its (k div n)-th; new seeds in seed order.
  nlohmann::json runs = nlohmann::json::array();
  std::vector<std::vector<nlohmann::json>> regressions(count);
  std::vector<nlohmann::json> seeds;
  bool budget_reached = false;
  for (uint64_t i = 0; i < count; ++i) {
    budget_reached = budget_reached || by_index[i]->document.value("budget_reached", false);
    for (const nlohmann::json& run : by_index[i]->document["runs"]) {
      (run.value("regression", false) ? regressions[i] : seeds).push_back(run);
    }
  }
  for (size_t position = 0;; ++position) {
    bool any = false;
    for (uint64_t i = 0; i < count; ++i) {
      if (position >= regressions[i].size()) continue;
      runs.push_back(regressions[i][position]);
      any = true;
    }
    if (!any) break;
  }
  std::stable_sort(seeds.begin(), seeds.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) { return a["seed"] < b["seed"]; });
  uint64_t failed = 0;
  uint64_t inconclusive = 0;
  for (nlohmann::json& run : seeds) runs.push_back(std::move(run));
  for (const nlohmann::json& run : runs) {
    const std::string verdict = run.value("verdict", "");
    if (verdict == "fail") {
      ++failed;
      fmt::print("{} seed {}: FAIL ({}): {}\n  reproduce: {}\n", run.value("regression", false) ? "regression" : "new",
                 run["seed"].dump(), run.value("kind", ""), run.value("violation", ""), run.value("reproduce", ""));
    }
    if (verdict == "inconclusive") ++inconclusive;
  }
  nlohmann::json merged = parts.front().document;
  merged["shard"] = nullptr;
  merged["budget_reached"] = budget_reached;
  merged["runs"] = std::move(runs);
  const std::string path = (std::filesystem::path{out} / "gate.json").string();
  std::error_code made;
  std::filesystem::create_directories(out, made);
  if (made || !write_whole_file(path, merged.dump(2) + "\n")) {
    fmt::print(stderr, "leaseproof: error: cannot write '{}'\n", path);
    return kExitFailed;
  }
  fmt::print("report merge: {} gate shards, {} runs: {} failed, {} inconclusive{}; written to {}\n", count,
             merged["runs"].size(), failed, inconclusive, budget_reached ? " (a shard reached its budget)" : "", path);
  if (failed > 0) {
    fmt::print("gate: FAIL ({} failing runs)\n", failed);
    return kExitFailed;
  }
  if (inconclusive > 0) {
    fmt::print("gate: INCONCLUSIVE ({} of the passing runs owned no connection or ended before their recovery bound "
               "could be judged)\n",
               inconclusive);
    return kExitInconclusive;
  }
  fmt::print("gate: PASS\n");
  return 0;
}

}  // namespace leaseproof::cli
