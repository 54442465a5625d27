#include <gtest/gtest.h>

#include <leaseproof/sim/clock.hpp>

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

TEST(NodeClockDeathTest, DriftBeyondTheBoundIsRejected) {
  ClockModel model;
  model.drift_ppm = NodeClock::kDriftPpmMax + 1;
  EXPECT_DEATH(NodeClock{model}, "drift_ppm");
}

}  // namespace
}  // namespace leaseproof::sim
