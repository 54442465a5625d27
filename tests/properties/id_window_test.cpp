#include "properties/sim_invariants.hpp"

#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace leaseproof::properties {
namespace {

// Any sequence of inserts and erases, ascending or not, behaves as std::set.
RC_GTEST_PROP(IdWindow, BehavesAsASetUnderAnyOperations, ()) {
  const auto ops = *rc::gen::container<std::vector<std::pair<bool, uint64_t>>>(
      rc::gen::pair(rc::gen::arbitrary<bool>(), rc::gen::inRange<uint64_t>(0, 40)));
  IdWindow window;
  std::set<uint64_t> model;
  for (const auto& [insert, id] : ops) {
    if (insert) {
      window.insert(id);
      model.insert(id);
    } else {
      RC_ASSERT(window.erase(id) == (model.erase(id) > 0));
    }
    for (uint64_t probe = 0; probe < 40; ++probe) RC_ASSERT(window.contains(probe) == model.contains(probe));
  }
}

TEST(IdWindow, ForgetsErasedIdsAndTakesIdsBelowTheWindow) {
  IdWindow window;
  window.insert(10);
  window.insert(11);
  window.insert(13);
  EXPECT_TRUE(window.erase(10));
  EXPECT_FALSE(window.erase(10));  // erased once only
  window.insert(4);                // below the window's base
  EXPECT_TRUE(window.contains(4));
  EXPECT_FALSE(window.contains(12));
  EXPECT_TRUE(window.erase(4));
  EXPECT_TRUE(window.erase(11));
  EXPECT_TRUE(window.erase(13));
  EXPECT_FALSE(window.contains(13));
}

// Long runs: the consumed front is dropped in bulk (first phase: every id
// leaves soon), and an id that stays in flight keeps the window open while
// later ones come and go (second phase).
TEST(IdWindow, DropsTheConsumedFrontAndKeepsALongLivedId) {
  IdWindow window;
  std::set<uint64_t> model;
  const uint64_t long_lived = 20'001;
  for (uint64_t id = 1; id <= 30'000; ++id) {
    window.insert(id);
    model.insert(id);
    if (id > 3 && id - 3 != long_lived) {
      EXPECT_TRUE(window.erase(id - 3));
      model.erase(id - 3);
    }
    if (id % 997 == 0) {
      for (uint64_t probe = id - 20; probe <= id + 2; ++probe) {
        EXPECT_EQ(window.contains(probe), model.contains(probe)) << probe;
      }
    }
  }
  EXPECT_TRUE(window.contains(long_lived));
  EXPECT_FALSE(window.contains(long_lived - 1));
  EXPECT_TRUE(window.erase(long_lived));
  EXPECT_FALSE(window.contains(long_lived));
  EXPECT_TRUE(window.contains(29'999));
}

}  // namespace
}  // namespace leaseproof::properties
