// properties/real_records: real processes' JSON lines read as the
// simulator's trace, on a few hand-made lines.

#include "properties/real_records.hpp"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace leaseproof::properties {
namespace {

using sim::EventKind;

std::vector<RealRecord> read(const std::string& text, std::vector<std::string>& problems) {
  std::istringstream in{text};
  std::vector<RealRecord> records;
  read_real_records(in, "w1.log", records, problems);
  order_real_records(records);
  return records;
}

// An event as it reached the observer; label and detail copied (they live
// only during the call).
struct Seen {
  EventKind kind;
  std::string node;
  int64_t at_ms;
  uint64_t id;
  std::string label;
  std::string detail;
};

std::vector<Seen> replay(const std::vector<RealRecord>& records, const std::vector<HubSession>& sessions = {}) {
  RealNodes nodes;
  std::vector<Seen> seen;
  replay_real_records(records, sessions, nodes, [&](const sim::TraceEvent& e) {
    seen.push_back({e.kind, nodes.name(e.node), e.true_time.ns() / 1'000'000, e.id, std::string{e.label},
                    std::string{e.detail}});
  });
  return seen;
}

constexpr const char* kWorkerStart =
    R"({"event":"worker.start","worker":"w1","mono_ms":1000,"algorithm":"core","expiry":"wall","lease_ms":10000,)"
    R"("heartbeat_ms":2000,"margin_ms":1000,"reconcile_ms":5000,"reconcile_jitter_ms":1000,"watch_ms":0,)"
    R"("request_timeout_ms":1500})";

TEST(RealRecords, StartLeaseAndKillBecomeTheTrace) {
  std::vector<std::string> problems;
  const std::vector<RealRecord> records =
      read(std::string{kWorkerStart} + "\n" +
               R"({"event":"lease.open","worker":"w1","mono_ms":1500,"connection":"c7","epoch":3})" "\n"
               R"({"event":"lab.kill","worker":"w1","mono_ms":2000})" "\n"
               R"({"event":"lease.close","worker":"w1","mono_ms":2000,"connection":"c7","epoch":3,"reason":"drain"})" "\n",
           problems);
  EXPECT_TRUE(problems.empty());
  const std::vector<Seen> seen = replay(records);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].kind, EventKind::start);
  EXPECT_EQ(seen[0].node, "w1");
  EXPECT_EQ(seen[0].at_ms, 1000);
  EXPECT_EQ(seen[0].id, 1u);  // the first incarnation
  EXPECT_EQ(seen[1].kind, EventKind::note);
  EXPECT_EQ(seen[1].label, "lease.open");
  EXPECT_EQ(seen[1].detail, "c7 3");
  // Within one millisecond the worker's own line comes before the lab's kill.
  EXPECT_EQ(seen[2].label, "lease.close");
  EXPECT_EQ(seen[2].detail, "c7 3 drain");
  EXPECT_EQ(seen[3].kind, EventKind::crash);
  EXPECT_EQ(seen[3].label, "sigkill");
  EXPECT_EQ(seen[3].at_ms, 2000);
}

TEST(RealRecords, AMalformedLineIsSkippedAndNamedWithItsNumber) {
  std::vector<std::string> problems;
  const std::vector<RealRecord> records = read(std::string{"plain text from the worker\n"} + kWorkerStart + "\n" +
                                                   "{\"event\":\"lease.open\"\n" +  // no mono_ms, not JSON
                                                   "{\"mono_ms\": 5}\n" +           // no event
                                                   R"({"event":"worker.stop","worker":"w1"})" "\n",  // a summary
                                               problems);
  EXPECT_EQ(records.size(), 1u);
  EXPECT_EQ(problems, (std::vector<std::string>{
                          "w1.log:3: not a JSON object with \"event\" and \"mono_ms\" (skipped)",
                          "w1.log: 2 such lines in all"}));
  std::vector<std::string> none;
  EXPECT_TRUE(read("just text\n", none).empty());
  EXPECT_EQ(none, (std::vector<std::string>{"w1.log: no events"}));
}

TEST(RealRecords, AResumeCountsFromTheWorkersFirstLineAfterIt) {
  std::vector<std::string> problems;
  const std::vector<RealRecord> records =
      read(R"({"event":"lab.stop","worker":"w1","mono_ms":100})" "\n"
           R"({"event":"lab.cont","worker":"w1","mono_ms":200})" "\n"
           R"({"event":"lease.close","worker":"w2","mono_ms":250,"connection":"c1","epoch":1})" "\n"
           R"({"event":"lease.close","worker":"w1","mono_ms":300,"connection":"c2","epoch":2})" "\n",
           problems);
  const std::vector<Seen> seen = replay(records);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].kind, EventKind::pause);
  EXPECT_EQ(seen[1].node, "w2");
  EXPECT_EQ(seen[2].kind, EventKind::resume);
  EXPECT_EQ(seen[2].at_ms, 300);  // moved from 200 to w1's first line after it
  EXPECT_EQ(seen[3].detail, "c2 2 ");
  EXPECT_EQ(records[2].fields["sigcont_mono_ms"], 200);  // the lab's own time, kept
}

TEST(RealRecords, TheWorkersConfigurationAndItsDisagreements) {
  std::vector<std::string> problems;
  std::string other = kWorkerStart;
  other.replace(other.find("\"lease_ms\":10000"), 16, "\"lease_ms\":20000");
  const std::vector<RealRecord> records = read(std::string{kWorkerStart} + "\n" + other + "\n", problems);
  const std::optional<lease::LeaseConfig> config = workers_configuration(records, problems);
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->lease_duration, Duration::from_s(10));
  EXPECT_EQ(config->heartbeat_interval, Duration::from_s(2));
  EXPECT_EQ(config->algorithm, lease::Algorithm::core);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].substr(0, 28), "workers configured different");
}

TEST(RealRecords, HubSessionsBecomeUpstreamNotesAndAreJudged) {
  const std::string text =
      R"({"channel":"ch1","worker":"w1","lease_epoch":1,"opened_ms":100,"ended_ms":900,"first_in_ms":110,"last_in_ms":800})" "\n"
      R"({"channel":"ch1","worker":"w2","lease_epoch":2,"opened_ms":500,"ended_ms":1500,"first_in_ms":600,"last_in_ms":1400})" "\n"
      "not a record\n";
  std::istringstream in{text};
  std::vector<std::string> problems;
  const std::vector<HubSession> sessions = read_hub_sessions(in, "hub.jsonl", problems);
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(problems, (std::vector<std::string>{"hub.jsonl:3: not a hub session record (skipped)"}));
  const std::vector<Seen> seen = replay({}, sessions);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].label, "upstream.open");
  EXPECT_EQ(seen[0].node, "hub");
  EXPECT_EQ(seen[0].detail, "ch1 w1");
  EXPECT_EQ(seen[2].label, "upstream.close");
  EXPECT_EQ(seen[2].at_ms, 900);
  uint64_t compared = 0;
  const std::vector<std::string> overlaps = hub_overlaps(sessions, compared);
  EXPECT_EQ(compared, 1u);
  ASSERT_EQ(overlaps.size(), 1u);
  EXPECT_EQ(overlaps[0],
            "hub: ch1: w1 (lease epoch 1) sent frames until 0.800 s and w2 (lease epoch 2) from 0.600 s: both acting "
            "for 0.200 s");
}


// Two processes with one worker id: the second, started while the first
// runs, is a node of its own ("w1~1"), and so are its hub sessions; a lab
// act names its process. A process started after the first was killed is a
// restart: the same node, a new incarnation.
TEST(RealRecords, AProcessBesideAnotherOfItsWorkerIdIsANodeOfItsOwn) {
  std::vector<std::string> problems;
  std::vector<RealRecord> records = read(
      R"({"event":"worker.start","worker":"w1","process":11,"mono_ms":1000})" "\n"
      R"({"event":"lease.open","worker":"w1","process":11,"mono_ms":1100,"connection":"c1","epoch":1})" "\n"
      R"({"event":"worker.start","worker":"w1","process":22,"mono_ms":2000})" "\n"
      R"({"event":"lease.open","worker":"w1","process":22,"mono_ms":2100,"connection":"c2","epoch":1})" "\n"
      R"({"event":"lab.kill","worker":"w1","process":22,"mono_ms":3000})" "\n"
      R"({"event":"lab.kill","worker":"w1","mono_ms":4000})" "\n"
      R"({"event":"worker.start","worker":"w1","process":33,"mono_ms":5000})" "\n",
      problems);
  std::vector<HubSession> sessions{{"c2", "w1", "22", 1, 2100, 3000, std::nullopt, std::nullopt, std::nullopt},
                                   {"c1", "w1", "11", 1, 1100, 4000, std::nullopt, std::nullopt, std::nullopt}};
  EXPECT_EQ(name_processes(records, sessions), 1u);
  EXPECT_EQ(sessions[0].worker, "w1~1");
  EXPECT_EQ(sessions[1].worker, "w1");
  const std::vector<Seen> seen = replay(records);
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(seen[0].node, "w1");
  EXPECT_EQ(seen[2].node, "w1~1");
  EXPECT_EQ(seen[2].kind, EventKind::start);
  EXPECT_EQ(seen[3].node, "w1~1");
  EXPECT_EQ(seen[4].node, "w1~1");  // the kill that named process 22
  EXPECT_EQ(seen[4].kind, EventKind::crash);
  EXPECT_EQ(seen[5].node, "w1");  // no process named: the id's latest still running
  EXPECT_EQ(seen[6].node, "w1");  // started after both were killed: a restart
  EXPECT_EQ(seen[6].id, 2u);
}

}  // namespace
}  // namespace leaseproof::properties
