#pragma once
// Randomness as an injected dependency: core/ never owns a generator. The
// simulator passes one derived from the run's seed; a real worker passes one
// seeded from the operating system.

#include <cstdint>

namespace leaseproof {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // Uniform in [0, bound); bound > 0.
  virtual uint64_t below(uint64_t bound) = 0;
};

// Fault sites reached from production code: a no-op in production, wired to
// the simulator's named fault sites in a simulation (FoundationDB's BUGGIFY).
class FaultHook {
 public:
  virtual ~FaultHook() = default;
  virtual bool fire(const char* site) { (void)site; return false; }
};

}  // namespace leaseproof
