#include "core/dynamo/attribute_value.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/assert.hpp"
#include "core/dynamo/base64.hpp"

namespace leaseproof::dynamo {

struct AttributeValue::Composite {
  std::vector<std::string> set;
  AttributeList list;
  Item map;
};

void AttributeValue::CompositeDeleter::operator()(Composite* composite) const { delete composite; }

AttributeValue::Composite* AttributeValue::clone(const Composite& composite) { return new Composite(composite); }

AttributeValue& AttributeValue::operator=(const AttributeValue& other) {
  if (this != &other) *this = AttributeValue(other);
  return *this;
}

AttributeValue::Composite& AttributeValue::composite() {
  if (!composite_) composite_.reset(new Composite());
  return *composite_;
}

Item::Item(std::initializer_list<value_type> members) : entries_(members) {
  // Stable, so that of equal names the first given stays first and is kept.
  // Brace lists are short: an insertion sort, which needs no buffer.
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    auto hole = it;
    if (hole == entries_.begin() || !(it->first < std::prev(hole)->first)) continue;
    value_type moving = std::move(*it);
    do {
      *hole = std::move(*std::prev(hole));
      --hole;
    } while (hole != entries_.begin() && moving.first < std::prev(hole)->first);
    *hole = std::move(moving);
  }
  entries_.erase(std::unique(entries_.begin(), entries_.end(),
                             [](const value_type& a, const value_type& b) { return a.first == b.first; }),
                 entries_.end());
}

namespace {

const std::vector<std::string> no_members;
const AttributeList no_elements;
const Item no_attributes;

}  // namespace

std::string_view type_descriptor(AttributeType type) {
  switch (type) {
    case AttributeType::s: return "S";
    case AttributeType::n: return "N";
    case AttributeType::b: return "B";
    case AttributeType::boolean: return "BOOL";
    case AttributeType::null: return "NULL";
    case AttributeType::m: return "M";
    case AttributeType::l: return "L";
    case AttributeType::ss: return "SS";
    case AttributeType::ns: return "NS";
    case AttributeType::bs: return "BS";
  }
  LP_UNREACHABLE("attribute type {}", static_cast<int>(type));
}

AttributeValue AttributeValue::string(std::string text) {
  AttributeValue value;
  value.type_ = AttributeType::s;
  value.text_ = std::move(text);
  return value;
}

AttributeValue AttributeValue::number(std::string decimal_text) {
  AttributeValue value;
  value.type_ = AttributeType::n;
  value.text_ = std::move(decimal_text);
  return value;
}

AttributeValue AttributeValue::number(int64_t integer) {
  // Straight into the value's text (std::to_string's own string would be moved in).
  AttributeValue value;
  value.type_ = AttributeType::n;
  char digits[24];
  const char* end = std::to_chars(digits, digits + sizeof digits, integer).ptr;
  value.text_.assign(digits, static_cast<std::size_t>(end - digits));
  return value;
}

AttributeValue AttributeValue::binary(std::string base64_text) {
  AttributeValue value;
  value.type_ = AttributeType::b;
  value.text_ = std::move(base64_text);
  return value;
}

AttributeValue AttributeValue::boolean(bool flag) {
  AttributeValue value;
  value.type_ = AttributeType::boolean;
  value.bool_ = flag;
  return value;
}

AttributeValue AttributeValue::null() { return AttributeValue{}; }

AttributeValue AttributeValue::map(Item members) {
  AttributeValue value;
  value.type_ = AttributeType::m;
  value.composite().map = std::move(members);
  return value;
}

AttributeValue AttributeValue::list(AttributeList elements) {
  AttributeValue value;
  value.type_ = AttributeType::l;
  value.composite().list = std::move(elements);
  return value;
}

AttributeValue AttributeValue::string_set(std::vector<std::string> members) {
  AttributeValue value;
  value.type_ = AttributeType::ss;
  value.composite().set = std::move(members);
  return value;
}

AttributeValue AttributeValue::number_set(std::vector<std::string> members) {
  AttributeValue value = string_set(std::move(members));
  value.type_ = AttributeType::ns;
  return value;
}

AttributeValue AttributeValue::binary_set(std::vector<std::string> members) {
  AttributeValue value = string_set(std::move(members));
  value.type_ = AttributeType::bs;
  return value;
}

bool AttributeValue::is_set() const {
  return type_ == AttributeType::ss || type_ == AttributeType::ns || type_ == AttributeType::bs;
}

void AttributeValue::text_of_wrong_type() const {
  LP_UNREACHABLE("AttributeValue::text() of a {} value", type_descriptor(type_));
}

bool AttributeValue::as_bool() const {
  LP_ASSERT(type_ == AttributeType::boolean);
  return bool_;
}

const Item& AttributeValue::as_map() const {
  LP_ASSERT(type_ == AttributeType::m);
  return composite_ ? composite_->map : no_attributes;
}

Item& AttributeValue::as_map() {
  LP_ASSERT(type_ == AttributeType::m);
  return composite().map;
}

const AttributeList& AttributeValue::as_list() const {
  LP_ASSERT(type_ == AttributeType::l);
  return composite_ ? composite_->list : no_elements;
}

AttributeList& AttributeValue::as_list() {
  LP_ASSERT(type_ == AttributeType::l);
  return composite().list;
}

const std::vector<std::string>& AttributeValue::as_set() const {
  LP_ASSERT(is_set());
  return composite_ ? composite_->set : no_members;
}

std::vector<std::string>& AttributeValue::as_set() {
  LP_ASSERT(is_set());
  return composite().set;
}

bool AttributeValue::operator==(const AttributeValue& other) const {
  if (type_ != other.type_) return false;
  switch (type_) {
    case AttributeType::s:
    case AttributeType::n:
    case AttributeType::b: return text_ == other.text_;
    case AttributeType::boolean: return bool_ == other.bool_;
    case AttributeType::null: return true;
    case AttributeType::m: return as_map() == other.as_map();
    case AttributeType::l: return as_list() == other.as_list();
    case AttributeType::ss:
    case AttributeType::ns:
    case AttributeType::bs: return as_set() == other.as_set();
  }
  LP_UNREACHABLE("attribute type {}", static_cast<int>(type_));
}

namespace {

// Significant digits of a decimal text: digits without leading and trailing
// zeros. Works on unvalidated text too (it only counts), so sizing never fails.
std::size_t significant_digits(std::string_view text) {
  // Digits from the first non-zero one to the last non-zero one, counted in
  // one pass: `pending_zeros` are zeros that count only if a non-zero follows.
  std::size_t count = 0;
  std::size_t pending_zeros = 0;
  for (char c : text) {
    if (c == 'e' || c == 'E') break;
    if (c < '0' || c > '9') continue;
    if (c == '0') {
      if (count > 0) ++pending_zeros;
      continue;
    }
    count += pending_zeros + 1;
    pending_zeros = 0;
  }
  return count == 0 ? 1 : count;
}

std::size_t binary_size_bytes(const std::string& base64_text) {
  const auto decoded = base64_decode(base64_text);
  return decoded ? decoded->size() : base64_text.size();
}

}  // namespace

std::size_t attribute_size_bytes_computed(const AttributeValue& value) {
  switch (value.type()) {
    case AttributeType::s: return value.text().size();
    case AttributeType::n:
    case AttributeType::b: {
#ifdef NDEBUG
      if (value.size_bytes_ != 0) return value.size_bytes_;
#endif
      const std::size_t size = value.is(AttributeType::n) ? (significant_digits(value.text()) + 1) / 2 + 1
                                                          : binary_size_bytes(value.text());
      LP_ASSERT_MSG(value.size_bytes_ == 0 || value.size_bytes_ == size, "stale kept size {} of a value of {} bytes",
                    value.size_bytes_, size);
      value.size_bytes_ = static_cast<uint32_t>(size);
      return size;
    }
    case AttributeType::boolean:
    case AttributeType::null: return 1;
    case AttributeType::m: {
      std::size_t total = 3;
      for (const auto& [name, member] : value.as_map()) total += 1 + name.size() + attribute_size_bytes(member);
      return total;
    }
    case AttributeType::l: {
      std::size_t total = 3;
      for (const auto& element : value.as_list()) total += 1 + attribute_size_bytes(element);
      return total;
    }
    case AttributeType::ss: {
      std::size_t total = 0;
      for (const auto& member : value.as_set()) total += member.size();
      return total;
    }
    case AttributeType::ns: {
      std::size_t total = 0;
      for (const auto& member : value.as_set()) total += (significant_digits(member) + 1) / 2 + 1;
      return total;
    }
    case AttributeType::bs: {
      std::size_t total = 0;
      for (const auto& member : value.as_set()) total += binary_size_bytes(member);
      return total;
    }
  }
  LP_UNREACHABLE("attribute type {}", static_cast<int>(value.type()));
}

std::size_t item_size_bytes(const Item& item) {
#ifdef NDEBUG
  if (item.size_bytes_ != Item::kSizeUnknown) return item.size_bytes_;
#endif
  std::size_t total = 0;
  for (const auto& [name, value] : item) total += name.size() + attribute_size_bytes(value);
  LP_ASSERT_MSG(item.size_bytes_ == Item::kSizeUnknown || item.size_bytes_ == total,
                "stale cached item size {} (the members add up to {})", item.size_bytes_, total);
  item.size_bytes_ = total;
  return total;
}

int64_t write_capacity_units(std::size_t item_bytes) {
  return std::max<int64_t>(1, static_cast<int64_t>((item_bytes + write_unit_bytes - 1) / write_unit_bytes));
}

int64_t read_capacity_units(std::size_t item_bytes) {
  return std::max<int64_t>(1, static_cast<int64_t>((item_bytes + read_unit_bytes - 1) / read_unit_bytes));
}

std::string describe(const AttributeValue& value) {
  const auto tag = type_descriptor(value.type());
  switch (value.type()) {
    case AttributeType::s:
    case AttributeType::n:
    case AttributeType::b: return fmt::format("{{{}:{}}}", tag, value.text());
    case AttributeType::boolean: return fmt::format("{{{}:{}}}", tag, value.as_bool());
    case AttributeType::null: return "{NULL:true}";
    case AttributeType::m: {
      std::vector<std::string> parts;
      for (const auto& [name, member] : value.as_map()) parts.push_back(name + "=" + describe(member));
      return fmt::format("{{M:{{{}}}}}", fmt::join(parts, ","));
    }
    case AttributeType::l: {
      std::vector<std::string> parts;
      for (const auto& element : value.as_list()) parts.push_back(describe(element));
      return fmt::format("{{L:[{}]}}", fmt::join(parts, ","));
    }
    case AttributeType::ss:
    case AttributeType::ns:
    case AttributeType::bs: return fmt::format("{{{}:[{}]}}", tag, fmt::join(value.as_set(), ","));
  }
  LP_UNREACHABLE("attribute type {}", static_cast<int>(value.type()));
}

}  // namespace leaseproof::dynamo
