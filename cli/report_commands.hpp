#pragma once
// The CLI's side of the reports for people (reports/): `run --perfetto FILE`
// and `timeline`. Each runs the scenario as `run` does, with an observer.

#include "reports/perfetto.hpp"
#include "scenarios/scenario.hpp"
#include <memory>
#include <string>

namespace leaseproof::cli {

// `run --perfetto FILE`: creates FILE.tmp before the run (throws UsageError
// naming FILE when it cannot) and has the writer observe the run's trace.
std::unique_ptr<report::PerfettoFile> open_perfetto(const std::string& path, scenarios::RunConfig& config);

// After the run: completes the file, renames it into place and prints where
// it is. False, with the error printed, when writing it failed.
bool commit_perfetto(report::PerfettoFile& file, const scenarios::RunResult& result);

// `timeline --connection ID`: runs the scenario and prints the connection's
// timeline. Exit status 0 when printed (whatever the run's verdict); an
// unknown connection throws UsageError listing some that exist.
int timeline_command(const scenarios::Scenario& scenario, scenarios::RunConfig config, const std::string& connection);

}  // namespace leaseproof::cli
