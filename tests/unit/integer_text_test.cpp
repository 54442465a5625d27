#include "base/integer_text.hpp"

#include <charconv>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace leaseproof {
namespace {

template <typename Integer>
std::optional<Integer> with_from_chars(std::string_view text) {
  Integer value = 0;
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end) return std::nullopt;
  return value;
}

// Texts near the fast path's edges: digits with a sign, a stray character,
// 17 to 20 digits (the fast path takes 18 at most), leading zeros.
rc::Gen<std::string> integer_like() {
  return rc::gen::map(rc::gen::container<std::vector<uint8_t>>(rc::gen::inRange<uint8_t>(0, 16)),
                      [](const std::vector<uint8_t>& parts) {
                        static const char* const kParts[] = {"0", "1", "9", "5", "7", "00", "-", "+", " ", ".",
                                                             "e", "x", "/", ":", "123456789", "999999999"};
                        std::string text;
                        for (uint8_t part : parts) text += kParts[part];
                        return text;
                      });
}

RC_GTEST_PROP(IntegerText, SignedReadsAsFromCharsReadsTheWholeText, ()) {
  const std::string text = *rc::gen::oneOf(integer_like(), rc::gen::arbitrary<std::string>());
  RC_ASSERT(parse_integer<int64_t>(text) == with_from_chars<int64_t>(text));
}

RC_GTEST_PROP(IntegerText, UnsignedReadsAsFromCharsReadsTheWholeText, ()) {
  const std::string text = *rc::gen::oneOf(integer_like(), rc::gen::arbitrary<std::string>());
  RC_ASSERT(parse_integer<uint64_t>(text) == with_from_chars<uint64_t>(text));
}

RC_GTEST_PROP(IntegerText, EveryInt64ReadsBackFromItsText, (int64_t value)) {
  RC_ASSERT(parse_integer<int64_t>(std::to_string(value)) == std::optional<int64_t>{value});
}

TEST(IntegerText, TheEdgesOfTheFastPathAndOfTheTypes) {
  using I = std::numeric_limits<int64_t>;
  using U = std::numeric_limits<uint64_t>;
  EXPECT_EQ(parse_integer<int64_t>("999999999999999999"), 999999999999999999);  // 18 digits: fast path
  EXPECT_EQ(parse_integer<int64_t>("-999999999999999999"), -999999999999999999);
  EXPECT_EQ(parse_integer<int64_t>("9223372036854775807"), I::max());  // 19 digits: from_chars
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
