#include "properties/sim_invariants.hpp"

#include <fmt/format.h>

namespace leaseproof::properties {

// base_ only moves up, so every id in below_ stays below the window.
void IdWindow::insert(uint64_t id) {
  const size_t live = present_.size() - head_;
  if (live == 0 && id > base_) {
    base_ = id;
    present_.clear();
    head_ = 0;
  }
  if (id < base_) {
    below_.insert(id);
    return;
  }
  const uint64_t offset = id - base_;
  if (offset >= present_.size() - head_) present_.resize(head_ + offset + 1, 0);
  present_[head_ + offset] = 1;
}

bool IdWindow::contains(uint64_t id) const {
  if (id < base_ || id - base_ >= present_.size() - head_) return below_.contains(id);
  return present_[head_ + (id - base_)] != 0;
}

bool IdWindow::erase(uint64_t id) {
  if (id < base_ || id - base_ >= present_.size() - head_) return below_.erase(id) > 0;
  uint8_t& flag = present_[head_ + (id - base_)];
  if (flag == 0) return false;
  flag = 0;
  while (head_ < present_.size() && present_[head_] == 0) {
    ++head_;
    ++base_;
  }
  if (head_ >= 4096 && head_ * 2 >= present_.size()) {  // drop the consumed front now and then
    present_.erase(present_.begin(), present_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  return true;
}

using sim::EventKind;

bool SimInvariants::partitioned(NodeId from, NodeId to) {
  const NodeView& receiver = view(to);
  return receiver.partitions_from.size() > from.value && receiver.partitions_from[from.value] > 0;
}

void SimInvariants::violation(const sim::TraceEvent& event, std::string what) {
  ++violation_count_;
  if (violations_.size() < kViolationsKept) {
    violations_.push_back(fmt::format("event {} at {} ({}, node {}): {}", index_, event.true_time,
                                      sim::to_string(event.kind), event.node, what));
  }
}

void SimInvariants::check_activity(const sim::TraceEvent& event, NodeView& node) {
  switch (event.kind) {
    case EventKind::send:
    case EventKind::deliver:
    case EventKind::timer:
    case EventKind::timeout:
    case EventKind::exit:
    case EventKind::fault:
    case EventKind::note:
      if (node.state != NodeState::running) {
        violation(event, fmt::format("node acts while {}",
                                     node.state == NodeState::paused ? "paused" : "not running"));
      }
      break;
    default:
      break;
  }
}

void SimInvariants::observe(const sim::TraceEvent& event) {
  if (event.node.valid()) {
    NodeView& node = view(event.node);
    if (node.seen && event.monotonic < node.last_monotonic) {
      violation(event, fmt::format("monotonic clock went back from {} to {}", node.last_monotonic,
                                   event.monotonic));
    }
    node.seen = true;
    node.last_monotonic = event.monotonic;
    check_activity(event, node);
    switch (event.kind) {
      case EventKind::start:
      case EventKind::restart:
      case EventKind::resume: node.state = NodeState::running; break;
      case EventKind::pause: node.state = NodeState::paused; break;
      case EventKind::crash:
      case EventKind::exit: node.state = NodeState::down; break;
      default: break;
    }
  }
  switch (event.kind) {
    case EventKind::send:
      in_flight_.insert(event.id);
      break;
    case EventKind::queued:
      if (partitioned(event.peer, event.node)) {
        violation(event, fmt::format("arrived from node {} across an active partition", event.peer));
      }
      queued_.insert(event.id);
      break;
    case EventKind::deliver:
      ++deliveries_checked_;
      if ((queued_.empty() || queued_.erase(event.id) == 0) && partitioned(event.peer, event.node)) {
        violation(event, fmt::format("delivered from node {} across an active partition", event.peer));
      }
      [[fallthrough]];
    case EventKind::drop:
      if (event.kind == EventKind::drop && !queued_.empty()) queued_.erase(event.id);
      if (!in_flight_.erase(event.id)) {
        violation(event, fmt::format("message {} was not in flight", event.id));
      }
      break;
    case EventKind::partition_start:
    case EventKind::partition_end: {
      // node = sender, peer = receiver; counted at the receiver.
      NodeView& receiver = view(event.peer);
      if (receiver.partitions_from.size() <= event.node.value) receiver.partitions_from.resize(event.node.value + 1);
      uint32_t& active = receiver.partitions_from[event.node.value];
      if (event.kind == EventKind::partition_start) {
        ++active;
      } else if (active == 0) {
        violation(event, "partition ended that never started");
      } else {
        --active;
      }
      break;
    }
    case EventKind::resume:
      if (event.value > 0) ++deferred_deliveries_;
      break;
    default:
      break;
  }
  ++index_;
}

}  // namespace leaseproof::properties
