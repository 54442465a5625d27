#include <gtest/gtest.h>

#include "base/assert.hpp"
#include "base/time.hpp"

namespace leaseproof {
namespace {

using namespace literals;

TEST(AssertDeathTest, ComparisonPrintsBothOperands) {
  const int queue_bytes = 5;
  const int queue_bytes_max = 4;
  EXPECT_DEATH(LP_ASSERT_LE(queue_bytes, queue_bytes_max),
               "assertion failed: queue_bytes <= queue_bytes_max with left = 5, right = 4");
}

TEST(AssertDeathTest, DurationsPrintHumanReadable) {
  EXPECT_DEATH(LP_ASSERT_LT(20_s, 5_s), "left = 20s, right = 5s");
}

TEST(AssertDeathTest, PlainAssertNamesTheCondition) {
  const bool renewed = false;
  EXPECT_DEATH(LP_ASSERT(renewed), "assertion failed: renewed");
}

TEST(Assert, PassingAssertionsDoNothing) {
  int evaluated = 0;
  LP_ASSERT_EQ(++evaluated, 1);  // operands are evaluated exactly once
  EXPECT_EQ(evaluated, 1);
}

}  // namespace
}  // namespace leaseproof
