#pragma once
// What a gate (scenarios/gate.hpp) writes for others to read: JUnit XML for
// CI systems' test reporters, and gate.json, every run's verdict and trace
// hash with the gate's configuration. The gate.json files of a sharded
// gate's shards merge into the file the unsharded gate writes (docs/ci-gate.md).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/sweep.hpp"
#include "scenarios/gate.hpp"

namespace leaseproof::report {

// JUnit XML as Jenkins, GitLab and GitHub test reporters read it: one
// testsuite per kind of run (regressions, new seeds), one testcase per run
// that ran; `seconds` is the whole gate's wall time.
std::string gate_junit_xml(const std::vector<scenarios::GateRun>& runs,
                           const std::vector<scenarios::GateOutcome>& outcomes, double seconds);

// gate.json's fields besides its runs: the gate as it was asked for.
struct GateConfiguration {
  std::string scenario;  // --scenario as given, e.g. "lease-swarm*8,stream-wave"
  uint64_t first_seed = 1;
  uint64_t seeds = 0;
  std::string duration;  // each scenario's, comma-separated
  nlohmann::json parameters = nlohmann::json::object();
  std::string regressions;  // the regression file's path
  std::optional<scenarios::GateShard> shard;
};

// gate.json: the runs that ran, in run order, with their verdicts.
nlohmann::json gate_document(const GateConfiguration& configuration, const std::vector<scenarios::GateRun>& runs,
                             const std::vector<scenarios::GateOutcome>& outcomes, bool budget_reached);

// A failing run of a merged gate.json, for the one-line report.
struct GateFailure {
  bool regression = false;
  std::string seed;  // as the JSON holds it
  std::string kind;
  std::string violation;
  std::string reproduce;
};

struct MergedGate {
  nlohmann::json document;  // the unsharded gate.json
  uint64_t shards = 0;
  uint64_t failed = 0;
  uint64_t inconclusive = 0;
  bool budget_reached = false;         // by any shard
  std::vector<GateFailure> failures;   // in run order
};

// The shards of one gate (each its gate.json, `origin` its path) back into
// the unsharded gate.json: the same runs in the same order. Every shard of
// one gate must be given once. Throws scenarios::GateInputError naming the
// offending shard.
MergedGate merge_gate_shards(const std::vector<ShardDocument>& shards);

}  // namespace leaseproof::report
