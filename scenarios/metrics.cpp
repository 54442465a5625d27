#include "scenarios/metrics.hpp"

#include <algorithm>

#include "models/dynamo/store.hpp"

namespace leaseproof::scenarios {

nlohmann::json dynamodb_metrics(const models::DynamoStore& store, Duration simulated) {
  nlohmann::json tables = nlohmann::json::object();
  for (const auto& [name, accounting] : store.all_accounting()) {
    nlohmann::json indexes = nlohmann::json::object();
    for (const auto& [index, units] : accounting.indexes) {
      indexes[index] = {{"wcu", units.write_units}, {"rcu", static_cast<double>(units.read_half_units) / 2}};
    }
    tables[name] = {{"wcu", accounting.table.write_units},
                    {"rcu", static_cast<double>(accounting.table.read_half_units) / 2},
                    {"indexes", indexes},
                    {"requests",
                     {{"GetItem", accounting.get_item},
                      {"PutItem", accounting.put_item},
                      {"UpdateItem", accounting.update_item},
                      {"DeleteItem", accounting.delete_item},
                      {"Query", accounting.query},
                      {"BatchWriteItem", accounting.batch_write_item},
                      {"TransactWriteItems", accounting.transact_write_items},
                      {"Scan", accounting.scan}}},
                    {"throttled", accounting.throttled_requests},
                    {"conditional_check_failures", accounting.conditional_check_failures}};
  }
  return {{"tables", tables}, {"simulated_s", static_cast<double>(simulated.ns()) / 1e9}};
}

const std::vector<double>& histogram_edges_ms() {
  // Seconds: 0, sub-second steps, then round minutes up to a day.
  static const std::vector<double> edges = [] {
    std::vector<double> out;
    for (const double s : {0.0, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1200.0,
                           1800.0, 3600.0, 7200.0, 21600.0, 86400.0}) {
      out.push_back(s * 1000);
    }
    return out;
  }();
  return edges;
}

nlohmann::json histogram_ms(const std::vector<double>& samples) {
  const std::vector<double>& edges = histogram_edges_ms();
  std::vector<uint64_t> counts(edges.size() + 1, 0);
  for (const double sample : samples) {
    ++counts[static_cast<size_t>(std::lower_bound(edges.begin(), edges.end(), sample) - edges.begin())];
  }
  return counts;
}

}  // namespace leaseproof::scenarios
