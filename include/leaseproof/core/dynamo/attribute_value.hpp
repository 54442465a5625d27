#pragma once
// AttributeValue: one DynamoDB value in its wire data model (S, N, B, BOOL,
// NULL, M, L, SS, NS, BS). Numbers and binaries are kept as the text the wire
// carries (N: decimal string, B: base64), so a decode/encode round trip is
// byte-exact; numeric meaning comes from Decimal (decimal.hpp) where needed.
//
// Item is an ordered map so that iteration order, and therefore every encoded
// byte and every trace hash, is deterministic.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace leaseproof::dynamo {

enum class AttributeType : uint8_t { s, n, b, boolean, null, m, l, ss, ns, bs };

// Wire descriptor: "S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS".
std::string_view type_descriptor(AttributeType type);

class AttributeValue;
// std::map and std::vector of a type that is still incomplete here: vector is
// guaranteed since C++17; map works with libstdc++ and libc++, which is every
// toolchain this project builds with.
using Item = std::map<std::string, AttributeValue>;
using AttributeList = std::vector<AttributeValue>;

class AttributeValue {
 public:
  AttributeValue() = default;  // NULL

  static AttributeValue string(std::string text);
  static AttributeValue number(std::string decimal_text);
  static AttributeValue number(int64_t value);
  static AttributeValue binary(std::string base64_text);
  static AttributeValue boolean(bool value);
  static AttributeValue null();
  static AttributeValue map(Item members);
  static AttributeValue list(AttributeList elements);
  static AttributeValue string_set(std::vector<std::string> members);
  static AttributeValue number_set(std::vector<std::string> members);
  static AttributeValue binary_set(std::vector<std::string> members);

  AttributeType type() const { return type_; }
  bool is(AttributeType type) const { return type_ == type; }
  bool is_set() const;

  // S, N and B text. Asserts the type.
  const std::string& text() const;
  bool as_bool() const;
  const Item& as_map() const;
  Item& as_map();
  const AttributeList& as_list() const;
  AttributeList& as_list();
  // SS, NS and BS members, in the order they were given.
  const std::vector<std::string>& as_set() const;
  std::vector<std::string>& as_set();

  // Structural equality: same type and same text (numbers as written). For
  // DynamoDB's semantic equality (numbers by value, sets unordered) use
  // values_equal in expression.hpp.
  bool operator==(const AttributeValue& other) const;

  AttributeValue(const AttributeValue& other);
  AttributeValue& operator=(const AttributeValue& other);
  AttributeValue(AttributeValue&&) noexcept = default;
  AttributeValue& operator=(AttributeValue&&) noexcept = default;
  ~AttributeValue();

 private:
  // Members of M, L and the sets, allocated only for those types: scalars
  // (almost every value a table holds) stay small, and short strings copy
  // without allocating. A moved-from or absent composite reads as empty.
  struct Composite;
  struct CompositeDeleter {
    void operator()(Composite* composite) const;
  };
  Composite& composite();
  const Composite* composite_or_null() const { return composite_.get(); }

  AttributeType type_ = AttributeType::null;
  bool bool_ = false;
  std::string text_;
  std::unique_ptr<Composite, CompositeDeleter> composite_;
};

// Sizes per the DynamoDB developer guide ("Item sizes and formats"): strings
// and names are UTF-8 bytes, binaries their decoded length, numbers about one
// byte per two significant digits plus one, BOOL and NULL one byte, lists and
// maps 3 bytes plus one byte per element plus the elements (and map keys).
std::size_t attribute_size_bytes(const AttributeValue& value);
std::size_t item_size_bytes(const Item& item);

inline constexpr std::size_t item_size_bytes_max = 400 * 1024;
inline constexpr std::size_t write_unit_bytes = 1024;   // 1 WCU per KB written
inline constexpr std::size_t read_unit_bytes = 4 * 1024;  // 1 RCU per 4 KB read (strong)

// Capacity units for an item of this size: ceil(size / unit), at least 1.
int64_t write_capacity_units(std::size_t item_bytes);
int64_t read_capacity_units(std::size_t item_bytes);

// Compact human-readable form for messages and test output, e.g. {N:10}.
std::string describe(const AttributeValue& value);

}  // namespace leaseproof::dynamo
