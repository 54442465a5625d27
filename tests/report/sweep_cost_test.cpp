// The sweep's cost model and spec checking (label unit: no simulation runs).
#include <gtest/gtest.h>

#include "reports/cost.hpp"
#include "reports/sweep.hpp"
#include "reports/sweep_report.hpp"

namespace leaseproof::report {
namespace {

// The articles: 500 connections x one heartbeat write per 5 s = 100 WCU/s,
// "$325 a month on demand, $47 provisioned".
TEST(SweepCost, ArticlesPricesReproduceTheir325And47Dollars) {
  const MonthlyCost cost = monthly_cost(Rates{100, 0}, *price_preset("articles"));
  EXPECT_NEAR(cost.on_demand(), 324.00, 1e-9);   // 100 x 2,592,000 s x $1.25e-6
  EXPECT_NEAR(cost.provisioned(), 46.80, 1e-9);  // 100 x 720 h x $0.00065
  EXPECT_NEAR(cost.on_demand(), 325, 1.0);
  EXPECT_NEAR(cost.provisioned(), 47, 0.5);
  EXPECT_EQ(cost.on_demand_read, 0);
}

TEST(SweepCost, CurrentPricesHalveOnDemandAndBillA730HourMonth) {
  const MonthlyCost cost = monthly_cost(Rates{100, 0}, *price_preset("current"));
  EXPECT_NEAR(cost.on_demand(), 164.25, 1e-9);   // 100 x 2,628,000 s x $0.625e-6
  EXPECT_NEAR(cost.provisioned(), 47.45, 1e-9);  // 100 x 730 h x $0.00065
}

TEST(SweepCost, ReadsArePricedPerReadUnit) {
  const MonthlyCost cost = monthly_cost(Rates{0, 200}, *price_preset("current"));
  EXPECT_NEAR(cost.on_demand_read, 200 * 2'628'000 * 0.125e-6, 1e-9);
  EXPECT_NEAR(cost.provisioned_read, 200 * 730 * 0.00013, 1e-9);
  EXPECT_EQ(cost.on_demand_write, 0);
}

// A heartbeat that changes a GSI key attribute (the articles' GSI on
// desired_state + lease_expires_at_ms) moves the index entry: a delete and
// a put, 2 GSI writes on top of the table's 1. The core's sharded GSI is
// keyed on attributes a heartbeat never changes: 1 GSI write (in place).
// The simulation's metrics show the same per renew (SweepSimulation test).
TEST(SweepCost, AGsiKeyChangeMakesAHeartbeatCostThreeWrites) {
  const Prices articles = *price_preset("articles");
  const double renews_per_s = 500.0 / 5;
  const MonthlyCost table = monthly_cost(Rates{renews_per_s * 1, 0}, articles);
  const MonthlyCost core_gsi = monthly_cost(Rates{renews_per_s * 1, 0}, articles);
  const MonthlyCost articles_gsi = monthly_cost(Rates{renews_per_s * 2, 0}, articles);
  EXPECT_NEAR(table.on_demand(), 324.00, 1e-9);
  EXPECT_NEAR(core_gsi.on_demand(), 324.00, 1e-9);
  EXPECT_NEAR(articles_gsi.on_demand(), 648.00, 1e-9);
  EXPECT_NEAR(table.on_demand() + articles_gsi.on_demand(), 972.00, 1e-9);      // 3x the articles' $324
  EXPECT_NEAR(table.provisioned() + articles_gsi.provisioned(), 140.40, 1e-9);  // 3x $46.80
}

TEST(SweepCost, PresetsAreNamedAndOthersAreNot) {
  EXPECT_TRUE(price_preset("current"));
  EXPECT_TRUE(price_preset("articles"));
  EXPECT_FALSE(price_preset("2019"));
}

TEST(SweepPercentiles, NearestRank) {
  const std::vector<double> ten{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(nearest_rank(ten, 50), 5);
  EXPECT_EQ(nearest_rank(ten, 90), 9);
  EXPECT_EQ(nearest_rank(ten, 99), 10);
  EXPECT_EQ(nearest_rank(ten, 100), 10);
  EXPECT_EQ(nearest_rank(ten, 0), 1);
  EXPECT_EQ(nearest_rank({42}, 99), 42);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(nearest_rank(hundred, 99), 99);
}

nlohmann::json small_spec() {
  return nlohmann::json::parse(R"({
    "scenario": "lease-crash", "duration": "2m", "seeds": 2,
    "base": {"workers": 3, "connections": 10},
    "axes": [{"name": "heartbeat", "values": ["5s", "20s"]}, {"name": "fast_worker_offset", "values": ["0s", "5s"]}],
    "prices": ["articles", {"preset": "current", "name": "mine", "hours_per_month": 744}]
  })");
}

std::string spec_error(const nlohmann::json& spec) {
  try {
    (void)parse_sweep_spec(spec);
  } catch (const SweepInputError& error) {
    return error.what();
  }
  return {};
}

TEST(SweepSpec, ParsesAndFillsDefaults) {
  const SweepSpec spec = parse_sweep_spec(small_spec());
  EXPECT_EQ(spec.scenario, "lease-crash");
  EXPECT_EQ(spec.duration, Duration::from_min(2));
  EXPECT_EQ(spec.first_seed, 1u);
  ASSERT_EQ(spec.prices.size(), 2u);
  EXPECT_EQ(spec.prices[1].name, "mine");
  EXPECT_EQ(spec.prices[1].hours_per_month, 744);
  EXPECT_EQ(spec.prices[1].on_demand_write_per_million, 0.625);
  EXPECT_EQ(spec.recovery_target, Duration::from_s(90));
  // The normalized form reads back to itself (merge compares it).
  EXPECT_EQ(parse_sweep_spec(spec.to_json()).to_json(), spec.to_json());
}

TEST(SweepSpec, InvalidCellsAreReportedWithTheScenariosMessage) {
  const std::vector<SweepCell> cells = expand_cells(parse_sweep_spec(small_spec()));
  ASSERT_EQ(cells.size(), 4u);  // first axis slowest
  EXPECT_EQ(cells[1].values[0], "5s");
  EXPECT_EQ(cells[1].values[1], "5s");
  EXPECT_TRUE(cells[0].valid());
  EXPECT_FALSE(cells[2].valid());  // heartbeat 20s = the default lease
  EXPECT_NE(cells[2].invalid.find("heartbeat"), std::string::npos) << cells[2].invalid;
}

// A value wrong on its own (a number where a duration goes) is bad input,
// refused before any work with the axis and the value named; it used to make
// an invalid cell, reported only inside the sweep's report (exit 0).
TEST(SweepSpec, AValueOfTheWrongTypeIsBadInputNotAnInvalidCell) {
  nlohmann::json json = nlohmann::json::parse(R"({
    "scenario": "lease-crash", "duration": "20s", "seeds": 1,
    "axes": [{"name": "heartbeat", "values": ["5s"]}, {"name": "lease", "values": ["20s", 5]}]
  })");
  try {
    (void)parse_sweep_spec(json);
    ADD_FAILURE() << "a number as a lease was accepted";
  } catch (const SweepInputError& e) {
    EXPECT_EQ(std::string{e.what()}.rfind("spec axes[1] (lease).values[1]: lease: expected a duration", 0), 0u)
        << e.what();
  }
  json["axes"][1]["values"][1] = "40s";
  EXPECT_NO_THROW((void)parse_sweep_spec(json));
}

// The swarm draws a relay for some seeds: 900 ms of latency over its 4 hops
// outlasts a 3 s pong timeout there only. Seed 3 draws none, seed 4 one: the
// cell is refused whole, naming the seed, instead of aborting half-way.
TEST(SweepSpec, ACellIsCheckedForEverySeedNotOnlyTheFirst) {
  nlohmann::json json = nlohmann::json::parse(R"({
    "scenario": "lease-swarm", "duration": "2m", "seeds": 2, "first_seed": 3,
    "base": {"latency": "900ms", "stream": {"pong_timeout": "3s"}},
    "axes": [{"name": "heartbeat", "values": ["5s"]}]
  })");
  std::vector<SweepCell> cells = expand_cells(parse_sweep_spec(json));
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_FALSE(cells[0].valid());
  EXPECT_EQ(cells[0].invalid.rfind("seed 4: stream.pong_timeout (3s)", 0), 0u) << cells[0].invalid;
  json["seeds"] = 1;  // seed 3 alone takes these parameters
  cells = expand_cells(parse_sweep_spec(json));
  EXPECT_TRUE(cells[0].valid()) << cells[0].invalid;
}

TEST(SweepSpec, DerivedAxesSetTheLeaseAndAPause) {
  nlohmann::json json = small_spec();
  json["axes"] = nlohmann::json::parse(R"([{"name": "heartbeat", "values": ["2.5s"]},
                                           {"name": "ratio", "values": [4, 3]},
                                           {"name": "pause", "values": ["0s", "25s"]}])");
  json["pause_at"] = "30s";
  const std::vector<SweepCell> cells = expand_cells(parse_sweep_spec(json));
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[0].parameters["lease"], "10s");
  EXPECT_EQ(cells[2].parameters["lease"], "7.5s");
  EXPECT_FALSE(cells[0].parameters.contains("pauses"));
  EXPECT_EQ(cells[1].parameters["pauses"], nlohmann::json::parse(R"([{"worker":0,"at":"30s","length":"25s"}])"));
  EXPECT_TRUE(cells[1].valid()) << cells[1].invalid;
}

TEST(SweepSpec, BadInputNamesTheField) {
  nlohmann::json empty_axis = small_spec();
  empty_axis["axes"][1]["values"] = nlohmann::json::array();
  EXPECT_EQ(spec_error(empty_axis), "spec axes[1] (fast_worker_offset): no values: the grid would be empty");

  nlohmann::json unknown = small_spec();
  unknown["sedes"] = 3;
  EXPECT_TRUE(spec_error(unknown).starts_with("spec sedes: unknown field")) << spec_error(unknown);

  nlohmann::json negative = small_spec();
  negative["prices"] = nlohmann::json::parse(R"([{"preset": "current", "provisioned_wcu_hour": -0.1}])");
  EXPECT_EQ(spec_error(negative), "spec prices[0].provisioned_wcu_hour: -0.1 is below zero; prices and hours must be >= 0");

  nlohmann::json no_seeds = small_spec();
  no_seeds["seeds"] = 0;
  EXPECT_TRUE(spec_error(no_seeds).starts_with("spec seeds: expected an integer in 1..")) << spec_error(no_seeds);

  nlohmann::json scenario = small_spec();
  scenario["scenario"] = "lease-crush";
  EXPECT_TRUE(spec_error(scenario).starts_with("spec scenario: unknown scenario 'lease-crush'")) << spec_error(scenario);

  nlohmann::json axis = small_spec();
  axis["axes"][0]["name"] = "heartbeet";
  EXPECT_TRUE(spec_error(axis).starts_with("spec axes[0].name: 'heartbeet' is not a parameter")) << spec_error(axis);

  nlohmann::json both = small_spec();
  both["axes"].push_back({{"name", "ratio"}, {"values", {4}}});
  both["axes"].push_back({{"name", "lease"}, {"values", {"20s"}}});
  EXPECT_TRUE(spec_error(both).starts_with("spec axes: 'ratio'")) << spec_error(both);

  nlohmann::json preset = small_spec();
  preset["prices"] = "2019";
  EXPECT_TRUE(spec_error(preset).starts_with("spec prices: unknown price preset '2019'")) << spec_error(preset);
}

TEST(SweepSpec, ShardsAreOneBasedAndCoverEveryPairOnce) {
  auto shard_error = [](const std::string& text) {
    try {
      (void)parse_shard(text);
    } catch (const SweepInputError& error) {
      return std::string{error.what()};
    }
    return std::string{};
  };
  EXPECT_EQ(shard_error("3/2"), "--shard: '3/2': the index i must be between 1 and n (2)");
  EXPECT_EQ(shard_error("0/2"), "--shard: '0/2': the index i must be between 1 and n (2)");
  EXPECT_TRUE(shard_error("1/0").starts_with("--shard: '1/0': the count n must be")) << shard_error("1/0");
  EXPECT_TRUE(shard_error("two").starts_with("--shard: 'two' is not i/n")) << shard_error("two");
  const std::vector<Shard> shards{parse_shard("1/3"), parse_shard("2/3"), parse_shard("3/3")};
  for (size_t cell = 0; cell < 7; ++cell) {
    for (uint64_t seed = 0; seed < 11; ++seed) {
      int owners = 0;
      for (const Shard& shard : shards) owners += in_shard(shard, 7, cell, seed) ? 1 : 0;
      EXPECT_EQ(owners, 1) << "cell " << cell << " seed " << seed;
    }
  }
}

}  // namespace
}  // namespace leaseproof::report
