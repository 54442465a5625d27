#pragma once
// Private helpers shared by the codec translation units.

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/dynamo/codec.hpp"

namespace leaseproof::dynamo::codec_detail {

using nlohmann::json;

// Wire spellings, indexed by the enum's value.
inline constexpr std::array<std::string_view, 5> return_values_names = {
    "NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"};
inline constexpr std::array<std::string_view, 2> return_values_on_failure_names = {"NONE", "ALL_OLD"};
inline constexpr std::array<std::string_view, 3> return_consumed_capacity_names = {"NONE", "TOTAL", "INDEXES"};
inline constexpr std::array<std::string_view, 4> select_names = {
    "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES", "SPECIFIC_ATTRIBUTES", "COUNT"};
inline constexpr std::array<std::string_view, 2> key_type_names = {"HASH", "RANGE"};
inline constexpr std::array<std::string_view, 3> scalar_type_names = {"S", "N", "B"};
inline constexpr std::array<std::string_view, 3> projection_type_names = {"ALL", "KEYS_ONLY", "INCLUDE"};
inline constexpr std::array<std::string_view, 2> billing_mode_names = {"PROVISIONED", "PAY_PER_REQUEST"};

template <typename E>
std::span<const std::string_view> enum_names();
template <> inline std::span<const std::string_view> enum_names<ReturnValues>() { return return_values_names; }
template <> inline std::span<const std::string_view> enum_names<ReturnValuesOnConditionCheckFailure>() {
  return return_values_on_failure_names;
}
template <> inline std::span<const std::string_view> enum_names<ReturnConsumedCapacity>() {
  return return_consumed_capacity_names;
}
template <> inline std::span<const std::string_view> enum_names<Select>() { return select_names; }
template <> inline std::span<const std::string_view> enum_names<KeyType>() { return key_type_names; }
template <> inline std::span<const std::string_view> enum_names<ScalarAttributeType>() { return scalar_type_names; }
template <> inline std::span<const std::string_view> enum_names<ProjectionType>() { return projection_type_names; }
template <> inline std::span<const std::string_view> enum_names<BillingMode>() { return billing_mode_names; }

template <typename E>
std::string enum_name(E value) {
  const auto names = enum_names<E>();
  const auto index = static_cast<std::size_t>(value);
  LP_ASSERT_LT(index, names.size());
  return std::string(names[index]);
}

// "TableName" -> "tableName", the spelling DynamoDB's validation messages use.
std::string camel_case(std::string_view member);

// Reads the members of one JSON object and keeps the first error, so a decoder
// is a flat list of reads followed by one check (DynamoDB reports at least the
// first problem; we report only that one).
class ObjectReader {
 public:
  explicit ObjectReader(const json& object);

  bool ok() const { return !error_.has_value(); }
  DynamoError take_error();
  void fail(DynamoError error);

  // nullptr when absent or JSON null (DynamoDB treats both as absent).
  const json* member(std::string_view name) const;

  std::optional<std::string> string(std::string_view name);
  std::string required_string(std::string_view name);
  bool boolean(std::string_view name, bool fallback);
  std::optional<int64_t> integer(std::string_view name);
  std::optional<double> number(std::string_view name);
  std::optional<Item> item(std::string_view name);
  Item required_item(std::string_view name);
  ExpressionAttributeNames names(std::string_view name);
  ExpressionAttributeValues values(std::string_view name);
  std::vector<std::string> strings(std::string_view name);

  template <typename E>
  std::optional<E> enumeration(std::string_view name) {
    const auto text = string(name);
    if (!text) return std::nullopt;
    const auto names = enum_names<E>();
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == *text) return static_cast<E>(i);
    }
    fail(enum_violation(name, *text, names));
    return std::nullopt;
  }

  // Runs decode on a member that must be an object, array elements included.
  const json* object_member(std::string_view name);
  const json* array_member(std::string_view name);

 private:
  static DynamoError enum_violation(std::string_view name, std::string_view text,
                                    std::span<const std::string_view> names);
  const json& object_;
  std::optional<DynamoError> error_;
};

DynamoError missing_member(std::string_view name);
DynamoError wrong_json_type(std::string_view name, std::string_view expected);

// Decoded ExpressionAttributeValues / Names and Item from a JSON object.
Result<Item> decode_item_object(const json& object);

json encode_names(const ExpressionAttributeNames& names);
json encode_consumed_capacity(const ConsumedCapacity& capacity);
Result<ConsumedCapacity> decode_consumed_capacity(const json& object);
json encode_write_requests(const BatchWriteItems& items);
Result<BatchWriteItems> decode_write_requests(const json& object);

json encode_key_schema(const KeySchema& schema);
Result<KeySchema> decode_key_schema(const json* array);
json encode_throughput(const ProvisionedThroughput& throughput);
std::optional<ProvisionedThroughput> read_throughput(ObjectReader& reader);
json encode_gsi(const GlobalSecondaryIndex& index);
Result<GlobalSecondaryIndex> decode_gsi(const json& object);
// KeySchema, AttributeDefinitions and GlobalSecondaryIndexes, shared by
// CreateTable requests and table descriptions.
json encode_table_shape(const KeySchema& key_schema, const std::vector<AttributeDefinition>& definitions,
                        const std::vector<GlobalSecondaryIndex>& indexes);
Result<void> decode_table_shape(ObjectReader& reader, KeySchema& key_schema,
                                std::vector<AttributeDefinition>& definitions,
                                std::vector<GlobalSecondaryIndex>& indexes);

}  // namespace leaseproof::dynamo::codec_detail
