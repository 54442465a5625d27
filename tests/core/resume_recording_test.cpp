// The sink-recording requests (core/resume/recording.hpp) applied to the
// simulated DynamoDB store, so that each condition is checked by what it
// accepts and refuses, not by its text.

#include <gtest/gtest.h>

#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "core/lease/config.hpp"
#include "core/lease/requests.hpp"
#include "core/resume/recording.hpp"
#include "models/dynamo/store.hpp"

namespace leaseproof::resume {
// Readable failure messages (found by argument-dependent lookup).
inline void PrintTo(const Position& p, std::ostream* os) { *os << "(" << p.epoch << ", " << p.seq << ")"; }
namespace {

constexpr int64_t kNowMs = 1'700'000'000'000LL;

using dynamo::AttributeValue;
using dynamo::Item;

std::vector<Message> messages(uint64_t epoch, int64_t from, int64_t through, uint32_t bytes = 64) {
  std::vector<Message> out;
  for (int64_t seq = from; seq <= through; ++seq) out.push_back(Message{epoch, seq, bytes});
  return out;
}

class ResumeRecording : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(apply(lease::create_table_request(lease_)).ok());
    ASSERT_TRUE(apply(lease::create_connection_request(lease_, "c1", "wss://hub/c1")).ok());
    ASSERT_TRUE(apply(create_sink_table_request(sink_)).ok());
    ASSERT_TRUE(apply(lease::acquire_request(lease_, "c1", "w1", kNowMs, {})).ok());  // epoch 1
  }
  dynamo::Result<dynamo::Response> apply(const dynamo::Request& request) {
    return store_.apply(request, Instant::from_ms(kNowMs));
  }
  static std::string error_type(const dynamo::Result<dynamo::Response>& result) {
    return result.ok() ? "ok" : result.error().type;
  }
  // The other worker takes the lease over after it expired: epoch 2.
  void take_over(std::string_view worker = "w2") {
    ASSERT_TRUE(apply(lease::acquire_request(lease_, "c1", worker, kNowMs + 30'000, {})).ok());
  }
  dynamo::Request transact(std::string_view worker, int64_t epoch, const std::vector<Message>& batch,
                           Position previous, std::string_view token) {
    const Position through{batch.back().epoch, batch.back().seq};
    return record_transaction(lease_, sink_, "c1", worker, epoch, batch, previous, through, token);
  }
  std::optional<Item> record(uint64_t epoch, int64_t seq) const {
    return store_.peek(sink_.name, Item{{"pk", AttributeValue::string(sink_key("c1", epoch))},
                                        {"seq", AttributeValue::number(seq)}});
  }
  Item lease_item() const {
    auto item = store_.peek(lease_.table.name, Item{{"pk", AttributeValue::string(lease::connection_key("c1"))}});
    EXPECT_TRUE(item);
    return item.value_or(Item{});
  }
  Position checkpoint() const { return checkpoint_of(lease_item()); }
  size_t records() const { return store_.item_count(sink_.name); }

  lease::LeaseConfig lease_;
  SinkTable sink_;
  models::DynamoStore store_{models::DynamoStoreOptions::faults_off(), 11};
};

// ---- transact mode -------------------------------------------------------------------

TEST_F(ResumeRecording, TransactWritesTheRecordsAndTheCheckpointTogether) {
  EXPECT_EQ(checkpoint(), (Position{0, 0}));  // a new connection has recorded nothing
  ASSERT_TRUE(apply(transact("w1", 1, messages(3, 1, 3, 500), Position{}, "t-1")).ok());
  EXPECT_EQ(records(), 3u);
  const auto item = record(3, 2);
  ASSERT_TRUE(item);
  EXPECT_EQ(item->at("pk").text(), "c1#3");
  EXPECT_EQ(item->at("seq").text(), "2");
  EXPECT_EQ(item->at("bytes").text(), "500");
  EXPECT_EQ(item->at("lease_epoch").text(), "1");
  EXPECT_EQ(item->at("recorded_by").text(), "w1");
  EXPECT_EQ(checkpoint(), (Position{3, 3}));
  ASSERT_TRUE(apply(transact("w1", 1, messages(3, 4, 5), Position{3, 3}, "t-2")).ok());
  EXPECT_EQ(records(), 5u);
  EXPECT_EQ(checkpoint(), (Position{3, 5}));
}

TEST_F(ResumeRecording, TransactRetriedWithItsTokenIsAnsweredWithoutWritingTwice) {
  const dynamo::Request request = transact("w1", 1, messages(1, 1, 2), Position{}, "t-retry");
  ASSERT_TRUE(apply(request).ok());
  ASSERT_TRUE(apply(request).ok());  // a lost reply, retried
  EXPECT_GE(store_.accounting(sink_.name).idempotent_replays, 1);
  EXPECT_EQ(records(), 2u);
  EXPECT_EQ(checkpoint(), (Position{1, 2}));
}

TEST_F(ResumeRecording, AStaleLeaseEpochOrAnotherOwnerIsCancelledAndWritesNothing) {
  ASSERT_TRUE(apply(transact("w1", 1, messages(1, 1, 2), Position{}, "t-1")).ok());
  take_over();
  const auto stale = apply(transact("w1", 1, messages(1, 3, 4), Position{1, 2}, "t-2"));
  EXPECT_EQ(error_type(stale), "TransactionCanceledException");
  ASSERT_FALSE(stale.ok());
  ASSERT_EQ(stale.error().cancellation_reasons.size(), 3u);
  EXPECT_EQ(stale.error().cancellation_reasons.back().code, "ConditionalCheckFailed");  // the lease item
  EXPECT_EQ(error_type(apply(transact("w3", 2, messages(1, 3, 4), Position{1, 2}, "t-3"))),
            "TransactionCanceledException");
  EXPECT_EQ(records(), 2u);
  EXPECT_FALSE(record(1, 3));
  EXPECT_EQ(checkpoint(), (Position{1, 2}));
  // The new owner under its own epoch carries on.
  ASSERT_TRUE(apply(transact("w2", 2, messages(1, 3, 4), Position{1, 2}, "t-4")).ok());
  EXPECT_EQ(record(1, 3)->at("lease_epoch").text(), "2");
  EXPECT_EQ(checkpoint(), (Position{1, 4}));
}

// The epoch fences what the owner term cannot: the same worker's earlier
// tenure. w1 records under epoch 1, its lease expires and w1 takes it again
// (epoch 2, as a restarted worker with a stable id does); a late write of
// epoch 1 still names w1, so only the epoch refuses it, in both modes.
TEST_F(ResumeRecording, ALateWriteOfTheSameWorkersEarlierTenureIsRefusedByTheEpochAlone) {
  ASSERT_TRUE(apply(transact("w1", 1, messages(1, 1, 2), Position{}, "t-1")).ok());
  take_over("w1");
  ASSERT_EQ(lease::parse_lease(lease_item())->epoch, 2);
  const auto stale = apply(transact("w1", 1, messages(1, 3, 4), Position{1, 2}, "t-2"));
  EXPECT_EQ(error_type(stale), "TransactionCanceledException");
  EXPECT_FALSE(record(1, 3));
  EXPECT_EQ(error_type(apply(checkpoint_position(lease_, "c1", "w1", 1, Position{1, 2}, Position{1, 3}))),
            "ConditionalCheckFailedException");
  EXPECT_EQ(checkpoint(), (Position{1, 2}));
  // The same worker under its new epoch carries on.
  ASSERT_TRUE(apply(transact("w1", 2, messages(1, 3, 4), Position{1, 2}, "t-3")).ok());
  EXPECT_EQ(checkpoint(), (Position{1, 4}));
}

TEST_F(ResumeRecording, ACheckpointAtOrBehindTheStoredOneIsRefused) {
  ASSERT_TRUE(apply(transact("w1", 1, messages(2, 1, 5), Position{}, "t-1")).ok());
  // The same batch under a new token: the records exist and the checkpoint is not ahead.
  EXPECT_EQ(error_type(apply(transact("w1", 1, messages(2, 5, 5), Position{2, 4}, "t-2"))),
            "TransactionCanceledException");
  // New records but a checkpoint behind the stored one (an older epoch): nothing written.
  EXPECT_EQ(error_type(apply(transact("w1", 1, messages(1, 7, 8), Position{1, 6}, "t-3"))),
            "TransactionCanceledException");
  EXPECT_FALSE(record(1, 7));
  EXPECT_EQ(records(), 5u);
  EXPECT_EQ(checkpoint(), (Position{2, 5}));
}

TEST_F(ResumeRecording, AnEpochChangeMovesTheCheckpointToTheNewEpoch) {
  ASSERT_TRUE(apply(transact("w1", 1, messages(3, 99, 100), Position{3, 98}, "t-1")).ok());
  // The hub restarted without its ring: epoch 4 starts at seq 1, below 100.
  ASSERT_TRUE(apply(transact("w1", 1, messages(4, 1, 1), Position{3, 100}, "t-2")).ok());
  EXPECT_EQ(checkpoint(), (Position{4, 1}));
  EXPECT_TRUE(record(4, 1));
  // And the old epoch cannot come back.
  EXPECT_EQ(error_type(apply(transact("w1", 1, messages(3, 101, 101), Position{3, 100}, "t-3"))),
            "TransactionCanceledException");
  EXPECT_EQ(checkpoint(), (Position{4, 1}));
}

// ---- put mode ------------------------------------------------------------------------

TEST_F(ResumeRecording, PutModeARepeatedPutIsAConditionalCheckFailure) {
  const Message message{5, 1, 42};
  ASSERT_TRUE(apply(record_put(sink_, "c1", "w1", 1, message)).ok());
  EXPECT_EQ(error_type(apply(record_put(sink_, "c1", "w1", 1, message))), "ConditionalCheckFailedException");
  EXPECT_EQ(error_type(apply(record_put(sink_, "c1", "w2", 2, message))), "ConditionalCheckFailedException");
  EXPECT_EQ(records(), 1u);
  EXPECT_EQ(record(5, 1)->at("recorded_by").text(), "w1");  // never overwritten
}

TEST_F(ResumeRecording, PutModeTheCheckpointIsFencedAndOnlyMovesForward) {
  for (const Message& m : messages(5, 1, 3)) ASSERT_TRUE(apply(record_put(sink_, "c1", "w1", 1, m)).ok());
  ASSERT_TRUE(apply(checkpoint_position(lease_, "c1", "w1", 1, Position{}, Position{5, 3})).ok());
  EXPECT_EQ(checkpoint(), (Position{5, 3}));
  EXPECT_EQ(error_type(apply(checkpoint_position(lease_, "c1", "w1", 1, Position{5, 2}, Position{5, 3}))),
            "ConditionalCheckFailedException");  // at
  EXPECT_EQ(error_type(apply(checkpoint_position(lease_, "c1", "w1", 1, Position{5, 1}, Position{5, 2}))),
            "ConditionalCheckFailedException");  // behind
  take_over();
  EXPECT_EQ(error_type(apply(checkpoint_position(lease_, "c1", "w1", 1, Position{5, 3}, Position{5, 4}))),
            "ConditionalCheckFailedException");  // stale lease epoch
  EXPECT_EQ(error_type(apply(checkpoint_position(lease_, "c1", "w1", 2, Position{5, 3}, Position{5, 4}))),
            "ConditionalCheckFailedException");  // not the owner
  EXPECT_EQ(checkpoint(), (Position{5, 3}));
  ASSERT_TRUE(apply(checkpoint_position(lease_, "c1", "w2", 2, Position{5, 3}, Position{5, 4})).ok());
  ASSERT_TRUE(apply(checkpoint_position(lease_, "c1", "w2", 2, Position{5, 4}, Position{6, 1})).ok());
  EXPECT_EQ(checkpoint(), (Position{6, 1}));
}

// ---- packed mode ---------------------------------------------------------------------

TEST_F(ResumeRecording, PackedModeAPackHoldsWhatFitsItsSizeAndCostsItsSizeInWriteUnits) {
  const std::vector<Message> batch = messages(5, 1, 40, 256);
  // 8 KiB holds 31 messages of 256 B with the pack's keys; 1 KiB holds 3.
  EXPECT_EQ(pack_length("c1", "w1", 1, batch, 8 * 1024), 31u);
  EXPECT_EQ(pack_length("c1", "w1", 1, batch, 1024), 3u);
  // A message larger than a pack has a pack of its own.
  EXPECT_EQ(pack_length("c1", "w1", 1, messages(5, 1, 3, 5000), 1024), 1u);
  const size_t length = pack_length("c1", "w1", 1, batch, 8 * 1024);
  const std::span<const Message> pack = std::span<const Message>{batch}.first(length);
  const dynamo::Request request = record_pack(sink_, "c1", "w1", 1, pack);
  const Item& item = std::get<dynamo::PutItemRequest>(request).item;
  EXPECT_LE(dynamo::item_size_bytes(item), 8u * 1024);
  // One more message would not have fitted: the pack is as full as it gets.
  const dynamo::Request bigger = record_pack(sink_, "c1", "w1", 1, std::span<const Message>{batch}.first(length + 1));
  EXPECT_GT(dynamo::item_size_bytes(std::get<dynamo::PutItemRequest>(bigger).item), 8u * 1024);
  ASSERT_TRUE(apply(request).ok());
  EXPECT_EQ(store_.accounting(sink_.name).table.write_units, 8);  // 31 x 256 B + keys: 8 WCU for 31 messages
  const std::optional<Item> stored = record(5, 1);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->at("last_seq").text(), "31");
  EXPECT_EQ(stored->at("messages").text(), "31");
  EXPECT_EQ(stored->at("bytes").text(), std::to_string(31 * 256));
  EXPECT_EQ(record_last_seq(*stored), 31);
}

TEST_F(ResumeRecording, PackedModeAPackStopsAtAHubEpochOrAHole) {
  std::vector<Message> batch = messages(5, 1, 3);
  for (const Message& m : messages(6, 1, 2)) batch.push_back(m);
  EXPECT_EQ(pack_length("c1", "w1", 1, batch, 8 * 1024), 3u);
  std::vector<Message> holed = messages(5, 1, 2);
  holed.push_back(Message{5, 4, 64});
  EXPECT_EQ(pack_length("c1", "w1", 1, holed, 8 * 1024), 2u);
}

TEST_F(ResumeRecording, PackedModeARepeatedPackIsRefusedAndShowsWhatIsThere) {
  const std::vector<Message> earlier = messages(5, 1, 5);
  ASSERT_TRUE(apply(record_pack(sink_, "c1", "w0", 0, earlier)).ok());
  // Another owner's pack with the same first seq, shorter or longer: refused,
  // and the refusal carries the stored pack (what it covers).
  for (const int64_t through : {3, 8}) {
    const auto refused = apply(record_pack(sink_, "c1", "w1", 1, messages(5, 1, through)));
    ASSERT_EQ(error_type(refused), "ConditionalCheckFailedException");
    ASSERT_TRUE(refused.error().item.has_value());
    EXPECT_EQ(record_last_seq(*refused.error().item), 5);
  }
  EXPECT_EQ(records(), 1u);
  EXPECT_EQ(record(5, 1)->at("recorded_by").text(), "w0");
}

TEST_F(ResumeRecording, TheSinksLastRecordIsAPacksLastSeq) {
  ASSERT_TRUE(apply(record_put(sink_, "c1", "w1", 1, Message{5, 1, 64})).ok());
  ASSERT_TRUE(apply(record_pack(sink_, "c1", "w1", 1, messages(5, 2, 9))).ok());
  const auto reply = apply(last_record_query(sink_, "c1", 5));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(last_record_seq(std::get<dynamo::QueryResponse>(reply.value())), 9);
  const auto empty = apply(last_record_query(sink_, "c1", 6));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(last_record_seq(std::get<dynamo::QueryResponse>(empty.value())), 0);
}

// ---- shapes --------------------------------------------------------------------------

TEST(ResumeRecordingShapes, KeysNamesAndTheCheckpointReadBack) {
  EXPECT_EQ(sink_key("conn-7", 12), "conn-7#12");
  EXPECT_EQ(to_string(RecordMode::transact), "transact");
  EXPECT_EQ(to_string(RecordMode::put), "put");
  EXPECT_EQ(to_string(RecordMode::packed), "packed");
  EXPECT_TRUE(record_writes_fenced(RecordMode::transact));
  EXPECT_FALSE(record_writes_fenced(RecordMode::put));
  EXPECT_FALSE(record_writes_fenced(RecordMode::packed));
  EXPECT_EQ(checkpoint_of(Item{}), (Position{0, 0}));
  EXPECT_EQ(checkpoint_of(Item{{"last_seq", AttributeValue::number(int64_t{9})}}), (Position{0, 9}));
  EXPECT_EQ(checkpoint_of(Item{{"stream_epoch", AttributeValue::number("18446744073709551615")},
                               {"last_seq", AttributeValue::number(int64_t{3})}}),
            (Position{18446744073709551615ull, 3}));
}

TEST(ResumeRecordingShapes, ATransactionIsOnePutPerMessageThenTheLeaseUpdate) {
  const lease::LeaseConfig lease;
  const auto request = std::get<dynamo::TransactWriteItemsRequest>(
      record_transaction(lease, SinkTable{}, "c1", "w1", 4, messages(2, 1, 3), Position{}, Position{2, 3}, "tok"));
  ASSERT_EQ(request.transact_items.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    const auto& put = std::get<dynamo::TransactPut>(request.transact_items[i]);
    EXPECT_EQ(put.condition.table_name, "records");
    EXPECT_EQ(put.condition.condition_expression, "attribute_not_exists(pk)");
  }
  const auto& update = std::get<dynamo::TransactUpdate>(request.transact_items.back());
  EXPECT_EQ(update.condition.table_name, lease.table.name);
  EXPECT_EQ(update.key.at("pk").text(), "CONN#c1");
  EXPECT_EQ(update.update_expression, "SET stream_epoch = :se, last_seq = :s");
  EXPECT_EQ(request.client_request_token, "tok");
  const auto create = std::get<dynamo::CreateTableRequest>(create_sink_table_request(SinkTable{}));
  EXPECT_EQ(create.table_name, "records");
  ASSERT_EQ(create.key_schema.size(), 2u);
  EXPECT_EQ(create.key_schema[1].attribute_name, "seq");
  EXPECT_EQ(create.billing_mode, dynamo::BillingMode::pay_per_request);
}

}  // namespace
}  // namespace leaseproof::resume
