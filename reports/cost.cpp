#include "reports/cost.hpp"

namespace leaseproof::report {

namespace {

constexpr double kSecondsPerHour = 3600;
constexpr double kUnitsPerMillion = 1e6;

// Current list prices, us-east-1, standard table class: on-demand since
// 1 November 2024; provisioned unchanged. AWS bills a month as 730 hours.
Prices current_prices() {
  return Prices{"current", 0.625, 0.125, 0.00065, 0.00013, 730,
                "AWS DynamoDB pricing, us-east-1, standard table class, on-demand as of 1 Nov 2024 "
                "($0.625 per million WRU, $0.125 per million RRU); provisioned $0.00065 per WCU-hour, "
                "$0.00013 per RCU-hour; 730 hours a month"};
}

// The articles' figures: on-demand before November 2024, and a 30-day month
// (720 h), which is what makes 100 WCU/s come to $324 and $46.80.
Prices articles_prices() {
  return Prices{"articles", 1.25, 0.25, 0.00065, 0.00013, 720,
                "the articles (on-demand before 1 Nov 2024: $1.25 per million WRU, $0.25 per million RRU; "
                "provisioned $0.00065 per WCU-hour, $0.00013 per RCU-hour; a 30-day month, 720 hours)"};
}

}  // namespace

std::optional<Prices> price_preset(std::string_view name) {
  if (name == "current") return current_prices();
  if (name == "articles") return articles_prices();
  return std::nullopt;
}

std::vector<std::string> price_preset_names() { return {"current", "articles"}; }

MonthlyCost& MonthlyCost::operator+=(const MonthlyCost& other) {
  on_demand_write += other.on_demand_write;
  on_demand_read += other.on_demand_read;
  provisioned_write += other.provisioned_write;
  provisioned_read += other.provisioned_read;
  return *this;
}

MonthlyCost monthly_cost(Rates rates, const Prices& prices) {
  const double seconds = prices.hours_per_month * kSecondsPerHour;
  MonthlyCost cost;
  cost.on_demand_write = rates.wcu_per_s * seconds * prices.on_demand_write_per_million / kUnitsPerMillion;
  cost.on_demand_read = rates.rcu_per_s * seconds * prices.on_demand_read_per_million / kUnitsPerMillion;
  cost.provisioned_write = rates.wcu_per_s * prices.hours_per_month * prices.provisioned_wcu_hour;
  cost.provisioned_read = rates.rcu_per_s * prices.hours_per_month * prices.provisioned_rcu_hour;
  return cost;
}

}  // namespace leaseproof::report
