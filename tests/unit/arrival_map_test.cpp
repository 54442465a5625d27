#include <leaseproof/base/arrival_map.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace leaseproof {
namespace {

// The model: a map of (value, latest arrival) and the queue of arrivals, as
// the store kept its tokens before (std::unordered_map + std::deque).
struct Model {
  std::map<std::string, std::pair<int, Instant>> entries;
  std::deque<std::pair<Instant, std::string>> arrivals;

  void put(const std::string& key, int value, Instant at) {
    entries[key] = {value, at};
    arrivals.emplace_back(at, key);
  }
  void forget_through(Instant cutoff) {
    while (!arrivals.empty() && arrivals.front().first <= cutoff) {
      const auto found = entries.find(arrivals.front().second);
      if (found != entries.end() && found->second.second == arrivals.front().first) entries.erase(found);
      arrivals.pop_front();
    }
  }
};

// Puts, lookups and forgetting, with few distinct keys (so keys come back,
// after being forgotten too) and enough of them to grow the table several
// times and make probe runs wrap around its end. After each step every key
// ever used is looked up in both.
RC_GTEST_PROP(ArrivalMap, FindsWhatAMapWithAnArrivalQueueHolds, ()) {
  const auto steps = *rc::gen::container<std::vector<std::tuple<uint8_t, uint16_t, uint8_t>>>(
      rc::gen::tuple(rc::gen::inRange<uint8_t>(0, 4), rc::gen::inRange<uint16_t>(0, 200),
                     rc::gen::inRange<uint8_t>(0, 3)));
  ArrivalMap<int> map;
  Model model;
  int64_t now = 0;
  int next_value = 0;
  for (const auto& [op, key_number, step] : steps) {
    now += step;  // equal times too
    // Short keys and keys longer than a string's inline buffer.
    const std::string key = key_number % 2 == 0 ? fmt::format("k{}", key_number)
                                                 : fmt::format("a-long-idempotency-token-{:08}", key_number);
    if (op <= 1) {
      map.put(key, next_value, Instant::from_ns(now));
      model.put(key, next_value, Instant::from_ns(now));
      ++next_value;
    } else if (op == 2) {
      const Instant cutoff = Instant::from_ns(now - 5);
      map.forget_while([cutoff](Instant at) { return at <= cutoff; });
      model.forget_through(cutoff);
    }
    RC_ASSERT(map.size() == model.entries.size());
    for (uint16_t k = 0; k < 200; ++k) {
      const std::string probe =
          k % 2 == 0 ? fmt::format("k{}", k) : fmt::format("a-long-idempotency-token-{:08}", k);
      const auto* found = map.find(probe);
      const auto expected = model.entries.find(probe);
      RC_ASSERT((found != nullptr) == (expected != model.entries.end()));
      if (found != nullptr) {
        RC_ASSERT(found->key == probe);
        RC_ASSERT(found->value == expected->second.first);
        RC_ASSERT(found->at == expected->second.second);
      }
    }
  }
}

TEST(ArrivalMap, AKeySetAgainStaysUntilItsLatestArrivalIsDue) {
  ArrivalMap<int> map;
  map.put("token", 1, Instant::from_ns(10));
  map.put("other", 2, Instant::from_ns(15));
  map.put("token", 3, Instant::from_ns(20));
  map.forget_while([](Instant at) { return at <= Instant::from_ns(15); });  // token's first arrival, and other's
  ASSERT_NE(map.find("token"), nullptr);
  EXPECT_EQ(map.find("token")->value, 3);
  EXPECT_EQ(map.find("other"), nullptr);
  EXPECT_EQ(map.size(), 1u);
  map.forget_while([](Instant at) { return at <= Instant::from_ns(20); });
  EXPECT_EQ(map.find("token"), nullptr);
  EXPECT_TRUE(map.empty());
}

// Forgotten entries are reused: a steady state of puts and forgetting keeps
// finding every live key and none of the forgotten ones.
TEST(ArrivalMap, ASlidingWindowOfKeysIsFoundExactly) {
  ArrivalMap<int> map;
  constexpr int kWindow = 1000;
  for (int i = 0; i < 20 * kWindow; ++i) {
    map.put(fmt::format("token-{}", i), i, Instant::from_ns(i));
    map.forget_while([i](Instant at) { return at.ns() <= i - kWindow; });
    ASSERT_EQ(map.size(), static_cast<std::size_t>(std::min(i + 1, kWindow)));
  }
  const int last = 20 * kWindow - 1;
  for (int i = last - 2 * kWindow; i <= last; ++i) {
    const auto* found = map.find(fmt::format("token-{}", i));
    if (i > last - kWindow) {
      ASSERT_NE(found, nullptr) << i;
      EXPECT_EQ(found->value, i);
    } else {
      EXPECT_EQ(found, nullptr) << i;
    }
  }
}

}  // namespace
}  // namespace leaseproof
