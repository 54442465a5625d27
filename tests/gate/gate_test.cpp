// scenarios/gate: the regression file read and written, the runs of a
// shard, the verdicts counted. No simulation runs: outcomes are made by hand.

#include "scenarios/gate.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

namespace leaseproof::scenarios {
namespace {

namespace fs = std::filesystem;

// A directory of this test's own, removed at the end.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (fs::temp_directory_path() / "leaseproof-gate-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TemporaryDirectory() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (fs::path{path_} / name).string(); }

 private:
  std::string path_;
};

std::string written(const std::string& path, const std::string& text) {
  std::ofstream{path} << text;
  return path;
}

std::string contents(const std::string& path) {
  std::ifstream in{path};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The message read_regressions gives for a file whose third line is `line`.
std::string refusal(const std::string& line) {
  TemporaryDirectory directory;
  const std::string path = written(directory.file("regressions.jsonl"), "# runs\n\n" + line + "\n");
  try {
    read_regressions(path, false);
  } catch (const GateInputError& error) {
    const std::string prefix = "--regressions: '" + path + "' line 3: ";
    const std::string message = error.what();
    EXPECT_EQ(message.substr(0, prefix.size()), prefix);
    return message.substr(prefix.size());
  }
  return "(accepted)";
}

TEST(GateRegressions, ReadsEntriesSkippingCommentsAndBlankLines) {
  TemporaryDirectory directory;
  const std::string path = written(directory.file("regressions.jsonl"),
                                   "# Runs that once failed\n\n"
                                   "{\"scenario\": \"lease-swarm\", \"seed\": 462, \"duration\": \"10m\", "
                                   "\"parameters\": {\"algorithm\": \"seed\"}, \"kind\": \"recovery\"}\n"
                                   "{\"scenario\": \"kernel\", \"seed\": 3}\n");
  const std::vector<GateRun> runs = read_regressions(path, false);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].scenario, "lease-swarm");
  EXPECT_EQ(runs[0].seed, 462u);
  EXPECT_EQ(runs[0].duration, Duration::from_min(10));
  EXPECT_EQ(runs[0].parameters, (nlohmann::json{{"algorithm", "seed"}}));
  EXPECT_TRUE(runs[0].regression);
  EXPECT_EQ(runs[1].scenario, "kernel");
  EXPECT_EQ(runs[1].seed, 3u);
  EXPECT_EQ(runs[1].duration, find_scenario("kernel")->default_duration);  // no "duration": the scenario's
  EXPECT_EQ(runs[1].parameters, nlohmann::json::object());
}

TEST(GateRegressions, RefusesEachBadFieldNamingTheLine) {
  EXPECT_EQ(refusal("[1, 2]"), "not a JSON object");
  EXPECT_EQ(refusal(R"({"seed": 1})"), "\"scenario\" must be a string");
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm", "seed": -1})"), "\"seed\" must be an unsigned integer");
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm"})"), "\"seed\" must be an unsigned integer");
  EXPECT_EQ(refusal(R"({"scenario": "no-such", "seed": 1})"), "unknown scenario 'no-such'");
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm", "seed": 1, "duration": 600})"),
            "\"duration\" must be a string such as \"10m\"");
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm", "seed": 1, "duration": "0s"})"),
            "\"duration\" is not a positive duration");
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm", "seed": 1, "parameters": []})"),
            "\"parameters\" must be a JSON object");
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm", "seed": 1, "colour": "red"})"),
            "unknown field \"colour\" (allowed: scenario, seed, duration, parameters, kind)");
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm", "seed": 1, "seed": 2})"),
            "the key \"seed\" appears twice in one object");
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm", "seed": 1)").substr(0, 16), "not valid JSON: ");
}

TEST(GateRegressions, RefusesParametersTheScenarioRefuses) {
  RunConfig config;
  config.seed = 1;
  config.duration = Duration::from_min(10);
  config.parameters = {{"algorithm", "none-such"}};
  const std::string expected = find_scenario("lease-swarm")->validate(config);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(refusal(R"({"scenario": "lease-swarm", "seed": 1, "duration": "10m", "parameters": {"algorithm": "none-such"}})"),
            expected);
}

TEST(GateRegressions, AMissingFileIsRefusedUnlessNew) {
  TemporaryDirectory directory;
  const std::string path = directory.file("missing.jsonl");
  try {
    read_regressions(path, false);
    ADD_FAILURE() << "a missing regression file was accepted";
  } catch (const GateInputError& error) {
    EXPECT_EQ(std::string{error.what()},
              "--regressions: '" + path +
                  "' does not exist (check the path, or add --create-regressions to start a new file)");
  }
  EXPECT_TRUE(read_regressions(path, true).empty());
  EXPECT_TRUE(read_regressions("", false).empty());  // no --regressions
  EXPECT_FALSE(fs::exists(path));                    // reading creates nothing
}

GateRun new_run(uint64_t seed) { return {"lease-swarm", seed, Duration::from_min(10), nlohmann::json::object(), false}; }

GateOutcome failing(const GateRun& run, const std::string& violation, const std::string& expected = "") {
  GateOutcome outcome;
  outcome.ran = true;
  outcome.result.scenario = run.scenario;
  outcome.result.seed = run.seed;
  outcome.result.duration = run.duration;
  outcome.result.violations = {violation};
  outcome.result.failure_expected = expected;
  return outcome;
}

GateOutcome passing() {
  GateOutcome outcome;
  outcome.ran = true;
  return outcome;
}

// A regression (seed 5) failing again; new seeds: 10 failing, 11 passing,
// 12 failing but expected to, 13 skipped by the budget, 5 again as a new
// seed (already in the file), and 10 a second time.
struct Recorded {
  std::vector<GateRun> runs;
  std::vector<GateOutcome> outcomes;
};
Recorded gate_with_failures() {
  GateRun regression = new_run(5);
  regression.regression = true;
  Recorded r;
  r.runs = {regression, new_run(10), new_run(11), new_run(12), new_run(13), new_run(5), new_run(10)};
  r.outcomes = {failing(r.runs[0], "ownership: two owners"),
                failing(r.runs[1], "recovery: gap of 3m\nsecond line"),
                passing(),
                failing(r.runs[3], "recovery: gap of 4m", "the articles' algorithm"),
                GateOutcome{},
                failing(r.runs[5], "ownership: two owners"),
                failing(r.runs[6], "recovery: gap of 3m")};
  return r;
}

TEST(GateRecording, AddsNewUnexpectedFailuresOnce) {
  TemporaryDirectory directory;
  const std::string path = directory.file("regressions.jsonl");
  const Recorded gate = gate_with_failures();
  uint64_t added = 99;
  ASSERT_TRUE(record_regressions(path, gate.runs, gate.outcomes, added));
  EXPECT_EQ(added, 1u);
  EXPECT_EQ(contents(path),
            "# Runs that once failed the gate; `leaseproof gate --regressions FILE` re-runs them first.\n"
            "{\"duration\":\"10m0s\",\"kind\":\"recovery\",\"parameters\":{},\"scenario\":\"lease-swarm\",\"seed\":10}\n");
}

TEST(GateRecording, AppendsToAnExistingFileAndWritesNothingWhenNothingIsNew) {
  TemporaryDirectory directory;
  const std::string path = written(directory.file("regressions.jsonl"), "# mine, without a final newline");
  const Recorded gate = gate_with_failures();
  uint64_t added = 0;
  ASSERT_TRUE(record_regressions(path, gate.runs, gate.outcomes, added));
  EXPECT_EQ(contents(path),
            "# mine, without a final newline\n"
            "{\"duration\":\"10m0s\",\"kind\":\"recovery\",\"parameters\":{},\"scenario\":\"lease-swarm\",\"seed\":10}\n");
  // Read back, the file's runs are regressions now: nothing is new.
  const std::vector<GateRun> again = read_regressions(path, false);
  ASSERT_EQ(again.size(), 1u);
  std::vector<GateRun> runs = again;
  runs.push_back(new_run(10));
  const std::vector<GateOutcome> outcomes = {failing(runs[0], "recovery: gap"), failing(runs[1], "recovery: gap")};
  ASSERT_TRUE(record_regressions(path, runs, outcomes, added));
  EXPECT_EQ(added, 0u);
  const std::string unwritten = directory.file("unwritten.jsonl");
  ASSERT_TRUE(record_regressions(unwritten, runs, outcomes, added));
  EXPECT_FALSE(fs::exists(unwritten));  // no failure to add: no file made
}

TEST(GateRecording, ReportsAFileItCannotWrite) {
  TemporaryDirectory directory;
  const Recorded gate = gate_with_failures();
  uint64_t added = 0;
  EXPECT_FALSE(record_regressions(directory.file("no-such-directory/regressions.jsonl"), gate.runs, gate.outcomes,
                                  added));
}

TEST(GateTally, CountsByKindAndVerdict) {
  Recorded gate = gate_with_failures();
  gate.outcomes[2].result.inconclusive = "owned nothing";
  const GateTally tally = tally_gate(gate.runs, gate.outcomes);
  EXPECT_EQ(tally.regressions_passed, 0u);
  EXPECT_EQ(tally.regressions_failed, 1u);
  EXPECT_EQ(tally.new_passed, 1u);
  EXPECT_EQ(tally.new_failed, 4u);  // 10, 12, 5, 10; 13 did not run
  EXPECT_EQ(tally.inconclusive, 1u);
  EXPECT_EQ(tally.expected_failures, 1u);
  EXPECT_EQ(tally.expected_reason, "the articles' algorithm");
  EXPECT_EQ(tally.failed(), 5u);
  EXPECT_EQ(tally.ran(), 6u);
}

TEST(GateRuns, AShardTakesEveryNthRegressionAndSeed) {
  std::vector<GateRun> regressions;
  for (uint64_t k = 0; k < 5; ++k) regressions.push_back({"kernel", 100 + k, Duration::from_s(1), {}, true});
  GateSeeds seeds;
  seeds.first_seed = 20;
  seeds.count = 7;
  seeds.scenarios = {{find_scenario("lease-swarm"), Duration::from_min(10), nlohmann::json::object()},
                     {find_scenario("kernel"), Duration::from_min(1), nlohmann::json::object()}};
  seeds.turn = {0, 0, 1};  // lease-swarm*2,kernel
  const std::vector<GateRun> runs = gate_runs(regressions, seeds, GateShard{2, 3});
  std::vector<std::tuple<std::string, uint64_t, bool>> got;
  for (const GateRun& run : runs) got.emplace_back(run.scenario, run.seed, run.regression);
  const std::vector<std::tuple<std::string, uint64_t, bool>> expected = {
      {"kernel", 101, true}, {"kernel", 104, true}, {"lease-swarm", 21, false}, {"lease-swarm", 24, false}};
  EXPECT_EQ(got, expected);
  const std::vector<GateRun> all = gate_runs(regressions, seeds, std::nullopt);
  ASSERT_EQ(all.size(), 12u);
  EXPECT_EQ(all[5 + 2].scenario, "kernel");  // seed 22: the third of a turn
  EXPECT_EQ(all[5 + 2].duration, Duration::from_min(1));
}

}  // namespace
}  // namespace leaseproof::scenarios
