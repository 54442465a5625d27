// Scenario tests of the lease manager (core/lease) against the simulated
// DynamoDB store, in a deterministic world of a few workers (lease_world.hpp).
// Parameters are the articles': lease 20 s, heartbeat 5 s, reconcile 60 s,
// margin 2 s, request timeout 2 s.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "lease_world.hpp"

namespace leaseproof::lease::test {
namespace {

using namespace literals;

LeaseConfig articles(ExpiryMode mode = ExpiryMode::wall) {
  LeaseConfig config;
  config.expiry_mode = mode;
  return config;
}

LeaseConfig seed_algorithm() {
  LeaseConfig config;
  config.algorithm = Algorithm::seed;
  return config;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

// The first session opened on `connection` by someone other than `previous`
// at or after `since`.
std::optional<SessionEvent> next_open(const LeaseWorld& world, const std::string& connection, size_t previous,
                                      Instant since) {
  for (const SessionEvent& e : world.session_log()) {
    if (e.open && e.connection == connection && e.worker != previous && e.at >= since) return e;
  }
  return std::nullopt;
}

// ---- one worker ---------------------------------------------------------------------

TEST(LeaseManager, OneWorkerAcquiresEveryFreeConnectionAndRenewsEachHeartbeat) {
  LeaseWorld world{articles(), 1};
  world.add_connections(5);
  const size_t w = world.start_worker();
  world.run_for(6_s);  // start jitter is at most 5 s
  ASSERT_EQ(world.open_sessions(w), 5u);
  EXPECT_EQ(world.worker(w).manager->active_connections(), 5u);
  for (const std::string& c : world.connections()) {
    const auto lease = world.lease(c);
    ASSERT_TRUE(lease);
    EXPECT_EQ(lease->owner, "w0");
    EXPECT_EQ(lease->epoch, 1);
    EXPECT_EQ(lease->counter, 1);
  }
  const Instant from = world.now();
  world.run_for(60_s);
  // One renew per connection per heartbeat, and nothing else is needed.
  EXPECT_GE(world.calls(w, RequestKind::renew, from), 5 * 11);
  EXPECT_LE(world.calls(w, RequestKind::renew, from), 5 * 13);
  EXPECT_EQ(world.calls(w, RequestKind::read, from), 0);
  EXPECT_EQ(world.open_sessions(w), 5u);
  EXPECT_TRUE(world.worker(w).closes.empty());
  for (const std::string& c : world.connections()) {
    const auto lease = world.lease(c);
    EXPECT_EQ(lease->epoch, 1);  // renewing never changes the epoch
    EXPECT_GE(lease->counter, 12);
    const int64_t wall_ms = world.clock_of(w).wall.ms();
    EXPECT_GT(lease->expires_at_ms, wall_ms + 14'000);  // renewed within the last heartbeat
    EXPECT_LE(lease->expires_at_ms, wall_ms + 20'000);
  }
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

// Lease 8 s, margin 2 s, heartbeat 5 s: the owner's deadline is 6 s after
// its confirmed send. Renewing at the heartbeat left 1 s for the round trip;
// the renew now goes out a request timeout (2 s) before the deadline.
TEST(LeaseManager, ATightHeartbeatRenewsARequestTimeoutBeforeTheDeadline) {
  LeaseConfig tight = articles();
  tight.lease_duration = 8_s;
  EXPECT_EQ(tight.renew_interval(), 4_s);
  EXPECT_EQ(articles().renew_interval(), 5_s);  // room enough: the heartbeat
  LeaseConfig seed = seed_algorithm();
  seed.lease_duration = 8_s;
  EXPECT_EQ(seed.renew_interval(), 5_s);  // the articles renew every heartbeat

  LeaseWorld world{tight, 1};
  world.set_latency_jitter(600_ms);  // round trips of up to 1.2 s: more than the old 1 s of room
  world.add_connections(5);
  const size_t w = world.start_worker();
  ASSERT_TRUE(world.run_until_true(30_s, [&] { return world.open_sessions(w) == 5u; }));
  const Instant from = world.now();
  world.run_for(120_s);
  // One renew per connection about every 4 s (plus the round trip), none lost.
  EXPECT_GE(world.calls(w, RequestKind::renew, from), 5 * 24);
  EXPECT_LE(world.calls(w, RequestKind::renew, from), 5 * 31);
  EXPECT_EQ(world.open_sessions(w), 5u);
  EXPECT_TRUE(world.worker(w).closes.empty()) << world.worker(w).closes.size() << " sessions closed";
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, RespectsCapacityAndASecondWorkerTakesTheRest) {
  LeaseConfig config = articles();
  config.capacity = 3;
  LeaseWorld world{config, 2};
  world.add_connections(5);
  const size_t a = world.start_worker();
  world.run_for(6_s);
  EXPECT_EQ(world.open_sessions(a), 3u);
  const size_t b = world.start_worker();
  world.run_for(6_s);
  EXPECT_EQ(world.open_sessions(b), 2u);
  world.run_for(2_min);
  EXPECT_EQ(world.open_sessions(a) + world.open_sessions(b), 5u);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

// Two processes started with one worker id (a StatefulSet pod force-deleted
// while its node is cut off, an operator's second copy). Each process names
// itself in owner_incarnation, so the second is another owner: it takes none
// of the first's live leases, and takes them over only once they expired.
// Before, "OR lease_owner = :me" let it take them at once while the first
// still acted (lease-swarm seed 3 with twins: overlaps of 1 to 4 s).
class TwoProcessesOneWorkerId : public ::testing::TestWithParam<ExpiryMode> {};

TEST_P(TwoProcessesOneWorkerId, NeverActOnOneLeaseAtOnce) {
  LeaseWorld world{articles(GetParam()), 11};
  world.add_connections(4);
  const size_t first = world.start_worker();
  world.run_for(6_s);
  ASSERT_EQ(world.open_sessions(first), 4u);
  const size_t second = world.start_worker({}, std::nullopt, world.worker(first).name);
  world.run_for(2_min);  // two sweeps of the second process
  EXPECT_EQ(world.open_sessions(first), 4u);
  EXPECT_EQ(world.open_sessions(second), 0u);
  for (const std::string& c : world.connections()) EXPECT_EQ(world.lease(c)->epoch, 1) << c;
  // The first goes away: the second takes its leases as any other worker's.
  world.crash(first);
  EXPECT_TRUE(world.run_until_true(3_min, [&] { return world.open_sessions(second) == 4; }));
  EXPECT_GT(world.worker(second).marks.count("lease.takeover_expired"), 0u);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

INSTANTIATE_TEST_SUITE_P(Modes, TwoProcessesOneWorkerId, ::testing::Values(ExpiryMode::wall, ExpiryMode::counter),
                         [](const auto& mode) { return std::string{to_string(mode.param)}; });

// A release notice is acted on only with room for it; otherwise it is for
// another worker (the runtime hands it back to the queue, docs/lease-core.md).
TEST(LeaseManager, AReleaseNoticeWithoutRoomIsLeftForAnotherWorker) {
  LeaseConfig config = articles();
  config.capacity = 3;
  LeaseWorld world{config, 2};
  world.add_connections(4);
  const size_t a = world.start_worker();
  EXPECT_EQ(world.room(a), 3u);  // nothing held or asked for yet
  world.run_for(6_s);
  ASSERT_EQ(world.open_sessions(a), 3u);
  EXPECT_EQ(world.room(a), 0u);
  std::string spare;
  for (const std::string& c : world.connections()) {
    if (!world.lease(c) || world.lease(c)->owner.empty()) spare = c;
  }
  ASSERT_FALSE(spare.empty());
  const int acquires = world.calls(a, RequestKind::acquire);
  EXPECT_FALSE(world.notify(a, spare));
  EXPECT_EQ(world.calls(a, RequestKind::acquire), acquires);  // nothing sent
  const size_t b = world.start_worker();
  world.run_for(1_ms);  // b's start sweep is on its way; it has room for the notice
  EXPECT_GT(world.room(b), 0u);
  EXPECT_TRUE(world.notify(b, spare));
  std::string held;
  for (const std::string& c : world.connections()) {
    if (world.acting_owner(c) == a) held = c;
  }
  ASSERT_FALSE(held.empty());
  EXPECT_TRUE(world.notify(a, held)) << "a notice for a lease it holds is done with, room or not";
  world.run_for(6_s);
  EXPECT_EQ(world.open_sessions(b), 1u);
  world.sigterm(b);
  EXPECT_EQ(world.room(b), 0u);  // draining: no room
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, UnreachableDynamoClosesTheSessionAtTheDeadlineBeforeAnyoneElseAcquires) {
  LeaseWorld world{articles(), 3};
  world.add_connections(3);
  const size_t owner = world.start_worker();
  world.run_for(6_s);
  const size_t other = world.start_worker();
  world.run_for(70_s);  // the other worker has swept and watches
  ASSERT_EQ(world.open_sessions(owner), 3u);
  const Instant cut = world.now();
  world.set_unreachable(owner, true);
  world.run_for(60_s);
  EXPECT_EQ(world.open_sessions(owner), 0u);
  EXPECT_GE(world.mark_count("lease.deadline_stop"), 3);
  EXPECT_GE(world.mark_count("lease.renew_timeout_reread"), 1);
  for (const std::string& c : world.connections()) {
    const Instant deadline = world.latest_deadline(owner, c);
    std::optional<SessionEvent> closed;
    for (const SessionEvent& e : world.session_log()) {
      if (!e.open && e.worker == owner && e.connection == c) closed = e;
    }
    ASSERT_TRUE(closed);
    EXPECT_EQ(closed->reason, CloseReason::deadline);
    EXPECT_LE(closed->at, deadline);                   // never acts past the deadline
    EXPECT_GE(closed->at, deadline - 10_ms);           // and not needlessly early
    EXPECT_LE(closed->at - cut, 20_s);
    const auto taken = next_open(world, c, owner, cut);
    ASSERT_TRUE(taken) << c;
    EXPECT_EQ(taken->worker, other);
    EXPECT_GT(taken->at, closed->at);
  }
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, ALoneWorkerReacquiresItsOwnLeasesAfterAnOutage) {
  // Nobody else will take them: after its deadline stop, the worker's own
  // stale leases (still naming it as owner) must come back to it.
  LeaseWorld world{articles(), 4};
  world.add_connections(2);
  const size_t w = world.start_worker();
  world.run_for(6_s);
  ASSERT_EQ(world.open_sessions(w), 2u);
  world.set_unreachable(w, true);
  world.run_for(30_s);
  ASSERT_EQ(world.open_sessions(w), 0u);
  world.set_unreachable(w, false);
  // At the latest at the next reconcile sweep.
  EXPECT_TRUE(world.run_until_true(70_s, [&] { return world.open_sessions(w) == 2; }));
  for (const std::string& c : world.connections()) EXPECT_EQ(world.lease(c)->epoch, 2);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, ADroppedReclaimOfItsOwnStaleLeaseIsNotMistakenForAnAcquire) {
  // The read after the ambiguous acquire shows this worker as the owner, but
  // of the old, expired lease: adopting it would act on a lease anyone may take.
  LeaseWorld world{articles(), 22};
  world.add_connections(1);
  const size_t w = world.start_worker();
  world.run_for(6_s);
  world.set_unreachable(w, true);
  world.run_for(30_s);
  ASSERT_EQ(world.open_sessions(w), 0u);
  world.set_unreachable(w, false);
  world.next_fate(w, Fate::drop_request, RequestKind::acquire);
  ASSERT_TRUE(world.run_until_true(70_s, [&] { return world.open_sessions(w) == 1; }));
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire"), 1);
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire_not_applied"), 1);
  EXPECT_EQ(world.worker(w).sessions.at("c0"), 2);  // a fresh epoch, not the stale one
  EXPECT_GT(world.lease("c0")->expires_at_ms, world.clock_of(w).wall.ms() + 15'000);
}

// ---- crash recovery -----------------------------------------------------------------

struct Recovery {
  Duration worst;
  int taken = 0;
};

// Starts `owner` first so that it owns everything, then the others; crashes
// the owner and checks every takeover happened after the owner's deadline.
Recovery crash_and_measure(LeaseWorld& world, size_t owner, Duration observe) {
  world.run_for(70_s);
  const Instant crash_at = world.now() + 1234_ms;  // off the heartbeat grid
  world.run_until(crash_at);
  world.crash(owner);
  world.run_for(observe);
  Recovery recovery;
  for (const std::string& c : world.connections()) {
    const auto taken = next_open(world, c, owner, crash_at);
    if (!taken) {
      ADD_FAILURE() << c << " was never taken over";
      continue;
    }
    ++recovery.taken;
    EXPECT_GT(taken->at, world.latest_deadline(owner, c)) << c << " taken before the old owner's deadline";
    recovery.worst = std::max(recovery.worst, taken->at - crash_at);
  }
  return recovery;
}

TEST(LeaseManager, CrashWallModeTakeoverAfterTheDeadlineWithSkewWithinTwiceTheMargin) {
  LeaseWorld world{articles(ExpiryMode::wall), 5};
  world.add_connections(6);
  const size_t owner = world.start_worker(ahead(-1900_ms));
  world.run_for(6_s);
  world.start_worker(ahead(1900_ms));  // 3.8 s ahead of the owner: within 2 x 2 s
  world.start_worker(ahead(0_ms));
  const Recovery recovery = crash_and_measure(world, owner, 60_s);
  EXPECT_EQ(recovery.taken, 6);
  // lease + margin + skew + a watch read.
  EXPECT_LE(recovery.worst, 20_s + 2_s + 4_s + 1_s) << format_duration(recovery.worst);
  EXPECT_GE(world.mark_count("lease.takeover_expired"), 6);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, CrashCounterModeTakeoverAfterTheDeadlineWhateverTheWallSkew) {
  LeaseWorld world{articles(ExpiryMode::counter), 6};
  world.add_connections(6);
  const size_t owner = world.start_worker(ahead(0_s));
  world.run_for(6_s);
  world.start_worker(ahead(15_s));   // 15 s fast
  world.start_worker(ahead(-40_s));  // 40 s slow
  const Instant before = world.now();
  const Recovery recovery = crash_and_measure(world, owner, 90_s);
  EXPECT_EQ(recovery.taken, 6);
  // The watcher sees the owner's last counter within one watch interval (5 s)
  // of its write, and takes the lease lease + margin after that.
  EXPECT_LE(recovery.worst, 20_s + 2_s + 5_s + 1_s) << format_duration(recovery.worst);
  EXPECT_GE(world.mark_count("lease.takeover_expired"), 6);
  // Watching costs one read per watch interval per watcher, no more (no read
  // storm while a lease sits unchanged): 6 leases, 2 watchers, 5 s.
  int reads = 0;
  for (size_t i = 1; i < world.worker_count(); ++i) reads += world.calls(i, RequestKind::read, before);
  const int64_t intervals = (world.now() - before) / 5_s + 2;
  EXPECT_LE(reads, 6 * 2 * intervals) << "reads by watchers in " << format_duration(world.now() - before);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, ASurvivorTakesOverEveryLeaseAfterAMassCrash) {
  // Watchers are chosen among the owners the last sweep saw; when most of
  // them die at once, the survivor must still recover every lease.
  for (ExpiryMode mode : {ExpiryMode::wall, ExpiryMode::counter}) {
    LeaseConfig config = articles(mode);
    config.capacity = 2;
    LeaseWorld world{config, 21};
    world.add_connections(12);
    for (int i = 0; i < 6; ++i) {
      world.start_worker();
      world.run_for(6_s);
    }
    LeaseConfig roomy = config;
    roomy.capacity = 20;
    const size_t survivor = world.start_worker({}, roomy);
    world.run_for(70_s);  // everyone has swept
    ASSERT_EQ(world.open_sessions(survivor), 0u);
    for (size_t i = 0; i < 6; ++i) world.crash(i);
    // Two sweeps to forget the dead (their stamps expire), then a lease.
    world.run_for(3_min + 30_s);
    EXPECT_EQ(world.open_sessions(survivor), 12u) << to_string(mode);
    EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
  }
}

TEST(LeaseManager, PausedOwnerStopsActingWhenItResumesAndAnotherTookOver) {
  LeaseWorld world{articles(ExpiryMode::counter), 7};
  world.add_connections(2);
  const size_t owner = world.start_worker();
  world.run_for(6_s);
  const size_t other = world.start_worker();
  world.run_for(70_s);
  world.pause(owner, 60_s);
  world.run_for(61_s);
  EXPECT_EQ(world.open_sessions(owner), 0u);
  EXPECT_EQ(world.open_sessions(other), 2u);
  EXPECT_GE(world.mark_count("lease.deadline_stop"), 2);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

// ---- ambiguous outcomes ---------------------------------------------------------------

TEST(LeaseManager, LostAcquireReplyIsReadBackAndTheLeaseIsNotOrphaned) {
  LeaseWorld world{articles(), 8};
  world.add_connections(1);
  const size_t w = world.start_worker();
  world.next_fate(w, Fate::lose_reply, RequestKind::acquire);
  ASSERT_TRUE(world.run_until_true(10_s, [&] { return world.open_sessions(w) == 1; }));
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire"), 1);
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire_was_ours"), 1);
  EXPECT_EQ(world.calls(w, RequestKind::acquire), 1);  // the read settled it
  EXPECT_EQ(world.lease("c0")->owner, "w0");
  EXPECT_EQ(world.worker(w).sessions.at("c0"), world.lease("c0")->epoch);
  world.run_for(30_s);
  EXPECT_EQ(world.open_sessions(w), 1u);  // renewals work at the read epoch
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

// The acquire's reply is lost and so is the reply to the read that follows:
// the worker reads again instead of leaving a lease that is its own orphaned
// until it expires (found by a counter-mode swarm with loss 1/5: five
// acquires in a row applied unseen, a handover of 2 min 41 s).
TEST(LeaseManager, ALostReadAfterALostAcquireReplyIsAskedAgain) {
  LeaseWorld world{articles(), 8};
  world.add_connections(1);
  const size_t w = world.start_worker();
  world.next_fate(w, Fate::lose_reply, RequestKind::acquire);
  world.next_fate(w, Fate::deliver, RequestKind::read);  // the sweep's read of the candidate
  world.next_fate(w, Fate::lose_reply, RequestKind::read);
  world.next_fate(w, Fate::drop_request, RequestKind::read);
  ASSERT_TRUE(world.run_until_true(12_s, [&] { return world.open_sessions(w) == 1; }));
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire"), 1);
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire_reread"), 2);
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire_was_ours"), 1);
  EXPECT_EQ(world.calls(w, RequestKind::acquire), 1);
  EXPECT_EQ(world.lease("c0")->owner, "w0");
  EXPECT_EQ(world.lease("c0")->epoch, 1);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, DroppedAcquireIsReadBackAndRetried) {
  LeaseWorld world{articles(), 9};
  world.add_connections(1);
  const size_t w = world.start_worker();
  world.next_fate(w, Fate::drop_request, RequestKind::acquire);
  ASSERT_TRUE(world.run_until_true(10_s, [&] { return world.open_sessions(w) == 1; }));
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire"), 1);
  EXPECT_EQ(world.mark_count("lease.ambiguous_acquire_was_ours"), 0);
  EXPECT_EQ(world.calls(w, RequestKind::acquire), 2);
  EXPECT_EQ(world.lease("c0")->epoch, 1);
}

TEST(LeaseManager, LostRenewReplyIsConfirmedByARead) {
  LeaseWorld world{articles(), 10};
  world.add_connections(1);
  const size_t w = world.start_worker();
  world.run_for(6_s);
  world.next_fate(w, Fate::lose_reply, RequestKind::renew);
  world.run_for(30_s);
  EXPECT_EQ(world.mark_count("lease.renew_timeout_reread"), 1);
  EXPECT_EQ(world.mark_count("lease.renew_confirmed_by_read"), 1);
  EXPECT_EQ(world.open_sessions(w), 1u);
  EXPECT_TRUE(world.worker(w).closes.empty());
}

TEST(LeaseManager, DroppedRenewIsReadAndRenewedAgain) {
  LeaseWorld world{articles(), 11};
  world.add_connections(1);
  const size_t w = world.start_worker();
  world.run_for(6_s);
  world.next_fate(w, Fate::drop_request, RequestKind::renew);
  const Instant from = world.now();
  world.run_for(7_s);
  EXPECT_EQ(world.mark_count("lease.renew_timeout_reread"), 1);
  EXPECT_EQ(world.mark_count("lease.renew_confirmed_by_read"), 0);
  EXPECT_EQ(world.calls(w, RequestKind::renew, from), 2);  // the dropped one and its retry
  EXPECT_EQ(world.open_sessions(w), 1u);
}

TEST(LeaseManager, RenewRefusedBecauseAnotherAcquiredIsReadAndTheSessionClosedAsLost) {
  LeaseWorld world{articles(), 12};
  world.add_connections(1);
  const size_t w = world.start_worker();
  world.run_for(6_s);
  // An intruder takes the lease by force (an operator, a buggy peer).
  const Clock clock = world.clock_of(w);
  LeaseConfig intruder = articles();
  const auto forced = world.apply(acquire_request(intruder, "c0", "intruder", clock.wall.ms() + 3'600'000, {}));
  ASSERT_TRUE(forced.ok());
  const Instant forced_at = world.now();
  world.run_for(6_s);
  EXPECT_EQ(world.mark_count("lease.renew_refused_reread"), 1);
  EXPECT_EQ(world.mark_count("lease.lost"), 1);
  ASSERT_EQ(world.worker(w).closes.size(), 1u);
  EXPECT_EQ(world.worker(w).closes[0].reason, CloseReason::lost);
  EXPECT_EQ(world.worker(w).closes[0].epoch, 1);
  EXPECT_LE(world.session_log().back().at - forced_at, 5_s + 50_ms);  // at the next heartbeat
  EXPECT_EQ(world.lease("c0")->owner, "intruder");
}

TEST(LeaseManager, StoppedConnectionClosesTheSessionAsStopped) {
  LeaseWorld world{articles(), 13};
  world.add_connections(1);
  const size_t w = world.start_worker();
  world.run_for(6_s);
  ASSERT_TRUE(world.apply(stop_connection_request(world.config(), "c0")).ok());
  world.run_for(6_s);
  ASSERT_EQ(world.worker(w).closes.size(), 1u);
  EXPECT_EQ(world.worker(w).closes[0].reason, CloseReason::stopped);
  world.run_for(2_min);
  EXPECT_EQ(world.open_sessions(w), 0u);  // and it is not acquired again
}

// A long-lived worker meets connections that come and go: what it keeps for
// them is dropped once they are gone (here: stopped while it held them).
TEST(LeaseManager, ForgetsConnectionsItNoLongerHolds) {
  LeaseWorld world{articles(), 14};
  world.add_connections(20);
  const size_t w = world.start_worker();
  world.run_for(6_s);
  ASSERT_EQ(world.open_sessions(w), 20u);
  EXPECT_EQ(world.worker(w).manager->tracked_connections(), 20u);
  for (const std::string& c : world.connections()) {
    ASSERT_TRUE(world.apply(stop_connection_request(world.config(), c)).ok());
  }
  world.run_for(3_min);  // the renews are refused, then reconcile rounds pass
  EXPECT_EQ(world.open_sessions(w), 0u);
  EXPECT_EQ(world.worker(w).manager->tracked_connections(), 0u);
}

// A worker keeps what its sweeps showed of other workers' leases, watched or
// not (counter mode needs that to see a counter unchanged). A stopped
// connection leaves the STARTED-only index and no sweep shows it again, so
// the record is dropped after the first complete sweep without it: neither a
// worker that does not watch the lease nor one at capacity (which does not
// read what it watches) would ever learn otherwise.
TEST(LeaseManager, ForgetsLeasesItDoesNotWatchOnceSweepsNoLongerShowThem) {
  for (const ExpiryMode mode : {ExpiryMode::wall, ExpiryMode::counter}) {
    SCOPED_TRACE(mode == ExpiryMode::wall ? "wall" : "counter");
    LeaseConfig config = articles(mode);
    config.capacity = 6;  // 4 workers share 24 connections
    LeaseWorld world{config, 21};
    world.add_connections(24);
    std::vector<size_t> workers;
    for (int i = 0; i < 4; ++i) workers.push_back(world.start_worker());
    world.run_for(3_min);  // everything taken, and sweeps have seen every lease
    size_t tracked = 0;
    for (const size_t w : workers) {
      ASSERT_EQ(world.open_sessions(w), 6u);
      tracked += world.worker(w).manager->tracked_connections();
    }
    // Each lease has an owner, 2 watchers and one worker that does not watch
    // it: every worker keeps something about every lease.
    ASSERT_EQ(tracked, 4u * 24u);
    for (const std::string& c : world.connections()) {
      ASSERT_TRUE(world.apply(stop_connection_request(world.config(), c)).ok());
    }
    world.run_for(3_min);
    for (const size_t w : workers) {
      EXPECT_EQ(world.open_sessions(w), 0u);
      EXPECT_EQ(world.worker(w).manager->tracked_connections(), 0u) << world.worker(w).name;
    }
    // All 18 records a worker kept: a worker at capacity does not read the
    // leases it watches either, so the sweep is what tells every worker.
    EXPECT_EQ(world.mark_count("lease.forgot_unseen"), 4 * 18);
    EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
  }
}

// A worker says when it starts and stops watching a lease (WatchChange), so
// that a checker can tell a takeover by a watcher from one by a sweep: each
// lease of a live owner has its watchers armed, none is armed by its owner;
// a crashed owner's leases are taken by their watchers, which disarm as they
// take them; a draining worker disarms everything it watched.
TEST(LeaseManager, WatchersSayWhenTheyStartAndStopWatchingALease) {
  for (const ExpiryMode mode : {ExpiryMode::wall, ExpiryMode::counter}) {
    SCOPED_TRACE(mode == ExpiryMode::wall ? "wall" : "counter");
    LeaseWorld world{articles(mode), 31};
    world.add_connections(12);
    std::vector<size_t> workers;
    for (int i = 0; i < 4; ++i) workers.push_back(world.start_worker());
    world.run_for(3_min);
    auto watchers_of = [&](const std::string& connection) {
      size_t count = 0;
      for (const size_t w : workers) count += world.worker(w).armed.contains(connection) ? 1 : 0;
      return count;
    };
    // The ranked watchers, and any worker whose own acquire was refused (it
    // read the lease then): never fewer than the ranking asks for.
    for (const std::string& c : world.connections()) {
      EXPECT_GE(watchers_of(c), world.config().watchers_per_lease) << c;
    }
    for (const size_t w : workers) {
      for (const auto& [connection, epoch] : world.worker(w).sessions) {
        EXPECT_FALSE(world.worker(w).armed.contains(connection)) << "an owner watches its own " << connection;
      }
    }
    size_t victim = workers[0];
    for (const size_t w : workers) {
      if (world.worker(w).sessions.size() > world.worker(victim).sessions.size()) victim = w;
    }
    const std::map<std::string, int64_t> lost = world.worker(victim).sessions;
    ASSERT_FALSE(lost.empty());
    world.crash(victim);
    world.run_for(1_min);
    for (const auto& [connection, epoch] : lost) {
      size_t owner = workers.size();
      for (const size_t w : workers) {
        if (w != victim && world.worker(w).sessions.contains(connection)) owner = w;
      }
      ASSERT_LT(owner, workers.size()) << connection << " was not taken over";
      EXPECT_FALSE(world.worker(owner).armed.contains(connection));
    }
    EXPECT_GT(world.mark_count("lease.takeover_expired"), 0);
    size_t drained = victim;
    for (const size_t w : workers) {
      if (w != victim && !world.worker(w).armed.empty()) drained = w;
    }
    ASSERT_NE(drained, victim) << "no survivor watches anything";
    world.sigterm(drained);
    EXPECT_TRUE(world.worker(drained).armed.empty());
    EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
  }
}

// ---- drain ----------------------------------------------------------------------------

TEST(LeaseManager, SigtermDrainsReleasesAnnouncesAndANotifiedWorkerTakesOverAtOnce) {
  LeaseConfig config = articles();
  LeaseWorld world{config, 14};
  world.set_auto_notify(true);
  world.add_connections(4);
  const size_t old_worker = world.start_worker();
  world.run_for(6_s);
  const size_t new_worker = world.start_worker();
  world.run_for(10_s);
  ASSERT_EQ(world.open_sessions(old_worker), 4u);
  const Instant term_at = world.now();
  world.sigterm(old_worker);
  EXPECT_EQ(world.open_sessions(old_worker), 0u);  // sessions stop before anything is written
  world.run_for(1_s);
  auto& w = world.worker(old_worker);
  EXPECT_TRUE(w.drain_complete);
  EXPECT_EQ(w.closes.size(), 4u);
  for (const CloseSession& c : w.closes) EXPECT_EQ(c.reason, CloseReason::drained);
  EXPECT_EQ(world.calls(old_worker, RequestKind::release), 4);
  EXPECT_EQ(w.notified.size(), 4u);
  // Each notice names its release: the connection, the epoch released and
  // this process, so a FIFO queue drops only a resend of it, never a later
  // release of the connection (swarm seed 800292, liveness wall: notices
  // named by connection and process only were dropped as duplicates of the
  // same process's release of an earlier epoch).
  std::set<std::string> ids;
  for (const NotifyReleased& notice : w.notified) {
    EXPECT_EQ(notice.epoch, 1) << notice.connection;
    EXPECT_EQ(notice.deduplication_id,
              release_notice_id(notice.connection, w.name, w.manager->process_incarnation(), notice.epoch));
    ids.insert(notice.deduplication_id);
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_NE(release_notice_id("c1", "w", 7, 1), release_notice_id("c1", "w", 7, 2));
  EXPECT_NE(release_notice_id("c1", "w", 7, 1), release_notice_id("c1", "w", 8, 1));
  EXPECT_EQ(world.mark_count("lease.drain"), 1);
  for (const std::string& c : world.connections()) {
    const auto taken = next_open(world, c, old_worker, term_at);
    ASSERT_TRUE(taken) << c;
    EXPECT_EQ(taken->worker, new_worker);
    EXPECT_LT(taken->at - term_at, 200_ms);  // graceful handover: notification + acquire
    EXPECT_EQ(world.lease(c)->epoch, 2);
  }
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, SigtermWhileAnAcquireIsInFlightReleasesWhatItGetsBeforeDrainComplete) {
  LeaseWorld world{articles(), 15};
  world.add_connections(3);
  const size_t w = world.start_worker();
  ASSERT_TRUE(world.run_until_true(6_s, [&] { return world.calls(w, RequestKind::acquire) == 3; }));
  world.sigterm(w);
  world.run_for(5_s);
  EXPECT_TRUE(world.worker(w).drain_complete);
  EXPECT_EQ(world.open_sessions(w), 0u);
  for (const std::string& c : world.connections()) {
    const auto lease = world.lease(c);
    EXPECT_EQ(lease->owner, "") << c << " left owned by a drained worker";
    EXPECT_EQ(lease->expires_at_ms, 0);
  }
  EXPECT_EQ(world.worker(w).notified.size(), 3u);
}

TEST(LeaseManager, SigtermWithNothingHeldCompletesAtOnce) {
  LeaseWorld world{articles(), 16};
  const size_t w = world.start_worker();
  world.run_for(1_s);
  world.sigterm(w);
  EXPECT_TRUE(world.worker(w).drain_complete);
}

// ---- duplicate notifications and the seed algorithm ------------------------------------

TEST(LeaseManager, CounterModeADuplicateReleaseNotificationCannotLetAFastClockStealALiveLease) {
  // SQS is at-least-once: a late duplicate of an old release reaches a worker
  // whose wall clock is a minute fast, while the lease has a live owner.
  LeaseWorld world{articles(ExpiryMode::counter), 18};
  world.add_connections(1);
  const size_t owner = world.start_worker();
  world.run_for(6_s);
  const size_t fast = world.start_worker(ahead(60_s));
  world.run_for(1_s);
  world.notify(fast, "c0");
  world.run_for(1_s);
  EXPECT_EQ(world.open_sessions(owner), 1u);
  EXPECT_EQ(world.open_sessions(fast), 0u);
  EXPECT_EQ(world.lease("c0")->owner, "w0");
  EXPECT_GE(world.mark_count("lease.acquire_refused"), 1);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, WallModeALateDuplicateReleaseNotificationCannotTakeALeaseWithinTheMargin) {
  // The owner's renews stop reaching DynamoDB (cut off, or its writes
  // throttled): it acts until its deadline, lease - margin after its last
  // renew. A second before that deadline, a late duplicate of an old release
  // notice reaches a worker whose wall clock is 3.5 s ahead (the 4 s
  // tolerated: twice the margin). Its acquire, sent without a read, must be
  // refused: on its clock the lease has not expired by the margin. An
  // acquire condition that took a lease the margin before its expiry
  // (acquire-margin-sign, docs/mutants.md) takes it here from an owner that
  // still acts.
  LeaseWorld world{articles(ExpiryMode::wall), 20};
  world.add_connections(1);
  const size_t owner = world.start_worker();
  world.run_for(6_s);
  const size_t fast = world.start_worker(ahead(3500_ms));
  world.run_for(1_s);
  world.set_unreachable(owner, true);
  const Instant deadline = world.latest_deadline(owner, "c0");
  world.run_until(deadline - 1_s);
  ASSERT_EQ(world.open_sessions(owner), 1u);
  EXPECT_TRUE(world.notify(fast, "c0"));
  world.run_for(500_ms);
  EXPECT_EQ(world.open_sessions(fast), 0u);
  EXPECT_EQ(world.lease("c0")->owner, "w0");
  EXPECT_GE(world.mark_count("lease.acquire_refused"), 1);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

TEST(LeaseManager, SeedAlgorithmAWorkerSixteenSecondsFastTakesALiveLease) {
  LeaseWorld world{seed_algorithm(), 19};
  world.add_connections(4);
  world.start_worker();
  world.run_for(6_s);
  world.start_worker(ahead(16_s));
  EXPECT_TRUE(world.run_until_true(30_min, [&] { return !world.violations().empty(); }))
      << "the articles' algorithm survived a 16 s skew";
}

TEST(LeaseManager, CoreCounterModeSurvivesTheSameSixteenSecondSkew) {
  LeaseWorld world{articles(ExpiryMode::counter), 19};
  world.add_connections(4);
  const size_t owner = world.start_worker();
  world.run_for(6_s);
  world.start_worker(ahead(16_s));
  world.run_for(30_min);
  EXPECT_EQ(world.open_sessions(owner), 4u);
  EXPECT_TRUE(world.violations().empty()) << joined(world.violations());
}

// Pauses the owner for 25 s once a minute (each pause longer than the lease).
bool pauses_break_ownership(LeaseWorld& world, size_t owner, int rounds) {
  for (int round = 0; round < rounds && world.violations().empty(); ++round) {
    world.pause(owner, 25_s);
    world.run_for(60_s + Duration::from_ms(round * 1'700));
  }
  return !world.violations().empty();
}

TEST(LeaseManager, SeedAlgorithmAPausedOwnerActsAgainAfterItsLeaseWasTaken) {
  LeaseWorld world{seed_algorithm(), 20};
  world.add_connections(2);
  const size_t owner = world.start_worker();
  world.run_for(6_s);
  world.start_worker();
  world.run_for(10_s);
  EXPECT_TRUE(pauses_break_ownership(world, owner, 30)) << "the articles' algorithm survived 25 s pauses";
}

TEST(LeaseManager, CorePausedOwnerSurvivesTheSamePauses) {
  for (ExpiryMode mode : {ExpiryMode::wall, ExpiryMode::counter}) {
    LeaseWorld world{articles(mode), 20};
    world.add_connections(2);
    const size_t owner = world.start_worker();
    world.run_for(6_s);
    world.start_worker();
    world.run_for(10_s);
    EXPECT_FALSE(pauses_break_ownership(world, owner, 30)) << to_string(mode) << "\n" << joined(world.violations());
    EXPECT_GE(world.mark_count("lease.deadline_stop"), 1);
  }
}

// A call that fails long before its timeout (a refused connection, an
// expired certificate) is handled when the request would have timed out, as
// if it had: the release notice's acquire fails at once, then its reads do,
// and each next request waits for the last one's timeout. Before, the reads
// after an ambiguous acquire went out one per round trip for a whole lease
// (20,000 within one in lease-swarm seed 94).
TEST(LeaseManager, AFailureThatComesBackAtOnceIsHandledAtItsRequestsTimeout) {
  LeaseConfig config;
  PrngSource random{7};
  FaultHook faults;
  LeaseManager manager(config, "w1", random, faults);
  Clock now{Instant::from_ns(1'700'000'000'000'000'000), Instant::from_ns(1'000'000'000)};
  const auto advance = [&](Duration by) {
    now.wall = now.wall + by;
    now.monotonic = now.monotonic + by;
  };
  const auto calls = [](const Actions& actions) {
    std::vector<DynamoCall> found;
    for (const Action& action : actions) {
      if (const auto* call = std::get_if<DynamoCall>(&action)) found.push_back(*call);
    }
    return found;
  };
  const auto marked = [](const Actions& actions, std::string_view name) {
    return std::any_of(actions.begin(), actions.end(), [name](const Action& a) {
      const auto* mark = std::get_if<Mark>(&a);
      return mark != nullptr && mark->name == name;
    });
  };
  Actions out;
  manager.start(now, out);
  out.clear();
  ASSERT_TRUE(manager.on_released("c1", now, out));
  std::vector<DynamoCall> sent = calls(out);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].kind, RequestKind::acquire);
  const auto of_c1 = [&](const Actions& actions) {
    std::vector<DynamoCall> found;
    for (const DynamoCall& call : calls(actions)) {
      if (call.connection == "c1") found.push_back(call);
    }
    return found;
  };
  for (int attempt = 0; attempt < 3; ++attempt) {
    const Instant request_sent = now.monotonic;
    advance(1_ms);
    out.clear();
    manager.on_reply(sent[0].token, nullptr, now, out);  // refused, 1 ms after it was sent
    EXPECT_TRUE(of_c1(out).empty()) << "attempt " << attempt << ": retried at once";
    EXPECT_TRUE(marked(out, "lease.early_failure_held"));
    EXPECT_LE(manager.next_deadline(), request_sent + config.request_timeout);
    // Whatever else falls due meanwhile (the first sweep), nothing about c1
    // goes out before the request's timeout; at it, one read of the lease.
    const Instant timeout = request_sent + config.request_timeout;
    while (manager.next_deadline() < timeout) {
      advance(manager.next_deadline() - now.monotonic);
      out.clear();
      manager.on_timer(now, out);
      EXPECT_TRUE(of_c1(out).empty()) << "attempt " << attempt << ": c1 before its timeout";
    }
    advance(timeout - now.monotonic);
    out.clear();
    manager.on_timer(now, out);
    sent = of_c1(out);
    ASSERT_EQ(sent.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(sent[0].kind, RequestKind::read);
  }
  // A failure that takes as long as a timeout is handled at once.
  advance(config.request_timeout);
  out.clear();
  manager.on_reply(sent[0].token, nullptr, now, out);
  EXPECT_FALSE(marked(out, "lease.early_failure_held"));
  EXPECT_EQ(of_c1(out).size(), 1u);
}

}  // namespace
}  // namespace leaseproof::lease::test
