#pragma once
// Durations in summary lines, rounded to what a person reads: milliseconds,
// or microseconds under a millisecond (a nonzero figure never reads as 0s).
// Violations, the trace and the JSON reports keep exact values.

#include <cstdint>

#include "base/time.hpp"

namespace leaseproof::properties {

inline Duration for_reading(Duration d) {
  const int64_t ns = d.ns();
  const int64_t magnitude = ns < 0 ? -ns : ns;
  const int64_t unit = magnitude >= 1'000'000 ? 1'000'000 : 1'000;
  const int64_t half = unit / 2;
  const int64_t rounded = (magnitude + half) / unit * unit;  // half away from zero
  return Duration::from_ns(ns < 0 ? -rounded : rounded);
}

}  // namespace leaseproof::properties
