#include "sim/faults.hpp"

#include <fmt/format.h>

namespace leaseproof::sim {

FaultSiteId FaultSites::declare(const FaultSiteSpec& spec) {
  for (const Site& existing : sites_) {
    LP_ASSERT_MSG(existing.name != spec.name, "fault site '{}' declared twice", spec.name);
  }
  LP_ASSERT(!spec.fire_choices.empty());
  Prng choose{derive_seed(root_seed_, "fault-site/" + spec.name)};
  Site site;
  site.name = spec.name;
  site.enabled = choose.chance(spec.enable_chance);
  site.fire_chance = spec.fire_choices[choose.index(spec.fire_choices.size())];
  LP_ASSERT(site.fire_chance.is_probability());
  site.prng = Prng{derive_seed(root_seed_, "fault-fire/" + spec.name)};
  sites_.push_back(std::move(site));
  return FaultSiteId{static_cast<uint32_t>(sites_.size() - 1)};
}

void FaultSites::force(FaultSiteId id, bool enabled, Ratio fire_chance) {
  LP_ASSERT(fire_chance.is_probability());
  Site& site = sites_.at(id.index);
  site.enabled = enabled;
  site.fire_chance = fire_chance;
}

bool FaultSites::reach(FaultSiteId id) {
  Site& site = sites_.at(id.index);
  ++site.reached;
  if (!site.enabled || healed_) return false;
  if (!site.prng.chance(site.fire_chance)) return false;
  ++site.fired;
  return true;
}

std::string FaultSites::describe() const {
  std::string text;
  for (const Site& site : sites_) {
    if (!text.empty()) text += ' ';
    text += site.enabled ? fmt::format("{}=on@{}", site.name, site.fire_chance) : site.name + "=off";
  }
  return text;
}

}  // namespace leaseproof::sim
