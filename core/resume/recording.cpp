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
constexpr const char* kCheckpointUpdate = kCheckpointUpdateExpression;

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

constexpr const char* kPayload = "payload";
constexpr size_t kPayloadNameBytes = 7;  // strlen(kPayload): a string's size is its name's plus its text's

// A pack's item, with its payload stand-in (`bytes` long) or without it.
Item pack_item(std::string_view connection, std::string_view worker, int64_t lease_epoch, const Message& first,
               const Message& last, size_t messages, uint64_t bytes, bool payload) {
  Item item;
  item.reserve(8);
  item.emplace_sorted("bytes", N(static_cast<int64_t>(bytes)));
  item.emplace_sorted("last_seq", N(last.seq));
  item.emplace_sorted("lease_epoch", N(lease_epoch));
  item.emplace_sorted("messages", N(static_cast<int64_t>(messages)));
  if (payload) item.emplace_sorted(kPayload, S(std::string(bytes, '.')));
  item.emplace_sorted("pk", S(sink_key(connection, first.epoch)));
  item.emplace_sorted("recorded_by", S(worker));
  item.emplace_sorted("seq", N(first.seq));
  return item;
}

std::optional<uint64_t> unsigned_number(const Item& item, const char* name) {
  auto it = item.find(name);
  if (it == item.end() || !it->second.is(dynamo::AttributeType::n)) return std::nullopt;
  return parse_integer<uint64_t>(it->second.text());
}

}  // namespace

std::string_view to_string(RecordMode mode) {
  switch (mode) {
    case RecordMode::transact: return "transact";
    case RecordMode::put: return "put";
    case RecordMode::packed: return "packed";
  }
  return "?";
}

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

dynamo::Request record_pack(const SinkTable& sink, std::string_view connection, std::string_view worker,
                            int64_t lease_epoch, std::span<const Message> messages) {
  LP_ASSERT(!messages.empty());
  uint64_t bytes = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    LP_ASSERT_MSG(messages[i].epoch == messages.front().epoch && messages[i].seq == messages.front().seq + int64_t(i),
                  "a pack's messages are consecutive in one hub epoch");
    bytes += messages[i].bytes;
  }
  dynamo::PutItemRequest request;
  request.table_name = sink.name;
  request.item =
      pack_item(connection, worker, lease_epoch, messages.front(), messages.back(), messages.size(), bytes, true);
  request.write.condition_expression = kRecordAbsent;
  request.write.return_values_on_condition_check_failure = dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  return request;
}

size_t pack_length(std::string_view connection, std::string_view worker, int64_t lease_epoch,
                   std::span<const Message> messages, uint32_t pack_bytes) {
  LP_ASSERT(!messages.empty());
  uint64_t bytes = messages.front().bytes;
  size_t count = 1;
  while (count < messages.size() && messages[count].epoch == messages.front().epoch &&
         messages[count].seq == messages[count - 1].seq + 1) {
    const uint64_t more = bytes + messages[count].bytes;
    const size_t size = dynamo::item_size_bytes(pack_item(connection, worker, lease_epoch, messages.front(),
                                                          messages[count], count + 1, more, false)) +
                        kPayloadNameBytes + more;
    if (size > pack_bytes) break;
    bytes = more;
    ++count;
  }
  return count;
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
  query.projection_expression = "seq, last_seq";
  query.scan_index_forward = false;
  query.limit = 1;
  query.consistent_read = true;
  return query;
}

int64_t last_record_seq(const dynamo::QueryResponse& response) {
  if (!response.items || response.items->empty()) return 0;
  const std::optional<int64_t> last = record_last_seq(response.items->front());
  LP_ASSERT_MSG(last.has_value(), "a sink record without seq");
  return *last;
}

std::optional<int64_t> record_last_seq(const dynamo::Item& record) {
  for (const char* name : {"last_seq", "seq"}) {
    auto it = record.find(name);
    if (it != record.end() && it->second.is(dynamo::AttributeType::n)) return parse_integer<int64_t>(it->second.text());
  }
  return std::nullopt;
}

}  // namespace leaseproof::resume
