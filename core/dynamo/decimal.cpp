#include "core/dynamo/decimal.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

namespace leaseproof::dynamo {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

DynamoError not_numeric(std::string_view text) {
  // Exact text guessed from DynamoDB's answer to {"N": "abc"}.
  return validation_error(fmt::format("The parameter cannot be converted to a numeric value: {}", text));
}

// Exponents beyond this are out of range whatever the mantissa; the bound keeps
// the exponent arithmetic far from int32 overflow.
constexpr int64_t exponent_text_max = 100'000;

// Magnitude comparison of two non-negative integers written as digit strings
// without leading zeros.
int compare_magnitude(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

std::string add_magnitude(const std::string& a, const std::string& b) {
  std::string out;
  int carry = 0;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()) || carry != 0; ++i) {
    const int da = i < a.size() ? a[a.size() - 1 - i] - '0' : 0;
    const int db = i < b.size() ? b[b.size() - 1 - i] - '0' : 0;
    const int sum = da + db + carry;
    out.push_back(static_cast<char>('0' + sum % 10));
    carry = sum / 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

// a - b with a >= b.
std::string subtract_magnitude(const std::string& a, const std::string& b) {
  std::string out;
  int borrow = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    int da = a[a.size() - 1 - i] - '0' - borrow;
    const int db = i < b.size() ? b[b.size() - 1 - i] - '0' : 0;
    borrow = da < db ? 1 : 0;
    da += borrow * 10;
    out.push_back(static_cast<char>('0' + da - db));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

void Decimal::normalize() {
  const auto first = digits_.find_first_not_of('0');
  if (first == std::string::npos) {
    digits_.clear();
    exponent_ = 0;
    negative_ = false;
    return;
  }
  digits_.erase(0, first);
  const auto last = digits_.find_last_not_of('0');
  exponent_ += static_cast<int32_t>(digits_.size() - 1 - last);
  digits_.erase(last + 1);
}

Result<Decimal> Decimal::checked() const {
  if (is_zero()) return *this;
  if (significant_digits() > significant_digits_max) {
    return validation_error("Attempting to store more than 38 significant digits in a Number");
  }
  const int64_t adjusted = int64_t{exponent_} + significant_digits() - 1;
  if (adjusted > adjusted_exponent_max) {
    return validation_error("Number overflow. Attempting to store a number with magnitude larger than supported range");
  }
  if (adjusted < adjusted_exponent_min) {
    return validation_error("Number underflow. Attempting to store a number with magnitude smaller than supported range");
  }
  return *this;
}

Result<Decimal> Decimal::parse(std::string_view text) {
  std::size_t at = 0;
  Decimal result;
  if (at < text.size() && (text[at] == '+' || text[at] == '-')) result.negative_ = text[at++] == '-';
  int32_t fraction_digits = 0;
  bool seen_digit = false;
  bool seen_point = false;
  for (; at < text.size() && (is_digit(text[at]) || text[at] == '.'); ++at) {
    if (text[at] == '.') {
      if (seen_point) return not_numeric(text);
      seen_point = true;
      continue;
    }
    seen_digit = true;
    if (result.digits_.size() > 2 * exponent_text_max) return not_numeric(text);
    result.digits_.push_back(text[at]);
    if (seen_point) ++fraction_digits;
  }
  if (!seen_digit) return not_numeric(text);
  int64_t exponent = 0;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    bool exponent_negative = false;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) exponent_negative = text[at++] == '-';
    if (at == text.size()) return not_numeric(text);
    for (; at < text.size() && is_digit(text[at]); ++at) {
      exponent = std::min(exponent * 10 + (text[at] - '0'), exponent_text_max);
    }
    if (exponent_negative) exponent = -exponent;
  }
  if (at != text.size()) return not_numeric(text);
  result.exponent_ = static_cast<int32_t>(exponent - fraction_digits);
  result.normalize();
  return result.checked();
}

std::optional<int64_t> Decimal::small_integer(std::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string_view digits = text.substr(negative ? 1 : 0);
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  if (digits[0] == '0') {
    if (text == "0") return 0;
    return std::nullopt;  // a leading zero, or "-0": not canonical
  }
  int64_t value = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return negative ? -value : value;
}

Decimal Decimal::from_int(int64_t value) {
  auto parsed = parse(std::to_string(value));
  LP_ASSERT(parsed.ok());  // every int64 has at most 19 digits
  return parsed.value();
}

std::string Decimal::to_string() const {
  if (is_zero()) return "0";
  std::string out = negative_ ? "-" : "";
  if (exponent_ >= 0) {
    out += digits_;
    out.append(static_cast<std::size_t>(exponent_), '0');
    return out;
  }
  const auto fraction = static_cast<std::size_t>(-exponent_);
  if (fraction >= digits_.size()) {
    out += "0.";
    out.append(fraction - digits_.size(), '0');
    out += digits_;
    return out;
  }
  out += digits_.substr(0, digits_.size() - fraction);
  out += '.';
  out += digits_.substr(digits_.size() - fraction);
  return out;
}

Decimal Decimal::negated() const {
  Decimal out = *this;
  if (!out.is_zero()) out.negative_ = !out.negative_;
  return out;
}

Decimal Decimal::add_signed(const Decimal& a, const Decimal& b) {
  if (a.is_zero()) return b;
  if (b.is_zero()) return a;
  // Align both to the smaller exponent; operands are range-checked, so the
  // aligned strings stay a few hundred digits long at most.
  const int32_t exponent = std::min(a.exponent_, b.exponent_);
  const std::string ma = a.digits_ + std::string(static_cast<std::size_t>(a.exponent_ - exponent), '0');
  const std::string mb = b.digits_ + std::string(static_cast<std::size_t>(b.exponent_ - exponent), '0');
  Decimal out;
  out.exponent_ = exponent;
  if (a.negative_ == b.negative_) {
    out.digits_ = add_magnitude(ma, mb);
    out.negative_ = a.negative_;
  } else if (compare_magnitude(ma, mb) >= 0) {
    out.digits_ = subtract_magnitude(ma, mb);
    out.negative_ = a.negative_;
  } else {
    out.digits_ = subtract_magnitude(mb, ma);
    out.negative_ = b.negative_;
  }
  out.normalize();
  return out;
}

Result<Decimal> Decimal::add(const Decimal& other) const { return add_signed(*this, other).checked(); }

Result<Decimal> Decimal::subtract(const Decimal& other) const {
  return add_signed(*this, other.negated()).checked();
}

std::strong_ordering Decimal::operator<=>(const Decimal& other) const {
  const int sign_a = is_zero() ? 0 : (negative_ ? -1 : 1);
  const int sign_b = other.is_zero() ? 0 : (other.negative_ ? -1 : 1);
  if (sign_a != sign_b) return sign_a <=> sign_b;
  if (sign_a == 0) return std::strong_ordering::equal;
  // Same sign, both non-zero: compare magnitudes by adjusted exponent, then
  // digit by digit (missing trailing digits are zeros).
  const int64_t adjusted_a = int64_t{exponent_} + significant_digits();
  const int64_t adjusted_b = int64_t{other.exponent_} + other.significant_digits();
  std::strong_ordering magnitude = adjusted_a <=> adjusted_b;
  if (magnitude == std::strong_ordering::equal) {
    const std::size_t length = std::max(digits_.size(), other.digits_.size());
    std::string a = digits_;
    std::string b = other.digits_;
    a.resize(length, '0');
    b.resize(length, '0');
    const int c = a.compare(b);
    magnitude = c <=> 0;
  }
  return negative_ ? 0 <=> magnitude : magnitude;
}

namespace {

// "0", or an optional '-' and 1 to 38 digits without a leading zero: already
// the canonical text of an integer, so parsing and printing it again would
// give it back unchanged (most numbers a fleet writes: epochs, times, seqs).
bool canonical_integer(std::string_view text) {
  const std::size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
  const std::size_t digits = text.size() - start;
  if (digits == 0 || digits > 38) return false;
  if (text[start] == '0') return text == "0";
  return std::all_of(text.begin() + static_cast<std::ptrdiff_t>(start), text.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::string canonical_text(const std::string& text) {
  if (canonical_integer(text)) return text;
  auto number = Decimal::parse(text);
  return number ? number->to_string() : text;
}

}  // namespace

void canonicalize_numbers(AttributeValue& value) {
  switch (value.type()) {
    case AttributeType::n:
      if (!canonical_integer(value.text())) value = AttributeValue::number(canonical_text(value.text()));
      return;
    case AttributeType::ns:
      for (auto& member : value.as_set()) member = canonical_text(member);
      return;
    case AttributeType::m: canonicalize_numbers(value.as_map()); return;
    case AttributeType::l:
      for (auto& element : value.as_list()) canonicalize_numbers(element);
      return;
    default: return;
  }
}

namespace {

// False when canonicalize_numbers would leave `value` as it is (read only, so
// an item already canonical keeps its cached size).
bool may_change(const AttributeValue& value) {
  switch (value.type()) {
    case AttributeType::n: return !canonical_integer(value.text());
    case AttributeType::ns: return true;
    case AttributeType::m:
      return std::any_of(value.as_map().begin(), value.as_map().end(),
                         [](const auto& member) { return may_change(member.second); });
    case AttributeType::l:
      return std::any_of(value.as_list().begin(), value.as_list().end(),
                         [](const AttributeValue& element) { return may_change(element); });
    default: return false;
  }
}

}  // namespace

void canonicalize_numbers(Item& item) {
  const Item& members = item;
  if (std::none_of(members.begin(), members.end(), [](const auto& member) { return may_change(member.second); })) {
    return;
  }
  for (auto& [name, value] : item) canonicalize_numbers(value);
}

void canonicalize_member(Item& item, std::string_view name) {
  const Item& members = item;
  const auto found = members.find(name);
  if (found == members.end() || !may_change(found->second)) return;  // read only: the cached size stays
  canonicalize_numbers(item.find(name)->second);
}

AttributeValue with_canonical_numbers(AttributeValue value) {
  canonicalize_numbers(value);
  return value;
}

Item with_canonical_numbers(Item item) {
  canonicalize_numbers(item);
  return item;
}

}  // namespace leaseproof::dynamo
