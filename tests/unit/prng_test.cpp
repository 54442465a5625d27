#include <gtest/gtest.h>

#include <array>

#include "sim/prng.hpp"

namespace leaseproof::sim {
namespace {

using namespace literals;

// Published reference outputs: splitmix64 from state 0, and xoshiro256** from
// state {1, 2, 3, 4}. If these change, every seed's run changes.
TEST(Prng, Splitmix64MatchesTheReferenceOutputs) {
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(splitmix64_next(state), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(splitmix64_next(state), 0x06C45D188009454FULL);
}

TEST(Prng, Xoshiro256StarStarMatchesTheReferenceOutputs) {
  Prng prng = Prng::from_state(1, 2, 3, 4);
  EXPECT_EQ(prng.next_u64(), 11520u);
  EXPECT_EQ(prng.next_u64(), 0u);
  EXPECT_EQ(prng.next_u64(), 1509978240u);
  EXPECT_EQ(prng.next_u64(), 1215971899390074240u);
}

TEST(Prng, SameSeedSameStream) {
  Prng a{42};
  Prng b{42};
  Prng c{43};
  bool any_difference = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    any_difference |= x != c.next_u64();
  }
  EXPECT_TRUE(any_difference);
}

TEST(Prng, BelowIsRoughlyUniform) {
  Prng prng{7};
  std::array<uint64_t, 10> buckets{};
  constexpr int kDraws = 100'000;
  for (int i = 0; i < kDraws; ++i) ++buckets[prng.below(10)];
  for (uint64_t count : buckets) {
    EXPECT_GT(count, 9'500u);  // expected 10,000 with a standard deviation of 95
    EXPECT_LT(count, 10'500u);
  }
}

TEST(Prng, ChanceIsExactAtTheEnds) {
  Prng prng{1};
  int hits = 0;
  for (int i = 0; i < 10'000; ++i) {
    EXPECT_FALSE(prng.chance(Ratio::zero()));
    EXPECT_TRUE(prng.chance(Ratio::one()));
    hits += prng.chance(Ratio{1, 4}) ? 1 : 0;
  }
  EXPECT_GT(hits, 2'300);
  EXPECT_LT(hits, 2'700);
}

TEST(Prng, UniformDurationReachesBothEnds) {
  Prng prng{3};
  bool low = false;
  bool high = false;
  for (int i = 0; i < 1000; ++i) {
    const Duration d = prng.uniform_duration(1_ns, 3_ns);
    EXPECT_GE(d, 1_ns);
    EXPECT_LE(d, 3_ns);
    low |= d == 1_ns;
    high |= d == 3_ns;
  }
  EXPECT_TRUE(low);
  EXPECT_TRUE(high);
}

TEST(LatencyDistribution, TailIsRareAndBounded) {
  Prng prng{9};
  LatencyDistribution latency{2_ms, 1_ms, Ratio{1, 100}, 1_s};
  int slow = 0;
  for (int i = 0; i < 10'000; ++i) {
    const Duration d = latency.sample(prng);
    EXPECT_GE(d, 2_ms);
    EXPECT_LE(d, latency.max());
    slow += d > 3_ms ? 1 : 0;
  }
  EXPECT_GT(slow, 50);  // about 1% land in the tail (a few land below 1ms of extra)
  EXPECT_LT(slow, 150);
}

TEST(DeriveSeed, DependsOnRootAndName) {
  EXPECT_EQ(derive_seed(1, "network"), derive_seed(1, "network"));
  EXPECT_NE(derive_seed(1, "network"), derive_seed(1, "faults"));
  EXPECT_NE(derive_seed(1, "network"), derive_seed(2, "network"));
}

}  // namespace
}  // namespace leaseproof::sim
