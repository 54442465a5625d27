// Keys of the simulated DynamoDB store: ordering, partition hashing, and the
// validation of items and keys against a table's schema, with DynamoDB's
// messages (as dynalite, the reference of the differential test, words them).

#include <algorithm>

#include <fmt/format.h>

#include "core/dynamo/decimal.hpp"

#include "models/dynamo/store_internal.hpp"

namespace leaseproof::models {

namespace store_detail {

using dynamo::AttributeType;

int compare_keys(const AttributeValue& a, const AttributeValue& b) {
  if (a.type() != b.type()) return a.type() < b.type() ? -1 : 1;
  if (a.is(AttributeType::null)) return 0;
  // The common case of every map keyed by item keys, without the general path.
  if (a.is(AttributeType::s)) return lex_compare(a.text(), b.text());
  if (a.is(AttributeType::n)) {
    // Sort keys such as sequence numbers: canonical integers, compared as
    // such without parsing decimals (the general path orders them alike).
    if (const auto x = dynamo::Decimal::small_integer(a.text())) {
      if (const auto y = dynamo::Decimal::small_integer(b.text())) return *x < *y ? -1 : (*x > *y ? 1 : 0);
    }
  }
  const auto order = dynamo::compare_values(a, b);
  LP_ASSERT_MSG(order.has_value(), "key values of type {} are not ordered", dynamo::type_descriptor(a.type()));
  if (*order < 0) return -1;
  return *order > 0 ? 1 : 0;
}

bool TableKeyLess::operator()(const TableKey& a, const TableKey& b) const {
  const int hash = compare_keys(a.hash, b.hash);
  if (hash != 0) return hash < 0;
  return compare_keys(a.range, b.range) < 0;
}

std::size_t KeyValueHash::operator()(const AttributeValue& value) const {
  const auto type = static_cast<std::size_t>(value.type());
  if (value.is(AttributeType::null)) return type;
  return TextHash{}(value.text()) ^ (type * 0x9E3779B97F4A7C15ULL);
}

std::size_t TableKeyHash::operator()(const TableKey& key) const {
  const std::size_t hash = KeyValueHash{}(key.hash);
  return hash ^ (KeyValueHash{}(key.range) + 0x9E3779B97F4A7C15ULL + (hash << 6) + (hash >> 2));
}

bool IndexEntryKeyLess::operator()(const IndexEntryKey& a, const IndexEntryKey& b) const {
  const int range = compare_keys(a.range, b.range);
  if (range != 0) return range < 0;
  return TableKeyLess{}(a.table_key, b.table_key);
}

dynamo::AttributeType attribute_type_of(dynamo::ScalarAttributeType type) {
  switch (type) {
    case dynamo::ScalarAttributeType::s: return AttributeType::s;
    case dynamo::ScalarAttributeType::n: return AttributeType::n;
    case dynamo::ScalarAttributeType::b: return AttributeType::b;
  }
  LP_UNREACHABLE("scalar attribute type {}", static_cast<int>(type));
}

// FNV-1a over the type descriptor and the value's text. Numbers are stored in
// canonical text, so equal numbers land in the same partition.
uint32_t partition_of(const AttributeValue& hash_value, uint32_t partitions) {
  LP_ASSERT_GT(partitions, 0u);
  uint64_t hash = 0xCBF29CE484222325ULL;
  auto mix = [&](std::string_view bytes) {
    for (char c : bytes) {
      hash ^= static_cast<uint8_t>(c);
      hash *= 0x100000001B3ULL;
    }
  };
  mix(dynamo::type_descriptor(hash_value.type()));
  mix(hash_value.text());
  return static_cast<uint32_t>(hash % partitions);
}

DynamoError resource_not_found() {
  return DynamoError{std::string(dynamo::error_type::resource_not_found), "Requested resource not found",
                     std::nullopt, {}};
}

Item pick(const Item& item, const std::vector<std::string>& names) {
  Item out;
  out.reserve(std::min(names.size(), item.size()));
  for (const auto& name : names) {
    const auto found = item.find(name);
    if (found != item.end()) out.emplace(found->first, found->second);
  }
  return out;
}

bool indexed(const IndexState& index, const Item& item) {
  return item.contains(index.hash.name) && (!index.range || item.contains(index.range->name));
}

namespace {

// The attribute `name` of an item being walked in name order from `at`:
// advances `at` past smaller names; nullptr when absent.
const AttributeValue* walk_to(const Item* item, Item::const_iterator& at, const std::string& name) {
  if (item == nullptr) return nullptr;
  while (at != item->end() && lex_compare(at->first, name) < 0) ++at;
  return at != item->end() && at->first == name ? &at->second : nullptr;
}

const AttributeValue* find_value(const Item* item, const std::string& name) {
  if (item == nullptr) return nullptr;
  const auto found = item->find(name);
  return found != item->end() ? &found->second : nullptr;
}

}  // namespace

Item pick_sorted(const Item& item, const std::vector<std::string>& sorted_names) {
  Item out;
  out.reserve(std::min(sorted_names.size(), item.size()));
  Item::const_iterator at = item.begin();
  for (const std::string& name : sorted_names) {
    if (walk_to(&item, at, name) != nullptr) out.append_sorted(*at);
  }
  return out;
}

IndexEntryPair index_entries(const IndexState& index, const Item* old_item, const Item* new_item) {
  IndexEntryPair pair;
  if (index.projected.empty()) {  // ALL: the entry is the item
    pair.old_hash = find_value(old_item, index.hash.name);
    pair.new_hash = find_value(new_item, index.hash.name);
    if (index.range) {
      pair.old_range = find_value(old_item, index.range->name);
      pair.new_range = find_value(new_item, index.range->name);
    }
  } else {
    for (const std::string& name : index.projected) {  // holds the index keys
      // Found by name (Item::find scans a small item by length first):
      // cheaper than walking both items in name order. An update mostly
      // keeps the item's attribute names: the new item is tried at the
      // position the name holds in the old one first.
      const AttributeValue* old_value = nullptr;
      const AttributeValue* new_value = nullptr;
      if (old_item != nullptr) {
        const auto old_at = old_item->find(name);
        if (old_at != old_item->end()) {
          old_value = &old_at->second;
          const auto offset = old_at - old_item->begin();
          if (new_item != nullptr && offset < static_cast<std::ptrdiff_t>(new_item->size())) {
            const auto& candidate = *(new_item->begin() + offset);
            if (lex_equal(candidate.first, name)) new_value = &candidate.second;
          }
        }
      }
      if (new_value == nullptr) new_value = find_value(new_item, name);
      if (new_value != nullptr) pair.new_bytes += name.size() + dynamo::attribute_size_bytes(*new_value);
      // Once one attribute differs, the rest need not be compared.
      if (pair.same && ((old_value == nullptr) != (new_value == nullptr) ||
                        (old_value != nullptr && !(*old_value == *new_value)))) {
        pair.same = false;
      }
      const std::size_t at = static_cast<std::size_t>(&name - index.projected.data());
      if (at == index.hash_at) {
        pair.old_hash = old_value;
        pair.new_hash = new_value;
      } else if (at == index.range_at) {
        pair.old_range = old_value;
        pair.new_range = new_value;
      }
    }
  }
  pair.old_in = pair.old_hash != nullptr && (!index.range || pair.old_range != nullptr);
  pair.new_in = pair.new_hash != nullptr && (!index.range || pair.new_range != nullptr);
  if (!pair.old_in || !pair.new_in) {
    pair.same = pair.old_in == pair.new_in;
  } else if (index.projected.empty()) {
    pair.same = *old_item == *new_item;
  }
  if (index.projected.empty() && pair.new_in) pair.new_bytes = dynamo::item_size_bytes(*new_item);
  return pair;
}

std::size_t entry_bytes(const IndexState& index, const Item& item) {
  if (index.projected.empty()) return dynamo::item_size_bytes(item);
  std::size_t bytes = 0;
  for (const std::string& name : index.projected) {
    if (const AttributeValue* value = find_value(&item, name)) bytes += name.size() + dynamo::attribute_size_bytes(*value);
  }
  return bytes;
}

const IndexState* TableState::find_index(std::string_view index_name) const {
  for (const auto& index : indexes) {
    if (index.definition.index_name == index_name) return &index;
  }
  return nullptr;
}

IndexState* TableState::find_index(std::string_view index_name) {
  for (auto& index : indexes) {
    if (index.definition.index_name == index_name) return &index;
  }
  return nullptr;
}

namespace {

bool is_empty_key_value(const AttributeValue& value) {
  return (value.is(AttributeType::s) || value.is(AttributeType::b)) && value.text().empty();
}

std::string_view empty_noun(const AttributeValue& value) {
  return value.is(AttributeType::s) ? "string" : "binary";
}

std::optional<DynamoError> check_key_size(const AttributeValue& value, bool is_hash) {
  if (value.is(AttributeType::n)) return std::nullopt;
  const std::size_t bytes = dynamo::attribute_size_bytes(value);
  if (is_hash && bytes > hash_key_bytes_max) {
    return dynamo::validation_error(
        "One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes");
  }
  if (!is_hash && bytes > range_key_bytes_max) {
    return dynamo::validation_error(
        "One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit "
        "of 1024 bytes");
  }
  return std::nullopt;
}

std::optional<DynamoError> check_item_key_attribute(const Item& item, const KeyAttribute& key, bool is_hash) {
  const auto found = item.find(key.name);
  if (found == item.end()) {
    return dynamo::validation_error(
        fmt::format("One or more parameter values were invalid: Missing the key {} in the item", key.name));
  }
  if (found->second.type() != key.type) {
    return dynamo::validation_error(fmt::format(
        "One or more parameter values were invalid: Type mismatch for key {} expected: {} actual: {}", key.name,
        dynamo::type_descriptor(key.type), dynamo::type_descriptor(found->second.type())));
  }
  if (is_empty_key_value(found->second)) {
    return dynamo::validation_error(fmt::format(
        "One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an "
        "empty {} value. Key: {}",
        empty_noun(found->second), key.name));
  }
  return check_key_size(found->second, is_hash);
}

std::optional<DynamoError> check_index_key_attribute(const Item& item, const KeyAttribute& key,
                                                     const std::string& index_name) {
  const auto found = item.find(key.name);
  if (found == item.end()) return std::nullopt;  // sparse: the item is simply not indexed
  if (found->second.type() != key.type) {
    return dynamo::validation_error(fmt::format(
        "One or more parameter values were invalid: Type mismatch for Index Key {} Expected: {} Actual: {} "
        "IndexName: {}",
        key.name, dynamo::type_descriptor(key.type), dynamo::type_descriptor(found->second.type()), index_name));
  }
  if (is_empty_key_value(found->second)) {
    // DynamoDB's wording (dynalite accepts empty index keys).
    return dynamo::validation_error(fmt::format(
        "One or more parameter values are not valid. A value specified for a secondary index key is not "
        "supported. The AttributeValue for a key attribute cannot contain an empty {} value. IndexName: {}, "
        "IndexKey: {}",
        empty_noun(found->second), index_name, key.name));
  }
  return std::nullopt;
}

std::optional<DynamoError> check_key_piece(const Item& key, const KeyAttribute& attribute, bool is_hash) {
  const auto found = key.find(attribute.name);
  if (found == key.end() || found->second.type() != attribute.type) {
    return dynamo::validation_error("The provided key element does not match the schema");
  }
  if (is_empty_key_value(found->second)) {
    return dynamo::validation_error(fmt::format(
        "One or more parameter values were invalid: The AttributeValue for a key attribute cannot contain an "
        "empty {} value. Key: {}",
        empty_noun(found->second), attribute.name));
  }
  return check_key_size(found->second, is_hash);
}

TableKey table_key_from(const TableState& table, const Item& item) {
  TableKey key;
  key.hash = item.at(table.hash.name);
  if (table.range) key.range = item.at(table.range->name);
  return key;
}

}  // namespace

}  // namespace store_detail

using store_detail::ItemRecord;
using store_detail::TableKey;

Result<TableKey> DynamoStore::State::key_of_item(const TableState& table, const Item& item) const {
  if (auto problem = store_detail::check_item_key_attribute(item, table.hash, true)) return std::move(*problem);
  if (table.range) {
    if (auto problem = store_detail::check_item_key_attribute(item, *table.range, false)) {
      return std::move(*problem);
    }
  }
  for (const auto& index : table.indexes) {
    const std::string& name = index.definition.index_name;
    if (auto problem = store_detail::check_index_key_attribute(item, index.hash, name)) return std::move(*problem);
    if (index.range) {
      if (auto problem = store_detail::check_index_key_attribute(item, *index.range, name)) {
        return std::move(*problem);
      }
    }
  }
  return store_detail::table_key_from(table, item);
}

Result<TableKey> DynamoStore::State::key_of_key(const TableState& table, const Item& key) const {
  const std::size_t expected = table.range ? 2 : 1;
  if (key.size() != expected) return dynamo::validation_error("The provided key element does not match the schema");
  if (auto problem = store_detail::check_key_piece(key, table.hash, true)) return std::move(*problem);
  if (table.range) {
    if (auto problem = store_detail::check_key_piece(key, *table.range, false)) return std::move(*problem);
  }
  // The key values in canonical form, copied once (not the whole key item).
  TableKey table_key = store_detail::table_key_from(table, key);
  dynamo::canonicalize_numbers(table_key.hash);
  dynamo::canonicalize_numbers(table_key.range);
  return table_key;
}

namespace store_detail {

namespace {

// Sort keys mostly arrive in order (a sink's sequence numbers): a key past a
// partition's last one needs no walk down its tree, to be found missing or
// to be put at the end.
template <typename Records>
bool past_last(const Records& records, const AttributeValue& range) {
  return records.empty() || compare_keys(records.rbegin()->first, range) < 0;
}

}  // namespace

ItemRecord& record_for(TableState& table, const TableKey& key) {
  auto& records = table.items[key.hash];
  // The end() hint spares the walk operator[] makes to find the same place.
  if (past_last(records, key.range)) {
    return records.emplace_hint(records.end(), key.range, ItemRecord{})->second;
  }
  return records[key.range];
}

}  // namespace store_detail

ItemRecord* DynamoStore::State::find_record(TableState& table, const TableKey& key) {
  const auto partition = table.items.find(key.hash);
  if (partition == table.items.end()) return nullptr;
  auto& records = partition->second;
  if (store_detail::past_last(records, key.range)) return nullptr;
  const auto record = records.find(key.range);
  return record == records.end() ? nullptr : &record->second;
}

const Item* DynamoStore::State::latest(TableState& table, const TableKey& key) {
  const ItemRecord* record = find_record(table, key);
  return record == nullptr ? nullptr : record->current.get();
}

bool DynamoStore::State::draw_stale_replica(bool consistent_read) {
  if (consistent_read || options.stale_read_chance.is_zero()) return false;
  return prng.chance(options.stale_read_chance);
}

const std::shared_ptr<const Item>& DynamoStore::State::eventual(TableState& table, const ItemRecord& record,
                                                                bool stale, Instant now) {
  const bool recent = now < record.written_at + options.eventual_read_window;
  if (stale && recent) {
    ++account(table).stale_reads;
    return record.previous;
  }
  return record.current;
}

}  // namespace leaseproof::models
