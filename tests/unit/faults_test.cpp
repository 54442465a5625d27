#include <gtest/gtest.h>

#include "sim/faults.hpp"

namespace leaseproof::sim {
namespace {

TEST(FaultSites, EnablementIsAFunctionOfSeedAndName) {
  FaultSites a{11};
  FaultSites b{11};
  FaultSiteId x = a.declare({"worker.renew.slow"});
  b.declare({"unrelated.site.first"});  // declaring others first changes nothing
  FaultSiteId y = b.declare({"worker.renew.slow"});
  EXPECT_EQ(a.site(x).enabled, b.site(y).enabled);
  EXPECT_EQ(a.site(x).fire_chance, b.site(y).fire_chance);
}

TEST(FaultSites, AboutHalfOfSeedsEnableASiteAtOneHalf) {
  int enabled = 0;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    FaultSites sites{seed};
    enabled += sites.site(sites.declare({"site"})).enabled ? 1 : 0;
  }
  EXPECT_GT(enabled, 420);
  EXPECT_LT(enabled, 580);
}

TEST(FaultSites, DisabledNeverFiresAndForcedAlwaysFires) {
  FaultSites sites{5};
  FaultSiteId id = sites.declare({"site", Ratio::zero(), {Ratio::one()}});
  EXPECT_FALSE(sites.site(id).enabled);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(sites.reach(id));
  sites.force(id, true, Ratio::one());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(sites.reach(id));
  EXPECT_EQ(sites.site(id).reached, 200u);
  EXPECT_EQ(sites.site(id).fired, 100u);
  EXPECT_EQ(sites.describe(), "site=on@1/1");
}

TEST(FaultSites, HealedSitesNeverFireButStillDescribeTheirDraw) {
  FaultSites sites{5};
  FaultSiteId id = sites.declare({"site", Ratio::one(), {Ratio::one()}});
  EXPECT_TRUE(sites.reach(id));
  const std::string before = sites.describe();
  sites.heal();
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(sites.reach(id));
  EXPECT_EQ(sites.site(id).reached, 101u);
  EXPECT_EQ(sites.site(id).fired, 1u);
  EXPECT_EQ(sites.describe(), before);
}

TEST(FaultSitesDeathTest, DeclaringTwiceIsABug) {
  FaultSites sites{5};
  sites.declare({"site"});
  EXPECT_DEATH(sites.declare({"site"}), "declared twice");
}

}  // namespace
}  // namespace leaseproof::sim
