#include "core/dynamo/types.hpp"

#include <array>

#include <fmt/format.h>

namespace leaseproof::dynamo {

namespace {

constexpr std::array<std::string_view, 8> operation_names = {
    "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem", "TransactWriteItems",
    "CreateTable",
};
static_assert(std::variant_size_v<Request> == operation_names.size());
static_assert(std::variant_size_v<Response> == operation_names.size());

constexpr std::string_view target_prefix_text = "DynamoDB_20120810.";

}  // namespace

Operation operation_of(const Request& request) { return static_cast<Operation>(request.index()); }
Operation operation_of(const Response& response) { return static_cast<Operation>(response.index()); }

std::string_view operation_name(Operation operation) {
  const auto index = static_cast<std::size_t>(operation);
  LP_ASSERT_LT(index, operation_names.size());
  return operation_names[index];
}

std::string target_of(Operation operation) {
  return std::string(target_prefix_text) + std::string(operation_name(operation));
}

Result<Operation> operation_from_target(std::string_view target) {
  if (target.starts_with(target_prefix_text)) {
    const auto name = target.substr(target_prefix_text.size());
    for (std::size_t i = 0; i < operation_names.size(); ++i) {
      if (operation_names[i] == name) return static_cast<Operation>(i);
    }
  }
  // DynamoDB answers an unknown target with an UnknownOperationException and no
  // message; we add one for whoever reads the log.
  return DynamoError{std::string(error_type::unknown_operation),
                     fmt::format("Unknown operation: {}", target), std::nullopt, {}};
}

}  // namespace leaseproof::dynamo
