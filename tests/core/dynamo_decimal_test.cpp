#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/dynamo/decimal.hpp"

namespace leaseproof::dynamo {
namespace {

Decimal parse_ok(std::string_view text) {
  auto parsed = Decimal::parse(text);
  EXPECT_TRUE(parsed.ok()) << text;
  return parsed.ok() ? parsed.value() : Decimal{};
}

TEST(DynamoDecimal, CanonicalTextDropsInsignificantZerosAndExponent) {
  EXPECT_EQ(parse_ok("1.50").to_string(), "1.5");
  EXPECT_EQ(parse_ok("1e2").to_string(), "100");
  EXPECT_EQ(parse_ok("-0").to_string(), "0");
  EXPECT_EQ(parse_ok("0.000").to_string(), "0");
  EXPECT_EQ(parse_ok("+007").to_string(), "7");
  EXPECT_EQ(parse_ok("1.5E-5").to_string(), "0.000015");
  EXPECT_EQ(parse_ok("-12.340").to_string(), "-12.34");
  EXPECT_EQ(parse_ok(".5").to_string(), "0.5");
}

TEST(DynamoDecimal, ComparesNumericallyNotTextually) {
  EXPECT_GT(parse_ok("10"), parse_ok("9"));
  EXPECT_LT(parse_ok("-10"), parse_ok("-9"));
  EXPECT_EQ(parse_ok("1.0"), parse_ok("1"));
  EXPECT_LT(parse_ok("0.1"), parse_ok("0.11"));
  EXPECT_GT(parse_ok("1e3"), parse_ok("999.999"));
  EXPECT_LT(parse_ok("-1"), parse_ok("0"));
  EXPECT_GT(parse_ok("0"), parse_ok("-0.0001"));
}

TEST(DynamoDecimal, AdditionIsExactAtThirtyEightDigits) {
  const auto big = parse_ok("99999999999999999999999999999999999998");  // 38 digits
  const auto sum = big.add(parse_ok("1"));
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->to_string(), "99999999999999999999999999999999999999");
  const auto fraction = parse_ok("0.1").add(parse_ok("0.2"));
  ASSERT_TRUE(fraction.ok());
  EXPECT_EQ(fraction->to_string(), "0.3");  // no binary floating point anywhere
  const auto difference = parse_ok("5").subtract(parse_ok("7.25"));
  ASSERT_TRUE(difference.ok());
  EXPECT_EQ(difference->to_string(), "-2.25");
}

TEST(DynamoDecimal, RejectsWhatItCannotRepresentInsteadOfRounding) {
  const auto too_precise = parse_ok("99999999999999999999999999999999999999").add(parse_ok("0.1"));
  ASSERT_FALSE(too_precise.ok());
  EXPECT_EQ(too_precise.error().type, "ValidationException");
  EXPECT_EQ(too_precise.error().message, "Attempting to store more than 38 significant digits in a Number");

  const auto overflow = Decimal::parse("1e126");
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.error().message,
            "Number overflow. Attempting to store a number with magnitude larger than supported range");
  const auto underflow = Decimal::parse("1e-131");
  ASSERT_FALSE(underflow.ok());
  EXPECT_EQ(underflow.error().message,
            "Number underflow. Attempting to store a number with magnitude smaller than supported range");
  EXPECT_TRUE(Decimal::parse("9.9999999999999999999999999999999999999E+125").ok());
  EXPECT_TRUE(Decimal::parse("1E-130").ok());
}

TEST(DynamoDecimal, RejectsMalformedText) {
  for (std::string_view text : {"", "abc", "1..2", "1e", "--1", "1 ", "0x10", "1e+"}) {
    const auto parsed = Decimal::parse(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.error().message, fmt::format("The parameter cannot be converted to a numeric value: {}", text));
  }
}

}  // namespace
}  // namespace leaseproof::dynamo
