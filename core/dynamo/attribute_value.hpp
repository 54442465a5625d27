#pragma once
// AttributeValue: one DynamoDB value in its wire data model (S, N, B, BOOL,
// NULL, M, L, SS, NS, BS). Numbers and binaries are kept as the text the wire
// carries (N: decimal string, B: base64), so a decode/encode round trip is
// byte-exact; numeric meaning comes from Decimal (decimal.hpp) where needed.
//
// Item maps attribute names to values in name order (byte-wise, the order of
// std::map<std::string>), so that iteration order, and therefore every encoded
// byte and every trace hash, is deterministic.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>


namespace leaseproof::dynamo {

enum class AttributeType : uint8_t { s, n, b, boolean, null, m, l, ss, ns, bs };

// Wire descriptor: "S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS".
std::string_view type_descriptor(AttributeType type);

class AttributeValue;

// A name the map can be looked up or keyed by: std::string, std::string_view,
// a string literal.
template <typename K>
concept AttributeName = std::convertible_to<K, std::string_view>;

// Item: attribute name -> value, the subset of std::map's interface this code
// base uses, stored flat in a vector of (name, value) pairs kept sorted by
// name. Items are small, copied on every write and looked up by name all the
// time; a tree node per attribute made that allocation and pointer chasing.
// The order is std::string's byte-wise order, exactly std::map<std::string>'s,
// so iteration order (and every encoded byte and trace hash) is unchanged.
// Lookups take std::string_view, so they build no temporary strings.
//
// Unlike std::map, inserting or erasing invalidates iterators, pointers and
// references into the Item (as for any vector): do not hold them across a
// change of the same Item. Names must not be changed through an iterator.
//
// AttributeValue is still incomplete here (AttributeValue::map takes an
// Item); member functions are defined below it.
class Item {
 public:
  using key_type = std::string;
  using mapped_type = AttributeValue;
  using value_type = std::pair<std::string, AttributeValue>;
  using container_type = std::vector<value_type>;
  using size_type = std::size_t;
  using iterator = container_type::iterator;
  using const_iterator = container_type::const_iterator;

  Item() = default;
  // Sorted by name; of duplicate names the first wins, as with std::map.
  Item(std::initializer_list<value_type> members);
  Item(const Item&) = default;
  Item& operator=(const Item&) = default;
  // A moved-from item is empty: it forgets its size.
  Item(Item&& other) noexcept
      : entries_(std::move(other.entries_)), size_bytes_(std::exchange(other.size_bytes_, kSizeUnknown)) {}
  Item& operator=(Item&& other) noexcept {
    entries_ = std::move(other.entries_);
    size_bytes_ = std::exchange(other.size_bytes_, kSizeUnknown);
    return *this;
  }

  // Non-const access may change the members: it forgets the cached size.
  iterator begin() {
    forget_size();
    return entries_.begin();
  }
  iterator end() {
    forget_size();
    return entries_.end();
  }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  const_iterator cbegin() const { return entries_.cbegin(); }
  const_iterator cend() const { return entries_.cend(); }

  bool empty() const { return entries_.empty(); }
  size_type size() const { return entries_.size(); }
  void clear() {
    forget_size();
    entries_.clear();
  }
  void reserve(size_type count) { entries_.reserve(count); }

  iterator find(std::string_view name);
  const_iterator find(std::string_view name) const;
  bool contains(std::string_view name) const;
  size_type count(std::string_view name) const { return contains(name) ? 1 : 0; }
  // Throws std::out_of_range when absent, as std::map::at does.
  AttributeValue& at(std::string_view name);
  const AttributeValue& at(std::string_view name) const;

  // Inserts a NULL value when absent.
  template <AttributeName K>
  AttributeValue& operator[](K&& name);
  // Inserts when absent, else leaves the present value (and `args`) alone.
  template <AttributeName K, typename... Args>
  std::pair<iterator, bool> try_emplace(K&& name, Args&&... args);
  template <AttributeName K, typename... Args>
  std::pair<iterator, bool> emplace(K&& name, Args&&... args) {
    return try_emplace(std::forward<K>(name), std::forward<Args>(args)...);
  }
  template <AttributeName K, typename V>
  std::pair<iterator, bool> insert_or_assign(K&& name, V&& value);

  // Appends a member whose name sorts after every present one: builds an item
  // from members already in order without a search. Out of order is a bug
  // (checked).
  void append_sorted(const value_type& member);
  void append_sorted(value_type&& member);
  // The same, the member built in place from its name (no pair to move in).
  void emplace_sorted(std::string_view name, AttributeValue&& value);

  size_type erase(std::string_view name);
  iterator erase(const_iterator position);
  iterator erase(const_iterator first, const_iterator last);

  bool operator==(const Item& other) const;

  // Records what item_size_bytes would answer, known by other means (an
  // update's new size, followed as it writes). Debug builds check it against
  // a fresh sum at the next item_size_bytes.
  void keep_size(std::size_t bytes) const { size_bytes_ = bytes; }

 private:
  friend std::size_t item_size_bytes(const Item& item);
  static constexpr std::size_t kSizeUnknown = static_cast<std::size_t>(-1);
  void forget_size() { size_bytes_ = kSizeUnknown; }

  static constexpr size_type kScanMax = 16;  // find() scans items up to this size
  static bool name_less(const value_type& entry, std::string_view name);
  // First entry whose name is not less than `name`.
  iterator lower_bound(std::string_view name);
  const_iterator lower_bound(std::string_view name) const;

  container_type entries_;
  // item_size_bytes, kept between calls while only const access happens (a
  // store version is immutable and shared: its size is computed once). A
  // member changed through a reference taken before the size was computed
  // would leave it stale: Debug builds check every use against a fresh sum.
  // The first item_size_bytes writes it, so one Item read by several threads
  // at once needs its size computed before (no Item is shared so here: each
  // run has its own store).
  mutable std::size_t size_bytes_ = kSizeUnknown;
};

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

  // S, N and B text. Asserts the type. Inline: read for every key, size and
  // comparison.
  const std::string& text() const {
    if (type_ != AttributeType::s && type_ != AttributeType::n && type_ != AttributeType::b) [[unlikely]] {
      text_of_wrong_type();
    }
    return text_;
  }
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

  // Inline: values are copied and destroyed all the time (requests, items,
  // versions), and the scalar case needs no call; only a composite does.
  AttributeValue(const AttributeValue& other)
      : type_(other.type_),
        bool_(other.bool_),
        size_bytes_(other.size_bytes_),
        text_(other.text_),
        composite_(other.composite_ ? clone(*other.composite_) : nullptr) {}
  AttributeValue& operator=(const AttributeValue& other);
  // A moved-from value forgets its kept size, as its text goes.
  AttributeValue(AttributeValue&& other) noexcept
      : type_(other.type_),
        bool_(other.bool_),
        size_bytes_(std::exchange(other.size_bytes_, 0)),
        text_(std::move(other.text_)),
        composite_(std::move(other.composite_)) {}
  AttributeValue& operator=(AttributeValue&& other) noexcept {
    type_ = other.type_;
    bool_ = other.bool_;
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    text_ = std::move(other.text_);
    composite_ = std::move(other.composite_);
    return *this;
  }
  ~AttributeValue() = default;

 private:
  // Members of M, L and the sets, allocated only for those types: scalars
  // (almost every value a table holds) stay small, and short strings copy
  // without allocating. A moved-from or absent composite reads as empty.
  struct Composite;
  struct CompositeDeleter {
    void operator()(Composite* composite) const;
  };
  [[noreturn]] void text_of_wrong_type() const;
  static Composite* clone(const Composite& composite);
  Composite& composite();
  const Composite* composite_or_null() const { return composite_.get(); }

  friend std::size_t attribute_size_bytes(const AttributeValue& value);
  friend std::size_t attribute_size_bytes_computed(const AttributeValue& value);

  AttributeType type_ = AttributeType::null;
  bool bool_ = false;
  // attribute_size_bytes of an N or B value (0: not computed yet), kept as an
  // Item keeps its size: the text of a scalar never changes after it is made
  // (only assignment replaces it, and carries or clears this). Counting a
  // number's significant digits or decoding base64 once per value instead of
  // at every write that sizes the item. Fits in the padding before text_.
  mutable uint32_t size_bytes_ = 0;
  std::string text_;
  std::unique_ptr<Composite, CompositeDeleter> composite_;
};

// Item's members that need AttributeValue complete.

inline bool Item::name_less(const value_type& entry, std::string_view name) {
  return std::string_view{entry.first} < name;
}

inline Item::const_iterator Item::lower_bound(std::string_view name) const {
  return std::lower_bound(entries_.begin(), entries_.end(), name, name_less);
}

inline Item::iterator Item::lower_bound(std::string_view name) {
  return std::lower_bound(entries_.begin(), entries_.end(), name, name_less);
}

// A small item is scanned for the name (lengths differ more often than not,
// so most members are passed over without reading a byte): cheaper than a
// binary search's ordered comparisons and its hard-to-predict branches.
inline Item::const_iterator Item::find(std::string_view name) const {
  if (entries_.size() <= kScanMax) {
    for (auto at = entries_.begin(); at != entries_.end(); ++at) {
      if (at->first == name) return at;
    }
    return entries_.end();
  }
  const auto at = lower_bound(name);
  return at != entries_.end() && at->first == name ? at : entries_.end();
}

inline Item::iterator Item::find(std::string_view name) {
  forget_size();
  const auto found = std::as_const(*this).find(name);
  return entries_.begin() + (found - entries_.cbegin());
}

inline bool Item::contains(std::string_view name) const { return find(name) != end(); }

inline AttributeValue& Item::at(std::string_view name) {
  const auto found = find(name);
  if (found == end()) throw std::out_of_range("Item::at: no such attribute");
  return found->second;
}

inline const AttributeValue& Item::at(std::string_view name) const {
  const auto found = find(name);
  if (found == end()) throw std::out_of_range("Item::at: no such attribute");
  return found->second;
}

template <AttributeName K>
AttributeValue& Item::operator[](K&& name) {
  return try_emplace(std::forward<K>(name)).first->second;
}

template <AttributeName K, typename... Args>
std::pair<Item::iterator, bool> Item::try_emplace(K&& name, Args&&... args) {
  forget_size();
  const std::string_view wanted(name);
  const auto at = lower_bound(wanted);
  if (at != entries_.end() && at->first == wanted) return {at, false};
  // The entry is built before the vector changes, so `name` and `args` may
  // refer into this Item.
  value_type entry(std::string(std::forward<K>(name)), AttributeValue(std::forward<Args>(args)...));
  return {entries_.insert(at, std::move(entry)), true};
}

template <AttributeName K, typename V>
std::pair<Item::iterator, bool> Item::insert_or_assign(K&& name, V&& value) {
  forget_size();
  const std::string_view wanted(name);
  const auto at = lower_bound(wanted);
  if (at != entries_.end() && at->first == wanted) {
    at->second = std::forward<V>(value);
    return {at, false};
  }
  value_type entry(std::string(std::forward<K>(name)), AttributeValue(std::forward<V>(value)));
  return {entries_.insert(at, std::move(entry)), true};
}

inline Item::size_type Item::erase(std::string_view name) {
  const auto found = find(name);
  if (found == end()) return 0;
  entries_.erase(found);
  return 1;
}

inline void Item::append_sorted(const value_type& member) {
  if (!entries_.empty() && entries_.back().first >= member.first) {
    throw std::invalid_argument("Item::append_sorted: member out of order");
  }
  forget_size();
  entries_.push_back(member);
}

inline void Item::append_sorted(value_type&& member) {
  if (!entries_.empty() && entries_.back().first >= member.first) {
    throw std::invalid_argument("Item::append_sorted: member out of order");
  }
  forget_size();
  entries_.push_back(std::move(member));
}

inline void Item::emplace_sorted(std::string_view name, AttributeValue&& value) {
  if (!entries_.empty() && std::string_view{entries_.back().first} >= name) {
    throw std::invalid_argument("Item::emplace_sorted: member out of order");
  }
  forget_size();
  entries_.emplace_back(std::piecewise_construct, std::forward_as_tuple(name), std::forward_as_tuple(std::move(value)));
}

inline Item::iterator Item::erase(const_iterator position) {
  forget_size();
  return entries_.erase(position);
}

inline Item::iterator Item::erase(const_iterator first, const_iterator last) {
  forget_size();
  return entries_.erase(first, last);
}

inline bool Item::operator==(const Item& other) const { return entries_ == other.entries_; }

// Sizes per the DynamoDB developer guide ("Item sizes and formats"): strings
// and names are UTF-8 bytes, binaries their decoded length, numbers about one
// byte per two significant digits plus one, BOOL and NULL one byte, lists and
// maps 3 bytes plus one byte per element plus the elements (and map keys).
std::size_t attribute_size_bytes(const AttributeValue& value);
std::size_t item_size_bytes(const Item& item);
// attribute_size_bytes without the inline shortcuts (a string's length, a
// kept size), which sizes every other value.
std::size_t attribute_size_bytes_computed(const AttributeValue& value);

// Called for every member of every item written: the common cases inline.
inline std::size_t attribute_size_bytes(const AttributeValue& value) {
  if (value.type_ == AttributeType::s) return value.text_.size();
#ifdef NDEBUG  // Debug builds check every kept size against a fresh count
  if (value.size_bytes_ != 0) return value.size_bytes_;  // only N and B keep one
#endif
  return attribute_size_bytes_computed(value);
}

inline constexpr std::size_t item_size_bytes_max = 400 * 1024;
inline constexpr std::size_t write_unit_bytes = 1024;   // 1 WCU per KB written
inline constexpr std::size_t read_unit_bytes = 4 * 1024;  // 1 RCU per 4 KB read (strong)

// Capacity units for an item of this size: ceil(size / unit), at least 1.
int64_t write_capacity_units(std::size_t item_bytes);
int64_t read_capacity_units(std::size_t item_bytes);

// Compact human-readable form for messages and test output, e.g. {N:10}.
std::string describe(const AttributeValue& value);

}  // namespace leaseproof::dynamo
