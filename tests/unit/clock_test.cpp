#include <gtest/gtest.h>

#include "sim/clock.hpp"

namespace leaseproof::sim {
namespace {

using namespace literals;

TEST(NodeClock, PerfectClockReadsTrueTimeFromTheEpoch) {
  NodeClock clock{ClockModel{}};
  const Instant t = Instant::zero() + 90_s;
  EXPECT_EQ(clock.wall(t), kWallEpoch + 90_s);
  EXPECT_EQ(clock.monotonic(t) - clock.monotonic(Instant::zero()), 90_s);
}

TEST(NodeClock, OffsetDriftAndStepsShapeWallTime) {
  ClockModel model;
  model.offset = 15_s;    // the articles' fast clock
  model.drift_ppm = 100;  // 100 us per second
  model.steps = {ClockStep{Instant::zero() + 60_s, -(2_s)}};
  NodeClock clock{model};
  EXPECT_EQ(clock.wall(Instant::zero() + 10_s), kWallEpoch + 10_s + 15_s + 1_ms);
  EXPECT_EQ(clock.wall(Instant::zero() + 60_s), kWallEpoch + 60_s + 15_s + 6_ms - 2_s);
  // Monotonic keeps the drift but never the step.
  EXPECT_EQ(clock.monotonic(Instant::zero() + 60_s) - clock.monotonic(Instant::zero()), 60_s + 6_ms);
}

TEST(NodeClock, TrueDelayCoversTheMonotonicDelayWhateverTheDrift) {
  for (int64_t ppm : {-NodeClock::kDriftPpmMax, -500L, 0L, 333L, NodeClock::kDriftPpmMax}) {
    ClockModel model;
    model.drift_ppm = ppm;
    NodeClock clock{model};
    for (Instant start : {Instant::zero(), Instant::zero() + 3_s + 7_ns, Instant::zero() + 1_h}) {
      const Duration wanted = 5_s;
      const Duration true_delay = clock.true_delay_for(wanted);
      EXPECT_GE(clock.monotonic(start + true_delay) - clock.monotonic(start), wanted) << ppm;
      // ...and not much more than needed (within a few ns of the exact rate).
      EXPECT_LE(clock.monotonic(start + true_delay) - clock.monotonic(start), wanted + 3_ns) << ppm;
    }
  }
}

TEST(NodeClock, DriftRoundsTowardMinusInfinityInBothWidths) {
  ClockModel slow;
  slow.drift_ppm = -333;
  NodeClock clock{slow};
  // -333 ppm of 1 ns is -0.000333 ns: the floor is -1 ns, not 0.
  EXPECT_EQ(clock.monotonic(Instant::from_ns(1)) - clock.monotonic(Instant::zero()), Duration::from_ns(0));
  EXPECT_EQ(clock.monotonic(Instant::from_ns(3'003)) - clock.monotonic(Instant::zero()), Duration::from_ns(3'002));  // -0.999999 -> -1
  // A product beyond 64 bits (8e18 ns x 1e5 ppm) takes the 128-bit path and
  // still divides exactly: drift is a tenth of true time.
  ClockModel fast;
  fast.drift_ppm = NodeClock::kDriftPpmMax;
  NodeClock far{fast};
  const Instant late = Instant::from_ns(8'000'000'000'000'000'007);
  EXPECT_EQ(far.monotonic(late) - far.monotonic(Instant::zero()), Duration::from_ns(8'800'000'000'000'000'007));
  ClockModel backwards;
  backwards.drift_ppm = -NodeClock::kDriftPpmMax;
  NodeClock behind{backwards};
  EXPECT_EQ(behind.monotonic(late) - behind.monotonic(Instant::zero()), Duration::from_ns(7'200'000'000'000'000'006));
}

TEST(NodeClockDeathTest, DriftBeyondTheBoundIsRejected) {
  ClockModel model;
  model.drift_ppm = NodeClock::kDriftPpmMax + 1;
  EXPECT_DEATH(NodeClock{model}, "drift_ppm");
}

}  // namespace
}  // namespace leaseproof::sim
