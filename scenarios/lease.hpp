#pragma once
// The lease fleet simulation: workers running core/lease (or the articles'
// seed algorithm) against the simulated DynamoDB and SQS, a control plane, an
// upstream endpoint, and faults: crashes, pauses, clock skew and steps,
// partitions between a worker and DynamoDB, lost replies, throttling, rolling
// deploys and autoscaling. Checked for single ownership, the recovery-time
// bound and liveness (docs/lease-core.md).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ratio.hpp"
#include "base/time.hpp"
#include "core/lease/config.hpp"
#include "core/resume/client.hpp"
#include "core/resume/hub.hpp"
#include "core/resume/recording.hpp"
#include "properties/lease_checkers.hpp"
#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios {

struct WorkerFault {
  uint32_t worker = 0;
  Duration at;
  Duration length;
};

struct ConnectionStop {
  uint32_t connection = 0;
  Duration at;
};

struct TimedFault {
  Duration at;
  Duration length;
};

// Streaming (core/resume): the upstream hub publishes on every connection's
// channel, owners resume and record into the sink; hub faults.
struct StreamOptions {
  bool enabled = false;
  resume::HubConfig hub;
  resume::ClientConfig client;
  resume::RecordMode mode = resume::RecordMode::transact;
  uint32_t pack_bytes = 8 * 1024;  // packed mode: a pack item's size limit
  Duration publish_interval = Duration::from_s(1);  // one message per connection
  uint32_t message_bytes = 256;
  std::optional<Duration> publish_until;  // default: when the faults heal
  std::optional<Duration> relay_idle;     // a relay with this idle cut-off in front of the hub
  std::vector<Duration> hub_crashes;      // the hub crashes, restarts after hub_down
  Duration hub_down = Duration::from_s(2);
  bool keep_ring = false;                 // restarts keep the ring (same epoch)
  std::vector<Duration> mass_closes;      // the hub closes everyone with 1012
  std::vector<TimedFault> hub_slow;       // the hub's outbound links clogged
  std::vector<TimedFault> cuts;           // every stream link lost (connections break)
  // From each of these times, the next worker to send a record write
  // crashes right after sending it (restarted after restart_after).
  std::vector<Duration> crash_while_recording;

  Duration published_until(Duration healed_at) const { return publish_until.value_or(healed_at); }
  // Packed mode's batching when none is given: a batch is what one pack
  // holds of message_bytes messages (31 of 256 B at 8 KiB), and waits up to
  // 30 s (the longest linger) for it, so that a pack leaves full.
  void default_packing();
};

struct LeaseScenarioOptions {
  lease::LeaseConfig lease;
  uint32_t workers = 10;
  uint32_t connections = 500;
  Duration duration = Duration::from_h(1);
  // Clocks: each worker's wall offset uniform in [-skew_max, skew_max]; worker
  // 0 additionally offset by fast_worker_offset; rates within drift_ppm_max.
  Duration skew_max = Duration::zero();
  Duration fast_worker_offset = Duration::zero();
  int64_t drift_ppm_max = 0;
  std::vector<WorkerFault> clock_steps;  // length = the jump (may be negative)
  // Network between workers and DynamoDB/SQS.
  Duration latency = Duration::from_ms(2);
  Duration jitter = Duration::from_ms(3);
  Ratio loss = Ratio::zero();
  // Release notices: each worker's SQS receive waits up to this long for one
  // (long polling). Zero, the default: short polling every 500 ms. Long
  // polling is opt-in: docs/lease-core.md says what the swarm found with it.
  Duration sqs_wait = Duration::zero();
  // Faults.
  Duration crash_every = Duration::zero();  // zero: no periodic crashes
  Duration restart_after = Duration::from_s(10);
  // A restarted worker keeps its id (the node's name), as `leaseproof worker
  // --worker-id` does, and a deploy replaces each worker in place (a
  // StatefulSet's rollout); false: every incarnation is a new worker id.
  bool stable_worker_ids = false;
  // lease-swarm only (one seed in ten draws it): a tenure comes back while
  // requests of the one before are still in flight. One worker, no crashes,
  // pauses, partitions or deploy; its requests of 30 s are held 25-50 s
  // (past its deadline), it takes its own leases back under a new epoch,
  // and the held renews, records and releases of the earlier epoch land
  // after: only the epoch fences tell the two tenures apart (owner ids are
  // equal). What the parameters give explicitly is kept.
  bool tenure_returns = false;
  std::vector<WorkerFault> pauses;
  std::vector<WorkerFault> partitions;  // worker <-> DynamoDB, both ways
  // Worker -> DynamoDB: requests sent in [at, at + length) are held in flight
  // and arrive hold_delay / 2 .. hold_delay after they were sent (past a
  // lease: stale requests of an old tenure reach DynamoDB, out of order).
  std::vector<WorkerFault> holds;
  Duration hold_delay = Duration::from_s(40);
  // Worker -> DynamoDB: writes arriving in [at, at + length) are refused with
  // ProvisionedThroughputExceededException while reads go through (a hot
  // partition throttling the writes to the items it holds): the owner's
  // renews fail while it can still read its lease, a watcher reads an expired
  // lease and cannot take it.
  std::vector<WorkerFault> write_throttles;
  // Worker -> DynamoDB (refusals) or SQS (sqs_refusals): requests sent in
  // [at, at + length) are refused at once (a closed port, an expired
  // certificate, a server that resets): the call fails with no answer 1 ms
  // after it was sent instead of at its timeout (sim::World::refuse).
  std::vector<WorkerFault> refusals;
  std::vector<WorkerFault> sqs_refusals;
  // Two processes, one worker id (stable_worker_ids only): from `at` a second
  // process runs under worker `worker`'s id beside the first (a StatefulSet
  // pod force-deleted and rescheduled while its node is cut off, an
  // operator's second copy), on a node of its own, until it crashes `length`
  // later (the duplicate found and killed).
  std::vector<WorkerFault> twins;
  // With write_throttles: when each begins, one lease the throttled worker
  // holds gets a late duplicate of a release notice (SQS delivers at least
  // once) sent to the queue a little before that worker's deadline, by up to
  // skew_max: a worker whose clock is ahead by more receives it while the
  // lease, by its clock, expired less than the margin ago, and sends an
  // acquire no read of its own preceded. Only the margin in the acquire's
  // condition keeps it from taking a lease its owner still acts on.
  bool late_notices = false;
  std::vector<ConnectionStop> stops;     // the control plane sets these STOPPED
  int64_t throttle_partition_wcu_per_s = 0;  // 0: no throttling
  std::optional<Duration> deploy_at;
  bool autoscaler = false;
  int64_t autoscale_target = 700;
  // Faults stop here; the rest is the liveness phase. Default: 80% of the run.
  std::optional<Duration> heal_at;
  StreamOptions stream;

  // Errors name the field: "workers must be at least 1", ...
  std::string validate() const;
  std::string describe() const;
  // The most message loss (on every link) the recovery bounds are stated for.
  static constexpr Ratio kLossAssumed{1, 4};
  // Empty when the faults stay inside the algorithm's stated assumptions;
  // otherwise says which one a run goes beyond (printed with the run).
  std::string beyond_assumptions() const;
  Duration healed_at() const { return heal_at.value_or(duration * 8 / 10); }
};

// Applies a JSON object of parameters on top of `options` (fields as in
// docs/scenarios.md); unknown fields and bad values are errors naming the field.
// The options as a whole (fields that must agree) are checked by validate(),
// once the preset has fitted its draws to them (finish_preset).
std::string apply_parameters(const nlohmann::json& parameters, LeaseScenarioOptions& options);

// Every parameter of `options` (all but the duration, which is the run's
// own), so that a seed's drawn faults become an explicit, editable list:
// applied to any lease preset's options of the same duration, it gives
// `options` back, and finish_preset draws nothing over what it names. A
// disabled stream is {"enabled": false} alone (nothing reads the rest).
nlohmann::json to_parameters(const LeaseScenarioOptions& options);

// Preset options of a named lease scenario, drawn from the seed where the
// scenario is randomised (the swarm), for a run of `duration` (the preset's
// own when unset); preset faults that would fall outside the run are dropped.
std::optional<LeaseScenarioOptions> lease_preset(std::string_view name, uint64_t seed,
                                                 std::optional<Duration> duration = std::nullopt);

// Fits the swarm's drawn faults to the final fleet and heal time (worker and
// connection numbers wrap, faults after the heal are dropped) and draws what
// depends on the final parameters (the swarm's clock faults); fields that
// `parameters` names explicitly are kept as given.
void finish_preset(std::string_view name, uint64_t seed, const nlohmann::json& parameters,
                   LeaseScenarioOptions& options);

// The options a run of lease scenario `name` uses: its preset for the
// config's seed and duration, the parameters on top, then finish_preset.
// Empty when valid; otherwise the error, naming the field.
std::string derive_lease_options(std::string_view name, const RunConfig& config, LeaseScenarioOptions& options);

RunResult run_lease(const LeaseScenarioOptions& options, const RunConfig& config);

// The recovery-time bound of each kind of ownerless gap, term by term, as a
// run of these options judges it (DESIGN.md section 4); the real-process lab's
// checker (leaseproof check-real) uses the same.
std::map<properties::GapCause, properties::RecoveryBound> lease_recovery_bounds(const LeaseScenarioOptions& options);
// The watcher's path's bounds (lease.watch): the gaps a live watcher saw
// through are judged by these instead (RecoveryChecker::set_watcher_bounds).
std::map<properties::GapCause, properties::RecoveryBound> lease_watcher_bounds(const LeaseScenarioOptions& options);

}  // namespace leaseproof::scenarios
