#pragma once
// What a fleet of worker tasks offers to the world-level actors that manage it
// (the autoscaler, the rolling-deploy orchestrator): the ECS service's view.
// The scenario that owns the worker nodes implements it.

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/ids.hpp"
#include "base/time.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

class FleetControl {
 public:
  virtual ~FleetControl() = default;
  // The tasks the service counts as running, in start order: started, not yet
  // told to stop (stop_worker), and not dead. A task leaves this list the
  // moment stop_worker is called for it, even while it drains.
  virtual std::vector<NodeId> running_workers() const = 0;
  // The worker's ActiveConnections metric.
  virtual uint32_t active_connections(NodeId worker) const = 0;
  // A new task (a new node, a new worker id); it is listed at once.
  virtual NodeId start_worker() = 0;
  // SIGTERM now, SIGKILL after `stop_timeout` if it has not exited.
  virtual void stop_worker(NodeId worker, Duration stop_timeout) = 0;
  // A StatefulSet's replacement: the stopped `worker` started again on its own
  // node (its next incarnation, with the same name); it is listed again.
  virtual void restart_worker(NodeId worker) = 0;
  // Whether `worker`'s process is down (it exited, or died).
  virtual bool is_down(NodeId worker) const = 0;
};

// A note in the trace from a world-level actor (no node): the event has no
// clock readings. `label` must be a literal (observers may keep the view).
inline void note_world_event(sim::World& world, std::string_view label, std::string_view detail, int64_t value = 0) {
  sim::TraceEvent event;
  event.kind = sim::EventKind::note;
  event.true_time = world.now();
  event.node = kNoNode;
  event.label = label;
  event.detail = detail;
  event.value = value;
  world.trace().record(event);
}

}  // namespace leaseproof::models
