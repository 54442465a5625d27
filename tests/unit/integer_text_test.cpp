#include "base/integer_text.hpp"

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace leaseproof {
namespace {

RC_GTEST_PROP(IntegerText, EveryInt64ReadsBackFromItsText, (int64_t value)) {
  RC_ASSERT(parse_integer<int64_t>(std::to_string(value)) == std::optional<int64_t>{value});
}

TEST(IntegerText, TheEdgesOfTheTypesAndWhatIsRefused) {
  using I = std::numeric_limits<int64_t>;
  using U = std::numeric_limits<uint64_t>;
  EXPECT_EQ(parse_integer<int64_t>("999999999999999999"), 999999999999999999);
  EXPECT_EQ(parse_integer<int64_t>("-999999999999999999"), -999999999999999999);
  EXPECT_EQ(parse_integer<int64_t>("9223372036854775807"), I::max());
  EXPECT_EQ(parse_integer<int64_t>("-9223372036854775808"), I::min());
  EXPECT_EQ(parse_integer<int64_t>("9223372036854775808"), std::nullopt);  // overflow
  EXPECT_EQ(parse_integer<uint64_t>("18446744073709551615"), U::max());
  EXPECT_EQ(parse_integer<uint64_t>("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_integer<int64_t>("000000000000000000000042"), 42);  // 24 digits, leading zeros
  EXPECT_EQ(parse_integer<int64_t>("-0"), 0);
  for (const char* refused : {"", "-", "+1", " 1", "1 ", "1.0", "1e3", "0x1", "--1", "1-"}) {
    EXPECT_EQ(parse_integer<int64_t>(refused), std::nullopt) << '"' << refused << '"';
  }
  EXPECT_EQ(parse_integer<uint64_t>("-1"), std::nullopt);
  EXPECT_EQ(parse_integer<uint64_t>("-0"), std::nullopt);  // from_chars takes no sign for unsigned
}

}  // namespace
}  // namespace leaseproof
