#pragma once
// Request and response types for the DynamoDB operations leaseproof uses, one
// field per wire member (codec.hpp maps them to and from the JSON shapes).
// Plain aggregates: field names mirror the wire names in snake_case.
// Optional wire members are std::optional; members whose absence and default
// mean the same thing to DynamoDB (ConsistentRead false, empty maps) are plain
// values, and the encoder omits them when they hold the default.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/dynamo/attribute_value.hpp"
#include "core/dynamo/error.hpp"

namespace leaseproof::dynamo {

using ExpressionAttributeNames = std::map<std::string, std::string>;   // "#n" -> name
using ExpressionAttributeValues = Item;  // ":v" -> value (an Item, so the item codec serves it)

enum class ReturnValues : uint8_t { none, all_old, updated_old, all_new, updated_new };
enum class ReturnValuesOnConditionCheckFailure : uint8_t { none, all_old };
enum class ReturnConsumedCapacity : uint8_t { none, total, indexes };
enum class Select : uint8_t { all_attributes, all_projected_attributes, specific_attributes, count };
enum class KeyType : uint8_t { hash, range };
enum class ScalarAttributeType : uint8_t { s, n, b };
enum class ProjectionType : uint8_t { all, keys_only, include };
enum class BillingMode : uint8_t { provisioned, pay_per_request };

enum class Operation : uint8_t {
  get_item, put_item, update_item, delete_item, query, batch_write_item, transact_write_items,
  create_table,
};

struct ConsumedCapacity {
  std::string table_name;
  double capacity_units = 0;
  std::optional<double> read_capacity_units;
  std::optional<double> write_capacity_units;
  std::optional<double> table_capacity_units;  // "Table": {"CapacityUnits": x}
  std::map<std::string, double> global_secondary_indexes;  // index -> CapacityUnits

  bool operator==(const ConsumedCapacity&) const = default;
};

struct GetItemRequest {
  std::string table_name;
  Item key;
  bool consistent_read = false;
  std::optional<std::string> projection_expression;
  ExpressionAttributeNames expression_attribute_names;
  ReturnConsumedCapacity return_consumed_capacity = ReturnConsumedCapacity::none;

  bool operator==(const GetItemRequest&) const = default;
};
struct GetItemResponse {
  // Absent: null. Immutable and shared: the simulated store answers with the
  // version it keeps (its versions never change), so a read copies nothing.
  std::shared_ptr<const Item> item;
  std::optional<ConsumedCapacity> consumed_capacity;

  // By value: the same item, whichever copy holds it.
  bool operator==(const GetItemResponse& other) const {
    const bool same_item = item == other.item || (item && other.item && *item == *other.item);
    return same_item && consumed_capacity == other.consumed_capacity;
  }
};

// Members shared by the conditional single-item writes.
struct ConditionalWrite {
  std::optional<std::string> condition_expression;
  ExpressionAttributeNames expression_attribute_names;
  ExpressionAttributeValues expression_attribute_values;
  ReturnValues return_values = ReturnValues::none;
  ReturnValuesOnConditionCheckFailure return_values_on_condition_check_failure =
      ReturnValuesOnConditionCheckFailure::none;
  ReturnConsumedCapacity return_consumed_capacity = ReturnConsumedCapacity::none;

  bool operator==(const ConditionalWrite&) const = default;
};

struct PutItemRequest {
  std::string table_name;
  Item item;
  ConditionalWrite write;

  bool operator==(const PutItemRequest&) const = default;
};
struct UpdateItemRequest {
  std::string table_name;
  Item key;
  std::optional<std::string> update_expression;
  ConditionalWrite write;

  bool operator==(const UpdateItemRequest&) const = default;
};
struct DeleteItemRequest {
  std::string table_name;
  Item key;
  ConditionalWrite write;

  bool operator==(const DeleteItemRequest&) const = default;
};
// PutItem, UpdateItem and DeleteItem answer with the same shape; the tag keeps
// the three types distinct so that Response can hold each of them.
template <Operation tag>
struct WriteItemResponse {
  std::optional<Item> attributes;
  std::optional<ConsumedCapacity> consumed_capacity;

  bool operator==(const WriteItemResponse&) const = default;
};
using PutItemResponse = WriteItemResponse<Operation::put_item>;
using UpdateItemResponse = WriteItemResponse<Operation::update_item>;
using DeleteItemResponse = WriteItemResponse<Operation::delete_item>;

struct QueryRequest {
  std::string table_name;
  std::optional<std::string> index_name;
  std::optional<std::string> key_condition_expression;
  std::optional<std::string> filter_expression;
  std::optional<std::string> projection_expression;
  ExpressionAttributeNames expression_attribute_names;
  ExpressionAttributeValues expression_attribute_values;
  std::optional<int64_t> limit;
  std::optional<Item> exclusive_start_key;
  bool scan_index_forward = true;
  std::optional<Select> select;
  bool consistent_read = false;
  ReturnConsumedCapacity return_consumed_capacity = ReturnConsumedCapacity::none;

  bool operator==(const QueryRequest&) const = default;
};
struct QueryResponse {
  std::optional<std::vector<Item>> items;  // absent for Select COUNT
  int64_t count = 0;
  int64_t scanned_count = 0;
  std::optional<Item> last_evaluated_key;
  std::optional<ConsumedCapacity> consumed_capacity;

  bool operator==(const QueryResponse&) const = default;
};

struct PutRequest {
  Item item;
  bool operator==(const PutRequest&) const = default;
};
struct DeleteRequest {
  Item key;
  bool operator==(const DeleteRequest&) const = default;
};
using WriteRequest = std::variant<PutRequest, DeleteRequest>;
using BatchWriteItems = std::map<std::string, std::vector<WriteRequest>>;  // table -> writes

struct BatchWriteItemRequest {
  BatchWriteItems request_items;
  ReturnConsumedCapacity return_consumed_capacity = ReturnConsumedCapacity::none;

  bool operator==(const BatchWriteItemRequest&) const = default;
};
struct BatchWriteItemResponse {
  BatchWriteItems unprocessed_items;
  std::vector<ConsumedCapacity> consumed_capacity;

  bool operator==(const BatchWriteItemResponse&) const = default;
};

// Members shared by every TransactWriteItems action.
struct TransactCondition {
  std::string table_name;
  std::optional<std::string> condition_expression;
  ExpressionAttributeNames expression_attribute_names;
  ExpressionAttributeValues expression_attribute_values;
  ReturnValuesOnConditionCheckFailure return_values_on_condition_check_failure =
      ReturnValuesOnConditionCheckFailure::none;

  bool operator==(const TransactCondition&) const = default;
};
struct TransactPut {
  Item item;
  TransactCondition condition;
  bool operator==(const TransactPut&) const = default;
};
struct TransactUpdate {
  Item key;
  std::string update_expression;
  TransactCondition condition;
  bool operator==(const TransactUpdate&) const = default;
};
struct TransactDelete {
  Item key;
  TransactCondition condition;
  bool operator==(const TransactDelete&) const = default;
};
struct TransactConditionCheck {
  Item key;
  TransactCondition condition;  // condition_expression is required on the wire
  bool operator==(const TransactConditionCheck&) const = default;
};
using TransactWriteItem = std::variant<TransactPut, TransactUpdate, TransactDelete, TransactConditionCheck>;

struct TransactWriteItemsRequest {
  std::vector<TransactWriteItem> transact_items;
  std::optional<std::string> client_request_token;
  ReturnConsumedCapacity return_consumed_capacity = ReturnConsumedCapacity::none;

  bool operator==(const TransactWriteItemsRequest&) const = default;
};
struct TransactWriteItemsResponse {
  std::vector<ConsumedCapacity> consumed_capacity;
  bool operator==(const TransactWriteItemsResponse&) const = default;
};

struct KeySchemaElement {
  std::string attribute_name;
  KeyType key_type = KeyType::hash;
  bool operator==(const KeySchemaElement&) const = default;
};
using KeySchema = std::vector<KeySchemaElement>;

struct AttributeDefinition {
  std::string attribute_name;
  ScalarAttributeType attribute_type = ScalarAttributeType::s;
  bool operator==(const AttributeDefinition&) const = default;
};
struct Projection {
  ProjectionType projection_type = ProjectionType::all;
  std::vector<std::string> non_key_attributes;  // INCLUDE only
  bool operator==(const Projection&) const = default;
};
struct ProvisionedThroughput {
  int64_t read_capacity_units = 0;
  int64_t write_capacity_units = 0;
  bool operator==(const ProvisionedThroughput&) const = default;
};
struct GlobalSecondaryIndex {
  std::string index_name;
  KeySchema key_schema;
  Projection projection;
  std::optional<ProvisionedThroughput> provisioned_throughput;
  std::optional<std::string> index_status;  // descriptions only: "CREATING", "ACTIVE", ...
  bool operator==(const GlobalSecondaryIndex&) const = default;
};

struct CreateTableRequest {
  std::string table_name;
  KeySchema key_schema;
  std::vector<AttributeDefinition> attribute_definitions;
  std::vector<GlobalSecondaryIndex> global_secondary_indexes;
  std::optional<BillingMode> billing_mode;
  std::optional<ProvisionedThroughput> provisioned_throughput;

  bool operator==(const CreateTableRequest&) const = default;
};
struct TableDescription {
  std::string table_name;
  std::string table_status = "ACTIVE";  // "CREATING", "ACTIVE", ...
  KeySchema key_schema;
  std::vector<AttributeDefinition> attribute_definitions;
  std::vector<GlobalSecondaryIndex> global_secondary_indexes;
  std::optional<BillingMode> billing_mode;  // "BillingModeSummary": {"BillingMode": ...}
  std::optional<ProvisionedThroughput> provisioned_throughput;
  int64_t item_count = 0;
  int64_t table_size_bytes = 0;
  // Epoch milliseconds of the simulated or real creation; the wire carries
  // epoch seconds as a JSON number.
  std::optional<int64_t> creation_date_time_ms;

  bool operator==(const TableDescription&) const = default;
};
struct CreateTableResponse {
  TableDescription table_description;
  bool operator==(const CreateTableResponse&) const = default;
};

// Alternatives in the order of Operation, so index() == Operation.
using Request = std::variant<GetItemRequest, PutItemRequest, UpdateItemRequest, DeleteItemRequest,
                             QueryRequest, BatchWriteItemRequest, TransactWriteItemsRequest,
                             CreateTableRequest>;
using Response = std::variant<GetItemResponse, PutItemResponse, UpdateItemResponse, DeleteItemResponse,
                              QueryResponse, BatchWriteItemResponse, TransactWriteItemsResponse,
                              CreateTableResponse>;

Operation operation_of(const Request& request);
Operation operation_of(const Response& response);
// "UpdateItem" etc.
std::string_view operation_name(Operation operation);
// "DynamoDB_20120810.UpdateItem" etc., the X-Amz-Target header value.
std::string target_of(Operation operation);
// Parses an X-Amz-Target value; UnknownOperationException when unknown.
Result<Operation> operation_from_target(std::string_view target);

}  // namespace leaseproof::dynamo
