#pragma once
// What the `leaseproof` commands share: exit codes, parsing of seeds,
// durations, scenarios and scenario parameters (with errors that name the
// flag), and running independent seeds on several threads.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/time.hpp"
#include "scenarios/scenario.hpp"

#include "cli/dynamo_command.hpp"  // UsageError

namespace leaseproof::cli {

constexpr int kExitFailed = 1;  // a run failed its checks, diverged, or a file could not be written
constexpr int kExitUsage = 2;   // bad input: an unknown flag, a malformed value
// No violation, but a run ended before its recovery bound could be judged
// (RunResult::inconclusive): not a PASS.
constexpr int kExitInconclusive = 3;

// The exit status of one run's verdict: 0, kExitFailed or kExitInconclusive.
int exit_status(const scenarios::RunResult& result);

uint64_t parse_seed(const std::string& text, std::string_view flag);
Duration parse_positive_duration(const std::string& text, std::string_view flag);
// "A..B", inclusive, A <= B.
std::pair<uint64_t, uint64_t> parse_seed_range(const std::string& text);
const scenarios::Scenario& parse_scenario(const std::string& name);
double seconds_since(std::chrono::steady_clock::time_point start);

// The flags of `run` (and of the commands that take a scenario's parameters).
struct RunArgs {
  std::string seed;
  std::string scenario = "lease-swarm";
  std::string trace_path;
  std::string perfetto_path;
  std::string duration;
  std::string params;       // JSON object
  std::string config_path;  // JSON file
  std::string algorithm;    // shorthand for params {"algorithm": ...}
  std::string expiry;
};

// --params, --config, --algorithm, --expiry.
void add_parameter_flags(CLI::App* command, RunArgs& target);
// --seed, --scenario, --duration and the parameter flags: one run, as `run`,
// `shrink` and `replay` name it.
void add_run_flags(CLI::App* command, RunArgs& args);

// The scenario and its validated configuration (duration always set);
// throws UsageError naming the flag or field.
std::pair<const scenarios::Scenario*, scenarios::RunConfig> resolve_run_args(const RunArgs& args);

// Scenario parameters from --config FILE, then --params JSON, then the
// shorthand flags; each later source overrides fields of the earlier.
nlohmann::json scenario_parameters(const RunArgs& args);

// JSON given by the user (a flag, a spec, a line of a file), parsed strictly:
// a syntax error names its line and column, and a key given twice in one
// object is refused (nlohmann would keep the last silently). Throws
// UsageError starting with `source`.
nlohmann::json parse_json_input(const std::string& text, std::string_view source);
// A JSON file read whole and parsed as parse_json_input does; errors name `what` and the path.
nlohmann::json read_json_file(const std::string& path, std::string_view what);

// Output paths, checked before any work so that a long job never ends in
// "cannot write": a file must not be a directory, its directory must exist,
// and a file must be creatable there; a directory is created (with its
// parents) and must take a file. Throw UsageError naming `flag`.
void check_output_file(std::string_view flag, const std::string& path);

// Refuses two output flags naming one file (`--trace x --perfetto x`): both
// writers would rename their file into place, and one would be lost.
// What CLI11 lets through and no command wants: an option given an empty
// value (`--duration ''` silently meant the default) and a negative number
// for an unsigned option (`--memberships -5` wrapped around). Checked for
// every option of the parsed commands; throws UsageError naming the option.
void check_option_values(const CLI::App& app);
// Parses argv into `app` (help and version answered, a parse error printed
// with a pointer to --help: exit 2), checks the option values, then returns
// dispatch()'s status; a UsageError from either is printed, exit 2. Both
// binaries' main.
int parse_and_run(CLI::App& app, int argc, char** argv, const std::function<int()>& dispatch);

void check_distinct_outputs(std::initializer_list<std::pair<std::string_view, std::string_view>> outputs);
void check_output_directory(std::string_view flag, const std::string& path);

// While alive, `path` is removed if the process is interrupted (SIGINT,
// SIGTERM): a stopped run leaves no partial FILE.tmp behind. At most a few
// paths at once (kInterruptPathsMax).
class RemoveOnInterrupt {
 public:
  explicit RemoveOnInterrupt(const std::string& path);
  ~RemoveOnInterrupt();
  RemoveOnInterrupt(const RemoveOnInterrupt&) = delete;
  RemoveOnInterrupt& operator=(const RemoveOnInterrupt&) = delete;

 private:
  int slot_ = -1;
};

// Throws UsageError with the scenario's message when it rejects the config.
void validate_config(const scenarios::Scenario& scenario, const scenarios::RunConfig& config);

// The same for `count` seeds from `first_seed`, naming the first refused
// seed. The swarm draws per seed (a relay, its fleet): parameters one seed
// takes can be refused for another, so a seed range is checked whole before
// anything runs, never discovered half-way.
void validate_seeds(const scenarios::Scenario& scenario, uint64_t first_seed, uint64_t count, Duration duration,
                    const nlohmann::json& parameters);

// Runs `body(i)` for i in [0, count) on `jobs` threads; results land by index.
template <typename Body>
void parallel_for(uint64_t count, unsigned jobs, Body body) {
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> workers;
  for (unsigned j = 0; j < std::min<uint64_t>(jobs, count); ++j) {
    workers.emplace_back([&] {
      for (uint64_t i = next++; i < count; i = next++) body(i);
    });
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace leaseproof::cli
