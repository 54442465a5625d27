// Registry sweeps (seed 003; docs/reports.md, "Registry sweeps"), label sim:
// what a cell reports is measured, not assumed (sharding a small room costs
// each broadcast more queries; a longer TTL keeps a vanished user online
// longer), the seed's registry fails its configuration with a reproduce
// line, and the reports do not depend on threads or shards.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "reports/sweep.hpp"
#include "reports/sweep_report.hpp"

namespace leaseproof::report {
namespace {

// 20 clients in 2 rooms (about 10 members each; r1 is quiet: only $disconnect
// and TTL clean it), connections capped at 5 minutes, 20 minutes a run.
SweepSpec registry_spec(const char* axes) {
  nlohmann::json spec = nlohmann::json::parse(R"({
    "scenario": "registry", "duration": "20m", "seeds": 2,
    "base": {"clients": 20, "rooms": 2, "rooms_per_client": 1, "quiet_rooms": 1, "connection_cap": "5m"}
  })");
  spec["axes"] = nlohmann::json::parse(axes);
  return parse_sweep_spec(spec);
}

const CellSummary& cell_at(const SweepData& data, const SweepSummary& summary, int shards, const std::string& ttl) {
  for (const SweepCell& cell : data.cells) {
    if (cell.parameters["room_shards"] == shards && cell.parameters["ttl"] == ttl) return summary.cells[cell.index];
  }
  throw std::logic_error("no such cell");
}

TEST(RegistrySweep, MeasuresCostPerBroadcastAndConnectionHourAndStaleness) {
  const SweepData data = run_sweep(
      registry_spec(R"([{"name": "room_shards", "values": [1, 8]}, {"name": "ttl", "values": ["6m", "12m"]}])"),
      std::nullopt, 2);
  const SweepSummary summary = summarize(data);
  ASSERT_TRUE(summary.registry);
  for (const CellSummary& cell : summary.cells) {
    ASSERT_TRUE(cell.registry);
    const RegistryCell& r = *cell.registry;
    EXPECT_EQ(cell.failing_seeds, 0u);
    EXPECT_GT(r.broadcasts, 1000u);
    EXPECT_GT(r.members_per_broadcast(), 3.0);
    EXPECT_EQ(r.delivered, r.expected_deliveries);
    EXPECT_GT(r.connection_hours, 1.0);
    EXPECT_GT(r.broadcast_read_units, 0);
    EXPECT_GT(r.connection_write_units, 0);
    // Every dead connection is a sample, and some died.
    uint64_t dead = 0;
    for (const uint64_t count : r.staleness_broadcast) dead += count;
    EXPECT_GT(dead, 20u);
    EXPECT_TRUE(RegistryCell::p99_ms(r.staleness_presence));
  }
  // A room of about 10 members: 8 shards are 8 queries per broadcast, one
  // shard one; the write side does not depend on the shards.
  for (const char* ttl : {"6m", "12m"}) {
    const RegistryCell& one = *cell_at(data, summary, 1, ttl).registry;
    const RegistryCell& eight = *cell_at(data, summary, 8, ttl).registry;
    EXPECT_GT(eight.dollars_per_million_broadcasts, 4 * one.dollars_per_million_broadcasts) << ttl;
    EXPECT_NEAR(eight.dollars_per_thousand_connection_hours, one.dollars_per_thousand_connection_hours,
                0.1 * one.dollars_per_thousand_connection_hours)
        << ttl;
  }
  // The quiet room's rows of vanished users count them online until their
  // TTL: presence stays stale longer with the longer TTL, and never beyond it.
  const double short_ttl = *RegistryCell::p99_ms(cell_at(data, summary, 1, "6m").registry->staleness_presence);
  const double long_ttl = *RegistryCell::p99_ms(cell_at(data, summary, 1, "12m").registry->staleness_presence);
  EXPECT_LT(short_ttl, long_ttl);
  EXPECT_LE(short_ttl, 6 * 60'000.0);
  EXPECT_LE(long_ttl, 12 * 60'000.0);
  // Within 5% of the cheapest, the least stale: one shard, the short TTL.
  ASSERT_TRUE(summary.recommended);
  EXPECT_EQ(summary.configurations[*summary.recommended].label, "room_shards=1 ttl=6m");
  EXPECT_TRUE(summary.recommendation.starts_with("Recommended: room_shards=1 ttl=6m.")) << summary.recommendation;

  const auto files = render_reports(data, summary);
  const std::string& markdown = files.at("sweep.md");
  EXPECT_NE(markdown.find("## Registry cells"), std::string::npos);
  EXPECT_EQ(markdown.find("Recovery by cause"), std::string::npos);  // no lease sections
  EXPECT_EQ(markdown.find("crash p99"), std::string::npos);
  const std::string& html = files.at("sweep.html");
  EXPECT_NE(html.find("$ per million broadcasts"), std::string::npos);
  EXPECT_EQ(html.find("ownership timeline"), std::string::npos);
  size_t charts = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++charts;
  EXPECT_EQ(charts, 2u);
  const std::string& csv = files.at("sweep.csv");
  EXPECT_NE(csv.find("dollars_per_million_broadcasts"), std::string::npos);
  EXPECT_EQ(csv.find("crash_p99_s"), std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(files.at("sweep.json"));
  EXPECT_EQ(json["cells"][0]["summary"]["registry"]["broadcasts"], summary.cells[0].registry->broadcasts);
  EXPECT_TRUE(json["derived"]["configurations"][0].contains("staleness_presence_p99_ms"));
}

// The scenario's own mix (100 clients in 12 rooms, a mass close at 18
// minutes): the removals' BatchWriteItems come back with UnprocessedItems,
// which the seed's code drops.
TEST(RegistrySweep, TheSeedsRegistryFailsItsConfigurationWithAReproduceLine) {
  const SweepData data = run_sweep(parse_sweep_spec(nlohmann::json::parse(R"({
    "scenario": "registry", "duration": "30m", "seeds": 2,
    "axes": [{"name": "algorithm", "values": ["seed", "core"]}, {"name": "disconnect_loss_pct", "values": [0, 50]}]
  })")),
                                   std::nullopt, 2);
  const SweepSummary summary = summarize(data);
  ASSERT_EQ(summary.configurations.size(), 2u);  // disconnect loss is workload, not configuration
  const Configuration& seed = summary.configurations[0];
  EXPECT_EQ(seed.label, "algorithm=seed");
  EXPECT_FALSE(seed.qualifies);
  EXPECT_NE(seed.verdict.find("seeds failed"), std::string::npos) << seed.verdict;
  EXPECT_EQ(seed.cells.size(), 2u);
  const CellSummary& failing = summary.cells[seed.cells[0]];
  ASSERT_FALSE(failing.kinds.empty());
  const KindSummary& kind = failing.kinds.begin()->second;
  EXPECT_NE(kind.reproduce.find("--scenario registry"), std::string::npos) << kind.reproduce;
  EXPECT_NE(kind.reproduce.find("\"algorithm\":\"seed\""), std::string::npos) << kind.reproduce;
  ASSERT_TRUE(summary.recommended);
  EXPECT_EQ(summary.configurations[*summary.recommended].label, "algorithm=core");
}

TEST(RegistrySweep, ReportsDoNotDependOnThreadsOrShards) {
  const SweepSpec spec = registry_spec(R"([{"name": "room_shards", "values": [1, 4]}, {"name": "clients", "values": [8, 20]}])");
  const auto whole = render_reports(run_sweep(spec, std::nullopt, 2));
  EXPECT_EQ(whole, render_reports(run_sweep(spec, std::nullopt, 1)));
  std::vector<ShardDocument> shards;
  for (const char* shard : {"2/2", "1/2"}) {
    shards.push_back({shard, raw_json(run_sweep(spec, parse_shard(shard), 1))});
  }
  EXPECT_EQ(whole, render_reports(merge_shards(shards)));
}

}  // namespace
}  // namespace leaseproof::report
