// Commits and the store's background work: asynchronous GSI propagation, the
// TTL sweeper, and forgetting deleted items and idempotency tokens once no
// read or retry can observe them.

#include <algorithm>
#include <charconv>

#include "core/dynamo/decimal.hpp"

#include "models/dynamo/store_internal.hpp"

namespace leaseproof::models {

using store_detail::EventKey;
using store_detail::GsiChange;
using store_detail::IndexEntryKey;
using store_detail::TtlCheck;

namespace {

constexpr int64_t ns_per_s = 1'000'000'000;

// The TTL attribute as whole epoch seconds (rounded up), or nullopt when the
// item has no usable TTL: missing, not a Number, or beyond the simulated range
// (DynamoDB ignores non-Number TTL attributes).
std::optional<int64_t> ttl_expiry_s(const Item& item, const std::string& attribute) {
  const auto found = item.find(attribute);
  if (found == item.end() || !found->second.is(dynamo::AttributeType::n)) return std::nullopt;
  auto number = dynamo::Decimal::parse(found->second.text());
  if (!number) return std::nullopt;
  if (*number > dynamo::Decimal::from_int(store_detail::ttl_seconds_max) ||
      *number < dynamo::Decimal::from_int(-store_detail::ttl_seconds_max)) {
    return std::nullopt;
  }
  const std::string text = number->to_string();
  const auto dot = text.find('.');
  int64_t seconds = 0;
  const char* end = text.data() + (dot == std::string::npos ? text.size() : dot);
  std::from_chars(text.data(), end, seconds);
  if (dot != std::string::npos && !number->is_negative()) ++seconds;
  return seconds;
}

bool ttl_expired(int64_t expiry_s, Instant now) {
  const int64_t now_s = now.ns() / ns_per_s;
  if (expiry_s < now_s - store_detail::ttl_ignore_older_than_s) return false;
  return expiry_s <= now_s;
}

}  // namespace

std::shared_ptr<const Item> DynamoStore::State::index_entry(const IndexState& index,
                                                            const std::shared_ptr<const Item>& item) const {
  // Sparse: only items carrying every index key attribute appear.
  if (item == nullptr || !store_detail::indexed(index, *item)) return nullptr;
  return item;
}

// Replaces the item's version, keeping the previous one for stale reads, and
// schedules each GSI change after a lag drawn per write and index. A later
// change of the same item is never due before an earlier one, so an index
// sees each item's versions in order.
void DynamoStore::State::commit_write(TableState& table, const TableKey& key, std::optional<Item> new_item,
                                      Instant now, const store_detail::WriteCost* cost,
                                      store_detail::ItemRecord* found) {
  auto& record = found != nullptr ? *found : store_detail::record_for(table, key);
  record.previous = std::move(record.current);
  record.current = new_item ? std::make_shared<const Item>(std::move(*new_item)) : nullptr;
  record.written_at = now;
  const Item* old_item = record.previous.get();
  if (!streams.empty()) {
    if (const auto stream = streams.find(table.name); stream != streams.end()) {
      stream->second(old_item, record.current.get());
    }
  }
  if (old_item && !record.current) --table.live_items;
  if (!old_item && record.current) ++table.live_items;
  if (!record.current) tombstones.push_back(store_detail::Tombstone{now, table.name, key});
  for (std::size_t i = 0; i < table.indexes.size(); ++i) {
    IndexState& index = table.indexes[i];
    const store_detail::IndexWriteCost* change = cost != nullptr ? cost->of_index(i) : nullptr;
    const bool changed = cost != nullptr ? change != nullptr
                                         : !store_detail::index_entries(index, old_item, record.current.get()).same;
    if (!changed) continue;
    // The cost already says whether the new version is in the index.
    std::shared_ptr<const Item> new_entry = change == nullptr ? index_entry(index, record.current)
                                            : change->new_in  ? record.current
                                                              : nullptr;
    auto* const item = &*index.items.try_emplace(key).first;
    Instant due = now + options.gsi_lag.sample(prng);
    if (item->second.pending > 0) due = std::max(due, item->second.last_due);
    item->second.last_due = due;
    ++item->second.pending;
    gsi_changes.push(EventKey{due, next_sequence++}, GsiChange{&index, item, std::move(new_entry)});
  }
  if (record.current) schedule_ttl(table, key, *record.current, now);
}

void DynamoStore::State::apply_gsi_change(GsiChange&& change) {
  IndexState& index = *change.index;
  store_detail::IndexItem& item = change.item->second;
  if (change.entry && item.position) {
    // Most changes keep the entry where it is (a renew rewrites projected
    // attributes, not the index key): replace it in place.
    // Same values, as written (structurally equal, not merely equal keys:
    // 1 and 1.0 are one key, but the entry keeps the text it was given).
    const store_detail::IndexPosition& at = *item.position;
    const bool same_range = index.range ? change.entry->at(index.range->name) == at.key.range : true;
    if (same_range && change.entry->at(index.hash.name) == at.hash) {
      *at.entry = std::move(change.entry);
      settle_gsi_change(index, change.item);
      return;
    }
  }
  if (item.position) {
    const auto partition = index.entries.find(item.position->hash);
    LP_ASSERT(partition != index.entries.end());
    partition->second.erase(item.position->key);
    if (partition->second.empty()) index.entries.erase(partition);
    item.position.reset();
  }
  if (change.entry) {
    // Copies of the keys: the entry itself moves into the index.
    AttributeValue hash = change.entry->at(index.hash.name);
    IndexEntryKey entry_key{index.range ? change.entry->at(index.range->name) : AttributeValue{}, change.item->first};
    std::shared_ptr<const Item>& slot = index.entries[hash][entry_key];
    slot = std::move(change.entry);
    item.position = store_detail::IndexPosition{std::move(hash), std::move(entry_key), &slot};
  }
  settle_gsi_change(index, change.item);
}

// One fewer change of the item is pending in the index.
void DynamoStore::State::settle_gsi_change(IndexState& index, store_detail::IndexItems::value_type* item) {
  LP_ASSERT_GT(item->second.pending, 0);
  if (--item->second.pending == 0 && !item->second.position) index.items.erase(index.items.find(item->first));
}

void DynamoStore::State::schedule_ttl(TableState& table, const TableKey& key, const Item& item, Instant now) {
  const auto attribute = ttl_attributes.find(table.name);
  if (attribute == ttl_attributes.end()) return;
  const auto expiry_s = ttl_expiry_s(item, attribute->second);
  if (!expiry_s) return;
  if (*expiry_s < now.ns() / ns_per_s - store_detail::ttl_ignore_older_than_s) return;
  const Instant expiry = std::max(Instant::from_ns(*expiry_s * ns_per_s), now);
  const Duration lag = prng.uniform_duration(options.ttl_sweep_lag_min, options.ttl_sweep_lag_max);
  ttl_checks.push(EventKey{expiry + lag, next_sequence++}, TtlCheck{table.name, key});
}

// A check finds the item as it is now: a later write that moved or removed
// the TTL scheduled its own check, so this one then does nothing.
void DynamoStore::State::run_ttl_check(const TtlCheck& check, Instant now) {
  TableState& table = tables.find(check.table)->second;
  const Item* item = latest(table, check.key);
  if (item == nullptr) return;
  const auto attribute = ttl_attributes.find(table.name);
  if (attribute == ttl_attributes.end()) return;
  const auto expiry_s = ttl_expiry_s(*item, attribute->second);
  if (!expiry_s || !ttl_expired(*expiry_s, now)) return;
  // A TTL delete is a service-side write: no capacity consumed, counted apart.
  commit_write(table, check.key, std::nullopt, now);
  ++account(table).ttl_deletes;
}

Instant DynamoStore::State::advance(Instant now) {
  while (true) {
    const bool gsi_due = !gsi_changes.empty() && gsi_changes.top_key().first <= now;
    const bool ttl_due = !ttl_checks.empty() && ttl_checks.top_key().first <= now;
    if (!gsi_due && !ttl_due) break;
    if (gsi_due && (!ttl_due || gsi_changes.top_key() < ttl_checks.top_key())) {
      apply_gsi_change(gsi_changes.pop());
    } else {
      const Instant due = ttl_checks.top_key().first;
      const TtlCheck check = ttl_checks.pop();
      run_ttl_check(check, due);
    }
  }
  while (!tombstones.empty() && tombstones.front().at + options.eventual_read_window <= now) {
    const store_detail::Tombstone& tombstone = tombstones.front();
    TableState& table = tables.find(tombstone.table)->second;
    const auto partition = table.items.find(tombstone.key.hash);
    if (partition != table.items.end()) {
      const auto record = partition->second.find(tombstone.key.range);
      if (record != partition->second.end() && !record->second.current && record->second.written_at == tombstone.at) {
        partition->second.erase(record);
        if (partition->second.empty()) table.items.erase(partition);
      }
    }
    tombstones.pop_front();
  }
  tokens.forget_while([now](Instant at) { return at + store_detail::idempotency_window <= now; });
  Instant next = Instant::max();
  if (!gsi_changes.empty()) next = std::min(next, gsi_changes.top_key().first);
  if (!ttl_checks.empty()) next = std::min(next, ttl_checks.top_key().first);
  return next;
}

}  // namespace leaseproof::models
