#include <gtest/gtest.h>

#include "base/ratio.hpp"

namespace leaseproof {
namespace {

TEST(Ratio, ComparesExactlyByCrossMultiplication) {
  EXPECT_EQ((Ratio{1, 2}), (Ratio{50, 100}));
  EXPECT_LT((Ratio{1, 3}), (Ratio{1, 2}));
  EXPECT_GT((Ratio{UINT64_MAX, UINT64_MAX - 1}), Ratio::one());  // no overflow
  EXPECT_TRUE((Ratio{3, 4}).is_probability());
  EXPECT_FALSE((Ratio{5, 4}).is_probability());
}

TEST(Ratio, ParsesFractionsPercentsAndWholes) {
  EXPECT_EQ(parse_ratio("3/4"), (Ratio{3, 4}));
  EXPECT_EQ(parse_ratio("25%"), (Ratio{1, 4}));
  EXPECT_EQ(parse_ratio("0"), Ratio::zero());
  for (const char* bad : {"", "/", "1/0", "a/b", "1/2/3", "-1/2", "%"}) {
    EXPECT_EQ(parse_ratio(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace leaseproof
