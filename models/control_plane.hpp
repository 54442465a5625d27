#pragma once
// The control plane: creates the lease table, starts connections (an item with
// desired_state STARTED and lease_expires_at_ms = 0, then a notification so a
// worker takes it at once) and stops them. Every request is retried until
// DynamoDB answers; an "already exists" after a lost reply counts as done.

#include <deque>
#include <string>
#include <vector>

#include "core/lease/config.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

struct ControlPlan {
  struct Step {
    Duration at;  // on the control plane's monotonic clock, from its start
    bool start = true;
    std::string connection;
  };
  std::vector<Step> steps;
};

struct ControlEnvironment {
  lease::LeaseConfig config;
  NodeId dynamo;
  NodeId sqs;
  std::string release_queue = "releases";
  bool notify = true;
  ControlPlan plan;
};

class ControlPlane final : public sim::Process {
 public:
  explicit ControlPlane(const ControlEnvironment& environment) : environment_(environment) {}
  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext&, const sim::Envelope&) override {}

 private:
  void create_table(sim::NodeContext& context);
  void next(sim::NodeContext& context);
  void perform(sim::NodeContext& context, const ControlPlan::Step& step);

  const ControlEnvironment& environment_;
  size_t index_ = 0;
  Instant started_;
};

}  // namespace leaseproof::models
