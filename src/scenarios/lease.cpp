// The lease fleet simulation: world building, fault schedule, checks.
#include <leaseproof/scenarios/lease.hpp>

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include <leaseproof/models/autoscaler.hpp>
#include <leaseproof/models/control_plane.hpp>
#include <leaseproof/models/deploy.hpp>
#include <leaseproof/models/dynamo_node.hpp>
#include <leaseproof/models/dynamo_store.hpp>
#include <leaseproof/models/fleet.hpp>
#include <leaseproof/models/sqs.hpp>
#include <leaseproof/models/worker.hpp>
#include <leaseproof/properties/lease_checkers.hpp>
#include <leaseproof/properties/sim_invariants.hpp>

namespace leaseproof::scenarios {
namespace {

using models::WorkerProcess;

// The fleet: worker nodes, started and stopped by faults, deploys and the
// autoscaler. Implements the FleetControl the orchestrators use.
class Fleet final : public models::FleetControl {
 public:
  Fleet(sim::World& world, const LeaseScenarioOptions& options, const models::WorkerEnvironment& environment)
      : world_(world), options_(options), environment_(environment), clocks_(world.prng_for("lease/clocks")) {}

  NodeId start_worker() override {
    const uint32_t index = static_cast<uint32_t>(all_.size());
    sim::ClockModel clock;
    clock.offset = options_.skew_max.is_zero() ? Duration::zero()
                                               : clocks_.uniform_duration(-options_.skew_max, options_.skew_max);
    if (index == 0) clock.offset += options_.fast_worker_offset;
    clock.drift_ppm = options_.drift_ppm_max == 0 ? 0 : clocks_.uniform(-options_.drift_ppm_max, options_.drift_ppm_max + 1);
    clock.monotonic_origin = Instant::zero() + clocks_.uniform_duration(Duration::from_s(1), Duration::from_h(1000));
    for (const WorkerFault& step : options_.clock_steps) {
      if (step.worker == index) clock.steps.push_back(sim::ClockStep{world_.now() + step.at, step.length});
    }
    const NodeId node = world_.add_node(fmt::format("worker-{}", index), clock, [this] {
      return std::make_unique<WorkerProcess>(environment_);
    });
    all_.push_back(node);
    running_.push_back(node);
    return node;
  }
  void stop_worker(NodeId worker, Duration stop_timeout) override {
    std::erase(running_, worker);
    world_.sigterm(worker, stop_timeout);
  }
  std::vector<NodeId> running_workers() const override { return running_; }
  uint32_t active_connections(NodeId worker) const override {
    const auto* process = dynamic_cast<const WorkerProcess*>(world_.process(worker));
    return process == nullptr ? 0 : process->active_connections();
  }
  const std::vector<NodeId>& all() const { return all_; }

 private:
  sim::World& world_;
  const LeaseScenarioOptions& options_;
  const models::WorkerEnvironment& environment_;
  sim::Prng clocks_;
  std::vector<NodeId> all_;
  std::vector<NodeId> running_;
};

// One crash every `crash_every`, of a worker drawn from the seed, restarted
// after `restart_after`, until the faults heal.
void schedule_crashes(sim::World& world, const LeaseScenarioOptions& options, Fleet& fleet) {
  if (options.crash_every.is_zero()) return;
  auto victims = std::make_shared<sim::Prng>(world.prng_for("lease/crashes"));
  for (Duration at = options.crash_every; at < options.healed_at(); at += options.crash_every) {
    world.at(Instant::zero() + at, [&world, &fleet, victims, &options] {
      const std::vector<NodeId> running = fleet.running_workers();
      if (running.empty()) return;
      const NodeId victim = running[victims->index(running.size())];
      world.crash(victim);
      world.at(world.now() + options.restart_after, [&world, victim] { world.restart(victim); });
    });
  }
}

void schedule_worker_faults(sim::World& world, const LeaseScenarioOptions& options, const Fleet& fleet, NodeId dynamo) {
  for (const WorkerFault& pause : options.pauses) {
    world.at(Instant::zero() + pause.at, [&world, &fleet, pause] { world.pause(fleet.all()[pause.worker], pause.length); });
  }
  for (const WorkerFault& cut : options.partitions) {
    const NodeId worker = fleet.all()[cut.worker];
    world.partition(worker, dynamo, Instant::zero() + cut.at, Instant::zero() + cut.at + cut.length);
    world.partition(dynamo, worker, Instant::zero() + cut.at, Instant::zero() + cut.at + cut.length);
  }
}

models::DynamoStoreOptions store_options(const LeaseScenarioOptions& options) {
  models::DynamoStoreOptions store;  // GSI lag and stale reads on
  store.throttling = options.throttle_partition_wcu_per_s > 0;
  if (store.throttling) store.partition_wcu_per_s = options.throttle_partition_wcu_per_s;
  return store;
}

using properties::GapCause;
using properties::RecoveryBound;

// The recovery-time bound of each kind of ownerless gap, term by term
// (DESIGN.md section 4): what the configuration allows, not what we hope.
std::map<GapCause, RecoveryBound> recovery_bounds(const LeaseScenarioOptions& o) {
  const lease::LeaseConfig& c = o.lease;
  const Duration round_trips = Duration::from_s(1);      // a read and an acquire, with the slow tail
  const Duration gsi_lag = Duration::from_s(5) + Duration::from_ms(105);  // the model's worst GSI lag
  const Duration skew = o.skew_max * 2 + o.fast_worker_offset;
  const bool seed = c.algorithm == lease::Algorithm::seed;
  RecoveryBound expiry{{{"lease", c.lease_duration},
                        {"margin", seed ? Duration::zero() : c.safety_margin},
                        {"reconcile interval", c.reconcile_interval},
                        {"reconcile jitter", c.reconcile_jitter_max},
                        {"max skew", skew},
                        {"GSI lag", gsi_lag},
                        {"timed-out requests", c.request_timeout * 2},
                        {"round trips", round_trips}}};
  if (c.algorithm == lease::Algorithm::core && c.expiry_mode == lease::ExpiryMode::counter) {
    expiry.terms.insert(expiry.terms.begin() + 2, {"watch interval", c.watch_interval});
  }
  RecoveryBound graceful;
  if (seed) {
    // No notification: the next reconcile finds the released lease.
    graceful = RecoveryBound{{{"reconcile interval", c.reconcile_interval},
                              {"reconcile jitter", c.reconcile_jitter_max},
                              {"GSI lag", gsi_lag},
                              {"round trips", round_trips}}};
  } else if (o.loss.is_zero()) {
    graceful = RecoveryBound{{{"release notice (SQS poll)", Duration::from_ms(500)},
                              {"acquire", c.request_timeout},
                              {"round trips", round_trips}}};
  } else {
    graceful = expiry;  // a lost notice falls back to the watchers and sweeps
  }
  return {{GapCause::crash, expiry}, {GapCause::pause, expiry}, {GapCause::lease_lost, expiry},
          {GapCause::graceful, graceful}};
}

}  // namespace

RunResult run_lease(const LeaseScenarioOptions& options, const RunConfig& config) {
  LP_ASSERT_MSG(options.validate().empty(), "{}", options.validate());
  sim::World world{config.seed};
  world.trace().set_jsonl_output(config.trace_jsonl);
  world.trace().keep_digests(config.keep_digests);
  world.trace().keep_lines(config.keep_lines);
  properties::SimInvariants invariants;
  world.trace().add_observer([&invariants](const sim::TraceEvent& e) { invariants.observe(e); });
  const std::map<GapCause, RecoveryBound> bounds = recovery_bounds(options);
  properties::LeaseCheckers checkers{[&world](NodeId node) { return std::string{world.node_name(node)}; }, bounds};
  world.trace().add_observer([&checkers](const sim::TraceEvent& e) { checkers.observe(e); });
  if (options.throttle_partition_wcu_per_s > 0) {
    checkers.add_fault_window(Instant::zero(), Instant::zero() + options.healed_at(), "DynamoDB throttling");
  }
  std::map<std::string, uint64_t, std::less<>> notes;  // coverage: marks and model events by name
  world.trace().add_observer([&notes](const sim::TraceEvent& e) {
    if (e.kind != sim::EventKind::note) return;
    if (e.label == "mark") {
      ++notes[fmt::format("mark.{}", e.detail)];
    } else if (e.label.starts_with("lease.") || e.label.starts_with("control.") || e.label.starts_with("upstream.") ||
               e.label.starts_with("autoscaler.") || e.label.starts_with("deploy.")) {
      ++notes[std::string{e.label}];
    }
  });

  const LeaseScenarioOptions& o = options;
  world.set_default_link(sim::LinkConfig{sim::LatencyDistribution{o.latency, o.jitter, Ratio{1, 200}, Duration::from_ms(200)},
                                         o.loss, false});
  models::DynamoStore store{store_options(o), sim::derive_seed(config.seed, "lease/dynamo")};
  models::SqsState sqs_state;
  sqs_state.create_queue("releases");
  const NodeId dynamo = world.add_node("dynamodb", {}, [&store] { return std::make_unique<models::DynamoNode>(store); });
  const NodeId sqs = world.add_node("sqs", {}, [&sqs_state] { return std::make_unique<models::SqsNode>(sqs_state); });
  const NodeId upstream = world.add_node("upstream", {}, [] { return std::make_unique<models::UpstreamEndpoint>(); });

  const bool seed_algorithm = o.lease.algorithm == lease::Algorithm::seed;
  models::WorkerEnvironment environment{o.lease, dynamo, sqs, upstream, "releases", !seed_algorithm,
                                        Duration::from_ms(500), {}};
  environment.fault_sites["lease.renew.skip"] =
      world.faults().declare({"lease.renew.skip", Ratio{1, 2}, {Ratio{1, 1000}, Ratio{1, 100}}});
  models::ControlEnvironment control{o.lease, dynamo, sqs, "releases", !seed_algorithm, {}};
  for (uint32_t i = 0; i < o.connections; ++i) control.plan.steps.push_back({Duration::zero(), true, fmt::format("c{}", i)});
  std::vector<ConnectionStop> stops = o.stops;
  std::stable_sort(stops.begin(), stops.end(), [](const auto& a, const auto& b) { return a.at < b.at; });
  for (const ConnectionStop& stop : stops) control.plan.steps.push_back({stop.at, false, fmt::format("c{}", stop.connection)});
  world.add_node("control", {}, [&control] { return std::make_unique<models::ControlPlane>(control); });

  Fleet fleet{world, o, environment};
  for (uint32_t i = 0; i < o.workers; ++i) fleet.start_worker();
  schedule_crashes(world, o, fleet);
  schedule_worker_faults(world, o, fleet, dynamo);
  std::unique_ptr<models::RollingDeploy> deploy;
  if (o.deploy_at) {
    deploy = std::make_unique<models::RollingDeploy>(world, fleet, models::DeployOptions{});
    world.at(Instant::zero() + *o.deploy_at, [&deploy] { (void)deploy->start(); });
  }
  std::unique_ptr<models::Autoscaler> autoscaler;
  if (o.autoscaler) {
    models::AutoscalerOptions scaling;
    scaling.target_connections_per_task = static_cast<uint32_t>(o.autoscale_target);
    autoscaler = std::make_unique<models::Autoscaler>(world, fleet, scaling);
    autoscaler->start();
  }
  // The liveness phase runs with every fault healed: no more loss, no more
  // throttling (scheduled faults already end by then).
  world.at(Instant::zero() + o.healed_at(), [&world, &store, &o] {
    world.set_every_link(sim::LinkConfig{sim::LatencyDistribution{o.latency, o.jitter, Ratio{1, 200}, Duration::from_ms(200)},
                                         Ratio::zero(), false});
    store.set_throttling(false);
  });
  if (config.before_run) config.before_run(world);
  world.run_until(Instant::zero() + o.duration);
  if (autoscaler) autoscaler->stop();

  RunResult result = world_result(world, config, o.duration, o.describe());
  const Instant end = Instant::zero() + o.duration;
  checkers.check_liveness(Instant::zero() + o.healed_at(), bounds.at(GapCause::crash).total(), end);
  result.violations = invariants.violations();
  for (std::string& violation : checkers.violations()) result.violations.push_back(std::move(violation));
  result.summary = checkers.summary();
  for (const auto& [name, count] : notes) result.counters.emplace_back(name, count);
  const models::TableAccounting& table = store.accounting(o.lease.table.name);
  result.counters.emplace_back("dynamo.wcu", static_cast<uint64_t>(table.table.write_units));
  for (const auto& [index, units] : table.indexes) {
    result.counters.emplace_back("dynamo.gsi_wcu." + index, static_cast<uint64_t>(units.write_units));
  }
  result.counters.emplace_back("dynamo.rcu_half", static_cast<uint64_t>(table.table.read_half_units));
  result.counters.emplace_back("dynamo.scans", static_cast<uint64_t>(table.scan));
  result.counters.emplace_back("dynamo.throttled", static_cast<uint64_t>(table.throttled_requests));
  return result;
}

}  // namespace leaseproof::scenarios
