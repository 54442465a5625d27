// Unit tests of the upstream hub's side of the resume protocol (core/resume):
// numbering and fan-out, every resume rule at its exact ring boundary, the
// bounded queue (1013, never a hole), pings, pong timeout and write deadline,
// close_all, restart with a kept ring, config validation, and the deliberately
// broken variant that checker tests rely on.

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/resume/hub.hpp"

namespace leaseproof::resume {
// gtest printers, so failed comparisons show positions and resets.
inline void PrintTo(const Position& p, std::ostream* os) { *os << "{epoch " << p.epoch << ", seq " << p.seq << "}"; }
}  // namespace leaseproof::resume

namespace leaseproof::resume::test {
namespace {

using namespace literals;

constexpr uint32_t kDataHeaderBytes = 16;

// Small bounds so boundaries are easy to reach: the ring keeps 10 messages.
HubConfig small_config() {
  HubConfig config;
  config.ring_messages_max = 10;
  config.ring_bytes_max = 1ull << 20;
  config.subscriber_queue_bytes_max = 64ull << 10;
  config.replay_messages_max = 10;
  config.ping_interval = 2_s;
  config.pong_timeout = 4_s;
  config.write_deadline = 10_s;
  return config;
}

std::vector<HubFrame> frames_to(const HubActions& out, SubscriberId id) {
  std::vector<HubFrame> frames;
  for (const HubAction& action : out) {
    if (const auto* send = std::get_if<HubSend>(&action); send != nullptr && send->subscriber == id) {
      frames.push_back(send->frame);
    }
  }
  return frames;
}

std::vector<int64_t> data_seqs(const HubActions& out, SubscriberId id) {
  std::vector<int64_t> seqs;
  for (const HubFrame& frame : frames_to(out, id)) {
    if (const auto* data = std::get_if<Data>(&frame)) seqs.push_back(data->message.seq);
  }
  return seqs;
}

std::vector<Reset> resets_to(const HubActions& out, SubscriberId id) {
  std::vector<Reset> resets;
  for (const HubFrame& frame : frames_to(out, id)) {
    if (const auto* reset = std::get_if<Reset>(&frame)) resets.push_back(*reset);
  }
  return resets;
}

std::vector<uint64_t> pings_to(const HubActions& out, SubscriberId id) {
  std::vector<uint64_t> pings;
  for (const HubFrame& frame : frames_to(out, id)) {
    if (const auto* ping = std::get_if<Ping>(&frame)) pings.push_back(ping->id);
  }
  return pings;
}

std::vector<HubClose> closes(const HubActions& out) {
  std::vector<HubClose> result;
  for (const HubAction& action : out) {
    if (const auto* close = std::get_if<HubClose>(&action)) result.push_back(*close);
  }
  return result;
}

std::vector<std::string> marks(const HubActions& out) {
  std::vector<std::string> result;
  for (const HubAction& action : out) {
    if (const auto* mark = std::get_if<HubMark>(&action)) result.emplace_back(mark->name);
  }
  return result;
}

bool has_mark(const HubActions& out, std::string_view name) {
  const std::vector<std::string> all = marks(out);
  return std::find(all.begin(), all.end(), name) != all.end();
}

std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> seqs;
  for (int64_t seq = first; seq <= last; ++seq) seqs.push_back(seq);
  return seqs;
}

// A hub on a test clock. Peers are driven by hand: nothing answers a ping
// unless a test says so.
struct HubFixture {
  explicit HubFixture(HubConfig config = small_config(), uint64_t epoch = 7) : hub(std::move(config), epoch) {}

  void publish_n(std::string_view channel, int n, uint32_t bytes = 100) {
    for (int i = 0; i < n; ++i) hub.publish(channel, bytes, now, out);
  }
  HubActions subscribe(SubscriberId id, std::string channel, Position after) {
    HubActions actions;
    hub.subscribe(id, Subscribe{std::move(channel), after}, now, actions);
    return actions;
  }
  // Calls on_timer at every deadline up to `until`, like a caller would.
  HubActions run_until(Instant until) {
    HubActions actions;
    for (int steps = 0; hub.next_deadline() <= until; ++steps) {
      EXPECT_LT(steps, 100'000);
      now = hub.next_deadline();
      hub.on_timer(now, actions);
    }
    now = until;
    return actions;
  }

  Hub hub;
  Instant now = Instant::zero() + 1_h;
  HubActions out;
};

// ---- protocol ------------------------------------------------------------------------

TEST(ResumeHub, ReconnectOnlyAfterTheCodesThatAllowIt) {
  for (uint16_t code : {1001, 1006, 1011, 1012, 1013}) EXPECT_TRUE(reconnect_allowed(code)) << code;
  for (uint16_t code : {1000, 1002, 1003, 1008, 1009, 4000}) EXPECT_FALSE(reconnect_allowed(code)) << code;
}

TEST(ResumeHub, FrameBytesAreHeaderPlusPayloadAndResetKindsHaveNames) {
  EXPECT_EQ(frame_bytes(Data{Message{1, 1, 100}}), 116u);
  EXPECT_EQ(frame_bytes(Data{Message{1, 1, 0}}), kDataHeaderBytes);
  EXPECT_EQ(frame_bytes(Reset{}), 40u);
  EXPECT_EQ(frame_bytes(Ping{3}), 8u);
  EXPECT_EQ(to_string(ResetKind::evicted), "evicted");
  EXPECT_EQ(to_string(ResetKind::epoch_changed), "epoch_changed");
  EXPECT_EQ(to_string(ResetKind::ahead_of_top), "ahead_of_top");
  EXPECT_EQ(to_string(ResetKind::over_limit), "over_limit");
}

// ---- publish and resume -------------------------------------------------------------

TEST(ResumeHub, PublishNumbersFromOneInTheEpochAndSendsToTheChannelsSubscribersOnly) {
  HubFixture f;
  EXPECT_TRUE(f.subscribe(1, "a", Position{7, 0}).empty());
  EXPECT_TRUE(f.subscribe(2, "b", Position{7, 0}).empty());
  const Message first = f.hub.publish("a", 10, f.now, f.out);
  EXPECT_EQ(first.epoch, 7u);
  EXPECT_EQ(first.seq, 1);
  EXPECT_EQ(first.bytes, 10u);
  f.publish_n("a", 2);
  EXPECT_EQ(data_seqs(f.out, 1), range(1, 3));
  EXPECT_TRUE(frames_to(f.out, 2).empty());
  EXPECT_EQ(f.hub.top("a"), 3);
  EXPECT_EQ(f.hub.top("b"), 0);
  EXPECT_EQ(f.hub.queued_bytes(1), 10u + 2 * 100u + 3 * kDataHeaderBytes);
  EXPECT_EQ(f.hub.queued_bytes(2), 0u);
  for (const HubFrame& frame : frames_to(f.out, 1)) EXPECT_EQ(std::get<Data>(frame).message.epoch, 7u);
}

TEST(ResumeHub, ResumeReplaysExactlyTheMessagesAfterThePosition) {
  HubFixture f;
  f.publish_n("a", 5);
  const HubActions out = f.subscribe(1, "a", Position{7, 2});
  EXPECT_TRUE(resets_to(out, 1).empty());
  EXPECT_EQ(data_seqs(out, 1), range(3, 5));
  EXPECT_TRUE(marks(out).empty());
  HubActions later;
  f.hub.publish("a", 1, f.now, later);
  EXPECT_EQ(data_seqs(later, 1), std::vector<int64_t>{6});
}

TEST(ResumeHub, ResumeAtTheTopSendsNothingAndNoReset) {
  HubFixture f;
  f.publish_n("a", 5);
  const HubActions out = f.subscribe(1, "a", Position{7, 5});
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(f.hub.subscriber_count(), 1u);
}

// The ring keeps seq 6..15: oldest = 6, top = 15.
TEST(ResumeHub, ResumeAfterOldestMinusOneReplaysTheWholeRingWithoutReset) {
  HubFixture f;
  f.publish_n("a", 15);
  ASSERT_EQ(f.hub.rings().channels.at("a").messages.front().seq, 6);
  const HubActions out = f.subscribe(1, "a", Position{7, 5});
  EXPECT_TRUE(resets_to(out, 1).empty());
  EXPECT_EQ(data_seqs(out, 1), range(6, 15));
  EXPECT_TRUE(marks(out).empty());
}

TEST(ResumeHub, ResumeAfterOldestMinusTwoResetsEvictedThenReplaysFromOldest) {
  HubFixture f;
  f.publish_n("a", 15);
  const HubActions out = f.subscribe(1, "a", Position{7, 4});
  const std::vector<HubFrame> frames = frames_to(out, 1);
  ASSERT_FALSE(frames.empty());
  const auto* reset = std::get_if<Reset>(&frames.front());
  ASSERT_NE(reset, nullptr) << "the Reset must come before any Data";
  EXPECT_EQ(reset->kind, ResetKind::evicted);
  EXPECT_EQ(reset->after, (Position{7, 4}));
  EXPECT_EQ(reset->resume, (Position{7, 5}));
  EXPECT_EQ(data_seqs(out, 1), range(6, 15));
  EXPECT_EQ(resets_to(out, 1).size(), 1u);
  EXPECT_TRUE(has_mark(out, "hub.reset_evicted"));
}

TEST(ResumeHub, ResumeAheadOfTheTopResetsToTheTopWithoutReplay) {
  HubFixture f;
  f.publish_n("a", 15);
  const HubActions out = f.subscribe(1, "a", Position{7, 16});
  const std::vector<Reset> resets = resets_to(out, 1);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].kind, ResetKind::ahead_of_top);
  EXPECT_EQ(resets[0].after, (Position{7, 16}));
  EXPECT_EQ(resets[0].resume, (Position{7, 15}));
  EXPECT_TRUE(data_seqs(out, 1).empty());
  EXPECT_TRUE(has_mark(out, "hub.reset_ahead_of_top"));
  HubActions later;
  f.hub.publish("a", 1, f.now, later);
  EXPECT_EQ(data_seqs(later, 1), std::vector<int64_t>{16});  // delivery resumes right after the reset's position
}

TEST(ResumeHub, ResumeFromAnotherEpochResetsEpochChangedAndReplaysTheRing) {
  HubFixture f;
  f.publish_n("a", 15);
  const HubActions out = f.subscribe(1, "a", Position{6, 40});
  const std::vector<Reset> resets = resets_to(out, 1);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].kind, ResetKind::epoch_changed);
  EXPECT_EQ(resets[0].after, (Position{6, 40}));
  EXPECT_EQ(resets[0].resume, (Position{7, 5}));
  EXPECT_EQ(data_seqs(out, 1), range(6, 15));
  EXPECT_TRUE(has_mark(out, "hub.reset_epoch_changed"));
}

TEST(ResumeHub, EpochZeroStartsFromOneWithoutResetWhileNothingWasEvicted) {
  HubFixture f{small_config(), 1};  // the hub's first epoch
  f.publish_n("a", 10);  // the ring is full, nothing evicted yet
  const HubActions out = f.subscribe(1, "a", Position{0, 0});
  EXPECT_TRUE(resets_to(out, 1).empty());
  EXPECT_EQ(data_seqs(out, 1), range(1, 10));
  EXPECT_TRUE(marks(out).empty());
  EXPECT_TRUE(f.subscribe(2, "never-published", Position{0, 0}).empty());
}

TEST(ResumeHub, EpochZeroInALaterHubEpochResetsEvenWithNothingEvicted) {
  HubFixture f;  // epoch 7: whatever epochs 1..6 published is gone
  f.publish_n("a", 3);
  const HubActions out = f.subscribe(1, "a", Position{0, 0});
  const std::vector<Reset> resets = resets_to(out, 1);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].kind, ResetKind::epoch_changed);
  EXPECT_EQ(resets[0].resume, (Position{7, 0}));
  EXPECT_EQ(data_seqs(out, 1), range(1, 3));
}

TEST(ResumeHub, EpochZeroAfterAnEvictionResetsEpochChanged) {
  HubFixture f{small_config(), 1};
  f.publish_n("a", 11);  // seq 1 evicted
  const HubActions out = f.subscribe(1, "a", Position{0, 0});
  const std::vector<Reset> resets = resets_to(out, 1);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].kind, ResetKind::epoch_changed);
  EXPECT_EQ(resets[0].resume, (Position{1, 1}));
  EXPECT_EQ(data_seqs(out, 1), range(2, 11));
}

TEST(ResumeHub, LongReplayResetsOverLimitAndReplaysOnlyTheLastReplayMessagesMax) {
  HubConfig config = small_config();
  config.replay_messages_max = 4;
  HubFixture f{config};
  f.publish_n("a", 10);
  const HubActions out = f.subscribe(1, "a", Position{7, 5});
  const std::vector<Reset> resets = resets_to(out, 1);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].kind, ResetKind::over_limit);
  EXPECT_EQ(resets[0].after, (Position{7, 5}));
  EXPECT_EQ(resets[0].resume, (Position{7, 6}));
  EXPECT_EQ(data_seqs(out, 1), range(7, 10));
  EXPECT_TRUE(has_mark(out, "hub.reset_over_limit"));
  // Exactly replay_messages_max behind: replayed in full, no reset.
  const HubActions exact = f.subscribe(2, "a", Position{7, 6});
  EXPECT_TRUE(resets_to(exact, 2).empty());
  EXPECT_EQ(data_seqs(exact, 2), range(7, 10));
}

TEST(ResumeHub, RingIsBoundedByBytesToo) {
  HubConfig config = small_config();
  config.ring_bytes_max = 1000;
  HubFixture f{config};
  f.publish_n("a", 5, 300);  // only 3 fit in 1000 bytes
  const ChannelRing& ring = f.hub.rings().channels.at("a");
  EXPECT_EQ(ring.messages.size(), 3u);
  EXPECT_EQ(ring.bytes, 900u);
  EXPECT_EQ(ring.messages.front().seq, 3);
  f.hub.publish("a", 5000, f.now, f.out);  // larger than the ring: evicts itself
  EXPECT_TRUE(f.hub.rings().channels.at("a").messages.empty());
  EXPECT_EQ(f.hub.top("a"), 6);
  const HubActions out = f.subscribe(1, "a", Position{7, 5});
  ASSERT_EQ(resets_to(out, 1).size(), 1u);
  EXPECT_EQ(resets_to(out, 1)[0].kind, ResetKind::evicted);
  EXPECT_EQ(resets_to(out, 1)[0].resume, (Position{7, 6}));
  EXPECT_TRUE(f.subscribe(2, "a", Position{7, 6}).empty());
}

TEST(ResumeHub, BrokenVariantReallySkipsTheEvictedReset) {
  HubConfig config = small_config();
  config.bug_skip_evicted_without_reset = true;
  HubFixture f{config};
  f.publish_n("a", 15);
  const HubActions out = f.subscribe(1, "a", Position{7, 4});
  EXPECT_TRUE(resets_to(out, 1).empty()) << "the broken variant must not send the Reset";
  EXPECT_EQ(data_seqs(out, 1), range(6, 15));  // seq 5 silently lost: the hole checkers must catch
  EXPECT_TRUE(has_mark(out, "hub.bug_skip_evicted_without_reset"));
  EXPECT_FALSE(has_mark(out, "hub.reset_evicted"));
}

// ---- bounded queues ------------------------------------------------------------------

TEST(ResumeHub, QueueOverflowClosesWith1013AndNeverSendsAHole) {
  HubConfig config = small_config();
  config.ring_bytes_max = 16ull << 20;
  config.subscriber_queue_bytes_max = 1ull << 20;
  HubFixture f{config};
  f.subscribe(1, "a", Position{7, 0});  // never reads
  f.subscribe(2, "a", Position{7, 0});  // reads everything at once
  constexpr uint32_t kMessageBytes = 64 << 10;
  constexpr int kMessages = 1024;  // 64 MB in all
  HubActions all;
  for (int i = 0; i < kMessages; ++i) {
    HubActions out;
    f.hub.publish("a", kMessageBytes, f.now, out);
    EXPECT_LE(f.hub.queued_bytes(1), config.subscriber_queue_bytes_max);
    f.hub.on_pong(2, Pong{0, kMessageBytes + kDataHeaderBytes}, f.now, out);
    EXPECT_EQ(f.hub.queued_bytes(2), 0u);
    all.insert(all.end(), out.begin(), out.end());
  }
  const std::vector<HubClose> closed = closes(all);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].subscriber, 1u);
  EXPECT_EQ(closed[0].code, close_code::try_again_later);
  EXPECT_STREQ(closed[0].reason, "queue full");
  EXPECT_TRUE(has_mark(all, "hub.close_queue_full"));
  // Subscriber 1 got a contiguous prefix that fits the bound, then nothing.
  const int64_t fit = (1 << 20) / (kMessageBytes + kDataHeaderBytes);
  EXPECT_EQ(data_seqs(all, 1), range(1, fit));
  EXPECT_EQ(data_seqs(all, 2), range(1, kMessages));
  EXPECT_EQ(f.hub.subscriber_count(), 1u);
  EXPECT_EQ(f.hub.queued_bytes(1), 0u);
}

TEST(ResumeHub, OneMessageLargerThanTheQueueClosesWithoutSendingIt) {
  HubConfig config = small_config();
  config.ring_bytes_max = 128ull << 20;
  config.subscriber_queue_bytes_max = 1ull << 20;
  HubFixture f{config};
  f.subscribe(1, "a", Position{7, 0});
  HubActions out;
  f.hub.publish("a", 64u << 20, f.now, out);
  EXPECT_TRUE(data_seqs(out, 1).empty());
  ASSERT_EQ(closes(out).size(), 1u);
  EXPECT_EQ(closes(out)[0].code, close_code::try_again_later);
  EXPECT_EQ(f.hub.subscriber_count(), 0u);
}

TEST(ResumeHub, ReplayGoesThroughTheSameQueueAndOverflowsTheSameWay) {
  HubConfig config = small_config();
  config.subscriber_queue_bytes_max = 3 * (100 + kDataHeaderBytes);  // exactly three frames
  HubFixture f{config};
  f.publish_n("a", 8);
  const HubActions out = f.subscribe(1, "a", Position{7, 0});
  EXPECT_EQ(data_seqs(out, 1), range(1, 3));
  ASSERT_EQ(closes(out).size(), 1u);
  EXPECT_EQ(closes(out)[0].code, close_code::try_again_later);
  EXPECT_EQ(f.hub.subscriber_count(), 0u);
  // At exactly the bound the queue is full but open.
  const HubActions fits = f.subscribe(2, "a", Position{7, 5});
  EXPECT_EQ(data_seqs(fits, 2), range(6, 8));
  EXPECT_TRUE(closes(fits).empty());
  EXPECT_EQ(f.hub.queued_bytes(2), config.subscriber_queue_bytes_max);
}

TEST(ResumeHub, PongsConsumeFromTheFrontIncludingPartialFrames) {
  HubFixture f;
  f.subscribe(1, "a", Position{7, 0});
  f.publish_n("a", 2);  // two frames of 116 bytes
  HubActions out;
  f.hub.on_pong(1, Pong{0, 50}, f.now, out);
  EXPECT_EQ(f.hub.queued_bytes(1), 182u);
  f.hub.on_pong(1, Pong{0, 66}, f.now, out);
  EXPECT_EQ(f.hub.queued_bytes(1), 116u);
  f.hub.on_pong(1, Pong{0, 116}, f.now, out);
  EXPECT_EQ(f.hub.queued_bytes(1), 0u);
  EXPECT_TRUE(out.empty());
  f.publish_n("a", 1);
  f.hub.on_pong(1, Pong{0, 1000}, f.now, out);  // more than was ever sent: clamped
  EXPECT_EQ(f.hub.queued_bytes(1), 0u);
  EXPECT_TRUE(has_mark(out, "hub.pong_overconsumed"));
}

// ---- pings and deadlines -------------------------------------------------------------

TEST(ResumeHub, PongTimeoutCutsASilentPeerWithinPingIntervalPlusPongTimeout) {
  HubFixture f;
  const Instant subscribed = f.now;
  f.subscribe(1, "a", Position{7, 0});
  EXPECT_EQ(f.hub.next_deadline(), subscribed + 2_s);  // the first ping
  const Instant bound = subscribed + f.hub.config().ping_interval + f.hub.config().pong_timeout;
  HubActions before = f.run_until(bound - 1_ns);
  EXPECT_TRUE(closes(before).empty());
  EXPECT_EQ(pings_to(before, 1).size(), 2u);  // at +2 s and +4 s
  HubActions at = f.run_until(bound);
  ASSERT_EQ(closes(at).size(), 1u);
  EXPECT_EQ(closes(at)[0].code, close_code::abnormal);
  EXPECT_STREQ(closes(at)[0].reason, "pong timeout");
  EXPECT_TRUE(has_mark(at, "hub.close_pong_timeout"));
  EXPECT_EQ(f.hub.subscriber_count(), 0u);
  EXPECT_EQ(f.hub.next_deadline(), Instant::max());
}

// A round trip longer than the ping interval: the answer to one ping arrives
// after the next was sent. The later ping is still outstanding, so the peer
// that dies after that answer is cut a pong timeout after the later ping was
// sent, not a ping interval further on (found by a swarm with 400 ms + 600 ms
// of latency: silent peers cut 0.1-1.3 s past the dead-peer bound).
TEST(ResumeHub, AnAnswerToAnOlderPingLeavesTheLaterPingTimingOut) {
  HubFixture f;
  const Instant subscribed = f.now;
  f.subscribe(1, "a", Position{7, 0});
  HubActions out = f.run_until(subscribed + 4_s);
  const std::vector<uint64_t> pings = pings_to(out, 1);
  ASSERT_EQ(pings.size(), 2u);  // at +2 s and +4 s
  out = f.run_until(subscribed + 4500_ms);
  f.hub.on_pong(1, Pong{pings[0], 0}, f.now, out);  // the first ping's answer, 2.5 s late; then silence
  EXPECT_EQ(f.hub.next_deadline(), subscribed + 6_s);  // the next ping; the second times out at +8 s
  out = f.run_until(subscribed + 8_s - 1_ns);
  EXPECT_TRUE(closes(out).empty());
  out = f.run_until(subscribed + 8_s);
  ASSERT_EQ(closes(out).size(), 1u);
  EXPECT_STREQ(closes(out)[0].reason, "pong timeout");
}

// Pongs answer their ping and every earlier one: the answer to the latest
// clears them all, whatever was answered before.
TEST(ResumeHub, AnAnswerToTheLatestPingAnswersEveryEarlierOne) {
  HubFixture f;
  const Instant subscribed = f.now;
  f.subscribe(1, "a", Position{7, 0});
  HubActions out = f.run_until(subscribed + 6_s - 1_ns);
  const std::vector<uint64_t> pings = pings_to(out, 1);
  ASSERT_EQ(pings.size(), 2u);  // at +2 and +4 s: the first times out at +6 s
  f.hub.on_pong(1, Pong{pings[1], 0}, f.now, out);
  out = f.run_until(subscribed + 10_s - 1_ns);  // the +6 s ping times out at +10 s
  EXPECT_TRUE(closes(out).empty());
  EXPECT_EQ(f.hub.subscriber_count(), 1u);
}

// A peer that answers every ping (late, but within the timeout) and reads what
// it gets is never cut, whatever the pings and data in between.
TEST(ResumeHub, APeerAnsweringWithinThePongTimeoutStaysOpen) {
  for (const Duration delay : {Duration::zero(), 1_s, 3900_ms}) {
    HubFixture f;
    f.subscribe(1, "a", Position{7, 0});
    std::vector<std::pair<Instant, Pong>> answers;  // due time, pong
    uint64_t unread = 0;
    const Instant end = f.now + 5_min;
    while (f.now < end) {
      Instant next = std::min(f.hub.next_deadline(), f.now + 700_ms);  // publish every 700 ms
      if (!answers.empty()) next = std::min(next, answers.front().first);
      HubActions out = f.run_until(next);
      for (const uint64_t ping : pings_to(out, 1)) answers.emplace_back(f.now + delay, Pong{ping, 0});
      while (!answers.empty() && answers.front().first <= f.now) {
        Pong pong = answers.front().second;
        pong.consumed_bytes = std::exchange(unread, 0);
        f.hub.on_pong(1, pong, f.now, out);
        answers.erase(answers.begin());
      }
      f.hub.publish("a", 100, f.now, out);
      unread += 100 + kDataHeaderBytes;
      ASSERT_TRUE(closes(out).empty()) << "cut at " << f.now.ns() << " with pong delay " << delay.ns();
    }
    EXPECT_EQ(f.hub.subscriber_count(), 1u);
  }
}

TEST(ResumeHub, WindowUpdatesAloneDoNotProveThePeerAlive) {
  HubFixture f;
  const Instant subscribed = f.now;
  f.subscribe(1, "a", Position{7, 0});
  HubActions out;
  for (int i = 0; i < 12; ++i) {
    out = f.run_until(f.now + 500_ms);
    f.hub.on_pong(1, Pong{0, 0}, f.now, out);
    if (!closes(out).empty()) break;
  }
  ASSERT_EQ(closes(out).size(), 1u);
  EXPECT_STREQ(closes(out)[0].reason, "pong timeout");
  EXPECT_EQ(f.now, subscribed + 6_s);
}

// A pong must answer a ping this subscriber has outstanding: an id never
// sent, another subscriber's ping, or an answer repeated is not the protocol
// (a peer guessing ids could keep itself alive while reading nothing).
TEST(ResumeHub, APongForAPingNotOutstandingClosesWith1002) {
  enum class Lie { never_sent, another_subscribers, answered_twice };
  for (const Lie lie : {Lie::never_sent, Lie::another_subscribers, Lie::answered_twice}) {
    HubFixture f;
    const Instant subscribed = f.now;
    f.subscribe(1, "a", Position{7, 0});
    f.subscribe(2, "a", Position{7, 0});
    HubActions out = f.run_until(subscribed + 2_s);
    const std::vector<uint64_t> mine = pings_to(out, 1), theirs = pings_to(out, 2);
    ASSERT_EQ(mine.size(), 1u);
    ASSERT_EQ(theirs.size(), 1u);
    out.clear();
    uint64_t claimed = 0;
    switch (lie) {
      case Lie::never_sent: claimed = std::max(mine[0], theirs[0]) + 1000; break;
      case Lie::another_subscribers: claimed = theirs[0]; break;
      case Lie::answered_twice:
        f.hub.on_pong(1, Pong{mine[0], 0}, f.now, out);
        ASSERT_TRUE(closes(out).empty());
        claimed = mine[0];
        break;
    }
    f.hub.on_pong(1, Pong{claimed, 0}, f.now, out);
    ASSERT_EQ(closes(out).size(), 1u) << static_cast<int>(lie);
    EXPECT_EQ(closes(out)[0].subscriber, 1u);
    EXPECT_EQ(closes(out)[0].code, close_code::protocol_error);
    EXPECT_STREQ(closes(out)[0].reason, "pong for a ping not outstanding");
    EXPECT_EQ(f.hub.subscriber_count(), 1u);  // the other subscriber stays
  }
}

TEST(ResumeHub, WriteDeadlineClosesAPeerThatAnswersPingsButReadsNothing) {
  HubFixture f;
  f.subscribe(1, "a", Position{7, 0});
  f.now += 500_ms;
  const Instant sent = f.now;
  f.publish_n("a", 1);
  HubActions out;
  while (closes(out).empty() && f.now < sent + 1_min) {
    out = f.run_until(f.hub.next_deadline());
    for (const uint64_t ping : pings_to(out, 1)) f.hub.on_pong(1, Pong{ping, 0}, f.now, out);
  }
  ASSERT_EQ(closes(out).size(), 1u);
  EXPECT_EQ(closes(out)[0].code, close_code::abnormal);
  EXPECT_STREQ(closes(out)[0].reason, "write deadline");
  EXPECT_TRUE(has_mark(out, "hub.close_write_deadline"));
  EXPECT_EQ(f.now, sent + f.hub.config().write_deadline);
}

TEST(ResumeHub, PingsAloneNeverTripTheWriteDeadline) {
  HubFixture f;
  f.subscribe(1, "a", Position{7, 0});
  HubActions all;
  const Instant end = f.now + 2_min;
  while (f.now < end) {
    HubActions out = f.run_until(f.hub.next_deadline());
    for (const uint64_t ping : pings_to(out, 1)) f.hub.on_pong(1, Pong{ping, 0}, f.now, out);
    all.insert(all.end(), out.begin(), out.end());
  }
  EXPECT_TRUE(closes(all).empty());
  EXPECT_EQ(f.hub.queued_bytes(1), 0u);
  EXPECT_GE(pings_to(all, 1).size(), 59u);
}

TEST(ResumeHub, NextDeadlineFollowsTheEarliestSubscriberAndDropsStaleEntries) {
  HubFixture f;
  const Instant start = f.now;
  f.subscribe(1, "a", Position{7, 0});
  f.now += 1_s;
  f.subscribe(2, "a", Position{7, 0});
  EXPECT_EQ(f.hub.next_deadline(), start + 2_s);
  f.hub.on_disconnect(1, f.now);
  EXPECT_EQ(f.hub.next_deadline(), start + 3_s);  // subscriber 1's wakeup is stale
  HubActions out = f.run_until(start + 3_s);
  ASSERT_EQ(pings_to(out, 2).size(), 1u);
  EXPECT_TRUE(frames_to(out, 1).empty());
  EXPECT_EQ(f.hub.next_deadline(), start + 5_s);  // next ping; the pong timeout is at +7 s
  f.hub.on_pong(2, Pong{pings_to(out, 2)[0], 0}, f.now, out);
  EXPECT_EQ(f.hub.next_deadline(), start + 5_s);
}

// ---- closing --------------------------------------------------------------------------

TEST(ResumeHub, CloseAllClosesEveryoneWithTheCodeAndEmptiesTheCount) {
  HubFixture f;
  for (SubscriberId id = 1; id <= 3; ++id) f.subscribe(id, id == 3 ? "b" : "a", Position{7, 0});
  f.publish_n("a", 2);
  HubActions out;
  f.hub.close_all(close_code::service_restart, "service restart", f.now, out);
  const std::vector<HubClose> closed = closes(out);
  ASSERT_EQ(closed.size(), 3u);
  for (const HubClose& close : closed) {
    EXPECT_EQ(close.code, close_code::service_restart);
    EXPECT_STREQ(close.reason, "service restart");
  }
  EXPECT_EQ(f.hub.subscriber_count(), 0u);
  EXPECT_EQ(f.hub.queued_bytes(1), 0u);
  EXPECT_EQ(f.hub.next_deadline(), Instant::max());
  HubActions later;
  f.hub.publish("a", 1, f.now, later);
  EXPECT_TRUE(later.empty());
}

TEST(ResumeHub, DisconnectLeavesSilentlyAndAtOnce) {
  HubFixture f;
  f.subscribe(1, "a", Position{7, 0});
  f.subscribe(2, "a", Position{7, 0});
  f.hub.on_disconnect(1, f.now);
  f.hub.on_disconnect(1, f.now);  // twice: harmless
  EXPECT_EQ(f.hub.subscriber_count(), 1u);
  HubActions out;
  f.hub.publish("a", 1, f.now, out);
  f.hub.on_pong(1, Pong{1, 100}, f.now, out);  // a late pong from the gone peer
  HubActions timers = f.run_until(f.now + 3_s);
  EXPECT_TRUE(frames_to(out, 1).empty());
  EXPECT_TRUE(frames_to(timers, 1).empty());
  EXPECT_TRUE(closes(out).empty());
  EXPECT_TRUE(closes(timers).empty());
  EXPECT_EQ(data_seqs(out, 2), std::vector<int64_t>{1});
}

// ---- restarts --------------------------------------------------------------------------

TEST(ResumeHub, RestartWithTheSharedRingKeepsTheEpochAndTheRing) {
  HubFixture before{small_config(), 3};
  before.publish_n("a", 12);
  before.subscribe(1, "a", Position{3, 0});
  HubActions closed;
  before.hub.close_all(close_code::service_restart, "service restart", before.now, closed);

  Hub after{small_config(), before.hub.rings()};
  EXPECT_EQ(after.epoch(), 3u);
  EXPECT_EQ(after.top("a"), 12);
  EXPECT_EQ(after.subscriber_count(), 0u);
  HubActions out;
  after.subscribe(1, Subscribe{"a", Position{3, 8}}, before.now, out);
  EXPECT_TRUE(resets_to(out, 1).empty());
  EXPECT_EQ(data_seqs(out, 1), range(9, 12));
  EXPECT_EQ(after.publish("a", 1, before.now, out).seq, 13);
  EXPECT_EQ(data_seqs(out, 1), range(9, 13));
}

TEST(ResumeHub, RestartWithoutTheRingIsANewEpochAndResetsEveryResume) {
  HubFixture fresh{small_config(), 4};
  const HubActions out = fresh.subscribe(1, "a", Position{3, 8});
  const std::vector<Reset> resets = resets_to(out, 1);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].kind, ResetKind::epoch_changed);
  EXPECT_EQ(resets[0].resume, (Position{4, 0}));
  EXPECT_TRUE(data_seqs(out, 1).empty());
  HubActions later;
  fresh.hub.publish("a", 1, fresh.now, later);
  EXPECT_EQ(data_seqs(later, 1), std::vector<int64_t>{1});
}

TEST(ResumeHub, ARingKeptUnderLargerBoundsIsTrimmedOnRestart) {
  HubConfig large = small_config();
  large.ring_messages_max = 100;
  large.replay_messages_max = 100;
  HubFixture before{large, 5};
  before.publish_n("a", 30);
  Hub after{small_config(), before.hub.rings()};
  EXPECT_EQ(after.rings().channels.at("a").messages.size(), 10u);
  EXPECT_EQ(after.rings().channels.at("a").messages.front().seq, 21);
  EXPECT_EQ(after.top("a"), 30);
}

// ---- configuration -------------------------------------------------------------------

TEST(ResumeHub, ValidateNamesTheFieldAndWhatIsAllowed) {
  EXPECT_EQ(HubConfig{}.validate(), "");
  EXPECT_EQ(small_config().validate(), "");
  auto with = [](auto change) {
    HubConfig config = small_config();
    change(config);
    return config.validate();
  };
  EXPECT_EQ(with([](HubConfig& c) { c.ring_messages_max = 0; }), "hub.ring_messages_max (0) must be at least 1");
  EXPECT_EQ(with([](HubConfig& c) { c.ring_bytes_max = 0; }), "hub.ring_bytes_max (0) must be at least 1");
  EXPECT_EQ(with([](HubConfig& c) { c.subscriber_queue_bytes_max = 0; }),
            "hub.subscriber_queue_bytes_max (0) must be at least 1");
  EXPECT_EQ(with([](HubConfig& c) { c.replay_messages_max = 0; }),
            "hub.replay_messages_max (0) must be between 1 and hub.ring_messages_max (10)");
  EXPECT_EQ(with([](HubConfig& c) { c.replay_messages_max = 11; }),
            "hub.replay_messages_max (11) must be between 1 and hub.ring_messages_max (10)");
  EXPECT_EQ(with([](HubConfig& c) { c.ping_interval = 0_s; }), "hub.ping_interval (0s) must be positive");
  EXPECT_EQ(with([](HubConfig& c) { c.pong_timeout = -1_s; }), "hub.pong_timeout (-1s) must be positive");
  EXPECT_EQ(with([](HubConfig& c) { c.write_deadline = 2_s; }),
            "hub.write_deadline (2s) must be longer than hub.ping_interval (2s)");
}

}  // namespace
}  // namespace leaseproof::resume::test
