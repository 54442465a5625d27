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

}  // namespace
}  // namespace leaseproof::resume
