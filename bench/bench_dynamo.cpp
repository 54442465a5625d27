// The simulated DynamoDB in-process, and the same operations against dynalite
// on loopback (when LEASEPROOF_DYNALITE_ENDPOINT is set), for a side-by-side
// ratio:
//   export LEASEPROOF_DYNALITE_ENDPOINT=$(scripts/dynalite.sh start)
//   build/release/bench/leaseproof_bench --benchmark_filter=Dynamo

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>

#include <unistd.h>

#include <fmt/format.h>

#include "core/dynamo/codec.hpp"
#include "core/lease/requests.hpp"
#include "models/dynamo/store.hpp"
#include "runtime/aws/dynamo_http_client.hpp"
#include "sim/clock.hpp"

namespace leaseproof {
namespace {

constexpr int kConnections = 500;

lease::LeaseConfig bench_config(const std::string& table) {
  lease::LeaseConfig config;
  config.table.name = table;
  return config;
}

// A table of 500 leases, each owned by worker-1 at epoch 1.
std::vector<dynamo::Request> setup_requests(const lease::LeaseConfig& config) {
  std::vector<dynamo::Request> requests{lease::create_table_request(config)};
  for (int i = 0; i < kConnections; ++i) {
    const std::string connection = fmt::format("c{}", i);
    requests.push_back(lease::create_connection_request(config, connection, "wss://hub"));
    requests.push_back(lease::acquire_request(config, connection, "worker-1", 1'767'225'600'000, {}));
  }
  return requests;
}

// The heartbeat: conditional on owner, epoch and desired state.
dynamo::Request renew(const lease::LeaseConfig& config, int i) {
  return lease::renew_request(config, fmt::format("c{}", i % kConnections), "worker-1", 1, 1'767'225'600'000 + i);
}

void BM_DynamoModelConditionalUpdate(benchmark::State& state) {
  const lease::LeaseConfig config = bench_config("connections");
  models::DynamoStoreOptions options = models::DynamoStoreOptions::faults_off();
  models::DynamoStore store{options, 1};
  Instant now = sim::kWallEpoch;
  for (const auto& request : setup_requests(config)) LP_ASSERT(store.apply(request, now).ok());
  std::vector<dynamo::Request> renews;
  for (int i = 0; i < kConnections; ++i) renews.push_back(renew(config, i));
  int64_t i = 0;
  for (auto _ : state) {
    now += Duration::from_us(1);
    auto result = store.apply(renews[static_cast<size_t>(i++ % kConnections)], now);
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DynamoModelConditionalUpdate)->UseRealTime();

void BM_DynamoModelQueryShard(benchmark::State& state) {
  const lease::LeaseConfig config = bench_config("connections");
  models::DynamoStore store{models::DynamoStoreOptions::faults_off(), 1};
  Instant now = sim::kWallEpoch;
  for (const auto& request : setup_requests(config)) LP_ASSERT(store.apply(request, now).ok());
  uint32_t shard = 0;
  for (auto _ : state) {
    now += Duration::from_us(1);
    auto result = store.apply(lease::reconcile_query(config, shard++ % config.table.shards, 0, std::nullopt), now);
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DynamoModelQueryShard)->UseRealTime();

// One client and one table per process: the benchmark library calls each
// benchmark several times, and the table must be set up only once.
runtime::BlockingDynamoHttpClient* dynalite(benchmark::State& state, const std::string& table) {
  const char* endpoint = std::getenv("LEASEPROOF_DYNALITE_ENDPOINT");
  if (endpoint == nullptr) {
    state.SkipWithError("LEASEPROOF_DYNALITE_ENDPOINT not set (scripts/dynalite.sh start)");
    return nullptr;
  }
  static std::map<std::string, std::unique_ptr<runtime::BlockingDynamoHttpClient>> clients;
  auto& client = clients[table];
  if (client) return client.get();
  runtime::DynamoHttpClientOptions options;
  options.endpoint_url = endpoint;
  client = std::make_unique<runtime::BlockingDynamoHttpClient>(options);
  for (const auto& request : setup_requests(bench_config(table))) {
    client->call(std::string{dynamo::operation_name(dynamo::operation_of(request))}, dynamo::encode(request));
    if (std::holds_alternative<dynamo::CreateTableRequest>(request)) {
      runtime::wait_until_table_active(*client, table, Duration::from_s(10));
    }
  }
  return client.get();
}

void BM_DynamoDynaliteConditionalUpdate(benchmark::State& state) {
  const std::string table = fmt::format("bench-update-{}", getpid());
  runtime::BlockingDynamoHttpClient* client = dynalite(state, table);
  if (client == nullptr) return;
  const lease::LeaseConfig config = bench_config(table);
  int i = 0;
  for (auto _ : state) {
    auto result = client->call("UpdateItem", dynamo::encode(renew(config, i++)));
    if (!result.ok() || result.response().http_status != 200) state.SkipWithError("dynalite refused the renew");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DynamoDynaliteConditionalUpdate)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_DynamoDynaliteQueryShard(benchmark::State& state) {
  const std::string table = fmt::format("bench-query-{}", getpid());
  runtime::BlockingDynamoHttpClient* client = dynalite(state, table);
  if (client == nullptr) return;
  const lease::LeaseConfig config = bench_config(table);
  uint32_t shard = 0;
  for (auto _ : state) {
    auto result = client->call("Query", dynamo::encode(lease::reconcile_query(config, shard++ % 8, 0, std::nullopt)));
    if (!result.ok() || result.response().http_status != 200) state.SkipWithError("dynalite refused the query");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DynamoDynaliteQueryShard)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace leaseproof
