// The per-stream session (core/resume/session.hpp): its recording state
// machine driven against the simulated DynamoDB store, one call at a time, so
// that each path (retry of a lost reply, already applied, fenced, put mode's
// read of the sink) is taken on purpose and its outcome read back.

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/lease/requests.hpp"
#include "core/resume/session.hpp"
#include "models/dynamo/store.hpp"

namespace leaseproof::resume {
namespace {

constexpr int64_t kNowMs = 1'700'000'000'000LL;

class Counter final : public RandomSource {
 public:
  uint64_t below(uint64_t bound) override { return bound / 2; }
};

class ResumeSession : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(apply(lease::create_table_request(lease_)).ok());
    ASSERT_TRUE(apply(lease::create_connection_request(lease_, "c1", "wss://hub/c1")).ok());
    ASSERT_TRUE(apply(create_sink_table_request(config_.sink)).ok());
    ASSERT_TRUE(apply(lease::acquire_request(lease_, "c1", "w1", kNowMs, {})).ok());  // epoch 1
  }
  dynamo::Result<dynamo::Response> apply(const dynamo::Request& request) {
    return store_.apply(request, Instant::from_ms(kNowMs));
  }
  StreamSession& open(RecordMode mode, Position recorded = {}) {
    config_.mode = mode;
    session_.emplace(config_, lease_, "c1", "w1", 1, recorded, random_);
    SessionActions out;
    session_->start(now_, out);
    return *session_;
  }
  // Delivers messages (epoch 1) and returns what the session asked for.
  SessionActions deliver(int64_t from, int64_t through) {
    SessionActions out;
    for (int64_t seq = from; seq <= through; ++seq) session_->on_frame(Data{Message{1, seq, 64}}, now_, out);
    return out;
  }
  static std::optional<SinkCall> call_in(SessionActions& actions) {
    for (SessionAction& action : actions) {
      if (auto* call = std::get_if<SinkCall>(&action)) return std::move(*call);
    }
    return std::nullopt;
  }
  template <typename T>
  static size_t count(const SessionActions& actions) {
    size_t n = 0;
    for (const SessionAction& action : actions) n += std::holds_alternative<T>(action) ? 1 : 0;
    return n;
  }
  // Answers every sink call in turn from the store until the session asks
  // for nothing more; `lose_first` drops the first reply after applying it.
  SessionActions serve(SessionActions actions, bool lose_first = false) {
    SessionActions all;
    for (int step = 0; step < 100; ++step) {
      std::optional<SinkCall> call = call_in(actions);
      for (SessionAction& action : actions) all.push_back(std::move(action));
      if (!call) {
        // A record retry is due within the backoff; anything later (the hub
        // silence timeout) means the session has nothing more to write.
        if (session_->next_deadline() > now_ + Duration::from_s(1)) return all;
        now_ = session_->next_deadline();
        actions.clear();
        session_->on_timer(now_, actions);
        continue;
      }
      const dynamo::Result<dynamo::Response> result = apply(call->request);
      actions.clear();
      session_->on_sink_reply(call->token, lose_first ? nullptr : &result, now_, actions);
      lose_first = false;
    }
    ADD_FAILURE() << "the session never settled";
    return all;
  }
  size_t records() const { return store_.item_count(config_.sink.name); }
  Position checkpoint() const {
    return checkpoint_of(*store_.peek(lease_.table.name,
                                      dynamo::Item{{"pk", dynamo::AttributeValue::string(lease::connection_key("c1"))}}));
  }

  lease::LeaseConfig lease_;
  SessionConfig config_;
  Counter random_;
  models::DynamoStore store_{models::DynamoStoreOptions::faults_off(), 5};
  std::optional<StreamSession> session_;
  Instant now_ = Instant::from_ms(1'000);
};

TEST_F(ResumeSession, TransactRecordsAndMovesTheCursor) {
  open(RecordMode::transact);
  const SessionActions done = serve(deliver(1, 3));
  EXPECT_GE(count<Recorded>(done), 1u);
  EXPECT_EQ(records(), 3u);
  EXPECT_EQ(checkpoint(), (Position{1, 3}));
  EXPECT_EQ(session_->client().cursor(), (Position{1, 3}));
}

TEST_F(ResumeSession, ALostReplyIsRetriedWithTheSameTokenAndWritesOnce) {
  open(RecordMode::transact);
  const SessionActions done = serve(deliver(1, 1), /*lose_first=*/true);
  EXPECT_EQ(count<Recorded>(done), 1u);
  EXPECT_EQ(records(), 1u);
  EXPECT_EQ(checkpoint(), (Position{1, 1}));
}

TEST_F(ResumeSession, ATakenLeaseFencesTheSessionAndWritesNothing) {
  open(RecordMode::transact);
  ASSERT_TRUE(apply(lease::acquire_request(lease_, "c1", "w2", kNowMs + 60'000, {})).ok());  // epoch 2
  const SessionActions done = serve(deliver(1, 2));
  EXPECT_EQ(count<Fenced>(done), 1u);
  EXPECT_TRUE(session_->fenced());
  EXPECT_EQ(records(), 0u);
  EXPECT_EQ(session_->client().cursor(), (Position{0, 0}));
}

TEST_F(ResumeSession, ACheckpointAlreadyPastTheBatchCountsAsRecorded) {
  // An earlier attempt applied (its reply lost, its token forgotten): the
  // refused checkpoint shows the lease ours and the checkpoint past the batch.
  open(RecordMode::put);
  ASSERT_TRUE(apply(checkpoint_position(lease_, "c1", "w1", 1, Position{}, Position{1, 2})).ok());
  const SessionActions done = serve(deliver(1, 2));
  EXPECT_EQ(count<Fenced>(done), 0u);
  EXPECT_EQ(count<Recorded>(done), 2u);  // batches [1] and [2], both already covered
  EXPECT_EQ(records(), 2u);              // put mode's puts themselves were still written
  EXPECT_EQ(session_->client().cursor(), (Position{1, 2}));
}

TEST_F(ResumeSession, PutModeSkipsWhatAnEarlierOwnerPutBeyondItsCheckpoint) {
  // w0 put 1..5 and lost its checkpoint: the sink is ahead of the lease item.
  for (int64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(apply(record_put(config_.sink, "c1", "w0", 0, Message{1, seq, 64})).ok());
  }
  open(RecordMode::put);
  const SessionActions done = serve(deliver(1, 7));
  size_t skipped = 0;
  for (const SessionAction& action : done) {
    if (const auto* mark = std::get_if<ClientMark>(&action)) skipped += std::string{mark->name} == "resume.put_below_sink_floor";
  }
  EXPECT_EQ(skipped, 5u);  // never put again below what the sink holds
  EXPECT_EQ(records(), 7u);
  EXPECT_EQ(checkpoint(), (Position{1, 7}));
}

size_t marks(const SessionActions& actions, std::string_view name) {
  size_t n = 0;
  for (const SessionAction& action : actions) {
    if (const auto* mark = std::get_if<ClientMark>(&action)) n += mark->name == name;
  }
  return n;
}

// Every seq of hub epoch 1 the sink's items cover, in order, once each.
std::vector<int64_t> covered(const models::DynamoStore& store, const SinkTable& sink, int64_t through) {
  std::vector<int64_t> seqs;
  for (int64_t first = 1; first <= through; ++first) {
    const auto item = store.peek(sink.name, dynamo::Item{{"pk", dynamo::AttributeValue::string(sink_key("c1", 1))},
                                                         {"seq", dynamo::AttributeValue::number(first)}});
    if (!item) continue;
    for (int64_t seq = first; seq <= *record_last_seq(*item); ++seq) seqs.push_back(seq);
  }
  return seqs;
}

std::vector<int64_t> one_to(int64_t through) {
  std::vector<int64_t> seqs;
  for (int64_t seq = 1; seq <= through; ++seq) seqs.push_back(seq);
  return seqs;
}

TEST_F(ResumeSession, PackedModeSplitsABatchIntoPacksOfAtMostPackBytesThenCheckpoints) {
  config_.pack_bytes = 1024;  // 14 messages of 64 B with the pack's keys
  open(RecordMode::packed);
  // [1] goes at once; [2..26] (a full batch of 25) next, in two packs; [27..30] last.
  const SessionActions done = serve(deliver(1, 30));
  EXPECT_EQ(count<Recorded>(done), 3u);
  EXPECT_EQ(records(), 4u);
  EXPECT_EQ(covered(store_, config_.sink, 30), one_to(30));
  EXPECT_EQ(checkpoint(), (Position{1, 30}));
  EXPECT_LE(store_.accounting(config_.sink.name).table.write_units, 4);  // one WCU a pack
}

TEST_F(ResumeSession, PackedModeAPackRefusedByAnEarlierOwnersLatePackSkipsWhatThatPackCovers) {
  open(RecordMode::packed);
  SessionActions out = deliver(1, 1);
  std::optional<SinkCall> probe = call_in(out);
  ASSERT_TRUE(probe);
  ASSERT_STREQ(probe->kind, "probe");
  const auto probed = apply(probe->request);  // the sink is empty: floor 0
  out.clear();
  session_->on_sink_reply(probe->token, &probed, now_, out);
  std::optional<SinkCall> pack = call_in(out);
  ASSERT_TRUE(pack);
  ASSERT_STREQ(pack->kind, "record");
  // w0's pack of 1..5, sent before its tenure ended, lands only now.
  std::vector<Message> late;
  for (int64_t seq = 1; seq <= 5; ++seq) late.push_back(Message{1, seq, 64});
  ASSERT_TRUE(apply(record_pack(config_.sink, "c1", "w0", 0, late)).ok());
  const auto refused = apply(pack->request);
  ASSERT_FALSE(refused.ok());
  out.clear();
  session_->on_sink_reply(pack->token, &refused, now_, out);
  EXPECT_EQ(marks(out, "resume.pack_already_recorded"), 1u);
  SessionActions done = serve(std::move(out));
  for (SessionAction& action : serve(deliver(2, 8))) done.push_back(std::move(action));
  // 1 (the refused pack's own message) and 2..5: w0's pack holds them.
  EXPECT_EQ(marks(done, "resume.put_below_sink_floor"), 5u);
  EXPECT_EQ(covered(store_, config_.sink, 8), one_to(8));     // each once, in order
  EXPECT_EQ(checkpoint(), (Position{1, 8}));
}

TEST_F(ResumeSession, PackedModeARefusalWithoutTheStoredItemReadsTheSinkAgain) {
  // dynalite does not return the item a condition refused (ALL_OLD).
  std::vector<Message> earlier;
  for (int64_t seq = 1; seq <= 3; ++seq) earlier.push_back(Message{1, seq, 64});
  open(RecordMode::packed);
  SessionActions out = deliver(1, 1);
  std::optional<SinkCall> probe = call_in(out);
  ASSERT_TRUE(probe);
  const auto probed = apply(probe->request);
  out.clear();
  session_->on_sink_reply(probe->token, &probed, now_, out);
  std::optional<SinkCall> pack = call_in(out);
  ASSERT_TRUE(pack);
  ASSERT_TRUE(apply(record_pack(config_.sink, "c1", "w0", 0, earlier)).ok());
  const dynamo::Result<dynamo::Response> refused = apply(pack->request);
  ASSERT_FALSE(refused.ok());
  dynamo::DynamoError without_item = refused.error();
  without_item.item.reset();
  const dynamo::Result<dynamo::Response> stripped{std::move(without_item)};
  out.clear();
  session_->on_sink_reply(pack->token, &stripped, now_, out);
  std::optional<SinkCall> again = call_in(out);
  ASSERT_TRUE(again);
  EXPECT_STREQ(again->kind, "probe");
  SessionActions done = serve(SessionActions{std::move(*again)});
  for (SessionAction& action : serve(deliver(2, 5))) done.push_back(std::move(action));
  EXPECT_EQ(covered(store_, config_.sink, 5), one_to(5));
  EXPECT_EQ(checkpoint(), (Position{1, 5}));
}

}  // namespace
}  // namespace leaseproof::resume
