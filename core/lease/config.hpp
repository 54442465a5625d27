#pragma once
// Configuration of one worker's lease manager, and what it promises.
//
// Two algorithms share the harness:
//   core  - this project's: lease epochs fence every write, the owner stops
//           acting at a monotonic deadline, expiry is judged with a margin (wall
//           mode) or by how long the lease stayed unchanged on the observer's
//           own clock (counter mode), watchers take over at expiry.
//   liveness - the core's fencing and deadlines, but one heartbeat item per
//           worker instead of a renew per lease: a lease names its owner
//           worker and that worker's incarnation, and is taken over only
//           once the owner's liveness item is seen expired and fenced
//           (docs/lease-core.md, "The liveness algorithm").
//   seed  - the articles' design, kept to show what breaks it: wall-clock
//           expiry with no margin, no epoch, the owner acts until a renew is
//           refused, reconcile every 60 s, unconditional checkpoints.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/time.hpp"

namespace leaseproof::lease {

enum class Algorithm : uint8_t { core, seed, liveness };
enum class ExpiryMode : uint8_t { wall, counter };

std::string_view to_string(Algorithm algorithm);
std::string_view to_string(ExpiryMode mode);
// "core", "seed" or "liveness"; nullopt for anything else.
std::optional<Algorithm> parse_algorithm(std::string_view text);

struct LeaseTable {
  std::string name = "connections";
  std::string shard_index = "by_shard";  // core: reconcile_shard (hash) + pk (range), sparse
  std::string state_index = "by_state";  // seed: desired_state (hash) + lease_expires_at_ms (range)
  uint32_t shards = 8;                   // values of reconcile_shard: "STARTED#0".."STARTED#7"
};

struct LeaseConfig {
  Algorithm algorithm = Algorithm::core;
  ExpiryMode expiry_mode = ExpiryMode::wall;
  Duration lease_duration = Duration::from_s(20);
  Duration heartbeat_interval = Duration::from_s(5);
  Duration reconcile_interval = Duration::from_s(60);
  Duration reconcile_jitter_max = Duration::from_s(5);
  // The owner stops acting this much before its lease could expire, and an
  // acquirer waits this much past it. Wall mode then tolerates a clock skew
  // of up to 2 x margin between any two workers; counter mode tolerates a
  // clock rate error of up to margin / lease_duration.
  Duration safety_margin = Duration::from_s(2);
  Duration request_timeout = Duration::from_s(2);
  // Pause before retrying a throttled or failed renew.
  Duration retry_backoff = Duration::from_ms(200);
  uint32_t capacity = 700;                  // connections this worker may own
  uint32_t acquire_per_round_max = 100;     // acquisitions started per reconcile round
  uint32_t watchers_per_lease = 2;          // workers that watch each lease for expiry
  // Counter mode: how often a watcher re-reads a lease it watches. The
  // counter is judged unchanged from the first read that showed it, so
  // recovery takes up to lease + margin + this; each watched lease costs one
  // strongly consistent read per interval per watcher.
  Duration watch_interval = Duration::from_s(5);
  uint32_t query_page_items_max = 100;      // Limit of each reconcile Query page
  uint32_t query_pages_max = 100;           // pages per shard per round
  LeaseTable table;

  // "" when valid; otherwise names the field and what is allowed, e.g.
  // "lease.heartbeat_interval (20s) must be shorter than lease.lease_duration (20s)".
  std::string validate() const;
  // The assumptions under which the algorithm promises single ownership.
  std::string assumptions() const;
  // Largest wall-clock skew between two workers that wall mode tolerates.
  Duration skew_tolerated() const;
  // Largest clock rate error (ppm) that counter mode tolerates.
  int64_t drift_ppm_tolerated() const;
  // How long after a confirmed renew (or acquire) was sent the next renew
  // goes out. The heartbeat, unless that would leave the renew less than a
  // whole request timeout before the owner's deadline (lease - margin after
  // the confirmed send): then early enough that a reply within the timeout
  // still lands in time. The seed algorithm renews every heartbeat.
  Duration renew_interval() const;
};

}  // namespace leaseproof::lease
