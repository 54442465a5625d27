// RequestRateChecker on hand-built traces: a worker that retries a failure
// once per round trip is a request storm, reported once with its figures; one
// paced by the backoff, the renews of many leases, and the sink's writes are
// not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <string>

#include "properties/request_rate_checker.hpp"

namespace leaseproof::properties {
namespace {

using namespace leaseproof::literals;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class Requests {
 public:
  Requests() : checker_([](NodeId n) { return "worker-" + std::to_string(n.value); }, bounds()) {}
  static RequestRateBounds bounds() {
    return RequestRateBounds{Duration::from_s(20), Duration::from_s(5), 200_ms, Duration::from_s(5), Duration::from_s(60),
                             100};
  }
  // `count` requests "KIND CONNECTION 1" from worker 0, `every` apart from `from`.
  Requests& send(std::string kind, std::string connection, uint32_t count, Duration every, Duration from) {
    for (uint32_t i = 0; i < count; ++i) {
      sim::TraceEvent e;
      e.kind = sim::EventKind::note;
      e.node = NodeId{0};
      e.true_time = Instant::zero() + from + every * static_cast<int64_t>(i);
      e.label = "lease.request";
      e.detail = texts_.emplace_back(kind + " " + connection + " 1");
      checker_.observe(e);
    }
    return *this;
  }
  const RequestRateChecker& checker() const { return checker_; }

 private:
  RequestRateChecker checker_;
  std::deque<std::string> texts_;
};

TEST(RequestRateChecker, TheBoundIsStatedTermByTerm) {
  EXPECT_EQ(Requests::bounds().per_connection(), 118u);
  EXPECT_EQ(Requests::bounds().describe_per_connection(),
            "118 = 100 retries (20s / 200ms) + 4 renews (20s / 5s) + 4 watch reads (20s / 5s) + 10 one-off");
  EXPECT_EQ(Requests::bounds().without_connection(), 800u);
}

TEST(RequestRateChecker, ReadsOncePerRoundTripAreAStormReportedOnce) {
  Requests r;
  r.send("acquire", "c1", 1, 1_ms, 0_ms).send("read", "c1", 5000, 1_ms, 1_ms);
  EXPECT_EQ(r.checker().violation_count(), 1u);
  EXPECT_THAT(r.checker().violations(),
              ElementsAre(AllOf(HasSubstr("request storm: worker-0 sent 119 requests about connection c1"),
                                HasSubstr("more than 118 = 100 retries (20s / 200ms)"))));
  EXPECT_EQ(r.checker().most_per_connection(), 5001u);
}

TEST(RequestRateChecker, RetriesPacedByTheTimeoutManyLeasesAndTheSinksWritesAreNot) {
  Requests r;
  r.send("read", "c1", 200, Duration::from_s(2), 0_ms);  // a read per timeout for 400 s
  for (int c = 2; c < 60; ++c) r.send("renew", "c" + std::to_string(c), 80, Duration::from_s(5), 0_ms);
  r.send("record", "c1", 5000, 10_ms, 0_ms);  // the stream's rate: not the lease core's
  EXPECT_EQ(r.checker().violation_count(), 0u) << r.checker().violations().front();
  EXPECT_EQ(r.checker().most_per_connection(), 10u);
}

TEST(RequestRateChecker, ReconcilePagesHaveTheirOwnBound) {
  Requests r;
  r.send("reconcile", "-", 801, 10_ms, 0_ms);
  EXPECT_THAT(r.checker().violations(), ElementsAre(HasSubstr("naming no connection (reconcile pages)")));
}

}  // namespace
}  // namespace leaseproof::properties
