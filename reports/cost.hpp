#pragma once
// DynamoDB's monthly cost from a run's average consumed capacity. Prices are
// inputs (they change: on-demand halved in November 2024), with two presets:
// `current` and `articles` (the prices behind the articles' $325 and $47).
// docs/reports.md states the model and its sources.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace leaseproof::report {

struct Prices {
  std::string name;
  double on_demand_write_per_million = 0;  // $ per million write request units
  double on_demand_read_per_million = 0;   // $ per million read request units
  double provisioned_wcu_hour = 0;         // $ per WCU provisioned for an hour
  double provisioned_rcu_hour = 0;         // $ per RCU provisioned for an hour
  double hours_per_month = 0;
  std::string source;  // where the figures come from, for the reports
};

// "current" or "articles"; nullopt for any other name.
std::optional<Prices> price_preset(std::string_view name);
std::vector<std::string> price_preset_names();

// Average consumed capacity: units per second of the simulated time.
struct Rates {
  double wcu_per_s = 0;
  double rcu_per_s = 0;
};

// Dollars a month. On demand: every consumed unit is a request unit.
// Provisioned: capacity equal to the average rate, all month (no headroom
// for peaks and no auto-scaling lag: a floor, said so in the reports).
struct MonthlyCost {
  double on_demand_write = 0;
  double on_demand_read = 0;
  double provisioned_write = 0;
  double provisioned_read = 0;

  double on_demand() const { return on_demand_write + on_demand_read; }
  double provisioned() const { return provisioned_write + provisioned_read; }
  MonthlyCost& operator+=(const MonthlyCost& other);
};

MonthlyCost monthly_cost(Rates rates, const Prices& prices);

}  // namespace leaseproof::report
