#pragma once
// The cores' RandomSource in a real process: a 64-bit Mersenne Twister,
// seeded by the caller (a reproducible run of jitter) or, with seed 0, from
// std::random_device.

#include <cstdint>
#include <random>

#include "base/assert.hpp"
#include "base/random.hpp"

namespace leaseproof::runtime {

class OsRandom final : public RandomSource {
 public:
  explicit OsRandom(uint64_t seed) : engine_(seed != 0 ? seed : std::random_device{}()) {}
  uint64_t below(uint64_t bound) override {
    LP_ASSERT_GT(bound, 0u);
    return std::uniform_int_distribution<uint64_t>{0, bound - 1}(engine_);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace leaseproof::runtime
