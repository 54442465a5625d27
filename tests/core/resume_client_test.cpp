// The resume client (core/resume/client.hpp) driven frame by frame: what it
// records, what it resumes after, how long it waits to reconnect, and the
// deliberately broken variant that the exactly-once checker must catch.

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "base/assert.hpp"
#include "core/resume/client.hpp"

namespace leaseproof {
// Readable failure messages (found by argument-dependent lookup).
inline void PrintTo(Duration d, std::ostream* os) { *os << format_duration(d); }
inline void PrintTo(Instant t, std::ostream* os) { *os << fmt::format("{}", t); }
namespace resume {
inline void PrintTo(const Position& p, std::ostream* os) { *os << "(" << p.epoch << ", " << p.seq << ")"; }
namespace {

using namespace literals;

// Scripted randomness: each draw asks `pick` for a value in [0, bound).
class StubRandom : public RandomSource {
 public:
  explicit StubRandom(std::function<uint64_t(uint64_t)> pick = [](uint64_t) { return 0; }) : pick_(std::move(pick)) {}
  uint64_t below(uint64_t bound) override {
    LP_ASSERT_GT(bound, 0u);
    bounds.push_back(bound);
    const uint64_t value = pick_(bound);
    LP_ASSERT_LT(value, bound);
    return value;
  }
  void set(std::function<uint64_t(uint64_t)> pick) { pick_ = std::move(pick); }
  std::vector<uint64_t> bounds;  // every bound asked for, in order

 private:
  std::function<uint64_t(uint64_t)> pick_;
};

uint64_t lowest(uint64_t) { return 0; }
uint64_t highest(uint64_t bound) { return bound - 1; }

template <typename T>
std::vector<T> all_of(const ClientActions& actions) {
  std::vector<T> found;
  for (const ClientAction& action : actions) {
    if (const auto* a = std::get_if<T>(&action)) found.push_back(*a);
  }
  return found;
}

int marks(const ClientActions& actions, std::string_view name) {
  int count = 0;
  for (const ClientMark& mark : all_of<ClientMark>(actions)) count += std::string_view{mark.name} == name ? 1 : 0;
  return count;
}

HubFrame data(uint64_t epoch, int64_t seq, uint32_t bytes = 100) { return Data{Message{epoch, seq, bytes}}; }

std::vector<int64_t> seqs(const Record& record) {
  std::vector<int64_t> out;
  for (const Message& m : record.messages) out.push_back(m.seq);
  return out;
}

// One client and its clock; every call's actions are kept for inspection.
class ClientHarness {
 public:
  explicit ClientHarness(ClientConfig config = {}, Position recorded = {}, StubRandom* random = nullptr)
      : random_(random != nullptr ? random : &own_random_), client_(std::move(config), "c1", recorded, *random_) {}

  ClientActions start() { return run([&](ClientActions& out) { client_.start(now_, out); }); }
  ClientActions frame(const HubFrame& f) { return run([&](ClientActions& out) { client_.on_frame(f, now_, out); }); }
  ClientActions closed(uint16_t code) { return run([&](ClientActions& out) { client_.on_closed(code, now_, out); }); }
  ClientActions recorded(uint64_t batch) {
    return run([&](ClientActions& out) { client_.on_recorded(batch, now_, out); });
  }
  ClientActions failed(uint64_t batch) {
    return run([&](ClientActions& out) { client_.on_record_failed(batch, now_, out); });
  }
  // Advances to the client's next deadline (if within `limit`) and fires it.
  ClientActions fire_next(Duration limit = 1_h) {
    const Instant due = client_.next_deadline();
    EXPECT_NE(due, Instant::max());
    if (due == Instant::max() || due > now_ + limit) return {};
    now_ = std::max(now_, due);
    return run([&](ClientActions& out) { client_.on_timer(now_, out); });
  }
  void advance(Duration d) { now_ += d; }
  ClientActions tick() { return run([&](ClientActions& out) { client_.on_timer(now_, out); }); }

  ResumeClient& client() { return client_; }
  Instant now() const { return now_; }

 private:
  template <typename F>
  ClientActions run(F&& f) {
    ClientActions out;
    f(out);
    return out;
  }

  StubRandom own_random_;
  StubRandom* random_;
  ResumeClient client_;
  Instant now_ = Instant::from_ms(1'000);
};

Record only_record(const ClientActions& actions) {
  const auto records = all_of<Record>(actions);
  EXPECT_EQ(records.size(), 1u);
  return records.empty() ? Record{} : records.front();
}

// ---- configuration -------------------------------------------------------------------

std::string invalid(void (*change)(ClientConfig&)) {
  ClientConfig config;
  change(config);
  return config.validate();
}

TEST(ResumeClientConfig, DefaultsAreValidAndEachRejectionNamesTheField) {
  EXPECT_EQ(ClientConfig{}.validate(), "");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.reconnect_base = 0_s; }), "resume.reconnect_base (0s) must be positive");
  EXPECT_NE(invalid([](ClientConfig& c) { c.reconnect_cap = 100_ms; }).find("resume.reconnect_cap (100ms)"),
            std::string::npos);
  EXPECT_NE(invalid([](ClientConfig& c) { c.reconnect_base_by_code[1013] = 0_s; })
                .find("resume.reconnect_base_by_code[1013]"),
            std::string::npos);
  EXPECT_EQ(invalid([](ClientConfig& c) { c.record_batch_max = 0; }), "resume.record_batch_max (0) must be 1..99");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.record_batch_max = 100; }), "resume.record_batch_max (100) must be 1..99");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.record_batch_max = 99; }), "");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.record_linger = -1_ms; }), "resume.record_linger (-1ms) must be 0..30s");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.record_linger = 31_s; }), "resume.record_linger (31s) must be 0..30s");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.record_linger = 30_s; }), "");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.record_retry_base = 0_s; }),
            "resume.record_retry_base (0s) must be positive");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.record_retry_cap = 100_ms; }),
            "resume.record_retry_cap (100ms) must be at least resume.record_retry_base (200ms)");
  EXPECT_EQ(invalid([](ClientConfig& c) { c.window_update_bytes = 0; }), "resume.window_update_bytes must be positive");
  EXPECT_NE(invalid([](ClientConfig& c) { c.hub_silence_timeout = 0_s; }).find("resume.hub_silence_timeout"),
            std::string::npos);
}

// ---- cursor and recording ------------------------------------------------------------

TEST(ResumeClient, StartSubscribesAfterTheRecordedCheckpoint) {
  ClientHarness h{{}, Position{3, 41}};
  const auto out = h.start();
  const auto connects = all_of<Connect>(out);
  ASSERT_EQ(connects.size(), 1u);
  EXPECT_EQ(connects[0].subscribe.channel, "c1");
  EXPECT_EQ(connects[0].subscribe.after, (Position{3, 41}));
  EXPECT_TRUE(h.client().connected());
  EXPECT_EQ(h.client().cursor(), (Position{3, 41}));
}

TEST(ResumeClient, TheCursorOnlyAdvancesWhenABatchIsRecorded) {
  ClientConfig config;
  config.record_batch_max = 3;
  ClientHarness h{config};
  h.start();
  const Record first = only_record(h.frame(data(1, 1)));  // nothing in flight: recorded at once
  EXPECT_EQ(seqs(first), (std::vector<int64_t>{1}));
  EXPECT_EQ(first.previous, (Position{0, 0}));
  EXPECT_EQ(first.through, (Position{1, 1}));
  for (int64_t seq = 2; seq <= 6; ++seq) EXPECT_TRUE(all_of<Record>(h.frame(data(1, seq))).empty());
  EXPECT_EQ(h.client().cursor(), (Position{0, 0}));  // received 6, recorded nothing
  const Record second = only_record(h.recorded(first.batch));
  EXPECT_EQ(h.client().cursor(), (Position{1, 1}));
  EXPECT_EQ(seqs(second), (std::vector<int64_t>{2, 3, 4}));  // at most record_batch_max
  EXPECT_EQ(second.previous, (Position{1, 1}));
  EXPECT_EQ(second.through, (Position{1, 4}));
  EXPECT_NE(second.batch, first.batch);
  const Record third = only_record(h.recorded(second.batch));
  EXPECT_EQ(h.client().cursor(), (Position{1, 4}));
  EXPECT_EQ(seqs(third), (std::vector<int64_t>{5, 6}));
  EXPECT_TRUE(all_of<Record>(h.recorded(third.batch)).empty());
  EXPECT_EQ(h.client().cursor(), (Position{1, 6}));
}

ClientConfig lingering(uint32_t record_batch_max, Duration record_linger) {
  ClientConfig config;
  config.record_batch_max = record_batch_max;
  config.record_linger = record_linger;
  return config;
}

TEST(ResumeClient, APartialBatchLingersUntilItsOldestMessageHasWaitedAndAFullOneGoesAtOnce) {
  const ClientConfig config = lingering(3, 2_s);
  ClientHarness h{config};
  h.start();
  EXPECT_TRUE(all_of<Record>(h.frame(data(1, 1))).empty());  // nothing in flight, yet it waits
  const Instant first_arrival = h.now();
  h.advance(500_ms);
  EXPECT_TRUE(all_of<Record>(h.frame(data(1, 2))).empty());
  EXPECT_EQ(h.client().next_deadline(), first_arrival + 2_s);  // the oldest message's linger, not the newest's
  const ClientActions flushed = h.fire_next();
  EXPECT_EQ(h.now(), first_arrival + 2_s);
  EXPECT_EQ(marks(flushed, "client.linger_flush"), 1);
  const Record lingered = only_record(flushed);
  EXPECT_EQ(seqs(lingered), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(lingered.previous, (Position{0, 0}));
  // While it is in flight three more arrive: a full batch, sent as soon as
  // the one in flight is recorded, without lingering.
  for (int64_t seq = 3; seq <= 5; ++seq) EXPECT_TRUE(all_of<Record>(h.frame(data(1, seq))).empty());
  const ClientActions after = h.recorded(lingered.batch);
  EXPECT_EQ(marks(after, "client.linger_flush"), 0);
  const Record full = only_record(after);
  EXPECT_EQ(seqs(full), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(h.client().cursor(), (Position{1, 2}));
  EXPECT_TRUE(all_of<Record>(h.recorded(full.batch)).empty());
  EXPECT_EQ(h.client().cursor(), (Position{1, 5}));
  EXPECT_EQ(h.client().next_deadline(), h.now() + config.hub_silence_timeout);  // nothing buffered: no linger deadline
}

TEST(ResumeClient, AMessageThatWaitedItsLingerWhileABatchWasInFlightGoesWhenThatBatchIsRecorded) {
  const ClientConfig config = lingering(10, 1_s);
  ClientHarness h{config};
  h.start();
  h.frame(data(1, 1));
  const Record first = only_record(h.fire_next());
  h.frame(data(1, 2));
  h.advance(3_s);  // the record write is slow: message 2 has waited past its linger
  const Record second = only_record(h.recorded(first.batch));
  EXPECT_EQ(seqs(second), (std::vector<int64_t>{2}));
}

TEST(ResumeClient, AReconnectDropsTheLingeringBufferAndResumesAfterTheCursor) {
  ClientConfig config;
  config.record_linger = 5_s;
  ClientHarness h{config, Position{1, 7}};
  h.start();
  h.frame(data(1, 8));
  h.frame(data(1, 9));
  h.closed(close_code::going_away);
  const auto connects = all_of<Connect>(h.fire_next());  // the reconnect comes before the linger's end
  ASSERT_EQ(connects.size(), 1u);
  EXPECT_EQ(connects[0].subscribe.after, (Position{1, 7}));  // 8 and 9 were never recorded
  EXPECT_TRUE(all_of<Record>(h.frame(data(1, 8))).empty());  // replayed, buffered again, not a duplicate
  const Record record = only_record(h.fire_next());
  EXPECT_EQ(seqs(record), (std::vector<int64_t>{8}));
}

TEST(ResumeClient, DuplicatesAtOrBelowTheCursorOrAlreadyHandedAreDropped) {
  ClientHarness h{{}, Position{2, 10}};
  h.start();
  for (int64_t seq : {5, 10}) {
    const auto out = h.frame(data(2, seq));
    EXPECT_EQ(marks(out, "client.duplicate_dropped"), 1) << seq;
    EXPECT_TRUE(all_of<Record>(out).empty());
  }
  EXPECT_EQ(marks(h.frame(data(1, 99)), "client.duplicate_dropped"), 1);  // an older epoch
  const Record batch = only_record(h.frame(data(2, 11)));
  EXPECT_EQ(marks(h.frame(data(2, 11)), "client.duplicate_dropped"), 1);  // handed, not yet recorded
  h.frame(data(2, 12));
  EXPECT_EQ(marks(h.frame(data(2, 12)), "client.duplicate_dropped"), 1);  // buffered
  const Record next = only_record(h.recorded(batch.batch));
  EXPECT_EQ(seqs(next), (std::vector<int64_t>{12}));  // each once
}

TEST(ResumeClient, AFailedRecordIsRetriedUnchangedAfterTheBackoff) {
  StubRandom random{highest};  // the longest delay full jitter allows: the ceiling
  ClientHarness h{{}, {}, &random};
  h.start();
  const Record batch = only_record(h.frame(data(1, 1)));
  h.frame(data(1, 2));
  const auto failed = h.failed(batch.batch);
  EXPECT_EQ(marks(failed, "client.record_retry"), 1);
  EXPECT_TRUE(all_of<Record>(failed).empty());
  EXPECT_EQ(h.client().next_deadline(), h.now() + 200_ms);
  EXPECT_TRUE(all_of<Record>(h.failed(batch.batch)).empty());  // one retry scheduled, not two
  const Record retry = only_record(h.fire_next());
  EXPECT_EQ(retry.batch, batch.batch);
  EXPECT_EQ(seqs(retry), seqs(batch));  // message 2 waits: one batch in flight
  EXPECT_EQ(retry.previous, batch.previous);
  EXPECT_EQ(retry.through, batch.through);
  EXPECT_EQ(h.client().cursor(), (Position{0, 0}));
  const Record next = only_record(h.recorded(batch.batch));
  EXPECT_EQ(h.client().cursor(), (Position{1, 1}));
  EXPECT_EQ(seqs(next), (std::vector<int64_t>{2}));
  // A late answer to the settled batch changes nothing.
  EXPECT_EQ(marks(h.recorded(batch.batch), "client.stale_record_reply"), 1);
  EXPECT_EQ(h.client().cursor(), (Position{1, 1}));
}

TEST(ResumeClient, RecordRetriesBackOffExponentiallyWithFullJitterAndResetAfterASuccess) {
  StubRandom random{highest};
  ClientConfig config;
  config.record_retry_base = 200_ms;
  config.record_retry_cap = 1_s;
  ClientHarness h{config, {}, &random};
  h.start();
  const Record batch = only_record(h.frame(data(1, 1)));
  // Ceilings 200 ms, 400 ms, 800 ms, then the 1 s cap; each delay is drawn from [0, ceiling].
  for (const Duration ceiling : {200_ms, 400_ms, 800_ms, 1_s, 1_s}) {
    random.bounds.clear();
    EXPECT_EQ(marks(h.failed(batch.batch), "client.record_retry"), 1);
    EXPECT_EQ(random.bounds, (std::vector<uint64_t>{static_cast<uint64_t>(ceiling.ns()) + 1}));
    EXPECT_EQ(h.client().next_deadline(), h.now() + ceiling);
    EXPECT_EQ(only_record(h.fire_next()).batch, batch.batch);
  }
  random.set(lowest);  // full jitter reaches zero too
  h.failed(batch.batch);
  EXPECT_EQ(h.client().next_deadline(), h.now());
  EXPECT_EQ(only_record(h.fire_next()).batch, batch.batch);
}

TEST(ResumeClient, WithoutJitterARecordRetryWaitsTheWholeCeilingAndASuccessResetsIt) {
  ClientConfig config;
  config.jitter = false;
  ClientHarness h{config};
  h.start();
  const Record batch = only_record(h.frame(data(1, 1)));
  h.failed(batch.batch);
  EXPECT_EQ(h.client().next_deadline(), h.now() + 200_ms);
  h.fire_next();
  h.failed(batch.batch);
  EXPECT_EQ(h.client().next_deadline(), h.now() + 400_ms);
  h.fire_next();
  h.recorded(batch.batch);
  const Record next = only_record(h.frame(data(1, 2)));
  h.failed(next.batch);
  EXPECT_EQ(h.client().next_deadline(), h.now() + 200_ms);  // reset by the success
}

// ---- reconnect: position -------------------------------------------------------------

TEST(ResumeClient, ReconnectResumesAfterTheRecordedCursorNeverTheReceived) {
  ClientConfig config;
  config.jitter = false;
  ClientHarness h{config, Position{1, 10}};
  h.start();
  const Record first = only_record(h.frame(data(1, 11)));
  h.recorded(first.batch);
  const Record in_flight = only_record(h.frame(data(1, 12)));
  for (int64_t seq = 13; seq <= 15; ++seq) h.frame(data(1, seq));  // buffered, not batched
  ASSERT_EQ(h.client().cursor(), (Position{1, 11}));
  h.closed(close_code::abnormal);
  EXPECT_FALSE(h.client().connected());
  const auto out = h.fire_next();
  const auto connects = all_of<Connect>(out);
  ASSERT_EQ(connects.size(), 1u);
  EXPECT_EQ(connects[0].subscribe.after, (Position{1, 11}));  // recorded, not 15 (received)
  // The replay: 12 is in flight (kept, still retried) so it is a duplicate;
  // 13..15 were dropped from the buffer and are taken again.
  EXPECT_EQ(marks(h.frame(data(1, 12)), "client.duplicate_dropped"), 1);
  for (int64_t seq = 13; seq <= 16; ++seq) EXPECT_TRUE(all_of<Record>(h.frame(data(1, seq))).empty());
  const Record next = only_record(h.recorded(in_flight.batch));
  EXPECT_EQ(next.previous, (Position{1, 12}));
  EXPECT_EQ(seqs(next), (std::vector<int64_t>{13, 14, 15, 16}));  // each once, no hole
}

TEST(ResumeClient, TheBatchInFlightIsStillRetriedAcrossAReconnect) {
  ClientConfig config;
  config.jitter = false;
  ClientHarness h{config};
  h.start();
  const Record batch = only_record(h.frame(data(1, 1)));
  h.closed(close_code::service_restart);
  h.failed(batch.batch);
  // The retry (200 ms) comes before the reconnect (500 ms).
  const Record retry = only_record(h.fire_next());
  EXPECT_EQ(retry.batch, batch.batch);
  EXPECT_EQ(all_of<Connect>(h.fire_next()).size(), 1u);
  h.recorded(batch.batch);
  EXPECT_EQ(h.client().cursor(), (Position{1, 1}));
  EXPECT_EQ(marks(h.frame(data(1, 1)), "client.duplicate_dropped"), 1);
}

TEST(ResumeClient, ABatchRecordedBeforeTheReconnectMovesTheResumePosition) {
  ClientConfig config;
  config.jitter = false;
  ClientHarness h{config};
  h.start();
  const Record batch = only_record(h.frame(data(1, 1)));
  h.frame(data(1, 2));
  h.closed(close_code::going_away);
  const Record next = only_record(h.recorded(batch.batch));  // the buffer is batched while disconnected
  EXPECT_EQ(seqs(next), (std::vector<int64_t>{2}));
  const auto connects = all_of<Connect>(h.fire_next());
  ASSERT_EQ(connects.size(), 1u);
  EXPECT_EQ(connects[0].subscribe.after, (Position{1, 1}));
}

// ---- reconnect: delays ---------------------------------------------------------------

TEST(ResumeClient, FullJitterStaysWithinZeroAndTheCeilingAndReachesBothEnds) {
  ClientConfig config;
  config.reconnect_base = 100_ms;
  config.reconnect_cap = 1_s;
  // Mostly a fixed LCG; every hundredth draw the lowest, the next one the highest value.
  int draw = 0;
  uint64_t state = 12345;
  StubRandom random{[&](uint64_t bound) -> uint64_t {
    const int i = draw++;
    if (i % 100 == 0) return lowest(bound);
    if (i % 100 == 1) return highest(bound);
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 11) % bound;
  }};
  ClientHarness h{config, {}, &random};
  h.start();
  bool saw_zero = false;
  bool saw_ceiling = false;
  std::vector<Duration> ceilings;
  for (int i = 0; i < 500; ++i) {
    const Duration ceiling = h.client().backoff_ceiling(close_code::abnormal);
    const Instant closed_at = h.now();
    const size_t draws = random.bounds.size();
    h.closed(close_code::abnormal);
    // Each reconnect draws its delay (a client without jitter draws none).
    ASSERT_EQ(random.bounds.size(), draws + 1) << "no jitter drawn for reconnect " << i;
    ASSERT_EQ(random.bounds.back(), static_cast<uint64_t>(ceiling.ns()) + 1);  // [0, ceiling], both included
    const Duration delay = h.client().next_deadline() - closed_at;
    EXPECT_GE(delay, 0_s);
    EXPECT_LE(delay, ceiling);
    saw_zero = saw_zero || delay == 0_s;
    saw_ceiling = saw_ceiling || delay == ceiling;
    if (i % 100 == 0) {
      EXPECT_EQ(delay, 0_s);
    }
    if (i % 100 == 1) {
      EXPECT_EQ(delay, ceiling);
    }
    ceilings.push_back(ceiling);
    ASSERT_EQ(all_of<Connect>(h.fire_next()).size(), 1u);
  }
  EXPECT_TRUE(saw_zero);
  EXPECT_TRUE(saw_ceiling);
  EXPECT_EQ(ceilings.front(), 100_ms);
  EXPECT_EQ(ceilings.back(), 1_s);  // never above the cap
}

TEST(ResumeClient, TheCeilingGrowsExponentiallyUpToTheCapAndResetsOnProgress) {
  ClientConfig config;
  config.jitter = false;
  config.reconnect_base = 500_ms;
  config.reconnect_cap = 30_s;
  ClientHarness h{config};
  h.start();
  const std::vector<Duration> expected = {500_ms, 1_s, 2_s, 4_s, 8_s, 16_s, 30_s, 30_s};
  for (Duration want : expected) {
    EXPECT_EQ(h.client().backoff_ceiling(close_code::abnormal), want);
    const Instant closed_at = h.now();
    h.closed(close_code::abnormal);
    EXPECT_EQ(h.client().next_deadline() - closed_at, want);  // no jitter: exactly the ceiling
    h.fire_next();
  }
  // Far past any exponent that fits: still the cap, no overflow.
  for (int i = 0; i < 100; ++i) {
    h.closed(close_code::abnormal);
    h.fire_next();
  }
  EXPECT_EQ(h.client().backoff_ceiling(close_code::abnormal), 30_s);
  EXPECT_GT(h.client().reconnect_attempt(), 60u);
  // Progress (a recorded batch) makes the next failure start over.
  const Record batch = only_record(h.frame(data(1, 1)));
  h.recorded(batch.batch);
  EXPECT_EQ(h.client().reconnect_attempt(), 0u);
  EXPECT_EQ(h.client().backoff_ceiling(close_code::abnormal), 500_ms);
}

TEST(ResumeClient, PerCodeBasesOverrideTheDefault) {
  ClientConfig config;
  config.jitter = false;
  config.reconnect_base = 500_ms;
  config.reconnect_cap = 30_s;
  config.reconnect_base_by_code[close_code::try_again_later] = 5_s;
  ClientHarness h{config};
  h.start();
  EXPECT_EQ(h.client().backoff_ceiling(close_code::try_again_later), 5_s);
  EXPECT_EQ(h.client().backoff_ceiling(close_code::service_restart), 500_ms);
  const Instant closed_at = h.now();
  h.closed(close_code::try_again_later);
  EXPECT_EQ(h.client().next_deadline() - closed_at, 5_s);
  h.fire_next();
  EXPECT_EQ(h.client().backoff_ceiling(close_code::try_again_later), 10_s);
  EXPECT_EQ(h.client().backoff_ceiling(close_code::service_restart), 1_s);
}

TEST(ResumeClient, ReconnectsAfterRetryableCodesAndGivesUpOnRefusals) {
  for (uint16_t code : {close_code::going_away, close_code::abnormal, close_code::internal_error,
                        close_code::service_restart, close_code::try_again_later}) {
    ClientHarness h;
    h.start();
    const auto closed = h.closed(code);
    EXPECT_TRUE(all_of<GiveUp>(closed).empty()) << code;
    EXPECT_FALSE(h.client().given_up());
    EXPECT_EQ(all_of<Connect>(h.fire_next()).size(), 1u) << code;
    EXPECT_TRUE(h.client().connected());
  }
  for (uint16_t code : {close_code::protocol_error, close_code::policy_violation, close_code::normal, uint16_t{4000}}) {
    ClientHarness h;
    h.start();
    const auto closed = h.closed(code);
    const auto give_up = all_of<GiveUp>(closed);
    ASSERT_EQ(give_up.size(), 1u) << code;
    EXPECT_EQ(give_up[0].code, code);
    EXPECT_TRUE(h.client().given_up());
    EXPECT_FALSE(h.client().connected());
    EXPECT_EQ(h.client().next_deadline(), Instant::max());
    h.advance(1_h);
    EXPECT_TRUE(all_of<Connect>(h.tick()).empty());
  }
}

TEST(ResumeClient, AfterGivingUpTheBatchInFlightIsStillRecorded) {
  ClientHarness h;
  h.start();
  const Record batch = only_record(h.frame(data(1, 1)));
  h.closed(close_code::policy_violation);
  h.failed(batch.batch);
  EXPECT_EQ(only_record(h.fire_next()).batch, batch.batch);
  h.recorded(batch.batch);
  EXPECT_EQ(h.client().cursor(), (Position{1, 1}));
  EXPECT_EQ(marks(h.frame(data(1, 2)), "client.frame_while_closed"), 1);
}

// ---- liveness and flow control -------------------------------------------------------

TEST(ResumeClient, ASilentHubIsClosedAndReconnected) {
  ClientConfig config;
  config.jitter = false;
  config.hub_silence_timeout = 10_s;
  ClientHarness h{config};
  h.start();
  EXPECT_EQ(h.client().next_deadline(), h.now() + 10_s);  // covers a connection that never speaks
  h.advance(6_s);
  h.frame(Ping{1});
  EXPECT_EQ(h.client().next_deadline(), h.now() + 10_s);  // any frame counts
  h.advance(9_s);
  EXPECT_TRUE(h.tick().empty());
  h.advance(1_s);
  const auto out = h.tick();
  EXPECT_EQ(marks(out, "client.hub_silent"), 1);
  const auto closes = all_of<CloseConnection>(out);
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_EQ(closes[0].code, close_code::abnormal);
  EXPECT_STREQ(closes[0].reason, "hub silent");
  EXPECT_FALSE(h.client().connected());
  EXPECT_EQ(h.client().next_deadline(), h.now() + 500_ms);  // as after 1006
  // The transport's own report of that close is not a second close.
  EXPECT_EQ(marks(h.closed(close_code::abnormal), "client.close_while_closed"), 1);
  EXPECT_EQ(h.client().reconnect_attempt(), 1u);
  EXPECT_EQ(all_of<Connect>(h.fire_next()).size(), 1u);
}

TEST(ResumeClient, PingsAreAnsweredWithTheBytesConsumedSinceTheLastPong) {
  ClientHarness h;
  h.start();
  h.frame(data(1, 1, 100));
  h.frame(data(1, 2, 200));
  const auto pongs = all_of<SendPong>(h.frame(Ping{7}));
  ASSERT_EQ(pongs.size(), 1u);
  EXPECT_EQ(pongs[0].pong.ping, 7u);
  EXPECT_EQ(pongs[0].pong.consumed_bytes, frame_bytes(data(1, 1, 100)) + frame_bytes(data(1, 2, 200)));
  const auto again = all_of<SendPong>(h.frame(Ping{8}));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].pong.consumed_bytes, 0u);
}

TEST(ResumeClient, AWindowUpdateIsSentOnceEnoughBytesWereRead) {
  ClientConfig config;
  const uint32_t size = frame_bytes(data(1, 1, 1000));
  config.window_update_bytes = 3 * size;
  ClientHarness h{config};
  h.start();
  EXPECT_TRUE(all_of<SendPong>(h.frame(data(1, 1, 1000))).empty());
  EXPECT_TRUE(all_of<SendPong>(h.frame(data(1, 1, 1000))).empty());  // a duplicate still left the hub's queue
  const auto pongs = all_of<SendPong>(h.frame(data(1, 2, 1000)));
  ASSERT_EQ(pongs.size(), 1u);
  EXPECT_EQ(pongs[0].pong.ping, 0u);
  EXPECT_EQ(pongs[0].pong.consumed_bytes, 3u * size);
  EXPECT_TRUE(all_of<SendPong>(h.frame(data(1, 3, 1000))).empty());  // the count started over
}

// ---- resets --------------------------------------------------------------------------

TEST(ResumeClient, AnEvictedResetSkipsTheGapWithoutRecordingIt) {
  ClientHarness h{{}, Position{3, 10}};
  h.start();
  const Reset reset{ResetKind::evicted, Position{3, 10}, Position{3, 500}};
  const auto out = h.frame(reset);
  const auto seen = all_of<ResetSeen>(out);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].reset.resume, (Position{3, 500}));
  EXPECT_EQ(marks(out, "client.reset_evicted"), 1);
  EXPECT_EQ(h.client().cursor(), (Position{3, 10}));  // the gap is not recorded
  const auto first = h.frame(data(3, 501));
  EXPECT_EQ(marks(first, "client.gap_without_reset"), 0);
  const Record batch = only_record(first);
  EXPECT_EQ(batch.previous, (Position{3, 10}));  // the real cursor
  EXPECT_EQ(batch.through, (Position{3, 501}));
  h.recorded(batch.batch);
  EXPECT_EQ(h.client().cursor(), (Position{3, 501}));
}

TEST(ResumeClient, AnEpochChangeResetMovesToTheNewEpoch) {
  ClientHarness h{{}, Position{3, 10}};
  h.start();
  const auto out = h.frame(Reset{ResetKind::epoch_changed, Position{3, 10}, Position{4, 0}});
  EXPECT_EQ(marks(out, "client.reset_epoch_changed"), 1);
  EXPECT_EQ(marks(h.frame(data(3, 11)), "client.duplicate_dropped"), 1);  // the old epoch is gone
  const auto first = h.frame(data(4, 1));
  EXPECT_EQ(marks(first, "client.gap_without_reset"), 0);
  const Record batch = only_record(first);
  EXPECT_EQ(batch.previous, (Position{3, 10}));
  EXPECT_EQ(batch.through, (Position{4, 1}));
}

TEST(ResumeClient, AnAheadOfTopResetNeverHandsOutNumbersAlreadyRecorded) {
  ClientHarness h{{}, Position{3, 100}};
  h.start();
  const auto out = h.frame(Reset{ResetKind::ahead_of_top, Position{3, 100}, Position{3, 50}});
  EXPECT_EQ(marks(out, "client.reset_ahead_of_top"), 1);
  EXPECT_EQ(marks(h.frame(data(3, 51)), "client.duplicate_dropped"), 1);
  EXPECT_EQ(marks(h.frame(data(3, 100)), "client.duplicate_dropped"), 1);
  const Record batch = only_record(h.frame(data(3, 101)));
  EXPECT_EQ(batch.previous, (Position{3, 100}));
}

TEST(ResumeClient, MessagesBufferedBeforeAResetAreRecordedFirst) {
  ClientHarness h{{}, Position{1, 0}};
  h.start();
  const Record first = only_record(h.frame(data(1, 1)));
  h.frame(data(1, 2));
  h.frame(Reset{ResetKind::over_limit, Position{1, 2}, Position{1, 900}});
  h.frame(data(1, 901));
  const Record second = only_record(h.recorded(first.batch));
  EXPECT_EQ(seqs(second), (std::vector<int64_t>{2, 901}));
  EXPECT_EQ(second.previous, (Position{1, 1}));
  EXPECT_EQ(second.through, (Position{1, 901}));
}

TEST(ResumeClient, AHoleWithoutAResetIsMarkedAndRecordedForTheCheckerToSee) {
  ClientHarness h{{}, Position{1, 5}};
  h.start();
  const auto out = h.frame(data(1, 9));
  EXPECT_EQ(marks(out, "client.gap_without_reset"), 1);
  EXPECT_EQ(seqs(only_record(out)), (std::vector<int64_t>{9}));
  // The first message of a connection that never recorded anything is no hole.
  ClientHarness fresh;
  fresh.start();
  EXPECT_EQ(marks(fresh.frame(data(7, 1)), "client.gap_without_reset"), 0);
}

// ---- the broken variant --------------------------------------------------------------

TEST(ResumeClient, TheBugVariantResumesAfterTheLastReceivedAndLosesTheBuffer) {
  ClientConfig config;
  config.jitter = false;
  config.bug_cursor_on_receive = true;
  ClientHarness h{config};
  h.start();
  const Record first = only_record(h.frame(data(1, 1)));
  for (int64_t seq = 2; seq <= 4; ++seq) h.frame(data(1, seq));
  EXPECT_EQ(h.client().cursor(), (Position{1, 4}));  // advanced on receive
  h.closed(close_code::abnormal);
  const auto connects = all_of<Connect>(h.fire_next());
  ASSERT_EQ(connects.size(), 1u);
  EXPECT_EQ(connects[0].subscribe.after, (Position{1, 4}));  // the last received, not recorded
  h.frame(data(1, 5));
  const Record next = only_record(h.recorded(first.batch));
  // 2..4 were never recorded and will never be replayed: the hole the checker must catch.
  EXPECT_EQ(seqs(next), (std::vector<int64_t>{5}));
  EXPECT_EQ(next.previous, (Position{1, 1}));
  EXPECT_EQ(h.client().cursor(), (Position{1, 5}));
}

}  // namespace
}  // namespace resume
}  // namespace leaseproof
