// `leaseproof replay`: the run a reproduce line names, stopped at one event;
// prints the events before it as JSON lines (docs/trace-format.md), the event
// itself, and for lease scenarios who acts as owner of which connection.

#include "cli/replay_command.hpp"

#include <charconv>
#include <cstdio>

#include <fmt/format.h>

#include "scenarios/replay.hpp"
#include "scenarios/shrink.hpp"

#include "cli/cli_common.hpp"

namespace leaseproof::cli {

namespace {

namespace sc = scenarios;

sc::ReplayStop parse_stop(const ReplayArgs& args) {
  if (args.until_event.empty() == args.until_time.empty()) {
    throw UsageError{"replay: give exactly one of --until-event N (a trace index) and --until-time T (e.g. 5m16s)"};
  }
  sc::ReplayStop stop;
  stop.context = args.context;
  stop.explain = args.explain;
  if (!args.until_event.empty()) {
    uint64_t index = 0;
    const std::string& text = args.until_event;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), index);
    if (error != std::errc{} || end != text.data() + text.size()) {
      throw UsageError{fmt::format("--until-event: '{}' is not an event index; expected an integer such as 1234 (the "
                                   "trace's field i)",
                                   text)};
    }
    stop.event = index;
    return stop;
  }
  const std::optional<Duration> time = parse_duration(args.until_time);
  if (!time || time->is_negative()) {
    throw UsageError{fmt::format("--until-time: '{}' is not a time of the run; expected a duration such as 5m16s",
                                 args.until_time)};
  }
  stop.time = *time;
  return stop;
}

}  // namespace

CLI::App* add_replay_command(CLI::App& app, ReplayArgs& args) {
  CLI::App* command = app.add_subcommand(
      "replay", "Re-run a reproduce line and stop at one event: print the events before it, the event, and who owns "
                "what (docs/shrink-and-replay.md)");
  add_run_flags(command, args.run);
  command->add_option("--until-event", args.until_event, "Stop at the event with this trace index (field i)")
      ->type_name("N");
  command->add_option("--until-time", args.until_time,
                      "Stop after the last event at or before this true time, e.g. 5m16s")
      ->type_name("T");
  command->add_option("--context", args.context, "Events shown before the stop")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1'000'000}))
      ->type_name("K");
  command->add_option("--explain", args.explain,
                      "Lease scenarios: explain this connection's owners' accepted writes (default: each connection "
                      "with more than one acting owner at the stop)")
      ->type_name("CONNECTION");
  return command;
}

int replay_command(const ReplayArgs& args) {
  auto [scenario, config] = resolve_run_args(args.run);
  const sc::ReplayStop stop = parse_stop(args);
  if (!stop.explain.empty() && !sc::is_lease_scenario(scenario->name)) {
    throw UsageError{fmt::format("--explain: scenario {} has no leases; it works on the lease scenarios", scenario->name)};
  }
  if (stop.time && *stop.time > *config.duration) {
    throw UsageError{fmt::format("--until-time: {} is after the end of the run ({})", *stop.time, *config.duration)};
  }
  const std::string until =
      stop.event ? fmt::format("event {}", *stop.event) : fmt::format("the last event at or before {}", *stop.time);
  fmt::print("leaseproof replay: scenario {}, seed {}, duration {}, until {}\n", scenario->name, config.seed,
             format_duration(*config.duration), until);
  std::fflush(stdout);
  const sc::ReplayResult result = sc::replay(*scenario, config, stop);
  if (!result.reached) {
    throw UsageError{fmt::format("{}: the run has no such event; it ends at {} with {} events (indexes 0..{})",
                                 stop.event ? "--until-event" : "--until-time", result.run_end, result.events,
                                 result.events == 0 ? 0 : result.events - 1)};
  }
  if (!result.explained) {
    throw UsageError{fmt::format("--explain: the run has no connection '{}' by event {} (names are c0, c1, ...)",
                                 stop.explain, result.stop_index)};
  }
  fmt::print("context: the {} event{} before event {}\n", result.context.size(), result.context.size() == 1 ? "" : "s",
             result.stop_index);
  for (const std::string& line : result.context) fmt::print("{}\n", line);
  fmt::print("stop: event {} at {}\n{}\n", result.stop_index, result.stop_time, result.stop_line);
  if (!result.state.empty()) {
    fmt::print("state after event {} (lease.open/lease.close, as the single-ownership checker sees them):\n",
               result.stop_index);
    for (const std::string& line : result.state) fmt::print("  {}\n", line);
  }
  if (!result.why.empty()) {
    fmt::print("why DynamoDB accepted each owner's lease (its last accepted acquire, and its last accepted renew "
               "after it):\n");
    for (const std::string& line : result.why) fmt::print("  {}\n", line);
  }
  return 0;
}

}  // namespace leaseproof::cli
