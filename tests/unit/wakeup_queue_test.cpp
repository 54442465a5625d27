#include "base/wakeup_queue.hpp"

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace leaseproof {
namespace {

// (due time, name): few distinct values, so pushes repeat entries often and
// equal times are ordered by the second member.
using Entry = std::pair<int, int>;
struct EntryLess {
  bool operator()(const Entry& a, const Entry& b) const { return a < b; }
};

// A queue driven like the lease manager drives its wakeups: pushes, pops of
// the least, and pushes made right after a pop (of the entry just popped,
// too). Each step, what top() shows must be what a std::set shows.
RC_GTEST_PROP(WakeupQueue, ShowsWhatASetDrainedFromItsLeastEntryShows, ()) {
  const auto steps = *rc::gen::container<std::vector<std::pair<uint8_t, Entry>>>(
      rc::gen::pair(rc::gen::inRange<uint8_t>(0, 3),
                    rc::gen::pair(rc::gen::inRange(0, 6), rc::gen::inRange(0, 3))));
  WakeupQueue<Entry, EntryLess> queue;
  std::set<Entry> set;
  for (const auto& [op, entry] : steps) {
    if (op == 0 || set.empty()) {
      queue.push(entry);
      set.insert(entry);
    } else {
      const Entry least = queue.top();
      queue.pop();
      RC_ASSERT(least == *set.begin());
      set.erase(set.begin());
      if (op == 2) {  // the popped entry comes straight back
        queue.push(least);
        set.insert(least);
      }
    }
    RC_ASSERT(queue.empty() == set.empty());
    RC_ASSERT(queue.size() >= set.size());
    if (!set.empty()) RC_ASSERT(queue.top() == *set.begin());
  }
  std::vector<Entry> drained;
  while (!queue.empty()) {
    drained.push_back(queue.top());
    queue.pop();
  }
  RC_ASSERT(drained == std::vector<Entry>(set.begin(), set.end()));
}

TEST(WakeupQueue, ACopyPushedTwiceComesOutOnce) {
  WakeupQueue<Entry, EntryLess> queue;
  queue.push({5, 1});
  queue.push({3, 2});
  queue.push({5, 1});
  queue.push({3, 2});
  queue.push({5, 0});
  EXPECT_EQ(queue.size(), 5u);  // copies are held...
  std::vector<Entry> drained;
  while (!queue.empty()) {
    drained.push_back(queue.top());
    queue.pop();
  }
  const std::vector<Entry> expected{{3, 2}, {5, 0}, {5, 1}};  // ...and come out once each
  EXPECT_EQ(drained, expected);
}

}  // namespace
}  // namespace leaseproof
