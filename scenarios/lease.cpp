// The lease fleet simulation: world building, fault schedule, checks.
#include "scenarios/lease.hpp"
#include "scenarios/metrics.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "base/integer_text.hpp"
#include "base/lex_compare.hpp"
#include "core/lease/requests.hpp"
#include "models/autoscaler.hpp"
#include "models/control_plane.hpp"
#include "models/deploy.hpp"
#include "models/dynamo/node.hpp"
#include "models/dynamo/store.hpp"
#include "models/fleet.hpp"
#include "models/sqs.hpp"
#include "models/stream.hpp"
#include "models/worker.hpp"
#include "properties/lease_checkers.hpp"
#include "properties/stream_checkers.hpp"
#include "properties/sim_invariants.hpp"

namespace leaseproof::scenarios {
namespace {

// The checkers' thread of one run (RunConfig::background_checks): started
// just before the world runs, so that everything set up before sees the
// checkers as they are built, and finished before anything reads them.
// Declared after every checker, it is gone before any of them.
class BackgroundChecks {
 public:
  BackgroundChecks(sim::Trace& trace, const RunConfig& config) : trace_(trace) {
    if (config.background_checks && config.trace_jsonl == nullptr && !config.keep_digests && !config.keep_lines) {
      trace_.start_background();
    }
  }
  ~BackgroundChecks() { trace_.finish_background(); }
  BackgroundChecks(const BackgroundChecks&) = delete;
  BackgroundChecks& operator=(const BackgroundChecks&) = delete;
  // Whether the checkers ran in the background; they are finished after.
  bool finish() {
    const bool background = trace_.background();
    trace_.finish_background();
    return background;
  }

 private:
  sim::Trace& trace_;
};

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
  void restart_worker(NodeId worker) override {
    world_.restart(worker);
    if (std::find(running_.begin(), running_.end(), worker) == running_.end()) running_.push_back(worker);
  }
  // LeaseScenarioOptions::twins: a second process under `worker`'s stable
  // id, on a node of its own with a clock drawn as any worker's (from its own
  // stream), outside the fleet's lists: crashes, deploys and the autoscaler
  // never pick it.
  NodeId start_twin(uint32_t worker) {
    models::WorkerEnvironment& twin = twin_environments_.emplace_back(environment_);
    twin.worker_id = std::string{world_.node_name(all_.at(worker))};
    sim::ClockModel clock;
    clock.offset = options_.skew_max.is_zero() ? Duration::zero()
                                               : twin_clocks_.uniform_duration(-options_.skew_max, options_.skew_max);
    clock.drift_ppm =
        options_.drift_ppm_max == 0 ? 0 : twin_clocks_.uniform(-options_.drift_ppm_max, options_.drift_ppm_max + 1);
    clock.monotonic_origin = Instant::zero() + twin_clocks_.uniform_duration(Duration::from_s(1), Duration::from_h(1000));
    return world_.add_node(fmt::format("{}-twin{}", twin.worker_id, twin_environments_.size()), clock,
                           [&twin] { return std::make_unique<WorkerProcess>(twin); });
  }
  bool is_down(NodeId worker) const override { return world_.state(worker) == sim::ProcessState::down; }
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
  sim::Prng twin_clocks_{world_.prng_for("lease/twin-clocks")};
  std::deque<models::WorkerEnvironment> twin_environments_;  // stable addresses: each twin's process keeps one
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
  for (const WorkerFault& held : options.holds) {
    world.hold(fleet.all()[held.worker], dynamo, Instant::zero() + held.at, Instant::zero() + held.at + held.length,
               options.hold_delay / 2, options.hold_delay);
  }
}

// Sends what a test asks it to (late_notices); nothing of its own.
class FaultSender final : public sim::Process {
 public:
  void on_start(sim::NodeContext&) override {}
  void on_message(sim::NodeContext&, const sim::Envelope&) override {}
};

// LeaseScenarioOptions::late_notices. When a write throttle begins, the
// first connection (by index) whose lease the throttled worker holds in the
// table: its owner stops acting when its own wall clock reads the lease's
// expiry minus the margin (its deadline, counted from the renew that set
// that expiry). The duplicate notice is sent `lead` before that, true time;
// it reaches SQS and a polling worker within a few link delays.
void schedule_late_notices(sim::World& world, const LeaseScenarioOptions& o, const Fleet& fleet,
                           const models::DynamoStore& store, NodeId sqs, NodeId sender, uint64_t& sent) {
  sim::Prng prng = world.prng_for("lease/late-notices");
  for (const WorkerFault& f : o.write_throttles) {
    const Duration lead = prng.uniform_duration(Duration::zero(), o.skew_max);
    const NodeId worker = fleet.all()[f.worker];
    world.at(Instant::zero() + f.at, [&world, &o, &store, &sent, worker, sqs, sender, lead] {
      const auto* process = dynamic_cast<const models::WorkerProcess*>(world.process(worker));
      if (process == nullptr || world.state(worker) != sim::ProcessState::running) return;
      for (uint32_t i = 0; i < o.connections; ++i) {
        std::string connection = fmt::format("c{}", i);
        const dynamo::Item key = lease::key_of(connection);
        const auto* owner = store.peek_attribute(o.lease.table.name, key, "lease_owner");
        const auto* expires = store.peek_attribute(o.lease.table.name, key, "lease_expires_at_ms");
        if (owner == nullptr || expires == nullptr || owner->text() != process->worker_id()) continue;
        const int64_t wall_ms = world.clock(worker).wall(world.now()).ms();
        const Duration until = Duration::from_ms(std::stoll(expires->text()) - o.lease.safety_margin.ms() - wall_ms) - lead;
        if (until <= Duration::zero()) return;
        world.at(world.now() + until, [&world, &o, &sent, sqs, sender, connection = std::move(connection)] {
          sim::NodeContext context{world, sender};
          context.note("fault.late_notice", connection);
          ++sent;
          models::sqs_send(context, sqs, "releases", connection, fmt::format("{}@late-{}", connection, sent),
                           connection, Duration::from_s(5), [](const models::SqsSendReply*) {});
        });
        return;
      }
    });
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

// Every link's latency: the configured base and jitter, plus a rare slow tail.
sim::LatencyDistribution link_latency(const LeaseScenarioOptions& o) {
  return sim::LatencyDistribution{o.latency, o.jitter, Ratio{1, 200}, Duration::from_ms(200)};
}

// The recovery-time bound of each kind of ownerless gap, term by term
// (DESIGN.md section 4): what the configuration allows, not what we hope.

constexpr Duration kGsiLagMax = Duration::from_ms(5105);  // the model's worst GSI lag

std::map<GapCause, RecoveryBound> recovery_bounds(const LeaseScenarioOptions& o) {
  const lease::LeaseConfig& c = o.lease;
  // Network terms are counted in one-way delays, each at most the links'
  // largest (latency + jitter + slow tail: 205 ms with the defaults), so the
  // bounds hold whatever latency a run is given.
  const Duration one_way = link_latency(o).max();
  const std::pair<std::string, Duration> round_trips{"network (4 one-way delays)", one_way * 4};  // a read and an acquire
  const Duration gsi_lag = kGsiLagMax;
  const Duration skew = o.skew_max * 2 + o.fast_worker_offset;
  const bool seed = c.algorithm == lease::Algorithm::seed;
  // The core's sweep reads each candidate from the table (its index holds
  // keys only): one more request that can time out, one more round trip.
  RecoveryBound expiry{{{"lease", c.lease_duration},
                        {"margin", seed ? Duration::zero() : c.safety_margin},
                        {"reconcile interval", c.reconcile_interval},
                        {"reconcile jitter", c.reconcile_jitter_max},
                        {"max skew", skew},
                        {"GSI lag", gsi_lag},
                        {"timed-out requests", c.request_timeout * (seed ? 2 : 3)},
                        seed ? round_trips
                             : std::pair<std::string, Duration>{"network (6 one-way delays)", one_way * 6}}};
  if (c.algorithm != lease::Algorithm::seed && c.expiry_mode == lease::ExpiryMode::counter) {
    expiry.terms.insert(expiry.terms.begin() + 2, {"watch interval", c.watch_interval});
  }
  if (c.algorithm == lease::Algorithm::liveness) {
    // Between the candidate's read and the acquire: the read of its owner's
    // liveness item and the fence, two more requests and round trips.
    for (auto& [name, value] : expiry.terms) {
      if (name == "timed-out requests") value = c.request_timeout * 5;
    }
    expiry.terms.back() = {"network (10 one-way delays)", one_way * 10};
  }
  RecoveryBound graceful;
  if (seed) {
    // No notification: the next reconcile finds the released lease.
    graceful = RecoveryBound{{{"reconcile interval", c.reconcile_interval},
                              {"reconcile jitter", c.reconcile_jitter_max},
                              {"GSI lag", gsi_lag},
                              round_trips}};
  } else if (const models::WorkerEnvironment worker;
             o.loss.is_zero() && one_way * 2 < std::min(c.request_timeout, worker.sqs_timeout)) {
    // The release and its reply, the notice to SQS, the reply to a receive
    // that just missed it, the next receive and its reply, the acquire and
    // its reply: 8 one-way delays, and up to one poll interval between.
    graceful = RecoveryBound{{{"release notice (SQS poll)", worker.sqs_poll_interval},
                              {"network (8 one-way delays)", one_way * 8}}};
  } else {
    // A lost notice, or a reply later than its caller waits (a release or an
    // acquire whose outcome is unknown; a receive whose notices stay hidden
    // for the visibility timeout), falls back to the watchers and sweeps.
    graceful = expiry;
  }
  return {{GapCause::crash, expiry}, {GapCause::pause, expiry}, {GapCause::lease_lost, expiry},
          {GapCause::graceful, graceful}};
}

// The watcher's path: a worker armed to take the lease over at its expiry
// (lease.watch) reads it again when the owner's stamp says it ends, plus the
// margin (wall mode), or every watch interval until its counter has been
// unchanged for lease + margin (counter mode), then acquires. No sweep, no
// GSI: its reads are strongly consistent GetItems.
std::map<GapCause, RecoveryBound> watcher_bounds(const LeaseScenarioOptions& o) {
  const lease::LeaseConfig& c = o.lease;
  if (c.algorithm == lease::Algorithm::seed) return {};  // the articles have no watchers
  const Duration one_way = link_latency(o).max();
  const bool counter = c.expiry_mode == lease::ExpiryMode::counter;
  const Duration granularity = counter ? c.watch_interval : Duration::zero();
  const Duration waited = c.lease_duration + c.safety_margin + granularity;
  RecoveryBound bound{{{"lease", c.lease_duration}, {"margin", c.safety_margin}}};
  if (counter) bound.terms.emplace_back("watch interval", c.watch_interval);
  if (!counter) bound.terms.emplace_back("max skew", o.skew_max * 2 + o.fast_worker_offset);
  bound.terms.emplace_back("rate error", Duration::from_ns(waited.ns() / 1'000'000 * o.drift_ppm_max));
  bound.terms.emplace_back("timed-out requests", (c.request_timeout + c.retry_backoff) * 2);
  // Wall mode: the read at the stamp plus the margin, then the acquire.
  // Counter mode: also the owner's last renew on its way, and the read that
  // first saw its counter. The liveness algorithm reads and fences the
  // owner's liveness item before the acquire: one more request, which can
  // time out, and one more round trip.
  const bool liveness = c.algorithm == lease::Algorithm::liveness;
  if (liveness) bound.terms.back().second = (c.request_timeout + c.retry_backoff) * 3;
  const int64_t delays = (counter ? 7 : 4) + (liveness ? 2 : 0);
  bound.terms.emplace_back(fmt::format("network ({} one-way delays)", delays), one_way * delays);
  return {{GapCause::crash, bound}, {GapCause::pause, bound}, {GapCause::lease_lost, bound}};
}

// How soon a STOPPED connection has no acting owner. The core's owner learns
// of a stop from its next renew (refused: the item is STOPPED); whatever the
// network does, its deadline, lease - margin after its last renew sent before
// the stop, ends its acting within a lease. The liveness algorithm writes no
// lease on a heartbeat: its owner reads a held lease the sweep's index did not
// show, so a stop is seen by the first sweep that starts once the index
// reflects it (GSI lag + a reconcile interval and jitter, twice: a sweep can
// take up to an interval), and that read (asked again at once when lost:
// three timed-out requests, then a round trip).
Duration stop_bound(const LeaseScenarioOptions& o) {
  const lease::LeaseConfig& c = o.lease;
  if (c.algorithm != lease::Algorithm::liveness) return c.lease_duration;
  return kGsiLagMax + (c.reconcile_interval + c.reconcile_jitter_max) * 2 + c.request_timeout * 3 +
         link_latency(o).max() * 2;
}

nlohmann::json milliseconds(Duration duration) { return static_cast<double>(duration.ns()) / 1e6; }

// What a sweep report needs from one run: every ended ownerless gap by cause
// (with its bound), and DynamoDB's consumed capacity and requests per table
// and index. Reports aggregate these over seeds (docs/reports.md).
// A run whose liveness phase (from the heal plus the recovery bound to the
// end) is empty judged no recovery it left unfinished: with connections
// still ownerless at its end, a PASS would claim what it never saw.
std::string inconclusive_reason(const LeaseScenarioOptions& o, const properties::LeaseCheckers& checkers,
                                Duration liveness_bound) {
  // Nothing owned, nothing judged: no acting owner to be single, no gap to
  // recover, nothing recorded (a run of 1 ns; every message lost until the end).
  if (checkers.recovery().connections_owned() == 0) {
    return fmt::format("no connection was ever owned in the run's {} ({} connections): no property was exercised",
                       o.duration, o.connections);
  }
  if (o.healed_at() + liveness_bound < o.duration) return {};
  std::set<std::string_view, std::less<>> ownerless;
  for (const properties::OwnerlessGap& gap : checkers.recovery().gaps()) {
    if (!gap.ended && gap.cause != GapCause::stopped) ownerless.insert(gap.connection);
  }
  if (ownerless.empty()) return {};
  return fmt::format(
      "the run ends at {}, before its liveness phase could begin (faults healed at {} + recovery bound {}): {} "
      "connections ownerless at the end were never judged",
      o.duration, o.healed_at(), liveness_bound, ownerless.size());
}

nlohmann::json lease_metrics(const LeaseScenarioOptions& o, const properties::LeaseCheckers& checkers,
                             const std::map<GapCause, RecoveryBound>& bounds,
                             const std::map<GapCause, RecoveryBound>& watcher, const models::DynamoStore& store) {
  nlohmann::json recovery = nlohmann::json::object();
  const properties::RecoveryChecker& checker = checkers.recovery();
  for (const properties::OwnerlessGap& gap : checker.gaps()) {
    if (!gap.ended || gap.cause == GapCause::initial || gap.cause == GapCause::stopped) continue;
    nlohmann::json& cause = recovery[std::string{properties::to_string(gap.cause)}];
    if (cause.is_null()) {
      cause = {{"gaps_ms", nlohmann::json::array()}, {"excused_gaps_ms", nlohmann::json::array()}};
      if (const auto bound = bounds.find(gap.cause); bound != bounds.end()) {
        cause["bound_ms"] = milliseconds(bound->second.total());
      }
      if (const auto bound = watcher.find(gap.cause); bound != watcher.end()) {
        cause["watcher_bound_ms"] = milliseconds(bound->second.total());
        cause["watcher_gaps_ms"] = nlohmann::json::array();
      }
    }
    // Excused gaps overlapped another fault, so their length is not the
    // cause's alone: listed apart. Of the judged ones, those judged by the
    // watcher's bound are listed again on their own.
    const bool excused = gap.verdict == properties::OwnerlessGap::Verdict::excused;
    const nlohmann::json length = milliseconds(*gap.ended - gap.began);
    cause[excused ? "excused_gaps_ms" : "gaps_ms"].push_back(length);
    if (!excused && checker.path_name(gap) == "watcher's") cause["watcher_gaps_ms"].push_back(length);
  }
  return {{"recovery", recovery},
          {"dynamodb", dynamodb_metrics(store, o.duration)},
          {"fleet", {{"workers", o.workers}, {"connections", o.connections}}}};
}

// Streaming: the hub (and relay) nodes, the sink, the hub faults and the
// stream checkers. Lives as long as the run.
struct Streaming {
  models::HubShared hub;
  NodeId hub_node;
  NodeId via;
  properties::ExactlyOnceChecker exactly_once;
  std::unique_ptr<properties::DeadPeerChecker> dead_peers;
  std::unique_ptr<properties::ReconnectStormChecker> storms;
};

void schedule_hub_faults(sim::World& world, const LeaseScenarioOptions& o, const Fleet& fleet, Streaming& streaming) {
  const StreamOptions& s = o.stream;
  const NodeId hub = streaming.hub_node;
  for (const Duration at : s.hub_crashes) {
    world.at(Instant::zero() + at, [&world, hub, down = s.hub_down] {
      if (world.state(hub) != sim::ProcessState::running) return;
      world.crash(hub);
      world.at(world.now() + down, [&world, hub] { world.restart(hub); });
    });
  }
  for (const Duration at : s.mass_closes) {
    world.at(Instant::zero() + at, [&world, hub] {
      if (auto* process = dynamic_cast<models::HubProcess*>(world.process(hub))) {
        if (world.state(hub) == sim::ProcessState::running) process->close_all(resume::close_code::service_restart);
      }
    });
  }
  // Faults on links to every worker that exists when they begin.
  auto each_worker = [&world, &fleet, via = streaming.via](TimedFault fault, bool cut) {
    world.at(Instant::zero() + fault.at, [&world, &fleet, via, fault, cut] {
      const Instant end = world.now() + fault.length;
      for (const NodeId worker : fleet.all()) {
        if (cut) {
          world.partition(worker, via, world.now(), end);
          world.partition(via, worker, world.now(), end);
        } else {
          world.clog(via, worker, world.now(), end);
        }
      }
    });
  };
  // A crash right after a record write leaves: processed, not confirmed.
  auto pending = std::make_shared<std::vector<Instant>>();
  for (const Duration at : s.crash_while_recording) pending->push_back(Instant::zero() + at);
  std::sort(pending->begin(), pending->end(), std::greater<>());
  if (!pending->empty()) {
    world.trace().add_observer([&world, pending, restart_after = o.restart_after](const sim::TraceEvent& e) {
      if (pending->empty() || e.kind != sim::EventKind::note || e.label != "lease.request") return;
      if (!e.detail.starts_with("record") || e.true_time < pending->back()) return;
      pending->pop_back();
      const NodeId node = e.node;
      world.at(world.now(), [&world, node, restart_after] {
        if (world.state(node) != sim::ProcessState::running) return;
        world.crash(node, "crash while recording");
        world.at(world.now() + restart_after, [&world, node] { world.restart(node); });
      });
    });
  }
  for (const TimedFault& fault : s.hub_slow) each_worker(fault, false);
  for (const TimedFault& fault : s.cuts) each_worker(fault, true);
}

std::unique_ptr<Streaming> start_streaming(sim::World& world, const LeaseScenarioOptions& o, models::DynamoStore& store,
                                           models::StreamNotes& stream_notes, models::WorkerEnvironment& environment) {
  auto streaming = std::make_unique<Streaming>();
  const StreamOptions& s = o.stream;
  models::HubShared& hub = streaming->hub;
  hub.config = s.hub;
  hub.keep_ring = s.keep_ring;
  for (uint32_t i = 0; i < o.connections; ++i) hub.channels.push_back(fmt::format("c{}", i));
  hub.publish_interval = s.publish_interval;
  hub.message_bytes = s.message_bytes;
  hub.publish_until = s.published_until(o.healed_at());
  streaming->hub_node = environment.upstream;
  world.set_stream_node(streaming->hub_node);
  streaming->via = streaming->hub_node;
  if (s.relay_idle) {
    streaming->via = world.add_node("relay", {}, [hub_node = streaming->hub_node, idle = *s.relay_idle] {
      return std::make_unique<models::RelayProcess>(hub_node, idle);
    });
    world.set_stream_node(streaming->via);
  }
  resume::SessionConfig session{s.client, s.mode, resume::SinkTable{}, s.pack_bytes};
  environment.stream = models::StreamEnvironment{session, streaming->via};
  // The sink table is provisioned before the run, like the lease table's
  // infrastructure; its change stream feeds the exactly-once checker.
  LP_ASSERT(store.apply(resume::create_sink_table_request(session.sink), Instant::zero()).ok());
  store.set_stream(session.sink.name, [&stream_notes](const dynamo::Item* old_item, const dynamo::Item* new_item) {
    if (new_item == nullptr) return;
    // "sink.item <connection> <hub epoch> <seq> new|replaced" (the key is
    // "<connection>#<hub epoch>"): one per message a pack holds, in order.
    const std::string& key = new_item->at("pk").text();
    const size_t hash = key.rfind('#');
    LP_ASSERT_MSG(hash != std::string::npos, "sink key '{}'", key);
    // Read here, not with core's parser: the checker must not share the code it judges.
    const auto first = parse_integer<int64_t>(new_item->at("seq").text());
    const auto packed_last = new_item->find("last_seq");
    const auto last = packed_last != new_item->end() ? parse_integer<int64_t>(packed_last->second.text()) : first;
    LP_ASSERT_MSG(first && last && *first <= *last, "sink item '{}' seq", key);
    for (int64_t seq = *first; seq <= *last; ++seq) {
      stream_notes.queued.emplace_back(properties::kSinkItemNote,
                                       fmt::format("{} {} {} {}", std::string_view{key}.substr(0, hash),
                                                   std::string_view{key}.substr(hash + 1), seq,
                                                   old_item != nullptr ? "replaced" : "new"));
    }
  });
  // What recording costs: the sink's units plus the checkpoints' share of
  // the lease table (put and packed modes' UpdateItem; transact mode's
  // transactions, which touch the lease table only to checkpoint).
  store.track_update(o.lease.table.name, resume::kCheckpointUpdateExpression);
  streaming->dead_peers = std::make_unique<properties::DeadPeerChecker>(
      [&world](NodeId node) { return std::string{world.trace().checker_node_name(node)}; },
      // The hub times out the first ping left unanswered, sent at most a ping
      // interval after the death (or the session's open): the network adds
      // nothing. 500 ms of slack covers the hub clock's rate error.
      s.hub.ping_interval + s.hub.pong_timeout + Duration::from_ms(500));
  streaming->storms = std::make_unique<properties::ReconnectStormChecker>(s.client);
  streaming->exactly_once = properties::ExactlyOnceChecker(
      [&world](NodeId node) { return std::string{world.trace().checker_node_name(node)}; });
  // Every message is message_bytes long: the ring holds the fewer of its two bounds.
  streaming->exactly_once.set_hub_ring(
      std::min<uint64_t>(s.hub.ring_messages_max, s.hub.ring_bytes_max / s.message_bytes),
      static_cast<int64_t>(s.hub.replay_messages_max));
  world.trace().add_checker([checker = streaming.get()](const sim::TraceEvent& e) {
    checker->exactly_once.observe(e);
    checker->dead_peers->observe(e);
    checker->storms->observe(e);
  });
  return streaming;
}

void finish_streaming(const LeaseScenarioOptions& o, Streaming& streaming, RunResult& result) {
  const StreamOptions& s = o.stream;
  // Liveness: once publishing has ended, the faults have healed and the last
  // stream fault is over, a minute of quiet before the end means every
  // connection still STARTED has recorded everything (what was published
  // after the heal included).
  std::set<std::string, std::less<>> caught_up;
  Duration quiet_from = std::max(std::min(s.published_until(o.healed_at()), o.duration), o.healed_at());
  for (const Duration at : s.hub_crashes) quiet_from = std::max(quiet_from, at + s.hub_down);
  for (const Duration at : s.mass_closes) quiet_from = std::max(quiet_from, at);
  for (const Duration at : s.crash_while_recording) quiet_from = std::max(quiet_from, at + o.restart_after);
  for (const TimedFault& f : s.hub_slow) quiet_from = std::max(quiet_from, f.at + f.length);
  for (const TimedFault& f : s.cuts) quiet_from = std::max(quiet_from, f.at + f.length);
  if (o.duration - quiet_from >= Duration::from_min(1)) {
    std::set<uint32_t> stopped;
    for (const ConnectionStop& stop : o.stops) stopped.insert(stop.connection);
    for (uint32_t i = 0; i < o.connections; ++i) {
      if (!stopped.contains(i)) caught_up.insert(fmt::format("c{}", i));
    }
  }
  streaming.exactly_once.finish(caught_up);
  streaming.dead_peers->finish(Instant::zero() + o.duration);
  for (const std::string& v : streaming.exactly_once.violations()) result.violations.push_back(v);
  result.violations_unlisted += streaming.exactly_once.violation_count() - streaming.exactly_once.violations().size();
  for (const std::string& v : streaming.dead_peers->violations()) result.violations.push_back(v);
  streaming.storms->finish();
  for (const std::string& v : streaming.storms->violations()) result.violations.push_back(v);
  if (!streaming.storms->waves().empty()) result.summary += "\n" + streaming.storms->summary();
  if (streaming.hub.queue_peak_bytes > s.hub.subscriber_queue_bytes_max) {
    result.violations.push_back(fmt::format("subscriber queue bound: a queue reached {} B, above its bound of {} B",
                                            streaming.hub.queue_peak_bytes, s.hub.subscriber_queue_bytes_max));
  }
  result.summary += "\n" + streaming.exactly_once.summary() + "\n" + streaming.dead_peers->summary() +
                    fmt::format("\nsubscriber queues: peak {} B (bound {} B)", streaming.hub.queue_peak_bytes,
                                s.hub.subscriber_queue_bytes_max);
  result.counters.emplace_back("stream.published", streaming.exactly_once.published());
  result.counters.emplace_back("stream.recorded", streaming.exactly_once.records());
  result.counters.emplace_back("stream.declared_lost", streaming.exactly_once.excused_messages());
  result.counters.emplace_back("stream.resets_judged", streaming.exactly_once.resets_judged());
  result.counters.emplace_back("stream.not_recorded_by_end", streaming.exactly_once.not_yet_recorded());
  result.counters.emplace_back("stream.required_to_catch_up", caught_up.size());
  result.counters.emplace_back("stream.dead_peers_cut", streaming.dead_peers->cut());
  result.counters.emplace_back("stream.queue_peak_bytes", streaming.hub.queue_peak_bytes);
  for (const auto& [kind, count] : streaming.exactly_once.resets_by_kind()) {
    result.counters.emplace_back("stream.reset." + kind, count);
  }
}

}  // namespace

RunResult run_lease(const LeaseScenarioOptions& options, const RunConfig& config) {
  LP_ASSERT_MSG(options.validate().empty(), "{}", options.validate());
  sim::World world{config.seed};
  configure_trace(world, config);
  properties::SimInvariants invariants;
  world.trace().add_checker([&invariants](const sim::TraceEvent& e) { invariants.observe(e); });
  const std::map<GapCause, RecoveryBound> bounds = recovery_bounds(options);
  properties::LeaseCheckers checkers{
      [&world](NodeId node) { return std::string{world.trace().checker_node_name(node)}; }, bounds};
  checkers.set_watcher_bounds(watcher_bounds(options));
  checkers.set_capacity(options.lease.capacity);
  checkers.judge_acquire_rate(options.lease.lease_duration);
  // The articles' algorithm retries as its source does; the two cores are judged.
  if (options.lease.algorithm != lease::Algorithm::seed) {
    const lease::LeaseConfig& c = options.lease;
    checkers.judge_request_rate(properties::RequestRateBounds{c.lease_duration, c.heartbeat_interval, c.retry_backoff,
                                                              c.watch_interval, c.reconcile_interval,
                                                              c.query_pages_max});
  }
  // The articles' acquire has no epoch: its tenures are judged by overlap alone.
  checkers.ownership().set_tenure_epochs_judged(options.lease.algorithm != lease::Algorithm::seed);
  world.trace().add_checker([&checkers](const sim::TraceEvent& e) { checkers.observe(e); });
  if (options.throttle_partition_wcu_per_s > 0) {
    checkers.add_fault_window(Instant::zero(), Instant::zero() + options.healed_at(), "DynamoDB throttling");
  }
  // Coverage: marks (by name) and model events (by label), counted on every
  // note of the run, so counted without building a key for each; ordered
  // (as reported) once at the end.
  using Counts = std::unordered_map<std::string, uint64_t, TextHash, std::equal_to<>>;
  Counts marks;
  Counts notes;
  auto count = [](Counts& counts, std::string_view key) {
    auto it = counts.find(key);
    if (it == counts.end()) it = counts.emplace(std::string{key}, 0).first;
    ++it->second;
  };
  world.trace().add_checker([&marks, &notes, &count](const sim::TraceEvent& e) {
    if (e.kind != sim::EventKind::note) return;
    if (e.label == "mark") {
      count(marks, e.detail);
    } else if (e.label.find('.') != std::string_view::npos &&  // every counted prefix has one
               (e.label.starts_with("lease.") || e.label.starts_with("control.") || e.label.starts_with("upstream.") ||
                e.label.starts_with("autoscaler.") || e.label.starts_with("deploy.") ||
                e.label.starts_with("resume.") || e.label.starts_with("hub.") || e.label.starts_with("relay."))) {
      count(notes, e.label);
    }
  });

  const LeaseScenarioOptions& o = options;
  world.set_default_link(sim::LinkConfig{link_latency(o), o.loss, false});
  models::DynamoStore store{store_options(o), sim::derive_seed(config.seed, "lease/dynamo")};
  models::SqsState sqs_state;
  sqs_state.create_queue("releases");
  models::StreamNotes stream_notes;  // the sink's records (set up with streaming)
  // Write throttles: (worker node, from, until), filled once the fleet exists.
  std::vector<std::tuple<NodeId, Instant, Instant>> throttled_writers;
  uint64_t writes_refused = 0;
  const models::WriteRefusal refusal = [&world, &throttled_writers, &writes_refused](NodeId from) {
    const Instant now = world.now();
    for (const auto& [node, begin, end] : throttled_writers) {
      if (node == from && begin <= now && now < end) {
        ++writes_refused;
        return true;
      }
    }
    return false;
  };
  const NodeId dynamo = world.add_node("dynamodb", {}, [&store, &stream_notes, &config, &o, &refusal] {
    // The lease epoch after each write, in the trace: the ownership checker
    // judges every accepted write by it (DESIGN.md section 4).
    auto node = std::make_unique<models::DynamoNode>(store, "lease_epoch", &stream_notes, &config.observe_dynamo);
    if (!o.write_throttles.empty()) node->refuse_writes(&refusal);
    return node;
  });
  const NodeId sqs = world.add_node("sqs", {}, [&sqs_state] { return std::make_unique<models::SqsNode>(sqs_state); });
  models::HubShared* hub_shared = nullptr;
  std::unique_ptr<Streaming> streaming;
  NodeId upstream;
  if (o.stream.enabled) {
    upstream = world.add_node("upstream", {}, [&hub_shared] { return std::make_unique<models::HubProcess>(*hub_shared); });
  } else {
    upstream = world.add_node("upstream", {}, [] { return std::make_unique<models::UpstreamEndpoint>(); });
  }

  const bool seed_algorithm = o.lease.algorithm == lease::Algorithm::seed;
  models::WorkerEnvironment environment;  // SQS poll interval and timeout: the defaults recovery_bounds() uses
  environment.config = o.lease;
  environment.dynamo = dynamo;
  environment.sqs = sqs;
  environment.upstream = upstream;
  environment.notify_releases = !seed_algorithm;
  environment.sqs_wait = o.sqs_wait;
  environment.stable_worker_ids = o.stable_worker_ids;
  if (o.stream.enabled) {
    streaming = start_streaming(world, o, store, stream_notes, environment);
    hub_shared = &streaming->hub;
  }
  environment.fault_sites["lease.renew.skip"] =
      world.faults().declare({"lease.renew.skip", Ratio{1, 2}, {Ratio{1, 1000}, Ratio{1, 100}}});
  // Leases never go through the hub or the relay, and a skipped renew acts on
  // one lease of its worker: neither can delay another lease's recovery.
  checkers.ignore_fault_site("lease.renew.skip");
  // An owner learns of a stop from its next renew (refused: the item is
  // STOPPED); whatever the network does, its deadline, lease - margin after
  // its last renew sent before the stop, ends its acting within a lease.
  checkers.set_stop_bound(stop_bound(o));
  checkers.ignore_faults_at(upstream);
  if (streaming && streaming->via != upstream) checkers.ignore_faults_at(streaming->via);
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
  for (const WorkerFault& f : o.write_throttles) {
    const NodeId worker = fleet.all()[f.worker];
    const Instant begin = Instant::zero() + f.at;
    throttled_writers.emplace_back(worker, begin, begin + f.length);
    checkers.add_fault_window(begin, begin + f.length,
                              fmt::format("writes of {} throttled", world.trace().checker_node_name(worker)), worker);
  }
  for (const auto& [faults, service, name] : {std::tuple{&o.refusals, dynamo, "DynamoDB"},
                                               std::tuple{&o.sqs_refusals, sqs, "SQS"}}) {
    for (const WorkerFault& f : *faults) {
      const NodeId worker = fleet.all()[f.worker];
      const Instant begin = Instant::zero() + f.at;
      world.refuse(worker, service, begin, begin + f.length);
      checkers.add_fault_window(
          begin, begin + f.length,
          fmt::format("{} requests of {} refused", name, world.trace().checker_node_name(worker)), worker);
    }
  }
  uint64_t twins_started = 0;
  for (const WorkerFault& f : o.twins) {
    world.at(Instant::zero() + f.at, [&world, &fleet, &twins_started, f] {
      ++twins_started;
      const NodeId twin = fleet.start_twin(f.worker);
      world.at(world.now() + f.length, [&world, twin] { world.crash(twin); });
    });
  }
  uint64_t late_notices_sent = 0;
  if (o.late_notices && !o.write_throttles.empty() && !seed_algorithm) {
    const NodeId sender = world.add_node("late-notices", {}, [] { return std::make_unique<FaultSender>(); });
    schedule_late_notices(world, o, fleet, store, sqs, sender, late_notices_sent);
  }
  if (streaming) schedule_hub_faults(world, o, fleet, *streaming);
  std::unique_ptr<models::RollingDeploy> deploy;
  if (o.deploy_at) {
    models::DeployOptions deploy_options;
    // Stable worker ids come with a StatefulSet's rollout: two processes of one id never run together.
    deploy_options.in_place = o.stable_worker_ids;
    deploy = std::make_unique<models::RollingDeploy>(world, fleet, deploy_options);
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
  // throttling, no fault site firing (scheduled faults already end by then).
  world.at(Instant::zero() + o.healed_at(), [&world, &store, &o] {
    world.set_every_link(sim::LinkConfig{link_latency(o), Ratio::zero(), false});
    store.set_throttling(false);
    world.faults().heal();
  });
  if (config.before_run) config.before_run(world);
  BackgroundChecks background{world.trace(), config};
  world.run_until(Instant::zero() + o.duration);
  if (autoscaler) autoscaler->stop();
  const bool checked_in_background = background.finish();

  RunResult result = world_result(world, config, o.duration, o.describe());
  result.background_checks = checked_in_background;
  if (o.lease.algorithm == lease::Algorithm::seed) {
    result.failure_expected = "the articles' algorithm (algorithm seed), a baseline with known flaws";
  } else if (std::string beyond = o.beyond_assumptions(); !beyond.empty()) {
    result.failure_expected = "faults beyond the algorithm's assumptions: " + beyond;
  }
  const Instant end = Instant::zero() + o.duration;
  const Duration liveness_bound = bounds.at(GapCause::crash).total();
  checkers.check_liveness(Instant::zero() + o.healed_at(), liveness_bound, end);
  result.violations = invariants.violations();
  std::vector<std::string> checker_violations = checkers.violations();
  result.violations_unlisted = invariants.violation_count() - result.violations.size() + checkers.violation_count() -
                               checker_violations.size();
  for (std::string& violation : checker_violations) result.violations.push_back(std::move(violation));
  result.inconclusive = inconclusive_reason(o, checkers, liveness_bound);
  result.summary = checkers.summary();
  if (streaming) finish_streaming(o, *streaming, result);
  std::map<std::string, uint64_t, LexLess> ordered(notes.begin(), notes.end());
  for (const auto& [name, times] : marks) ordered.emplace(fmt::format("mark.{}", name), times);
  for (const auto& [name, times] : ordered) result.counters.emplace_back(name, times);
  result.metrics = lease_metrics(o, checkers, bounds, watcher_bounds(o), store);
  const models::TableAccounting& table = store.accounting(o.lease.table.name);
  if (!o.holds.empty()) result.counters.emplace_back("network.held", world.held_messages());
  if (!o.write_throttles.empty()) result.counters.emplace_back("dynamo.writes_throttled_by_fault", writes_refused);
  if (!o.refusals.empty() || !o.sqs_refusals.empty()) {
    result.counters.emplace_back("network.requests_refused", world.refused_requests());
  }
  if (o.late_notices) result.counters.emplace_back("sqs.late_notices_sent", late_notices_sent);
  if (!o.twins.empty()) result.counters.emplace_back("fleet.twins_started", twins_started);
  result.counters.emplace_back("dynamo.wcu", static_cast<uint64_t>(table.table.write_units));
  for (const auto& [index, units] : table.indexes) {
    result.counters.emplace_back("dynamo.gsi_wcu." + index, static_cast<uint64_t>(units.write_units));
  }
  result.counters.emplace_back("dynamo.rcu_half", static_cast<uint64_t>(table.table.read_half_units));
  if (streaming) {
    // Recording's write units: the sink's, and the checkpoints' share of the
    // lease table (transact mode's transactions touch it only to checkpoint).
    const models::TableAccounting& sink = store.accounting(resume::SinkTable{}.name);
    const int64_t checkpoints = o.stream.mode == resume::RecordMode::transact ? table.transact_write_units
                                                                               : table.tracked_update_write_units;
    result.counters.emplace_back("dynamo.sink_wcu", static_cast<uint64_t>(sink.table.write_units));
    result.counters.emplace_back("dynamo.checkpoint_wcu", static_cast<uint64_t>(checkpoints));
    const uint64_t recorded = streaming->exactly_once.records();
    result.summary += fmt::format(
        "\nrecording cost ({}): {:.3f} WCU per recorded message ({} sink + {} checkpoint WCU for {} records)",
        resume::to_string(o.stream.mode),
        recorded == 0 ? 0.0 : static_cast<double>(sink.table.write_units + checkpoints) / static_cast<double>(recorded),
        sink.table.write_units, checkpoints, recorded);
  }
  result.counters.emplace_back("dynamo.scans", static_cast<uint64_t>(table.scan));
  result.counters.emplace_back("dynamo.throttled", static_cast<uint64_t>(table.throttled_requests));
  result.counters.emplace_back("recovery.watched_gaps_past_assumed_timeouts",
                               checkers.recovery().gaps_past_watcher_timeouts());
  return result;
}

std::map<properties::GapCause, properties::RecoveryBound> lease_recovery_bounds(const LeaseScenarioOptions& options) {
  return recovery_bounds(options);
}

std::map<properties::GapCause, properties::RecoveryBound> lease_watcher_bounds(const LeaseScenarioOptions& options) {
  return watcher_bounds(options);
}

}  // namespace leaseproof::scenarios
