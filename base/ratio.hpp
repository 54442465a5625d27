#pragma once
// A Ratio is an exact fraction of two unsigned integers. Probabilities are
// Ratios, never floats, so that a coin flip gives the same answer on every
// compiler and optimisation level (TigerBeetle's prng.zig, for the same reason).

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "base/uint128.hpp"

namespace leaseproof {

struct Ratio {
  uint64_t numerator = 0;
  uint64_t denominator = 1;

  constexpr Ratio() = default;
  constexpr Ratio(uint64_t numerator_, uint64_t denominator_)
      : numerator(numerator_), denominator(denominator_) {
    LP_ASSERT_MSG(denominator_ != 0, "Ratio with zero denominator ({}/0)", numerator_);
  }

  static constexpr Ratio zero() { return Ratio{0, 1}; }
  static constexpr Ratio one() { return Ratio{1, 1}; }
  static constexpr Ratio percent(uint64_t p) { return Ratio{p, 100}; }

  constexpr bool is_zero() const { return numerator == 0; }
  // A probability is a ratio in [0, 1].
  constexpr bool is_probability() const { return numerator <= denominator; }

  // Exact comparison by cross-multiplication in 128 bits.
  friend constexpr std::strong_ordering operator<=>(const Ratio& a, const Ratio& b) {
    const uint128 left = static_cast<uint128>(a.numerator) * b.denominator;
    const uint128 right = static_cast<uint128>(b.numerator) * a.denominator;
    return left <=> right;
  }
  friend constexpr bool operator==(const Ratio& a, const Ratio& b) { return (a <=> b) == 0; }
};

// "3/4" (also "0", "1", "25%"). Nullopt on a malformed text or a zero denominator.
std::optional<Ratio> parse_ratio(std::string_view text);

}  // namespace leaseproof

template <>
struct fmt::formatter<leaseproof::Ratio> : fmt::formatter<std::string_view> {
  auto format(leaseproof::Ratio r, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(fmt::format("{}/{}", r.numerator, r.denominator),
                                                    ctx);
  }
};
