#include "models/deploy.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace leaseproof::models {

std::string_view to_string(DeployStatus status) {
  switch (status) {
    case DeployStatus::idle: return "idle";
    case DeployStatus::running: return "running";
    case DeployStatus::done: return "done";
    case DeployStatus::failed: return "failed";
  }
  LP_UNREACHABLE("deploy status {}", static_cast<int>(status));
}

std::string DeployOptions::validate() const {
  if (minimum_healthy_percent > 100) return "deploy.minimum_healthy_percent must be <= 100";
  if (maximum_percent < 100) return "deploy.maximum_percent must be >= 100";
  if (maximum_percent <= minimum_healthy_percent) {
    return "deploy.maximum_percent must be > deploy.minimum_healthy_percent";
  }
  if (stop_timeout.is_negative() || stop_timeout > Duration::from_s(120)) {
    return "deploy.stop_timeout must be in [0s, 120s]";
  }
  if (health_check_grace.is_negative()) return "deploy.health_check_grace must be >= 0";
  if (check_interval <= Duration::zero()) return "deploy.check_interval must be > 0";
  if (task_healthy_timeout <= health_check_grace) {
    return "deploy.task_healthy_timeout must be > deploy.health_check_grace";
  }
  return {};
}

RollingDeploy::RollingDeploy(sim::World& world, FleetControl& fleet, DeployOptions options)
    : world_(world), fleet_(fleet), options_(std::move(options)) {
  const std::string error = options_.validate();
  LP_ASSERT_MSG(error.empty(), "invalid deploy options: {}", error);
}

std::string RollingDeploy::start() {
  if (status_ == DeployStatus::running) return "a deploy is already running";
  const std::vector<NodeId> running = fleet_.running_workers();
  const auto count = static_cast<uint64_t>(running.size());
  // ECS rounds the floor up and the ceiling down.
  const auto floor = static_cast<uint32_t>((count * options_.minimum_healthy_percent + 99) / 100);
  const auto ceiling = static_cast<uint32_t>(count * options_.maximum_percent / 100);
  if (!options_.in_place && count > 0 && floor >= count && ceiling <= count) {
    return fmt::format("deploy of {} tasks cannot progress: minimum healthy {} and maximum {} tasks", count, floor,
                       ceiling);
  }
  old_tasks_ = running;
  if (options_.in_place) std::reverse(old_tasks_.begin(), old_tasks_.end());  // the highest ordinal first
  next_old_ = 0;
  replacing_ = kNoNode;
  started_tasks_.clear();
  new_tasks_.clear();
  task_count_ = static_cast<uint32_t>(count);
  healthy_floor_ = floor;
  task_ceiling_ = ceiling;
  status_ = DeployStatus::running;
  check();
  return {};
}

void RollingDeploy::schedule_check() {
  world_.at(world_.now() + options_.check_interval, [this] {
    if (status_ == DeployStatus::running) check();
  });
}

void RollingDeploy::check() {
  LP_ASSERT(status_ == DeployStatus::running);
  if (options_.in_place) {
    check_in_place();
    return;
  }
  const std::vector<NodeId> running = fleet_.running_workers();
  if (!update_health(running)) {
    finish(DeployStatus::failed, "deploy.failed");
    return;
  }
  Census now = census(running);
  if (now.old_running.empty() && now.new_healthy == task_count_) {
    finish(DeployStatus::done, "deploy.done");
    return;
  }
  stop_old_tasks(now);
  start_new_tasks(now);
  schedule_check();
}

bool RollingDeploy::update_health(const std::vector<NodeId>& running) {
  const Instant now = world_.now();
  for (NodeId worker : running) {
    auto found = new_tasks_.find(worker);
    if (found == new_tasks_.end() || found->second.healthy) continue;
    NewTask& task = found->second;
    const Duration age = now - task.started;
    if (age >= options_.health_check_grace && (!options_.is_healthy || options_.is_healthy(worker))) {
      task.healthy = true;
      continue;
    }
    if (age >= options_.task_healthy_timeout) return false;
  }
  return true;
}

RollingDeploy::Census RollingDeploy::census(const std::vector<NodeId>& running) const {
  const std::set<NodeId> old_set(old_tasks_.begin(), old_tasks_.end());
  Census result;
  for (NodeId worker : running) {
    if (old_set.count(worker) != 0) {
      result.old_running.push_back(worker);
      continue;
    }
    auto found = new_tasks_.find(worker);
    if (found == new_tasks_.end()) continue;  // started by someone else (an autoscaler): not ours
    result.new_running += 1;
    if (found->second.healthy) result.new_healthy += 1;
  }
  return result;
}

// Old tasks count as healthy while they run, so stopping one lowers the
// healthy count by one; the floor is never crossed by our own action.
void RollingDeploy::stop_old_tasks(Census& now) {
  while (!now.old_running.empty()) {
    const auto healthy = static_cast<uint32_t>(now.old_running.size()) + now.new_healthy;
    if (healthy <= healthy_floor_) break;
    const NodeId oldest = now.old_running.front();
    now.old_running.erase(now.old_running.begin());
    note_world_event(world_, "deploy.stop_task",
                     fmt::format("old task stopped, stop_timeout={}", options_.stop_timeout), oldest.value);
    fleet_.stop_worker(oldest, options_.stop_timeout);
  }
}

void RollingDeploy::start_new_tasks(Census& now) {
  while (now.new_running < task_count_) {
    const auto total = static_cast<uint32_t>(now.old_running.size()) + now.new_running;
    if (total >= task_ceiling_) break;
    const NodeId worker = fleet_.start_worker();
    LP_ASSERT_MSG(new_tasks_.count(worker) == 0, "fleet reused node {} for a new task", worker);
    new_tasks_.emplace(worker, NewTask{world_.now(), false});
    started_tasks_.push_back(worker);
    now.new_running += 1;
    note_world_event(world_, "deploy.start_task", fmt::format("new task {} of {}", started_tasks_.size(), task_count_),
                     worker.value);
  }
}

void RollingDeploy::check_in_place() {
  if (replacing_.valid()) {
    auto found = new_tasks_.find(replacing_);
    if (found == new_tasks_.end()) {
      if (!fleet_.is_down(replacing_)) {
        schedule_check();  // still draining (SIGKILL after stop_timeout)
        return;
      }
      fleet_.restart_worker(replacing_);
      found = new_tasks_.emplace(replacing_, NewTask{world_.now(), false}).first;
      started_tasks_.push_back(replacing_);
      note_world_event(world_, "deploy.start_task",
                       fmt::format("task {} of {} started again in place", started_tasks_.size(), task_count_),
                       replacing_.value);
    }
    if (!update_health({replacing_})) {
      finish(DeployStatus::failed, "deploy.failed");
      return;
    }
    if (!found->second.healthy) {
      schedule_check();
      return;
    }
    replacing_ = kNoNode;
  }
  if (next_old_ == old_tasks_.size()) {
    finish(DeployStatus::done, "deploy.done");
    return;
  }
  replacing_ = old_tasks_[next_old_++];
  note_world_event(world_, "deploy.stop_task",
                   fmt::format("task stopped to be replaced in place, stop_timeout={}", options_.stop_timeout),
                   replacing_.value);
  fleet_.stop_worker(replacing_, options_.stop_timeout);
  schedule_check();
}

void RollingDeploy::finish(DeployStatus status, std::string_view label) {
  status_ = status;
  note_world_event(world_, label,
                   fmt::format("old={} started={} floor={} ceiling={}", old_tasks_.size(), started_tasks_.size(),
                               healthy_floor_, task_ceiling_),
                   task_count_);
}

}  // namespace leaseproof::models
