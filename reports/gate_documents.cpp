#include "reports/gate_documents.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "reports/markup.hpp"
#include "sim/trace.hpp"

namespace leaseproof::report {

using scenarios::GateInputError;
using scenarios::GateOutcome;
using scenarios::GateRun;

namespace {

struct JunitSuite {
  std::string name;
  std::string cases;
  uint64_t tests = 0;
  uint64_t failures = 0;
  double seconds = 0;
};

void add_testcase(JunitSuite& suite, const GateRun& run, const GateOutcome& outcome) {
  const scenarios::RunResult& result = outcome.result;
  ++suite.tests;
  suite.seconds += outcome.seconds;
  suite.cases += fmt::format("    <testcase classname=\"{}.{}\" name=\"seed {}\" time=\"{:.3f}\"", suite.name,
                             escape_markup(run.scenario), run.seed, outcome.seconds);
  if (result.passed()) {
    suite.cases += "/>\n";
    return;
  }
  ++suite.failures;
  std::string body;
  for (const std::string& violation : result.violations) body += violation + "\n";
  body += "reproduce: " + scenarios::reproduce_command(result) + "\n";
  suite.cases += fmt::format(">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                             escape_markup(scenarios::violation_kind(result.violations.front())),
                             escape_markup(scenarios::violation_headline(result)), escape_markup(body));
}

nlohmann::json run_entry(const GateRun& run, const scenarios::RunResult& result) {
  nlohmann::json entry{{"scenario", run.scenario},
                       {"seed", run.seed},
                       {"duration", format_duration(run.duration)},
                       {"parameters", run.parameters},
                       {"regression", run.regression},
                       {"verdict", !result.passed() ? "fail" : result.inconclusive.empty() ? "pass" : "inconclusive"},
                       {"trace_hash", sim::format_hash(result.trace_hash)}};
  if (!result.passed()) {
    entry["kind"] = scenarios::violation_kind(result.violations.front());
    entry["violation"] = scenarios::violation_headline(result);
    entry["reproduce"] = scenarios::reproduce_command(result);
    if (!result.failure_expected.empty()) entry["failure_expected"] = result.failure_expected;
  }
  return entry;
}

GateInputError shard_error(const ShardDocument& shard, std::string_view what) {
  return GateInputError{fmt::format("report merge: '{}': {}", shard.origin, what)};
}

// Checks one shard against those before it; places it in `by_index`.
void place_shard(const ShardDocument& part, const ShardDocument& first, std::vector<const ShardDocument*>& by_index) {
  const nlohmann::json& d = part.document;
  if (!d.is_object() || d.value("leaseproof_gate", 0) != 1 || !d.contains("runs") || !d["runs"].is_array()) {
    throw shard_error(part, "not a gate --out result (gate.json of leaseproof gate)");
  }
  const nlohmann::json& shard = d["shard"];
  if (!shard.is_object() || !shard.contains("index") || !shard.contains("count") ||
      !shard["index"].is_number_unsigned() || !shard["count"].is_number_unsigned()) {
    throw shard_error(part, "not a shard (the gate ran without --shard)");
  }
  const uint64_t n = shard["count"].get<uint64_t>();
  const uint64_t i = shard["index"].get<uint64_t>();
  if (by_index.empty()) by_index.assign(n, nullptr);
  const uint64_t count = by_index.size();
  if (n != count) throw shard_error(part, fmt::format("shard of {}, the first shard given is of {}", n, count));
  if (i < 1 || i > n) throw shard_error(part, fmt::format("shard index {} is not 1..{}", i, n));
  if (by_index[i - 1] != nullptr) {
    throw shard_error(part, fmt::format("shard {}/{} is also '{}'", i, n, by_index[i - 1]->origin));
  }
  for (const char* field : {"scenario", "first_seed", "seeds", "duration", "parameters", "regressions"}) {
    if (d[field] != first.document[field]) {
      throw shard_error(part, fmt::format("its {} differs from '{}': shards of different gates", field, first.origin));
    }
  }
  by_index[i - 1] = &part;
}

// The shards by index, every one present.
std::vector<const ShardDocument*> shards_by_index(const std::vector<ShardDocument>& shards) {
  std::vector<const ShardDocument*> by_index;
  for (const ShardDocument& part : shards) place_shard(part, shards.front(), by_index);
  for (uint64_t i = 0; i < by_index.size(); ++i) {
    if (by_index[i] == nullptr) {
      throw GateInputError{fmt::format("report merge: shard {}/{} is missing", i + 1, by_index.size())};
    }
  }
  return by_index;
}

// Regression k ran on shard k mod n, as its (k div n)-th; new seeds in seed order.
nlohmann::json merged_runs(const std::vector<const ShardDocument*>& by_index) {
  const size_t count = by_index.size();
  std::vector<std::vector<nlohmann::json>> regressions(count);
  std::vector<nlohmann::json> seeds;
  for (size_t i = 0; i < count; ++i) {
    for (const nlohmann::json& run : by_index[i]->document["runs"]) {
      (run.value("regression", false) ? regressions[i] : seeds).push_back(run);
    }
  }
  nlohmann::json runs = nlohmann::json::array();
  for (size_t position = 0;; ++position) {
    bool any = false;
    for (size_t i = 0; i < count; ++i) {
      if (position >= regressions[i].size()) continue;
      runs.push_back(regressions[i][position]);
      any = true;
    }
    if (!any) break;
  }
  std::stable_sort(seeds.begin(), seeds.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) { return a["seed"] < b["seed"]; });
  for (nlohmann::json& run : seeds) runs.push_back(std::move(run));
  return runs;
}

MergedGate merge_checked(const std::vector<ShardDocument>& shards) {
  if (shards.empty()) throw GateInputError{"report merge: no gate shards given"};
  const std::vector<const ShardDocument*> by_index = shards_by_index(shards);
  MergedGate merged;
  merged.shards = by_index.size();
  for (const ShardDocument* shard : by_index) {
    merged.budget_reached = merged.budget_reached || shard->document.value("budget_reached", false);
  }
  nlohmann::json runs = merged_runs(by_index);
  for (const nlohmann::json& run : runs) {
    const std::string verdict = run.value("verdict", "");
    if (verdict == "inconclusive") ++merged.inconclusive;
    if (verdict != "fail") continue;
    ++merged.failed;
    merged.failures.push_back({run.value("regression", false), run["seed"].dump(), run.value("kind", ""),
                               run.value("violation", ""), run.value("reproduce", "")});
  }
  merged.document = shards.front().document;
  merged.document["shard"] = nullptr;
  merged.document["budget_reached"] = merged.budget_reached;
  merged.document["runs"] = std::move(runs);
  return merged;
}

}  // namespace

std::string gate_junit_xml(const std::vector<GateRun>& runs, const std::vector<GateOutcome>& outcomes,
                           double seconds) {
  JunitSuite suites[2] = {{"leaseproof.gate.regressions", {}, 0, 0, 0}, {"leaseproof.gate.seeds", {}, 0, 0, 0}};
  for (size_t i = 0; i < runs.size(); ++i) {
    if (outcomes[i].ran) add_testcase(suites[runs[i].regression ? 0 : 1], runs[i], outcomes[i]);
  }
  std::string xml = fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"leaseproof gate\" "
                                "tests=\"{}\" failures=\"{}\" time=\"{:.3f}\">\n",
                                suites[0].tests + suites[1].tests, suites[0].failures + suites[1].failures, seconds);
  for (const JunitSuite& suite : suites) {
    xml += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\" "
                       "time=\"{:.3f}\">\n{}  </testsuite>\n",
                       suite.name, suite.tests, suite.failures, suite.seconds, suite.cases);
  }
  return xml + "</testsuites>\n";
}

nlohmann::json gate_document(const GateConfiguration& configuration, const std::vector<GateRun>& runs,
                             const std::vector<GateOutcome>& outcomes, bool budget_reached) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (outcomes[i].ran) list.push_back(run_entry(runs[i], outcomes[i].result));
  }
  const std::optional<scenarios::GateShard>& shard = configuration.shard;
  return nlohmann::json{{"leaseproof_gate", 1},
                        {"scenario", configuration.scenario},
                        {"first_seed", configuration.first_seed},
                        {"seeds", configuration.seeds},
                        {"duration", configuration.duration},
                        {"parameters", configuration.parameters},
                        {"regressions", configuration.regressions},
                        {"shard", shard ? nlohmann::json{{"index", shard->index}, {"count", shard->count}}
                                        : nlohmann::json(nullptr)},
                        {"budget_reached", budget_reached},
                        {"runs", std::move(list)}};
}

MergedGate merge_gate_shards(const std::vector<ShardDocument>& shards) {
  try {
    return merge_checked(shards);
  } catch (const nlohmann::json::exception& error) {
    // A gate.json edited by hand (a field of another type): bad input, not a crash.
    throw GateInputError{
        fmt::format("report merge: a gate.json is not shaped as gate --out writes it: {}", error.what())};
  }
}

}  // namespace leaseproof::report
