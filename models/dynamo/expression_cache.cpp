// ExpressionCache, and the ExpressionContext plumbing that parses through it.

#include "base/assert.hpp"
#include "base/bytes.hpp"
#include "models/dynamo/expression.hpp"

#include "models/dynamo/expression_parser.hpp"

namespace leaseproof::dynamo {

namespace {

// Eight bytes a step (the texts are a hundred bytes or more, hashed on every
// request); the length goes in last, so ("ab","c") and ("a","bc") differ.
// A tail of 1 to 7 bytes is read with at most two loads (base/bytes.hpp).
// Only for the cache's lookups, within one process: never part of a result.
inline void mix_word(uint64_t& hash, uint64_t word) {
  constexpr uint64_t kMultiplier = 0x9E3779B97F4A7C15ULL;
  hash = (hash ^ word) * kMultiplier;
  hash ^= hash >> 32;
}

void mix(uint64_t& hash, std::string_view bytes) {
  for_each_le_word(bytes, [&hash](uint64_t word) { mix_word(hash, word); });
  mix_word(hash, bytes.size());
}

// ASCII only: std::tolower would consult the process's locale, and core/
// depends on nothing global.
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool contains_word(std::string_view text, std::string_view lower_word) {
  if (text.size() < lower_word.size()) return false;
  for (std::size_t i = 0; i + lower_word.size() <= text.size(); ++i) {
    bool same = true;
    for (std::size_t j = 0; j < lower_word.size() && same; ++j) {
      same = ascii_lower(text[i + j]) == lower_word[j];
    }
    if (same) return true;
  }
  return false;
}

// The two checks that read a value's content rather than its type.
bool cacheable(std::string_view text) {
  return !contains_word(text, "between") && !contains_word(text, "attribute_type");
}

// The names, and the value placeholders with their types: with the texts,
// what keys a cache entry (the values themselves are bound per request).
void mix_placeholders(uint64_t& hash, const ExpressionAttributeNames& names, const ExpressionAttributeValues& values) {
  for (const auto& [key, name] : names) {
    mix(hash, key);
    mix(hash, name);
  }
  for (const auto& [key, value] : values) {
    mix(hash, key);
    mix_word(hash, static_cast<uint64_t>(value.type()));
  }
}

using ValueTypes = std::vector<std::pair<std::string, AttributeType>>;  // placeholder, type

ValueTypes value_types(const ExpressionAttributeValues& values) {
  ValueTypes types;
  types.reserve(values.size());
  for (const auto& [key, value] : values) types.emplace_back(key, value.type());
  return types;
}

bool same_value_types(const ValueTypes& kept, const ExpressionAttributeValues& values) {
  if (kept.size() != values.size()) return false;
  auto value = values.begin();
  for (const auto& [placeholder, type] : kept) {
    if (placeholder != value->first || type != value->second.type()) return false;
    ++value;
  }
  return true;
}

// A value operand without a placeholder is a slot the plan does not use (the
// operand of REMOVE): there is nothing to bind.
void bind_operand(Operand& operand, const ExpressionAttributeValues& values) {
  if (operand.kind == Operand::Kind::value && !operand.placeholder.empty()) {
    operand.value = values.at(operand.placeholder);
  }
}

void bind_update_value(UpdateValue& value, const ExpressionAttributeValues& values) {
  if (value.kind == UpdateValue::Kind::value && !value.placeholder.empty()) {
    value.value = values.at(value.placeholder);
  }
  for (auto& argument : value.arguments) bind_update_value(argument, values);
}

}  // namespace

namespace expression_detail {

Condition bind_values(Condition condition, const ExpressionAttributeValues& values) {
  for (auto& operand : condition.operands) bind_operand(operand, values);
  for (auto& child : condition.children) child = bind_values(std::move(child), values);
  return condition;
}

UpdatePlan bind_values(UpdatePlan plan, const ExpressionAttributeValues& values) {
  for (auto& action : plan.actions) bind_update_value(action.value, values);
  return plan;
}

}  // namespace expression_detail

uint64_t ExpressionCache::key_hash(ExpressionKind kind, std::string_view text, const ExpressionAttributeNames& names,
                                   const ExpressionAttributeValues& values) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  const char kind_byte = static_cast<char>(kind);
  mix(hash, std::string_view(&kind_byte, 1));
  mix(hash, text);
  mix_placeholders(hash, names, values);
  return hash;
}

bool ExpressionCache::matches(const Entry& entry, ExpressionKind kind, std::string_view text,
                              const ExpressionAttributeNames& names, const ExpressionAttributeValues& values) {
  return entry.kind == kind && entry.text == text && entry.names == names && same_value_types(entry.values, values);
}

const ExpressionCache::Entry* ExpressionCache::find(ExpressionKind kind, std::string_view text,
                                                    const ExpressionAttributeNames& names,
                                                    const ExpressionAttributeValues& values) {
  const auto bucket = entries_.find(key_hash(kind, text, names, values));
  if (bucket != entries_.end()) {
    for (const Entry& entry : bucket->second) {
      if (matches(entry, kind, text, names, values)) {
        ++hits_;
        return &entry;
      }
    }
  }
  ++misses_;
  return nullptr;
}

void ExpressionCache::insert(uint64_t hash, Entry entry) {
  if (size_ >= capacity_) {
    entries_.clear();
    size_ = 0;
  }
  entries_[hash].push_back(std::move(entry));
  ++size_;
}

ExpressionContext::ExpressionContext(ExpressionAttributeNames names, ExpressionAttributeValues values)
    : owned_names_(std::move(names)), owned_values_(std::move(values)), names_(&owned_names_),
      values_(&owned_values_) {}

ExpressionContext::ExpressionContext(Borrow, const ExpressionAttributeNames& names,
                                     const ExpressionAttributeValues& values, ExpressionCache* cache)
    : names_(&names), values_(&values), cache_(cache) {}

ExpressionContext ExpressionContext::borrowing(const ExpressionAttributeNames& names,
                                               const ExpressionAttributeValues& values, ExpressionCache* cache) {
  return ExpressionContext(Borrow{}, names, values, cache);
}

const ExpressionCache::Entry* ExpressionContext::cached(ExpressionKind kind, std::string_view text) {
  // No cacheable() check here: an uncacheable text is never stored, so it
  // simply misses.
  if (cache_ == nullptr) return nullptr;
  const ExpressionCache::Entry* entry = cache_->find(kind, text, *names_, *values_);
  if (entry == nullptr) return nullptr;
  hits_.push_back(entry);
  return entry;
}

void ExpressionContext::remember(ExpressionKind kind, std::string_view text, std::shared_ptr<const Condition> condition,
                                 std::shared_ptr<const UpdatePlan> update, const std::set<std::string>& names_used,
                                 const std::set<std::string>& values_used) {
  if (cache_ == nullptr || !cacheable(text)) return;
  // The insert may move or drop the entries hit so far: keep what they used.
  for (const ExpressionCache::Entry* hit : hits_) {
    used_names_.insert(hit->used_names.begin(), hit->used_names.end());
    used_values_.insert(hit->used_values.begin(), hit->used_values.end());
  }
  hits_.clear();
  ExpressionCache::Entry entry;
  entry.kind = kind;
  entry.text = std::string(text);
  entry.names = *names_;
  entry.values = value_types(*values_);
  entry.condition = std::move(condition);
  entry.update = std::move(update);
  entry.used_names = names_used;
  entry.used_values = values_used;
  cache_->insert(ExpressionCache::key_hash(kind, text, *names_, *values_), std::move(entry));
}

// ---- whole write requests ------------------------------------------------------

struct WriteShapeAccess {
  static uint64_t hash(const std::optional<std::string>& update, const std::optional<std::string>& condition,
                       const ExpressionAttributeNames& names, const ExpressionAttributeValues& values) {
    uint64_t hash = 0x84222325CBF29CE4ULL;
    const char flags = static_cast<char>((update ? 1 : 0) | (condition ? 2 : 0));
    mix(hash, std::string_view(&flags, 1));
    if (update) mix(hash, *update);
    if (condition) mix(hash, *condition);
    mix_placeholders(hash, names, values);
    return hash;
  }

  static bool matches(const ExpressionCache::WriteShape& shape, const std::optional<std::string>& update,
                      const std::optional<std::string>& condition, const ExpressionAttributeNames& names,
                      const ExpressionAttributeValues& values) {
    return shape.update == update && shape.condition == condition && shape.names == names &&
           same_value_types(shape.values, values);
  }

  static const ExpressionCache::WriteShape* find(ExpressionCache& cache, uint64_t hash,
                                                 const std::optional<std::string>& update,
                                                 const std::optional<std::string>& condition,
                                                 const ExpressionAttributeNames& names,
                                                 const ExpressionAttributeValues& values) {
    const auto bucket = cache.writes_.find(hash);
    if (bucket != cache.writes_.end()) {
      for (const auto& shape : bucket->second) {
        if (matches(shape, update, condition, names, values)) {
          ++cache.write_hits_;
          return &shape;
        }
      }
    }
    ++cache.write_misses_;
    return nullptr;
  }

  static void insert(ExpressionCache& cache, uint64_t hash, const std::optional<std::string>& update,
                     const std::optional<std::string>& condition, const ExpressionAttributeNames& names,
                     const ExpressionAttributeValues& values, const PreparedWrite& prepared) {
    ExpressionCache::WriteShape shape;
    shape.update = update;
    shape.condition = condition;
    shape.names = names;
    shape.values = value_types(values);
    if (prepared.update) shape.update_plan = prepared.update->plan;
    if (prepared.condition) shape.condition_tree = prepared.condition->tree;
    if (cache.write_count_ >= cache.capacity_) {
      cache.writes_.clear();
      cache.write_count_ = 0;
    }
    cache.writes_[hash].push_back(std::move(shape));
    ++cache.write_count_;
  }
};

Result<PreparedWrite> prepare_write(const std::optional<std::string>& update,
                                    const std::optional<std::string>& condition,
                                    const ExpressionAttributeNames& names, const ExpressionAttributeValues& values,
                                    ExpressionCache* cache) {
  uint64_t hash = 0;
  if (cache != nullptr) {
    hash = WriteShapeAccess::hash(update, condition, names, values);
    if (const auto* shape = WriteShapeAccess::find(*cache, hash, update, condition, names, values)) {
      PreparedWrite prepared;
      if (update) prepared.update = BoundUpdatePlan{shape->update_plan, &values};
      if (condition) prepared.condition = BoundCondition{shape->condition_tree, &values};
      return prepared;
    }
  }
  auto context = ExpressionContext::borrowing(names, values, cache);
  if (auto keys = context.check_keys(); !keys) return std::move(keys).error();
  PreparedWrite prepared;
  if (update) {
    auto parsed = context.parse_bound_update(*update);
    if (!parsed) return std::move(parsed).error();
    prepared.update = std::move(parsed).value();
  }
  if (condition) {
    auto parsed = context.parse_bound_condition(*condition, ExpressionKind::condition);
    if (!parsed) return std::move(parsed).error();
    prepared.condition = std::move(parsed).value();
  }
  if (auto used = context.check_all_used(); !used) return std::move(used).error();
  // The two checks that read a value's content cannot be skipped next time.
  const bool shape_cacheable = (!update || cacheable(*update)) && (!condition || cacheable(*condition));
  if (cache != nullptr && shape_cacheable) {
    WriteShapeAccess::insert(*cache, hash, update, condition, names, values, prepared);
  }
  return prepared;
}

}  // namespace leaseproof::dynamo
