#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/autoscaler.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {
namespace {

using namespace literals;

// Workers are entries in a vector, NodeId = index; nothing runs on them.
class FakeFleet final : public FleetControl {
 public:
  struct Worker {
    uint32_t connections = 0;
    bool stopped = false;
    Duration stop_timeout;
  };

  std::vector<NodeId> running_workers() const override {
    std::vector<NodeId> running;
    for (uint32_t i = 0; i < workers.size(); ++i) {
      if (!workers[i].stopped) running.push_back(NodeId{i});
    }
    return running;
  }
  uint32_t active_connections(NodeId worker) const override { return workers.at(worker.value).connections; }
  NodeId start_worker() override {
    workers.push_back(Worker{});
    return NodeId{static_cast<uint32_t>(workers.size() - 1)};
  }
  void stop_worker(NodeId worker, Duration stop_timeout) override {
    Worker& w = workers.at(worker.value);
    EXPECT_FALSE(w.stopped) << "worker " << worker.value << " stopped twice";
    w.stopped = true;
    w.stop_timeout = stop_timeout;
  }
  void restart_worker(NodeId worker) override { ADD_FAILURE() << "the autoscaler restarted worker " << worker.value; }
  bool is_down(NodeId worker) const override { return workers.at(worker.value).stopped; }

  void add(uint32_t connections) { workers.push_back(Worker{connections, false, {}}); }
  void set_all_running(uint32_t connections) {
    for (Worker& w : workers) {
      if (!w.stopped) w.connections = connections;
    }
  }
  size_t running_count() const { return running_workers().size(); }

  std::vector<Worker> workers;
};

class AutoscalerTest : public ::testing::Test {
 protected:
  AutoscalerTest() {
    world.trace().add_observer([this](const sim::TraceEvent& e) {
      if (e.kind != sim::EventKind::note) return;
      EXPECT_FALSE(e.node.valid());
      if (e.label == "autoscaler.scale_out") scale_outs.push_back(e.true_time);
      if (e.label == "autoscaler.scale_in") scale_ins.push_back(e.true_time);
    });
  }

  static Instant at(Duration d) { return Instant::zero() + d; }
  // Running task count at true time `when` (a world action records it).
  void count_at(Duration when, std::vector<size_t>& out) {
    world.at(at(when), [this, &out] { out.push_back(fleet.running_count()); });
  }

  sim::World world{11};
  FakeFleet fleet;
  AutoscalerOptions options;
  std::vector<Instant> scale_outs;
  std::vector<Instant> scale_ins;
};

TEST_F(AutoscalerTest, ScalesOutWhenTheAverageExceedsTheTargetButNotBeforeOneEvaluationPeriod) {
  fleet.add(800);
  fleet.add(800);
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  world.run_until(at(59_s));
  EXPECT_EQ(fleet.running_count(), 2u);
  world.run_until(at(60_s));
  EXPECT_EQ(fleet.running_count(), 3u);  // ceil(1600 / 700)
  EXPECT_EQ(scale_outs, std::vector<Instant>{at(60_s)});
}

TEST_F(AutoscalerTest, AverageAtTheTargetOrAShortSpikeDoesNotScaleOut) {
  fleet.add(700);
  fleet.add(700);
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  world.run_until(at(5_min));  // exactly at the target is not above it
  EXPECT_TRUE(scale_outs.empty());
  // Then 650 on average, with one sample (at 7m10s) of 1,000 on the second task:
  // that minute averages (5 * 1300 + 1700) / 12 = 683.
  world.at(at(5_min), [this] { fleet.workers[1].connections = 600; });
  world.at(at(7_min + 5_s), [this] { fleet.workers[1].connections = 1000; });
  world.at(at(7_min + 15_s), [this] { fleet.workers[1].connections = 600; });
  world.run_until(at(10_min));
  EXPECT_EQ(fleet.running_count(), 2u);
  EXPECT_TRUE(scale_outs.empty());
}

TEST_F(AutoscalerTest, ScaleOutRespectsMaxTasks) {
  options.max_tasks = 5;
  for (int i = 0; i < 3; ++i) fleet.add(5000);
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  world.run_until(at(30_min));
  EXPECT_EQ(fleet.running_count(), 5u);
  EXPECT_EQ(scale_outs.size(), 1u);
}

TEST_F(AutoscalerTest, AFleetBelowMinTasksIsScaledOutToIt) {
  options.min_tasks = 2;
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  world.run_until(at(10_min));
  EXPECT_EQ(fleet.running_count(), 2u);
}

TEST_F(AutoscalerTest, SecondScaleOutWaitsForTheScaleOutCooldown) {
  options.scale_out_cooldown = 120_s;
  fleet.add(1400);
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  // After the first scale out (to 2), the load follows: 1,400 on each task.
  world.at(at(61_s), [this] { fleet.set_all_running(1400); });
  world.run_until(at(4_min));
  EXPECT_EQ(scale_outs, (std::vector<Instant>{at(60_s), at(180_s)}));
  EXPECT_EQ(fleet.running_count(), 4u);  // ceil(2800 / 700)
}

TEST_F(AutoscalerTest, NoScaleInDuringTheCooldownAndNeverBelowMinTasks) {
  options.min_tasks = 2;
  for (int i = 0; i < 4; ++i) fleet.add(100);
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  std::vector<size_t> counts;
  // Just before and just after each due time (a count at the same instant runs first).
  for (Duration t : {299_s, 301_s, 599_s, 601_s, 30_min}) count_at(t, counts);
  world.run_until(at(30_min));
  // One task per scale in, each 300 s after the previous action.
  EXPECT_EQ(counts, (std::vector<size_t>{4, 3, 3, 2, 2}));
  EXPECT_EQ(scale_ins, (std::vector<Instant>{at(300_s), at(600_s)}));
}

TEST_F(AutoscalerTest, ScaleInNeedsTheAverageBelowNinetyPercentOfTheTarget) {
  // Ten tasks at 630 (exactly 90% of 700): desired would be 9, but the average is not below the threshold.
  options.max_tasks = 20;
  for (int i = 0; i < 10; ++i) fleet.add(630);
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  world.run_until(at(20_min));
  EXPECT_TRUE(scale_ins.empty());
  // One connection less on every task: the next sample (20m10s) brings the minute's
  // average below 630 (5 * 6300 + 6290 < 60 * 630), and one task goes.
  fleet.set_all_running(629);
  world.run_until(at(21_min));
  EXPECT_EQ(scale_ins, std::vector<Instant>{at(20_min + 10_s)});
  EXPECT_EQ(fleet.running_count(), 9u);
}

TEST_F(AutoscalerTest, ScaleInStopsTheLeastLoadedTaskWithTheStopTimeout) {
  options.stop_timeout = 45_s;
  fleet.add(300);
  fleet.add(10);
  fleet.add(50);
  fleet.add(10);
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  world.run_until(at(300_s));
  ASSERT_EQ(scale_ins.size(), 1u);
  // Least loaded are 1 and 3 (10 each): the most recently started of them goes.
  EXPECT_TRUE(fleet.workers[3].stopped);
  EXPECT_EQ(fleet.workers[3].stop_timeout, 45_s);
  EXPECT_FALSE(fleet.workers[1].stopped);
  EXPECT_EQ(fleet.running_count(), 3u);
}

TEST_F(AutoscalerTest, StopEndsSamplingAndActions) {
  fleet.add(5000);
  Autoscaler autoscaler{world, fleet, options};
  autoscaler.start();
  world.at(at(30_s), [&autoscaler] { autoscaler.stop(); });
  world.run_until(at(10_min));
  EXPECT_EQ(fleet.running_count(), 1u);
}

TEST(AutoscalerOptions, ValidateNamesTheField) {
  EXPECT_EQ(AutoscalerOptions{}.validate(), "");
  AutoscalerOptions options;
  options.target_connections_per_task = 0;
  EXPECT_EQ(options.validate(), "autoscaler.target_connections_per_task must be > 0");
  options = {};
  options.evaluation_period = 65_s;
  EXPECT_EQ(options.validate(), "autoscaler.evaluation_period must be a multiple of sample_interval");
  options = {};
  options.min_tasks = 11;
  EXPECT_EQ(options.validate(), "autoscaler.min_tasks must be <= autoscaler.max_tasks");
  options = {};
  options.scale_in_threshold_percent = 101;
  EXPECT_EQ(options.validate(), "autoscaler.scale_in_threshold_percent must be in [1, 100]");
  options = {};
  options.sample_interval = Duration::zero();
  EXPECT_EQ(options.validate(), "autoscaler.sample_interval must be > 0");
}

}  // namespace
}  // namespace leaseproof::models
