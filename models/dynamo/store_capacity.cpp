// Capacity of the simulated DynamoDB store: what each write and read costs
// (per the DynamoDB developer guide, "Read/write capacity mode" and "Global
// secondary indexes: provisioned throughput considerations"), token buckets
// per partition and per provisioned table or index, and the accounting.

#include <algorithm>

#include "models/dynamo/store_internal.hpp"

namespace leaseproof::models {

namespace store_detail {

bool IndexState::touches_projection(const std::shared_ptr<const dynamo::UpdatePlan>& plan) const {
  if (projected.empty()) return true;  // ALL: any attribute is the entry's
  for (const PlanTouch& seen : plan_touches) {
    if (seen.plan == plan) return seen.touches;
  }
  const bool touches = std::any_of(plan->actions.begin(), plan->actions.end(), [&](const dynamo::UpdateAction& action) {
    return std::binary_search(projected.begin(), projected.end(), action.path[0].name);
  });
  plan_touches[plan_touches_next] = PlanTouch{plan, touches};
  plan_touches_next = (plan_touches_next + 1) % plan_touches.size();
  return touches;
}

namespace {

constexpr int64_t scale = 1'000'000'000;  // unit-nanoseconds per unit

std::size_t size_of(const Item* item) { return item != nullptr ? dynamo::item_size_bytes(*item) : 0; }

DynamoError throughput_exceeded(std::string message) {
  return DynamoError{std::string(dynamo::error_type::provisioned_throughput_exceeded), std::move(message),
                     std::nullopt, {}};
}

DynamoError table_provisioned_exceeded() {
  return throughput_exceeded(
      "The level of configured provisioned throughput for the table was exceeded. Consider increasing your "
      "provisioning level with the UpdateTable API.");
}

DynamoError index_provisioned_exceeded() {
  return throughput_exceeded(
      "The level of configured provisioned throughput for one or more global secondary indexes of the table was "
      "exceeded. Consider increasing your provisioning level for the under-provisioned global secondary indexes "
      "with the UpdateTable API");
}

// DynamoDB's text for a hot partition (on-demand and provisioned alike).
DynamoError partition_exceeded() {
  return throughput_exceeded(
      "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your "
      "table or index so please try again shortly. If exceptions persist, check if you have a hot key: "
      "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html");
}

bool write_ready(TokenBucket& bucket, Instant now) {
  bucket.refill(now);
  return bucket.has_tokens();
}

}  // namespace

TokenBucket::TokenBucket(int64_t rate_per_s, int64_t capacity_units, int64_t initial_units, Instant now)
    : rate_per_s_(rate_per_s),
      capacity_scaled_(capacity_units * scale),
      scaled_(std::min(initial_units, capacity_units) * scale),
      refilled_at_(now) {
  LP_ASSERT_GE(rate_per_s, 0);
  LP_ASSERT_GE(capacity_units, 0);
}

void TokenBucket::refill(Instant now) {
  if (now <= refilled_at_) return;  // a clock step backwards refills nothing
  const auto elapsed_ns = static_cast<uint128>(static_cast<uint64_t>((now - refilled_at_).ns()));
  refilled_at_ = now;
  if (scaled_ >= capacity_scaled_) return;
  const uint128 room = static_cast<uint128>(static_cast<int128>(capacity_scaled_) - scaled_);
  const uint128 added = elapsed_ns * static_cast<uint64_t>(rate_per_s_);
  scaled_ = added >= room ? capacity_scaled_ : scaled_ + static_cast<int64_t>(added);
}

void TokenBucket::take(int64_t units) {
  LP_ASSERT_GE(units, 0);
  scaled_ -= units * scale;
}

}  // namespace store_detail

dynamo::DynamoError hot_partition_error() { return store_detail::partition_exceeded(); }

using store_detail::IndexWriteCost;
using store_detail::WriteCost;

// Base table: the larger of the old and new item, 1 WCU per KB rounded up.
// Each GSI: an entry added, removed or rewritten in place is one index write
// of the entry's size; a changed index key is two (delete + put); an entry
// that is unchanged (e.g. a non-projected attribute changed) costs nothing
// (assumed: the guide only lists the cases that do write).
WriteCost DynamoStore::State::write_cost(const TableState& table, const TableKey& key, const Item* old_item,
                                         const Item* new_item, int64_t multiplier,
                                         const dynamo::BoundUpdatePlan* changed_by) const {
  WriteCost cost;
  cost.partition = store_detail::partition_of(key.hash, options.partitions_per_table);
  const std::size_t bytes = std::max(store_detail::size_of(old_item), store_detail::size_of(new_item));
  cost.base_units = dynamo::write_capacity_units(bytes) * multiplier;
  for (std::size_t i = 0; i < table.indexes.size(); ++i) {
    const IndexState& index = table.indexes[i];
    // An update changes only the top-level attributes its actions name
    // (updated_item): one that names none of the projected ones (index
    // keys included) leaves the entry as it is. ALL projects everything.
    if (changed_by != nullptr && !index.touches_projection(changed_by->plan)) {
      LP_ASSERT_MSG(!store_detail::kDebugChecks || store_detail::index_entries(index, old_item, new_item).same,
                    "an update that touches no projected attribute changed an index entry");
      continue;
    }
    // Entries are not built: their keys and sizes are read from the items.
    const store_detail::IndexEntryPair entries = store_detail::index_entries(index, old_item, new_item);
    if (entries.same) continue;
    IndexWriteCost index_cost{i, {}, entries.new_in};
    auto add_write = [&](const AttributeValue& hash, std::size_t entry_bytes) {
      const uint32_t partition = store_detail::partition_of(hash, options.partitions_per_table);
      index_cost.writes.emplace_back(partition, dynamo::write_capacity_units(entry_bytes) * multiplier);
    };
    const bool key_changed =
        entries.old_in && entries.new_in &&
        (store_detail::compare_keys(*entries.old_hash, *entries.new_hash) != 0 ||
         (index.range && store_detail::compare_keys(*entries.old_range, *entries.new_range) != 0));
    if (!entries.new_in || key_changed) add_write(*entries.old_hash, store_detail::entry_bytes(index, *old_item));
    if (entries.new_in) add_write(*entries.new_hash, entries.new_bytes);
    cost.indexes.push_back(std::move(index_cost));
  }
  return cost;
}

// A failed condition still consumes write capacity, sized by the existing item
// (1 WCU when there is none), and writes no index (per the developer guide,
// "Condition expressions" / "Conditional writes").
WriteCost DynamoStore::State::failed_write_cost(const TableState&, const TableKey& key, const Item* old_item,
                                                int64_t multiplier) const {
  WriteCost cost;
  cost.partition = store_detail::partition_of(key.hash, options.partitions_per_table);
  cost.base_units = dynamo::write_capacity_units(store_detail::size_of(old_item)) * multiplier;
  return cost;
}

std::optional<DynamoError> DynamoStore::State::check_write_capacity(TableState& table, const WriteCost& cost,
                                                                    Instant now) {
  if (!options.throttling) return std::nullopt;
  if (table.provisioned && !store_detail::write_ready(table.provisioned->write, now)) {
    return store_detail::table_provisioned_exceeded();
  }
  if (!store_detail::write_ready(table.partitions[cost.partition].write, now)) {
    return store_detail::partition_exceeded();
  }
  for (const auto& index_cost : cost.indexes) {
    IndexState& index = table.indexes[index_cost.index];
    if (index.provisioned && !store_detail::write_ready(index.provisioned->write, now)) {
      return store_detail::index_provisioned_exceeded();
    }
    for (const auto& [partition, units] : index_cost.writes) {
      if (!store_detail::write_ready(index.partitions[partition].write, now)) {
        return store_detail::partition_exceeded();
      }
    }
  }
  return std::nullopt;
}

void DynamoStore::State::charge_write(TableState& table, const WriteCost& cost) {
  TableAccounting& counters = account(table);
  counters.table.write_units += cost.base_units;
  for (const auto& index_cost : cost.indexes) {
    IndexState& index = table.indexes[index_cost.index];
    counters.indexes[index.definition.index_name].write_units += index_cost.units();
    if (!options.throttling) continue;
    if (index.provisioned) index.provisioned->write.take(index_cost.units());
    for (const auto& [partition, units] : index_cost.writes) index.partitions[partition].write.take(units);
  }
  if (!options.throttling) return;
  if (table.provisioned) table.provisioned->write.take(cost.base_units);
  table.partitions[cost.partition].write.take(cost.base_units);
}

std::optional<DynamoError> DynamoStore::State::check_read_capacity(TableState& table, const IndexState* index,
                                                                   uint32_t partition, Instant now) {
  if (!options.throttling) return std::nullopt;
  if (index == nullptr) {
    if (table.provisioned && !store_detail::write_ready(table.provisioned->read, now)) {
      return store_detail::table_provisioned_exceeded();
    }
    if (!store_detail::write_ready(table.partitions[partition].read, now)) return store_detail::partition_exceeded();
    return std::nullopt;
  }
  IndexState& mutable_index = *table.find_index(index->definition.index_name);
  if (mutable_index.provisioned && !store_detail::write_ready(mutable_index.provisioned->read, now)) {
    return store_detail::index_provisioned_exceeded();
  }
  if (!store_detail::write_ready(mutable_index.partitions[partition].read, now)) {
    return store_detail::partition_exceeded();
  }
  return std::nullopt;
}

void DynamoStore::State::charge_read(TableState& table, const IndexState* index, uint32_t partition,
                                     int64_t half_units) {
  TableAccounting& counters = account(table);
  if (index == nullptr) {
    counters.table.read_half_units += half_units;
    if (!options.throttling) return;
    if (table.provisioned) table.provisioned->read.take(half_units);
    table.partitions[partition].read.take(half_units);
    return;
  }
  counters.indexes[index->definition.index_name].read_half_units += half_units;
  if (!options.throttling) return;
  IndexState& mutable_index = *table.find_index(index->definition.index_name);
  if (mutable_index.provisioned) mutable_index.provisioned->read.take(half_units);
  mutable_index.partitions[partition].read.take(half_units);
}

std::optional<dynamo::ConsumedCapacity> DynamoStore::State::write_consumed(dynamo::ReturnConsumedCapacity mode,
                                                                           const TableState& table,
                                                                           const WriteCost& cost) const {
  if (mode == dynamo::ReturnConsumedCapacity::none) return std::nullopt;
  dynamo::ConsumedCapacity consumed;
  consumed.table_name = table.name;
  int64_t total = cost.base_units;
  for (const auto& index_cost : cost.indexes) {
    total += index_cost.units();
    if (mode == dynamo::ReturnConsumedCapacity::indexes) {
      consumed.global_secondary_indexes[table.indexes[index_cost.index].definition.index_name] =
          static_cast<double>(index_cost.units());
    }
  }
  // Doubles only at the wire boundary; every count behind them is an integer.
  consumed.capacity_units = static_cast<double>(total);
  if (mode == dynamo::ReturnConsumedCapacity::indexes) {
    consumed.table_capacity_units = static_cast<double>(cost.base_units);
  }
  return consumed;
}

}  // namespace leaseproof::models

namespace leaseproof::models::store_detail {

std::optional<dynamo::ConsumedCapacity> read_consumed(dynamo::ReturnConsumedCapacity mode, const std::string& table,
                                                      const IndexState* index, int64_t half_units) {
  if (mode == dynamo::ReturnConsumedCapacity::none) return std::nullopt;
  dynamo::ConsumedCapacity consumed;
  consumed.table_name = table;
  const double units = static_cast<double>(half_units) / 2;  // wire boundary only
  consumed.capacity_units = units;
  if (mode == dynamo::ReturnConsumedCapacity::indexes) {
    if (index == nullptr) {
      consumed.table_capacity_units = units;
    } else {
      consumed.table_capacity_units = 0.0;
      consumed.global_secondary_indexes[index->definition.index_name] = units;
    }
  }
  return consumed;
}

}  // namespace leaseproof::models::store_detail
