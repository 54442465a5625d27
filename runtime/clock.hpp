#pragma once
// The core's clock readings in a real process: its monotonic Instant is
// std::chrono::steady_clock's count of nanoseconds, and its wall time
// std::chrono::system_clock's nanoseconds since 1970. Timers armed at a core's
// next_deadline() convert back with to_steady().

#include <chrono>
#include <cstdint>

#include "base/time.hpp"

namespace leaseproof::runtime {

inline Instant monotonic_now() {
  return Instant::from_ns(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

inline int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Instant::max() (no deadline) maps to steady_clock's time_point::max().
inline std::chrono::steady_clock::time_point to_steady(Instant at) {
  if (at == Instant::max()) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::time_point{std::chrono::nanoseconds{at.ns()}};
}

inline std::chrono::nanoseconds to_chrono(Duration d) { return std::chrono::nanoseconds{d.ns()}; }

}  // namespace leaseproof::runtime
