#pragma once
// Configuration of the connection registry of a serverless WebSocket service
// (seed 003): one DynamoDB item per (room, connection), keyed by room, with
// GSIs by connection (cleanup) and by user (presence).
//
// Two algorithms:
//   core - this project's: UnprocessedItems of a batch delete are retried
//          with backoff until done or out of attempts (and then reported);
//          every answer (members, presence) filters out rows whose TTL has
//          passed, because TTL deletion lags; big rooms are sharded.
//   seed - the article's code, kept to show what breaks it: UnprocessedItems
//          are dropped, no `expiresAt` filter, one partition per room.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/time.hpp"

namespace leaseproof::registry {

enum class Algorithm : uint8_t { core, seed };
std::string_view to_string(Algorithm algorithm);

// The seed's three flaws, to turn on one at a time (the seed algorithm has
// all three): each is caught by the property it breaks (docs/registry.md).
enum class Flaw : uint8_t {
  drop_unprocessed = 1,  // BatchWriteItem's UnprocessedItems are never retried
  no_expiry_filter = 2,  // answers count rows whose TTL passed (until TTL deletes them)
  one_partition = 4,     // a room is one partition key, however big
};
std::string_view to_string(Flaw flaw);
inline constexpr Flaw kFlaws[] = {Flaw::drop_unprocessed, Flaw::no_expiry_filter, Flaw::one_partition};

struct RegistryTable {
  std::string name = "rt-registry";
  std::string by_connection_index = "byConnection";  // pk connectionId
  std::string by_user_index = "byUser";              // pk userId, sk connectionId
};

struct RegistryConfig {
  Algorithm algorithm = Algorithm::core;
  // Flaws of the seed on top of the core algorithm (a bit per Flaw).
  uint8_t flaws = 0;
  RegistryTable table;
  // Partition keys per room ("room#<room>#<shard>"): a 50,000-member room on
  // one key concentrates its writes and every broadcast's reads on one
  // partition (DynamoDB: 1,000 WCU/s and 3,000 RCU/s per partition).
  uint32_t room_shards = 8;
  // Row lifetime: API Gateway closes every connection after 2 h, so no row
  // can legitimately outlive 2 h plus a margin (seed 003: 2 h + 10 min).
  Duration ttl = Duration::from_s(2 * 3600 + 600);
  // Limit of each Query page (DynamoDB also stops a page at 1 MB).
  uint32_t query_page_items_max = 1000;
  // Pages one answer may read before it gives up (bounds a runaway answer).
  uint32_t query_pages_max = 1000;
  // BatchWriteItem takes at most 25 requests.
  uint32_t batch_items_max = 25;
  // Attempts in a row of one DynamoDB request that get nothing done (an
  // error, no answer) before the operation reports a failure; a batch's
  // UnprocessedItems are retried until done while each retry makes progress.
  // Between attempts, full-jitter backoff: uniform in
  // [0, min(cap, base * 2^attempt)].
  uint32_t attempts_max = 8;
  Duration retry_base = Duration::from_ms(50);
  Duration retry_cap = Duration::from_s(2);
  // A broadcast posts to at most this many connections at once.
  uint32_t posts_in_flight_max = 64;
  // Attempts of one PostToConnection that was throttled or failed.
  uint32_t post_attempts_max = 4;

  // "" when valid; otherwise names the field and what is allowed.
  std::string validate() const;
  // The seed algorithm has every flaw.
  bool has(Flaw flaw) const {
    return algorithm == Algorithm::seed || (flaws & static_cast<uint8_t>(flaw)) != 0;
  }
};

}  // namespace leaseproof::registry
