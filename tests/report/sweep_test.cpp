// Sweeps end to end in the library (label sim): the articles' algorithm
// caught by a 16 s fast worker where the core is not, what a GSI costs per
// heartbeat in the simulated DynamoDB, shards merged into the same bytes as
// the unsharded run, and report files that parse.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include "reports/sweep.hpp"
#include "reports/sweep_report.hpp"
#include "scenarios/scenario.hpp"

#include <fmt/format.h>

namespace leaseproof::report {
namespace {

// Lease 20 s, heartbeat 5 s: the seed's own argument tolerates a clock up
// to 15 s fast (lease - heartbeat); a worker 16 s fast takes live leases.
// The core in counter mode never compares wall clocks.
SweepSpec fast_worker_spec() {
  return parse_sweep_spec(nlohmann::json::parse(R"({
    "title": "fast worker", "scenario": "lease-crash", "duration": "3m", "seeds": 6,
    "base": {"workers": 3, "connections": 20, "crash_every": "1m", "expiry": "counter", "heartbeat": "5s", "lease": "20s"},
    "axes": [{"name": "algorithm", "values": ["core", "seed"]}, {"name": "fast_worker_offset", "values": ["0s", "16s"]}],
    "prices": ["articles", "current"], "price_connections": 500, "recovery_target": "90s", "safety_margin": "16s"
  })"));
}

// Small and varied: an invalid cell, crash gaps judged and excused, two
// algorithms; shards of it must merge into the unsharded bytes.
SweepSpec merge_spec() {
  return parse_sweep_spec(nlohmann::json::parse(R"({
    "scenario": "lease-crash", "duration": "2m", "seeds": 5,
    "base": {"workers": 3, "connections": 10, "crash_every": "50s"},
    "axes": [{"name": "algorithm", "values": ["seed", "core"]}, {"name": "heartbeat", "values": ["5s", "20s"]},
             {"name": "fast_worker_offset", "values": ["0s", "16s"]}],
    "prices": ["current", "articles"], "safety_margin": "5s"
  })"));
}

const SweepCell& cell_with(const SweepData& data, const std::string& algorithm, const std::string& offset) {
  for (const SweepCell& cell : data.cells) {
    if (cell.parameters["algorithm"] == algorithm && cell.parameters["fast_worker_offset"] == offset) return cell;
  }
  throw std::logic_error("no such cell");
}

TEST(SweepSimulation, ASixteenSecondFastWorkerBreaksTheSeedNotTheCore) {
  const SweepData data = run_sweep(fast_worker_spec(), std::nullopt, 2);
  const SweepSummary summary = summarize(data);
  const CellSummary& seed_fast = summary.cells[cell_with(data, "seed", "16s").index];
  const CellSummary& core_fast = summary.cells[cell_with(data, "core", "16s").index];
  EXPECT_GT(seed_fast.failing("single ownership"), 0u);
  EXPECT_EQ(core_fast.failing_seeds, 0u);
  EXPECT_EQ(summary.cells[cell_with(data, "seed", "0s").index].failing_seeds, 0u);
  EXPECT_EQ(seed_fast.seeds_run, 6u);
  // One reproduce line per kind, of the lowest failing seed.
  const KindSummary& kind = seed_fast.kinds.at("single ownership");
  EXPECT_NE(kind.reproduce.find(fmt::format("--seed {} --scenario lease-crash", kind.lowest_seed)), std::string::npos);
  EXPECT_NE(kind.reproduce.find("\"fast_worker_offset\":\"16s\""), std::string::npos) << kind.reproduce;

  ASSERT_EQ(summary.unsafe.size(), 2u);
  EXPECT_EQ(summary.unsafe[0].others, "algorithm=core");
  EXPECT_FALSE(summary.unsafe[0].minimal_unsafe);
  EXPECT_NE(summary.unsafe[0].analytic.find("skew-independent"), std::string::npos);
  EXPECT_EQ(summary.unsafe[1].others, "algorithm=seed");
  EXPECT_EQ(summary.unsafe[1].minimal_unsafe, "16s");
  EXPECT_EQ(summary.unsafe[1].analytic_limit, Duration::from_s(15));

  ASSERT_TRUE(summary.recommended);
  EXPECT_EQ(summary.configurations[*summary.recommended].label, "algorithm=core");
  EXPECT_TRUE(summary.recommendation.starts_with("Recommended: algorithm=core.")) << summary.recommendation;
}

// Per renew, the articles' GSI (keyed on lease_expires_at_ms) takes 2 writes
// and the core's sharded GSI none (it projects its keys only, which a renew
// never changes; it is written when a connection starts or stops): what the
// cost table's GSI lines show.
TEST(SweepSimulation, TheGsiWritesPerHeartbeatMatchTheKeyDesign) {
  const SweepData data = run_sweep(fast_worker_spec(), std::nullopt, 2);
  const SweepSummary summary = summarize(data);
  auto gsi_per_table_write = [&](const std::string& algorithm, const std::string& index) {
    const CellSummary& cell = summary.cells[cell_with(data, algorithm, "0s").index];
    double table = 0;
    double gsi = 0;
    for (const CapacityUse& use : cell.capacity) {
      if (use.index.empty()) table = use.wcu;
      if (use.index == index) gsi = use.wcu;
    }
    EXPECT_GT(table, 0) << algorithm;
    return gsi / table;
  };
  EXPECT_NEAR(gsi_per_table_write("seed", "by_state"), 2.0, 0.1);
  EXPECT_LT(gsi_per_table_write("core", "by_shard"), 0.05);
}

TEST(SweepSimulation, ReportsDoNotDependOnThreads) {
  const SweepSpec spec = merge_spec();
  EXPECT_EQ(render_reports(run_sweep(spec, std::nullopt, 1)), render_reports(run_sweep(spec, std::nullopt, 2)));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in{path, std::ios::binary};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TemporaryDirectory {
 public:
  TemporaryDirectory() : path_(std::filesystem::temp_directory_path() / ("leaseproof-sweep-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
  }
  ~TemporaryDirectory() { std::filesystem::remove_all(path_); }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

TEST(SweepShards, MergedShardsEqualTheUnshardedReportByteForByte) {
  const SweepSpec spec = merge_spec();
  TemporaryDirectory dir;
  write_report_files((dir / "whole").string(), render_reports(run_sweep(spec, std::nullopt, 2)));
  std::vector<ShardDocument> shards;
  for (const char* shard : {"3/3", "1/3", "2/3"}) {  // any order
    const std::string out = (dir / ("shard" + std::string{1, shard[0]})).string();
    const SweepData data = run_sweep(spec, parse_shard(shard), 1);
    EXPECT_TRUE(data.shard);
    const auto files = render_reports(data);
    ASSERT_EQ(files.size(), 1u);  // a shard writes its raw sweep.json only
    write_report_files(out, files);
    shards.push_back({out, nlohmann::json::parse(read_file(std::filesystem::path{out} / "sweep.json"))});
  }
  write_report_files((dir / "merged").string(), render_reports(merge_shards(shards)));
  for (const char* name : {"sweep.json", "sweep.csv", "sweep.md", "sweep.html"}) {
    const std::string whole = read_file(dir / "whole" / name);
    EXPECT_FALSE(whole.empty()) << name;
    EXPECT_TRUE(whole == read_file(dir / "merged" / name)) << name << " differs";
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "merged" / ".sweep.json.tmp"));
}

std::string merge_error(const std::vector<ShardDocument>& shards) {
  try {
    (void)merge_shards(shards);
  } catch (const SweepInputError& error) {
    return error.what();
  }
  return {};
}

TEST(SweepShards, MergeRefusesIncompleteDuplicateForeignOrEditedShards) {
  const SweepSpec spec = merge_spec();
  auto shard = [&](const char* text, const SweepSpec& of) {
    return ShardDocument{std::string{"dir"} + text[0], raw_json(run_sweep(of, parse_shard(text), 2))};
  };
  const ShardDocument one = shard("1/2", spec);
  const ShardDocument two = shard("2/2", spec);
  EXPECT_EQ(merge_error({one}), "report merge: missing shard(s) 2/2: the merged report would be incomplete");
  EXPECT_EQ(merge_error({one, two, one}), "dir1 and dir1 are both shard 1/2");
  SweepSpec other = spec;
  other.seeds = 4;
  EXPECT_TRUE(merge_error({one, shard("2/2", other)}).starts_with("dir2: its spec differs from that of dir1"))
      << merge_error({one, shard("2/2", other)});
  ShardDocument edited = two;
  // 8 cells: shard 2/2 holds the odd pairs (seed x 8 + cell), all of cell 1's seeds.
  edited.document["cells"][1]["seeds"].erase(0);
  EXPECT_TRUE(merge_error({one, edited}).starts_with("dir2: cell 1 holds")) << merge_error({one, edited});
  ShardDocument whole{"whole", raw_json(run_sweep(spec, std::nullopt, 2))};
  EXPECT_TRUE(merge_error({whole}).starts_with("whole: not a shard")) << merge_error({whole});
  EXPECT_TRUE(merge_error({one, two}).empty());
}

TEST(SweepReports, FilesParseAndThePageDrawsItsChartsAndStatesTheRecommendation) {
  const SweepData data = run_sweep(fast_worker_spec(), std::nullopt, 2);
  const auto files = render_reports(data);
  ASSERT_EQ(files.size(), 4u);

  const nlohmann::json json = nlohmann::json::parse(files.at("sweep.json"));
  EXPECT_EQ(json["schema_version"], 1);
  EXPECT_EQ(json["cells"].size(), 4u);
  EXPECT_EQ(json["cells"][0]["seeds"].size(), 6u);
  EXPECT_TRUE(json["derived"]["recommendation"]["text"].get<std::string>().starts_with("Recommended:"));
  EXPECT_EQ(json["derived"]["cost_check"]["articles"]["on_demand"], 324.0);
  EXPECT_FALSE(json.contains("shard"));
  // No wall-clock figures in the source of truth.
  for (const char* wall : {"seeds/s", "elapsed", "wall_s", "duration_s\""}) {
    EXPECT_EQ(files.at("sweep.json").find(wall), std::string::npos) << wall;
  }

  const std::string& csv = files.at("sweep.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // header + 4 cells
  EXPECT_TRUE(csv.starts_with("cell,algorithm,fast_worker_offset,status,"));

  const std::string& md = files.at("sweep.md");
  EXPECT_NE(md.find("## Recommendation\n\nRecommended: algorithm=core."), std::string::npos);
  EXPECT_NE(md.find("$324.00 on demand and $46.80 provisioned with the `articles` prices"), std::string::npos);
  EXPECT_NE(md.find("connections/by_state"), std::string::npos);  // the GSI on its own line

  const std::string& html = files.at("sweep.html");
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_TRUE(html.ends_with("</html>\n"));
  for (const char* chart : {"Crash recovery vs lease / heartbeat", "Monthly cost (articles, on demand) vs crash recovery p99",
                            "Single-ownership violations vs fast_worker_offset", "aria-label=\"ownership timeline\""}) {
    EXPECT_NE(html.find(chart), std::string::npos) << chart;
  }
  size_t svgs = 0;
  for (size_t at = html.find("<svg "); at != std::string::npos; at = html.find("<svg ", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 5u);  // three charts, the timeline zoomed to its violation and the whole run
  size_t closed = 0;
  for (size_t at = html.find("</svg>"); at != std::string::npos; at = html.find("</svg>", at + 1)) ++closed;
  EXPECT_EQ(closed, svgs);
  EXPECT_NE(html.find("id=\"recommendation\">Recommended: algorithm=core."), std::string::npos);
  EXPECT_NE(html.find("class=\"overlap\""), std::string::npos);  // the failing seed's two owners are drawn
  // Self-contained: nothing fetched, nothing run.
  for (const char* external : {"<script", "<link", "src=", "href=", "@import", "url("}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
}

// --- what the charts say, from made-up records -------------------------------

// A sweep that was never run: the spec's cells, each valid cell with one
// record per seed from `record`, so that what the charts draw is known.
SweepData synthetic_sweep(const std::string& spec, const std::function<SeedRecord(const SweepCell&, uint64_t)>& record) {
  SweepData data;
  data.spec = parse_sweep_spec(nlohmann::json::parse(spec));
  data.cells = expand_cells(data.spec);
  data.records.resize(data.cells.size());
  for (const SweepCell& cell : data.cells) {
    if (!cell.valid()) continue;
    for (uint64_t seed = data.spec.first_seed; seed < data.spec.first_seed + data.spec.seeds; ++seed) {
      data.records[cell.index].push_back(record(cell, seed));
    }
  }
  return data;
}

SeedRecord crash_record(uint64_t seed, const std::vector<double>& judged_ms, const std::vector<double>& excused_ms,
                        bool single_ownership_failed = false) {
  nlohmann::json violations = nlohmann::json::object();
  if (single_ownership_failed) violations["single ownership"] = 1;
  return {{"seed", seed}, {"trace_hash", "0x0"}, {"violations", violations},
          {"metrics", {{"recovery", {{"crash", {{"bound_ms", 100000.0}, {"gaps_ms", judged_ms}, {"excused_gaps_ms", excused_ms}}}}}}}};
}

// The <svg> element whose aria-label is `label` ("" when there is none).
std::string svg_labelled(const std::string& html, const std::string& label) {
  const size_t at = html.find("aria-label=\"" + label + "\"");
  if (at == std::string::npos) return {};
  const size_t begin = html.rfind("<svg ", at);
  return html.substr(begin, html.find("</svg>", at) + 6 - begin);
}

// The number after `attribute="` following the first occurrence of `after`.
std::optional<double> attribute_after(const std::string& text, const std::string& after, const std::string& attribute) {
  const size_t at = text.find(after);
  if (at == std::string::npos) return std::nullopt;
  const size_t value = text.find(attribute + "=\"", at);
  if (value == std::string::npos) return std::nullopt;
  return std::stod(text.substr(value + attribute.size() + 2));
}

// The articles' algorithm's crash gaps are short when judged, but most of
// them overlapped the next crash and were excused. Excusing them must not
// make it look faster: they are a series of their own, and the p99 that
// judges and ranks a configuration counts them.
TEST(SweepCharts, ExcusedGapsAreTheirOwnSeriesAndNeverImproveARanking) {
  const std::vector<double> core_judged{40000, 45000, 50000};
  const std::vector<double> seed_judged{20000};
  const std::vector<double> seed_excused{150000, 160000};
  const SweepData data = synthetic_sweep(R"({
    "scenario": "lease-crash", "duration": "2m", "seeds": 3, "base": {"heartbeat": "5s", "lease": "20s"},
    "axes": [{"name": "algorithm", "values": ["core", "seed"]}], "recovery_target": "90s"
  })", [&](const SweepCell& cell, uint64_t seed) {
    return cell.parameters["algorithm"] == "seed" ? crash_record(seed, seed_judged, seed_excused)
                                                  : crash_record(seed, core_judged, {});
  });
  const SweepSummary summary = summarize(data);
  ASSERT_EQ(summary.configurations.size(), 2u);
  const Configuration& seed = summary.configurations[1];
  ASSERT_EQ(seed.label, "algorithm=seed");
  std::vector<double> all;
  for (int s = 0; s < 3; ++s) {
    all.insert(all.end(), seed_judged.begin(), seed_judged.end());
    all.insert(all.end(), seed_excused.begin(), seed_excused.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(seed.crash_p99_ms, nearest_rank(all, 99));
  EXPECT_GT(*seed.crash_p99_ms, summary.cells[1].crash()->p99_ms);  // the judged gaps alone look faster
  EXPECT_FALSE(seed.qualifies) << seed.verdict;
  EXPECT_NE(seed.verdict.find("excused gaps included"), std::string::npos) << seed.verdict;
  ASSERT_TRUE(summary.recommended);
  EXPECT_EQ(summary.configurations[*summary.recommended].label, "algorithm=core");

  const std::string chart = svg_labelled(render_html(data, summary, std::nullopt), "Crash recovery vs lease / heartbeat");
  ASSERT_FALSE(chart.empty());
  EXPECT_NE(chart.find(">seed: excused gaps</text>"), std::string::npos);  // in the legend
  EXPECT_NE(chart.find("6 excused gaps: p99 160.00 s, max 160.00 s"), std::string::npos);
  EXPECT_EQ(chart.find(">core: excused gaps</text>"), std::string::npos);  // the core had none
}

// Heartbeat 2.5 s / lease 10 s and 5 s / 20 s are both a ratio of 4: on a
// ratio axis they would be one point. They are plotted apart, by pair.
TEST(SweepCharts, ConfigurationsWhoseRatiosCollideArePlottedApartAndLabelled) {
  const SweepData data = synthetic_sweep(R"({
    "scenario": "lease-crash", "duration": "2m", "seeds": 2,
    "axes": [{"name": "heartbeat", "values": ["2.5s", "5s"]}, {"name": "lease", "values": ["10s", "20s"]}]
  })", [](const SweepCell& cell, uint64_t seed) {
    return crash_record(seed, {10000.0 * static_cast<double>(cell.index + 1)}, {});
  });
  const SweepSummary summary = summarize(data);
  const std::string chart = svg_labelled(render_html(data, summary, std::nullopt), "Crash recovery by heartbeat / lease");
  ASSERT_FALSE(chart.empty());
  for (const char* pair : {">2.5s / 10s</text>", ">5s / 20s</text>", ">2.5s / 20s</text>", ">5s / 10s</text>"}) {
    EXPECT_NE(chart.find(pair), std::string::npos) << pair;
  }
  const auto short_pair = attribute_after(chart, "cell 0: heartbeat=2.5s lease=10s (", "cx");
  const auto long_pair = attribute_after(chart, "cell 3: heartbeat=5s lease=20s (", "cx");
  ASSERT_TRUE(short_pair && long_pair);
  EXPECT_NE(*short_pair, *long_pair);
}

// Two variants with the same failing share at the same skew are drawn side
// by side (neither hides the other), and no line joins two measured skews
// as if the values between them had been measured.
TEST(SweepCharts, CoincidingSeriesStayVisibleAndNoLineClaimsUnmeasuredValues) {
  const SweepData data = synthetic_sweep(R"({
    "scenario": "lease-crash", "duration": "2m", "seeds": 2,
    "axes": [{"name": "algorithm", "values": ["core", "seed"]}, {"name": "fast_worker_offset", "values": ["0s", "16s"]}]
  })", [](const SweepCell&, uint64_t seed) { return crash_record(seed, {10000.0}, {}); });
  const SweepSummary summary = summarize(data);
  const std::string chart = svg_labelled(render_html(data, summary, std::nullopt), "Single-ownership violations vs fast_worker_offset");
  ASSERT_FALSE(chart.empty());
  const auto core = attribute_after(chart, "<title>core", "cx");
  const auto seed = attribute_after(chart, "<title>seed", "cx");
  ASSERT_TRUE(core && seed) << chart.substr(0, 2000);
  EXPECT_NE(*core, *seed);  // both at 0 s and 0 %: apart
  EXPECT_EQ(chart.find("fill=\"none\" stroke=\"#"), std::string::npos) << "a line joins the points";
  EXPECT_NE(chart.find("series drawn 6 px apart"), std::string::npos);
}

// The violations chart sums the cells of one variant and skew value; it
// names the axes it sums over. The recovery chart overlays the skew values
// at one position, and says so.
TEST(SweepCharts, EveryChartThatAggregatesOverAxesNamesThem) {
  const SweepData data = synthetic_sweep(R"({
    "scenario": "lease-crash", "duration": "2m", "seeds": 2,
    "axes": [{"name": "heartbeat", "values": ["5s", "10s"]}, {"name": "lease", "values": ["20s", "40s"]},
             {"name": "algorithm", "values": ["core", "seed"]}, {"name": "fast_worker_offset", "values": ["0s", "16s"]}]
  })", [](const SweepCell& cell, uint64_t seed) {
    return crash_record(seed, {30000}, {}, cell.parameters["fast_worker_offset"] == "16s" && seed == 1);
  });
  const std::string html = render_html(data, summarize(data), std::nullopt);
  const std::string violations = svg_labelled(html, "Single-ownership violations vs fast_worker_offset");
  ASSERT_FALSE(violations.empty());
  EXPECT_NE(violations.find("failing seeds summed over heartbeat, lease."), std::string::npos);
  const std::string recovery = svg_labelled(html, "Crash recovery by heartbeat / lease");  // 5/20 and 10/40 collide
  ASSERT_FALSE(recovery.empty());
  EXPECT_NE(recovery.find("cells differing in fast_worker_offset"), std::string::npos);
}

// A 2 s violation on a 600 s run is a sliver on the whole run's axis; the
// page first shows it zoomed (a window at most ~20x its length), then the
// whole run.
TEST(SweepCharts, TheTimelineZoomsToTheViolation) {
  const SweepData data = synthetic_sweep(R"({"scenario": "lease-crash", "duration": "10m", "seeds": 1})",
                                         [](const SweepCell&, uint64_t seed) { return crash_record(seed, {}, {}); });
  OwnershipTimeline timeline;
  timeline.duration_s = 600;
  timeline.seed = 1;
  timeline.connections = {"c1", "c2"};
  timeline.intervals = {{"c1", "worker-0", 10, 302, 1, "lost"}, {"c1", "worker-1", 300, 600, 2, "end of run"},
                        {"c2", "worker-1", 5, 600, 1, "end of run"}};
  const std::string html = render_html(data, summarize(data), timeline);
  const std::string zoomed = svg_labelled(html, "ownership timeline, zoomed to the first violation");
  const std::string whole = svg_labelled(html, "ownership timeline");
  ASSERT_FALSE(zoomed.empty());
  ASSERT_FALSE(whole.empty());
  const auto chart_width = attribute_after(zoomed, "<svg ", "width");
  const auto violation_width = attribute_after(zoomed, "two acting owners from 300.000 s to 302.000 s", "width");
  ASSERT_TRUE(chart_width && violation_width);
  EXPECT_GE(*violation_width, *chart_width / 20) << "the zoomed window is more than ~20x the violation";
  EXPECT_LT(*violation_width, *chart_width) << "the window shows context around it";
  EXPECT_NE(whole.find("two acting owners from 300.000 s to 302.000 s"), std::string::npos);
  EXPECT_NE(html.find("Zoomed to the first violation: c1 had two acting owners from 300.000 s to 302.000 s"),
            std::string::npos);
}

}  // namespace
}  // namespace leaseproof::report
