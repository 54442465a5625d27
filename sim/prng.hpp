#pragma once
// The simulator's only source of randomness.
//
// Generator: xoshiro256** (Blackman and Vigna, 2018), 256-bit state, seeded by
// four outputs of splitmix64. Both are fully specified by their integer
// arithmetic, so a seed gives the same stream on every compiler, standard
// library and optimisation level. Distributions are our own and use integers
// only (no std::*_distribution, whose outputs differ between libraries, and no
// floating point).
//
// Sub-seeds: every component draws from its own Prng, seeded by
// derive_seed(root, "component/name"), so adding draws in one component never
// shifts another component's stream.

#include <cstdint>
#include <string_view>

#include "base/assert.hpp"
#include "base/random.hpp"
#include "base/ratio.hpp"
#include "base/time.hpp"
#include "base/uint128.hpp"

namespace leaseproof::sim {

// One step of splitmix64 (Steele, Lea, Flood 2014): advances state, returns a
// well-mixed output.
constexpr uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ULL;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// FNV-1a over the name, then mixed with the root through splitmix64. Different
// names give unrelated seeds; the same (root, name) always gives the same seed.
constexpr uint64_t derive_seed(uint64_t root, std::string_view name) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (char c : name) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001B3ULL;
  }
  uint64_t state = root ^ splitmix64_next(hash);
  return splitmix64_next(state);
}

class Prng {
 public:
  explicit Prng(uint64_t seed) {
    uint64_t state = seed;
    for (uint64_t& word : s_) word = splitmix64_next(state);
  }

  // A generator in an exact state (known-answer tests against the reference).
  static Prng from_state(uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3) {
    Prng prng{0};
    prng.s_[0] = s0;
    prng.s_[1] = s1;
    prng.s_[2] = s2;
    prng.s_[3] = s3;
    return prng;
  }

  // A child generator for a named sub-component.
  Prng fork(std::string_view name) { return Prng{derive_seed(next_u64(), name)}; }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, bound), unbiased (Lemire's multiply-and-reject method).
  uint64_t below(uint64_t bound) {
    LP_ASSERT_GT(bound, 0u);
    uint128 product = static_cast<uint128>(next_u64()) * bound;
    auto low = static_cast<uint64_t>(product);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        product = static_cast<uint128>(next_u64()) * bound;
        low = static_cast<uint64_t>(product);
      }
    }
    return static_cast<uint64_t>(product >> 64);
  }

  // Uniform in the half-open range [low, high).
  int64_t uniform(int64_t low, int64_t high) {
    LP_ASSERT_LT(low, high);
    const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
    return static_cast<int64_t>(static_cast<uint64_t>(low) + below(span));
  }

  // Uniform in the closed range [low, high] (durations: both ends reachable).
  Duration uniform_duration(Duration low, Duration high) {
    LP_ASSERT_LE(low, high);
    if (low == high) return low;
    const uint64_t span = static_cast<uint64_t>(high.ns()) - static_cast<uint64_t>(low.ns());
    if (span == UINT64_MAX) return Duration::from_ns(static_cast<int64_t>(next_u64()));
    return Duration::from_ns(static_cast<int64_t>(static_cast<uint64_t>(low.ns()) + below(span + 1)));
  }

  // True with probability numerator/denominator, exactly.
  bool chance(Ratio probability) {
    LP_ASSERT_MSG(probability.is_probability(), "chance({}) is not a probability", probability);
    if (probability.numerator == 0) return false;
    return below(probability.denominator) < probability.numerator;
  }

  // A uniformly chosen index into a container of `size` elements.
  size_t index(size_t size) { return static_cast<size_t>(below(size)); }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// A latency with a slow tail: base + uniform[0, jitter] and, with probability
// tail_chance, an extra uniform[0, tail_max] on top. Integers only.
struct LatencyDistribution {
  Duration base = Duration::from_ms(1);
  Duration jitter = Duration::zero();
  Ratio tail_chance = Ratio::zero();
  Duration tail_max = Duration::zero();

  Duration sample(Prng& prng) const {
    Duration latency = base + prng.uniform_duration(Duration::zero(), jitter);
    if (prng.chance(tail_chance)) latency += prng.uniform_duration(Duration::zero(), tail_max);
    return latency;
  }
  // The largest value sample() can return.
  Duration max() const { return base + jitter + (tail_chance.is_zero() ? Duration::zero() : tail_max); }
};

// The randomness core/ asks for (jitter), from a generator of its own: for
// code that runs a core outside a simulated node (tests, measurements). On a
// node, models::NodeRandom draws from the node's generator instead.
class PrngRandomSource final : public RandomSource {
 public:
  explicit PrngRandomSource(uint64_t seed) : prng_(seed) {}
  uint64_t below(uint64_t bound) override { return prng_.below(bound); }

 private:
  Prng prng_;
};

}  // namespace leaseproof::sim
