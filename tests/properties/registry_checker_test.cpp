// The registry checker on hand-built traces: a broadcast that failed is a
// delivery violation unless a network partition had DynamoDB out of the
// handler's reach during it; a leave ends a membership and may delete only
// the row it asked for; the staleness it measures for the sweep
// reports (how long after a death an answer still counted the connection).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <string>

#include "properties/registry_checker.hpp"

namespace leaseproof::properties {
namespace {

using namespace leaseproof::literals;
using sim::EventKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RegistryTrace {
 public:
  RegistryTrace()
      : checker_(RegistryBounds{Duration::from_min(20), Duration::from_s(2), Duration::from_s(5), 500_ms,
                                Duration::from_s(91)}) {}
  RegistryTrace& at(Duration since_zero) {
    now_ = Instant::zero() + since_zero;
    return *this;
  }
  RegistryTrace& note(std::string label, std::string detail, int64_t value = 0) {
    sim::TraceEvent e;
    e.kind = EventKind::note;
    e.true_time = now_;
    e.value = value;
    e.label = keep(std::move(label));
    e.detail = keep(std::move(detail));
    checker_.observe(e);
    return *this;
  }
  RegistryTrace& partition(bool starts) {
    sim::TraceEvent e;
    e.kind = starts ? EventKind::partition_start : EventKind::partition_end;
    e.true_time = now_;
    checker_.observe(e);
    return *this;
  }
  // c1 of user ann, a member of r1 since 1 s.
  RegistryTrace& member() {
    return at(0_ms).note("gw.connect", "c1 ann").note("gw.join", "c1 r1").at(1000_ms).note("registry.joined", "c1 r1", 1);
  }
  RegistryChecker& finish() {
    checker_.finish(now_);
    return checker_;
  }

 private:
  std::string_view keep(std::string text) { return texts_.emplace_back(std::move(text)); }
  RegistryChecker checker_;
  Instant now_;
  std::deque<std::string> texts_;
};

// registry.broadcast_end's detail: room members delivered gone failed rows_left prune_failures error...
constexpr const char* kFailedEnd = "r1 0 0 0 0 0 0 no answer after every attempt";

TEST(RegistryChecker, AFailedBroadcastIsADeliveryViolationNamingTheError) {
  RegistryTrace trace;
  trace.member().at(10'000_ms).note("registry.broadcast", "r1", 7).at(19'000_ms).note("registry.broadcast_end",
                                                                                      kFailedEnd, 7);
  const RegistryChecker& checker = trace.finish();
  ASSERT_EQ(checker.violations().size(), 1u);
  EXPECT_THAT(checker.violations()[0],
              HasSubstr("missed c1, a live member since @1s: the member query failed (no answer after every attempt)"));
  EXPECT_EQ(checker.figures().broadcasts_failed_in_cut, 0u);
}

TEST(RegistryChecker, ABroadcastThatFailedWhileDynamoWasCutOffIsCountedNotAViolation) {
  for (const bool ends_during : {false, true}) {
    RegistryTrace trace;
    trace.member().at(9'000_ms).partition(true).at(10'000_ms).note("registry.broadcast", "r1", 7);
    if (ends_during) trace.at(15'000_ms).partition(false);
    trace.at(19'000_ms).note("registry.broadcast_end", kFailedEnd, 7);
    const RegistryChecker& checker = trace.finish();
    EXPECT_TRUE(checker.violations().empty()) << checker.violations()[0];
    EXPECT_EQ(checker.figures().broadcasts_failed_in_cut, 1u);
    EXPECT_EQ(checker.figures().misses_in_cut, 1u);
  }
}

TEST(RegistryChecker, APartitionThatEndedBeforeTheBroadcastExcusesNothing) {
  RegistryTrace trace;
  trace.member().at(5'000_ms).partition(true).at(8'000_ms).partition(false);
  trace.at(10'000_ms).note("registry.broadcast", "r1", 7).at(19'000_ms).note("registry.broadcast_end", kFailedEnd, 7);
  EXPECT_EQ(trace.finish().violations().size(), 1u);
}

TEST(RegistryChecker, DeletingALiveConnectionsRowIsLostMembership) {
  RegistryTrace trace;
  trace.member().at(5'000_ms).note("registry.delete", "c1 r1", 12);
  const RegistryChecker& live = trace.finish();
  ASSERT_EQ(live.violations().size(), 1u);
  EXPECT_THAT(live.violations()[0], HasSubstr("lost membership: operation 12 deleted the row of c1 in r1 at @5s, a live "
                                              "connection (connected @0s)"));
  RegistryTrace gone;
  gone.member().at(4'000_ms).note("gw.gone", "c1 closed").at(5'000_ms).note("registry.delete", "c1 r1", 12);
  EXPECT_TRUE(gone.finish().violations().empty());
}

TEST(RegistryChecker, ALeaveDeletesTheRowItAskedForAndEndsTheMembership) {
  // c1 asks to leave r1 at 5 s; the leave deletes that row (no lost
  // membership) and reports success at 6 s. A broadcast that began at 5.5 s
  // and left c1 out missed nobody (c1 asked to leave before it ended).
  RegistryTrace trace;
  trace.member().at(5'000_ms).note("gw.leave", "c1 r1").note("registry.leave", "c1 r1", 12);
  trace.at(5'200_ms).note("registry.delete", "c1 r1", 12);
  trace.at(5'500_ms).note("registry.broadcast", "r1", 13).at(5'800_ms).note("registry.broadcast_end", "r1 0 0 0 0 0 0 -", 13);
  trace.at(6'000_ms).note("registry.left", "c1 r1 -", 12);
  const RegistryChecker& checker = trace.at(10'000_ms).finish();
  EXPECT_TRUE(checker.violations().empty()) << checker.violations()[0];
  EXPECT_EQ(checker.figures().leaves_asked, 1u);
  EXPECT_EQ(checker.figures().leaves_ok, 1u);
  EXPECT_EQ(checker.figures().leave_deletes, 1u);
  EXPECT_EQ(checker.figures().expected_deliveries, 0u);

  // A join retry completing while the leave runs wrote the row the leave
  // then deletes: as asked, no lost membership.
  RegistryTrace retried;
  retried.member().at(5'000_ms).note("gw.leave", "c1 r1").note("registry.leave", "c1 r1", 12);
  retried.at(5'100_ms).note("registry.joined", "c1 r1", 9).at(5'200_ms).note("registry.delete", "c1 r1", 12);
  retried.at(6'000_ms).note("registry.left", "c1 r1 -", 12);
  const RegistryChecker& during = retried.at(10'000_ms).finish();
  EXPECT_TRUE(during.violations().empty()) << during.violations()[0];
  EXPECT_EQ(during.figures().leave_deletes, 1u);
}

TEST(RegistryChecker, ALeaveDeletesNoOtherRowAndABroadcastAfterItMustNotPostToTheConnection) {
  // The leave of r1 deleting c1's row in r2: lost membership, operation named.
  RegistryTrace other_room;
  other_room.member().at(1'000_ms).note("gw.join", "c1 r2").at(2'000_ms).note("registry.joined", "c1 r2", 2);
  other_room.at(5'000_ms).note("gw.leave", "c1 r1").note("registry.leave", "c1 r1", 12);
  other_room.at(5'200_ms).note("registry.delete", "c1 r2", 12);
  const RegistryChecker& wrong_row = other_room.finish();
  ASSERT_EQ(wrong_row.violations().size(), 1u);
  EXPECT_THAT(wrong_row.violations()[0], HasSubstr("lost membership: operation 12 deleted the row of c1 in r2"));

  // The leave reported success at 6 s; a broadcast to r1 beginning at 7 s
  // (past the read window) still posts to c1: its row was not deleted.
  RegistryTrace stale;
  stale.member().at(5'000_ms).note("gw.leave", "c1 r1").note("registry.leave", "c1 r1", 12);
  stale.at(6'000_ms).note("registry.left", "c1 r1 -", 12);
  stale.at(7'000_ms).note("registry.broadcast", "r1", 13).at(7'100_ms).note("gw.post", "c1 ok", 13);
  stale.at(7'200_ms).note("registry.broadcast_end", "r1 1 1 0 0 0 0 -", 13);
  const RegistryChecker& posted = stale.finish();
  ASSERT_EQ(posted.violations().size(), 1u);
  EXPECT_THAT(posted.violations()[0], HasSubstr("staleness: broadcast 13 to r1 (began @7s) posted to c1, which left r1 "
                                                "(asked @5s, reported done @6s)"));

  // Within the read window of the leave's end the post is no violation, and a
  // join completing after the ask (a retry) makes c1 a member again.
  for (const bool rejoined : {false, true}) {
    RegistryTrace early;
    early.member().at(5'000_ms).note("gw.leave", "c1 r1").note("registry.leave", "c1 r1", 12);
    early.at(6'000_ms).note("registry.left", "c1 r1 -", 12);
    if (rejoined) early.at(6'100_ms).note("registry.joined", "c1 r1", 14);
    early.at(rejoined ? 7'000_ms : 6'400_ms).note("registry.broadcast", "r1", 13).at(7'100_ms).note("gw.post", "c1 ok", 13);
    early.at(7'200_ms).note("registry.broadcast_end", "r1 1 1 0 0 0 0 -", 13);
    const RegistryChecker& checker = early.finish();
    EXPECT_TRUE(checker.violations().empty()) << checker.violations()[0];
  }
}

TEST(RegistryChecker, StalenessIsHowLongAfterADeathAnAnswerStillCountedIt) {
  RegistryTrace trace;
  trace.member().at(60'000_ms).note("gw.gone", "c1 abrupt");
  // A broadcast posts to it 3 s after its death; presence says ann online 5 s after.
  trace.at(62'000_ms).note("registry.broadcast", "r1", 9).at(63'000_ms).note("gw.post", "c1 gone", 9);
  trace.at(64'000_ms).note("registry.broadcast_end", "r1 1 0 1 0 0 0 -", 9);
  trace.at(65'000_ms).note("registry.presence", "ann online", 10);
  // A second connection that died and was never counted again: 0.
  trace.at(70'000_ms).note("gw.connect", "c2 bob").at(80'000_ms).note("gw.gone", "c2 closed");
  const RegistryChecker& checker = trace.at(90'000_ms).finish();
  EXPECT_TRUE(checker.violations().empty()) << checker.violations()[0];
  EXPECT_THAT(checker.staleness().broadcast_ms, ElementsAre(3000.0, 0.0));  // c1, c2
  EXPECT_THAT(checker.staleness().presence_ms, ElementsAre(5000.0, 0.0));   // ann, bob
  EXPECT_DOUBLE_EQ(checker.figures().connection_s, 60.0 + 10.0);
  EXPECT_EQ(checker.figures().connections, 2u);
}

// A presence read between a join's write and the handler seeing its answer
// finds the row: not staleness (registry seed 4 with 400 clients, 8 room
// shards and a 16 m TTL answered a user online 77 ms after it connected,
// before its join's answer, and was reported as a row past its TTL).
TEST(RegistryChecker, PresenceFromARowWhoseJoinIsInFlightIsNotStaleness) {
  RegistryTrace trace;
  trace.at(28'932_ms).note("gw.connect", "c1 ann").note("gw.join", "c1 r1");
  trace.at(29'008_ms).note("registry.presence", "ann online", 5);
  trace.at(29'049_ms).note("registry.joined", "c1 r1", 4);
  const RegistryChecker& checker = trace.at(30'000_ms).finish();
  EXPECT_TRUE(checker.violations().empty()) << checker.violations()[0];
  EXPECT_EQ(checker.figures().presence_online_joining, 1u);
}

// Without a join in flight, presence from no row, or only from rows past
// their TTL, is staleness, and the message says which.
TEST(RegistryChecker, PresenceWithNoLiveRowAndNoJoinInFlightIsStaleness) {
  RegistryTrace none;
  none.at(0_ms).note("gw.connect", "c1 ann").at(1000_ms).note("registry.presence", "ann online", 5);
  EXPECT_THAT(none.finish().violations(), ElementsAre(HasSubstr("the user has no row and no join in flight")));

  RegistryTrace expired;
  expired.member().at(Duration::from_min(21)).note("registry.presence", "ann online", 5);
  EXPECT_THAT(expired.finish().violations(),
              ElementsAre(HasSubstr("every row of the user (1) is past its TTL (ttl 20m0s) and no join is in flight")));
}

}  // namespace
}  // namespace leaseproof::properties
