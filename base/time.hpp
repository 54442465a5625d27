#pragma once
// Time as values: a Duration is a signed count of nanoseconds, an Instant is a
// point on one particular clock's axis (true time, a node's wall clock, or a
// node's monotonic clock). Both are int64 nanoseconds; arithmetic is exact.
// Which clock an Instant belongs to is the holder's business: the types keep
// durations and points apart, not clocks apart.

#include <compare>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace leaseproof {

class Duration {
 public:
  constexpr Duration() = default;

  static constexpr Duration from_ns(int64_t ns) { return Duration{ns}; }
  static constexpr Duration from_us(int64_t us) { return Duration{us * 1'000}; }
  static constexpr Duration from_ms(int64_t ms) { return Duration{ms * 1'000'000}; }
  static constexpr Duration from_s(int64_t s) { return Duration{s * 1'000'000'000}; }
  static constexpr Duration from_min(int64_t m) { return from_s(m * 60); }
  static constexpr Duration from_h(int64_t h) { return from_s(h * 3600); }
  static constexpr Duration zero() { return Duration{0}; }
  static constexpr Duration max() { return Duration{std::numeric_limits<int64_t>::max()}; }

  constexpr int64_t ns() const { return ns_; }
  constexpr int64_t us() const { return ns_ / 1'000; }  // truncates toward zero
  constexpr int64_t ms() const { return ns_ / 1'000'000; }
  constexpr int64_t s() const { return ns_ / 1'000'000'000; }

  constexpr bool is_negative() const { return ns_ < 0; }
  constexpr bool is_zero() const { return ns_ == 0; }

  constexpr Duration operator+(Duration other) const { return Duration{ns_ + other.ns_}; }
  constexpr Duration operator-(Duration other) const { return Duration{ns_ - other.ns_}; }
  constexpr Duration operator-() const { return Duration{-ns_}; }
  constexpr Duration operator*(int64_t factor) const { return Duration{ns_ * factor}; }
  constexpr Duration operator/(int64_t divisor) const { return Duration{ns_ / divisor}; }
  constexpr int64_t operator/(Duration other) const { return ns_ / other.ns_; }
  constexpr Duration operator%(Duration other) const { return Duration{ns_ % other.ns_}; }
  constexpr Duration& operator+=(Duration other) { ns_ += other.ns_; return *this; }
  constexpr Duration& operator-=(Duration other) { ns_ -= other.ns_; return *this; }

  constexpr auto operator<=>(const Duration&) const = default;

 private:
  constexpr explicit Duration(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

constexpr Duration operator*(int64_t factor, Duration d) { return d * factor; }

class Instant {
 public:
  constexpr Instant() = default;
  static constexpr Instant from_ns(int64_t ns) { return Instant{ns}; }
  static constexpr Instant from_ms(int64_t ms) { return Instant{ms * 1'000'000}; }
  static constexpr Instant zero() { return Instant{0}; }
  static constexpr Instant max() { return Instant{std::numeric_limits<int64_t>::max()}; }

  constexpr int64_t ns() const { return ns_; }
  constexpr int64_t ms() const { return floor_div(ns_, 1'000'000); }
  constexpr Duration since_zero() const { return Duration::from_ns(ns_); }

  constexpr Instant operator+(Duration d) const { return Instant{ns_ + d.ns()}; }
  constexpr Instant operator-(Duration d) const { return Instant{ns_ - d.ns()}; }
  constexpr Duration operator-(Instant other) const { return Duration::from_ns(ns_ - other.ns_); }
  constexpr Instant& operator+=(Duration d) { ns_ += d.ns(); return *this; }

  constexpr auto operator<=>(const Instant&) const = default;

 private:
  constexpr explicit Instant(int64_t ns) : ns_(ns) {}
  static constexpr int64_t floor_div(int64_t a, int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
  }
  int64_t ns_ = 0;
};

// Human formatting, exact and short: "0s", "250ms", "1.5s", "2m30s", "1h0m5s",
// "-3.000001ms", "17ns". Sub-second parts keep every significant digit.
std::string format_duration(Duration d);

// Parses what format_duration writes and a little more: an optional '-', then
// one or more <number><unit> parts, number = digits with an optional fraction,
// unit in {ns, us, ms, s, m, h}, e.g. "90s", "1.5s", "10m", "1h30m", "250ms".
// A bare "0" is accepted. Returns nullopt on anything else (including overflow
// and fractions finer than a nanosecond).
std::optional<Duration> parse_duration(std::string_view text);

namespace literals {
constexpr Duration operator""_ns(unsigned long long v) { return Duration::from_ns(static_cast<int64_t>(v)); }
constexpr Duration operator""_us(unsigned long long v) { return Duration::from_us(static_cast<int64_t>(v)); }
constexpr Duration operator""_ms(unsigned long long v) { return Duration::from_ms(static_cast<int64_t>(v)); }
constexpr Duration operator""_s(unsigned long long v) { return Duration::from_s(static_cast<int64_t>(v)); }
constexpr Duration operator""_min(unsigned long long v) { return Duration::from_min(static_cast<int64_t>(v)); }
constexpr Duration operator""_h(unsigned long long v) { return Duration::from_h(static_cast<int64_t>(v)); }
}  // namespace literals

// One node's clock readings at one moment, as the sans-IO cores take them.
struct ClockReading {
  Instant wall;       // Unix-epoch ns; may step
  Instant monotonic;  // never steps
};

}  // namespace leaseproof

template <>
struct fmt::formatter<leaseproof::Duration> : fmt::formatter<std::string_view> {
  auto format(leaseproof::Duration d, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(leaseproof::format_duration(d), ctx);
  }
};

// An Instant prints as its offset from its clock's zero, e.g. "@1m30s".
template <>
struct fmt::formatter<leaseproof::Instant> : fmt::formatter<std::string_view> {
  auto format(leaseproof::Instant t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format("@" + leaseproof::format_duration(t.since_zero()),
                                                    ctx);
  }
};
