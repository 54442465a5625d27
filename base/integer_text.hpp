#pragma once
// Integers read from their decimal text as std::from_chars reads them, over
// the whole text: an optional '-' for signed types, digits only, nothing
// before or after, no overflow. Lease and sink items hold their numbers as
// DynamoDB N values, which are text.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace leaseproof {

template <typename Integer>
std::optional<Integer> parse_integer(std::string_view text) {
  static_assert(std::is_same_v<Integer, int64_t> || std::is_same_v<Integer, uint64_t>);
  Integer value = 0;
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end) return std::nullopt;
  return value;
}

}  // namespace leaseproof
