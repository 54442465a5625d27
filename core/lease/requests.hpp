#pragma once
// The DynamoDB requests of the lease protocol, as pure functions, so that the
// exact conditions are in one place (and visible in docs/lease-core.md).
//
// Lease item (table `connections`, key `pk` = "CONN#<id>"):
//   desired_state        "STARTED" | "STOPPED"
//   reconcile_shard      "STARTED#<k>" while STARTED (sparse GSI by_shard), absent otherwise
//   ws_url               upstream URL
//   lease_owner          worker id; absent when free
//   lease_epoch          fencing token, +1 on every acquire
//   lease_expires_at_ms  owner's wall clock + lease duration; 0 when released or new
//   lease_counter        +1 on every acquire, renew and release (counter-mode expiry)
//   last_seq             last sequence recorded (checkpoint), only increases
//   stream_epoch         the upstream hub epoch of last_seq (absent: none yet)
//   owner_incarnation    which process of lease_owner holds it: the liveness
//                        algorithm's incarnation of the owner's liveness item,
//                        the core algorithm's random number of the acquiring
//                        process (two processes with one worker id are two
//                        owners); absent with the seed algorithm
//
// Liveness item (liveness algorithm; same table, key `pk` = "WORKER#<id>",
// not in any index):
//   worker_incarnation   +1 on every claim and fence; a lease names the one it
//                        was acquired under
//   worker_state         "LIVE" (its worker renews it) | "FENCED" (taken over:
//                        every lease naming an older incarnation is free to take)
//   worker_expires_at_ms the worker's wall clock + lease duration at its last renew
//   worker_counter       +1 on every claim, renew and fence (counter-mode expiry)

#include <cstdint>
#include <optional>
#include <string>

#include "core/dynamo/types.hpp"
#include "core/lease/config.hpp"

namespace leaseproof::lease {

inline constexpr const char* kStarted = "STARTED";
inline constexpr const char* kStopped = "STOPPED";

std::string connection_key(std::string_view connection);  // "CONN#<id>"
std::string reconcile_shard(std::string_view connection, uint32_t shards);  // "STARTED#<k>"
dynamo::Item key_of(std::string_view connection);  // the lease item's key: {pk: connection_key}

// What the acquirer knows about the lease it wants to take.
struct AcquireBasis {
  // Counter mode: the counter observed unchanged for a whole lease period.
  std::optional<int64_t> observed_counter;
  // Liveness: the tenure being taken over, whose owner's incarnation is
  // fenced or superseded (the condition names exactly it).
  struct Tenure {
    std::string owner;
    int64_t incarnation = 0;
    int64_t epoch = 0;
  };
  std::optional<Tenure> dead_tenure;
  // Liveness: taking back a lease of this worker's own incarnation whose
  // session stopped at the deadline, at the epoch read.
  std::optional<int64_t> own_epoch;
};

// `incarnation`: the acquirer's LeaseManager::tenure_incarnation() (unused by the seed algorithm).
dynamo::Request acquire_request(const LeaseConfig& config, std::string_view connection, std::string_view worker,
                                int64_t now_wall_ms, const AcquireBasis& basis, int64_t incarnation = 0);
dynamo::Request renew_request(const LeaseConfig& config, std::string_view connection, std::string_view worker,
                              int64_t epoch, int64_t now_wall_ms);
dynamo::Request release_request(const LeaseConfig& config, std::string_view connection, std::string_view worker,
                                int64_t epoch);
dynamo::Request read_request(const LeaseConfig& config, std::string_view connection);
// One page of the reconcile sweep: a shard of by_shard (core) or the expired
// STARTED leases of by_state (seed).
dynamo::Request reconcile_query(const LeaseConfig& config, uint32_t shard, int64_t now_wall_ms,
                                const std::optional<dynamo::Item>& exclusive_start_key);

// Table and item shapes for the control plane and tests.
dynamo::Request create_table_request(const LeaseConfig& config);
dynamo::Request create_connection_request(const LeaseConfig& config, std::string_view connection,
                                          std::string_view ws_url);
dynamo::Request stop_connection_request(const LeaseConfig& config, std::string_view connection);
// A STOPPED connection started again (its lease fields kept: the epoch goes
// on from where it was), with `ws_url`; refused unless it is STOPPED.
dynamo::Request restart_connection_request(const LeaseConfig& config, std::string_view connection,
                                           std::string_view ws_url);

// A lease item as read back.
struct LeaseView {
  std::string connection;
  std::string desired_state;
  std::string owner;  // empty when free
  int64_t epoch = 0;
  int64_t expires_at_ms = 0;
  int64_t counter = 0;
  int64_t last_seq = 0;
  int64_t stream_epoch = 0;  // the hub epoch of last_seq (resume checkpoint)
  std::string ws_url;
  int64_t owner_incarnation = 0;  // absent: 0
};
std::optional<LeaseView> parse_lease(const dynamo::Item& item);

// ---- the liveness algorithm's worker items ----
inline constexpr const char* kLive = "LIVE";
inline constexpr const char* kFenced = "FENCED";
std::string worker_key(std::string_view worker);  // "WORKER#<id>"

struct LivenessView {
  std::string worker;
  int64_t incarnation = 0;
  bool live = false;  // worker_state LIVE (otherwise FENCED)
  int64_t expires_at_ms = 0;
  int64_t counter = 0;
  int64_t claimant = 0;  // the process that claimed the incarnation (its process_incarnation)
};
std::optional<LivenessView> parse_liveness(const dynamo::Item& item);

dynamo::Request liveness_read_request(const LeaseConfig& config, std::string_view worker);
// A worker starts a new incarnation of its item (seen's + 1, or 1): where
// there is none (`seen` empty), over a fenced one, or over a live one whose
// expiry the claimer observed (wall: its stamp is older than now - margin;
// counter: its counter is still seen's). `claimant`, the claiming process's
// number, is written beside it (worker_claimant): a read after a lost reply
// knows the claim as its own by that alone, never by a stamp another process
// with this id could have written too.
dynamo::Request liveness_claim_request(const LeaseConfig& config, std::string_view worker, int64_t now_wall_ms,
                                       const std::optional<LivenessView>& seen, int64_t claimant = 0);
// Every heartbeat: conditional on the worker's incarnation (wall mode: and
// on the stamp moving forward).
dynamo::Request liveness_renew_request(const LeaseConfig& config, std::string_view worker, int64_t incarnation,
                                       int64_t now_wall_ms);
// A taker ends another worker's incarnation whose expiry it observed (the
// same conditions as a claim over a live item): FENCED, incarnation + 1.
dynamo::Request liveness_fence_request(const LeaseConfig& config, const LivenessView& seen, int64_t now_wall_ms);
// A drained worker ends its own incarnation (FENCED, incarnation + 1).
dynamo::Request liveness_retire_request(const LeaseConfig& config, std::string_view worker, int64_t incarnation);

}  // namespace leaseproof::lease
