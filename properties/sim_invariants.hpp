#pragma once
// Invariants every simulation must keep, whatever its models do, checked by
// observing the trace (never the world's internals):
//   - a node's monotonic readings never decrease;
//   - nothing crosses a partition that is active when it arrives (a message that
//     reached a paused node before the cut is delivered at resume: the
//     'queued' event marks its arrival);
//   - a paused or down node does nothing (no send, delivery, timer, note...);
//   - every delivery or drop names a message that was sent and is still in flight.

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "sim/trace.hpp"

namespace leaseproof::properties {

// A set of message ids. The world hands ids out in ascending order and most
// messages arrive soon, so a window of flags from the oldest id still present
// holds them without a node per message; an id below the window (never the
// case in a world's trace, but allowed) is kept in a plain set.
class IdWindow {
 public:
  void insert(uint64_t id);
  bool erase(uint64_t id);  // whether it was present
  bool contains(uint64_t id) const;

 private:
  // Flags from index head_ on stand for ids base_, base_ + 1, ...; the flag
  // at head_ is set, or no flag is. The consumed front is dropped in bulk.
  uint64_t base_ = 0;
  size_t head_ = 0;
  std::vector<uint8_t> present_;
  std::unordered_set<uint64_t> below_;
};

class SimInvariants {
 public:
  void observe(const sim::TraceEvent& event);
  const std::vector<std::string>& violations() const { return violations_; }
  // Counts that show the checked situations occurred (coverage).
  uint64_t deliveries_checked() const { return deliveries_checked_; }
  uint64_t deferred_deliveries() const { return deferred_deliveries_; }
  uint64_t violation_count() const { return violation_count_; }

  static constexpr size_t kViolationsKept = 20;

 private:
  enum class NodeState : uint8_t { unknown, running, paused, down };
  struct NodeView {
    NodeState state = NodeState::unknown;
    Instant last_monotonic = Instant::zero();
    bool seen = false;
    std::vector<uint32_t> partitions_from;  // active partition count per sender
  };
  NodeView& view(NodeId node) {  // every event: inline
    if (nodes_.size() <= node.value) nodes_.resize(node.value + 1);
    return nodes_[node.value];
  }
  void violation(const sim::TraceEvent& event, std::string what);
  void check_activity(const sim::TraceEvent& event, NodeView& node);

  std::vector<NodeView> nodes_;
  bool partitioned(NodeId from, NodeId to);
  IdWindow in_flight_;
  std::unordered_set<uint64_t> queued_;  // arrived at a paused node
  std::vector<std::string> violations_;
  uint64_t index_ = 0;
  uint64_t deliveries_checked_ = 0;
  uint64_t deferred_deliveries_ = 0;
  uint64_t violation_count_ = 0;
};

}  // namespace leaseproof::properties
