#pragma once
// A target-tracking autoscaler on the average ActiveConnections per task,
// modelled on AWS Application Auto Scaling for an ECS service (the articles use
// a target of 700). It is a world-level actor: it runs from world.at()
// callbacks on true time (it is AWS's control plane, not a node), and acts on
// the fleet through FleetControl.
//
// Behaviour, with the choices made where AWS leaves one:
// - Every `sample_interval` it samples the running tasks: the sum of their
//   ActiveConnections and their count. A decision needs a full window of
//   `evaluation_period / sample_interval` samples; the first comes one
//   evaluation period after start(), and the window is cleared after every
//   scaling action so each decision sees only samples taken after the last.
// - The metric is the average per task over the window, exact in integers:
//   sum of the samples' connection totals / sum of their task counts.
// - Scale out when that average is above the target: desired =
//   ceil(average total / target), clamped to [min_tasks, max_tasks]; not
//   within `scale_out_cooldown` of the previous scale out. A fleet below
//   min_tasks is scaled out to it at the next decision.
// - Scale in when the average is below `scale_in_threshold_percent` of the
//   target (AWS: 90%) and desired < running, and `scale_in_cooldown` has
//   passed since the last scaling action of either kind (or since start()); by
//   at most `scale_in_tasks_max` tasks per action, never below min_tasks.
// - Scale in stops the least loaded task (fewest ActiveConnections; ties: the
//   most recently started), so the fewest connections are handed over, with
//   SIGTERM and `stop_timeout` (the ECS stop timeout; SIGKILL after it).
// Trace notes (no node): `autoscaler.scale_out` / `autoscaler.scale_in`, value
// = the new task count, detail = average, running and desired counts.

#include <cstdint>
#include <deque>
#include <string>

#include "base/time.hpp"
#include "models/fleet.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

struct AutoscalerOptions {
  uint32_t target_connections_per_task = 700;
  Duration sample_interval = Duration::from_s(10);
  Duration evaluation_period = Duration::from_s(60);  // a multiple of sample_interval
  Duration scale_out_cooldown = Duration::from_s(60);
  Duration scale_in_cooldown = Duration::from_s(300);
  uint32_t scale_in_threshold_percent = 90;  // of the target
  uint32_t scale_in_tasks_max = 1;           // per scale-in action
  uint32_t min_tasks = 1;
  uint32_t max_tasks = 10;
  Duration stop_timeout = Duration::from_s(30);

  // Empty when valid; otherwise names the field, e.g.
  // "autoscaler.target_connections_per_task must be > 0".
  std::string validate() const;
};

class Autoscaler {
 public:
  // `options` must be valid (validate() returned empty). The world and the
  // fleet must outlive the autoscaler, and the autoscaler must outlive the
  // world's run or be stop()ped first: its scheduled callbacks refer to it.
  Autoscaler(sim::World& world, FleetControl& fleet, AutoscalerOptions options);

  // Begins sampling now (true time).
  void start();
  // No more samples or actions; callbacks already scheduled do nothing.
  void stop();

  const AutoscalerOptions& options() const { return options_; }
  uint32_t scale_out_count() const { return scale_out_count_; }
  uint32_t scale_in_count() const { return scale_in_count_; }

 private:
  struct Sample {
    uint64_t connections = 0;  // sum over the running tasks
    uint64_t tasks = 0;
  };

  void schedule_sample();
  void take_sample();
  void evaluate();
  // ceil(average total connections over the window / target), clamped.
  uint32_t desired_tasks() const;
  void scale_out(uint32_t running, uint32_t desired);
  void scale_in(uint32_t running, uint32_t desired);
  std::string describe(uint32_t running, uint32_t desired) const;

  sim::World& world_;
  FleetControl& fleet_;
  AutoscalerOptions options_;
  uint64_t samples_per_window_ = 0;
  std::deque<Sample> window_;
  bool running_ = false;
  uint64_t generation_ = 0;  // invalidates callbacks scheduled before a stop()
  Instant last_scale_out_ = Instant::zero();
  bool scaled_out_ = false;
  Instant last_action_ = Instant::zero();  // scale in or out, or start()
  uint32_t scale_out_count_ = 0;
  uint32_t scale_in_count_ = 0;
};

}  // namespace leaseproof::models
