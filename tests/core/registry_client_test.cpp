// core/registry: the connection registry's operations against the simulated
// DynamoDB store, core and seed algorithms side by side where they differ.

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/registry/client.hpp"
#include "core/registry/requests.hpp"
#include "registry_world.hpp"

namespace leaseproof::registry::test {
namespace {

RegistryConfig core_config() { return RegistryConfig{}; }
RegistryConfig seed_config() {
  RegistryConfig config;
  config.algorithm = Algorithm::seed;
  return config;
}

// A store whose TTL deletes come a long time after the expiry (DynamoDB:
// "typically within a few days"): what the expiresAt filter is for.
models::DynamoStoreOptions late_ttl_deletes() {
  models::DynamoStoreOptions options = RegistryWorld::exact();
  options.ttl_sweep_lag_min = Duration::from_h(1);
  options.ttl_sweep_lag_max = Duration::from_h(2);
  return options;
}

TEST(RegistryRequests, KeysFollowTheSeedsSchemaAndShardFunction) {
  // shardOf("abc") in the seed's TypeScript: ((97*31 + 98)*31 + 99) = 96354; 96354 % 8 = 2.
  EXPECT_EQ(shard_of("abc", 8), 2u);
  EXPECT_EQ(room_key("lobby", 2), "room#lobby#2");
  EXPECT_EQ(connection_sort_key("abc"), "conn#abc");
  const dynamo::Item key = membership_key(core_config(), "lobby", "abc");
  EXPECT_EQ(key.at("pk").text(), "room#lobby#2");
  EXPECT_EQ(membership_key(seed_config(), "lobby", "abc").at("pk").text(), "room#lobby#0");  // one partition
  const auto put = std::get<dynamo::PutItemRequest>(join_request(core_config(), "lobby", "abc", "ann", 1'700'000'000'999));
  EXPECT_EQ(put.item.at("expiresAt").text(), std::to_string(1'700'000'000 + 2 * 3600 + 600));
  EXPECT_EQ(put.item.at("joinedAt").text(), "1700000000999");
}

TEST(RegistryRequests, ConfigValidationNamesTheField) {
  RegistryConfig config;
  config.batch_items_max = 26;
  EXPECT_NE(config.validate().find("registry.batch_items_max (26)"), std::string::npos) << config.validate();
  config = RegistryConfig{};
  config.room_shards = 0;
  EXPECT_NE(config.validate().find("registry.room_shards"), std::string::npos);
  config = RegistryConfig{};
  config.retry_cap = Duration::from_ms(10);
  EXPECT_NE(config.validate().find("registry.retry_base"), std::string::npos);
  EXPECT_EQ(RegistryConfig{}.validate(), "");
}

TEST(RegistryClient, JoinMembersLeaveWithQueriesOnly) {
  RegistryWorld world(core_config(), RegistryWorld::exact());
  for (const char* c : {"c1", "c2", "c3"}) EXPECT_EQ(world.join("lobby", c, "ann").error, "");
  EXPECT_EQ(world.join("other", "c9", "bob").error, "");
  const Done all = world.members("lobby");
  EXPECT_EQ(all.error, "");
  EXPECT_EQ(member_connections(all), (std::vector<std::string>{"c1", "c2", "c3"}));
  EXPECT_EQ(all.requests, 8u);  // one Query per shard, one page each
  EXPECT_EQ(world.leave("lobby", "c2").error, "");
  EXPECT_EQ(member_connections(world.members("lobby")), (std::vector<std::string>{"c1", "c3"}));
  const auto& accounting = world.store().accounting(world.config().table.name);
  EXPECT_EQ(accounting.scan, 0);
  EXPECT_EQ(accounting.query, 16);
  EXPECT_EQ(accounting.put_item, 4);
  EXPECT_EQ(accounting.delete_item, 1);
}

TEST(RegistryClient, MembersAreReadPageByPage) {
  RegistryConfig config = core_config();
  config.room_shards = 2;
  config.query_page_items_max = 10;
  RegistryWorld world(config, RegistryWorld::exact());
  for (int i = 0; i < 45; ++i) world.join("big", "c" + std::to_string(i), "u" + std::to_string(i));
  const Done done = world.members("big");
  EXPECT_EQ(done.error, "");
  EXPECT_EQ(member_connections(done).size(), 45u);
  EXPECT_GE(done.requests, 5u);  // 45 rows, 10 a page, over 2 shards
  EXPECT_GT(done.read_units, 0.0);
}

TEST(RegistryClient, AnswersLeaveOutRowsPastTheirTtlBeforeDynamoDeletesThem) {
  for (const Algorithm algorithm : {Algorithm::core, Algorithm::seed}) {
    RegistryConfig config = algorithm == Algorithm::core ? core_config() : seed_config();
    config.ttl = Duration::from_s(60);
    RegistryWorld world(config, late_ttl_deletes());
    world.join("lobby", "old", "ann");
    world.advance(Duration::from_s(61));  // past the TTL; the sweep comes an hour later
    world.join("lobby", "new", "bob");
    ASSERT_TRUE(world.rows_of("old", {"lobby"}) == 1) << "the TTL sweep ran early: nothing to filter";
    const std::vector<std::string> members = member_connections(world.members("lobby"));
    const bool ann_online = std::get<PresenceDone>(world.presence("ann").outcome).online;
    if (algorithm == Algorithm::core) {
      EXPECT_EQ(members, (std::vector<std::string>{"new"}));
      EXPECT_FALSE(ann_online);
    } else {
      EXPECT_EQ(members, (std::vector<std::string>{"new", "old"}));  // the seed's ghost
      EXPECT_TRUE(ann_online);
    }
    EXPECT_TRUE(std::get<PresenceDone>(world.presence("bob").outcome).online);
  }
}

TEST(RegistryClient, PresenceLooksPastAnExpiredFirstRow) {
  // The expired row "a-old" comes first in connectionId order: an answer
  // from a first page that a Limit cut before the filter ran would miss the
  // live "b-new".
  RegistryConfig config = core_config();
  config.ttl = Duration::from_s(60);
  RegistryWorld world(config, late_ttl_deletes());
  world.join("lobby", "a-old", "ann");
  world.advance(Duration::from_s(61));
  world.join("lobby", "b-new", "ann");
  EXPECT_TRUE(std::get<PresenceDone>(world.presence("ann").outcome).online);
  EXPECT_FALSE(std::get<PresenceDone>(world.presence("nobody").outcome).online);
}

// A query sent again (a retry after lost replies, or the next page) compares
// expiresAt with the clock when it is sent, not when the operation began: a
// row that expires while the query is retried must not count. (The registry
// swarm found this with a handler cut off from DynamoDB for 45 s: presence
// answered online from rows that had expired during the retries.)
TEST(RegistryClient, ARetriedQueryFiltersWithTheClockItIsSentAt) {
  RegistryConfig config = core_config();
  config.ttl = Duration::from_s(60);
  config.room_shards = 1;  // the member query whose replies are lost is the one that holds the row
  for (const bool presence : {true, false}) {
    RegistryWorld world(config, late_ttl_deletes());
    world.join("lobby", "c1", "ann");            // expiresAt: its second + 60
    world.advance(Duration::from_ms(59'900));   // the row's last live second
    world.lose_replies(3);                       // each retry sent at least 100 ms later: past the expiry
    if (presence) {
      EXPECT_FALSE(std::get<PresenceDone>(world.presence("ann").outcome).online);
    } else {
      EXPECT_EQ(member_connections(world.members("lobby")), std::vector<std::string>{});
    }
    EXPECT_GE(world.marks("registry.retry"), 3) << "the replies were not lost: nothing was retried";
    ASSERT_EQ(world.rows_of("c1", {"lobby"}), 1u) << "the TTL sweep ran early: nothing to filter";
  }
}

// A table whose one partition takes 10 writes a second: most of each
// 25-delete batch comes back unprocessed.
models::DynamoStoreOptions one_slow_partition() {
  models::DynamoStoreOptions options = RegistryWorld::exact();
  options.throttling = true;
  options.partitions_per_table = 1;
  options.partition_wcu_per_s = 10;
  return options;
}

// Connection c1 in 60 rooms, joined within the partition's rate.
void crowd(RegistryWorld& world) {
  for (int room = 0; room < 60; ++room) {
    world.join("r" + std::to_string(room), "c1", "ann");
    world.advance(Duration::from_ms(200));
  }
  world.advance(Duration::from_s(10));
}

std::vector<std::string> rooms(int count) {
  std::vector<std::string> out;
  for (int room = 0; room < count; ++room) out.push_back("r" + std::to_string(room));
  return out;
}

TEST(RegistryClient, RemoveRetriesUnprocessedItemsUntilEveryRowIsGone) {
  RegistryWorld world(core_config(), one_slow_partition());
  crowd(world);
  ASSERT_EQ(world.rows_of("c1", rooms(60)), 60u);
  const Done done = world.remove("c1");
  EXPECT_EQ(done.error, "");
  const auto& removed = std::get<RemoveDone>(done.outcome);
  EXPECT_EQ(removed.rows_found, 60u);
  EXPECT_EQ(removed.rows_deleted, 60u);
  EXPECT_EQ(removed.rows_left, 0u);
  EXPECT_EQ(world.rows_of("c1", rooms(60)), 0u);
  EXPECT_GT(world.marks("registry.unprocessed_retried"), 0);  // the throttling happened
  EXPECT_EQ(world.marks("registry.unprocessed_dropped"), 0);
}

TEST(RegistryClient, TheSeedDropsUnprocessedItems) {
  RegistryWorld world(seed_config(), one_slow_partition());
  crowd(world);
  const Done done = world.remove("c1");
  EXPECT_EQ(done.error, "");  // the seed's code sees no error either
  const auto& removed = std::get<RemoveDone>(done.outcome);
  EXPECT_EQ(removed.rows_found, 60u);
  EXPECT_GT(removed.rows_left, 0u);
  EXPECT_EQ(world.rows_of("c1", rooms(60)), removed.rows_left);  // ghosts until TTL
  EXPECT_GT(world.marks("registry.unprocessed_dropped"), 0);
}

TEST(RegistryClient, RemoveReportsRowsLeftWhenAttemptsRunOut) {
  RegistryConfig config = core_config();
  config.attempts_max = 2;
  config.retry_base = Duration::from_ms(1);
  config.retry_cap = Duration::from_ms(1);  // retries come back before the partition refills
  RegistryWorld world(config, one_slow_partition());
  crowd(world);
  const Done done = world.remove("c1");
  const auto& removed = std::get<RemoveDone>(done.outcome);
  EXPECT_GT(removed.rows_left, 0u);
  EXPECT_EQ(world.rows_of("c1", rooms(60)), removed.rows_left);
  // A batch of which nothing can be written is an error (DynamoDB's rule).
  EXPECT_EQ(done.error, "ProvisionedThroughputExceededException after every attempt");
  EXPECT_GT(world.marks("registry.unprocessed_retried"), 0);
}

TEST(RegistryClient, LostRepliesAreRetriedBecauseEveryWriteIsIdempotent) {
  RegistryWorld world(core_config(), RegistryWorld::exact());
  world.lose_replies(2);
  EXPECT_EQ(world.join("lobby", "c1", "ann").error, "");
  EXPECT_EQ(world.marks("registry.retry"), 2);
  world.lose_replies(100);
  const Done failed = world.leave("lobby", "c1");
  EXPECT_EQ(failed.error, "no answer after every attempt");
  EXPECT_EQ(failed.requests, world.config().attempts_max);
}

TEST(RegistryClient, BroadcastDeliversToLiveMembersAndPrunesGoneOnesFromEveryRoom) {
  RegistryWorld world(core_config(), RegistryWorld::exact());
  for (const char* c : {"c1", "c2", "c3", "c4", "c5"}) world.join("lobby", c, std::string{"u-"} + c);
  world.join("side", "c4", "u-c4");  // a dead connection in a second room
  world.live() = {"c1", "c2", "c3"};
  const Done done = world.broadcast("lobby", "hello");
  EXPECT_EQ(done.error, "");
  const auto& result = std::get<BroadcastDone>(done.outcome);
  EXPECT_EQ(result.members, 5u);
  EXPECT_EQ(result.delivered, 3u);
  EXPECT_EQ(result.gone, 2u);
  EXPECT_EQ(result.rows_pruned, 3u);  // c4 in both rooms, c5 in one
  EXPECT_EQ(result.rows_left, 0u);
  EXPECT_EQ(world.rows_of("c4", {"lobby", "side"}), 0u);
  EXPECT_EQ(member_connections(world.members("lobby")), (std::vector<std::string>{"c1", "c2", "c3"}));
  EXPECT_EQ(world.posts().size(), 5u);
  EXPECT_EQ(world.client().operations_in_flight(), 0u);
}

TEST(RegistryClient, BroadcastRetriesThrottledPostsThenCountsThemFailed) {
  RegistryWorld world(core_config(), RegistryWorld::exact());
  world.join("lobby", "c1", "ann");
  world.join("lobby", "c2", "bob");
  world.live() = {"c1", "c2"};
  world.throttle_posts()["c1"] = 2;    // delivered at the third attempt
  world.throttle_posts()["c2"] = 100;  // never
  const Done done = world.broadcast("lobby", "hello");
  const auto& result = std::get<BroadcastDone>(done.outcome);
  EXPECT_EQ(result.delivered, 1u);
  EXPECT_EQ(result.failed, 1u);
  EXPECT_EQ(result.gone, 0u);
  EXPECT_EQ(world.posts().size(), 3u + world.config().post_attempts_max);
  EXPECT_EQ(world.marks("registry.post_retry"), 2 + static_cast<int>(world.config().post_attempts_max) - 1);
}

TEST(RegistryClient, BroadcastPostsAtMostTheConfiguredNumberAtOnce) {
  RegistryConfig config = core_config();
  config.posts_in_flight_max = 3;
  RegistryWorld world(config, RegistryWorld::exact());
  for (int i = 0; i < 10; ++i) world.join("lobby", "c" + std::to_string(i), "u");
  // A second client on the same table, driven by hand: DynamoDB answers at
  // once, posts stay unanswered until the test answers them.
  PrngSource random(2);
  RegistryClient client(config, random);
  std::vector<uint64_t> posts;
  Actions out;
  client.broadcast(1, "lobby", "hi", world.clock(), out);
  for (size_t i = 0; i < out.size(); ++i) {
    Actions more;
    if (const auto* call = std::get_if<DynamoCall>(&out[i])) {
      const auto reply = world.store().apply(call->request, world.wall());
      client.on_reply(call->token, &reply, world.clock(), more);
    } else if (const auto* post = std::get_if<PostToConnection>(&out[i])) {
      posts.push_back(post->token);
    }
    out.insert(out.end(), more.begin(), more.end());
  }
  ASSERT_EQ(posts.size(), 3u);  // the window, not the room
  Actions next;
  client.on_post_result(posts[0], PostStatus::ok, world.clock(), next);
  ASSERT_EQ(next.size(), 1u);  // one answered, one more let out
  EXPECT_EQ(std::get<PostToConnection>(next[0]).operation, 1u);
}

}  // namespace
}  // namespace leaseproof::registry::test
