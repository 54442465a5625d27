// reports/gate_documents: JUnit XML and gate.json from hand-made outcomes,
// and the merge of a sharded gate's gate.json files.

#include "reports/gate_documents.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/trace.hpp"

namespace leaseproof::report {
namespace {

using scenarios::GateInputError;
using scenarios::GateOutcome;
using scenarios::GateRun;

GateOutcome outcome(const GateRun& run, double seconds, std::vector<std::string> violations = {}) {
  GateOutcome o;
  o.ran = true;
  o.seconds = seconds;
  o.result.scenario = run.scenario;
  o.result.seed = run.seed;
  o.result.duration = run.duration;
  o.result.violations = std::move(violations);
  o.result.trace_hash = 0xabc;
  return o;
}

TEST(GateJunit, OneSuitePerKindEscapedAndFailuresCounted) {
  const std::vector<GateRun> runs = {
      {"kernel", 4, Duration::from_s(60), nlohmann::json::object(), true},
      {"a<b", 7, Duration::from_s(60), nlohmann::json::object(), false},
      {"kernel", 8, Duration::from_s(60), nlohmann::json::object(), false},
      {"kernel", 9, Duration::from_s(60), nlohmann::json::object(), false},  // not run: the budget
  };
  const std::vector<GateOutcome> outcomes = {outcome(runs[0], 0.25),
                                             outcome(runs[1], 0.5, {"ownership: \"x\" & <y>\nat 3s"}),
                                             outcome(runs[2], 1.0), GateOutcome{}};
  EXPECT_EQ(gate_junit_xml(runs, outcomes, 2.0),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<testsuites name=\"leaseproof gate\" tests=\"3\" failures=\"1\" time=\"2.000\">\n"
            "  <testsuite name=\"leaseproof.gate.regressions\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" "
            "time=\"0.250\">\n"
            "    <testcase classname=\"leaseproof.gate.regressions.kernel\" name=\"seed 4\" time=\"0.250\"/>\n"
            "  </testsuite>\n"
            "  <testsuite name=\"leaseproof.gate.seeds\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" "
            "time=\"1.500\">\n"
            "    <testcase classname=\"leaseproof.gate.seeds.a&lt;b\" name=\"seed 7\" time=\"0.500\">\n"
            "      <failure type=\"ownership\" message=\"ownership: &quot;x&quot; &amp; &lt;y&gt;\">"
            "ownership: &quot;x&quot; &amp; &lt;y&gt;\nat 3s\n"
            "reproduce: leaseproof run --seed 7 --scenario a&lt;b --duration 1m0s\n</failure>\n"
            "    </testcase>\n"
            "    <testcase classname=\"leaseproof.gate.seeds.kernel\" name=\"seed 8\" time=\"1.000\"/>\n"
            "  </testsuite>\n"
            "</testsuites>\n");
}

TEST(GateDocument, RunsThatRanWithTheirVerdicts) {
  const std::vector<GateRun> runs = {{"kernel", 3, Duration::from_s(60), nlohmann::json::object(), false},
                                     {"kernel", 4, Duration::from_s(60), nlohmann::json::object(), false}};
  std::vector<GateOutcome> outcomes = {outcome(runs[0], 1, {"recovery: gap\nmore"}), GateOutcome{}};
  outcomes[0].result.failure_expected = "seed algorithm";
  const GateConfiguration configuration{"kernel", 3, 2, "1m0s", nlohmann::json::object(), "", scenarios::GateShard{1, 2}};
  const nlohmann::json document = gate_document(configuration, runs, outcomes, true);
  EXPECT_EQ(document["shard"], (nlohmann::json{{"index", 1}, {"count", 2}}));
  EXPECT_EQ(document["budget_reached"], true);
  ASSERT_EQ(document["runs"].size(), 1u);
  const nlohmann::json& run = document["runs"][0];
  EXPECT_EQ(run["verdict"], "fail");
  EXPECT_EQ(run["kind"], "recovery");
  EXPECT_EQ(run["violation"], "recovery: gap");
  EXPECT_EQ(run["failure_expected"], "seed algorithm");
  EXPECT_EQ(run["trace_hash"], sim::format_hash(0xabc));
}

// A shard's gate.json: regressions first, then its new seeds.
nlohmann::json shard(uint64_t index, uint64_t count, const std::vector<uint64_t>& regressions,
                     const std::vector<uint64_t>& seeds, bool budget_reached = false) {
  nlohmann::json runs = nlohmann::json::array();
  for (uint64_t seed : regressions) runs.push_back({{"seed", seed}, {"regression", true}, {"verdict", "pass"}});
  for (uint64_t seed : seeds) runs.push_back({{"seed", seed}, {"regression", false}, {"verdict", "pass"}});
  return {{"leaseproof_gate", 1}, {"scenario", "lease-swarm"}, {"first_seed", 1},   {"seeds", 7},
          {"duration", "10m0s"},  {"parameters", nlohmann::json::object()},      {"regressions", "r.jsonl"},
          {"shard", {{"index", index}, {"count", count}}}, {"budget_reached", budget_reached}, {"runs", runs}};
}

std::vector<uint64_t> seeds_of(const nlohmann::json& document) {
  std::vector<uint64_t> seeds;
  for (const nlohmann::json& run : document["runs"]) seeds.push_back(run["seed"].get<uint64_t>());
  return seeds;
}

TEST(GateMerge, RegressionKFromShardKModNThenSeedsInOrder) {
  // Regressions 100..104 over 3 shards: shard 1 ran 100, 103; shard 2 ran 101, 104; shard 3 ran 102.
  const std::vector<ShardDocument> shards = {{"s3", shard(3, 3, {102}, {3, 6})},
                                             {"s1", shard(1, 3, {100, 103}, {1, 4, 7})},
                                             {"s2", shard(2, 3, {101, 104}, {2, 5}, true)}};
  const MergedGate merged = merge_gate_shards(shards);
  EXPECT_EQ(seeds_of(merged.document), (std::vector<uint64_t>{100, 101, 102, 103, 104, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(merged.shards, 3u);
  EXPECT_TRUE(merged.budget_reached);
  EXPECT_EQ(merged.document["budget_reached"], true);
  EXPECT_TRUE(merged.document["shard"].is_null());
  EXPECT_EQ(merged.failed, 0u);
}

TEST(GateMerge, CountsFailuresAndInconclusiveRuns) {
  nlohmann::json one = shard(1, 2, {}, {1});
  nlohmann::json two = shard(2, 2, {}, {2});
  one["runs"][0]["verdict"] = "inconclusive";
  two["runs"][0].update({{"verdict", "fail"}, {"kind", "ownership"}, {"violation", "two owners"},
                         {"reproduce", "leaseproof run --seed 2"}});
  const MergedGate merged = merge_gate_shards({{"a", one}, {"b", two}});
  EXPECT_EQ(merged.failed, 1u);
  EXPECT_EQ(merged.inconclusive, 1u);
  ASSERT_EQ(merged.failures.size(), 1u);
  EXPECT_FALSE(merged.failures[0].regression);
  EXPECT_EQ(merged.failures[0].seed, "2");
  EXPECT_EQ(merged.failures[0].kind, "ownership");
  EXPECT_EQ(merged.failures[0].reproduce, "leaseproof run --seed 2");
}

std::string merge_error(const std::vector<ShardDocument>& shards) {
  try {
    merge_gate_shards(shards);
  } catch (const GateInputError& error) {
    return error.what();
  }
  return "(merged)";
}

TEST(GateMerge, RefusesShardsThatDoNotMakeOneGate) {
  EXPECT_EQ(merge_error({{"a", shard(1, 2, {}, {1})}}), "report merge: shard 2/2 is missing");
  EXPECT_EQ(merge_error({{"a", shard(1, 2, {}, {1})}, {"b", shard(1, 3, {}, {2})}}),
            "report merge: 'b': shard of 3, the first shard given is of 2");
  EXPECT_EQ(merge_error({{"a", shard(1, 2, {}, {1})}, {"b", shard(1, 2, {}, {1})}}),
            "report merge: 'b': shard 1/2 is also 'a'");
  EXPECT_EQ(merge_error({{"a", shard(3, 2, {}, {1})}}), "report merge: 'a': shard index 3 is not 1..2");
  nlohmann::json other = shard(2, 2, {}, {2});
  other["seeds"] = 8;
  EXPECT_EQ(merge_error({{"a", shard(1, 2, {}, {1})}, {"b", other}}),
            "report merge: 'b': its seeds differs from 'a': shards of different gates");
  nlohmann::json unsharded = shard(1, 1, {}, {1});
  unsharded["shard"] = nullptr;
  EXPECT_EQ(merge_error({{"a", unsharded}}), "report merge: 'a': not a shard (the gate ran without --shard)");
  EXPECT_EQ(merge_error({{"a", nlohmann::json{{"runs", 1}}}}),
            "report merge: 'a': not a gate --out result (gate.json of leaseproof gate)");
  nlohmann::json edited = shard(1, 1, {}, {1});
  edited["runs"][0]["verdict"] = 5;  // by hand, of another type
  EXPECT_EQ(merge_error({{"a", edited}}).substr(0, 59),
            "report merge: a gate.json is not shaped as gate --out write");
}

}  // namespace
}  // namespace leaseproof::report
