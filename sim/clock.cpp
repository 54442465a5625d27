#include "sim/clock.hpp"

#include <algorithm>
#include <cstdint>

#include "base/assert.hpp"
#include "base/uint128.hpp"

namespace leaseproof::sim {
namespace {
constexpr int64_t kPpm = 1'000'000;

template <class Int>
Int floor_div_in(Int numerator, Int denominator) {
  Int quotient = numerator / denominator;
  if ((numerator % denominator != 0) && ((numerator < 0) != (denominator < 0))) --quotient;
  return quotient;
}

// Every clock reading divides; a 128-bit division is a libgcc call, and the
// numerator fits 64 bits for any run shorter than a few centuries of drift.
int64_t floor_div(int128 numerator, int64_t denominator) {
  if (numerator >= INT64_MIN && numerator <= INT64_MAX) {
    return floor_div_in<int64_t>(static_cast<int64_t>(numerator), denominator);
  }
  return static_cast<int64_t>(floor_div_in<int128>(numerator, denominator));
}
}  // namespace

NodeClock::NodeClock(ClockModel model) : model_(std::move(model)) {
  LP_ASSERT_LE(model_.drift_ppm, kDriftPpmMax);
  LP_ASSERT_GE(model_.drift_ppm, -kDriftPpmMax);
  std::stable_sort(model_.steps.begin(), model_.steps.end(),
                   [](const ClockStep& a, const ClockStep& b) { return a.at < b.at; });
}

Duration NodeClock::drift(Instant true_now) const {
  if (model_.drift_ppm == 0) return Duration::zero();  // most clocks: no division at all
  if (!drift_known_ || true_now != drift_at_) {
    drift_ = Duration::from_ns(floor_div(static_cast<int128>(true_now.ns()) * model_.drift_ppm, kPpm));
    drift_at_ = true_now;
    drift_known_ = true;
  }
  return drift_;
}

Duration NodeClock::steps_until(Instant true_now) const {
  Duration total = Duration::zero();
  for (const ClockStep& step : model_.steps) {
    if (step.at > true_now) break;
    total += step.jump;
  }
  return total;
}

Instant NodeClock::wall(Instant true_now) const {
  return kWallEpoch + true_now.since_zero() + model_.offset + drift(true_now) + steps_until(true_now);
}

Instant NodeClock::monotonic(Instant true_now) const {
  return model_.monotonic_origin + true_now.since_zero() + drift(true_now);
}

Duration NodeClock::true_delay_for(Duration monotonic_delay) const {
  LP_ASSERT(!monotonic_delay.is_negative());
  if (monotonic_delay.is_zero()) return Duration::zero();
  // ceil(d * 1e6 / (1e6 + ppm)), plus one nanosecond for the floor in drift().
  const int64_t rate = kPpm + model_.drift_ppm;
  const int128 scaled = static_cast<int128>(monotonic_delay.ns()) * kPpm;
  return Duration::from_ns(static_cast<int64_t>((scaled + rate - 1) / rate) + 1);
}

}  // namespace leaseproof::sim
