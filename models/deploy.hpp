#pragma once
// An ECS-style rolling deployment on a FleetControl: every task running when
// the deploy starts ("old") is replaced by a new task, within the bounds of
// minimumHealthyPercent and maximumPercent (defaults 100 / 200). A world-level
// actor: it runs from world.at() callbacks on true time.
//
// With N old tasks, as ECS rounds: healthy floor = ceil(N * min% / 100), task
// ceiling = floor(N * max% / 100). Every `check_interval` it
// 1. marks new tasks healthy: `health_check_grace` after their start, and the
//    `is_healthy` predicate (when given) holds; a new task not healthy within
//    `task_healthy_timeout` fails the deploy (ECS's circuit breaker without
//    rollback: the fleet is left as it is, `deploy.failed` is noted);
// 2. stops old tasks, oldest first, while (old running + new healthy) stays at
//    or above the healthy floor, with SIGTERM and `stop_timeout` (SIGKILL after);
// 3. starts new tasks while fewer than N new tasks are running and (old
//    running + new running) stays at or below the ceiling.
// Counts come from fleet.running_workers() on every check: a task told to stop
// no longer counts (see FleetControl), and a new task that died is replaced.
// Old tasks count as healthy while they run. Done when no old task runs and N
// new tasks are healthy. Trace notes (no node): `deploy.start_task`,
// `deploy.stop_task` (value = the worker's node id), `deploy.done`,
// `deploy.failed`.
//
// With `in_place` it is a StatefulSet's rolling update instead: one task at a
// time, the last started first, is stopped, and once its process is down it
// is started again on its own node (FleetControl::restart_worker: same name,
// next incarnation); the next one is stopped when that one is healthy. The
// percentages are not used: a task's old and new process never run together.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/time.hpp"
#include "models/fleet.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

struct DeployOptions {
  uint32_t minimum_healthy_percent = 100;
  uint32_t maximum_percent = 200;
  Duration stop_timeout = Duration::from_s(30);        // ECS default; ECS allows at most 120 s
  Duration health_check_grace = Duration::from_s(10);  // a new task is not healthy before this
  Duration check_interval = Duration::from_s(1);
  Duration task_healthy_timeout = Duration::from_min(10);
  // A StatefulSet's rollout (see above) instead of ECS's.
  bool in_place = false;
  // Optional: is this new task healthy now? Polled after the grace period.
  std::function<bool(NodeId worker)> is_healthy;

  // Empty when valid; otherwise names the field ("deploy.maximum_percent must be >= 100").
  std::string validate() const;
};

enum class DeployStatus : uint8_t { idle, running, done, failed };
std::string_view to_string(DeployStatus status);

class RollingDeploy {
 public:
  // `options` must be valid. The world and the fleet must outlive the deploy,
  // and the deploy must outlive the world's run: its callbacks refer to it.
  RollingDeploy(sim::World& world, FleetControl& fleet, DeployOptions options);

  // Replaces every task running now. Returns an error (empty: started) when a
  // deploy is already running or the bounds leave no way to make progress
  // (e.g. one task with 50% / 150%: floor 1, ceiling 1).
  std::string start();

  DeployStatus status() const { return status_; }
  const std::vector<NodeId>& old_tasks() const { return old_tasks_; }
  // Every task this deploy started, in start order (including any that died).
  const std::vector<NodeId>& started_tasks() const { return started_tasks_; }
  uint32_t healthy_floor() const { return healthy_floor_; }
  uint32_t task_ceiling() const { return task_ceiling_; }

 private:
  struct NewTask {
    Instant started;
    bool healthy = false;
  };
  struct Census {
    std::vector<NodeId> old_running;  // in start order
    uint32_t new_running = 0;
    uint32_t new_healthy = 0;
  };

  void schedule_check();
  void check();
  // One step of an in-place rollout: stop the next task, restart the stopped
  // one once it is down, go on once the restarted one is healthy.
  void check_in_place();
  // Marks new tasks healthy; returns false when one timed out (deploy failed).
  bool update_health(const std::vector<NodeId>& running);
  Census census(const std::vector<NodeId>& running) const;
  void stop_old_tasks(Census& census);
  void start_new_tasks(Census& census);
  void finish(DeployStatus status, std::string_view label);

  sim::World& world_;
  FleetControl& fleet_;
  DeployOptions options_;
  DeployStatus status_ = DeployStatus::idle;
  uint32_t task_count_ = 0;
  uint32_t healthy_floor_ = 0;
  uint32_t task_ceiling_ = 0;
  std::vector<NodeId> old_tasks_;
  std::vector<NodeId> started_tasks_;
  std::map<NodeId, NewTask> new_tasks_;  // the same tasks, by id
  // In place: old_tasks_[next_old_] is the next to stop; `replacing_` the one
  // being replaced (invalid: none), restarted once it was down.
  size_t next_old_ = 0;
  NodeId replacing_ = kNoNode;
};

}  // namespace leaseproof::models
