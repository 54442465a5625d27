#pragma once
// Integers read from their decimal text, exactly as std::from_chars reads
// them over the whole text (an optional '-' for signed types, digits only,
// nothing before or after, no overflow), with a fast path for the common
// case: lease items hold a few epochs, counters and milliseconds each, and
// the lease core reads every item a sweep or a read returns. libstdc++ 12's
// from_chars costs about 110 instructions for a 13-digit number; the loop
// below about a third of that. Anything the loop does not take (empty text,
// a non-digit, 19 digits or more) goes to from_chars, so the two can never
// disagree.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace leaseproof {

template <typename Integer>
std::optional<Integer> parse_integer(std::string_view text) {
  static_assert(std::is_same_v<Integer, int64_t> || std::is_same_v<Integer, uint64_t>);
  const bool negative = std::is_signed_v<Integer> && !text.empty() && text.front() == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  // 18 digits never overflow either type.
  if (!digits.empty() && digits.size() <= 18) {
    uint64_t value = 0;
    bool plain = true;
    for (const char c : digits) {
      const auto digit = static_cast<uint64_t>(static_cast<unsigned char>(c) - '0');
      plain &= digit <= 9;
      value = value * 10 + digit;
    }
    if (plain) {
      if constexpr (std::is_signed_v<Integer>) {
        return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
      } else {
        return value;
      }
    }
  }
  Integer value = 0;
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || stop != end) return std::nullopt;
  return value;
}

}  // namespace leaseproof
