#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "models/deploy.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {
namespace {

using namespace literals;

// Workers are entries in a vector, NodeId = index. A new worker reports ready
// `ready_after` after its start; the test's own count of healthy tasks (old
// ones running, new ones ready) is checked on every stop and every 100 ms.
class FakeFleet final : public FleetControl {
 public:
  struct Worker {
    bool old = false;
    bool ready = false;
    bool stopped = false;
    bool dead = false;
    Duration stop_timeout;
    bool exited = false;  // a stopped worker's process is down `exit_after` after its stop
    std::vector<Instant> restarts;
  };

  explicit FakeFleet(sim::World& world) : world_(world) {}

  std::vector<NodeId> running_workers() const override {
    std::vector<NodeId> running;
    for (uint32_t i = 0; i < workers.size(); ++i) {
      if (is_running(workers[i])) running.push_back(NodeId{i});
    }
    return running;
  }
  uint32_t active_connections(NodeId) const override { return 0; }
  NodeId start_worker() override {
    workers.push_back(Worker{});
    const NodeId id{static_cast<uint32_t>(workers.size() - 1)};
    if (ready_after != Duration::max()) {
      world_.at(world_.now() + ready_after, [this, id] { workers[id.value].ready = true; });
    }
    max_running = std::max(max_running, running_workers().size());
    return id;
  }
  void stop_worker(NodeId worker, Duration stop_timeout) override {
    Worker& w = workers.at(worker.value);
    EXPECT_TRUE(is_running(w)) << "worker " << worker.value << " stopped while not running";
    w.stopped = true;
    w.stop_timeout = stop_timeout;
    w.exited = false;
    world_.at(world_.now() + exit_after, [this, worker] { workers.at(worker.value).exited = true; });
    observe_healthy();
  }
  void restart_worker(NodeId worker) override {
    Worker& w = workers.at(worker.value);
    EXPECT_TRUE(w.stopped && w.exited) << "worker " << worker.value << " restarted while its process ran";
    w = Worker{false, false, false, false, w.stop_timeout, false, w.restarts};
    w.restarts.push_back(world_.now());
    if (ready_after != Duration::max()) {
      world_.at(world_.now() + ready_after, [this, worker] { workers.at(worker.value).ready = true; });
    }
    max_running = std::max(max_running, running_workers().size());
  }
  bool is_down(NodeId worker) const override {
    const Worker& w = workers.at(worker.value);
    return w.dead || (w.stopped && w.exited);
  }

  void add_old() { workers.push_back(Worker{true, true, false, false, {}, false, {}}); }
  bool is_ready(NodeId worker) const { return workers.at(worker.value).ready; }
  size_t healthy() const {
    return static_cast<size_t>(std::count_if(workers.begin(), workers.end(), [](const Worker& w) {
      return is_running(w) && (w.old || w.ready);
    }));
  }
  size_t count(bool old) const {
    return static_cast<size_t>(std::count_if(workers.begin(), workers.end(), [old](const Worker& w) {
      return is_running(w) && w.old == old;
    }));
  }
  void observe_healthy() { min_healthy = std::min(min_healthy, healthy()); }
  // Samples the healthy count every 100 ms until `end`.
  void watch(Instant end) {
    if (world_.now() >= end) return;
    observe_healthy();
    world_.at(world_.now() + 100_ms, [this, end] { watch(end); });
  }

  Duration ready_after = 5_s;
  Duration exit_after = 3_s;
  std::vector<Worker> workers;
  size_t min_healthy = SIZE_MAX;
  size_t max_running = 0;

 private:
  static bool is_running(const Worker& w) { return !w.stopped && !w.dead; }
  sim::World& world_;
};

class DeployTest : public ::testing::Test {
 protected:
  DeployTest() {
    options.health_check_grace = 2_s;
    options.is_healthy = [this](NodeId worker) { return fleet.is_ready(worker); };
    world.trace().add_observer([this](const sim::TraceEvent& e) {
      if (e.kind == sim::EventKind::note && !e.node.valid()) notes.emplace_back(e.label);
    });
  }

  static Instant at(Duration d) { return Instant::zero() + d; }
  size_t notes_named(std::string_view label) const {
    return static_cast<size_t>(std::count(notes.begin(), notes.end(), label));
  }

  sim::World world{5};
  FakeFleet fleet{world};
  DeployOptions options;
  std::vector<std::string> notes;
};

TEST_F(DeployTest, DeployOfFourTasksEndsWithFourNewAndNoOldAndNeverDropsBelowFourHealthy) {
  for (int i = 0; i < 4; ++i) fleet.add_old();
  RollingDeploy deploy{world, fleet, options};
  fleet.watch(at(10_min));
  world.at(at(1_s), [&deploy] { EXPECT_EQ(deploy.start(), ""); });
  world.run_until(at(10_min));
  EXPECT_EQ(deploy.status(), DeployStatus::done);
  EXPECT_EQ(fleet.count(true), 0u);
  EXPECT_EQ(fleet.count(false), 4u);
  EXPECT_EQ(fleet.min_healthy, 4u);  // minimumHealthyPercent 100
  EXPECT_LE(fleet.max_running, 8u);  // maximumPercent 200
  for (NodeId old : deploy.old_tasks()) {
    EXPECT_TRUE(fleet.workers[old.value].stopped);
    EXPECT_EQ(fleet.workers[old.value].stop_timeout, 30_s);
  }
  EXPECT_EQ(notes_named("deploy.start_task"), 4u);
  EXPECT_EQ(notes_named("deploy.stop_task"), 4u);
  EXPECT_EQ(notes_named("deploy.done"), 1u);
}

TEST_F(DeployTest, HalfHealthyAndNoExtraCapacityReplacesInBatchesWithinBothBounds) {
  options.minimum_healthy_percent = 50;
  options.maximum_percent = 100;
  options.stop_timeout = 45_s;
  for (int i = 0; i < 4; ++i) fleet.add_old();
  RollingDeploy deploy{world, fleet, options};
  fleet.watch(at(10_min));
  EXPECT_EQ(deploy.start(), "");
  EXPECT_EQ(deploy.healthy_floor(), 2u);
  EXPECT_EQ(deploy.task_ceiling(), 4u);
  EXPECT_EQ(fleet.count(true), 2u);  // two old stopped at once, two new started in their place
  world.run_until(at(10_min));
  EXPECT_EQ(deploy.status(), DeployStatus::done);
  EXPECT_EQ(fleet.count(true), 0u);
  EXPECT_EQ(fleet.count(false), 4u);
  EXPECT_EQ(fleet.min_healthy, 2u);
  EXPECT_LE(fleet.max_running, 4u);
  EXPECT_EQ(fleet.workers[0].stop_timeout, 45_s);
}

TEST_F(DeployTest, OldTasksStayUntilNewOnesPassTheHealthCheck) {
  options.is_healthy = nullptr;  // healthy after the grace period alone
  options.health_check_grace = 20_s;
  fleet.add_old();
  RollingDeploy deploy{world, fleet, options};
  EXPECT_EQ(deploy.start(), "");
  world.run_until(at(19_s));
  EXPECT_EQ(fleet.count(true), 1u);
  world.run_until(at(21_s));
  EXPECT_EQ(fleet.count(true), 0u);
  EXPECT_EQ(deploy.status(), DeployStatus::done);
}

TEST_F(DeployTest, ANewTaskThatDiesBeforeItIsHealthyIsReplaced) {
  for (int i = 0; i < 2; ++i) fleet.add_old();
  RollingDeploy deploy{world, fleet, options};
  fleet.watch(at(5_min));
  EXPECT_EQ(deploy.start(), "");
  world.at(at(3_s), [this, &deploy] { fleet.workers[deploy.started_tasks().at(0).value].dead = true; });
  world.run_until(at(5_min));
  EXPECT_EQ(deploy.status(), DeployStatus::done);
  EXPECT_EQ(deploy.started_tasks().size(), 3u);
  EXPECT_EQ(fleet.count(false), 2u);
  EXPECT_EQ(fleet.count(true), 0u);
  EXPECT_EQ(fleet.min_healthy, 2u);
}

TEST_F(DeployTest, ATaskThatNeverBecomesHealthyFailsTheDeployAndKeepsTheOldTasks) {
  fleet.ready_after = Duration::max();
  options.task_healthy_timeout = 2_min;
  for (int i = 0; i < 3; ++i) fleet.add_old();
  RollingDeploy deploy{world, fleet, options};
  EXPECT_EQ(deploy.start(), "");
  world.run_until(at(119_s));
  EXPECT_EQ(deploy.status(), DeployStatus::running);
  world.run_until(at(10_min));
  EXPECT_EQ(deploy.status(), DeployStatus::failed);
  EXPECT_EQ(fleet.count(true), 3u);
  EXPECT_EQ(notes_named("deploy.failed"), 1u);
  EXPECT_EQ(notes_named("deploy.stop_task"), 0u);
}

// A StatefulSet's rollout: one task at a time, the last started first, each
// restarted on its own node only once its process is down, the next stopped
// only once the restarted one is healthy; no task ever runs twice.
TEST_F(DeployTest, InPlaceReplacesOneTaskAtATimeOnItsOwnNodeOnceItsProcessIsDown) {
  options.in_place = true;
  for (int i = 0; i < 3; ++i) fleet.add_old();
  RollingDeploy deploy{world, fleet, options};
  fleet.watch(at(10_min));
  std::vector<NodeId> stop_order;
  world.trace().add_observer([&stop_order](const sim::TraceEvent& e) {
    if (e.kind == sim::EventKind::note && e.label == "deploy.stop_task") {
      stop_order.push_back(NodeId{static_cast<uint32_t>(e.value)});
    }
  });
  world.at(at(1_s), [&deploy] { EXPECT_EQ(deploy.start(), ""); });
  world.run_until(at(10_min));
  EXPECT_EQ(deploy.status(), DeployStatus::done);
  EXPECT_EQ(fleet.workers.size(), 3u);  // no new node
  EXPECT_EQ(stop_order, (std::vector<NodeId>{NodeId{2}, NodeId{1}, NodeId{0}}));
  EXPECT_EQ(deploy.started_tasks(), stop_order);
  EXPECT_EQ(fleet.count(true), 0u);  // every task is its new process now
  EXPECT_EQ(fleet.count(false), 3u);
  EXPECT_EQ(fleet.min_healthy, 2u);  // one task out at a time
  EXPECT_EQ(fleet.max_running, 3u);
  // Stopped at 1 s, down at 4 s, restarted at the next check; healthy 5 s
  // later (the grace is 2 s): the next task is stopped then, down 3 s later.
  ASSERT_EQ(fleet.workers[2].restarts.size(), 1u);
  ASSERT_EQ(fleet.workers[1].restarts.size(), 1u);
  EXPECT_GE(fleet.workers[2].restarts[0], at(4_s));
  EXPECT_LE(fleet.workers[2].restarts[0], at(5_s));
  EXPECT_GE(fleet.workers[1].restarts[0], fleet.workers[2].restarts[0] + 5_s + fleet.exit_after);
  EXPECT_EQ(notes_named("deploy.start_task"), 3u);
  EXPECT_EQ(notes_named("deploy.done"), 1u);
}

TEST_F(DeployTest, InPlaceWaitsForATaskThatDoesNotExit) {
  options.in_place = true;
  fleet.exit_after = 1_h;  // not within the test (the world's SIGKILL is not modelled by this fleet)
  for (int i = 0; i < 2; ++i) fleet.add_old();
  RollingDeploy deploy{world, fleet, options};
  EXPECT_EQ(deploy.start(), "");
  world.run_until(at(10_min));
  EXPECT_EQ(deploy.status(), DeployStatus::running);
  EXPECT_TRUE(fleet.workers[0].restarts.empty());
  EXPECT_TRUE(fleet.workers[1].restarts.empty());
  EXPECT_EQ(notes_named("deploy.stop_task"), 1u);
}

TEST_F(DeployTest, StartRefusesBoundsThatCannotProgress) {
  options.minimum_healthy_percent = 50;
  options.maximum_percent = 150;
  fleet.add_old();  // floor ceil(0.5) = 1, ceiling floor(1.5) = 1
  RollingDeploy deploy{world, fleet, options};
  EXPECT_EQ(deploy.start(), "deploy of 1 tasks cannot progress: minimum healthy 1 and maximum 1 tasks");
  EXPECT_EQ(deploy.status(), DeployStatus::idle);
  fleet.add_old();  // two tasks: floor 1, ceiling 3
  EXPECT_EQ(deploy.start(), "");
  EXPECT_EQ(deploy.start(), "a deploy is already running");
}

TEST_F(DeployTest, EmptyFleetIsDoneAtOnce) {
  RollingDeploy deploy{world, fleet, options};
  EXPECT_EQ(deploy.start(), "");
  EXPECT_EQ(deploy.status(), DeployStatus::done);
  EXPECT_EQ(notes_named("deploy.done"), 1u);
}

TEST(DeployOptions, ValidateNamesTheField) {
  EXPECT_EQ(DeployOptions{}.validate(), "");
  DeployOptions options;
  options.maximum_percent = 90;
  EXPECT_EQ(options.validate(), "deploy.maximum_percent must be >= 100");
  options = {};
  options.minimum_healthy_percent = 101;
  EXPECT_EQ(options.validate(), "deploy.minimum_healthy_percent must be <= 100");
  options = {};
  options.maximum_percent = 100;
  EXPECT_EQ(options.validate(), "deploy.maximum_percent must be > deploy.minimum_healthy_percent");
  options = {};
  options.stop_timeout = 121_s;
  EXPECT_EQ(options.validate(), "deploy.stop_timeout must be in [0s, 120s]");
  options = {};
  options.check_interval = Duration::zero();
  EXPECT_EQ(options.validate(), "deploy.check_interval must be > 0");
}

}  // namespace
}  // namespace leaseproof::models
