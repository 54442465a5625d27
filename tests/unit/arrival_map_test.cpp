#include "base/arrival_map.hpp"

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

// The model: a map of (value, latest arrival, latest put) and the queue of
// arrivals by key and put, as the store kept its tokens before
// (std::unordered_map + std::deque; it compared arrival times, which is the
// same while a key's put times increase, as a token's do).
struct Model {
  struct Value {
    int value;
    Instant at;
    uint64_t put;
  };
  struct Arrival {
    Instant at;
    std::string key;
    uint64_t put;
  };
  std::map<std::string, Value> entries;
  std::deque<Arrival> arrivals;
  uint64_t puts = 0;

  void put(const std::string& key, int value, Instant at) {
    entries[key] = {value, at, ++puts};
    arrivals.push_back({at, key, puts});
  }
  void forget_through(Instant cutoff) {
    while (!arrivals.empty() && arrivals.front().at <= cutoff) {
      const auto found = entries.find(arrivals.front().key);
      if (found != entries.end() && found->second.put == arrivals.front().put) entries.erase(found);
      arrivals.pop_front();
    }
  }
};

// Puts, lookups and forgetting, with few distinct keys (so keys come back,
// after being forgotten too) and enough of them to grow the table several
// times and make probe runs wrap around its end. Times mostly move forward,
// sometimes stand still, and now and then step back (a put then waits in the
// queue behind later ones). After each step every key ever used is looked up
// in both.
RC_GTEST_PROP(ArrivalMap, FindsWhatAMapWithAnArrivalQueueHolds, ()) {
  const auto steps = *rc::gen::container<std::vector<std::tuple<uint8_t, uint16_t, int8_t>>>(
      rc::gen::tuple(rc::gen::inRange<uint8_t>(0, 4), rc::gen::inRange<uint16_t>(0, 200),
                     rc::gen::inRange<int8_t>(-3, 4)));
  ArrivalMap<int> map;
  Model model;
  int64_t now = 0;
  int next_value = 0;
  for (const auto& [op, key_number, step] : steps) {
    now += step;
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
        RC_ASSERT(found->value == expected->second.value);
        RC_ASSERT(found->at == expected->second.at);
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

// Only the arrival of a key's latest put forgets it, even when an earlier
// put's arrival has the same time and comes due first (times that step
// back: the latest put waits in the queue behind a later time). Once the key
// is gone, its entry serves another key, which nothing left of the first one
// forgets.
TEST(ArrivalMap, OnlyTheLatestPutsArrivalForgetsAKey) {
  ArrivalMap<int> map;
  map.put("a", 1, Instant::from_ns(0));
  map.put("z", 2, Instant::from_ns(100));
  map.put("a", 3, Instant::from_ns(0));  // queued behind z
  map.put("y", 4, Instant::from_ns(200));
  map.forget_while([](Instant at) { return at <= Instant::from_ns(0); });  // a's first arrival only
  ASSERT_NE(map.find("a"), nullptr);
  EXPECT_EQ(map.find("a")->value, 3);
  map.forget_while([](Instant at) { return at <= Instant::from_ns(100); });  // z, then a's latest
  EXPECT_EQ(map.find("a"), nullptr);
  EXPECT_EQ(map.find("z"), nullptr);
  map.put("b", 5, Instant::from_ns(100));  // reuses a freed entry
  map.forget_while([](Instant at) { return at <= Instant::from_ns(100); });  // nothing due before y
  ASSERT_NE(map.find("b"), nullptr);
  EXPECT_EQ(map.find("b")->value, 5);
  EXPECT_EQ(map.size(), 2u);  // b and y
  map.forget_while([](Instant at) { return at <= Instant::from_ns(200); });
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
