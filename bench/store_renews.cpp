// A fixed number of conditional renews against the simulated DynamoDB, for
// instruction counts (valgrind --tool=callgrind), which are deterministic
// where wall time on a shared machine is not. scripts/count-instructions.sh
// runs it twice and prints the instructions one renew costs:
//   leaseproof_store_renews N    N renews of 500 leases, after creating them
// Each renew moves its lease's expiry forward (wall mode refuses one that
// does not), so the requests differ: all 20,000 are built first, whatever N,
// and the difference of two runs counts the renews alone.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "core/lease/requests.hpp"
#include "models/dynamo/store.hpp"
#include "sim/clock.hpp"

int main(int argc, char** argv) {
  using namespace leaseproof;
  char* end = nullptr;
  const long renews = argc == 2 ? std::strtol(argv[1], &end, 10) : -1;
  constexpr long kPrebuilt = 20'000;
  if (argc != 2 || end == argv[1] || *end != '\0' || renews < 0 || renews > kPrebuilt) {
    std::fprintf(stderr, "usage: %s N (renews to run, an integer 0..%ld)\n", argv[0], kPrebuilt);
    return 2;
  }
  constexpr int kConnections = 500;
  lease::LeaseConfig config;
  config.table.name = "connections";
  models::DynamoStore store{models::DynamoStoreOptions::faults_off(), 1};
  Instant now = sim::kWallEpoch;
  LP_ASSERT(store.apply(lease::create_table_request(config), now).ok());
  constexpr int64_t kWallMs = 1'767'225'600'000;
  for (int i = 0; i < kConnections; ++i) {
    const std::string connection = fmt::format("c{}", i);
    LP_ASSERT(store.apply(lease::create_connection_request(config, connection, "wss://hub"), now).ok());
    LP_ASSERT(store.apply(lease::acquire_request(config, connection, "worker-1", kWallMs, {}), now).ok());
  }
  std::vector<dynamo::Request> requests;
  requests.reserve(kPrebuilt);
  for (long i = 0; i < kPrebuilt; ++i) {
    // Round r renews every lease a millisecond after round r - 1 did.
    requests.push_back(lease::renew_request(config, fmt::format("c{}", i % kConnections), "worker-1", 1,
                                            kWallMs + 1 + i / kConnections));
  }
  long applied = 0;
  for (long i = 0; i < renews; ++i) {
    now += Duration::from_us(1);
    applied += store.apply(requests[static_cast<size_t>(i)], now).ok() ? 1 : 0;
  }
  std::printf("%ld of %ld renews applied\n", applied, renews);
  return applied == renews ? 0 : 1;
}
