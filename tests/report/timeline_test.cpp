// One connection's timeline: the lines of a connection whose owner crashed,
// in time order, with its requests' outcomes and routine successes folded; a
// clear error for a connection the run does not have.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include "reports/timeline.hpp"
#include "scenarios/scenario.hpp"
#include <set>
#include <string>
#include <vector>

#include "report_test_support.hpp"

namespace leaseproof::report {
namespace {

using test::SeenEvent;

bool contains(const std::vector<std::string>& lines, std::string_view text) {
  return std::any_of(lines.begin(), lines.end(),
                     [text](const std::string& l) { return l.find(text) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& lines) { return fmt::format("{}", fmt::join(lines, "\n")); }

// A connection whose owner crashed while owning it, from a plain run of the
// same configuration (the timeline's run is the same run: same seed).
std::string connection_owned_by_a_crashed_worker() {
  std::vector<SeenEvent> events;
  scenarios::RunConfig config = test::small_faulty_run();
  config.observe_trace = [&events](sim::Trace& trace) {
    test::keep_events(trace, events, [](const sim::TraceEvent& e) {
      return (e.kind == sim::EventKind::note && e.label == "lease.open") || e.kind == sim::EventKind::crash;
    });
  };
  (void)test::lease_crash().run(config);
  const auto crash =
      std::find_if(events.begin(), events.end(), [](const SeenEvent& e) { return e.kind == sim::EventKind::crash; });
  LP_ASSERT(crash != events.end());
  for (auto e = events.begin(); e != crash; ++e) {
    if (e->node == crash->node) return e->detail.substr(0, e->detail.find(' '));
  }
  LP_UNREACHABLE("the first crashed worker owned nothing");
}

TEST(ConnectionTimeline, TellsTheStoryOfAConnectionWhoseOwnerCrashed) {
  const std::string connection = connection_owned_by_a_crashed_worker();
  ConnectionTimeline timeline{connection};
  scenarios::RunConfig config = test::small_faulty_run();
  config.observe_trace = [&timeline](sim::Trace& trace) { timeline.attach(trace); };
  (void)test::lease_crash().run(config);
  ASSERT_TRUE(timeline.found());
  const std::vector<std::string> lines = timeline.lines();
  const std::string all = joined(lines);
  EXPECT_TRUE(contains(lines, "control plane: desired state STARTED")) << all;
  EXPECT_TRUE(contains(lines, "acquire: DynamoDB UpdateItem ok after")) << all;
  EXPECT_TRUE(contains(lines, "opens: acts as the owner, epoch 1")) << all;
  EXPECT_TRUE(contains(lines, "crashed")) << all;
  EXPECT_TRUE(contains(lines, "opens: acts as the owner, epoch 2")) << all;  // taken over after the crash
  EXPECT_TRUE(contains(lines, "routine successes until")) << all;
  EXPECT_TRUE(contains(lines, "upstream session opened by")) << all;
  // Time order, and compact: far fewer lines than the connection's renewals.
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return a.substr(0, 12) < b.substr(0, 12);
  })) << all;
  EXPECT_LT(lines.size(), 60u) << all;
  EXPECT_FALSE(contains(lines, "renew epoch 1: DynamoDB UpdateItem ok")) << all;  // folded
}

TEST(ConnectionTimeline, AnUnknownConnectionIsNamedWithSomeThatExist) {
  ConnectionTimeline timeline{"c999"};
  scenarios::RunConfig config = test::small_faulty_run();
  config.observe_trace = [&timeline](sim::Trace& trace) { timeline.attach(trace); };
  (void)test::lease_crash().run(config);
  EXPECT_FALSE(timeline.found());
  const std::string error = timeline.unknown_connection_error(5);
  EXPECT_NE(error.find("'c999'"), std::string::npos) << error;
  EXPECT_NE(error.find("its 20 connections are c0, c1, c2, c3, c4, ..."), std::string::npos) << error;
}

TEST(ConnectionTimeline, ClockFormat) {
  EXPECT_EQ(format_clock(Instant::zero()), "0:00:00.000");
  EXPECT_EQ(format_clock(Instant::from_ms(3'723'456)), "1:02:03.456");
}

}  // namespace
}  // namespace leaseproof::report
