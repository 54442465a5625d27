#pragma once
// Errors as values. DynamoDB reports every failure as a JSON body carrying a
// `__type` and a `message`; we keep the short name of the type (the part after
// '#') so callers can switch on it, and restore the wire prefix when encoding.
// Nothing in core/dynamo throws across its public API: every fallible call
// returns a Result.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/assert.hpp"
#include "core/dynamo/attribute_value.hpp"

namespace leaseproof::dynamo {

// Short `__type` names, as DynamoDB spells them after the '#'.
namespace error_type {
inline constexpr std::string_view validation = "ValidationException";
inline constexpr std::string_view serialization = "SerializationException";
inline constexpr std::string_view unknown_operation = "UnknownOperationException";
inline constexpr std::string_view conditional_check_failed = "ConditionalCheckFailedException";
inline constexpr std::string_view provisioned_throughput_exceeded =
    "ProvisionedThroughputExceededException";
inline constexpr std::string_view resource_not_found = "ResourceNotFoundException";
inline constexpr std::string_view resource_in_use = "ResourceInUseException";
inline constexpr std::string_view transaction_canceled = "TransactionCanceledException";
inline constexpr std::string_view transaction_conflict = "TransactionConflictException";
inline constexpr std::string_view idempotent_parameter_mismatch = "IdempotentParameterMismatchException";
inline constexpr std::string_view item_collection_size_limit_exceeded =
    "ItemCollectionSizeLimitExceededException";
inline constexpr std::string_view throttling = "ThrottlingException";
inline constexpr std::string_view request_limit_exceeded = "RequestLimitExceeded";
inline constexpr std::string_view internal_server_error = "InternalServerError";
}  // namespace error_type

// One entry of TransactionCanceledException.CancellationReasons; code "None"
// marks an action that did not cause the cancellation.
struct CancellationReason {
  std::string code;
  std::optional<std::string> message;
  std::optional<Item> item;

  bool operator==(const CancellationReason&) const = default;
};

struct DynamoError {
  std::string type;     // short name, e.g. "ConditionalCheckFailedException"
  std::string message;
  std::optional<Item> item;  // ReturnValuesOnConditionCheckFailure = ALL_OLD
  std::vector<CancellationReason> cancellation_reasons;  // TransactionCanceledException only

  bool operator==(const DynamoError&) const = default;
};

DynamoError validation_error(std::string message);
DynamoError serialization_error(std::string message);
// "The conditional request failed", with the old item when the request asked
// for it (ReturnValuesOnConditionCheckFailure = ALL_OLD).
DynamoError conditional_check_failed(std::optional<Item> old_item);
// DynamoDB's message lists every reason code in action order, e.g.
// "Transaction cancelled, please refer cancellation reasons for specific
// reasons [None, ConditionalCheckFailed]".
DynamoError transaction_canceled(std::vector<CancellationReason> reasons);

// The `__type` as DynamoDB sends it: ValidationException and the coral service
// errors live in Amazon's framework namespaces, the rest in the DynamoDB one.
std::string wire_error_type(std::string_view short_type);
// Accepts either a full wire `__type` or a short name; returns the short name.
std::string short_error_type(std::string_view wire_type);

// A value or a DynamoError. Accessing the wrong side is a bug, so it asserts.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(DynamoError error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const T& value() const& { LP_ASSERT(ok()); return std::get<0>(state_); }
  T& value() & { LP_ASSERT(ok()); return std::get<0>(state_); }
  T&& value() && { LP_ASSERT(ok()); return std::get<0>(std::move(state_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const DynamoError& error() const& { LP_ASSERT(!ok()); return std::get<1>(state_); }
  DynamoError&& error() && { LP_ASSERT(!ok()); return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, DynamoError> state_;
};

// Result of an operation that produces nothing but may fail.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(DynamoError error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const DynamoError& error() const& { LP_ASSERT(!ok()); return *error_; }
  DynamoError&& error() && { LP_ASSERT(!ok()); return std::move(*error_); }

 private:
  std::optional<DynamoError> error_;
};

}  // namespace leaseproof::dynamo
