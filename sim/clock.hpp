#pragma once
// Per-node clocks. True time is the scheduler's; each node reads its own wall
// and monotonic clocks, derived from true time by a fixed model:
//
//   monotonic(t) = origin + t + drift(t)                       never steps
//   wall(t)      = wall_epoch + t + offset + drift(t) + steps   may jump either way
//   drift(t)     = floor(t * drift_ppm / 1e6)                   integer arithmetic
//
// drift_ppm is bounded by |drift_ppm| <= kDriftPpmMax, which keeps monotonic
// non-decreasing (a clock that ran backwards is not a clock).

#include <cstdint>
#include <vector>

#include "base/time.hpp"

namespace leaseproof::sim {

// 2026-01-01T00:00:00Z: true time zero as read by a perfect wall clock, so that
// wall readings look like ordinary Unix time (lease_expires_at_ms and friends).
inline constexpr Instant kWallEpoch = Instant::from_ms(1'767'225'600'000);

struct ClockStep {
  Instant at;     // true time of the jump
  Duration jump;  // added to the wall clock from then on; negative jumps go back
};

struct ClockModel {
  Duration offset = Duration::zero();
  int64_t drift_ppm = 0;
  std::vector<ClockStep> steps;  // any order; kept sorted by `at`
  Instant monotonic_origin = Instant::from_ns(1'000'000'000'000);  // "boot" reading
};

class NodeClock {
 public:
  static constexpr int64_t kDriftPpmMax = 100'000;  // 10%: far beyond any real oscillator

  NodeClock() = default;
  explicit NodeClock(ClockModel model);

  Instant wall(Instant true_now) const;
  Instant monotonic(Instant true_now) const;
  // The shortest true duration after which, from any starting point, the
  // monotonic reading has advanced by at least `monotonic_delay`.
  Duration true_delay_for(Duration monotonic_delay) const;
  // The wall steps at or before `true_now`, summed.
  Duration steps_until(Instant true_now) const;

  const ClockModel& model() const { return model_; }

 private:
  Duration drift(Instant true_now) const;
  ClockModel model_;
  // The last drift() computed: a node reads both clocks, often several times,
  // at one instant, and each reading divides. One World, one thread.
  mutable bool drift_known_ = false;
  mutable Instant drift_at_;
  mutable Duration drift_ = Duration::zero();
};

}  // namespace leaseproof::sim
