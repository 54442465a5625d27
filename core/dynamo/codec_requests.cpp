// Codec for request bodies.

#include <fmt/format.h>

#include "core/dynamo/codec_internal.hpp"

namespace leaseproof::dynamo {

using codec_detail::enum_name;
using codec_detail::json;
using codec_detail::ObjectReader;

namespace {

void put_optional(json& out, const char* member, const std::optional<std::string>& value) {
  if (value) out[member] = *value;
}

void put_expression_maps(json& out, const ExpressionAttributeNames& names, const ExpressionAttributeValues& values) {
  if (!names.empty()) out["ExpressionAttributeNames"] = codec_detail::encode_names(names);
  if (!values.empty()) out["ExpressionAttributeValues"] = encode(values);
}

void put_capacity_mode(json& out, ReturnConsumedCapacity mode) {
  if (mode != ReturnConsumedCapacity::none) out["ReturnConsumedCapacity"] = enum_name(mode);
}

void put_conditional_write(json& out, const ConditionalWrite& write) {
  put_optional(out, "ConditionExpression", write.condition_expression);
  put_expression_maps(out, write.expression_attribute_names, write.expression_attribute_values);
  if (write.return_values != ReturnValues::none) out["ReturnValues"] = enum_name(write.return_values);
  if (write.return_values_on_condition_check_failure != ReturnValuesOnConditionCheckFailure::none) {
    out["ReturnValuesOnConditionCheckFailure"] = enum_name(write.return_values_on_condition_check_failure);
  }
  put_capacity_mode(out, write.return_consumed_capacity);
}

ConditionalWrite read_conditional_write(ObjectReader& reader) {
  ConditionalWrite write;
  write.condition_expression = reader.string("ConditionExpression");
  write.expression_attribute_names = reader.names("ExpressionAttributeNames");
  write.expression_attribute_values = reader.values("ExpressionAttributeValues");
  write.return_values = reader.enumeration<ReturnValues>("ReturnValues").value_or(ReturnValues::none);
  write.return_values_on_condition_check_failure =
      reader.enumeration<ReturnValuesOnConditionCheckFailure>("ReturnValuesOnConditionCheckFailure")
          .value_or(ReturnValuesOnConditionCheckFailure::none);
  write.return_consumed_capacity =
      reader.enumeration<ReturnConsumedCapacity>("ReturnConsumedCapacity").value_or(ReturnConsumedCapacity::none);
  return write;
}

template <typename T>
Result<T> finish(ObjectReader& reader, T value) {
  if (!reader.ok()) return reader.take_error();
  return value;
}

json encode_transact_condition(const TransactCondition& condition) {
  json out = {{"TableName", condition.table_name}};
  put_optional(out, "ConditionExpression", condition.condition_expression);
  put_expression_maps(out, condition.expression_attribute_names, condition.expression_attribute_values);
  if (condition.return_values_on_condition_check_failure != ReturnValuesOnConditionCheckFailure::none) {
    out["ReturnValuesOnConditionCheckFailure"] = enum_name(condition.return_values_on_condition_check_failure);
  }
  return out;
}

TransactCondition read_transact_condition(ObjectReader& reader) {
  TransactCondition condition;
  condition.table_name = reader.required_string("TableName");
  condition.condition_expression = reader.string("ConditionExpression");
  condition.expression_attribute_names = reader.names("ExpressionAttributeNames");
  condition.expression_attribute_values = reader.values("ExpressionAttributeValues");
  condition.return_values_on_condition_check_failure =
      reader.enumeration<ReturnValuesOnConditionCheckFailure>("ReturnValuesOnConditionCheckFailure")
          .value_or(ReturnValuesOnConditionCheckFailure::none);
  return condition;
}

json encode_transact_item(const TransactWriteItem& action) {
  if (const auto* put = std::get_if<TransactPut>(&action)) {
    json body = encode_transact_condition(put->condition);
    body["Item"] = encode(put->item);
    return {{"Put", body}};
  }
  if (const auto* update = std::get_if<TransactUpdate>(&action)) {
    json body = encode_transact_condition(update->condition);
    body["Key"] = encode(update->key);
    body["UpdateExpression"] = update->update_expression;
    return {{"Update", body}};
  }
  if (const auto* del = std::get_if<TransactDelete>(&action)) {
    json body = encode_transact_condition(del->condition);
    body["Key"] = encode(del->key);
    return {{"Delete", body}};
  }
  const auto& check = std::get<TransactConditionCheck>(action);
  json body = encode_transact_condition(check.condition);
  body["Key"] = encode(check.key);
  return {{"ConditionCheck", body}};
}

Result<TransactWriteItem> decode_transact_item(const json& object) {
  ObjectReader outer(object);
  static constexpr std::array<std::string_view, 4> kinds = {"Put", "Update", "Delete", "ConditionCheck"};
  const json* body = nullptr;
  std::size_t kind = 0;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const json* candidate = outer.object_member(kinds[i]);
    if (candidate == nullptr) continue;
    if (body != nullptr) return validation_error("TransactItems can only contain one of Check, Put, Update or Delete");
    body = candidate;
    kind = i;
  }
  if (!outer.ok()) return outer.take_error();
  if (body == nullptr) return validation_error("TransactItems can only contain one of Check, Put, Update or Delete");
  ObjectReader reader(*body);
  TransactCondition condition = read_transact_condition(reader);
  switch (kind) {
    case 0: return finish<TransactWriteItem>(reader, TransactPut{reader.required_item("Item"), condition});
    case 1: {
      Item key = reader.required_item("Key");
      std::string update = reader.required_string("UpdateExpression");
      return finish<TransactWriteItem>(reader, TransactUpdate{std::move(key), std::move(update), condition});
    }
    case 2: return finish<TransactWriteItem>(reader, TransactDelete{reader.required_item("Key"), condition});
    default: {
      Item key = reader.required_item("Key");
      if (!condition.condition_expression) reader.fail(codec_detail::missing_member("ConditionExpression"));
      return finish<TransactWriteItem>(reader, TransactConditionCheck{std::move(key), condition});
    }
  }
}

}  // namespace

namespace codec_detail {

json encode_key_schema(const KeySchema& schema) {
  json out = json::array();
  for (const auto& element : schema) {
    out.push_back({{"AttributeName", element.attribute_name}, {"KeyType", enum_name(element.key_type)}});
  }
  return out;
}

Result<KeySchema> decode_key_schema(const json* array) {
  KeySchema out;
  if (array == nullptr) return out;
  for (const auto& entry : *array) {
    ObjectReader reader(entry);
    KeySchemaElement element{reader.required_string("AttributeName"),
                             reader.enumeration<KeyType>("KeyType").value_or(KeyType::hash)};
    if (reader.ok() && reader.member("KeyType") == nullptr) reader.fail(codec_detail::missing_member("KeyType"));
    if (!reader.ok()) return reader.take_error();
    out.push_back(std::move(element));
  }
  return out;
}

json encode_throughput(const ProvisionedThroughput& throughput) {
  return {{"ReadCapacityUnits", throughput.read_capacity_units},
          {"WriteCapacityUnits", throughput.write_capacity_units}};
}

std::optional<ProvisionedThroughput> read_throughput(ObjectReader& reader) {
  const json* member = reader.object_member("ProvisionedThroughput");
  if (member == nullptr) return std::nullopt;
  ObjectReader inner(*member);
  ProvisionedThroughput out{inner.integer("ReadCapacityUnits").value_or(0),
                            inner.integer("WriteCapacityUnits").value_or(0)};
  if (!inner.ok()) reader.fail(inner.take_error());
  return out;
}

json encode_gsi(const GlobalSecondaryIndex& index) {
  json projection = {{"ProjectionType", enum_name(index.projection.projection_type)}};
  if (!index.projection.non_key_attributes.empty()) projection["NonKeyAttributes"] = index.projection.non_key_attributes;
  json out = {{"IndexName", index.index_name}, {"KeySchema", encode_key_schema(index.key_schema)},
              {"Projection", projection}};
  if (index.provisioned_throughput) out["ProvisionedThroughput"] = encode_throughput(*index.provisioned_throughput);
  if (index.index_status) out["IndexStatus"] = *index.index_status;
  return out;
}

Result<GlobalSecondaryIndex> decode_gsi(const json& object) {
  ObjectReader reader(object);
  GlobalSecondaryIndex index;
  index.index_name = reader.required_string("IndexName");
  auto schema = decode_key_schema(reader.array_member("KeySchema"));
  if (!schema) return std::move(schema).error();
  index.key_schema = std::move(schema).value();
  if (const json* projection = reader.object_member("Projection")) {
    ObjectReader inner(*projection);
    index.projection.projection_type = inner.enumeration<ProjectionType>("ProjectionType").value_or(ProjectionType::all);
    index.projection.non_key_attributes = inner.strings("NonKeyAttributes");
    if (!inner.ok()) reader.fail(inner.take_error());
  } else if (reader.ok()) {
    reader.fail(missing_member("Projection"));
  }
  index.provisioned_throughput = read_throughput(reader);
  index.index_status = reader.string("IndexStatus");
  return finish(reader, std::move(index));
}

json encode_table_shape(const KeySchema& key_schema, const std::vector<AttributeDefinition>& definitions,
                        const std::vector<GlobalSecondaryIndex>& indexes) {
  json out = {{"KeySchema", encode_key_schema(key_schema)}, {"AttributeDefinitions", json::array()}};
  for (const auto& definition : definitions) {
    out["AttributeDefinitions"].push_back(
        {{"AttributeName", definition.attribute_name}, {"AttributeType", enum_name(definition.attribute_type)}});
  }
  if (!indexes.empty()) {
    out["GlobalSecondaryIndexes"] = json::array();
    for (const auto& index : indexes) out["GlobalSecondaryIndexes"].push_back(encode_gsi(index));
  }
  return out;
}

// Reads KeySchema, AttributeDefinitions and GlobalSecondaryIndexes.
Result<void> decode_table_shape(ObjectReader& reader, KeySchema& key_schema,
                                std::vector<AttributeDefinition>& definitions,
                                std::vector<GlobalSecondaryIndex>& indexes) {
  auto schema = decode_key_schema(reader.array_member("KeySchema"));
  if (!schema) return std::move(schema).error();
  key_schema = std::move(schema).value();
  if (const json* array = reader.array_member("AttributeDefinitions")) {
    for (const auto& entry : *array) {
      ObjectReader inner(entry);
      AttributeDefinition definition{inner.required_string("AttributeName"),
                                     inner.enumeration<ScalarAttributeType>("AttributeType")
                                         .value_or(ScalarAttributeType::s)};
      if (!inner.ok()) return inner.take_error();
      definitions.push_back(std::move(definition));
    }
  }
  if (const json* array = reader.array_member("GlobalSecondaryIndexes")) {
    for (const auto& entry : *array) {
      auto index = decode_gsi(entry);
      if (!index) return std::move(index).error();
      indexes.push_back(std::move(index).value());
    }
  }
  if (!reader.ok()) return reader.take_error();
  return {};
}

}  // namespace codec_detail

json encode(const GetItemRequest& request) {
  json out = {{"TableName", request.table_name}, {"Key", encode(request.key)}};
  if (request.consistent_read) out["ConsistentRead"] = true;
  put_optional(out, "ProjectionExpression", request.projection_expression);
  if (!request.expression_attribute_names.empty()) {
    out["ExpressionAttributeNames"] = codec_detail::encode_names(request.expression_attribute_names);
  }
  put_capacity_mode(out, request.return_consumed_capacity);
  return out;
}

template <>
Result<GetItemRequest> decode<GetItemRequest>(const json& object) {
  ObjectReader reader(object);
  GetItemRequest request;
  request.table_name = reader.required_string("TableName");
  request.key = reader.required_item("Key");
  request.consistent_read = reader.boolean("ConsistentRead", false);
  request.projection_expression = reader.string("ProjectionExpression");
  request.expression_attribute_names = reader.names("ExpressionAttributeNames");
  request.return_consumed_capacity =
      reader.enumeration<ReturnConsumedCapacity>("ReturnConsumedCapacity").value_or(ReturnConsumedCapacity::none);
  return finish(reader, std::move(request));
}

json encode(const PutItemRequest& request) {
  json out = {{"TableName", request.table_name}, {"Item", encode(request.item)}};
  put_conditional_write(out, request.write);
  return out;
}

template <>
Result<PutItemRequest> decode<PutItemRequest>(const json& object) {
  ObjectReader reader(object);
  PutItemRequest request;
  request.table_name = reader.required_string("TableName");
  request.item = reader.required_item("Item");
  request.write = read_conditional_write(reader);
  return finish(reader, std::move(request));
}

json encode(const UpdateItemRequest& request) {
  json out = {{"TableName", request.table_name}, {"Key", encode(request.key)}};
  put_optional(out, "UpdateExpression", request.update_expression);
  put_conditional_write(out, request.write);
  return out;
}

template <>
Result<UpdateItemRequest> decode<UpdateItemRequest>(const json& object) {
  ObjectReader reader(object);
  UpdateItemRequest request;
  request.table_name = reader.required_string("TableName");
  request.key = reader.required_item("Key");
  request.update_expression = reader.string("UpdateExpression");
  request.write = read_conditional_write(reader);
  return finish(reader, std::move(request));
}

json encode(const DeleteItemRequest& request) {
  json out = {{"TableName", request.table_name}, {"Key", encode(request.key)}};
  put_conditional_write(out, request.write);
  return out;
}

template <>
Result<DeleteItemRequest> decode<DeleteItemRequest>(const json& object) {
  ObjectReader reader(object);
  DeleteItemRequest request;
  request.table_name = reader.required_string("TableName");
  request.key = reader.required_item("Key");
  request.write = read_conditional_write(reader);
  return finish(reader, std::move(request));
}

json encode(const QueryRequest& request) {
  json out = {{"TableName", request.table_name}};
  put_optional(out, "IndexName", request.index_name);
  put_optional(out, "KeyConditionExpression", request.key_condition_expression);
  put_optional(out, "FilterExpression", request.filter_expression);
  put_optional(out, "ProjectionExpression", request.projection_expression);
  put_expression_maps(out, request.expression_attribute_names, request.expression_attribute_values);
  if (request.limit) out["Limit"] = *request.limit;
  if (request.exclusive_start_key) out["ExclusiveStartKey"] = encode(*request.exclusive_start_key);
  if (!request.scan_index_forward) out["ScanIndexForward"] = false;
  if (request.select) out["Select"] = enum_name(*request.select);
  if (request.consistent_read) out["ConsistentRead"] = true;
  put_capacity_mode(out, request.return_consumed_capacity);
  return out;
}

template <>
Result<QueryRequest> decode<QueryRequest>(const json& object) {
  ObjectReader reader(object);
  QueryRequest request;
  request.table_name = reader.required_string("TableName");
  request.index_name = reader.string("IndexName");
  request.key_condition_expression = reader.string("KeyConditionExpression");
  request.filter_expression = reader.string("FilterExpression");
  request.projection_expression = reader.string("ProjectionExpression");
  request.expression_attribute_names = reader.names("ExpressionAttributeNames");
  request.expression_attribute_values = reader.values("ExpressionAttributeValues");
  request.limit = reader.integer("Limit");
  if (request.limit && *request.limit < 1) {
    reader.fail(validation_error(fmt::format(
        "1 validation error detected: Value '{}' at 'limit' failed to satisfy constraint: "
        "Member must have value greater than or equal to 1",
        *request.limit)));
  }
  request.exclusive_start_key = reader.item("ExclusiveStartKey");
  request.scan_index_forward = reader.boolean("ScanIndexForward", true);
  request.select = reader.enumeration<Select>("Select");
  request.consistent_read = reader.boolean("ConsistentRead", false);
  request.return_consumed_capacity =
      reader.enumeration<ReturnConsumedCapacity>("ReturnConsumedCapacity").value_or(ReturnConsumedCapacity::none);
  return finish(reader, std::move(request));
}

json encode(const BatchWriteItemRequest& request) {
  json out = {{"RequestItems", codec_detail::encode_write_requests(request.request_items)}};
  put_capacity_mode(out, request.return_consumed_capacity);
  return out;
}

template <>
Result<BatchWriteItemRequest> decode<BatchWriteItemRequest>(const json& object) {
  ObjectReader reader(object);
  BatchWriteItemRequest request;
  const json* items = reader.object_member("RequestItems");
  if (items == nullptr && reader.ok()) reader.fail(codec_detail::missing_member("RequestItems"));
  if (!reader.ok()) return reader.take_error();
  auto writes = codec_detail::decode_write_requests(*items);
  if (!writes) return std::move(writes).error();
  request.request_items = std::move(writes).value();
  request.return_consumed_capacity =
      reader.enumeration<ReturnConsumedCapacity>("ReturnConsumedCapacity").value_or(ReturnConsumedCapacity::none);
  return finish(reader, std::move(request));
}

json encode(const TransactWriteItemsRequest& request) {
  json items = json::array();
  for (const auto& action : request.transact_items) items.push_back(encode_transact_item(action));
  json out = {{"TransactItems", items}};
  put_optional(out, "ClientRequestToken", request.client_request_token);
  put_capacity_mode(out, request.return_consumed_capacity);
  return out;
}

template <>
Result<TransactWriteItemsRequest> decode<TransactWriteItemsRequest>(const json& object) {
  ObjectReader reader(object);
  TransactWriteItemsRequest request;
  const json* items = reader.array_member("TransactItems");
  if (items == nullptr && reader.ok()) reader.fail(codec_detail::missing_member("TransactItems"));
  if (!reader.ok()) return reader.take_error();
  for (const auto& entry : *items) {
    auto action = decode_transact_item(entry);
    if (!action) return std::move(action).error();
    request.transact_items.push_back(std::move(action).value());
  }
  request.client_request_token = reader.string("ClientRequestToken");
  request.return_consumed_capacity =
      reader.enumeration<ReturnConsumedCapacity>("ReturnConsumedCapacity").value_or(ReturnConsumedCapacity::none);
  return finish(reader, std::move(request));
}

json encode(const CreateTableRequest& request) {
  json out = codec_detail::encode_table_shape(request.key_schema, request.attribute_definitions,
                                              request.global_secondary_indexes);
  out["TableName"] = request.table_name;
  if (request.billing_mode) out["BillingMode"] = enum_name(*request.billing_mode);
  if (request.provisioned_throughput) out["ProvisionedThroughput"] = codec_detail::encode_throughput(*request.provisioned_throughput);
  return out;
}

template <>
Result<CreateTableRequest> decode<CreateTableRequest>(const json& object) {
  ObjectReader reader(object);
  CreateTableRequest request;
  request.table_name = reader.required_string("TableName");
  if (reader.ok() && reader.member("KeySchema") == nullptr) reader.fail(codec_detail::missing_member("KeySchema"));
  if (!reader.ok()) return reader.take_error();
  auto shape = codec_detail::decode_table_shape(reader, request.key_schema, request.attribute_definitions,
                                                request.global_secondary_indexes);
  if (!shape) return std::move(shape).error();
  request.billing_mode = reader.enumeration<BillingMode>("BillingMode");
  request.provisioned_throughput = codec_detail::read_throughput(reader);
  return finish(reader, std::move(request));
}

json encode(const Request& request) {
  return std::visit([](const auto& body) { return encode(body); }, request);
}

namespace {

template <std::size_t index>
Result<Request> decode_alternative(const json& body) {
  using Alternative = std::variant_alternative_t<index, Request>;
  auto decoded = decode<Alternative>(body);
  if (!decoded) return std::move(decoded).error();
  return Request{std::in_place_index<index>, std::move(decoded).value()};
}

template <std::size_t... indexes>
Result<Request> decode_request_at(std::size_t which, const json& body, std::index_sequence<indexes...>) {
  std::optional<Result<Request>> out;
  ((which == indexes ? (out.emplace(decode_alternative<indexes>(body)), true) : false) || ...);
  LP_ASSERT(out.has_value());
  return std::move(*out);
}

}  // namespace

Result<Request> decode_request(std::string_view target, const json& body) {
  auto operation = operation_from_target(target);
  if (!operation) return std::move(operation).error();
  return decode_request_at(static_cast<std::size_t>(*operation), body,
                           std::make_index_sequence<std::variant_size_v<Request>>{});
}

Result<Request> decode_request_text(std::string_view target, std::string_view body) {
  auto operation = operation_from_target(target);
  if (!operation) return std::move(operation).error();
  auto parsed = parse_json(body);
  if (!parsed) return std::move(parsed).error();
  return decode_request(target, *parsed);
}

}  // namespace leaseproof::dynamo
