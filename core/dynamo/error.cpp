#include "core/dynamo/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace leaseproof::dynamo {

DynamoError validation_error(std::string message) {
  return DynamoError{std::string(error_type::validation), std::move(message), std::nullopt, {}};
}

DynamoError serialization_error(std::string message) {
  return DynamoError{std::string(error_type::serialization), std::move(message), std::nullopt, {}};
}

DynamoError conditional_check_failed(std::optional<Item> old_item) {
  return DynamoError{std::string(error_type::conditional_check_failed), "The conditional request failed",
                     std::move(old_item), {}};
}

DynamoError transaction_canceled(std::vector<CancellationReason> reasons) {
  std::vector<std::string_view> codes;
  for (const auto& reason : reasons) codes.push_back(reason.code);
  return DynamoError{std::string(error_type::transaction_canceled),
                     fmt::format("Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
                                 fmt::join(codes, ", ")),
                     std::nullopt, std::move(reasons)};
}

std::string wire_error_type(std::string_view short_type) {
  if (short_type.find('#') != std::string_view::npos) return std::string(short_type);
  // Validation is reported by Amazon's request-validation framework, and
  // malformed or unknown requests by its service framework; everything else
  // by DynamoDB itself.
  if (short_type == error_type::validation) return "com.amazon.coral.validate#ValidationException";
  if (short_type == error_type::serialization || short_type == error_type::unknown_operation) {
    return "com.amazon.coral.service#" + std::string(short_type);
  }
  return "com.amazonaws.dynamodb.v20120810#" + std::string(short_type);
}

std::string short_error_type(std::string_view wire_type) {
  const auto hash = wire_type.rfind('#');
  return std::string(hash == std::string_view::npos ? wire_type : wire_type.substr(hash + 1));
}

}  // namespace leaseproof::dynamo
