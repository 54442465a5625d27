#pragma once
// No acquire storm: a worker sends at most kAcquiresPerLeaseMax acquires of
// one connection within any one lease duration. Every path of the core that
// acquires waits for something to change first: a refused acquire hands the
// lease's current item to the watcher, which looks again when that item's
// lease (plus the margin) has run out; a sweep acquires a lease once per
// round; a release notice once per notice. A worker that instead answers a
// refusal with another acquire at once sends one per round trip until the
// condition gives way: hundreds of conditional writes per takeover, each
// consuming write capacity of the lease's partition (a refused conditional
// write costs a WCU), which throttle the renews of every other lease there.
//
// Read from the workers' `lease.request` notes alone (docs/trace-format.md).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/ids.hpp"
#include "base/time.hpp"
#include "sim/trace.hpp"

namespace leaseproof::properties {

using NodeNamer = std::function<std::string(NodeId)>;  // as in lease_checkers.hpp

class AcquireRateChecker {
 public:
  // Far above what any path of the core sends (at most two acquires back to
  // back: one refused at the margin's edge, then one past it; then one per
  // lease change), far below a storm (one per round trip for a margin).
  static constexpr uint32_t kAcquiresPerLeaseMax = 10;

  AcquireRateChecker(NodeNamer names, Duration lease_duration) : names_(std::move(names)), lease_(lease_duration) {}
  // A `lease.request` note; other events are ignored.
  void observe(const sim::TraceEvent& event);

  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t violation_count() const { return violation_count_; }
  // The most acquires one worker sent for one connection within one lease.
  uint32_t most_within_a_lease() const { return most_; }
  uint64_t acquires() const { return acquires_; }

  static constexpr size_t kViolationsKept = 10;

 private:
  struct Recent {
    std::deque<Instant> sent;  // within the last lease
    bool reported = false;     // one violation per storm
  };
  NodeNamer names_;
  Duration lease_;
  std::map<NodeId, std::map<std::string, Recent, std::less<>>> recent_;  // worker -> connection -> recent
  std::vector<std::string> violations_;
  uint64_t violation_count_ = 0;
  uint64_t acquires_ = 0;
  uint32_t most_ = 0;
};

}  // namespace leaseproof::properties
