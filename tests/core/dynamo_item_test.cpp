// dynamo::Item is a flat map that must behave exactly like the
// std::map<std::string, AttributeValue> it replaced: same contents, same
// iteration order (every encoded byte and trace hash depends on it), same
// answers from every operation, whatever the sequence of operations.

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <leaseproof/core/dynamo/attribute_value.hpp>

namespace leaseproof::dynamo {
namespace {

using Reference = std::map<std::string, AttributeValue>;

std::vector<std::pair<std::string, AttributeValue>> contents(const Item& item) {
  return {item.begin(), item.end()};
}
std::vector<std::pair<std::string, AttributeValue>> contents(const Reference& map) {
  return {map.begin(), map.end()};
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
    const auto value = AttributeValue::number(*rc::gen::inRange<int64_t>(-5, 5));
    switch (*rc::gen::inRange(0, 6)) {
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
    }
    RC_ASSERT(item.size() == reference.size());
  }
  RC_ASSERT(contents(item) == contents(reference));
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
}

}  // namespace
}  // namespace leaseproof::dynamo
