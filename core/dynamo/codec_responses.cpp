// Codec for response bodies.

#include <cmath>

#include "core/dynamo/codec_internal.hpp"

namespace leaseproof::dynamo {

using codec_detail::json;
using codec_detail::ObjectReader;

namespace {

void put_capacity(json& out, const std::optional<ConsumedCapacity>& capacity) {
  if (capacity) out["ConsumedCapacity"] = codec_detail::encode_consumed_capacity(*capacity);
}

std::optional<ConsumedCapacity> read_capacity(ObjectReader& reader) {
  const json* member = reader.object_member("ConsumedCapacity");
  if (member == nullptr) return std::nullopt;
  auto capacity = codec_detail::decode_consumed_capacity(*member);
  if (!capacity) {
    reader.fail(std::move(capacity).error());
    return std::nullopt;
  }
  return std::move(capacity).value();
}

json encode_capacity_list(const std::vector<ConsumedCapacity>& list) {
  json out = json::array();
  for (const auto& capacity : list) out.push_back(codec_detail::encode_consumed_capacity(capacity));
  return out;
}

std::vector<ConsumedCapacity> read_capacity_list(ObjectReader& reader) {
  std::vector<ConsumedCapacity> out;
  const json* list = reader.array_member("ConsumedCapacity");
  if (list == nullptr) return out;
  for (const auto& entry : *list) {
    auto capacity = codec_detail::decode_consumed_capacity(entry);
    if (!capacity) {
      reader.fail(std::move(capacity).error());
      return {};
    }
    out.push_back(std::move(capacity).value());
  }
  return out;
}

template <typename T>
Result<T> finish(ObjectReader& reader, T value) {
  if (!reader.ok()) return reader.take_error();
  return value;
}

template <Operation tag>
json encode_write_response(const WriteItemResponse<tag>& response) {
  json out = json::object();
  if (response.attributes) out["Attributes"] = encode(*response.attributes);
  put_capacity(out, response.consumed_capacity);
  return out;
}

template <Operation tag>
Result<WriteItemResponse<tag>> decode_write_response(const json& object) {
  ObjectReader reader(object);
  WriteItemResponse<tag> response;
  response.attributes = reader.item("Attributes");
  response.consumed_capacity = read_capacity(reader);
  return finish(reader, std::move(response));
}

json encode_description(const TableDescription& table) {
  json out = codec_detail::encode_table_shape(table.key_schema, table.attribute_definitions,
                                              table.global_secondary_indexes);
  out["TableName"] = table.table_name;
  out["TableStatus"] = table.table_status;
  out["ItemCount"] = table.item_count;
  out["TableSizeBytes"] = table.table_size_bytes;
  if (table.billing_mode) out["BillingModeSummary"] = {{"BillingMode", codec_detail::enum_name(*table.billing_mode)}};
  if (table.provisioned_throughput) {
    out["ProvisionedThroughput"] = codec_detail::encode_throughput(*table.provisioned_throughput);
  }
  if (table.creation_date_time_ms) {
    out["CreationDateTime"] = static_cast<double>(*table.creation_date_time_ms) / 1000.0;
  }
  return out;
}

Result<TableDescription> decode_description(const json& object) {
  ObjectReader reader(object);
  TableDescription table;
  table.table_name = reader.required_string("TableName");
  table.table_status = reader.string("TableStatus").value_or("ACTIVE");
  table.item_count = reader.integer("ItemCount").value_or(0);
  table.table_size_bytes = reader.integer("TableSizeBytes").value_or(0);
  if (const json* summary = reader.object_member("BillingModeSummary")) {
    ObjectReader inner(*summary);
    table.billing_mode = inner.enumeration<BillingMode>("BillingMode");
    if (!inner.ok()) reader.fail(inner.take_error());
  }
  table.provisioned_throughput = codec_detail::read_throughput(reader);
  if (const auto seconds = reader.number("CreationDateTime")) {
    table.creation_date_time_ms = static_cast<int64_t>(std::llround(*seconds * 1000.0));
  }
  if (!reader.ok()) return reader.take_error();
  auto shape = codec_detail::decode_table_shape(reader, table.key_schema, table.attribute_definitions,
                                                table.global_secondary_indexes);
  if (!shape) return std::move(shape).error();
  return table;
}

}  // namespace

json encode(const GetItemResponse& response) {
  json out = json::object();
  if (response.item) out["Item"] = encode(*response.item);
  put_capacity(out, response.consumed_capacity);
  return out;
}

template <>
Result<GetItemResponse> decode<GetItemResponse>(const json& object) {
  ObjectReader reader(object);
  GetItemResponse response;
  if (std::optional<Item> item = reader.item("Item")) response.item = std::make_shared<const Item>(std::move(*item));
  response.consumed_capacity = read_capacity(reader);
  return finish(reader, std::move(response));
}

json encode(const PutItemResponse& response) { return encode_write_response(response); }
json encode(const UpdateItemResponse& response) { return encode_write_response(response); }
json encode(const DeleteItemResponse& response) { return encode_write_response(response); }

template <>
Result<PutItemResponse> decode<PutItemResponse>(const json& object) {
  return decode_write_response<Operation::put_item>(object);
}
template <>
Result<UpdateItemResponse> decode<UpdateItemResponse>(const json& object) {
  return decode_write_response<Operation::update_item>(object);
}
template <>
Result<DeleteItemResponse> decode<DeleteItemResponse>(const json& object) {
  return decode_write_response<Operation::delete_item>(object);
}

json encode(const QueryResponse& response) {
  json out = {{"Count", response.count}, {"ScannedCount", response.scanned_count}};
  if (response.items) {
    json items = json::array();
    for (const auto& item : *response.items) items.push_back(encode(item));
    out["Items"] = items;
  }
  if (response.last_evaluated_key) out["LastEvaluatedKey"] = encode(*response.last_evaluated_key);
  put_capacity(out, response.consumed_capacity);
  return out;
}

template <>
Result<QueryResponse> decode<QueryResponse>(const json& object) {
  ObjectReader reader(object);
  QueryResponse response;
  if (const json* items = reader.array_member("Items")) {
    response.items.emplace();
    for (const auto& entry : *items) {
      auto item = decode<Item>(entry);
      if (!item) return std::move(item).error();
      response.items->push_back(std::move(item).value());
    }
  }
  response.count = reader.integer("Count").value_or(0);
  response.scanned_count = reader.integer("ScannedCount").value_or(0);
  response.last_evaluated_key = reader.item("LastEvaluatedKey");
  response.consumed_capacity = read_capacity(reader);
  return finish(reader, std::move(response));
}

json encode(const BatchWriteItemResponse& response) {
  // DynamoDB always sends UnprocessedItems, as {} when everything was written.
  json out = {{"UnprocessedItems", codec_detail::encode_write_requests(response.unprocessed_items)}};
  if (!response.consumed_capacity.empty()) out["ConsumedCapacity"] = encode_capacity_list(response.consumed_capacity);
  return out;
}

template <>
Result<BatchWriteItemResponse> decode<BatchWriteItemResponse>(const json& object) {
  ObjectReader reader(object);
  BatchWriteItemResponse response;
  if (const json* unprocessed = reader.object_member("UnprocessedItems")) {
    auto writes = codec_detail::decode_write_requests(*unprocessed);
    if (!writes) return std::move(writes).error();
    response.unprocessed_items = std::move(writes).value();
  }
  response.consumed_capacity = read_capacity_list(reader);
  return finish(reader, std::move(response));
}

json encode(const TransactWriteItemsResponse& response) {
  json out = json::object();
  if (!response.consumed_capacity.empty()) out["ConsumedCapacity"] = encode_capacity_list(response.consumed_capacity);
  return out;
}

template <>
Result<TransactWriteItemsResponse> decode<TransactWriteItemsResponse>(const json& object) {
  ObjectReader reader(object);
  TransactWriteItemsResponse response;
  response.consumed_capacity = read_capacity_list(reader);
  return finish(reader, std::move(response));
}

json encode(const CreateTableResponse& response) {
  return {{"TableDescription", encode_description(response.table_description)}};
}

template <>
Result<CreateTableResponse> decode<CreateTableResponse>(const json& object) {
  ObjectReader reader(object);
  const json* description = reader.object_member("TableDescription");
  if (description == nullptr && reader.ok()) reader.fail(codec_detail::missing_member("TableDescription"));
  if (!reader.ok()) return reader.take_error();
  auto table = decode_description(*description);
  if (!table) return std::move(table).error();
  return CreateTableResponse{std::move(table).value()};
}

json encode(const Response& response) {
  return std::visit([](const auto& body) { return encode(body); }, response);
}

namespace {

template <std::size_t index>
Result<Response> decode_response_alternative(const json& body) {
  using Alternative = std::variant_alternative_t<index, Response>;
  auto decoded = decode<Alternative>(body);
  if (!decoded) return std::move(decoded).error();
  return Response{std::in_place_index<index>, std::move(decoded).value()};
}

template <std::size_t... indexes>
Result<Response> decode_response_at(std::size_t which, const json& body, std::index_sequence<indexes...>) {
  std::optional<Result<Response>> out;
  ((which == indexes ? (out.emplace(decode_response_alternative<indexes>(body)), true) : false) || ...);
  LP_ASSERT(out.has_value());
  return std::move(*out);
}

}  // namespace

Result<Response> decode_response(Operation operation, const json& body) {
  return decode_response_at(static_cast<std::size_t>(operation), body,
                            std::make_index_sequence<std::variant_size_v<Response>>{});
}

}  // namespace leaseproof::dynamo
