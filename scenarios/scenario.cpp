#include "scenarios/scenario.hpp"

#include <array>
#include <vector>

#include <fmt/format.h>

#include "scenarios/kernel.hpp"
#include "scenarios/registry.hpp"
#include "scenarios/lease.hpp"
#include "scenarios/stream_lab.hpp"
#include "sim/world.hpp"

namespace leaseproof::scenarios {

uint64_t RunResult::counter(std::string_view name) const {
  for (const auto& [key, value] : counters) {
    if (key == name) return value;
  }
  LP_UNREACHABLE("no counter named '{}'", name);
}

namespace {

std::string no_parameters(const RunConfig& config) {
  if (config.parameters.empty()) return {};
  return "this scenario takes no parameters";
}

}  // namespace

// Options of a lease scenario: its preset, the parameters on top, the
// duration flag last.
std::string derive_lease_options(std::string_view name, const RunConfig& config, LeaseScenarioOptions& options) {
  options = *lease_preset(name, config.seed, config.duration);
  if (std::string error = apply_parameters(config.parameters, options); !error.empty()) return error;
  if (options.heal_at && *options.heal_at > options.duration) options.heal_at.reset();
  finish_preset(name, config.seed, config.parameters, options);
  return options.validate();
}

namespace {

Scenario lease_scenario(std::string_view name, std::string_view summary, Duration duration) {
  return Scenario{name, summary, duration,
                  [name](const RunConfig& config) {
                    LeaseScenarioOptions options;
                    const std::string error = derive_lease_options(name, config, options);
                    LP_ASSERT_MSG(error.empty(), "unchecked parameters: {}", error);
                    RunResult result = run_lease(options, config);
                    result.scenario = std::string{name};
                    result.parameters = config.parameters;
                    return result;
                  },
                  [name](const RunConfig& config) {
                    LeaseScenarioOptions options;
                    return derive_lease_options(name, config, options);
                  }};
}

Scenario lab_scenario(std::string_view name, std::string_view summary, Duration duration) {
  return Scenario{name, summary, duration,
                  [name](const RunConfig& config) { return run_stream_lab(name, config); },
                  [name](const RunConfig& config) { return validate_stream_lab(name, config); }};
}

}  // namespace

void configure_trace(sim::World& world, const RunConfig& config) {
  world.trace().set_jsonl_output(config.trace_jsonl);
  world.trace().keep_digests(config.keep_digests);
  world.trace().keep_lines(config.keep_lines);
  if (config.observe_trace) config.observe_trace(world.trace());
}

std::string RunResult::verdict() const {
  // Every violation found, listed or not (the checkers keep their first 50).
  if (!violations.empty()) return fmt::format("FAIL ({} violations)", violations.size() + violations_unlisted);
  return inconclusive.empty() ? "PASS" : "INCONCLUSIVE";
}

RunResult world_result(const sim::World& world, const RunConfig& config, Duration duration, std::string options) {
  RunResult result;
  result.seed = config.seed;
  result.duration = duration;
  result.parameters = config.parameters;
  result.options = std::move(options) + "\n  fault sites: " + world.faults().describe();
  result.trace_hash = world.trace().hash();
  result.events = world.trace().event_count();
  result.scheduler_events = world.scheduler().counters().executed;
  result.digests = world.trace().digests();
  result.lines = world.trace().lines();
  return result;
}

std::span<const Scenario> scenarios() {
  static const std::vector<Scenario> kScenarios{
      {"kernel",
       "clients and servers exchanging timed requests under skew, loss, partitions, crashes, pauses and "
       "SIGTERM (exercises sim/ alone)",
       Duration::from_min(10),
       [](const RunConfig& config) {
         const Duration duration = config.duration.value_or(Duration::from_min(10));
         RunResult result = run_kernel(kernel_options_from_seed(config.seed, duration), config);
         result.scenario = "kernel";
         return result;
       },
       no_parameters},
      lease_scenario("lease-swarm", "a random mix of every fault, inside the algorithm's assumptions (3-5 workers, 50 connections)", Duration::from_min(10)),
      lease_scenario("lease-steady", "10 workers, 500 connections, no faults", Duration::from_h(1)),
      lease_scenario("lease-crash", "the reference fleet with a worker crash every 10 minutes", Duration::from_h(1)),
      lease_scenario("lease-deploy", "a rolling deploy of the whole fleet at 20 minutes (SIGTERM, drain, handover)", Duration::from_h(1)),
      lease_scenario("lease-scale", "2 workers, 1,500 connections, target-tracking autoscaler at 700 per task", Duration::from_h(1)),
      lease_scenario("lease-skew", "worker clocks skewed within the wall mode's margin, with drift", Duration::from_h(1)),
      lease_scenario("lease-pause", "stop-the-world pauses of 25 s and 90 s, longer than the lease", Duration::from_h(1)),
      lease_scenario("lease-throttle", "DynamoDB partitions limited to 40 WCU/s: throttled renews", Duration::from_h(1)),
      lease_scenario("lease-partition", "one worker cut from DynamoDB for 60 s while its upstream stays up", Duration::from_h(1)),
      lease_scenario("lease-lost-replies", "2% of messages lost: ambiguous acquires and renews", Duration::from_h(1)),
      lease_scenario("stream-steady", "the reference fleet streaming 1 message per second per connection, no faults", Duration::from_h(1)),
      lease_scenario("stream-cuts", "one connection, 10 messages a second, its stream cut twice while publishing: every message recorded once", Duration::from_min(3)),
      lease_scenario("stream-hub-restart", "the hub restarts twice and loses its ring (new epoch: typed resets)", Duration::from_min(10)),
      lease_scenario("stream-hub-restart-kept", "the hub restarts twice and keeps its ring in a shared store (same epoch: nothing lost)", Duration::from_min(10)),
      lease_scenario("stream-crash-recording", "workers crash while a record write is in flight", Duration::from_min(10)),
      lab_scenario("stream-slow-subscriber", "lab: 64 MB to a subscriber that never reads: bounded queue, 1013", Duration::from_s(10)),
      lab_scenario("stream-relay-idle", "lab: a connection held 6 s behind a relay with a 2.5 s idle cut-off", Duration::from_s(7)),
      lab_scenario("stream-silent-subscriber", "lab: a subscriber that never answers pings is cut within 6 s", Duration::from_s(10)),
      lab_scenario("stream-wave", "lab: 1,000 subscribers closed with 1012, peak reconnects per second", Duration::from_s(60)),
      lab_scenario("stream-empty-reconnect", "lab: a subscriber of an empty channel reconnects after a hub restart", Duration::from_s(30)),
      {"registry",
       "seed 003's connection registry: 100 clients in rooms, churn, lost $disconnects, a gateway maintenance, "
       "throttling and GSI lag; delivery and staleness",
       Duration::from_min(30), [](const RunConfig& config) { return run_registry("registry", config); },
       [](const RunConfig& config) { return validate_registry("registry", config); }},
      {"registry-swarm",
       "seed 003's registry with its whole configuration drawn from the seed (fleet, rooms, shards, TTL, losses, "
       "throttling, maintenance, mass closes)",
       Duration::from_min(30), [](const RunConfig& config) { return run_registry("registry-swarm", config); },
       [](const RunConfig& config) { return validate_registry("registry-swarm", config); }},
      {"registry-huge-room",
       "seed 003's registry with one room of 50,000 members at DynamoDB's own partition limits, every connection "
       "closed and back at 30 s, a broadcast every 10 s",
       Duration::from_min(3), [](const RunConfig& config) { return run_registry("registry-huge-room", config); },
       [](const RunConfig& config) { return validate_registry("registry-huge-room", config); }},
      {"registry-big-room",
       "seed 003's registry with one room of 2,000 members and a broadcast to it every 100 ms: a hot partition",
       Duration::from_min(3), [](const RunConfig& config) { return run_registry("registry-big-room", config); },
       [](const RunConfig& config) { return validate_registry("registry-big-room", config); }},
  };
  return kScenarios;
}

const Scenario* find_scenario(std::string_view name) {
  for (const Scenario& scenario : scenarios()) {
    if (scenario.name == name) return &scenario;
  }
  return nullptr;
}

namespace {

size_t first_divergence(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

std::pair<RunResult, RunResult> run_pair(const Scenario& scenario, const RunConfig& config,
                                         const std::function<void(sim::World&)>& perturb_second) {
  RunResult first = scenario.run(config);
  RunConfig second_config = config;
  if (perturb_second) second_config.before_run = perturb_second;
  RunResult second = scenario.run(second_config);
  return {std::move(first), std::move(second)};
}

}  // namespace

DeterminismCheck check_determinism(const Scenario& scenario, RunConfig config,
                                   const std::function<void(sim::World&)>& perturb_second) {
  config.keep_digests = true;
  config.keep_lines = false;
  config.trace_jsonl = nullptr;
  config.observe_trace = nullptr;  // an observer would see both runs
  auto [first, second] = run_pair(scenario, config, perturb_second);
  DeterminismCheck check;
  check.first_hash = first.trace_hash;
  check.second_hash = second.trace_hash;
  check.events = first.events + second.events;
  check.agreed = first.trace_hash == second.trace_hash;
  if (check.agreed) return check;
  check.divergent_index = first_divergence(first.digests, second.digests);
  config.keep_lines = true;
  auto [again_first, again_second] = run_pair(scenario, config, perturb_second);
  if (again_first.trace_hash == again_second.trace_hash) return check;
  check.recurred_with_capture = true;
  check.divergent_index = first_divergence(again_first.digests, again_second.digests);
  auto line = [](const RunResult& r, size_t i) {
    return i < r.lines.size() ? r.lines[i] : std::string{"<no event: the run ended>"};
  };
  check.first_event = line(again_first, check.divergent_index);
  check.second_event = line(again_second, check.divergent_index);
  return check;
}

std::string violation_kind(std::string_view violation) {
  const std::size_t colon = violation.find(':');
  return std::string{colon == std::string_view::npos ? violation : violation.substr(0, colon)};
}

std::string reproduce_command(const RunResult& result) {
  std::string command = fmt::format("leaseproof run --seed {} --scenario {} --duration {}", result.seed,
                                    result.scenario, format_duration(result.duration));
  if (!result.parameters.empty()) command += fmt::format(" --params '{}'", result.parameters.dump());
  return command;
}

}  // namespace leaseproof::scenarios
