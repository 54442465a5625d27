#pragma once
// Exact decimal numbers with DynamoDB's limits: at most 38 significant digits,
// magnitude between 1E-130 and 9.99...E+125 (or zero). Comparison and
// addition are exact; a result that does not fit is a ValidationException,
// never a silently rounded value.

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dynamo/error.hpp"

namespace leaseproof::dynamo {

class Decimal {
 public:
  static constexpr int significant_digits_max = 38;
  static constexpr int adjusted_exponent_max = 125;   // 9.9...E+125
  static constexpr int adjusted_exponent_min = -130;  // 1E-130

  Decimal() = default;  // zero

  // Accepts DynamoDB's number syntax: [+-] digits [. digits] [(e|E) [+-] digits].
  static Result<Decimal> parse(std::string_view text);
  static Decimal from_int(int64_t value);

  // Canonical text as DynamoDB returns it: plain notation, no exponent, no
  // leading or trailing zeros ("1.50" -> "1.5", "1e2" -> "100", "-0" -> "0").
  std::string to_string() const;

  // The value of `text` when it is the canonical text of an integer of at
  // most 18 digits ("0", or an optional '-' and digits without a leading
  // zero), whose arithmetic fits int64 and needs no decimal parsing; else
  // nullopt (any other number, or not a number).
  static std::optional<int64_t> small_integer(std::string_view text);

  Result<Decimal> add(const Decimal& other) const;
  Result<Decimal> subtract(const Decimal& other) const;
  Decimal negated() const;

  bool is_zero() const { return digits_.empty(); }
  bool is_negative() const { return negative_; }
  int significant_digits() const { return static_cast<int>(digits_.size()); }

  std::strong_ordering operator<=>(const Decimal& other) const;
  bool operator==(const Decimal& other) const = default;

 private:
  // value = (negative_ ? -1 : 1) * digits_ * 10^exponent_; digits_ has no
  // leading or trailing zeros, and zero is the empty string (never negative).
  bool negative_ = false;
  std::string digits_;
  int32_t exponent_ = 0;

  void normalize();
  Result<Decimal> checked() const;
  static Decimal add_signed(const Decimal& a, const Decimal& b);
};

// The item with every N and NS member in canonical text, as DynamoDB stores
// and returns numbers ({"N": "1.50"} is read back as {"N": "1.5"}). Text that
// does not parse is kept as it is (the codec has rejected it already).
AttributeValue with_canonical_numbers(AttributeValue value);
Item with_canonical_numbers(Item item);
// The same, in place: only the numbers that are not canonical yet change.
void canonicalize_numbers(AttributeValue& value);
void canonicalize_numbers(Item& item);
// The same for one top-level attribute (absent: nothing to do).
void canonicalize_member(Item& item, std::string_view name);

}  // namespace leaseproof::dynamo
