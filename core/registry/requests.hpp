#pragma once
// The DynamoDB requests of the connection registry, as pure functions, so
// that every access pattern is in one place (docs/registry.md). Every one is
// a PutItem, DeleteItem, Query or BatchWriteItem: the registry never scans.
// Every request asks for its consumed capacity (TOTAL).
//
// Membership item (table `rt-registry`):
//   pk            "room#<room>#<shard>"  shard = shard_of(connection)
//   sk            "conn#<connection>"
//   connectionId  GSI byConnection (hash): the rooms of a connection
//   userId        GSI byUser (hash, range connectionId): a user's connections
//   joinedAt      wall clock of the join, ms
//   expiresAt     TTL attribute, epoch seconds: joinedAt + ttl

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dynamo/types.hpp"
#include "core/registry/config.hpp"

namespace leaseproof::registry {

// Partition keys a room is spread over (with Flaw::one_partition: one).
uint32_t room_shards(const RegistryConfig& config);
// The seed's shardOf: h = h * 31 + code unit, mod 2^32, then mod shards, so a
// table written by the seed's TypeScript is read the same (ASCII ids).
uint32_t shard_of(std::string_view connection, uint32_t shards);
std::string room_key(std::string_view room, uint32_t shard);  // "room#<room>#<shard>"
std::string connection_sort_key(std::string_view connection);  // "conn#<connection>"
// The key of one membership item.
dynamo::Item membership_key(const RegistryConfig& config, std::string_view room, std::string_view connection);

dynamo::Request join_request(const RegistryConfig& config, std::string_view room, std::string_view connection,
                             std::string_view user, int64_t now_wall_ms);
dynamo::Request leave_request(const RegistryConfig& config, std::string_view room, std::string_view connection);
// One page of a room's members in one shard; core: rows whose TTL passed are
// filtered out (TTL deletion lags the expiry).
dynamo::Request members_query(const RegistryConfig& config, std::string_view room, uint32_t shard,
                              int64_t now_wall_ms, const std::optional<dynamo::Item>& exclusive_start_key);
// One page of a connection's memberships (keys only) through byConnection.
dynamo::Request connection_rooms_query(const RegistryConfig& config, std::string_view connection,
                                       const std::optional<dynamo::Item>& exclusive_start_key);
// Deletes these membership keys (at most batch_items_max).
dynamo::Request delete_batch_request(const RegistryConfig& config, const std::vector<dynamo::Item>& keys);
// Presence, one page through byUser, counting rows. Core: live rows only,
// read page by page until one counts (a Limit applies before the filter, so a
// page can count 0 and still have a live row after it). Seed: Limit 1, no
// filter, one page: a user whose rows all expired stays online until TTL
// deletes them.
dynamo::Request presence_query(const RegistryConfig& config, std::string_view user, int64_t now_wall_ms,
                               const std::optional<dynamo::Item>& exclusive_start_key);

// A query's expiry filter compares with the clock when the query is sent: a
// retry or the next page, sent later than the first, gets the clock of its
// own send (a row that expired meanwhile must not count). Other requests are
// left as they are.
void refresh_expiry_clock(dynamo::Request& request, int64_t now_wall_ms);

dynamo::Request create_table_request(const RegistryConfig& config);

// A membership row as a query returns it (fields the projection left out are
// empty or 0).
struct Member {
  std::string connection;
  std::string user;
  int64_t expires_at_s = 0;

  bool operator==(const Member&) const = default;
};
std::optional<Member> parse_member(const dynamo::Item& item);

}  // namespace leaseproof::registry
