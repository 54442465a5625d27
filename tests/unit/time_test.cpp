#include <gtest/gtest.h>

#include "base/time.hpp"

namespace leaseproof {
namespace {

using namespace literals;

TEST(Duration, ArithmeticIsExactInNanoseconds) {
  EXPECT_EQ((1_s + 500_ms).ns(), 1'500'000'000);
  EXPECT_EQ((20_s - 5_s) / 5_s, 3);
  EXPECT_EQ((7_s % 2_s), 1_s);
  EXPECT_EQ(-(3_ms), Duration::from_us(-3000));
  EXPECT_EQ(2 * 250_ms, 500_ms);
  EXPECT_LT(999_us, 1_ms);
  EXPECT_EQ((1_h).s(), 3600);
  EXPECT_EQ((1_min + 1_ns).ms(), 60'000);
}

TEST(Instant, DifferencesAreDurationsAndMillisecondsFloor) {
  const Instant t = Instant::from_ms(1000);
  EXPECT_EQ((t + 250_ms) - t, 250_ms);
  EXPECT_EQ(Instant::from_ns(-1).ms(), -1);  // floor, not truncation
  EXPECT_EQ(Instant::from_ns(1'999'999).ms(), 1);
  EXPECT_LT(t, t + 1_ns);
}

TEST(FormatDuration, IsShortAndExact) {
  EXPECT_EQ(format_duration(Duration::zero()), "0s");
  EXPECT_EQ(format_duration(17_ns), "17ns");
  EXPECT_EQ(format_duration(1500_ns), "1.5us");
  EXPECT_EQ(format_duration(250_ms), "250ms");
  EXPECT_EQ(format_duration(1500_ms), "1.5s");
  EXPECT_EQ(format_duration(150_s), "2m30s");
  EXPECT_EQ(format_duration(1_h + 5_s), "1h0m5s");
  EXPECT_EQ(format_duration(-(3_ms + 1_ns)), "-3.000001ms");
  EXPECT_EQ(format_duration(10_min), "10m0s");
}

TEST(ParseDuration, AcceptsUnitsAndFractions) {
  EXPECT_EQ(parse_duration("90s"), 90_s);
  EXPECT_EQ(parse_duration("1.5s"), 1500_ms);
  EXPECT_EQ(parse_duration("10m"), 10_min);
  EXPECT_EQ(parse_duration("1h30m"), 90_min);
  EXPECT_EQ(parse_duration("250ms"), 250_ms);
  EXPECT_EQ(parse_duration("3us"), 3_us);
  EXPECT_EQ(parse_duration("0"), Duration::zero());
  EXPECT_EQ(parse_duration("-5s"), -(5_s));
  EXPECT_EQ(parse_duration("2m30s"), 150_s);
}

TEST(ParseDuration, RejectsMalformedText) {
  for (const char* bad : {"", "s", "5", "5x", "1.s", ".5s", "abc", "1.0000000001s", "9999999999999h", "5s-",
                          "--5s"}) {
    EXPECT_EQ(parse_duration(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace leaseproof
