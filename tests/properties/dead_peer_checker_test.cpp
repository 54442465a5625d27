// The dead-peer checker on hand-built traces: a crashed subscriber's hub
// sessions must be cut within the bound of the crash, or of the session's
// open when the hub opened it after the crash (a subscribe still on its way).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "properties/stream_checkers.hpp"

namespace leaseproof::properties {
namespace {

using namespace leaseproof::literals;
using sim::EventKind;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr NodeId kHub{0};
constexpr NodeId kW1{1};
constexpr Duration kBound = 6500_ms;  // ping 2 s + pong timeout 4 s + 500 ms

class DeadPeerTrace {
 public:
  DeadPeerTrace() : checker_([](NodeId node) { return node == kHub ? std::string{"upstream"} : std::string{"w1"}; }, kBound) {
    event(EventKind::start, kHub, 1);
    event(EventKind::start, kW1, 1);
  }
  DeadPeerTrace& at(Duration since_zero) {
    now_ = Instant::zero() + since_zero;
    return *this;
  }
  DeadPeerTrace& crash(NodeId node) { return event(EventKind::crash, node, 0); }
  DeadPeerTrace& open(const std::string& channel) { return note("upstream.open", channel + " w1#1"); }
  DeadPeerTrace& close(const std::string& channel) { return note("upstream.close", channel + " w1#1"); }
  DeadPeerChecker& finish() {
    checker_.finish(now_);
    return checker_;
  }

 private:
  DeadPeerTrace& event(EventKind kind, NodeId node, uint64_t id) {
    sim::TraceEvent e;
    e.kind = kind;
    e.true_time = now_;
    e.node = node;
    e.id = id;
    checker_.observe(e);
    return *this;
  }
  DeadPeerTrace& note(std::string_view label, std::string detail) {
    details_.push_back(std::move(detail));
    sim::TraceEvent e;
    e.kind = EventKind::note;
    e.true_time = now_;
    e.node = kHub;
    e.label = label;
    e.detail = details_.back();
    checker_.observe(e);
    return *this;
  }

  DeadPeerChecker checker_;
  Instant now_ = Instant::zero();
  std::vector<std::string> details_;
};

TEST(DeadPeerChecker, SessionsOpenAtTheCrashCutWithinTheBoundPass) {
  DeadPeerTrace t;
  t.at(1_s).open("c1").open("c2").at(10_s).crash(kW1).at(15_s).close("c1").at(16500_ms).close("c2");
  const DeadPeerChecker& checker = t.at(1_min).finish();
  EXPECT_THAT(checker.violations(), ::testing::IsEmpty());
  EXPECT_EQ(checker.cut(), 1u);
  EXPECT_EQ(checker.slowest(), 6500_ms);
}

TEST(DeadPeerChecker, ASessionCutLaterThanTheBoundAfterTheCrashIsAViolation) {
  DeadPeerTrace t;
  t.at(1_s).open("c1").at(10_s).crash(kW1).at(16500_ms + 1_ns).close("c1");
  const DeadPeerChecker& checker = t.at(1_min).finish();
  ASSERT_EQ(checker.violations().size(), 1u);
  EXPECT_THAT(checker.violations()[0], AllOf(HasSubstr("the hub cut w1#1 6.500000001s after it crashed at @10s"),
                                             HasSubstr("session on c1")));
}

// The seed-21 case: the subscribe was on its way when the worker crashed; the
// hub opened the session 0.6 s later and cut it 9.1 s after that (9.7 s after
// the crash). The hub could not have known before the open.
TEST(DeadPeerChecker, ASessionOpenedAfterTheCrashIsJudgedFromItsOpen) {
  DeadPeerTrace t;
  t.at(1_s).open("c1").at(10_s).crash(kW1).at(10600_ms).open("c2").at(16_s).close("c1").at(17_s).close("c2");
  const DeadPeerChecker& checker = t.at(1_min).finish();
  EXPECT_THAT(checker.violations(), ::testing::IsEmpty());
  EXPECT_EQ(checker.cut(), 1u);
  EXPECT_EQ(checker.slowest(), 6400_ms);  // c2: 17 s - 10.6 s
}

TEST(DeadPeerChecker, ASessionOpenedAfterTheCrashStillHasTheBound) {
  DeadPeerTrace t;
  t.at(10_s).crash(kW1).at(11_s).open("c2").at(17500_ms + 1_ns).close("c2");
  const DeadPeerChecker& checker = t.at(1_min).finish();
  ASSERT_EQ(checker.violations().size(), 1u);
  EXPECT_THAT(checker.violations()[0],
              HasSubstr("the hub cut w1#1's session on c2 6.500000001s after opening it at @11s, 1s after the "
                        "subscriber crashed"));
}

// A subscriber with no session at its crash whose subscribe then arrives:
// the session is still owed a cut.
TEST(DeadPeerChecker, ASessionNeverCutIsReportedAtTheEnd) {
  DeadPeerTrace t;
  t.at(10_s).crash(kW1).at(10500_ms).open("c3");
  const DeadPeerChecker& checker = t.at(17_s + 1_ns).finish();
  ASSERT_EQ(checker.violations().size(), 1u);
  EXPECT_THAT(checker.violations()[0], HasSubstr("the hub never cut w1#1's session on c3, dead since @10.5s"));
}

TEST(DeadPeerChecker, AHubCrashEndsItsSessions) {
  DeadPeerTrace t;
  t.at(1_s).open("c1").at(10_s).crash(kW1).at(12_s).crash(kHub);
  EXPECT_THAT(t.at(1_min).finish().violations(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace leaseproof::properties
