// The lease protocol's requests and configuration (core/lease), applied to the
// simulated DynamoDB store so that each condition is checked by what it
// accepts and refuses, not by its text.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/lease/config.hpp"
#include "core/lease/requests.hpp"
#include "models/dynamo/store.hpp"

namespace leaseproof::lease {
namespace {

AcquireBasis observed_counter(int64_t counter) {
  AcquireBasis basis;
  basis.observed_counter = counter;
  return basis;
}

using namespace literals;

constexpr int64_t kNowMs = 1'700'000'000'000LL;

// ---- configuration ---------------------------------------------------------------------

std::string invalid(void (*change)(LeaseConfig&)) {
  LeaseConfig config;
  change(config);
  return config.validate();
}

TEST(LeaseConfig, TheArticlesParametersAreValid) {
  EXPECT_EQ(LeaseConfig{}.validate(), "");
  LeaseConfig seed;
  seed.algorithm = Algorithm::seed;
  EXPECT_EQ(seed.validate(), "");
}

// Below these floors a worker would spend itself on timers: refused by name.
TEST(LeaseConfig, TimersHaveFloors) {
  EXPECT_EQ(invalid([](LeaseConfig& c) { c.heartbeat_interval = Duration::from_ns(1000); }),
            "lease.heartbeat_interval (1us) must be at least 100ms");
  EXPECT_EQ(invalid([](LeaseConfig& c) { c.reconcile_interval = Duration::from_ms(999); }),
            "lease.reconcile_interval (999ms) must be at least 1s");
  EXPECT_EQ(invalid([](LeaseConfig& c) { c.watch_interval = Duration::from_ms(50); }),
            "lease.watch_interval (50ms) must be at least 100ms");
  EXPECT_EQ(invalid([](LeaseConfig& c) { c.heartbeat_interval = Duration::from_ms(100); }), "");
}

TEST(LeaseConfig, EachRejectionNamesTheField) {
  EXPECT_EQ(invalid([](LeaseConfig& c) { c.heartbeat_interval = 20_s; }),
            "lease.heartbeat_interval (20s) must be shorter than lease.lease_duration (20s)");
  EXPECT_NE(invalid([](LeaseConfig& c) { c.heartbeat_interval = 25_s; }).find("lease.heartbeat_interval"),
            std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.lease_duration = 0_s; }).find("lease.lease_duration"), std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.heartbeat_interval = -1_s; }).find("lease.heartbeat_interval"),
            std::string::npos);
  const std::string margin = invalid([](LeaseConfig& c) { c.safety_margin = 15_s; });
  EXPECT_NE(margin.find("lease.safety_margin (15s) + lease.heartbeat_interval (5s)"), std::string::npos) << margin;
  EXPECT_NE(invalid([](LeaseConfig& c) { c.safety_margin = -1_s; }).find("lease.safety_margin"), std::string::npos);
  EXPECT_EQ(invalid([](LeaseConfig& c) { c.capacity = 0; }), "lease.capacity must be at least 1");
  EXPECT_NE(invalid([](LeaseConfig& c) { c.request_timeout = 20_s; }).find("lease.request_timeout"),
            std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.reconcile_jitter_max = 61_s; }).find("lease.reconcile_jitter_max"),
            std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.reconcile_interval = 0_s; }).find("lease.reconcile_interval"),
            std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.retry_backoff = 0_s; }).find("lease.retry_backoff"), std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.acquire_per_round_max = 0; }).find("lease.acquire_per_round_max"),
            std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.watchers_per_lease = 0; }).find("lease.watchers_per_lease"),
            std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.query_pages_max = 0; }).find("lease.query_pages_max"), std::string::npos);
  EXPECT_NE(invalid([](LeaseConfig& c) { c.table.shards = 0; }).find("lease.table.shards"), std::string::npos);
}

TEST(LeaseConfig, TheSeedAlgorithmHasNoMarginToCheck) {
  LeaseConfig config;
  config.algorithm = Algorithm::seed;
  config.safety_margin = 15_s;  // unused by the seed
  EXPECT_EQ(config.validate(), "");
  EXPECT_EQ(config.skew_tolerated(), 0_s);
  EXPECT_EQ(config.drift_ppm_tolerated(), 0);
}

TEST(LeaseConfig, AssumptionsStateWhatEachModeTolerates) {
  LeaseConfig wall;
  EXPECT_EQ(wall.skew_tolerated(), 4_s);
  EXPECT_NE(wall.assumptions().find("skew between workers at most 4s"), std::string::npos) << wall.assumptions();
  LeaseConfig counter;
  counter.expiry_mode = ExpiryMode::counter;
  EXPECT_EQ(counter.drift_ppm_tolerated(), 100'000);  // 2 s over 20 s
  EXPECT_NE(counter.assumptions().find("any wall skew"), std::string::npos);
}

// ---- requests against the store ----------------------------------------------------------

class LeaseRequests : public ::testing::Test {
 protected:
  void SetUp() override { create(config_); }
  void create(const LeaseConfig& config) {
    ASSERT_TRUE(store_.apply(create_table_request(config), at(0)).ok());
    ASSERT_TRUE(store_.apply(create_connection_request(config, "c1", "wss://hub/c1"), at(0)).ok());
  }
  static Instant at(int64_t offset_ms) { return Instant::from_ms(kNowMs + offset_ms); }
  bool ok(const dynamo::Request& request) { return store_.apply(request, at(0)).ok(); }
  LeaseView view(const LeaseConfig& config, std::string_view connection = "c1") {
    auto item = store_.peek(config.table.name, dynamo::Item{{"pk", dynamo::AttributeValue::string(
                                                                       connection_key(connection))}});
    EXPECT_TRUE(item);
    return item ? parse_lease(*item).value_or(LeaseView{}) : LeaseView{};
  }
  LeaseView view() { return view(config_); }

  LeaseConfig config_;
  models::DynamoStore store_{models::DynamoStoreOptions::faults_off(), 7};
};

TEST_F(LeaseRequests, ANewConnectionIsFreeWithExpiryZeroAndAShard) {
  const LeaseView lease = view();
  EXPECT_EQ(lease.connection, "c1");
  EXPECT_EQ(lease.desired_state, kStarted);
  EXPECT_EQ(lease.owner, "");
  EXPECT_EQ(lease.epoch, 0);
  EXPECT_EQ(lease.expires_at_ms, 0);
  EXPECT_EQ(lease.ws_url, "wss://hub/c1");
  EXPECT_FALSE(ok(create_connection_request(config_, "c1", "x")));  // never overwrites
}

TEST_F(LeaseRequests, AcquireIncrementsEpochAndCounterAndIsRefusedWhileLive) {
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs, {})));
  EXPECT_EQ(view().owner, "a");
  EXPECT_EQ(view().epoch, 1);
  EXPECT_EQ(view().counter, 1);
  EXPECT_EQ(view().expires_at_ms, kNowMs + 20'000);
  // Live (and within the margin after its expiry): refused.
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "b", kNowMs + 10'000, {})));
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "b", kNowMs + 22'000, {})));
  const auto refused = store_.apply(acquire_request(config_, "c1", "b", kNowMs, {}), at(0));
  ASSERT_FALSE(refused.ok());
  ASSERT_TRUE(refused.error().item);  // the old item, to watch it
  EXPECT_EQ(parse_lease(*refused.error().item)->owner, "a");
  // Expired by more than the margin: taken, with a new epoch.
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "b", kNowMs + 22'001, {})));
  EXPECT_EQ(view().owner, "b");
  EXPECT_EQ(view().epoch, 2);
}

TEST_F(LeaseRequests, AnAcquireRetriedByItsOwnerSucceeds) {
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs, {})));
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs + 1, {})));
  EXPECT_EQ(view().epoch, 2);
}

// A claim names the process that made it: a read after a lost reply tells
// it from another process's claim of the same incarnation, stamps aside.
TEST_F(LeaseRequests, ALivenessClaimNamesItsProcess) {
  ASSERT_TRUE(ok(liveness_claim_request(config_, "a", kNowMs, std::nullopt, 7)));
  const auto read = store_.apply(liveness_read_request(config_, "a"), at(0));
  ASSERT_TRUE(read.ok());
  const auto* get = std::get_if<dynamo::GetItemResponse>(&read.value());
  ASSERT_TRUE(get != nullptr && get->item);
  const std::optional<LivenessView> view = parse_liveness(*get->item);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->incarnation, 1);
  EXPECT_EQ(view->claimant, 7);
}

// Two processes with one worker id are two owners: owner_incarnation names
// the process, and only that process's retry takes its own live lease.
TEST_F(LeaseRequests, AnotherProcessWithTheSameWorkerIdWaitsForTheExpiry) {
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs, {}, 7)));
  EXPECT_EQ(view().owner_incarnation, 7);
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "a", kNowMs + 1, {}, 8)));       // the twin: live
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "a", kNowMs + 22'000, {}, 8)));  // within the margin
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs + 1, {}, 7)));        // its own retry
  EXPECT_EQ(view().epoch, 2);
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs + 22'002, {}, 8)));  // expired: taken
  EXPECT_EQ(view().owner_incarnation, 8);
  EXPECT_EQ(view().epoch, 3);
  ASSERT_TRUE(ok(release_request(config_, "c1", "a", 3)));
  EXPECT_EQ(view().owner_incarnation, 0);  // released: no process named
}

// Requests held in the network past a lease arrive after newer ones of the
// same worker (the swarm's holds). In wall mode the expiry others read must
// never move back: a late renew or acquire of the owner's is refused.
TEST_F(LeaseRequests, ARenewHeldPastANewerOneCannotPullTheExpiryBack) {
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs, {})));
  ASSERT_TRUE(ok(renew_request(config_, "c1", "a", 1, kNowMs + 10'000)));
  EXPECT_FALSE(ok(renew_request(config_, "c1", "a", 1, kNowMs + 5'000)));  // sent before, arrives after
  EXPECT_EQ(view().expires_at_ms, kNowMs + 30'000);
  EXPECT_EQ(view().counter, 2);
}

TEST_F(LeaseRequests, AnAcquireHeldPastItsOwnersNewerTenureIsRefused) {
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs, {})));
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs + 10'000, {})));  // a's newer tenure, epoch 2
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "a", kNowMs + 5'000, {})));  // sent before, arrives after
  EXPECT_EQ(view().epoch, 2);
  EXPECT_EQ(view().expires_at_ms, kNowMs + 30'000);
}

// Counter mode's takeovers read the counter, never the expiry: a late renew
// only counts as a heartbeat (it holds watchers off longer), whatever its clock.
TEST_F(LeaseRequests, CounterModeRenewsDoNotCompareExpiries) {
  LeaseConfig counter = config_;
  counter.expiry_mode = ExpiryMode::counter;
  ASSERT_TRUE(ok(acquire_request(counter, "c1", "a", kNowMs, {})));
  ASSERT_TRUE(ok(renew_request(counter, "c1", "a", 1, kNowMs + 10'000)));
  ASSERT_TRUE(ok(renew_request(counter, "c1", "a", 1, kNowMs + 5'000)));
  EXPECT_EQ(view().counter, 3);
}

TEST_F(LeaseRequests, CounterModeAcquireNeedsTheObservedCounterWhateverTheClocks) {
  LeaseConfig counter = config_;
  counter.expiry_mode = ExpiryMode::counter;
  ASSERT_TRUE(ok(acquire_request(counter, "c1", "a", kNowMs, {})));
  ASSERT_TRUE(ok(renew_request(counter, "c1", "a", 1, kNowMs + 5'000)));
  EXPECT_EQ(view().counter, 2);
  EXPECT_FALSE(ok(acquire_request(counter, "c1", "b", kNowMs, observed_counter(1))));  // stale observation
  // A clock an hour fast changes nothing: only the counter decides.
  EXPECT_FALSE(ok(acquire_request(counter, "c1", "b", kNowMs + 3'600'000, observed_counter(1))));
  EXPECT_FALSE(ok(acquire_request(counter, "c1", "b", kNowMs + 3'600'000, {})));
  ASSERT_TRUE(ok(acquire_request(counter, "c1", "b", kNowMs, observed_counter(2))));
  EXPECT_EQ(view().owner, "b");
  EXPECT_EQ(view().epoch, 2);
}

TEST_F(LeaseRequests, RenewAndReleaseAreFencedByOwnerAndEpoch) {
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs, {})));
  EXPECT_FALSE(ok(renew_request(config_, "c1", "b", 1, kNowMs)));
  EXPECT_FALSE(ok(renew_request(config_, "c1", "a", 0, kNowMs)));
  ASSERT_TRUE(ok(renew_request(config_, "c1", "a", 1, kNowMs + 5'000)));
  EXPECT_EQ(view().expires_at_ms, kNowMs + 25'000);
  EXPECT_EQ(view().epoch, 1);
  EXPECT_FALSE(ok(release_request(config_, "c1", "a", 2)));
  EXPECT_FALSE(ok(release_request(config_, "c1", "b", 1)));
  ASSERT_TRUE(ok(release_request(config_, "c1", "a", 1)));
  EXPECT_EQ(view().owner, "");
  EXPECT_EQ(view().expires_at_ms, 0);
  EXPECT_EQ(view().counter, 3);
  EXPECT_FALSE(ok(renew_request(config_, "c1", "a", 1, kNowMs)));  // released: renewing cannot resurrect it
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "b", kNowMs, {})));  // free at once
  EXPECT_EQ(view().epoch, 2);
}

TEST_F(LeaseRequests, AStoppedConnectionCannotBeAcquiredOrRenewedAndLeavesTheShardIndex) {
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs, {})));
  ASSERT_TRUE(ok(stop_connection_request(config_, "c1")));
  EXPECT_FALSE(ok(renew_request(config_, "c1", "a", 1, kNowMs)));
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "a", kNowMs, {})));
  const uint32_t shard = static_cast<uint32_t>(std::stoi(reconcile_shard("c1", config_.table.shards).substr(8)));
  const auto page = store_.apply(reconcile_query(config_, shard, kNowMs, std::nullopt), at(0));
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(std::get<dynamo::QueryResponse>(page.value()).items->size(), 0u);
}

TEST_F(LeaseRequests, ReconcileQueriesFindEveryStartedItemInItsShardAcrossPages) {
  config_.query_page_items_max = 3;
  for (int i = 2; i <= 40; ++i) {
    ASSERT_TRUE(ok(create_connection_request(config_, "c" + std::to_string(i), "wss://x")));
  }
  std::set<std::string> seen;
  for (uint32_t shard = 0; shard < config_.table.shards; ++shard) {
    std::optional<dynamo::Item> start;
    do {
      const auto page = store_.apply(reconcile_query(config_, shard, kNowMs, start), at(0));
      ASSERT_TRUE(page.ok());
      const auto& query = std::get<dynamo::QueryResponse>(page.value());
      EXPECT_LE(query.items->size(), 3u);
      for (const auto& item : *query.items) {
        const auto lease = parse_lease(item);
        ASSERT_TRUE(lease);
        EXPECT_EQ(reconcile_shard(lease->connection, config_.table.shards), fmt::format("STARTED#{}", shard));
        EXPECT_TRUE(seen.insert(lease->connection).second);
      }
      start = query.last_evaluated_key;
    } while (start);
  }
  EXPECT_EQ(seen.size(), 40u);
}

TEST(LeaseRequestShapes, ReconcileShardIsStableAndInRange) {
  EXPECT_EQ(reconcile_shard("c1", 8), reconcile_shard("c1", 8));
  std::set<std::string> used;
  for (int i = 0; i < 200; ++i) used.insert(reconcile_shard("conn-" + std::to_string(i), 8));
  EXPECT_EQ(used.size(), 8u);  // spreads over every shard
  EXPECT_EQ(*used.begin(), "STARTED#0");
  EXPECT_EQ(*used.rbegin(), "STARTED#7");
  EXPECT_EQ(connection_key("x"), "CONN#x");
}

TEST(LeaseRequestShapes, ParseLeaseRejectsForeignItems) {
  EXPECT_FALSE(parse_lease(dynamo::Item{{"pk", dynamo::AttributeValue::string("ROOM#1")}}));
  EXPECT_TRUE(parse_lease(dynamo::Item{{"pk", dynamo::AttributeValue::string("CONN#1")}}));
}

TEST(LeaseRequestsSeed, TheArticlesAcquireIgnoresEpochAndMargin) {
  LeaseConfig seed;
  seed.algorithm = Algorithm::seed;
  models::DynamoStore store{models::DynamoStoreOptions::faults_off(), 3};
  const Instant now = Instant::from_ms(kNowMs);
  ASSERT_TRUE(store.apply(create_table_request(seed), now).ok());
  ASSERT_TRUE(store.apply(create_connection_request(seed, "c1", "wss://x"), now).ok());
  ASSERT_TRUE(store.apply(acquire_request(seed, "c1", "a", kNowMs, {}), now).ok());
  // A worker whose clock reads past the expiry takes it: no margin, no epoch.
  EXPECT_FALSE(store.apply(acquire_request(seed, "c1", "b", kNowMs + 19'999, {}), now).ok());
  ASSERT_TRUE(store.apply(acquire_request(seed, "c1", "b", kNowMs + 20'001, {}), now).ok());
  // The old owner's acquire whose reply was lost cannot be retried.
  EXPECT_FALSE(store.apply(acquire_request(seed, "c1", "a", kNowMs + 1, {}), now).ok());
  // The expired-lease query of the articles' GSI.
  const auto page = store.apply(reconcile_query(seed, 0, kNowMs + 60'000, std::nullopt), now);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(std::get<dynamo::QueryResponse>(page.value()).items->size(), 1u);
}

// ---- the liveness algorithm's requests -------------------------------------------------

class LivenessRequests : public LeaseRequests {
 protected:
  LivenessRequests() { config_.algorithm = Algorithm::liveness; }
  LivenessView worker(std::string_view id) {
    auto item = store_.peek(config_.table.name, dynamo::Item{{"pk", dynamo::AttributeValue::string(worker_key(id))}});
    EXPECT_TRUE(item) << id;
    return item ? parse_liveness(*item).value_or(LivenessView{}) : LivenessView{};
  }
  AcquireBasis dead(std::string owner, int64_t incarnation, int64_t epoch) {
    AcquireBasis basis;
    basis.dead_tenure = AcquireBasis::Tenure{std::move(owner), incarnation, epoch};
    return basis;
  }
};

TEST_F(LivenessRequests, AClaimStartsIncarnationOneOnlyWhereThereIsNoItem) {
  ASSERT_TRUE(ok(liveness_claim_request(config_, "a", kNowMs, std::nullopt)));
  const LivenessView a = worker("a");
  EXPECT_EQ(a.worker, "a");
  EXPECT_EQ(a.incarnation, 1);
  EXPECT_TRUE(a.live);
  EXPECT_EQ(a.expires_at_ms, kNowMs + 20'000);
  EXPECT_FALSE(ok(liveness_claim_request(config_, "a", kNowMs, std::nullopt)));  // a second process of "a"
  EXPECT_EQ(worker("a").incarnation, 1);
}

// A heartbeat is one write of the worker's item, conditional on its
// incarnation; in wall mode its stamp only moves forward.
TEST_F(LivenessRequests, ARenewNamesTheIncarnationAndMovesTheStampForward) {
  ASSERT_TRUE(ok(liveness_claim_request(config_, "a", kNowMs, std::nullopt)));
  ASSERT_TRUE(ok(liveness_renew_request(config_, "a", 1, kNowMs + 5'000)));
  EXPECT_EQ(worker("a").expires_at_ms, kNowMs + 25'000);
  EXPECT_EQ(worker("a").counter, 2);
  EXPECT_FALSE(ok(liveness_renew_request(config_, "a", 2, kNowMs + 10'000)));  // another incarnation
  EXPECT_FALSE(ok(liveness_renew_request(config_, "a", 1, kNowMs + 1'000)));  // held past a newer one
  EXPECT_EQ(worker("a").expires_at_ms, kNowMs + 25'000);
}

// The fence: only once the item is expired by the taker's clock less the
// margin (wall), and from then on the old incarnation's renews are refused.
TEST_F(LivenessRequests, AFenceNeedsTheObservedExpiryAndEndsTheIncarnation) {
  ASSERT_TRUE(ok(liveness_claim_request(config_, "a", kNowMs, std::nullopt)));
  const LivenessView seen = worker("a");
  EXPECT_FALSE(ok(liveness_fence_request(config_, seen, kNowMs + 21'000)));  // within the margin
  ASSERT_TRUE(ok(liveness_fence_request(config_, seen, kNowMs + 22'001)));
  EXPECT_EQ(worker("a").incarnation, 2);
  EXPECT_FALSE(worker("a").live);
  EXPECT_FALSE(ok(liveness_renew_request(config_, "a", 1, kNowMs + 30'000)));  // a late renew of the dead one
  EXPECT_FALSE(ok(liveness_fence_request(config_, seen, kNowMs + 40'000)));    // fenced once
  // A restarted "a" claims over the fenced item at once: incarnation 3.
  ASSERT_TRUE(ok(liveness_claim_request(config_, "a", kNowMs + 40'000, worker("a"))));
  EXPECT_EQ(worker("a").incarnation, 3);
  EXPECT_TRUE(worker("a").live);
}

TEST_F(LivenessRequests, CounterModeFencesOnlyAnUnchangedCounterWhateverTheClocks) {
  config_.expiry_mode = ExpiryMode::counter;
  ASSERT_TRUE(ok(liveness_claim_request(config_, "a", kNowMs, std::nullopt)));
  const LivenessView seen = worker("a");
  ASSERT_TRUE(ok(liveness_renew_request(config_, "a", 1, kNowMs - 3'600'000)));  // any clock: a heartbeat
  EXPECT_FALSE(ok(liveness_fence_request(config_, seen, kNowMs + 3'600'000)));   // the counter moved
  ASSERT_TRUE(ok(liveness_fence_request(config_, worker("a"), kNowMs)));
  EXPECT_FALSE(worker("a").live);
}

// A lease names its owner's incarnation; it is taken only when free, from
// exactly the dead tenure named, or back by its own incarnation at the epoch read.
TEST_F(LivenessRequests, ALeaseIsTakenOnlyFromTheExactDeadTenure) {
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "a", kNowMs, {}, 1)));
  EXPECT_EQ(view().owner, "a");
  EXPECT_EQ(view().owner_incarnation, 1);
  EXPECT_EQ(view().epoch, 1);
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "b", kNowMs + 3'600'000, {}, 1)));  // no expiry to wait out
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "b", kNowMs, dead("a", 2, 1), 1)));  // another incarnation
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "b", kNowMs, dead("a", 1, 0), 1)));  // another epoch
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "b", kNowMs, dead("a", 1, 1), 4)));
  EXPECT_EQ(view().owner, "b");
  EXPECT_EQ(view().owner_incarnation, 4);
  EXPECT_EQ(view().epoch, 2);
  AcquireBasis own;
  own.own_epoch = 1;
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "b", kNowMs, own, 4)));  // not the epoch it holds
  own.own_epoch = 2;
  EXPECT_FALSE(ok(acquire_request(config_, "c1", "b", kNowMs, own, 5)));  // not its incarnation
  ASSERT_TRUE(ok(acquire_request(config_, "c1", "b", kNowMs, own, 4)));
  EXPECT_EQ(view().epoch, 3);
  ASSERT_TRUE(ok(release_request(config_, "c1", "b", 3)));
  EXPECT_EQ(view().owner, "");
  EXPECT_EQ(view().owner_incarnation, 0);
}

TEST_F(LivenessRequests, ADrainedWorkerRetiresItsIncarnation) {
  ASSERT_TRUE(ok(liveness_claim_request(config_, "a", kNowMs, std::nullopt)));
  EXPECT_FALSE(ok(liveness_retire_request(config_, "a", 2)));
  ASSERT_TRUE(ok(liveness_retire_request(config_, "a", 1)));
  EXPECT_FALSE(worker("a").live);
  EXPECT_EQ(worker("a").incarnation, 2);
}

TEST(LeaseRequestShapes, ParseLivenessRejectsLeaseItems) {
  EXPECT_FALSE(parse_liveness(dynamo::Item{{"pk", dynamo::AttributeValue::string("CONN#c1")}}));
  EXPECT_FALSE(parse_lease(dynamo::Item{{"pk", dynamo::AttributeValue::string("WORKER#a")}}));
  EXPECT_EQ(parse_algorithm("liveness"), Algorithm::liveness);
  EXPECT_EQ(parse_algorithm("Liveness"), std::nullopt);
}

}  // namespace
}  // namespace leaseproof::lease
