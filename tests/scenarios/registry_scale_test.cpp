// Seed 003's verification figures (scenarios/registry_scale): a room's
// member query reads the room and nothing else, whatever the table's size; a
// Scan reads the table; one partition key per room overloads a partition
// that eight keys do not.

#include <gtest/gtest.h>

#include "scenarios/registry_scale.hpp"

namespace leaseproof::scenarios {
namespace {

RegistryScaleOptions small() {
  RegistryScaleOptions options;
  options.memberships = 20'000;
  options.room_sizes = {12, 1'000, 5'000};
  options.table_sizes = {2'000, 20'000};
  options.hot_room_members = 10'000;
  options.joins_per_s = 2'000;
  return options;
}

TEST(RegistryScale, AMemberQueryReadsTheRoomAndAScanTheTable) {
  const RegistryScaleReport report = measure_registry_scale(small());
  EXPECT_EQ(report.table_items, 20'000u);
  ASSERT_EQ(report.rooms.size(), 6u);  // 3 rooms x {1, 8} shards
  for (const QueryFigures& q : report.rooms) {
    EXPECT_EQ(q.members_returned, q.room_members) << q.room_members << " members, " << q.shards << " shards";
    EXPECT_EQ(q.items_read, q.room_members);  // nothing of other rooms
    EXPECT_GE(q.requests, q.shards);          // one chain per shard
    EXPECT_GT(q.latency, Duration::zero());
  }
  EXPECT_EQ(report.scan.table_items, 20'000u);
  EXPECT_GT(report.scan.read_units, 50 * report.rooms[0].read_units);
  // The 5,000-member room: one chain of pages with one key, eight short ones with eight.
  EXPECT_GT(report.rooms[2].latency, report.rooms[5].latency);

  ASSERT_EQ(report.table_sizes.size(), 2u);
  const TableSizeRow& smaller = report.table_sizes[0];
  const TableSizeRow& larger = report.table_sizes[1];
  EXPECT_EQ(smaller.query.items_read, 12u);
  EXPECT_EQ(larger.query.items_read, 12u);
  EXPECT_EQ(smaller.query.read_units, larger.query.read_units);  // the room's cost, not the table's
  EXPECT_EQ(smaller.scan.table_items, 2'000u);
  EXPECT_EQ(larger.scan.table_items, 20'000u);
  EXPECT_GT(larger.scan.read_units, 9 * smaller.scan.read_units);
}

TEST(RegistryScale, OneKeyPerRoomOverloadsAPartitionThatEightKeysDoNot) {
  const RegistryScaleReport report = measure_registry_scale(small());
  ASSERT_EQ(report.hot_room.size(), 2u);
  const HotRoomRow& one = report.hot_room[0];
  const HotRoomRow& eight = report.hot_room[1];
  EXPECT_EQ(one.shards, 1u);
  EXPECT_DOUBLE_EQ(one.hottest_key_wcu_per_s, 2'000.0);  // every join on one key
  EXPECT_GT(one.hottest_key_wcu_per_s, one.partition_wcu_per_s);
  EXPECT_GT(one.joins_throttled, 0u);
  EXPECT_EQ(eight.shards, 8u);
  EXPECT_LT(eight.hottest_key_wcu_per_s, 2'000.0 / 8 * 1.25);  // spread within 25% of even
  EXPECT_EQ(eight.joins_throttled, 0u);
  EXPECT_LT(eight.hottest_key_rcu_per_broadcast, one.hottest_key_rcu_per_broadcast / 6);
}

TEST(RegistryScale, OptionsOutsideTheirRangeAreNamed) {
  RegistryScaleOptions options = small();
  options.memberships = 10;
  EXPECT_NE(options.validate().find("memberships (10)"), std::string::npos) << options.validate();
  options = small();
  options.shard_counts = {0};
  EXPECT_NE(options.validate().find("shard count 0"), std::string::npos);
  options = small();
  options.joins_per_s = 0;
  EXPECT_NE(options.validate().find("joins per second (0)"), std::string::npos);
  EXPECT_EQ(small().validate(), "");
}

}  // namespace
}  // namespace leaseproof::scenarios
