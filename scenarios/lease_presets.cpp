// The named lease scenarios.
#include "scenarios/lease.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "sim/prng.hpp"

namespace leaseproof::scenarios {
namespace {

using D = Duration;

WorkerFault fault(uint32_t worker, Duration at, Duration length) { return WorkerFault{worker, at, length}; }

// Streaming traffic and hub faults for the swarm: rings small enough that
// outages evict (and replays exceed their limit), hub restarts with and
// without the ring, mass closes, cuts, a slow hub, sometimes a relay.
void swarm_stream(uint64_t seed, LeaseScenarioOptions& o) {
  sim::Prng prng{sim::derive_seed(seed, "lease/swarm-stream")};
  StreamOptions& s = o.stream;
  const Duration heal = o.healed_at();
  s.enabled = true;
  s.mode = prng.chance(Ratio{1, 2}) ? resume::RecordMode::transact : resume::RecordMode::put;
  // A message every 5 s per connection keeps a seed cheap; rings of 4 to 60
  // messages (20 s to 5 min) make crashes, pauses and partitions evict.
  s.publish_interval = D::from_s(5);
  s.hub.ring_messages_max = 4 + static_cast<uint32_t>(prng.below(57));
  s.hub.replay_messages_max = 2 + static_cast<uint32_t>(prng.below(s.hub.ring_messages_max - 1));
  s.client.record_batch_max = 1 + static_cast<uint32_t>(prng.below(25));
  s.keep_ring = prng.chance(Ratio{1, 2});
  for (uint64_t i = prng.below(3); i > 0; --i) s.hub_crashes.push_back(prng.uniform_duration(D::zero(), heal));
  s.hub_down = prng.uniform_duration(D::from_ms(100), D::from_s(20));
  if (prng.chance(Ratio{1, 3})) s.mass_closes.push_back(prng.uniform_duration(D::zero(), heal));
  // A fault that cannot end before the heal (a run of a few seconds) is not
  // scheduled; the draws of longer runs are as they were.
  for (uint64_t i = prng.below(3); i > 0; --i) {
    const Duration length = prng.uniform_duration(D::from_ms(100), D::from_s(5));
    if (length > heal) continue;
    s.cuts.push_back(TimedFault{prng.uniform_duration(D::zero(), heal - length), length});
  }
  if (prng.chance(Ratio{1, 3})) {
    const Duration length = prng.uniform_duration(D::from_s(1), D::from_s(10));
    if (length <= heal) s.hub_slow.push_back(TimedFault{prng.uniform_duration(D::zero(), heal - length), length});
  }
  // An idle cut-off longer than the ping interval: pings keep streams up.
  if (prng.chance(Ratio{1, 3})) s.relay_idle = prng.uniform_duration(D::from_ms(2500), D::from_s(60));
  // Keepalive: a ping every 1 to 8 s, so that seeds differ here too (dead
  // peers are cut within ping interval + pong timeout, whatever it is); below
  // the client's 10 s hub-silence limit, and at most half the relay's idle
  // cut-off, so that pings keep streams up.
  Duration ping_max = D::from_s(8);
  if (s.relay_idle) ping_max = std::min(ping_max, *s.relay_idle / 2);
  s.hub.ping_interval = prng.uniform_duration(D::from_s(1), ping_max);
  // A third of the seeds linger over partial batches (up to three messages
  // at this publish rate). Drawn from a stream of its own so that the draws
  // above, and every seed that does not linger, stay as they were.
  sim::Prng linger{sim::derive_seed(seed, "lease/swarm-stream-linger")};
  if (linger.chance(Ratio{1, 3})) s.client.record_linger = linger.uniform_duration(D::from_ms(100), D::from_s(15));
  // Half the put-mode seeds pack, into items of 1 to 4 KiB (4 to 15 of the
  // swarm's 256-byte messages): a replay after an outage delivers many
  // messages at once, and a batch is split into several packs. Its own
  // stream: every other draw stays as it was.
  sim::Prng pack{sim::derive_seed(seed, "lease/swarm-stream-pack")};
  if (s.mode == resume::RecordMode::put && pack.chance(Ratio{1, 2})) {
    s.mode = resume::RecordMode::packed;
    s.pack_bytes = static_cast<uint32_t>(pack.uniform(resume::kPackBytesMin, 4 * 1024));
  }
}

// The lease-backed streaming presets; times are fractions of the run.
std::optional<LeaseScenarioOptions> stream_preset(std::string_view name, LeaseScenarioOptions o) {
  StreamOptions& s = o.stream;
  s.enabled = true;
  const Duration d = o.duration;
  if (name == "stream-steady") return o;
  if (name == "stream-cuts") {
    // Cut twice in the middle of publishing; a replay races new messages.
    o.workers = 1;
    o.connections = 1;
    s.publish_interval = D::from_ms(100);
    s.cuts = {TimedFault{d * 2 / 9, D::from_s(1)}, TimedFault{d * 4 / 9, D::from_s(1)}};
    return o;
  }
  if (name == "stream-hub-restart" || name == "stream-hub-restart-kept") {
    o.workers = 3;
    o.connections = 20;
    s.keep_ring = name == "stream-hub-restart-kept";
    s.hub_crashes = {d / 5, d / 2};
    s.hub_down = D::from_s(5);
    return o;
  }
  if (name == "stream-crash-recording") {
    o.workers = 3;
    o.connections = 20;
    s.publish_interval = D::from_ms(200);
    s.crash_while_recording = {d / 5, d * 2 / 5, d * 3 / 5};
    return o;
  }
  return std::nullopt;
}

// Requests held in flight past a lease (from their own stream: the other
// draws stay as they were): a worker's requests sent during a window arrive
// between half a lease and three leases late, out of order, after its tenure
// may have ended and a newer one (its own or another worker's) begun. What
// the epoch conditions fence (DESIGN.md section 4).
void swarm_holds(uint64_t seed, LeaseScenarioOptions& o) {
  sim::Prng prng{sim::derive_seed(seed, "lease/swarm-holds")};
  if (!prng.chance(Ratio{1, 3})) return;
  const Duration lease = o.lease.lease_duration;
  o.hold_delay = prng.uniform_duration(lease, lease * 3);
  const uint64_t count = 1 + prng.below(2);
  for (uint64_t i = 0; i < count; ++i) {
    const Duration length = prng.uniform_duration(D::from_s(1), lease * 2);
    const Duration latest = o.healed_at() - length - o.hold_delay;
    if (latest <= D::zero()) continue;
    o.holds.push_back(fault(static_cast<uint32_t>(prng.below(o.workers)), prng.uniform_duration(D::zero(), latest),
                            length));
  }
}

// A worker whose writes are throttled while its reads go through (from its
// own stream), in one seed in four: for 1 s up to two leases, its renews
// fail while it still reads its leases, its acquires fail while it still
// reads the expired leases it watches. In half of those seeds, late
// duplicate release notices of its leases (late_notices).
void swarm_write_throttles(uint64_t seed, LeaseScenarioOptions& o) {
  sim::Prng prng{sim::derive_seed(seed, "lease/swarm-write-throttles")};
  if (!prng.chance(Ratio{1, 4})) return;
  const uint64_t count = 1 + prng.below(2);
  for (uint64_t i = 0; i < count; ++i) {
    const Duration length = prng.uniform_duration(D::from_s(1), o.lease.lease_duration * 2);
    if (length >= o.healed_at()) continue;
    o.write_throttles.push_back(fault(static_cast<uint32_t>(prng.below(o.workers)),
                                      prng.uniform_duration(D::zero(), o.healed_at() - length), length));
  }
  o.late_notices = prng.chance(Ratio{1, 2});
}

// Requests refused at once (their own stream): in one seed in four, one or
// two windows of 1 s up to 3 minutes in which a worker's DynamoDB calls fail
// 1 ms after they are sent, as a closed port, an expired certificate or a
// server that resets answers, instead of at their timeout; in one in eight,
// the same for its SQS calls.
void swarm_refusals(uint64_t seed, LeaseScenarioOptions& o) {
  sim::Prng prng{sim::derive_seed(seed, "lease/swarm-refusals")};
  const auto draw = [&](Ratio chance, std::vector<WorkerFault>& out) {
    if (!prng.chance(chance)) return;
    const uint64_t count = 1 + prng.below(2);
    for (uint64_t i = 0; i < count; ++i) {
      const Duration length = prng.uniform_duration(D::from_s(1), D::from_min(3));
      if (length >= o.healed_at()) continue;
      out.push_back(fault(static_cast<uint32_t>(prng.below(o.workers)),
                          prng.uniform_duration(D::zero(), o.healed_at() - length), length));
    }
  };
  draw(Ratio{1, 4}, o.refusals);
  draw(Ratio{1, 8}, o.sqs_refusals);
}

// Two processes with one worker id (their own stream), in one seed in three
// of those with stable ids: one or two windows of 5 s to 3 minutes in which
// a second process runs under a worker's id beside it.
void swarm_twins(uint64_t seed, LeaseScenarioOptions& o) {
  sim::Prng prng{sim::derive_seed(seed, "lease/swarm-twins")};
  if (!o.stable_worker_ids || !prng.chance(Ratio{1, 3})) return;
  const uint64_t count = 1 + prng.below(2);
  for (uint64_t i = 0; i < count; ++i) {
    const Duration length = prng.uniform_duration(D::from_s(5), D::from_min(3));
    if (length >= o.healed_at()) continue;
    o.twins.push_back(fault(static_cast<uint32_t>(prng.below(o.workers)),
                            prng.uniform_duration(D::zero(), o.healed_at() - length), length));
  }
}

// Stable worker ids (from their own stream), as real workers started with
// `--worker-id` keep theirs: a restarted worker takes its predecessor's
// leases back under a new epoch, and deploys replace workers in place.
void swarm_identity(uint64_t seed, LeaseScenarioOptions& o) {
  sim::Prng prng{sim::derive_seed(seed, "lease/swarm-ids")};
  o.stable_worker_ids = prng.chance(Ratio{1, 2});
  swarm_twins(seed, o);
}

// A random mix of every fault, inside the algorithm's stated assumptions,
// drawn from the seed (the swarm). Small fleets, 10 simulated minutes.
LeaseScenarioOptions swarm(uint64_t seed, LeaseScenarioOptions o) {
  sim::Prng prng{sim::derive_seed(seed, "lease/swarm")};
  o.workers = 3 + static_cast<uint32_t>(prng.below(3));
  o.connections = 50;
  const Duration heal = o.healed_at();
  if (prng.chance(Ratio{3, 4})) {
    o.crash_every = prng.uniform_duration(D::from_min(1), D::from_min(4));
    o.restart_after = prng.uniform_duration(D::from_s(1), D::from_s(30));
  }
  auto draw_faults = [&](std::vector<WorkerFault>& out, Duration longest) {
    const uint64_t count = prng.below(3);
    for (uint64_t i = 0; i < count; ++i) {
      const Duration length = prng.uniform_duration(D::from_s(1), longest);
      if (length >= heal) continue;
      out.push_back(fault(static_cast<uint32_t>(prng.below(o.workers)),
                          prng.uniform_duration(D::zero(), heal - length), length));
    }
  };
  draw_faults(o.pauses, D::from_s(45));      // pauses longer than the lease too
  draw_faults(o.partitions, D::from_s(60));  // worker <-> DynamoDB
  const Ratio losses[] = {Ratio::zero(), Ratio{1, 100}, Ratio{1, 20}};
  o.loss = losses[prng.index(3)];
  if (prng.chance(Ratio{1, 4})) o.throttle_partition_wcu_per_s = 3 + static_cast<int64_t>(prng.below(6));
  const uint64_t stops = prng.below(3);  // connections the control plane stops
  for (uint64_t i = 0; i < stops; ++i) {
    o.stops.push_back(ConnectionStop{static_cast<uint32_t>(prng.below(o.connections)),
                                     prng.uniform_duration(D::zero(), heal)});
  }
  if (prng.chance(Ratio{1, 4}) && heal > D::from_min(3)) {
    o.deploy_at = prng.uniform_duration(D::from_s(30), heal - D::from_min(2));
  }
  swarm_stream(seed, o);
  swarm_holds(seed, o);
  swarm_identity(seed, o);
  swarm_write_throttles(seed, o);
  swarm_refusals(seed, o);
  o.tenure_returns = sim::Prng{sim::derive_seed(seed, "lease/swarm-tenure")}.chance(Ratio{1, 10});
  return o;
}

// Clock faults within the assumptions of the algorithm that will run: wall
// mode tolerates a pairwise skew of 2 x margin, counter mode any skew and
// steps but a bounded rate error. Drawn into `drawn`; the caller keeps what
// the parameters give explicitly.
void swarm_clocks(uint64_t seed, const LeaseScenarioOptions& o, LeaseScenarioOptions& drawn) {
  sim::Prng prng{sim::derive_seed(seed, "lease/swarm-clocks")};
  if (o.lease.algorithm == lease::Algorithm::seed) return;  // the seed assumes perfect clocks
  const Duration heal = o.healed_at();
  if (o.lease.expiry_mode == lease::ExpiryMode::wall) {
    // Offsets in [-s, s] with s < tolerated / 2; steps keep within the rest.
    drawn.skew_max = prng.uniform_duration(D::zero(), o.lease.skew_tolerated() * 2 / 5);
    drawn.drift_ppm_max = static_cast<int64_t>(prng.below(201));
    return;
  }
  drawn.skew_max = prng.uniform_duration(D::zero(), D::from_s(30));
  drawn.drift_ppm_max = std::min<int64_t>(o.lease.drift_ppm_tolerated() / 2, 1000);
  const uint64_t steps = prng.below(3);
  for (uint64_t i = 0; i < steps; ++i) {
    drawn.clock_steps.push_back(fault(static_cast<uint32_t>(prng.below(o.workers)),
                                      prng.uniform_duration(D::zero(), heal),
                                      prng.uniform_duration(D::from_s(-20), D::from_s(20))));
  }
}

}  // namespace

namespace {

std::optional<LeaseScenarioOptions> preset(std::string_view name, uint64_t seed, std::optional<Duration> duration) {
  LeaseScenarioOptions o;
  if (name == "lease-swarm") {
    o.duration = duration.value_or(D::from_min(10));
    return swarm(seed, o);
  }
  if (duration) o.duration = *duration;
  if (name.starts_with("stream-")) {
    if (!duration) o.duration = name == "stream-steady" ? D::from_h(1) : name == "stream-cuts" ? D::from_min(3) : D::from_min(10);
    return stream_preset(name, o);
  }
  // Named presets place their faults at fractions of the run (the times in
  // docs/scenarios.md are for the default hour), so shorter runs keep them.
  const Duration at_10_of_60 = o.duration / 6;
  if (name == "lease-steady") return o;
  if (name == "lease-crash") {
    o.crash_every = at_10_of_60;
    return o;
  }
  if (name == "lease-deploy") {
    o.deploy_at = o.duration / 3;
    return o;
  }
  if (name == "lease-scale") {
    // Scale out as 1,500 connections arrive on 2 tasks (target 700 a task),
    // then in when 1,000 of them stop at a third of the run.
    o.workers = 2;
    o.connections = 1500;
    o.lease.capacity = 1000;
    o.autoscaler = true;
    for (uint32_t c = 0; c < 1000; ++c) o.stops.push_back(ConnectionStop{c, o.duration / 3});
    return o;
  }
  if (name == "lease-skew") {
    o.skew_max = o.lease.skew_tolerated() * 2 / 5;
    o.drift_ppm_max = 100;
    return o;
  }
  if (name == "lease-pause") {
    o.pauses = {fault(0, at_10_of_60, D::from_s(25)), fault(1, o.duration * 25 / 60, D::from_s(90))};
    return o;
  }
  if (name == "lease-throttle") {
    o.throttle_partition_wcu_per_s = 40;
    return o;
  }
  if (name == "lease-partition") {
    o.partitions = {fault(0, at_10_of_60, D::from_s(60))};
    return o;
  }
  if (name == "lease-lost-replies") {
    o.loss = Ratio{2, 100};
    return o;
  }
  return std::nullopt;
}

void drop_faults_after(Duration end, std::vector<WorkerFault>& faults) {
  std::erase_if(faults, [end](const WorkerFault& f) { return f.at >= end; });
}

}  // namespace

std::optional<LeaseScenarioOptions> lease_preset(std::string_view name, uint64_t seed, std::optional<Duration> duration) {
  std::optional<LeaseScenarioOptions> o = preset(name, seed, duration);
  if (!o) return o;
  drop_faults_after(o->healed_at(), o->pauses);
  drop_faults_after(o->healed_at(), o->partitions);
  drop_faults_after(o->healed_at(), o->holds);
  drop_faults_after(o->healed_at(), o->write_throttles);
  drop_faults_after(o->healed_at(), o->refusals);
  drop_faults_after(o->healed_at(), o->sqs_refusals);
  drop_faults_after(o->healed_at(), o->twins);
  drop_faults_after(o->healed_at(), o->clock_steps);
  std::erase_if(o->stops, [&](const ConnectionStop& stop) { return stop.at >= o->healed_at(); });
  if (o->deploy_at && *o->deploy_at >= o->healed_at()) o->deploy_at.reset();
  return o;
}

namespace {

constexpr uint32_t kWorkersMax = 1000;  // LeaseScenarioOptions::validate's bound

// The swarm's faults are drawn for its own fleet (3-5 workers, 50
// connections) and heal time; parameters may give fewer workers or
// connections, or an earlier heal. Drawn faults (those the parameters do not
// give) then follow: worker and connection numbers wrap around, and what
// would fall after the heal is dropped, by the same rules the draws follow.
// Without such parameters this changes nothing.
// LeaseScenarioOptions::tenure_returns: one worker whose requests are held
// past its deadline (the configuration that first showed each epoch fence's
// mutant, docs/mutants.md). Applied after the parameters: a field they give
// is kept, so a reproduce line's parameters give the same run.
void make_tenure_return(uint64_t seed, const nlohmann::json& parameters, LeaseScenarioOptions& o) {
  const auto given = [&](const char* field) { return parameters.contains(field); };
  const bool stream_mode_given = parameters.contains("stream") && parameters["stream"].is_object() &&
                                 parameters["stream"].contains("record_mode");
  if (!given("workers")) o.workers = 1;
  if (!given("crash_every")) o.crash_every = D::zero();
  if (!given("pauses")) o.pauses.clear();
  if (!given("partitions")) o.partitions.clear();
  if (!given("write_throttles")) o.write_throttles.clear();
  if (!given("refusals")) o.refusals.clear();
  if (!given("sqs_refusals")) o.sqs_refusals.clear();
  if (!given("twins")) o.twins.clear();
  if (!given("deploy_at")) o.deploy_at.reset();
  // Put mode's record puts are unfenced: held past a lease is beyond them.
  if (!stream_mode_given) o.stream.mode = resume::RecordMode::transact;
  if (!given("hold_delay")) o.hold_delay = D::from_s(50);
  if (!given("holds")) {
    o.holds.clear();
    sim::Prng prng{sim::derive_seed(seed, "lease/swarm-tenure-hold")};
    const Duration length = D::from_s(30);
    const Duration latest = o.healed_at() - length - o.hold_delay;
    if (latest > D::from_min(1)) o.holds.push_back(fault(0, prng.uniform_duration(D::from_min(1), latest), length));
  }
}

void fit_swarm_to_parameters(const nlohmann::json& parameters, LeaseScenarioOptions& o) {
  const Duration heal = o.healed_at();
  const auto given = [&](const char* field) { return parameters.contains(field); };
  // A fault the parameters give keeps its worker: the drawn fleet grows to
  // include it (otherwise a fault naming worker 4 would be valid for the
  // seeds that draw 5 workers and refused for the others).
  if (!given("workers")) {
    for (const auto* faults : {&o.pauses, &o.partitions, &o.holds, &o.write_throttles, &o.refusals, &o.sqs_refusals,
                              &o.twins, &o.clock_steps}) {
      for (const WorkerFault& f : *faults) {
        if (f.worker < kWorkersMax) o.workers = std::max(o.workers, f.worker + 1);
      }
    }
  }
  const nlohmann::json no_stream = nlohmann::json::object();
  const nlohmann::json& stream = parameters.contains("stream") && parameters["stream"].is_object() ? parameters["stream"]
                                                                                                     : no_stream;
  const auto stream_given = [&](const char* field) { return stream.contains(field); };
  for (auto [field, faults] : {std::pair{"pauses", &o.pauses}, std::pair{"partitions", &o.partitions},
                               std::pair{"holds", &o.holds}, std::pair{"write_throttles", &o.write_throttles},
                               std::pair{"refusals", &o.refusals}, std::pair{"sqs_refusals", &o.sqs_refusals},
                               std::pair{"twins", &o.twins}}) {
    if (given(field)) continue;
    // A hold lasts until its last held request arrives.
    const Duration tail = faults == &o.holds ? o.hold_delay : Duration::zero();
    std::erase_if(*faults, [&](const WorkerFault& f) { return f.at + f.length + tail > heal; });
    for (WorkerFault& f : *faults) f.worker %= o.workers;
  }
  if (!given("stops")) {
    std::erase_if(o.stops, [&](const ConnectionStop& stop) { return o.connections == 0 || stop.at > heal; });
    for (ConnectionStop& stop : o.stops) stop.connection %= o.connections;
  }
  if (!given("deploy_at") && o.deploy_at && *o.deploy_at + D::from_min(2) > heal) o.deploy_at.reset();
  StreamOptions& s = o.stream;
  const auto after_heal = [&](Duration at) { return at > heal; };
  if (!stream_given("hub_crashes")) std::erase_if(s.hub_crashes, after_heal);
  if (!stream_given("mass_closes")) std::erase_if(s.mass_closes, after_heal);
  for (auto [field, faults] : {std::pair{"cuts", &s.cuts}, std::pair{"hub_slow", &s.hub_slow}}) {
    if (!stream_given(field)) std::erase_if(*faults, [&](const TimedFault& f) { return f.at + f.length > heal; });
  }
}

}  // namespace

// The swarm's clocks depend on the algorithm, which parameters may change:
// drawn after the parameters are applied. A clock field the parameters give
// is kept as given (to_parameters makes every drawn fault explicit).
void finish_preset(std::string_view name, uint64_t seed, const nlohmann::json& parameters,
                   LeaseScenarioOptions& options) {
  if (name != "lease-swarm") return;
  if (options.tenure_returns) make_tenure_return(seed, parameters, options);
  // Twins share a stable id: parameters that turn stable ids off leave none.
  if (!parameters.contains("twins") && !options.stable_worker_ids) options.twins.clear();
  if (options.workers > 0) fit_swarm_to_parameters(parameters, options);
  // A full fleet (one seed in eight, from its own stream, for the fleet the
  // parameters leave): room for exactly the connections, so workers are
  // full, skip their release polls, and a notice received while room was
  // left can find it taken by the time it is handled (handed back), the
  // more so with long polling (half of these seeds).
  sim::Prng full{sim::derive_seed(seed, "lease/swarm-full-fleet")};
  if (full.chance(Ratio{1, 8}) && !options.tenure_returns && !parameters.contains("capacity") && options.workers > 0) {
    options.lease.capacity = (options.connections + options.workers - 1) / options.workers;
    if (full.chance(Ratio{1, 2}) && !parameters.contains("sqs_wait")) options.sqs_wait = D::from_s(5);
    // No worker has room for another's connections: one whose DynamoDB
    // refuses it strands its own until the refusal ends, and only it can
    // take them back, at its next sweep after that: up to a reconcile
    // interval, its jitter, the GSI lag and a few requests (75 s with the
    // defaults). A gap can begin as the refusal does (the owner paused in
    // it stops acting at once), so the refusal plus that must fit in the
    // sweep's bound (1m44.7s): a full fleet's drawn refusals last at most
    // 25 s (lease-swarm seed 500301: 2m34s of refusals, a connection
    // ownerless for 1m51s; seed 600479 with the liveness algorithm: a
    // minute of refusals and a pause 3.5 s into it, 1m50.9s).
    if (!parameters.contains("refusals")) {
      for (WorkerFault& f : options.refusals) f.length = std::min(f.length, D::from_s(25));
    }
  }
  LeaseScenarioOptions drawn = options;
  swarm_clocks(seed, options, drawn);
  if (!parameters.contains("skew_max")) options.skew_max = drawn.skew_max;
  if (!parameters.contains("drift_ppm_max")) options.drift_ppm_max = drawn.drift_ppm_max;
  if (!parameters.contains("clock_steps")) options.clock_steps = drawn.clock_steps;
  // Put mode's record puts are unfenced (docs/resume-core.md): drawn holds
  // would take the run beyond its assumptions, so the swarm keeps them for
  // transact mode. Holds the parameters give are kept (and so reported).
  if (!parameters.contains("holds") && options.stream.enabled && !resume::record_writes_fenced(options.stream.mode)) {
    options.holds.clear();
  }
}

}  // namespace leaseproof::scenarios
