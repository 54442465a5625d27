#pragma once
// Exponential backoff with full jitter (AWS Architecture Blog, "Exponential
// Backoff And Jitter": sleep = uniform(0, min(cap, base * 2^attempt))). The
// ceiling doubles step by step and never overflows; the draw comes from the
// injected RandomSource, so a simulation replays it exactly.

#include <algorithm>
#include <cstdint>

#include "base/assert.hpp"
#include "base/random.hpp"
#include "base/time.hpp"

namespace leaseproof {

// min(cap, base * 2^doublings).
inline Duration backoff_ceiling(Duration base, uint32_t doublings, Duration cap) {
  Duration ceiling = base;
  for (uint32_t i = 0; i < doublings && ceiling < cap; ++i) ceiling = ceiling > cap / 2 ? cap : ceiling * 2;
  return std::min(ceiling, cap);
}

// Uniform in [0, ceiling], both ends included.
inline Duration full_jitter(RandomSource& random, Duration ceiling) {
  LP_ASSERT(!ceiling.is_negative());
  return Duration::from_ns(static_cast<int64_t>(random.below(static_cast<uint64_t>(ceiling.ns()) + 1)));
}

}  // namespace leaseproof
