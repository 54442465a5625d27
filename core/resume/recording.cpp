// The sink-recording requests, as pure functions, so that every condition that
// keeps the sink exactly-once and fenced is in one place.
#include "core/resume/recording.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>

#include "base/assert.hpp"
#include "base/integer_text.hpp"
#include "core/lease/requests.hpp"

namespace leaseproof::resume {
namespace {

using dynamo::AttributeValue;
using dynamo::Item;

// TransactWriteItems takes at most 100 actions; one is the lease item.
constexpr size_t kTransactMessagesMax = 99;
// DynamoDB's ClientRequestToken is 1..36 characters.
constexpr size_t kClientRequestTokenMax = 36;

AttributeValue S(std::string_view text) { return AttributeValue::string(std::string{text}); }
AttributeValue N(int64_t value) { return AttributeValue::number(value); }
// Hub epochs are unsigned and may exceed int64: written as decimal text.
AttributeValue N(uint64_t value) { return AttributeValue::number(fmt::format(FMT_COMPILE("{}"), value)); }

// The conditional put that makes recording a message idempotent: a second
// write of the same (connection#epoch, seq) is refused, never duplicated.
constexpr const char* kRecordAbsent = "attribute_not_exists(pk)";

// One per message: built in name order, each member appended (no brace
// list to copy from and sort).
Item record_item(std::string_view connection, std::string_view worker, int64_t lease_epoch, const Message& message) {
  Item item;
  item.reserve(5);
  item.emplace_sorted("bytes", N(int64_t{message.bytes}));
  item.emplace_sorted("lease_epoch", N(lease_epoch));
  item.emplace_sorted("pk", S(sink_key(connection, message.epoch)));
  item.emplace_sorted("recorded_by", S(worker));
  item.emplace_sorted("seq", N(message.seq));
  return item;
}

// The fenced checkpoint: only the current owner under its current lease
// epoch, and only forward (a later epoch, or a later seq in the same epoch).
// A replayed or reordered write at or behind the stored checkpoint is refused.
constexpr const char* kCheckpointCondition =
    "lease_owner = :me AND lease_epoch = :epoch AND (attribute_not_exists(stream_epoch) OR stream_epoch < :se OR "
    "(stream_epoch = :se AND last_seq < :s))";
constexpr const char* kCheckpointUpdate = "SET stream_epoch = :se, last_seq = :s";

dynamo::ExpressionAttributeValues checkpoint_values(std::string_view worker, int64_t lease_epoch, Position through) {
  dynamo::ExpressionAttributeValues values;  // in name order, as record_item
  values.reserve(4);
  values.emplace_sorted(":epoch", N(lease_epoch));
  values.emplace_sorted(":me", S(worker));
  values.emplace_sorted(":s", N(through.seq));
  values.emplace_sorted(":se", N(through.epoch));
  return values;
}

Item lease_key(std::string_view connection) {
  Item key;
  key.reserve(1);
  key.emplace_sorted("pk", S(lease::connection_key(connection)));
  return key;
}

void check_batch(const std::vector<Message>& messages, Position previous, Position through) {
  LP_ASSERT(!messages.empty());
  Position last = previous;
  for (const Message& message : messages) {
    const Position position{message.epoch, message.seq};
    LP_ASSERT_MSG(before(last, position), "batch out of order: ({}, {}) after ({}, {})", message.epoch,
                  message.seq, last.epoch, last.seq);
    last = position;
  }
  LP_ASSERT_MSG(last == through, "batch ends at ({}, {}), through is ({}, {})", last.epoch, last.seq, through.epoch,
                through.seq);
}

std::optional<uint64_t> unsigned_number(const Item& item, const char* name) {
  auto it = item.find(name);
  if (it == item.end() || !it->second.is(dynamo::AttributeType::n)) return std::nullopt;
  return parse_integer<uint64_t>(it->second.text());
}

}  // namespace

std::string_view to_string(RecordMode mode) { return mode == RecordMode::transact ? "transact" : "put"; }

std::string sink_key(std::string_view connection, uint64_t hub_epoch) {
  return fmt::format(FMT_COMPILE("{}#{}"), connection, hub_epoch);  // one per record: compiled
}

dynamo::Request create_sink_table_request(const SinkTable& sink) {
  dynamo::CreateTableRequest request;
  request.table_name = sink.name;
  request.billing_mode = dynamo::BillingMode::pay_per_request;
  request.key_schema = {dynamo::KeySchemaElement{"pk", dynamo::KeyType::hash},
                        dynamo::KeySchemaElement{"seq", dynamo::KeyType::range}};
  request.attribute_definitions = {dynamo::AttributeDefinition{"pk", dynamo::ScalarAttributeType::s},
                                   dynamo::AttributeDefinition{"seq", dynamo::ScalarAttributeType::n}};
  return request;
}

dynamo::Request record_transaction(const lease::LeaseConfig& lease, const SinkTable& sink,
                                   std::string_view connection, std::string_view worker, int64_t lease_epoch,
                                   const std::vector<Message>& messages, Position previous, Position through,
                                   std::string_view token) {
  check_batch(messages, previous, through);
  LP_ASSERT_LE(messages.size(), kTransactMessagesMax);
  LP_ASSERT_LE(token.size(), kClientRequestTokenMax);
  dynamo::TransactWriteItemsRequest request;
  for (const Message& message : messages) {
    dynamo::TransactPut put;
    put.item = record_item(connection, worker, lease_epoch, message);
    put.condition.table_name = sink.name;
    put.condition.condition_expression = kRecordAbsent;
    request.transact_items.emplace_back(std::move(put));
  }
  // The checkpoint rides in the same transaction: records and checkpoint are
  // written together or not at all, and a stale owner writes neither.
  dynamo::TransactUpdate checkpoint;
  checkpoint.key = lease_key(connection);
  checkpoint.update_expression = kCheckpointUpdate;
  checkpoint.condition.table_name = lease.table.name;
  checkpoint.condition.condition_expression = kCheckpointCondition;
  checkpoint.condition.expression_attribute_values = checkpoint_values(worker, lease_epoch, through);
  request.transact_items.emplace_back(std::move(checkpoint));
  if (!token.empty()) request.client_request_token = std::string{token};
  return request;
}

dynamo::Request record_put(const SinkTable& sink, std::string_view connection, std::string_view worker,
                           int64_t lease_epoch, const Message& message) {
  dynamo::PutItemRequest request;
  request.table_name = sink.name;
  request.item = record_item(connection, worker, lease_epoch, message);
  request.write.condition_expression = kRecordAbsent;
  return request;
}

dynamo::Request checkpoint_position(const lease::LeaseConfig& lease, std::string_view connection,
                                    std::string_view worker, int64_t lease_epoch, Position previous,
                                    Position through) {
  LP_ASSERT_MSG(before(previous, through), "checkpoint ({}, {}) not after ({}, {})", through.epoch, through.seq,
                previous.epoch, previous.seq);
  dynamo::UpdateItemRequest request;
  request.table_name = lease.table.name;
  request.key = lease_key(connection);
  request.update_expression = kCheckpointUpdate;
  request.write.condition_expression = kCheckpointCondition;
  request.write.expression_attribute_values = checkpoint_values(worker, lease_epoch, through);
  return request;
}

bool checkpoint_applied(const std::optional<dynamo::Item>& lease_item, std::string_view worker, int64_t lease_epoch,
                        Position through) {
  if (!lease_item) return false;
  const std::optional<lease::LeaseView> lease = lease::parse_lease(*lease_item);
  if (!lease || lease->owner != worker || lease->epoch != lease_epoch) return false;
  return !before(checkpoint_of(*lease_item), through);
}

Position checkpoint_of(const dynamo::Item& lease_item) {
  Position position;
  position.epoch = unsigned_number(lease_item, "stream_epoch").value_or(0);
  auto it = lease_item.find("last_seq");
  if (it != lease_item.end() && it->second.is(dynamo::AttributeType::n)) {
    if (const auto seq = parse_integer<int64_t>(it->second.text())) position.seq = *seq;
  }
  return position;
}

dynamo::Request last_record_query(const SinkTable& sink, std::string_view connection, uint64_t hub_epoch) {
  dynamo::QueryRequest query;
  query.table_name = sink.name;
  query.key_condition_expression = "pk = :pk";
  query.expression_attribute_values = {{":pk", dynamo::AttributeValue::string(sink_key(connection, hub_epoch))}};
  query.projection_expression = "seq";
  query.scan_index_forward = false;
  query.limit = 1;
  query.consistent_read = true;
  return query;
}

int64_t last_record_seq(const dynamo::QueryResponse& response) {
  if (!response.items || response.items->empty()) return 0;
  const auto seq = response.items->front().find("seq");
  LP_ASSERT_MSG(seq != response.items->front().end(), "a sink record without seq");
  return std::stoll(seq->second.text());
}

}  // namespace leaseproof::resume
