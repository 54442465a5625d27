// The exactly-once checker on hand-built traces: what the hub published
// (hub.epoch, hub.publish), what the sink holds (DynamoDB's sink.item notes,
// its change stream), and what the clients declared lost (resume.reset).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <set>
#include <string>

#include "properties/stream_checkers.hpp"

namespace leaseproof::properties {
namespace {

using namespace leaseproof::literals;
using ::testing::HasSubstr;

constexpr NodeId kHub{0};
constexpr NodeId kDynamo{1};
constexpr NodeId kW1{2};

class StreamTrace {
 public:
  StreamTrace() { note(kHub, "hub.epoch", "new", 1); }
  StreamTrace& at(Duration since_zero) {
    now_ = Instant::zero() + since_zero;
    return *this;
  }
  StreamTrace& publish(int64_t seq) { return note(kHub, "hub.publish", "c1", seq); }
  // DynamoDB's note of an accepted sink write (request message `message`).
  StreamTrace& sink(int64_t seq, const std::string& how = "new", int64_t message = 7) {
    return note(kDynamo, std::string{kSinkItemNote}, "c1 1 " + std::to_string(seq) + " " + how, message);
  }
  StreamTrace& sink_detail(const std::string& detail) { return note(kDynamo, std::string{kSinkItemNote}, detail, 7); }
  // A worker's sink write as its lease.request note says it (message id `message`).
  StreamTrace& request(const std::string& detail, int64_t message) { return note(kW1, "lease.request", detail, message); }
  StreamTrace& lifecycle(sim::EventKind kind, NodeId node = kW1) {
    sim::TraceEvent e;
    e.kind = kind;
    e.true_time = now_;
    e.node = node;
    checker_.observe(e);
    return *this;
  }
  StreamTrace& reset(int64_t after, int64_t resume, const std::string& kind = "over_limit") {
    return note(kW1, "resume.reset", fmt::format("c1 {} 1 {} 1 {}", kind, after, resume));
  }
  ExactlyOnceChecker& checker() { return checker_; }
  ExactlyOnceChecker& finish(std::set<std::string, std::less<>> caught_up = {}) {
    checker_.finish(caught_up);
    return checker_;
  }

 private:
  StreamTrace& note(NodeId node, std::string label, std::string detail, int64_t value = 0) {
    labels_.push_back(std::move(label));
    details_.push_back(std::move(detail));
    sim::TraceEvent e;
    e.kind = sim::EventKind::note;
    e.true_time = now_;
    e.node = node;
    e.label = labels_.back();
    e.detail = details_.back();
    e.value = value;
    checker_.observe(e);
    return *this;
  }

  ExactlyOnceChecker checker_{[](NodeId node) { return node == kW1 ? std::string{"worker-1"} : std::string{"other"}; }};
  Instant now_ = Instant::zero();
  std::deque<std::string> labels_;  // the events keep views
  std::deque<std::string> details_;
};

TEST(ExactlyOnceChecker, EverySeqRecordedOnceInOrderPasses) {
  StreamTrace trace;
  trace.publish(1).publish(2).publish(3).at(1_s).sink(1).sink(2).sink(3);
  const ExactlyOnceChecker& checker = trace.finish({"c1"});
  EXPECT_TRUE(checker.violations().empty()) << checker.violations().front();
  EXPECT_EQ(checker.records(), 3u);
  EXPECT_EQ(checker.published(), 3u);
}

TEST(ExactlyOnceChecker, ASeqWrittenAgainOverItsItemIsADuplicate) {
  StreamTrace trace;
  trace.publish(1).publish(2).at(1_s).sink(1).sink(2).at(2_s).sink(2, "replaced");
  const ExactlyOnceChecker& checker = trace.finish({"c1"});
  ASSERT_EQ(checker.violation_count(), 1u);
  EXPECT_THAT(checker.violations()[0], HasSubstr("connection c1 epoch 1 seq 2 recorded twice (again at @2s)"));
}

TEST(ExactlyOnceChecker, AHoleNoResetDeclaredIsALossAndOneDeclaredIsNot) {
  StreamTrace lost;
  lost.publish(1).publish(2).publish(3).at(1_s).sink(1).sink(3);
  const ExactlyOnceChecker& lost_checker = lost.finish({"c1"});
  ASSERT_EQ(lost_checker.violation_count(), 1u);
  EXPECT_THAT(lost_checker.violations()[0], HasSubstr("seq 2..2 never recorded and no reset declared them lost"));

  StreamTrace declared;
  declared.publish(1).publish(2).publish(3).at(1_s).sink(1).reset(1, 2).sink(3);
  const ExactlyOnceChecker& declared_checker = declared.finish({"c1"});
  EXPECT_TRUE(declared_checker.violations().empty()) << declared_checker.violations().front();
  EXPECT_EQ(declared_checker.excused_messages(), 1u);
}

// Given the hub's ring (4 messages) and replay limit (2), a reset is judged
// against what the hub held: with 1..10 published, the ring holds 7..10. An
// evicted reset after 2 may declare 3..6 lost, not 3..7; an over_limit one
// after 6 may declare up to 8 (10 - 2), not 9. Without the ring given, both
// are taken as declared.
TEST(ExactlyOnceChecker, AResetIsJudgedAgainstWhatTheHubStillHeld) {
  auto run = [](bool ring, int64_t evicted_to, int64_t over_limit_to) {
    auto trace = std::make_unique<StreamTrace>();
    if (ring) trace->checker().set_hub_ring(4, 2);
    for (int64_t seq = 1; seq <= 10; ++seq) trace->publish(seq);
    trace->at(1_s).reset(2, evicted_to, "evicted").reset(6, over_limit_to, "over_limit");
    trace->finish();
    return trace;
  };
  const auto honest = run(true, 6, 8);
  EXPECT_TRUE(honest->checker().violations().empty()) << honest->checker().violations().front();
  EXPECT_EQ(honest->checker().resets_judged(), 2u);

  const auto lying = run(true, 7, 9);
  ASSERT_EQ(lying->checker().violation_count(), 2u);
  EXPECT_THAT(lying->checker().violations()[0],
              HasSubstr("reset evicted of c1 at @1s declares 1:3..1:7 lost while the hub still held 1:7..1:10 (a ring "
                        "of 4 messages): it could have replayed 1:7..1:7"));
  EXPECT_THAT(lying->checker().violations()[1],
              HasSubstr("reset over_limit of c1 at @1s declares up to 1:9 lost, but only what lies more than the "
                        "replay limit (2 messages) behind the top 1:10 may be"));

  const auto unjudged = run(false, 7, 9);
  EXPECT_TRUE(unjudged->checker().violations().empty());
  EXPECT_EQ(unjudged->checker().resets_judged(), 0u);
}

// Each violation names the write that showed it, joined by message id with
// its lease.request note: who sent it, under which lease epoch, what range,
// and whether that process still ran when DynamoDB applied it.
TEST(ExactlyOnceChecker, AViolationNamesTheWriteAndWhetherItsSenderStillRan) {
  StreamTrace trace;
  trace.lifecycle(sim::EventKind::start).publish(1).publish(2).publish(3);
  trace.at(1_s).request("record c1 1 1:1..1:2", 8).request("record c1 1 1:2..1:3", 9);
  trace.at(2_s).sink(1, "new", 8).sink(2, "new", 8);
  trace.at(3_s).lifecycle(sim::EventKind::crash);
  trace.at(4_s).sink(2, "replaced", 9).sink(3, "new", 9);
  const ExactlyOnceChecker& checker = trace.finish({"c1"});
  ASSERT_EQ(checker.violation_count(), 1u);
  EXPECT_THAT(checker.violations()[0],
              HasSubstr("seq 2 recorded twice (again at @4s) (written by worker-1#1: record c1 1 1:2..1:3, request "
                        "message 9 sent at @1s; its sender is down since @3s)"));

  StreamTrace restarted;  // applied after the sender's next incarnation started: it names both
  restarted.lifecycle(sim::EventKind::start).publish(1).publish(2).publish(3).at(1_s).request("record c1 1 1:3..1:3", 9);
  restarted.at(2_s).lifecycle(sim::EventKind::crash).at(3_s).lifecycle(sim::EventKind::restart).at(4_s).sink(1).sink(
      3, "new", 9);
  const ExactlyOnceChecker& gap = restarted.finish({"c1"});
  ASSERT_EQ(gap.violation_count(), 1u);
  EXPECT_THAT(gap.violations()[0], HasSubstr("seq 2..2 never recorded"));
  EXPECT_THAT(gap.violations()[0], HasSubstr("(written by worker-1#1: record c1 1 1:3..1:3, request message 9 sent at "
                                             "@1s; its sender is gone: worker-1#2 runs now)"));

  StreamTrace unknown;  // no lease.request for the message: said so, not guessed
  unknown.publish(1).publish(2).at(1_s).sink(1).sink(1, "replaced", 5);
  EXPECT_THAT(unknown.finish({"c1"}).violations()[0], HasSubstr("(request message 5, no lease.request note)"));
}

TEST(ExactlyOnceChecker, AMalformedSinkNoteBreaksTheTraceContract) {
  for (const std::string detail : {"c1 1 2", "c1 x 2 new", "c1 1 2 maybe", "c1 1 two new"}) {
    StreamTrace trace;
    trace.publish(1).publish(2).sink(1).sink_detail(detail);
    const ExactlyOnceChecker& checker = trace.finish();
    ASSERT_EQ(checker.violation_count(), 1u) << detail;
    EXPECT_THAT(checker.violations()[0], HasSubstr("trace contract: malformed sink.item '" + detail + "'"));
    EXPECT_EQ(checker.records(), 1u);
  }
}

}  // namespace
}  // namespace leaseproof::properties
