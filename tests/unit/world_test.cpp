#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "properties/sim_invariants.hpp"
#include "sim/world.hpp"

namespace leaseproof::sim {
namespace {

using namespace literals;

// A process assembled from lambdas, so each test states only what it needs.
struct Script {
  std::function<void(NodeContext&)> start = [](NodeContext&) {};
  std::function<void(NodeContext&, const Envelope&)> message = [](NodeContext&, const Envelope&) {};
  std::function<void(NodeContext&)> sigterm = [](NodeContext& c) { c.exit(); };
};

class ScriptedProcess final : public Process {
 public:
  explicit ScriptedProcess(const Script& script) : script_(script) {}
  void on_start(NodeContext& c) override { script_.start(c); }
  void on_message(NodeContext& c, const Envelope& e) override { script_.message(c, e); }
  void on_sigterm(NodeContext& c) override { script_.sigterm(c); }

 private:
  const Script& script_;
};

struct Text final : Payload {
  explicit Text(std::string v) : value(std::move(v)) {}
  std::string value;
};

Message text(std::string value) { return Message{"text", 8, std::make_shared<Text>(std::move(value))}; }

class WorldTest : public ::testing::Test {
 protected:
  WorldTest() {
    world.trace().add_observer([this](const TraceEvent& e) {
      invariants.observe(e);
      if (e.kind == EventKind::drop) drops.emplace_back(e.label);
    });
    world.set_default_link(LinkConfig{LatencyDistribution{10_ms}, Ratio::zero(), false});
  }
  ~WorldTest() override { EXPECT_EQ(invariants.violations(), std::vector<std::string>{}); }

  NodeId add(const Script& script, ClockModel clock = {}) {
    return world.add_node("n" + std::to_string(world.node_count()), std::move(clock),
                          [&script] { return std::make_unique<ScriptedProcess>(script); });
  }
  Instant at(Duration d) { return Instant::zero() + d; }

  World world{1};
  properties::SimInvariants invariants;
  std::vector<std::string> drops;
};

TEST_F(WorldTest, MessagesArriveAfterTheLinkLatency) {
  std::vector<Instant> received;
  Script receiver;
  receiver.message = [&](NodeContext&, const Envelope& e) {
    EXPECT_EQ(e.message.as<Text>().value, "hello");
    received.push_back(world.now());
  };
  Script sender;
  NodeId b = add(receiver);
  sender.start = [&](NodeContext& c) { c.send(b, text("hello")); };
  add(sender);
  world.run_until(at(1_s));
  EXPECT_EQ(received, std::vector<Instant>{at(10_ms)});
}

TEST_F(WorldTest, PartitionDropsMessagesSentOrArrivingWhileActive) {
  int received = 0;
  Script receiver;
  receiver.message = [&](NodeContext&, const Envelope&) { ++received; };
  NodeId b = add(receiver);
  Script sender;
  NodeId a = add(sender);
  world.partition(a, b, at(1_s), at(2_s));
  sender.start = [&](NodeContext& c) {
    c.set_timer(995_ms, "in-flight-when-cut", [&c, b] { c.send(b, text("1")); });   // arrives at 1.005s
    c.set_timer(1500_ms, "during", [&c, b] { c.send(b, text("2")); });
    c.set_timer(2500_ms, "after", [&c, b] { c.send(b, text("3")); });
  };
  world.run_until(at(3_s));
  EXPECT_EQ(received, 1);
  EXPECT_EQ(drops, (std::vector<std::string>{"partition", "partition"}));
  EXPECT_TRUE(world.partitioned(a, b, at(1_s)));
  EXPECT_FALSE(world.partitioned(b, a, at(1_s)));  // directed
  EXPECT_FALSE(world.partitioned(a, b, at(2_s)));  // half-open
}

TEST_F(WorldTest, ClogHoldsMessagesUntilItEnds) {
  std::vector<Instant> received;
  Script receiver;
  receiver.message = [&](NodeContext&, const Envelope&) { received.push_back(world.now()); };
  NodeId b = add(receiver);
  Script sender;
  sender.start = [&](NodeContext& c) { c.set_timer(1_s, "send", [&c, b] { c.send(b, text("x")); }); };
  NodeId a = add(sender);
  world.clog(a, b, at(500_ms), at(4_s));
  world.run_until(at(5_s));
  EXPECT_EQ(received, std::vector<Instant>{at(4_s)});
}

TEST_F(WorldTest, LossOfOneDropsEverything) {
  int received = 0;
  Script receiver;
  receiver.message = [&](NodeContext&, const Envelope&) { ++received; };
  NodeId b = add(receiver);
  Script sender;
  sender.start = [&](NodeContext& c) {
    for (int i = 0; i < 10; ++i) c.send(b, text("x"));
  };
  NodeId a = add(sender);
  world.set_link(a, b, LinkConfig{LatencyDistribution{1_ms}, Ratio::one(), false});
  world.run_until(at(1_s));
  EXPECT_EQ(received, 0);
  EXPECT_EQ(drops.size(), 10u);
}

TEST_F(WorldTest, CrashLosesVolatileStateAndRestartIsANewIncarnation) {
  int starts = 0;
  int stale_timer_fired = 0;
  Script script;
  script.start = [&](NodeContext& c) {
    ++starts;
    c.set_timer(2_s, "stale", [&] { ++stale_timer_fired; });
  };
  NodeId a = add(script);
  world.at(at(1_s), [&] { world.crash(a); });
  world.at(at(1500_ms), [&] { world.restart(a); });
  world.run_until(at(3_s));
  // The first incarnation's timer (due at 2s) never fires; the second's (due at 3.5s) has not yet.
  EXPECT_EQ(stale_timer_fired, 0);
  EXPECT_EQ(starts, 2);
  EXPECT_EQ(world.incarnation(a).value, 2u);
  world.run_until(at(4_s));
  EXPECT_EQ(stale_timer_fired, 1);
}

TEST_F(WorldTest, MessagesToADownNodeAreDropped) {
  Script receiver;
  NodeId b = add(receiver);
  Script sender;
  sender.start = [&](NodeContext& c) { c.set_timer(2_s, "send", [&c, b] { c.send(b, text("x")); }); };
  add(sender);
  world.at(at(1_s), [&] { world.crash(b); });
  world.run_until(at(3_s));
  EXPECT_EQ(drops, std::vector<std::string>{"receiver_down"});
}

TEST_F(WorldTest, PauseDefersTimersAndMessagesThenRunsThemInOrder) {
  std::vector<std::string> log;
  Script receiver;
  receiver.start = [&](NodeContext& c) {
    c.set_timer(2_s, "t1", [&] { log.push_back("timer@" + format_duration(world.now().since_zero())); });
  };
  receiver.message = [&](NodeContext&, const Envelope& e) {
    log.push_back(e.message.as<Text>().value + "@" + format_duration(world.now().since_zero()));
  };
  NodeId b = add(receiver);
  Script sender;
  sender.start = [&](NodeContext& c) {
    c.set_timer(1_s, "m1", [&c, b] { c.send(b, text("before-timer")); });
    c.set_timer(3_s, "m2", [&c, b] { c.send(b, text("after-timer")); });
  };
  add(sender);
  world.at(at(500_ms), [&] { world.pause(b, 5_s); });
  world.run_until(at(10_s));
  EXPECT_EQ(log, (std::vector<std::string>{"before-timer@5.5s", "timer@5.5s", "after-timer@5.5s"}));
  EXPECT_EQ(invariants.deferred_deliveries(), 1u);
}

TEST_F(WorldTest, SigtermRunsTheHandlerAndSigkillFollowsTheStopTimeout) {
  Script graceful;  // default handler exits at once
  Script stubborn;
  stubborn.sigterm = [](NodeContext&) {};  // ignores SIGTERM
  NodeId a = add(graceful);
  NodeId b = add(stubborn);
  world.at(at(1_s), [&] {
    world.sigterm(a, 30_s);
    world.sigterm(b, 30_s);
  });
  world.run_until(at(2_s));
  EXPECT_EQ(world.state(a), ProcessState::down);
  EXPECT_EQ(world.state(b), ProcessState::running);
  world.run_until(at(31_s));
  EXPECT_EQ(world.state(b), ProcessState::down);
  EXPECT_EQ(world.trace().count_of(EventKind::exit), 1u);
  EXPECT_EQ(world.trace().count_of(EventKind::crash), 1u);  // the SIGKILL, not the graceful exit
}

// The caller cannot tell "request lost" from "applied, reply lost": both are
// timeouts. The receiver's state tells them apart.
TEST_F(WorldTest, LostReplyAfterApplyIsAnAmbiguousTimeout) {
  int applied = 0;
  std::vector<bool> outcomes;  // true = got a reply
  Script server;
  server.message = [&](NodeContext& c, const Envelope& e) {
    ++applied;
    c.reply(e, text("ok"));
  };
  NodeId s = add(server);
  Script client;
  client.start = [&](NodeContext& c) {
    c.call(s, text("write"), 1_s, [&](const Envelope* reply) { outcomes.push_back(reply != nullptr); });
  };
  NodeId c = add(client);
  world.set_link(s, c, LinkConfig{LatencyDistribution{1_ms}, Ratio::one(), false});  // replies lost
  world.run_until(at(5_s));
  EXPECT_EQ(applied, 1);
  EXPECT_EQ(outcomes, std::vector<bool>{false});
  EXPECT_EQ(world.trace().count_of(EventKind::timeout), 1u);
}

TEST_F(WorldTest, ReplyAfterTheTimeoutIsDroppedAsLate) {
  std::vector<bool> outcomes;
  Script server;
  server.message = [&](NodeContext& c, const Envelope& e) {
    c.set_timer(2_s, "slow", [&c, e] { c.reply(e, text("late")); });
  };
  NodeId s = add(server);
  Script client;
  client.start = [&](NodeContext& c) {
    c.call(s, text("read"), 1_s, [&](const Envelope* reply) { outcomes.push_back(reply != nullptr); });
  };
  add(client);
  world.run_until(at(5_s));
  EXPECT_EQ(outcomes, std::vector<bool>{false});
  EXPECT_EQ(drops, std::vector<std::string>{"late_reply"});
}

TEST_F(WorldTest, TimersRunOnTheNodesMonotonicClock) {
  Instant fired;
  Script slow_clock;
  slow_clock.start = [&](NodeContext& c) { c.set_timer(10_s, "t", [&] { fired = world.now(); }); };
  ClockModel model;
  model.drift_ppm = -100'000;  // runs 10% slow: 10 s of its time take ~11.1 s
  add(slow_clock, model);
  world.run_until(at(20_s));
  EXPECT_GT(fired, at(11_s));
  EXPECT_LT(fired, at(11200_ms));
}

TEST_F(WorldTest, ClockStepsAreTracedAtTheirTime) {
  Script idle;
  ClockModel model;
  model.steps = {ClockStep{at(3_s), 2_s}, ClockStep{at(4_s), -(5_s)}};
  NodeId a = add(idle, model);
  world.run_until(at(5_s));
  EXPECT_EQ(world.trace().count_of(EventKind::clock_step), 2u);
  EXPECT_EQ(world.clock(a).wall(at(5_s)), kWallEpoch + 5_s - 3_s);
}

}  // namespace
}  // namespace leaseproof::sim
