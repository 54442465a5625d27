#include <gtest/gtest.h>

#include <vector>

#include "sim/scheduler.hpp"

namespace leaseproof::sim {
namespace {

using namespace literals;

TEST(Scheduler, RunsInTimeOrderAndFifoAmongEqualTimes) {
  Scheduler scheduler;
  std::vector<int> order;
  scheduler.at(Instant::zero() + 2_s, [&] { order.push_back(3); });
  scheduler.at(Instant::zero() + 1_s, [&] { order.push_back(1); });
  scheduler.at(Instant::zero() + 1_s, [&] { order.push_back(2); });
  scheduler.run_until_idle(100);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(scheduler.now(), Instant::zero() + 2_s);
}

TEST(Scheduler, CancelledEventsNeverRun) {
  Scheduler scheduler;
  bool ran = false;
  TimerId id = scheduler.after(1_s, [&] { ran = true; });
  EXPECT_EQ(scheduler.pending(), 1u);
  EXPECT_TRUE(scheduler.cancel(id));
  EXPECT_FALSE(scheduler.cancel(id));  // twice is a no-op
  EXPECT_EQ(scheduler.pending(), 0u);
  EXPECT_EQ(scheduler.run_until_idle(10), 0u);
  EXPECT_FALSE(ran);
  EXPECT_EQ(scheduler.counters().cancelled, 1u);
}

TEST(Scheduler, ASlotReusedAfterCancelDoesNotMatchTheOldId) {
  Scheduler scheduler;
  TimerId old_id = scheduler.after(1_s, [] {});
  scheduler.cancel(old_id);
  scheduler.run_until_idle(10);  // the stale heap entry is discarded, the slot freed
  bool ran = false;
  TimerId new_id = scheduler.after(1_s, [&] { ran = true; });
  EXPECT_EQ(new_id.slot, old_id.slot);
  EXPECT_FALSE(scheduler.cancel(old_id));
  scheduler.run_until_idle(10);
  EXPECT_TRUE(ran);
}

TEST(Scheduler, RunUntilStopsAtTheDeadlineAndAdvancesTime) {
  Scheduler scheduler;
  int ran = 0;
  scheduler.at(Instant::zero() + 1_s, [&] { ++ran; });
  scheduler.at(Instant::zero() + 5_s, [&] { ++ran; });
  scheduler.at(Instant::zero() + 9_s, [&] { ++ran; });
  EXPECT_EQ(scheduler.run_until(Instant::zero() + 5_s), 2u);  // inclusive
  EXPECT_EQ(scheduler.now(), Instant::zero() + 5_s);
  EXPECT_EQ(scheduler.next_event_time(), Instant::zero() + 9_s);
  EXPECT_EQ(ran, 2);
}

TEST(Scheduler, EventsMayScheduleEventsAtTheSameTime) {
  Scheduler scheduler;
  std::vector<int> order;
  scheduler.after(1_s, [&] {
    order.push_back(1);
    scheduler.after(Duration::zero(), [&] { order.push_back(3); });
  });
  scheduler.after(1_s, [&] { order.push_back(2); });
  EXPECT_EQ(scheduler.run_steps(2), 2u);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  scheduler.run_until_idle(10);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(scheduler.counters().executed, 3u);
}

TEST(SchedulerDeathTest, SchedulingInThePastIsABug) {
  Scheduler scheduler;
  scheduler.after(2_s, [] {});
  scheduler.run_until_idle(1);
  EXPECT_DEATH(scheduler.at(Instant::zero() + 1_s, [] {}), "when >= now_");
}

}  // namespace
}  // namespace leaseproof::sim
