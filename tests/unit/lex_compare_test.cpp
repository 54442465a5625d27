#include "base/lex_compare.hpp"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace leaseproof {
namespace {

int sign(int x) { return (x > 0) - (x < 0); }

// Strings that share long prefixes, so the 8-byte steps and the byte tail
// both decide comparisons, with bytes above 0x7F (unsigned order).
rc::Gen<std::string> key_text() {
  return rc::gen::map(rc::gen::container<std::vector<uint8_t>>(rc::gen::inRange<uint8_t>(0, 4)),
                      [](const std::vector<uint8_t>& parts) {
                        static const char* const kParts[] = {"CONN#", "c1", "\xff", "", "abcdefgh"};
                        std::string text;
                        for (uint8_t part : parts) text += kParts[part];
                        return text;
                      });
}

RC_GTEST_PROP(LexCompare, OrdersAsStdStringCompare, ()) {
  const std::string a = *rc::gen::oneOf(key_text(), rc::gen::arbitrary<std::string>());
  const std::string b = *rc::gen::oneOf(key_text(), rc::gen::arbitrary<std::string>());
  RC_ASSERT(sign(lex_compare(a, b)) == sign(a.compare(b)));
  RC_ASSERT(LexLess{}(a, b) == (a < b));
}

// Where two prefixes differ they order the strings as std::string does; equal
// strings have equal prefixes.
RC_GTEST_PROP(LexPrefix, DifferentPrefixesOrderAsTheStrings, ()) {
  const std::string a = *rc::gen::oneOf(key_text(), rc::gen::arbitrary<std::string>());
  const std::string b = *rc::gen::oneOf(key_text(), rc::gen::arbitrary<std::string>(), rc::gen::just(a));
  if (a == b) RC_ASSERT(lex_prefix(a) == lex_prefix(b));
  if (lex_prefix(a) != lex_prefix(b)) RC_ASSERT((lex_prefix(a) < lex_prefix(b)) == (a < b));
}

TEST(LexPrefix, AStringThatEndsSortsBeforeAnyByte) {
  EXPECT_LT(lex_prefix("c1"), lex_prefix("c12"));
  EXPECT_LT(lex_prefix("c12"), lex_prefix("c2"));
  EXPECT_LT(lex_prefix("a"), lex_prefix("\xff"));  // unsigned bytes
  EXPECT_EQ(lex_prefix("abcdefgh1"), lex_prefix("abcdefgh2"));  // past 8 bytes only lex_compare tells
  EXPECT_EQ(lex_prefix("c1"), lex_prefix(std::string_view{"c1\0", 3}));  // nor does a NUL after the end
}

RC_GTEST_PROP(LexEqual, AnswersAsStdStringEquality, ()) {
  const std::string a = *rc::gen::oneOf(key_text(), rc::gen::arbitrary<std::string>());
  const std::string b = *rc::gen::oneOf(key_text(), rc::gen::arbitrary<std::string>(), rc::gen::just(a));
  RC_ASSERT(lex_equal(a, b) == (a == b));
}

// Every length through the byte, 4-byte and 8-byte ways, a difference at every
// position: each is seen, and equal copies are equal.
TEST(LexEqual, SeesADifferenceAtEveryPositionOfEveryLength) {
  for (std::size_t size = 0; size <= 40; ++size) {
    std::string a(size, 'x');
    for (std::size_t i = 0; i < size; ++i) a[i] = static_cast<char>('a' + i % 26);
    const std::string copy = a;
    EXPECT_TRUE(lex_equal(a, copy)) << size;
    for (std::size_t i = 0; i < size; ++i) {
      std::string b = a;
      b[i] = static_cast<char>(b[i] ^ 0x80);
      EXPECT_FALSE(lex_equal(a, b)) << size << " at " << i;
    }
    EXPECT_FALSE(lex_equal(a, a + "y")) << size;
  }
}

TEST(LexCompare, DecidesByUnsignedBytesThenLength) {
  EXPECT_LT(lex_compare("abcdefgh1", "abcdefgh2"), 0);  // after a full 8-byte step
  EXPECT_GT(lex_compare("\xff", "a"), 0);                // 0xFF sorts after 'a'
  EXPECT_LT(lex_compare("abcdefgh", "abcdefghi"), 0);    // a prefix first
  EXPECT_EQ(lex_compare("same-key", "same-key"), 0);
  EXPECT_LT(lex_compare("", "a"), 0);
}

TEST(LexLess, GivesAMapStdLessOrderAndStringViewLookup) {
  std::map<std::string, int, LexLess> ours;
  std::map<std::string, int> theirs;
  for (const char* key : {"c10", "c9", "c1", "CONN#c2", "\xc3\xa9", "c10a"}) {
    ours.emplace(key, 0);
    theirs.emplace(key, 0);
  }
  std::vector<std::string> a;
  std::vector<std::string> b;
  for (const auto& [key, value] : ours) a.push_back(key);
  for (const auto& [key, value] : theirs) b.push_back(key);
  EXPECT_EQ(a, b);
  EXPECT_NE(ours.find(std::string_view{"c9"}), ours.end());
  EXPECT_EQ(ours.find(std::string_view{"c99"}), ours.end());
}

// Each round of hash_text is a bijection of its state for a given word, and
// every byte reaches a word: two strings of one length that differ in one
// byte always hash apart, at every position of every length (through the
// 1-3, 4-7 and 8-byte ways), and the length itself is hashed.
TEST(TextHash, AByteChangedAnywhereChangesTheHash) {
  for (std::size_t size = 0; size <= 40; ++size) {
    std::string a(size, 'x');
    for (std::size_t i = 0; i < size; ++i) a[i] = static_cast<char>('a' + i % 26);
    const std::string copy = a;  // same bytes elsewhere in memory: same hash
    EXPECT_EQ(TextHash{}(a), TextHash{}(copy)) << size;
    for (std::size_t i = 0; i < size; ++i) {
      std::string b = a;
      b[i] = static_cast<char>(b[i] ^ 0x80);
      EXPECT_NE(TextHash{}(a), TextHash{}(b)) << size << " at " << i;
    }
  }
  EXPECT_NE(TextHash{}(std::string_view{"a"}), TextHash{}(std::string_view{"a\0", 2}));
  EXPECT_NE(TextHash{}(""), TextHash{}(std::string_view{"\0", 1}));
}

}  // namespace
}  // namespace leaseproof
