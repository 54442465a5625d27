#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/sqs.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {
namespace {

using namespace literals;

constexpr std::string_view kQueue = "handover.fifo";

// A client process whose whole behaviour is one start function.
class ScriptedClient final : public sim::Process {
 public:
  explicit ScriptedClient(std::function<void(sim::NodeContext&)> script) : script_(std::move(script)) {}
  void on_start(sim::NodeContext& context) override { script_(context); }
  void on_message(sim::NodeContext&, const sim::Envelope&) override {}

 private:
  std::function<void(sim::NodeContext&)> script_;
};

class SqsTest : public ::testing::Test {
 protected:
  SqsTest() {
    world.set_default_link(sim::LinkConfig{sim::LatencyDistribution{10_ms}, Ratio::zero(), false});
    EXPECT_TRUE(state.create_queue(std::string{kQueue}));
    // A clock with drift and an origin far from zero: windows must use the node's own readings.
    sim::ClockModel clock;
    clock.drift_ppm = 200;
    clock.monotonic_origin = Instant::zero() + 7_h;
    sqs = world.add_node("sqs", clock, [this] { return std::make_unique<SqsNode>(state); });
    world.trace().add_observer([this](const sim::TraceEvent& e) {
      if (e.kind == sim::EventKind::note) notes.push_back(std::string{e.label} + " " + std::string{e.detail});
    });
  }

  NodeId add_client(std::function<void(sim::NodeContext&)> script) {
    return world.add_node("client" + std::to_string(world.node_count()), {},
                          [script] { return std::make_unique<ScriptedClient>(script); });
  }

  // Sends at `delay` after the client starts; records the reply (or the timeout).
  void send_at(sim::NodeContext& c, Duration delay, std::string group, std::string dedup, std::string body) {
    c.set_timer(delay, "send", [this, &c, group, dedup, body] {
      sqs_send(c, sqs, std::string{kQueue}, group, dedup, body, 1_s, [this](const SqsSendReply* reply) {
        send_replies.push_back(reply == nullptr ? SqsSendReply{SqsError::none, 0, false} : *reply);
        timeouts += reply == nullptr ? 1 : 0;
      });
    });
  }

  // Receives at `delay`; appends the bodies it got to `received`.
  void receive_at(sim::NodeContext& c, Duration delay, uint32_t max, Duration visibility) {
    c.set_timer(delay, "receive", [this, &c, max, visibility] {
      sqs_receive(c, sqs, std::string{kQueue}, max, visibility, 1_s, [this](const SqsReceiveReply* reply) {
        ASSERT_NE(reply, nullptr);
        receive_errors.push_back(reply->error);
        std::vector<SqsReceivedMessage> batch = reply->messages;
        for (const SqsReceivedMessage& m : batch) received.push_back(m);
        batches.push_back(std::move(batch));
      });
    });
  }

  std::vector<std::string> bodies(const std::vector<SqsReceivedMessage>& messages) const {
    std::vector<std::string> out;
    for (const auto& m : messages) out.push_back(m.body);
    return out;
  }

  Instant at(Duration d) const { return Instant::zero() + d; }

  sim::World world{7};
  SqsState state;
  NodeId sqs;
  std::vector<SqsSendReply> send_replies;
  std::vector<SqsReceivedMessage> received;
  std::vector<std::vector<SqsReceivedMessage>> batches;
  std::vector<SqsError> receive_errors;
  std::vector<std::string> notes;
  int timeouts = 0;
};

TEST_F(SqsTest, DuplicateWithinFiveMinutesIsAcknowledgedButNotEnqueued) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "first");
    send_at(c, 4_min, "g", "d1", "again");  // 4 min after the first: inside the window
    receive_at(c, 5_min, 10, 30_s);
  });
  world.run_until(at(6_min));
  ASSERT_EQ(send_replies.size(), 2u);
  EXPECT_FALSE(send_replies[0].deduplicated);
  EXPECT_TRUE(send_replies[1].deduplicated);
  EXPECT_EQ(send_replies[1].sequence_number, send_replies[0].sequence_number);
  EXPECT_EQ(bodies(received), std::vector<std::string>{"first"});
  EXPECT_EQ(state.queue(kQueue)->message_count(), 1u);
}

TEST_F(SqsTest, SameDeduplicationIdAfterTheWindowIsANewMessage) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "first");
    send_at(c, 1_s + 5_min + 1_s, "g", "d1", "later");  // the window (on the SQS clock) has passed
    receive_at(c, 7_min, 10, 30_s);
  });
  world.run_until(at(8_min));
  ASSERT_EQ(send_replies.size(), 2u);
  EXPECT_FALSE(send_replies[1].deduplicated);
  EXPECT_NE(send_replies[1].sequence_number, send_replies[0].sequence_number);
  EXPECT_EQ(bodies(received), (std::vector<std::string>{"first", "later"}));
}

TEST_F(SqsTest, DeduplicationWindowIsMeasuredOnTheSqsNodesOwnClock) {
  // An SQS node whose clock runs 10% fast: 4m40s of true time is 5m08s on it.
  sim::ClockModel fast;
  fast.drift_ppm = 100'000;
  sqs = world.add_node("sqs-fast", fast, [this] { return std::make_unique<SqsNode>(state); });
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "first");
    send_at(c, 1_s + 4_min + 40_s, "g", "d1", "later");
    receive_at(c, 6_min, 10, 30_s);
  });
  world.run_until(at(7_min));
  ASSERT_EQ(send_replies.size(), 2u);
  EXPECT_FALSE(send_replies[1].deduplicated);
  EXPECT_EQ(bodies(received), (std::vector<std::string>{"first", "later"}));
}

TEST_F(SqsTest, GroupsComeOutInSendOrderAndAGroupWaitsWhileOneOfItsMessagesIsInFlight) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "a", "a1", "a1");
    send_at(c, 2_s, "b", "b1", "b1");
    send_at(c, 3_s, "a", "a2", "a2");
    send_at(c, 4_s, "b", "b2", "b2");
    receive_at(c, 10_s, 1, 30_s);  // a1: group a is now in flight
    receive_at(c, 11_s, 1, 30_s);  // b1 (a2 must wait behind a1): group b in flight
    receive_at(c, 12_s, 10, 30_s); // nothing: both groups have a message in flight
  });
  world.run_until(at(13_s));
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(bodies(batches[0]), std::vector<std::string>{"a1"});
  EXPECT_EQ(bodies(batches[1]), std::vector<std::string>{"b1"});
  EXPECT_TRUE(batches[2].empty());

  // Deleting a1 unblocks group a only: a2 comes next, b2 still waits for b1.
  add_client([this](sim::NodeContext& c) {
    sqs_delete(c, sqs, std::string{kQueue}, batches[0][0].receipt_handle, 1_s, [](const SqsDeleteReply* reply) {
      ASSERT_NE(reply, nullptr);
      EXPECT_EQ(reply->error, SqsError::none);
      EXPECT_TRUE(reply->deleted);
    });
    receive_at(c, 1_s, 10, 30_s);
  });
  world.run_until(at(16_s));
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(bodies(batches[3]), std::vector<std::string>{"a2"});
}

TEST_F(SqsTest, OneReceiveReturnsAGroupsMessagesInOrderBeforeTheNextGroup) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "b", "b1", "b1");
    send_at(c, 2_s, "a", "a1", "a1");
    send_at(c, 3_s, "b", "b2", "b2");
    send_at(c, 4_s, "a", "a2", "a2");
    send_at(c, 5_s, "b", "b3", "b3");
    receive_at(c, 10_s, 10, 30_s);
  });
  world.run_until(at(11_s));
  EXPECT_EQ(bodies(received), (std::vector<std::string>{"b1", "b2", "b3", "a1", "a2"}));
}

TEST_F(SqsTest, MessageNotDeletedBeforeItsVisibilityTimeoutIsRedeliveredAndTheOldHandleIsRefused) {
  std::vector<SqsDeleteReply> deletes;
  add_client([this, &deletes](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m");
    receive_at(c, 2_s, 1, 30_s);
    receive_at(c, 20_s, 1, 30_s);  // still invisible: nothing
    receive_at(c, 33_s, 1, 30_s);  // visible again: receive count 2
    c.set_timer(40_s, "stale delete", [this, &c, &deletes] {
      sqs_delete(c, sqs, std::string{kQueue}, received.at(0).receipt_handle, 1_s,
                 [&deletes](const SqsDeleteReply* reply) { deletes.push_back(*reply); });
    });
    c.set_timer(41_s, "current delete", [this, &c, &deletes] {
      sqs_delete(c, sqs, std::string{kQueue}, received.at(1).receipt_handle, 1_s,
                 [&deletes](const SqsDeleteReply* reply) { deletes.push_back(*reply); });
    });
    c.set_timer(42_s, "repeat delete", [this, &c, &deletes] {
      sqs_delete(c, sqs, std::string{kQueue}, received.at(1).receipt_handle, 1_s,
                 [&deletes](const SqsDeleteReply* reply) { deletes.push_back(*reply); });
    });
  });
  world.run_until(at(1_min));
  ASSERT_EQ(received.size(), 2u);
  EXPECT_EQ(received[0].receive_count, 1u);
  EXPECT_EQ(received[1].receive_count, 2u);
  EXPECT_EQ(received[1].sequence_number, received[0].sequence_number);
  EXPECT_TRUE(batches[1].empty());
  ASSERT_EQ(deletes.size(), 3u);
  EXPECT_EQ(deletes[0].error, SqsError::receipt_handle_expired);
  EXPECT_EQ(deletes[1].error, SqsError::none);
  EXPECT_TRUE(deletes[1].deleted);
  EXPECT_EQ(deletes[2].error, SqsError::none);  // idempotent
  EXPECT_FALSE(deletes[2].deleted);
  EXPECT_EQ(state.queue(kQueue)->message_count(), 0u);
}

TEST_F(SqsTest, DeleteAfterTheVisibilityTimeoutFailsEvenWithoutARedelivery) {
  SqsDeleteReply late;
  add_client([this, &late](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m");
    receive_at(c, 2_s, 1, 5_s);
    c.set_timer(10_s, "late delete", [this, &c, &late] {
      sqs_delete(c, sqs, std::string{kQueue}, received.at(0).receipt_handle, 1_s,
                 [&late](const SqsDeleteReply* reply) { late = *reply; });
    });
  });
  world.run_until(at(20_s));
  EXPECT_EQ(late.error, SqsError::receipt_handle_expired);
  EXPECT_EQ(state.queue(kQueue)->message_count(), 1u);
}

TEST_F(SqsTest, LostSendReplyThenRetryWithTheSameDeduplicationIdGivesOneMessage) {
  NodeId client = add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "conn-1", "release-1-epoch-3", "release");   // applied, reply lost
    send_at(c, 3_s, "conn-1", "release-1-epoch-3", "release");   // the retry
    receive_at(c, 5_s, 10, 30_s);
  });
  // Replies from SQS to the client are lost around the first send only.
  world.partition(sqs, client, at(1_s), at(2_s));
  world.run_until(at(10_s));
  EXPECT_EQ(timeouts, 1);
  ASSERT_EQ(send_replies.size(), 2u);
  EXPECT_TRUE(send_replies[1].deduplicated);
  EXPECT_EQ(bodies(received), std::vector<std::string>{"release"});
  EXPECT_EQ(received[0].receive_count, 1u);
}

TEST_F(SqsTest, QueueStateSurvivesARestartOfTheSqsNode) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m");
    receive_at(c, 10_s, 10, 30_s);
  });
  world.at(at(3_s), [this] { world.crash(sqs); });
  world.at(at(4_s), [this] { world.restart(sqs); });
  world.run_until(at(11_s));
  EXPECT_EQ(bodies(received), std::vector<std::string>{"m"});
}

TEST_F(SqsTest, ReceiveReturnsAtMostTenMessagesAndRefusesALargerMaximum) {
  add_client([this](sim::NodeContext& c) {
    for (int i = 0; i < 15; ++i) {
      const std::string id = std::to_string(i);
      send_at(c, 1_s + Duration::from_ms(i), "g" + std::to_string(i % 3), id, id);
    }
    receive_at(c, 5_s, 11, 30_s);
    receive_at(c, 6_s, 10, 30_s);
    receive_at(c, 7_s, 10, 30_s);  // the third group's five
    receive_at(c, 8_s, 10, 30_s);  // every group is in flight now
  });
  world.run_until(at(9_s));
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(receive_errors[0], SqsError::invalid_parameter);
  EXPECT_TRUE(batches[0].empty());
  EXPECT_EQ(batches[1].size(), 10u);
  EXPECT_EQ(batches[2].size(), 5u);
  EXPECT_TRUE(batches[3].empty());
}

TEST_F(SqsTest, TraceNotesNameQueueGroupAndDeduplicationId) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m");
    send_at(c, 2_s, "g", "d1", "m");
    receive_at(c, 3_s, 1, 30_s);
  });
  world.run_until(at(4_s));
  EXPECT_EQ(notes, (std::vector<std::string>{"sqs.send handover.fifo g d1 enqueued",
                                             "sqs.send handover.fifo g d1 duplicate",
                                             "sqs.receive handover.fifo g d1 receive=1"}));
}

TEST_F(SqsTest, UnknownQueueAndMissingIdsAreErrorsNotAssertions) {
  std::vector<SqsError> errors;
  add_client([this, &errors](sim::NodeContext& c) {
    auto record = [&errors](const SqsSendReply* reply) { errors.push_back(reply->error); };
    sqs_send(c, sqs, "missing.fifo", "g", "d", "m", 1_s, record);
    sqs_send(c, sqs, std::string{kQueue}, "", "d", "m", 1_s, record);
    sqs_send(c, sqs, std::string{kQueue}, "g", "", "m", 1_s, record);
    sqs_delete(c, sqs, std::string{kQueue}, SqsReceiptHandle{99, 1}, 1_s,
               [&errors](const SqsDeleteReply* reply) { errors.push_back(reply->error); });
  });
  world.run_until(at(1_s));
  EXPECT_EQ(errors, (std::vector<SqsError>{SqsError::queue_does_not_exist, SqsError::invalid_parameter,
                                           SqsError::invalid_parameter, SqsError::receipt_handle_invalid}));
}

// ChangeMessageVisibility: how a consumer that will not process a message
// (a draining worker) hands it back at once instead of hiding it for its
// whole visibility timeout.
class SqsChangeVisibilityTest : public SqsTest {
 protected:
  // Changes the visibility of received[index] at `delay`; records the error.
  void change_at(sim::NodeContext& c, Duration delay, size_t index, Duration visibility) {
    c.set_timer(delay, "change", [this, &c, index, visibility] {
      sqs_change_visibility(c, sqs, std::string{kQueue}, received.at(index).receipt_handle, visibility, 1_s,
                            [this](const SqsChangeVisibilityReply* reply) {
                              ASSERT_NE(reply, nullptr);
                              change_errors.push_back(reply->error);
                            });
    });
  }
  std::vector<SqsError> change_errors;
};

TEST_F(SqsChangeVisibilityTest, ZeroMakesTheMessageReceivableAtOnceAndRetiresTheOldHandle) {
  std::vector<SqsDeleteReply> deletes;
  add_client([this, &deletes](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m");
    receive_at(c, 2_s, 1, 30_s);
    change_at(c, 3_s, 0, Duration::zero());
    receive_at(c, 4_s, 1, 30_s);  // 28 s before the first visibility timeout would end
    c.set_timer(5_s, "delete with the first handle", [this, &c, &deletes] {
      sqs_delete(c, sqs, std::string{kQueue}, received.at(0).receipt_handle, 1_s,
                 [&deletes](const SqsDeleteReply* reply) { deletes.push_back(*reply); });
    });
  });
  world.run_until(at(6_s));
  EXPECT_EQ(change_errors, std::vector<SqsError>{SqsError::none});
  ASSERT_EQ(received.size(), 2u);
  EXPECT_EQ(received[1].sequence_number, received[0].sequence_number);
  EXPECT_EQ(received[1].receive_count, 2u);
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_EQ(deletes[0].error, SqsError::receipt_handle_expired);
  EXPECT_EQ(state.queue(kQueue)->message_count(), 1u);
}

TEST_F(SqsChangeVisibilityTest, ALongerTimeoutKeepsTheMessageHiddenUntilItEnds) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m");
    receive_at(c, 2_s, 1, 5_s);
    change_at(c, 3_s, 0, 20_s);   // hidden until 23 s instead of 7 s
    receive_at(c, 10_s, 1, 5_s);  // nothing
    receive_at(c, 24_s, 1, 5_s);  // redelivered
  });
  world.run_until(at(25_s));
  EXPECT_EQ(change_errors, std::vector<SqsError>{SqsError::none});
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_TRUE(batches[1].empty());
  EXPECT_EQ(bodies(batches[2]), std::vector<std::string>{"m"});
}

TEST_F(SqsChangeVisibilityTest, StaleDeletedUnknownHandlesAndBadTimeoutsAreRefusedAndChangeNothing) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m1");
    send_at(c, 1_s, "h", "d2", "m2");
    receive_at(c, 2_s, 1, 5_s);     // m1, until 7 s
    change_at(c, 8_s, 0, 0_s);      // m1's timeout expired: refused
    receive_at(c, 9_s, 10, 30_s);   // m1 again (receive 2) and m2
    change_at(c, 10_s, 0, 0_s);     // the handle of m1's first receive: refused
    change_at(c, 10_s, 1, -1_s);    // a negative timeout: refused
    change_at(c, 10_s, 1, 13_h);    // beyond 12 hours: refused
    c.set_timer(11_s, "delete m2", [this, &c] {
      sqs_delete(c, sqs, std::string{kQueue}, received.at(2).receipt_handle, 1_s, [](const SqsDeleteReply*) {});
    });
    change_at(c, 12_s, 2, 0_s);     // m2 is deleted
    c.set_timer(12_s, "unknown handle", [this, &c] {
      sqs_change_visibility(c, sqs, std::string{kQueue}, SqsReceiptHandle{99, 1}, 0_s, 1_s,
                            [this](const SqsChangeVisibilityReply* reply) { change_errors.push_back(reply->error); });
    });
    receive_at(c, 13_s, 10, 30_s);  // m1 is still hidden by its second receive: nothing
  });
  world.run_until(at(14_s));
  ASSERT_EQ(received.size(), 3u);
  EXPECT_EQ(bodies(received), (std::vector<std::string>{"m1", "m1", "m2"}));
  EXPECT_EQ(change_errors,
            (std::vector<SqsError>{SqsError::receipt_handle_expired, SqsError::receipt_handle_expired,
                                   SqsError::invalid_parameter, SqsError::invalid_parameter,
                                   SqsError::message_not_in_flight, SqsError::receipt_handle_invalid}));
  EXPECT_TRUE(batches.back().empty());
  EXPECT_EQ(std::count_if(notes.begin(), notes.end(),
                          [](const std::string& note) { return note.starts_with("sqs.receive "); }),
            3);  // m1 twice and m2: the refusals changed nothing
}

// FIFO order holds when one message of a group is handed back while a later
// one stays in flight: the group waits for the later one too.
TEST_F(SqsChangeVisibilityTest, AGroupWaitsWhileAnyOfItsMessagesIsInFlight) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "first");
    send_at(c, 2_s, "g", "d2", "second");
    receive_at(c, 3_s, 10, 30_s);  // both, in order
    change_at(c, 4_s, 0, 0_s);     // "first" back; "second" still in flight
    receive_at(c, 5_s, 10, 30_s);  // nothing: the group has a message in flight
    change_at(c, 6_s, 1, 0_s);     // "second" back too
    receive_at(c, 7_s, 10, 30_s);  // both again, in order
  });
  world.run_until(at(8_s));
  EXPECT_EQ(change_errors, (std::vector<SqsError>{SqsError::none, SqsError::none}));
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(bodies(batches[0]), (std::vector<std::string>{"first", "second"}));
  EXPECT_TRUE(batches[1].empty());
  EXPECT_EQ(bodies(batches[2]), (std::vector<std::string>{"first", "second"}));
}

TEST_F(SqsChangeVisibilityTest, TraceNoteNamesTheMessageTheTimeoutAndTheOutcome) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m");
    receive_at(c, 2_s, 1, 30_s);
    change_at(c, 3_s, 0, 0_s);
  });
  world.run_until(at(4_s));
  EXPECT_EQ(notes.back(), "sqs.change_visibility handover.fifo g d1 0s changed");
}

// Long polling (WaitTimeSeconds): a receive that finds nothing is held until
// a message can be returned or its wait ends. Links take 10 ms each way.
class SqsLongPollTest : public SqsTest {
 protected:
  struct Answer {
    Instant at;  // true time the caller got it
    bool timed_out = false;
    SqsError error = SqsError::none;
    std::vector<std::string> bodies;
    std::vector<uint32_t> receive_counts;
  };
  // A receive at `delay` that waits up to `wait`; the caller gives up `wait` + 1 s after sending.
  void long_poll_at(sim::NodeContext& c, Duration delay, Duration wait, uint32_t max = 10,
                    Duration visibility = 30_s) {
    c.set_timer(delay, "receive", [this, &c, wait, max, visibility] {
      sqs_receive(
          c, sqs, std::string{kQueue}, max, visibility, wait + 1_s,
          [this](const SqsReceiveReply* reply) {
            Answer answer;
            answer.at = world.now();
            answer.timed_out = reply == nullptr;
            if (reply != nullptr) {
              answer.error = reply->error;
              for (const SqsReceivedMessage& m : reply->messages) {
                answer.bodies.push_back(m.body);
                answer.receive_counts.push_back(m.receive_count);
                received.push_back(m);
              }
            }
            answers.push_back(std::move(answer));
          },
          wait);
    });
  }
  std::vector<Answer> answers;
};

TEST_F(SqsLongPollTest, AHeldReceiveIsAnsweredWhenAMessageIsSentNotBefore) {
  add_client([this](sim::NodeContext& c) {
    long_poll_at(c, 1_s, 10_s);
    send_at(c, 4_s, "g", "d1", "m");
  });
  world.run_until(at(5_s));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].bodies, std::vector<std::string>{"m"});
  // The send reaches SQS at 4.01 s and the held receive's answer its caller at 4.02 s.
  EXPECT_GE(answers[0].at, at(4_s));
  EXPECT_LE(answers[0].at, at(4_s + 50_ms));
}

TEST_F(SqsLongPollTest, NothingToReturnIsAnsweredEmptyWhenTheWaitEndsAndAShortPollAtOnce) {
  add_client([this](sim::NodeContext& c) {
    long_poll_at(c, 1_s, 5_s);
    long_poll_at(c, 2_s, Duration::zero());
  });
  world.run_until(at(8_s));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_LE(answers[0].at, at(2_s + 21_ms));  // the short poll, first: one round trip
  EXPECT_GE(answers[1].at, at(6_s));          // held from 1.01 s for 5 s of the SQS node's clock
  EXPECT_LE(answers[1].at, at(6_s + 50_ms));
  for (const Answer& answer : answers) {
    EXPECT_FALSE(answer.timed_out);
    EXPECT_EQ(answer.error, SqsError::none);
    EXPECT_TRUE(answer.bodies.empty());
  }
}

TEST_F(SqsLongPollTest, HeldReceivesAreServedOldestFirst) {
  add_client([this](sim::NodeContext& c) { long_poll_at(c, 1_s, 10_s, 1); });
  add_client([this](sim::NodeContext& c) {
    long_poll_at(c, 2_s, 10_s, 1);
    send_at(c, 3_s, "a", "a1", "first");
    send_at(c, 4_s, "b", "b1", "second");
  });
  world.run_until(at(5_s));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].bodies, std::vector<std::string>{"first"});  // the receive sent at 1 s
  EXPECT_EQ(answers[1].bodies, std::vector<std::string>{"second"});
  EXPECT_LT(answers[0].at, at(4_s));
}

TEST_F(SqsLongPollTest, AnExpiredVisibilityTimeoutServesAHeldReceive) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "m");
    long_poll_at(c, 2_s, Duration::zero(), 1, 3_s);  // m in flight until 5.01 s
    long_poll_at(c, 3_s, 10_s);
  });
  world.run_until(at(6_s));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[1].bodies, std::vector<std::string>{"m"});
  EXPECT_EQ(answers[1].receive_counts, std::vector<uint32_t>{2});
  EXPECT_GE(answers[1].at, at(5_s));
  EXPECT_LE(answers[1].at, at(5_s + 50_ms));
}

TEST_F(SqsLongPollTest, ADeleteThatFreesAGroupServesAHeldReceive) {
  add_client([this](sim::NodeContext& c) {
    send_at(c, 1_s, "g", "d1", "one");
    send_at(c, 1_s + 100_ms, "g", "d2", "two");
    long_poll_at(c, 2_s, Duration::zero(), 1);  // "one": the group is in flight
    long_poll_at(c, 3_s, 10_s);                 // held: "two" waits behind "one"
    c.set_timer(4_s, "delete", [this, &c] {
      sqs_delete(c, sqs, std::string{kQueue}, received.at(0).receipt_handle, 1_s, [](const SqsDeleteReply*) {});
    });
  });
  world.run_until(at(5_s));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].bodies, std::vector<std::string>{"one"});
  EXPECT_EQ(answers[1].bodies, std::vector<std::string>{"two"});
  EXPECT_GE(answers[1].at, at(4_s));
  EXPECT_LE(answers[1].at, at(4_s + 50_ms));
}

TEST_F(SqsLongPollTest, AWaitOverTwentySecondsIsRefusedAtOnce) {
  add_client([this](sim::NodeContext& c) { long_poll_at(c, 1_s, 21_s); });
  world.run_until(at(2_s));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].error, SqsError::invalid_parameter);
  EXPECT_LE(answers[0].at, at(1_s + 21_ms));  // one round trip: not held
}

TEST_F(SqsLongPollTest, ARestartLosesHeldReceivesTheirCallersTimeOutAndTheMessagesStayQueued) {
  add_client([this](sim::NodeContext& c) {
    long_poll_at(c, 1_s, 10_s);
    send_at(c, 4_s, "g", "d1", "m");
    long_poll_at(c, 13_s, 10_s);
  });
  world.at(at(2_s), [this] { world.crash(sqs); });
  world.at(at(3_s), [this] { world.restart(sqs); });
  world.run_until(at(14_s));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_TRUE(answers[0].timed_out);  // 11 s after it was sent
  EXPECT_GE(answers[0].at, at(12_s));
  EXPECT_LE(answers[0].at, at(12_s + 1_ms));
  EXPECT_EQ(answers[1].bodies, std::vector<std::string>{"m"});
  EXPECT_EQ(answers[1].receive_counts, std::vector<uint32_t>{1});  // the lost receive took nothing
}

}  // namespace
}  // namespace leaseproof::models
