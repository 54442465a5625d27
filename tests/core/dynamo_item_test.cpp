// dynamo::Item is a flat map that must behave exactly like the
// std::map<std::string, AttributeValue> it replaced: same contents, same
// iteration order (every encoded byte and trace hash depends on it), same
// answers from every operation, whatever the sequence of operations.

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dynamo/attribute_value.hpp"

namespace leaseproof::dynamo {
namespace {

using Reference = std::map<std::string, AttributeValue>;

std::vector<std::pair<std::string, AttributeValue>> contents(const Item& item) {
  return {item.begin(), item.end()};
}
std::vector<std::pair<std::string, AttributeValue>> contents(const Reference& map) {
  return {map.begin(), map.end()};
}

std::size_t size_of(const Reference& map) {
  std::size_t total = 0;
  for (const auto& [name, value] : map) total += name.size() + attribute_size_bytes(value);
  return total;
}

// Names from a small alphabet, so that operations often hit present names;
// with prefixes, the empty name and bytes above 0x7f to exercise the order.
rc::Gen<std::string> gen_name() {
  return rc::gen::oneOf(rc::gen::element<std::string>("", "a", "ab", "b", "lease_owner", "lease_expires_at_ms",
                                                      "pk", "\xc3\xa9t\xc3\xa9", "Z"),
                        rc::gen::container<std::string>(rc::gen::inRange<char>('a', 'e')));
}

RC_GTEST_PROP(DynamoItem, EveryOperationSequenceMatchesStdMap, ()) {
  Item item;
  Reference reference;
  const int steps = *rc::gen::inRange(0, 60);
  for (int step = 0; step < steps; ++step) {
    const std::string name = *gen_name();
    // Numbers of 1 to 6 digits: a changed value often changes the item's size.
    const auto value = AttributeValue::number(*rc::gen::inRange<int64_t>(-100'000, 100'000));
    // The size is kept between calls (item_size_bytes): asked for between
    // changes, it must still follow every one of them.
    if (*rc::gen::arbitrary<bool>()) RC_ASSERT(item_size_bytes(std::as_const(item)) == size_of(reference));
    switch (*rc::gen::inRange(0, 7)) {
      case 0: {
        const auto [it, inserted] = item.try_emplace(name, value);
        const auto [ref_it, ref_inserted] = reference.try_emplace(name, value);
        RC_ASSERT(inserted == ref_inserted);
        RC_ASSERT(it->second == ref_it->second);
        break;
      }
      case 1: {
        const auto [it, inserted] = item.insert_or_assign(name, value);
        RC_ASSERT(inserted == reference.insert_or_assign(name, value).second);
        RC_ASSERT(it->first == name);
        break;
      }
      case 2: RC_ASSERT(item.erase(name) == reference.erase(name)); break;
      case 3: RC_ASSERT(item[name] == reference[name]); break;
      case 4:
        RC_ASSERT(item.contains(name) == reference.contains(name));
        RC_ASSERT(item.count(name) == reference.count(name));
        if (reference.contains(name)) RC_ASSERT(item.at(name) == reference.at(name));
        break;
      case 5:
        if (!reference.empty()) {
          // Erase by iterator: the first entry at or after `name`, in both.
          const auto ref_it = reference.lower_bound(name);
          if (ref_it != reference.end()) {
            const auto it = item.find(ref_it->first);
            RC_ASSERT(it != item.end());
            item.erase(it);
            reference.erase(ref_it);
          }
        }
        break;
      case 6:
        // A change through a reference taken now (after the size was kept).
        if (reference.contains(name)) {
          item.at(name) = value;
          reference.at(name) = value;
        }
        break;
    }
    RC_ASSERT(item.size() == reference.size());
  }
  RC_ASSERT(contents(item) == contents(reference));
  RC_ASSERT(item_size_bytes(item) == size_of(reference));
}

// find() scans small items and searches larger ones: both ways, at every
// size around the switch, each present name is found at its place and absent
// names (between, before and after the present ones, and prefixes) are not.
TEST(DynamoItem, FindAnswersAlikeWhetherItScansOrSearches) {
  for (int size = 0; size <= 40; ++size) {
    Item item;
    Reference reference;
    for (int i = 0; i < size; ++i) {
      const std::string name = "m" + std::to_string(100 + 2 * i);  // m100, m102, ...: same length, sorted
      item.insert_or_assign(name, AttributeValue::number(i));
      reference.insert_or_assign(name, AttributeValue::number(i));
    }
    for (int i = 0; i < size; ++i) {
      const std::string present = "m" + std::to_string(100 + 2 * i);
      const auto found = std::as_const(item).find(present);
      ASSERT_NE(found, item.cend()) << size << " " << present;
      EXPECT_EQ(found->second, reference.at(present));
      EXPECT_EQ(found - item.cbegin(), std::distance(reference.begin(), reference.find(present)));
      EXPECT_FALSE(item.contains("m" + std::to_string(101 + 2 * i))) << size;
    }
    for (const std::string absent : {"", "m", "m0", "m99", "m999", "m1000", "z"}) {
      EXPECT_EQ(std::as_const(item).find(absent), item.cend()) << size << " " << absent;
      EXPECT_EQ(item.find(absent), item.end()) << size << " " << absent;
    }
  }
}

// A number's or binary's size is kept once computed: it travels with copies
// and moves, and a value given a new text by assignment is sized anew.
TEST(DynamoItem, AValueKeepsItsSizeAcrossCopiesAndIsSizedAnewWhenReplaced) {
  AttributeValue number = AttributeValue::number("12345678901234567890");  // 20 digits: 11 bytes
  ASSERT_EQ(attribute_size_bytes(number), 11u);
  AttributeValue copy = number;
  EXPECT_EQ(attribute_size_bytes(copy), 11u);
  AttributeValue moved = std::move(number);
  EXPECT_EQ(attribute_size_bytes(moved), 11u);
  number = AttributeValue::number("7");  // the moved-from value, given a new text
  EXPECT_EQ(attribute_size_bytes(number), 2u);
  moved = AttributeValue::number("100");  // move-assigned over a kept size
  EXPECT_EQ(attribute_size_bytes(moved), 2u);
  const AttributeValue binary = AttributeValue::binary("AAAAAA==");  // 4 bytes decoded
  copy = binary;  // copy-assigned over a kept size
  EXPECT_EQ(attribute_size_bytes(copy), 4u);
  copy = AttributeValue::string("abc");
  EXPECT_EQ(attribute_size_bytes(copy), 3u);
}

// item_size_bytes keeps its answer while only const access happens; every
// way in that can change a member forgets it.
TEST(DynamoItem, ItsKeptSizeFollowsEveryChange) {
  const auto fresh = [](const Item& item) {
    std::size_t total = 0;
    for (const auto& [name, value] : item) total += name.size() + attribute_size_bytes(value);
    return total;
  };
  Item item{{"a", AttributeValue::string("1")}, {"b", AttributeValue::string("22")}};
  const auto kept_then = [&](auto change) {
    (void)item_size_bytes(item);
    change();
    EXPECT_EQ(item_size_bytes(item), fresh(item));
  };
  kept_then([&] { item.at("a") = AttributeValue::string("333"); });
  kept_then([&] { item.find("b")->second = AttributeValue::string("4444"); });
  kept_then([&] { item.begin()->second = AttributeValue::string("55555"); });
  kept_then([&] { std::prev(item.end())->second = AttributeValue::string("666666"); });
  kept_then([&] { item["c"] = AttributeValue::string("7"); });
  kept_then([&] { item.try_emplace("d", AttributeValue::string("88")); });
  kept_then([&] { item.insert_or_assign("d", AttributeValue::string("999")); });
  kept_then([&] { item.append_sorted({"e", AttributeValue::string("x")}); });
  kept_then([&] { item.erase("e"); });
  kept_then([&] { item.erase(item.begin()); });
  kept_then([&] { item.erase(item.begin(), std::next(item.begin())); });
  kept_then([&] { item.clear(); });
  EXPECT_EQ(item_size_bytes(item), 0u);

  Item from{{"name", AttributeValue::string("value")}};
  EXPECT_EQ(item_size_bytes(from), 9u);
  Item to(std::move(from));
  EXPECT_EQ(item_size_bytes(to), 9u);
  EXPECT_EQ(item_size_bytes(from), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
  Item assigned;
  assigned = std::move(to);
  EXPECT_EQ(item_size_bytes(assigned), 9u);
  EXPECT_EQ(item_size_bytes(to), 0u);  // NOLINT(bugprone-use-after-move)
  const Item copy = assigned;
  EXPECT_EQ(item_size_bytes(copy), 9u);
}

TEST(DynamoItem, ABraceListIsSortedAndKeepsTheFirstOfDuplicateNames) {
  const Item item{{"b", AttributeValue::string("1")}, {"a", AttributeValue::string("2")},
                  {"b", AttributeValue::string("3")}};
  const Reference reference{{"b", AttributeValue::string("1")}, {"a", AttributeValue::string("2")},
                            {"b", AttributeValue::string("3")}};
  EXPECT_EQ(contents(item), contents(reference));
  EXPECT_EQ(item.at("b").text(), "1");
  EXPECT_THROW((void)item.at("c"), std::out_of_range);
}

TEST(DynamoItem, AppendSortedKeepsTheOrderAndRefusesAnythingElse) {
  Item item;
  item.append_sorted({"a", AttributeValue::number(1)});
  item.append_sorted({"ab", AttributeValue::number(2)});
  item.append_sorted({"b", AttributeValue::number(3)});
  EXPECT_EQ(item, (Item{{"b", AttributeValue::number(3)}, {"a", AttributeValue::number(1)},
                        {"ab", AttributeValue::number(2)}}));
  EXPECT_THROW(item.append_sorted({"aa", AttributeValue::number(4)}), std::invalid_argument);  // before "b"
  EXPECT_THROW(item.append_sorted({"b", AttributeValue::number(5)}), std::invalid_argument);   // a duplicate
  EXPECT_EQ(item.size(), 3u);

  Item built;  // the same, each member built in place
  built.emplace_sorted("a", AttributeValue::number(1));
  built.emplace_sorted("ab", AttributeValue::number(2));
  built.emplace_sorted("b", AttributeValue::number(3));
  EXPECT_EQ(built, item);
  EXPECT_THROW(built.emplace_sorted("aa", AttributeValue::number(4)), std::invalid_argument);
  EXPECT_THROW(built.emplace_sorted("b", AttributeValue::number(5)), std::invalid_argument);
  EXPECT_EQ(built.size(), 3u);
}

TEST(DynamoAttributeValue, AnIntegerNumberIsItsDecimalText) {
  for (const int64_t value : {int64_t{0}, int64_t{7}, int64_t{-42}, int64_t{1767225600000},
                              std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    const AttributeValue number = AttributeValue::number(value);
    EXPECT_TRUE(number.is(AttributeType::n));
    EXPECT_EQ(number.text(), std::to_string(value));
  }
}

}  // namespace
}  // namespace leaseproof::dynamo
