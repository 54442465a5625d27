// Codec for attribute values, items, errors and the pieces shared by several
// operations. Messages marked "guessed" follow DynamoDB's style where its
// exact text for that input is not documented.

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/dynamo/decimal.hpp"
#include "core/dynamo/base64.hpp"
#include "core/dynamo/codec_internal.hpp"

namespace leaseproof::dynamo {

using codec_detail::json;

namespace codec_detail {

// Nested maps and lists deeper than this are rejected (DynamoDB supports 32
// levels); the bound also keeps the recursive decoder's stack small.
constexpr int attribute_depth_max = 32;

std::string camel_case(std::string_view member) {
  std::string out(member);
  if (!out.empty() && out[0] >= 'A' && out[0] <= 'Z') out[0] = static_cast<char>(out[0] - 'A' + 'a');
  return out;
}

DynamoError missing_member(std::string_view name) {
  return validation_error(fmt::format(
      "1 validation error detected: Value null at '{}' failed to satisfy constraint: Member must not be null",
      camel_case(name)));
}

DynamoError wrong_json_type(std::string_view name, std::string_view expected) {
  // Guessed: DynamoDB's SerializationException texts name Java types.
  return serialization_error(fmt::format("Member '{}' must be {}", name, expected));
}

ObjectReader::ObjectReader(const json& object) : object_(object) {
  if (!object_.is_object()) error_ = serialization_error("Start of structure or map expected");
}

DynamoError ObjectReader::take_error() {
  LP_ASSERT(error_.has_value());
  return std::move(*error_);
}

void ObjectReader::fail(DynamoError error) {
  if (!error_) error_ = std::move(error);
}

const json* ObjectReader::member(std::string_view name) const {
  if (!object_.is_object()) return nullptr;
  const auto found = object_.find(name);
  if (found == object_.end() || found->is_null()) return nullptr;
  return &*found;
}

std::optional<std::string> ObjectReader::string(std::string_view name) {
  const json* value = member(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    fail(wrong_json_type(name, "a string"));
    return std::nullopt;
  }
  return value->get<std::string>();
}

std::string ObjectReader::required_string(std::string_view name) {
  auto value = string(name);
  if (!value && member(name) == nullptr) fail(missing_member(name));
  return value.value_or("");
}

bool ObjectReader::boolean(std::string_view name, bool fallback) {
  const json* value = member(name);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) {
    fail(wrong_json_type(name, "a boolean"));
    return fallback;
  }
  return value->get<bool>();
}

std::optional<int64_t> ObjectReader::integer(std::string_view name) {
  const json* value = member(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number_integer()) {
    fail(wrong_json_type(name, "an integer"));
    return std::nullopt;
  }
  return value->get<int64_t>();
}

std::optional<double> ObjectReader::number(std::string_view name) {
  const json* value = member(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) {
    fail(wrong_json_type(name, "a number"));
    return std::nullopt;
  }
  return value->get<double>();
}

std::optional<Item> ObjectReader::item(std::string_view name) {
  const json* value = object_member(name);
  if (value == nullptr) return std::nullopt;
  auto decoded = decode_item_object(*value);
  if (!decoded) {
    fail(std::move(decoded).error());
    return std::nullopt;
  }
  return std::move(decoded).value();
}

Item ObjectReader::required_item(std::string_view name) {
  if (member(name) == nullptr) fail(missing_member(name));
  return item(name).value_or(Item{});
}

ExpressionAttributeNames ObjectReader::names(std::string_view name) {
  const json* value = object_member(name);
  if (value == nullptr) return {};
  if (value->empty()) fail(validation_error(fmt::format("{} must not be empty", name)));
  ExpressionAttributeNames out;
  for (const auto& [key, text] : value->items()) {
    if (!text.is_string()) {
      fail(wrong_json_type(name, "a map of strings"));
      return {};
    }
    out.emplace(key, text.get<std::string>());
  }
  return out;
}

ExpressionAttributeValues ObjectReader::values(std::string_view name) {
  const json* value = object_member(name);
  if (value == nullptr) return {};
  if (value->empty()) fail(validation_error(fmt::format("{} must not be empty", name)));
  return item(name).value_or(Item{});
}

std::vector<std::string> ObjectReader::strings(std::string_view name) {
  const json* value = array_member(name);
  std::vector<std::string> out;
  if (value == nullptr) return out;
  for (const auto& element : *value) {
    if (!element.is_string()) {
      fail(wrong_json_type(name, "a list of strings"));
      return {};
    }
    out.push_back(element.get<std::string>());
  }
  return out;
}

const json* ObjectReader::object_member(std::string_view name) {
  const json* value = member(name);
  if (value != nullptr && !value->is_object()) {
    fail(wrong_json_type(name, "an object"));
    return nullptr;
  }
  return value;
}

const json* ObjectReader::array_member(std::string_view name) {
  const json* value = member(name);
  if (value != nullptr && !value->is_array()) {
    fail(wrong_json_type(name, "a list"));
    return nullptr;
  }
  return value;
}

DynamoError ObjectReader::enum_violation(std::string_view name, std::string_view text,
                                         std::span<const std::string_view> names) {
  return validation_error(fmt::format(
      "1 validation error detected: Value '{}' at '{}' failed to satisfy constraint: "
      "Member must satisfy enum value set: [{}]",
      text, camel_case(name), fmt::join(names, ", ")));
}

}  // namespace codec_detail

namespace {

using codec_detail::attribute_depth_max;

Result<AttributeValue> decode_value(const json& object, int depth);

Result<std::vector<std::string>> decode_set(const json& members, AttributeType type) {
  if (!members.is_array()) return codec_detail::wrong_json_type(type_descriptor(type), "a list");
  if (members.empty()) {
    // DynamoDB's own text, article and double space included.
    const char* noun = type == AttributeType::ss ? "string" : (type == AttributeType::ns ? "number" : "binary");
    return validation_error(fmt::format("One or more parameter values were invalid: An {} set  may not be empty", noun));
  }
  std::vector<std::string> out;
  std::set<std::string> seen;  // canonical forms, so 1 and 1.0 are duplicates in an NS
  for (const auto& member : members) {
    if (!member.is_string()) return codec_detail::wrong_json_type(type_descriptor(type), "a list of strings");
    std::string text = member.get<std::string>();
    std::string canonical = text;
    if (type == AttributeType::ns) {
      auto number = Decimal::parse(text);
      if (!number) return std::move(number).error();
      canonical = number->to_string();
    }
    if (type == AttributeType::bs && !base64_decode(text)) {
      return serialization_error("Base64 encoded length is expected a multiple of 4 bytes");  // guessed
    }
    out.push_back(std::move(text));
    if (!seen.insert(canonical).second) {
      return validation_error(fmt::format(
          "One or more parameter values were invalid: Input collection [{}] contains duplicates.",
          fmt::join(out, ", ")));
    }
  }
  return out;
}

Result<AttributeValue> decode_scalar(std::string_view tag, const json& member) {
  if (tag == "S" || tag == "N" || tag == "B") {
    if (!member.is_string()) return codec_detail::wrong_json_type(tag, "a string");
    std::string text = member.get<std::string>();
    if (tag == "S") return AttributeValue::string(std::move(text));
    if (tag == "N") {
      auto number = Decimal::parse(text);
      if (!number) return std::move(number).error();
      return AttributeValue::number(std::move(text));
    }
    if (!base64_decode(text)) return serialization_error("Base64 encoded length is expected a multiple of 4 bytes");
    return AttributeValue::binary(std::move(text));
  }
  if (tag == "BOOL") {
    if (!member.is_boolean()) return codec_detail::wrong_json_type(tag, "a boolean");
    return AttributeValue::boolean(member.get<bool>());
  }
  LP_ASSERT(tag == "NULL");
  if (!member.is_boolean()) return codec_detail::wrong_json_type(tag, "a boolean");
  if (!member.get<bool>()) {
    return validation_error(
        "One or more parameter values were invalid: Null attribute value types must have the value of true");
  }
  return AttributeValue::null();
}

Result<AttributeValue> decode_tagged(std::string_view tag, const json& member, int depth) {
  if (tag == "S" || tag == "N" || tag == "B" || tag == "BOOL" || tag == "NULL") return decode_scalar(tag, member);
  if (tag == "M") {
    if (!member.is_object()) return codec_detail::wrong_json_type(tag, "an object");
    Item members;
    members.reserve(member.size());
    for (const auto& [name, element] : member.items()) {
      auto value = decode_value(element, depth + 1);
      if (!value) return std::move(value).error();
      members.emplace(name, std::move(value).value());
    }
    return AttributeValue::map(std::move(members));
  }
  if (tag == "L") {
    if (!member.is_array()) return codec_detail::wrong_json_type(tag, "a list");
    AttributeList elements;
    for (const auto& element : member) {
      auto value = decode_value(element, depth + 1);
      if (!value) return std::move(value).error();
      elements.push_back(std::move(value).value());
    }
    return AttributeValue::list(std::move(elements));
  }
  const AttributeType type = tag == "SS" ? AttributeType::ss : (tag == "NS" ? AttributeType::ns : AttributeType::bs);
  auto members = decode_set(member, type);
  if (!members) return std::move(members).error();
  if (type == AttributeType::ss) return AttributeValue::string_set(std::move(members).value());
  if (type == AttributeType::ns) return AttributeValue::number_set(std::move(members).value());
  return AttributeValue::binary_set(std::move(members).value());
}

Result<AttributeValue> decode_value(const json& object, int depth) {
  if (depth > attribute_depth_max) return validation_error("Nesting Levels have exceeded supported limits");
  if (!object.is_object()) return serialization_error("Start of structure or map expected for an AttributeValue");
  static constexpr std::array<std::string_view, 10> tags = {"S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"};
  const json* found = nullptr;
  std::string_view found_tag;
  for (const auto& [key, member] : object.items()) {
    if (member.is_null()) continue;
    if (std::find(tags.begin(), tags.end(), key) == tags.end()) continue;  // unknown members are ignored
    if (found != nullptr) {
      return validation_error(
          "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported "
          "datatypes");
    }
    found = &member;
    found_tag = *std::find(tags.begin(), tags.end(), key);
  }
  if (found == nullptr) {
    return validation_error("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes");
  }
  return decode_tagged(found_tag, *found, depth);
}

}  // namespace

namespace codec_detail {

Result<Item> decode_item_object(const json& object) {
  if (!object.is_object()) return serialization_error("Start of structure or map expected for an item");
  Item out;
  out.reserve(object.size());
  for (const auto& [name, member] : object.items()) {
    auto value = decode_value(member, 1);
    if (!value) return std::move(value).error();
    out.emplace(name, std::move(value).value());
  }
  return out;
}

json encode_names(const ExpressionAttributeNames& names) {
  json out = json::object();
  for (const auto& [key, name] : names) out[key] = name;
  return out;
}

json encode_consumed_capacity(const ConsumedCapacity& capacity) {
  json out = {{"TableName", capacity.table_name}, {"CapacityUnits", capacity.capacity_units}};
  if (capacity.read_capacity_units) out["ReadCapacityUnits"] = *capacity.read_capacity_units;
  if (capacity.write_capacity_units) out["WriteCapacityUnits"] = *capacity.write_capacity_units;
  if (capacity.table_capacity_units) out["Table"] = {{"CapacityUnits", *capacity.table_capacity_units}};
  if (!capacity.global_secondary_indexes.empty()) {
    json indexes = json::object();
    for (const auto& [index, units] : capacity.global_secondary_indexes) indexes[index] = {{"CapacityUnits", units}};
    out["GlobalSecondaryIndexes"] = indexes;
  }
  return out;
}

Result<ConsumedCapacity> decode_consumed_capacity(const json& object) {
  ObjectReader reader(object);
  ConsumedCapacity out;
  out.table_name = reader.string("TableName").value_or("");
  out.capacity_units = reader.number("CapacityUnits").value_or(0);
  out.read_capacity_units = reader.number("ReadCapacityUnits");
  out.write_capacity_units = reader.number("WriteCapacityUnits");
  if (const json* table = reader.object_member("Table")) {
    ObjectReader table_reader(*table);
    out.table_capacity_units = table_reader.number("CapacityUnits");
    if (!table_reader.ok()) reader.fail(table_reader.take_error());
  }
  if (const json* indexes = reader.object_member("GlobalSecondaryIndexes")) {
    for (const auto& [index, units] : indexes->items()) {
      ObjectReader index_reader(units);
      out.global_secondary_indexes[index] = index_reader.number("CapacityUnits").value_or(0);
      if (!index_reader.ok()) reader.fail(index_reader.take_error());
    }
  }
  if (!reader.ok()) return reader.take_error();
  return out;
}

json encode_write_requests(const BatchWriteItems& items) {
  json out = json::object();
  for (const auto& [table, writes] : items) {
    json list = json::array();
    for (const auto& write : writes) {
      if (const auto* put = std::get_if<PutRequest>(&write)) {
        list.push_back({{"PutRequest", {{"Item", encode(put->item)}}}});
      } else {
        list.push_back({{"DeleteRequest", {{"Key", encode(std::get<DeleteRequest>(write).key)}}}});
      }
    }
    out[table] = list;
  }
  return out;
}

namespace {

Result<WriteRequest> decode_write_request(const json& object) {
  ObjectReader reader(object);
  const json* put = reader.object_member("PutRequest");
  const json* del = reader.object_member("DeleteRequest");
  if (!reader.ok()) return reader.take_error();
  if ((put == nullptr) == (del == nullptr)) {
    // Guessed wording for a WriteRequest with neither or both members.
    return validation_error("Supplied WriteRequest must contain exactly one of PutRequest and DeleteRequest");
  }
  ObjectReader inner(put != nullptr ? *put : *del);
  WriteRequest out = put != nullptr ? WriteRequest{PutRequest{inner.required_item("Item")}}
                                    : WriteRequest{DeleteRequest{inner.required_item("Key")}};
  if (!inner.ok()) return inner.take_error();
  return out;
}

}  // namespace

Result<BatchWriteItems> decode_write_requests(const json& object) {
  if (!object.is_object()) return wrong_json_type("RequestItems", "an object");
  BatchWriteItems out;
  for (const auto& [table, writes] : object.items()) {
    if (!writes.is_array()) return wrong_json_type(table, "a list");
    auto& list = out[table];
    for (const auto& write : writes) {
      auto decoded = decode_write_request(write);
      if (!decoded) return std::move(decoded).error();
      list.push_back(std::move(decoded).value());
    }
  }
  return out;
}

}  // namespace codec_detail

json encode(const AttributeValue& value) {
  const std::string tag(type_descriptor(value.type()));
  switch (value.type()) {
    case AttributeType::s:
    case AttributeType::n:
    case AttributeType::b: return {{tag, value.text()}};
    case AttributeType::boolean: return {{tag, value.as_bool()}};
    case AttributeType::null: return {{tag, true}};
    case AttributeType::m: return {{tag, encode(value.as_map())}};
    case AttributeType::l: {
      json elements = json::array();
      for (const auto& element : value.as_list()) elements.push_back(encode(element));
      return {{tag, elements}};
    }
    case AttributeType::ss:
    case AttributeType::ns:
    case AttributeType::bs: return {{tag, value.as_set()}};
  }
  LP_UNREACHABLE("attribute type {}", static_cast<int>(value.type()));
}

json encode(const Item& item) {
  json out = json::object();
  for (const auto& [name, value] : item) out[name] = encode(value);
  return out;
}

template <>
Result<AttributeValue> decode<AttributeValue>(const json& object) {
  return decode_value(object, 1);
}

template <>
Result<Item> decode<Item>(const json& object) {
  return codec_detail::decode_item_object(object);
}

json encode(const DynamoError& error) {
  json out = {{"__type", wire_error_type(error.type)}, {"message", error.message}};
  if (error.item) out["Item"] = encode(*error.item);
  if (!error.cancellation_reasons.empty()) {
    json reasons = json::array();
    for (const auto& reason : error.cancellation_reasons) {
      json entry = {{"Code", reason.code}};
      if (reason.message) entry["Message"] = *reason.message;
      if (reason.item) entry["Item"] = encode(*reason.item);
      reasons.push_back(entry);
    }
    out["CancellationReasons"] = reasons;
  }
  return out;
}

namespace {

std::vector<CancellationReason> decode_reasons(const json* reasons) {
  std::vector<CancellationReason> out;
  if (reasons == nullptr) return out;
  for (const auto& entry : *reasons) {
    codec_detail::ObjectReader reader(entry);
    CancellationReason reason{reader.string("Code").value_or("None"), reader.string("Message"),
                              reader.item("Item")};
    if (reader.ok()) out.push_back(std::move(reason));
  }
  return out;
}

}  // namespace

DynamoError decode_error(const json& object) {
  codec_detail::ObjectReader reader(object);
  const auto type = reader.string("__type");
  if (!reader.ok() || !type) {
    return DynamoError{std::string(error_type::internal_server_error), object.dump(), std::nullopt, {}};
  }
  DynamoError out{short_error_type(*type), "", std::nullopt, {}};
  // DynamoDB spells the member "message", some of its errors "Message".
  out.message = reader.string("message").value_or(reader.string("Message").value_or(""));
  out.item = reader.item("Item");
  out.cancellation_reasons = decode_reasons(reader.array_member("CancellationReasons"));
  return out;
}

std::string dump_json(const json& object) {
  return object.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<json> parse_json(std::string_view body) {
  json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return serialization_error("Unexpected character or end of input in JSON body");
  return parsed;
}

}  // namespace leaseproof::dynamo
