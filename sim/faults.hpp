#pragma once
// Named fault sites, BUGGIFY style. A site is declared once per run; whether
// it is enabled, and how often it then fires, is drawn from the run's seed and
// the site's name, so the set of enabled sites is part of the printed options
// and a seed always enables the same ones. Each site fires from its own
// generator: adding a site or a call never shifts another site's draws.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/ratio.hpp"
#include "sim/prng.hpp"

namespace leaseproof::sim {

struct FaultSiteId {
  uint32_t index = UINT32_MAX;
};

struct FaultSiteSpec {
  std::string name;
  Ratio enable_chance = Ratio{1, 2};
  // The firing ratio of an enabled site is one of these, chosen by the seed.
  std::vector<Ratio> fire_choices = {Ratio{1, 100}, Ratio{1, 10}, Ratio{1, 2}};
};

class FaultSites {
 public:
  struct Site {
    std::string name;
    bool enabled = false;
    Ratio fire_chance;
    uint64_t reached = 0;
    uint64_t fired = 0;
    Prng prng{0};
  };

  explicit FaultSites(uint64_t root_seed) : root_seed_(root_seed) {}

  FaultSiteId declare(const FaultSiteSpec& spec);
  // Forces a declared site on (with the given ratio) or off; for tests and for
  // scenarios that pin a fault.
  void force(FaultSiteId id, bool enabled, Ratio fire_chance);

  // Counts the visit; true when the site is enabled, the faults have not
  // healed, and its coin says fire.
  bool reach(FaultSiteId id);
  // From now on no site fires: a scenario's faults have healed and what
  // follows is its fault-free liveness phase. What each site was drawn to do
  // stays in describe().
  void heal() { healed_ = true; }

  const Site& site(FaultSiteId id) const { return sites_.at(id.index); }
  std::span<const Site> sites() const { return sites_; }
  // "name=off" or "name=on@1/10", one per site, in declaration order.
  std::string describe() const;

 private:
  uint64_t root_seed_;
  std::vector<Site> sites_;
  bool healed_ = false;
};

}  // namespace leaseproof::sim
