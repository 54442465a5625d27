#include "scenarios/kernel.hpp"

#include <memory>

#include <fmt/format.h>

#include "properties/sim_invariants.hpp"

namespace leaseproof::scenarios {
namespace {

using sim::Envelope;
using sim::Message;
using sim::NodeContext;

struct KernelRequest final : sim::Payload {
  explicit KernelRequest(uint64_t s) : sequence(s) {}
  uint64_t sequence;
};
struct KernelReply final : sim::Payload {
  explicit KernelReply(uint64_t s) : sequence(s) {}
  uint64_t sequence;
};

constexpr std::string_view kRequest = "kernel.request";
constexpr std::string_view kReply = "kernel.reply";

// What the harness learns from the processes (it outlives them).
struct Shared {
  const KernelOptions* options = nullptr;
  sim::World* world = nullptr;
  std::vector<NodeId> servers;
  sim::FaultSiteId slow_reply;
  sim::FaultSiteId drop_request;
  sim::FaultSiteId hang_on_sigterm;
  uint64_t requests = 0;
  uint64_t replies = 0;
  uint64_t timeouts = 0;
  std::vector<Instant> last_reply;  // true time, per client
};

class KernelServer final : public sim::Process {
 public:
  explicit KernelServer(Shared& shared) : shared_(shared) {}
  void on_start(NodeContext&) override {}
  void on_message(NodeContext& context, const Envelope& envelope) override {
    LP_ASSERT(envelope.message.type == kRequest);
    if (context.fault(shared_.drop_request)) return;
    const uint64_t sequence = envelope.message.as<KernelRequest>().sequence;
    if (context.fault(shared_.slow_reply)) {
      const Duration delay = context.prng().uniform_duration(Duration::zero(), Duration::from_s(2));
      context.set_timer(delay, "slow_reply", [&context, envelope, sequence] {
        context.reply(envelope, reply(sequence));
      });
      return;
    }
    context.reply(envelope, reply(sequence));
  }

 private:
  static Message reply(uint64_t sequence) {
    return Message{kReply, 64, std::make_shared<KernelReply>(sequence)};
  }
  Shared& shared_;
};

class KernelClient final : public sim::Process {
 public:
  KernelClient(Shared& shared, uint32_t index) : shared_(shared), index_(index) {}

  void on_start(NodeContext& context) override { schedule_next(context); }
  void on_message(NodeContext&, const Envelope& envelope) override {
    LP_UNREACHABLE("client got an unexpected '{}'", envelope.message.type);
  }
  void on_sigterm(NodeContext& context) override {
    draining_ = true;
    if (context.fault(shared_.hang_on_sigterm)) {
      hanging_ = true;  // never exits: the orchestrator's SIGKILL ends it
      return;
    }
    if (in_flight_ == 0) context.exit();
  }

 private:
  void schedule_next(NodeContext& context) {
    const Duration delay =
        context.prng().uniform_duration(Duration::from_ms(1), shared_.options->request_interval_max);
    context.set_timer(delay, "request", [this, &context] { issue(context); });
  }

  void issue(NodeContext& context) {
    if (draining_) return;
    const uint64_t sequence = ++next_sequence_;
    const NodeId server = shared_.servers[context.prng().index(shared_.servers.size())];
    ++in_flight_;
    ++shared_.requests;
    context.call(server, Message{kRequest, 64, std::make_shared<KernelRequest>(sequence)},
                 shared_.options->rpc_timeout, [this, &context, sequence](const Envelope* reply) {
                   on_reply(context, sequence, reply);
                 });
    schedule_next(context);
  }

  void on_reply(NodeContext& context, uint64_t sequence, const Envelope* reply) {
    LP_ASSERT_GT(in_flight_, 0u);
    --in_flight_;
    if (reply == nullptr) {
      ++shared_.timeouts;
    } else {
      LP_ASSERT(reply->message.type == kReply);
      LP_ASSERT_EQ(reply->message.as<KernelReply>().sequence, sequence);
      ++shared_.replies;
      shared_.last_reply[index_] = shared_.world->now();
    }
    if (draining_ && !hanging_ && in_flight_ == 0) context.exit();
  }

  Shared& shared_;
  uint32_t index_;
  uint64_t next_sequence_ = 0;
  uint32_t in_flight_ = 0;
  bool draining_ = false;
  bool hanging_ = false;
};

std::string_view to_string(KernelFault::Kind kind) {
  switch (kind) {
    case KernelFault::Kind::crash: return "crash";
    case KernelFault::Kind::pause: return "pause";
    case KernelFault::Kind::sigterm: return "sigterm";
    case KernelFault::Kind::partition: return "partition";
    case KernelFault::Kind::clog: return "clog";
  }
  LP_UNREACHABLE("fault kind {}", static_cast<int>(kind));
}

// Lengths of each kind of fault, drawn from the seed.
Duration fault_length(sim::Prng& prng, KernelFault::Kind kind) {
  using K = KernelFault::Kind;
  switch (kind) {
    case K::crash: return prng.uniform_duration(Duration::from_s(1), Duration::from_s(20));
    case K::pause: return prng.uniform_duration(Duration::from_ms(100), Duration::from_s(40));
    case K::sigterm: return prng.uniform_duration(Duration::from_s(1), Duration::from_s(10));
    case K::partition: return prng.uniform_duration(Duration::from_s(1), Duration::from_s(60));
    case K::clog: return prng.uniform_duration(Duration::from_ms(100), Duration::from_s(10));
  }
  LP_UNREACHABLE("fault kind {}", static_cast<int>(kind));
}

void draw_faults(sim::Prng& prng, KernelOptions& options) {
  const uint32_t nodes = options.servers + options.clients;
  using K = KernelFault::Kind;
  for (K kind : {K::crash, K::pause, K::sigterm, K::partition, K::clog}) {
    if (!prng.chance(Ratio{3, 4})) continue;
    const uint64_t count = 1 + prng.below(3);
    for (uint64_t i = 0; i < count; ++i) {
      KernelFault fault{kind, Instant::zero(), fault_length(prng, kind), 0, 0, false};
      // The whole fault, including a restart after SIGTERM, ends by heal_at.
      const Duration busy = fault.length + (kind == K::sigterm ? options.stop_timeout : Duration::zero());
      const Duration latest_start = options.heal_at.since_zero() - busy;
      if (latest_start.is_negative()) continue;
      fault.at = Instant::zero() + prng.uniform_duration(Duration::zero(), latest_start);
      fault.node = static_cast<uint32_t>(prng.below(nodes));
      fault.peer = static_cast<uint32_t>((fault.node + 1 + prng.below(nodes - 1)) % nodes);
      fault.both_ways = prng.chance(Ratio{1, 2});
      options.faults.push_back(fault);
    }
  }
}

}  // namespace

KernelOptions kernel_options_from_seed(uint64_t seed, Duration duration) {
  LP_ASSERT_GT(duration, Duration::zero());
  sim::Prng prng{sim::derive_seed(seed, "kernel/options")};
  KernelOptions options;
  options.duration = duration;
  options.heal_at = Instant::zero() + duration * 7 / 10;
  options.servers = 2 + static_cast<uint32_t>(prng.below(2));
  options.clients = 2 + static_cast<uint32_t>(prng.below(3));
  for (uint32_t i = 0; i < options.servers + options.clients; ++i) {
    sim::ClockModel clock;
    clock.offset = prng.uniform_duration(Duration::from_s(-5), Duration::from_s(5));
    clock.drift_ppm = prng.uniform(-500, 501);
    clock.monotonic_origin = Instant::zero() + prng.uniform_duration(Duration::from_s(1), Duration::from_h(100));
    const uint64_t steps = prng.below(3);
    for (uint64_t s = 0; s < steps; ++s) {
      clock.steps.push_back(sim::ClockStep{
          Instant::zero() + prng.uniform_duration(Duration::zero(), options.heal_at.since_zero()),
          prng.uniform_duration(Duration::from_s(-3), Duration::from_s(3))});
    }
    options.clocks.push_back(std::move(clock));
  }
  options.link.latency.base = prng.uniform_duration(Duration::from_ms(1), Duration::from_ms(5));
  options.link.latency.jitter = prng.uniform_duration(Duration::zero(), Duration::from_ms(20));
  const Ratio tails[] = {Ratio::zero(), Ratio{1, 100}, Ratio{1, 20}};
  options.link.latency.tail_chance = tails[prng.index(3)];
  options.link.latency.tail_max = prng.uniform_duration(Duration::from_ms(100), Duration::from_s(2));
  const Ratio losses[] = {Ratio::zero(), Ratio{1, 1000}, Ratio{1, 100}, Ratio{1, 20}};
  options.link.loss = losses[prng.index(4)];
  options.request_interval_max = prng.uniform_duration(Duration::from_ms(50), Duration::from_s(1));
  options.rpc_timeout = prng.uniform_duration(Duration::from_ms(200), Duration::from_s(2));
  draw_faults(prng, options);
  return options;
}

std::string KernelOptions::describe() const {
  std::string text = fmt::format(
      "servers={} clients={} duration={} heal_at={} latency={}+[0,{}] tail={}x[0,{}] loss={} "
      "request_interval_max={} rpc_timeout={} stop_timeout={}",
      servers, clients, duration, heal_at.since_zero(), link.latency.base, link.latency.jitter,
      link.latency.tail_chance, link.latency.tail_max, link.loss, request_interval_max, rpc_timeout,
      stop_timeout);
  for (size_t i = 0; i < clocks.size(); ++i) {
    text += fmt::format("\n  clock[{}]: offset={} drift={}ppm", i, clocks[i].offset, clocks[i].drift_ppm);
    for (const sim::ClockStep& step : clocks[i].steps) text += fmt::format(" step({} at {})", step.jump, step.at.since_zero());
  }
  for (const KernelFault& fault : faults) {
    text += fmt::format("\n  fault: {} node={} at={} length={}", to_string(fault.kind), fault.node,
                        fault.at.since_zero(), fault.length);
    if (fault.kind == KernelFault::Kind::partition || fault.kind == KernelFault::Kind::clog) {
      text += fmt::format(" peer={}{}", fault.peer, fault.both_ways ? " both-ways" : "");
    }
  }
  return text;
}

namespace {

void schedule_fault(sim::World& world, const KernelOptions& options, const KernelFault& fault,
                    const std::vector<NodeId>& nodes) {
  const NodeId node = nodes[fault.node];
  const NodeId peer = nodes[fault.peer];
  const Instant end = fault.at + fault.length;
  switch (fault.kind) {
    case KernelFault::Kind::crash:
      world.at(fault.at, [&world, node] { world.crash(node); });
      world.at(end, [&world, node] { world.restart(node); });
      break;
    case KernelFault::Kind::pause:
      world.at(fault.at, [&world, node, length = fault.length] { world.pause(node, length); });
      break;
    case KernelFault::Kind::sigterm:
      world.at(fault.at, [&world, node, stop = options.stop_timeout] { world.sigterm(node, stop); });
      world.at(end + options.stop_timeout, [&world, node] { world.restart(node); });
      break;
    case KernelFault::Kind::partition:
      world.partition(node, peer, fault.at, end);
      if (fault.both_ways) world.partition(peer, node, fault.at, end);
      break;
    case KernelFault::Kind::clog:
      world.clog(node, peer, fault.at, end);
      if (fault.both_ways) world.clog(peer, node, fault.at, end);
      break;
  }
}

// The liveness phase must be long enough for a request interval, a timeout and
// a retry; shorter runs report the check as skipped rather than pass it.
constexpr Duration kLivenessPhaseMin = Duration::from_s(10);

}  // namespace

RunResult run_kernel(const KernelOptions& options, const RunConfig& config) {
  LP_ASSERT_EQ(options.clocks.size(), options.servers + options.clients);
  sim::World world{config.seed};
  configure_trace(world, config);
  properties::SimInvariants invariants;
  world.trace().add_observer([&invariants](const sim::TraceEvent& e) { invariants.observe(e); });
  std::map<std::string, uint64_t, std::less<>> drops;
  world.trace().add_observer([&drops](const sim::TraceEvent& e) {
    if (e.kind == sim::EventKind::drop) ++drops[std::string{e.label}];
    if (e.kind == sim::EventKind::crash && e.label == "sigkill") ++drops["(sigkill)"];
  });

  Shared shared;
  shared.options = &options;
  shared.world = &world;
  shared.slow_reply = world.faults().declare({"kernel.server.slow_reply"});
  shared.drop_request = world.faults().declare({"kernel.server.drop_request"});
  shared.hang_on_sigterm = world.faults().declare({"kernel.client.hang_on_sigterm", Ratio{1, 2}, {Ratio::one()}});
  shared.last_reply.assign(options.clients, Instant::zero());
  world.set_default_link(options.link);

  std::vector<NodeId> nodes;
  for (uint32_t i = 0; i < options.servers; ++i) {
    nodes.push_back(world.add_node(fmt::format("server-{}", i), options.clocks[i],
                                   [&shared] { return std::make_unique<KernelServer>(shared); }));
    shared.servers.push_back(nodes.back());
  }
  for (uint32_t i = 0; i < options.clients; ++i) {
    nodes.push_back(world.add_node(fmt::format("client-{}", i), options.clocks[options.servers + i],
                                   [&shared, i] { return std::make_unique<KernelClient>(shared, i); }));
  }
  for (const KernelFault& fault : options.faults) schedule_fault(world, options, fault, nodes);
  // Whatever is still down when faults end is started again: the liveness
  // phase runs with every node up.
  world.at(options.heal_at, [&world, &nodes] {
    for (NodeId node : nodes) world.restart(node);
  });
  if (config.before_run) config.before_run(world);
  world.run_until(Instant::zero() + options.duration);

  RunResult result = world_result(world, config, options.duration, options.describe());
  result.violations = invariants.violations();
  if (invariants.violation_count() > result.violations.size()) {
    result.violations.push_back(fmt::format("... {} violations in all", invariants.violation_count()));
  }
  const bool liveness_checked = options.duration - options.heal_at.since_zero() >= kLivenessPhaseMin;
  if (liveness_checked) {
    for (uint32_t i = 0; i < options.clients; ++i) {
      if (shared.last_reply[i] < options.heal_at) {
        result.violations.push_back(fmt::format(
            "liveness: client-{} got no reply after faults healed at {} (last reply at {})", i,
            options.heal_at.since_zero(), shared.last_reply[i].since_zero()));
      }
    }
  }
  const sim::Trace& trace = world.trace();
  using K = sim::EventKind;
  result.counters = {
      {"requests", shared.requests},
      {"replies", shared.replies},
      {"timeouts", shared.timeouts},
      {"drops.loss", drops["loss"]},
      {"drops.partition", drops["partition"]},
      {"drops.receiver_down", drops["receiver_down"]},
      {"drops.late_reply", drops["late_reply"]},
      {"crashes", trace.count_of(K::crash)},
      {"sigkills", drops["(sigkill)"]},
      {"restarts", trace.count_of(K::restart)},
      {"pauses", trace.count_of(K::pause)},
      {"resumes_with_waiting_work", invariants.deferred_deliveries()},
      {"sigterms", trace.count_of(K::sigterm)},
      {"exits", trace.count_of(K::exit)},
      {"clock_steps", trace.count_of(K::clock_step)},
      {"partitions", trace.count_of(K::partition_start)},
      {"clogs", trace.count_of(K::clog_start)},
      {"faults_fired", trace.count_of(K::fault)},
      {"deliveries_checked", invariants.deliveries_checked()},
      {"liveness_checked", liveness_checked ? 1u : 0u},
  };
  return result;
}

}  // namespace leaseproof::scenarios
