#pragma once
// JSON codec for the DynamoDB wire format (JSON 1.0 protocol, API version
// 2012-08-10). encode() never fails; decode() returns a DynamoError shaped
// like DynamoDB's own answer to the same malformed input (SerializationException
// for wrong JSON types, ValidationException for missing or invalid members) and
// never throws.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/dynamo/attribute_value.hpp"
#include "core/dynamo/error.hpp"
#include "core/dynamo/types.hpp"

namespace leaseproof::dynamo {

inline constexpr std::string_view target_prefix = "DynamoDB_20120810.";
inline constexpr std::string_view content_type = "application/x-amz-json-1.0";

nlohmann::json encode(const AttributeValue& value);
nlohmann::json encode(const Item& item);

nlohmann::json encode(const GetItemRequest& request);
nlohmann::json encode(const PutItemRequest& request);
nlohmann::json encode(const UpdateItemRequest& request);
nlohmann::json encode(const DeleteItemRequest& request);
nlohmann::json encode(const QueryRequest& request);
nlohmann::json encode(const BatchWriteItemRequest& request);
nlohmann::json encode(const TransactWriteItemsRequest& request);
nlohmann::json encode(const CreateTableRequest& request);
nlohmann::json encode(const Request& request);

nlohmann::json encode(const GetItemResponse& response);
nlohmann::json encode(const PutItemResponse& response);
nlohmann::json encode(const UpdateItemResponse& response);
nlohmann::json encode(const DeleteItemResponse& response);
nlohmann::json encode(const QueryResponse& response);
nlohmann::json encode(const BatchWriteItemResponse& response);
nlohmann::json encode(const TransactWriteItemsResponse& response);
nlohmann::json encode(const CreateTableResponse& response);
nlohmann::json encode(const Response& response);

// {"__type": "<full wire type>", "message": ..., ["Item"], ["CancellationReasons"]}
nlohmann::json encode(const DynamoError& error);

// decode<T>(json) for every request and response type above, and for
// AttributeValue and Item.
template <typename T>
Result<T> decode(const nlohmann::json& json);

template <> Result<AttributeValue> decode<AttributeValue>(const nlohmann::json& json);
template <> Result<Item> decode<Item>(const nlohmann::json& json);
template <> Result<GetItemRequest> decode<GetItemRequest>(const nlohmann::json& json);
template <> Result<PutItemRequest> decode<PutItemRequest>(const nlohmann::json& json);
template <> Result<UpdateItemRequest> decode<UpdateItemRequest>(const nlohmann::json& json);
template <> Result<DeleteItemRequest> decode<DeleteItemRequest>(const nlohmann::json& json);
template <> Result<QueryRequest> decode<QueryRequest>(const nlohmann::json& json);
template <> Result<BatchWriteItemRequest> decode<BatchWriteItemRequest>(const nlohmann::json& json);
template <> Result<TransactWriteItemsRequest> decode<TransactWriteItemsRequest>(const nlohmann::json& json);
template <> Result<CreateTableRequest> decode<CreateTableRequest>(const nlohmann::json& json);
template <> Result<GetItemResponse> decode<GetItemResponse>(const nlohmann::json& json);
template <> Result<PutItemResponse> decode<PutItemResponse>(const nlohmann::json& json);
template <> Result<UpdateItemResponse> decode<UpdateItemResponse>(const nlohmann::json& json);
template <> Result<DeleteItemResponse> decode<DeleteItemResponse>(const nlohmann::json& json);
template <> Result<QueryResponse> decode<QueryResponse>(const nlohmann::json& json);
template <> Result<BatchWriteItemResponse> decode<BatchWriteItemResponse>(const nlohmann::json& json);
template <> Result<TransactWriteItemsResponse> decode<TransactWriteItemsResponse>(const nlohmann::json& json);
template <> Result<CreateTableResponse> decode<CreateTableResponse>(const nlohmann::json& json);
// An error body; anything without a usable `__type` becomes InternalServerError
// carrying the body text, so a caller always gets some DynamoError.
DynamoError decode_error(const nlohmann::json& json);

// Parses body text; SerializationException when it is not JSON.
Result<nlohmann::json> parse_json(std::string_view body);

// Body text for the wire. Never throws: bytes that are not UTF-8 (only possible
// in values built in code, never in decoded ones) are replaced by U+FFFD.
std::string dump_json(const nlohmann::json& json);

// Dispatch on the X-Amz-Target header ("DynamoDB_20120810.UpdateItem").
Result<Request> decode_request(std::string_view target, const nlohmann::json& body);
// Same, from the raw body text (SerializationException when it is not JSON).
Result<Request> decode_request_text(std::string_view target, std::string_view body);
Result<Response> decode_response(Operation operation, const nlohmann::json& body);

}  // namespace leaseproof::dynamo
