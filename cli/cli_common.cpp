#include "cli/cli_common.hpp"

#include <array>
#include <charconv>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "base/json_input.hpp"
#include "base/temporary_file.hpp"

namespace leaseproof::cli {

nlohmann::json parse_json_input(const std::string& text, std::string_view source) {
  try {
    return parse_json_strict(text, source);
  } catch (const JsonInputError& error) {
    throw UsageError{error.what()};
  }
}

void check_output_file(std::string_view flag, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  std::error_code error;
  if (fs::is_directory(path, error)) {
    throw UsageError{fmt::format("{}: '{}' is a directory; give a file name", flag, path)};
  }
  const fs::path parent = fs::absolute(path, error).parent_path();
  if (!fs::is_directory(parent, error)) {
    throw UsageError{fmt::format("{}: cannot write '{}': directory '{}' does not exist", flag, path, parent.string())};
  }
  // The writers go through a temporary beside PATH: create one, and remove it again.
  const std::string probe = unique_temporary_path(path);
  const bool existed = fs::exists(probe, error);
  if (!std::ofstream{probe, std::ios::app}) {
    throw UsageError{fmt::format("{}: cannot write '{}' (creating '{}' failed)", flag, path, probe)};
  }
  if (!existed) fs::remove(probe, error);
}

int parse_and_run(CLI::App& app, int argc, char** argv, const std::function<int()>& dispatch) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "leaseproof: error: {}\nRun 'leaseproof --help' (or 'leaseproof <command> --help') for usage.\n",
               e.what());
    return kExitUsage;
  }
  try {
    check_option_values(app);
    return dispatch();
  } catch (const UsageError& e) {
    fmt::print(stderr, "leaseproof: error: {}\n", e.message);
    return kExitUsage;
  }
}

void check_option_values(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0 || option->get_expected_min() == 0) continue;  // not given, or a flag
    for (const std::string& value : option->results()) {
      if (value.empty()) {
        throw UsageError{fmt::format("{}: must not be empty (leave the option out for its default)",
                                     option->get_name())};
      }
      if (option->get_type_name() == "UINT" && value.front() == '-') {
        throw UsageError{fmt::format("{}: '{}' is negative; a number of zero or more is expected", option->get_name(),
                                     value)};
      }
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) check_option_values(*sub);
}

void check_distinct_outputs(std::initializer_list<std::pair<std::string_view, std::string_view>> outputs) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string_view, fs::path>> seen;
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    std::error_code error;
    const fs::path resolved = fs::weakly_canonical(fs::absolute(fs::path{path}, error), error);
    for (const auto& [other_flag, other] : seen) {
      if (other == resolved) {
        throw UsageError{fmt::format("{} and {} both name '{}': give each its own file", other_flag, flag, path)};
      }
    }
    seen.emplace_back(flag, resolved);
  }
}

void check_output_directory(std::string_view flag, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw UsageError{fmt::format("{}: required: a directory", flag)};
  std::error_code error;
  if (fs::exists(path, error) && !fs::is_directory(path, error)) {
    throw UsageError{fmt::format("{}: '{}' exists and is not a directory", flag, path)};
  }
  // The directory (or the closest of its parents that exists) must take a
  // new entry; the probe is removed again, so a refused job writes nothing.
  fs::path existing = fs::absolute(path, error);
  while (!fs::exists(existing, error) && existing.has_parent_path() && existing != existing.parent_path()) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, error)) {
    throw UsageError{fmt::format("{}: cannot create '{}': '{}' is not a directory", flag, path, existing.string())};
  }
  const fs::path probe = existing / fmt::format(".leaseproof-probe-{}", ::getpid());
  if (!fs::create_directory(probe, error) || error) {
    throw UsageError{fmt::format("{}: cannot create '{}': {} in '{}'", flag, path,
                                 error ? error.message() : "cannot create an entry", existing.string())};
  }
  fs::remove(probe, error);
}

namespace {

// Paths to remove on an interrupt, as fixed C strings: the handler may only
// call async-signal-safe functions (unlink, signal, raise).
constexpr size_t kInterruptPathsMax = 8;
constexpr size_t kInterruptPathBytesMax = 4096;
std::array<std::array<char, kInterruptPathBytesMax>, kInterruptPathsMax> interrupt_paths{};
std::array<std::atomic<bool>, kInterruptPathsMax> interrupt_path_used{};
std::mutex interrupt_paths_mutex;

extern "C" void remove_on_interrupt(int signal_number) {
  for (size_t i = 0; i < kInterruptPathsMax; ++i) {
    if (interrupt_path_used[i].load()) ::unlink(interrupt_paths[i].data());
  }
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

RemoveOnInterrupt::RemoveOnInterrupt(const std::string& path) {
  if (path.empty() || path.size() >= kInterruptPathBytesMax) return;
  const std::lock_guard lock{interrupt_paths_mutex};
  for (size_t i = 0; i < kInterruptPathsMax; ++i) {
    if (interrupt_path_used[i].load()) continue;
    std::memcpy(interrupt_paths[i].data(), path.c_str(), path.size() + 1);
    interrupt_path_used[i].store(true);
    slot_ = static_cast<int>(i);
    // A signal the parent chose to ignore (a background job's SIGINT) stays ignored.
    for (const int signal_number : {SIGINT, SIGTERM}) {
      if (std::signal(signal_number, remove_on_interrupt) == SIG_IGN) std::signal(signal_number, SIG_IGN);
    }
    return;
  }
}

RemoveOnInterrupt::~RemoveOnInterrupt() {
  if (slot_ >= 0) interrupt_path_used[static_cast<size_t>(slot_)].store(false);
}

int exit_status(const scenarios::RunResult& result) {
  if (!result.passed()) return kExitFailed;
  return result.inconclusive.empty() ? 0 : kExitInconclusive;
}

uint64_t parse_seed(const std::string& text, std::string_view flag) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) {
    throw UsageError{fmt::format("{}: '{}' is not a seed; expected an unsigned 64-bit integer such as 7", flag, text)};
  }
  return value;
}

Duration parse_positive_duration(const std::string& text, std::string_view flag) {
  auto duration = parse_duration(text);
  if (!duration) {
    throw UsageError{fmt::format(
        "{}: '{}' is not a duration; expected a number with a unit (ns, us, ms, s, m, h), e.g. 90s, 10m, 1h30m",
        flag, text)};
  }
  if (*duration <= Duration::zero()) {
    throw UsageError{fmt::format("{}: '{}' must be longer than zero", flag, text)};
  }
  if (*duration > Duration::from_h(24 * 365)) {
    throw UsageError{fmt::format("{}: '{}' is longer than the allowed maximum of 8760h", flag, text)};
  }
  return *duration;
}

std::pair<uint64_t, uint64_t> parse_seed_range(const std::string& text) {
  const size_t dots = text.find("..");
  if (dots == std::string::npos) {
    throw UsageError{fmt::format("--seeds: '{}' is not a range; expected A..B with A <= B, e.g. 1..1000", text)};
  }
  const uint64_t first = parse_seed(text.substr(0, dots), "--seeds (start)");
  const uint64_t last = parse_seed(text.substr(dots + 2), "--seeds (end)");
  if (first > last) {
    throw UsageError{fmt::format("--seeds: '{}' is empty; the start must not exceed the end", text)};
  }
  // Every seed's result is kept until the end: a bound on memory (and time).
  constexpr uint64_t kSeedsMax = 1'000'000;
  if (last - first >= kSeedsMax) {
    throw UsageError{fmt::format("--seeds: '{}' holds {} seeds; at most {} a command (split the range)", text,
                                 last - first == UINT64_MAX ? std::string{"2^64"} : std::to_string(last - first + 1),
                                 kSeedsMax)};
  }
  return {first, last};
}

const scenarios::Scenario& parse_scenario(const std::string& name) {
  if (const scenarios::Scenario* scenario = scenarios::find_scenario(name)) return *scenario;
  std::string known;
  for (const auto& s : scenarios::scenarios()) known += (known.empty() ? "" : ", ") + std::string{s.name};
  throw UsageError{fmt::format("--scenario: unknown scenario '{}'; known: {}", name, known)};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Scenario parameters from --config FILE, then --params JSON (its fields
// override the file's), then the shorthand flags --algorithm and --expiry,
// which must agree with a value the others give (a conflict is exit 2).
nlohmann::json scenario_parameters(const RunArgs& args) {
  nlohmann::json parameters = nlohmann::json::object();
  auto merge = [&](const std::string& text, std::string_view source) {
    const nlohmann::json json = parse_json_input(text, source);
    if (!json.is_object()) throw UsageError{fmt::format("{}: not a JSON object", source)};
    for (const auto& [key, value] : json.items()) parameters[key] = value;
  };
  if (!args.config_path.empty()) {
    std::ifstream in{args.config_path};
    if (!in) throw UsageError{fmt::format("--config: cannot read '{}'", args.config_path)};
    std::stringstream text;
    text << in.rdbuf();
    merge(text.str(), fmt::format("--config '{}'", args.config_path));
  }
  if (!args.params.empty()) merge(args.params, "--params");
  // A flag that says otherwise than --params or --config is a conflict, not
  // an override nobody sees.
  auto flag = [&](std::string_view name, const std::string& value) {
    if (value.empty()) return;
    const std::string key{name};
    if (parameters.contains(key) && parameters[key] != value) {
      throw UsageError{fmt::format("--{}: {} conflicts with \"{}\": {} from --params or --config; give one of them",
                                   name, value, name, parameters[key].dump())};
    }
    parameters[key] = value;
  };
  flag("algorithm", args.algorithm);
  flag("expiry", args.expiry);
  return parameters;
}

void validate_config(const scenarios::Scenario& scenario, const scenarios::RunConfig& config) {
  if (!scenario.validate) return;
  if (std::string error = scenario.validate(config); !error.empty()) {
    throw UsageError{fmt::format("scenario {}: {}", scenario.name, error)};
  }
}

void validate_seeds(const scenarios::Scenario& scenario, uint64_t first_seed, uint64_t count, Duration duration,
                    const nlohmann::json& parameters) {
  if (!scenario.validate) return;
  scenarios::RunConfig config;
  config.duration = duration;
  config.parameters = parameters;
  for (uint64_t i = 0; i < count; ++i) {
    config.seed = first_seed + i;
    if (std::string error = scenario.validate(config); !error.empty()) {
      throw UsageError{fmt::format("scenario {}, seed {}: {}", scenario.name, config.seed, error)};
    }
  }
}

void add_parameter_flags(CLI::App* command, RunArgs& target) {
  command->add_option("--params", target.params, "Scenario parameters as a JSON object (docs/scenarios.md)")
      ->type_name("JSON");
  command->add_option("--config", target.config_path, "Scenario parameters from a JSON file")->type_name("FILE");
  command->add_option("--algorithm", target.algorithm,
                      "Lease algorithm: core (this project's, a renew per lease), liveness (one heartbeat item per "
                      "worker) or seed (the articles')")
      ->check(CLI::IsMember({"core", "liveness", "seed"}));
  command->add_option("--expiry", target.expiry, "Expiry mode of the core: wall or counter")
      ->check(CLI::IsMember({"wall", "counter"}));
}


void add_run_flags(CLI::App* command, RunArgs& args) {
  command->add_option("--seed", args.seed, "Root seed (unsigned 64-bit integer)")->required()->type_name("N");
  command->add_option("--scenario", args.scenario, "Scenario name (see 'leaseproof scenarios')")
      ->capture_default_str()
      ->type_name("NAME");
  command->add_option("--duration", args.duration, "Simulated time, e.g. 90s, 10m, 1h (default: the scenario's)")
      ->type_name("DURATION");
  add_parameter_flags(command, args);
}

std::pair<const scenarios::Scenario*, scenarios::RunConfig> resolve_run_args(const RunArgs& args) {
  scenarios::RunConfig config;
  config.seed = parse_seed(args.seed, "--seed");
  const scenarios::Scenario& scenario = parse_scenario(args.scenario);
  config.duration = args.duration.empty() ? scenario.default_duration
                                          : parse_positive_duration(args.duration, "--duration");
  config.parameters = scenario_parameters(args);
  validate_config(scenario, config);
  return {&scenario, std::move(config)};
}

nlohmann::json read_json_file(const std::string& path, std::string_view what) {
  std::ifstream in{path};
  if (!in) throw UsageError{fmt::format("{}: cannot read '{}'", what, path)};
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_input(text.str(), fmt::format("{}: '{}'", what, path));
}

}  // namespace leaseproof::cli
