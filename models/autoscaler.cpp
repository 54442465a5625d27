#include "models/autoscaler.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace leaseproof::models {
namespace {

// A window longer than this many samples is a configuration mistake (bound).
constexpr int64_t kSamplesPerWindowMax = 10'000;

}  // namespace

std::string AutoscalerOptions::validate() const {
  if (target_connections_per_task == 0) return "autoscaler.target_connections_per_task must be > 0";
  if (sample_interval <= Duration::zero()) return "autoscaler.sample_interval must be > 0";
  if (evaluation_period < sample_interval) return "autoscaler.evaluation_period must be >= sample_interval";
  if (!(evaluation_period % sample_interval).is_zero()) {
    return "autoscaler.evaluation_period must be a multiple of sample_interval";
  }
  if (evaluation_period / sample_interval > kSamplesPerWindowMax) {
    return fmt::format("autoscaler.evaluation_period must be at most {} sample intervals", kSamplesPerWindowMax);
  }
  if (scale_out_cooldown.is_negative()) return "autoscaler.scale_out_cooldown must be >= 0";
  if (scale_in_cooldown.is_negative()) return "autoscaler.scale_in_cooldown must be >= 0";
  if (scale_in_threshold_percent == 0 || scale_in_threshold_percent > 100) {
    return "autoscaler.scale_in_threshold_percent must be in [1, 100]";
  }
  if (scale_in_tasks_max == 0) return "autoscaler.scale_in_tasks_max must be > 0";
  if (max_tasks == 0) return "autoscaler.max_tasks must be > 0";
  if (min_tasks > max_tasks) return "autoscaler.min_tasks must be <= autoscaler.max_tasks";
  if (stop_timeout.is_negative()) return "autoscaler.stop_timeout must be >= 0";
  return {};
}

Autoscaler::Autoscaler(sim::World& world, FleetControl& fleet, AutoscalerOptions options)
    : world_(world), fleet_(fleet), options_(options) {
  const std::string error = options_.validate();
  LP_ASSERT_MSG(error.empty(), "invalid autoscaler options: {}", error);
  samples_per_window_ = static_cast<uint64_t>(options_.evaluation_period / options_.sample_interval);
}

void Autoscaler::start() {
  if (running_) return;
  running_ = true;
  window_.clear();
  last_action_ = world_.now();
  schedule_sample();
}

void Autoscaler::stop() {
  running_ = false;
  ++generation_;
}

void Autoscaler::schedule_sample() {
  world_.at(world_.now() + options_.sample_interval, [this, generation = generation_] {
    if (!running_ || generation != generation_) return;
    take_sample();
    evaluate();
    schedule_sample();
  });
}

void Autoscaler::take_sample() {
  Sample sample;
  for (NodeId worker : fleet_.running_workers()) {
    sample.connections += fleet_.active_connections(worker);
    sample.tasks += 1;
  }
  window_.push_back(sample);
  while (window_.size() > samples_per_window_) window_.pop_front();
}

uint32_t Autoscaler::desired_tasks() const {
  uint64_t connections = 0;
  for (const Sample& sample : window_) connections += sample.connections;
  const uint64_t per_window_target = samples_per_window_ * options_.target_connections_per_task;
  const uint64_t desired = (connections + per_window_target - 1) / per_window_target;
  return static_cast<uint32_t>(std::clamp<uint64_t>(desired, options_.min_tasks, options_.max_tasks));
}

// Comparisons of the average with the target are cross-multiplied, so exact:
// connections / tasks > target  <=>  connections > target * tasks.
void Autoscaler::evaluate() {
  if (window_.size() < samples_per_window_) return;
  uint64_t connections = 0;
  uint64_t tasks = 0;
  for (const Sample& sample : window_) {
    connections += sample.connections;
    tasks += sample.tasks;
  }
  const auto running = static_cast<uint32_t>(fleet_.running_workers().size());
  const uint32_t desired = desired_tasks();
  const Instant now = world_.now();
  const bool above_target = connections > uint64_t{options_.target_connections_per_task} * tasks;
  const bool below_min = running < options_.min_tasks;
  const bool out_cooled = !scaled_out_ || now - last_scale_out_ >= options_.scale_out_cooldown;
  if ((above_target || below_min) && desired > running && out_cooled) {
    scale_out(running, desired);
    return;
  }
  const bool below_threshold = connections * 100 < uint64_t{options_.target_connections_per_task} *
                                                       options_.scale_in_threshold_percent * tasks;
  const bool in_cooled = now - last_action_ >= options_.scale_in_cooldown;
  if (below_threshold && desired < running && in_cooled) scale_in(running, desired);
}

std::string Autoscaler::describe(uint32_t running, uint32_t desired) const {
  uint64_t connections = 0;
  uint64_t tasks = 0;
  for (const Sample& sample : window_) {
    connections += sample.connections;
    tasks += sample.tasks;
  }
  const uint64_t average = tasks == 0 ? 0 : connections / tasks;
  return fmt::format("average={} target={} running={} desired={}", average, options_.target_connections_per_task,
                     running, desired);
}

void Autoscaler::scale_out(uint32_t running, uint32_t desired) {
  LP_ASSERT_LT(running, desired);
  LP_ASSERT_LE(desired, options_.max_tasks);
  note_world_event(world_, "autoscaler.scale_out", describe(running, desired), desired);
  for (uint32_t i = running; i < desired; ++i) fleet_.start_worker();
  scaled_out_ = true;
  last_scale_out_ = world_.now();
  last_action_ = world_.now();
  ++scale_out_count_;
  window_.clear();
}

void Autoscaler::scale_in(uint32_t running, uint32_t desired) {
  LP_ASSERT_GT(running, desired);
  LP_ASSERT_GE(desired, options_.min_tasks);
  const uint32_t stop_count = std::min(running - desired, options_.scale_in_tasks_max);
  note_world_event(world_, "autoscaler.scale_in", describe(running, running - stop_count), running - stop_count);
  std::vector<NodeId> workers = fleet_.running_workers();
  for (uint32_t i = 0; i < stop_count; ++i) {
    // Least loaded; among equals the most recently started (the latest in start order).
    auto chosen = workers.begin();
    for (auto it = workers.begin(); it != workers.end(); ++it) {
      if (fleet_.active_connections(*it) <= fleet_.active_connections(*chosen)) chosen = it;
    }
    fleet_.stop_worker(*chosen, options_.stop_timeout);
    workers.erase(chosen);
  }
  last_action_ = world_.now();
  ++scale_in_count_;
  window_.clear();
}

}  // namespace leaseproof::models
