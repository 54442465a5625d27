#include "cli/report_commands.hpp"

#include <fmt/format.h>

#include <cstdio>
#include "reports/timeline.hpp"
#include "sim/trace.hpp"
#include <utility>
#include <vector>

#include "cli/dynamo_command.hpp"  // UsageError

namespace leaseproof::cli {

std::unique_ptr<report::PerfettoFile> open_perfetto(const std::string& path, scenarios::RunConfig& config) {
  std::string error;
  std::unique_ptr<report::PerfettoFile> file = report::PerfettoFile::create(path, error);
  if (!file) throw UsageError{fmt::format("--perfetto: {}", error)};
  report::PerfettoFile* writer = file.get();
  config.observe_trace = [writer](sim::Trace& trace) { writer->attach(trace); };
  return file;
}

bool commit_perfetto(report::PerfettoFile& file, const scenarios::RunResult& result) {
  const std::vector<std::pair<std::string, std::string>> metadata{
      {"scenario", result.scenario},
      {"seed", fmt::format("{}", result.seed)},
      {"duration", format_duration(result.duration)},
      {"verdict", result.verdict()},
      {"trace hash", sim::format_hash(result.trace_hash)},
      {"reproduce", scenarios::reproduce_command(result)},
  };
  if (std::string error = file.commit(Instant::zero() + result.duration, metadata, result.violations); !error.empty()) {
    fmt::print(stderr, "leaseproof: error: --perfetto: {}\n", error);
    return false;
  }
  const report::PerfettoFigures& figures = file.figures();
  fmt::print(
      "perfetto: {} ({} trace events: {} lease slices, {} other slices, {} instants, {} counter samples, {} "
      "tracks; open it in https://ui.perfetto.dev, see docs/perfetto.md)\n",
      file.path(), figures.events, figures.lease_slices, figures.slices - figures.lease_slices, figures.instants,
      figures.counter_samples, figures.tracks);
  for (const auto& [category, count] : figures.suppressed_instants) {
    fmt::print("perfetto: {} more '{}' instants not written (the counters include them)\n", count, category);
  }
  return true;
}

int timeline_command(const scenarios::Scenario& scenario, scenarios::RunConfig config, const std::string& connection) {
  report::ConnectionTimeline timeline{connection};
  config.observe_trace = [&timeline](sim::Trace& trace) { timeline.attach(trace); };
  fmt::print("leaseproof timeline: connection {}, scenario {}, seed {}, duration {}\n", connection, scenario.name,
             config.seed, format_duration(config.duration.value_or(scenario.default_duration)));
  std::fflush(stdout);
  const scenarios::RunResult result = scenario.run(config);
  if (!timeline.found()) throw UsageError{timeline.unknown_connection_error()};
  const std::vector<std::string> lines = timeline.lines();
  for (const std::string& line : lines) fmt::print("{}\n", line);
  fmt::print("timeline: {} lines for {}; the run: {} events, verdict {}, trace hash {}\n", lines.size(), connection,
             result.events, result.verdict(),
             sim::format_hash(result.trace_hash));
  fmt::print("reproduce: {}\n", scenarios::reproduce_command(result));
  return 0;
}

}  // namespace leaseproof::cli
