#pragma once
// The kernel scenario: clients send timed requests to servers across skewed,
// drifting and stepping clocks, a lossy network with a slow tail, partitions
// and clogs, while processes crash, pause, get SIGTERM and restart. It uses no
// lease logic; it exercises every piece of sim/ and checks sim's invariants,
// plus liveness once faults have healed.

#include <cstdint>
#include <string>
#include <vector>

#include "base/time.hpp"
#include "scenarios/scenario.hpp"
#include "sim/clock.hpp"
#include "sim/world.hpp"

namespace leaseproof::scenarios {

struct KernelFault {
  enum class Kind : uint8_t { crash, pause, sigterm, partition, clog };
  Kind kind;
  Instant at;
  Duration length;  // down time before restart, pause, partition or clog length
  uint32_t node;    // index into the world's nodes
  uint32_t peer;    // other end for partitions and clogs
  bool both_ways = false;
};

struct KernelOptions {
  uint32_t servers = 2;
  uint32_t clients = 3;
  Duration duration = Duration::from_min(10);
  std::vector<sim::ClockModel> clocks;  // servers first, then clients
  sim::LinkConfig link;
  Duration request_interval_max = Duration::from_ms(500);
  Duration rpc_timeout = Duration::from_s(1);
  Duration stop_timeout = Duration::from_s(30);
  std::vector<KernelFault> faults;
  // Faults end by then; the rest of the run is the liveness phase.
  Instant heal_at;

  std::string describe() const;
};

KernelOptions kernel_options_from_seed(uint64_t seed, Duration duration);
RunResult run_kernel(const KernelOptions& options, const RunConfig& config);

}  // namespace leaseproof::scenarios
