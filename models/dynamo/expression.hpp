#pragma once
// DynamoDB expressions: condition/filter, key condition, update and
// projection. Text is parsed once, with #name and :value placeholders resolved
// against the request's ExpressionAttributeNames/Values, into a plan that is
// then evaluated or applied as a pure function of (plan, item). Parse errors
// are ValidationExceptions whose messages follow DynamoDB's own wording.
//
// Typical use by a table model, one ExpressionContext per request so that the
// unused-placeholder check sees every expression of that request:
//
//   ExpressionContext context(request.write.expression_attribute_names,
//                             request.write.expression_attribute_values);
//   auto condition = context.parse_condition(*request.write.condition_expression);
//   auto plan = context.parse_update(*request.update_expression);
//   auto all_used = context.check_all_used();
//   ...
//   if (!evaluate(*condition, old_item)) -> ConditionalCheckFailedException
//   Item new_item = old_item; auto applied = apply(*plan, key_schema, new_item);

#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dynamo/attribute_value.hpp"
#include "core/dynamo/error.hpp"
#include "core/dynamo/types.hpp"

namespace leaseproof::dynamo {

// Expressions longer than this are rejected (DynamoDB's documented 4 KB limit).
inline constexpr std::size_t expression_bytes_max = 4096;
// Parenthesis and NOT nesting bound: keeps the recursive descent's stack small.
inline constexpr std::size_t expression_depth_max = 64;
// DynamoDB's documented maximum number of operands in an IN list.
inline constexpr std::size_t in_operands_max = 100;

// One step of a document path: a member name, or a list index ([n]).
struct PathElement {
  std::string name;
  bool is_index = false;
  std::size_t index = 0;

  bool operator==(const PathElement&) const = default;
};
// First element is always a name (the top-level attribute).
using DocumentPath = std::vector<PathElement>;

// "a.b[0]". Names are printed raw, not escaped.
std::string to_string(const DocumentPath& path);

struct Operand {
  enum class Kind : uint8_t { path, value, size };
  Kind kind = Kind::value;
  DocumentPath path;         // path, size
  std::string placeholder;   // value: ":v", kept for printing
  AttributeValue value;      // value: resolved from ExpressionAttributeValues

  bool operator==(const Operand&) const = default;
};

enum class Comparator : uint8_t { eq, ne, lt, le, gt, ge };

enum class ConditionKind : uint8_t {
  comparison,            // operands[0] <comparator> operands[1]
  between,               // operands[0] BETWEEN operands[1] AND operands[2]
  in,                    // operands[0] IN (operands[1..])
  logical_and,           // children[0] AND children[1]
  logical_or,            // children[0] OR children[1]
  logical_not,           // NOT children[0]
  attribute_exists,      // (operands[0])
  attribute_not_exists,  // (operands[0])
  attribute_type,        // (operands[0], operands[1])
  begins_with,           // (operands[0], operands[1])
  contains,              // (operands[0], operands[1])
};

struct Condition {
  ConditionKind kind = ConditionKind::comparison;
  Comparator comparator = Comparator::eq;
  std::vector<Operand> operands;
  std::vector<Condition> children;

  bool operator==(const Condition&) const = default;
};

// Fully parenthesised text that parses back to the same Condition (given the
// same ExpressionAttributeValues and names that are not reserved words).
std::string to_string(const Condition& condition);

// Evaluates against one item. Type mismatches and missing attributes make a
// comparison false (and <> true), as DynamoDB does; never fails.
bool evaluate(const Condition& condition, const Item& item);

// A condition ready to evaluate without copying it: its tree, shared with the
// expression cache when it came from there, and the request's values that its
// placeholders stand for (read at evaluation, instead of being copied into
// the tree). `values` must outlive it: the request being served.
struct BoundCondition {
  std::shared_ptr<const Condition> tree;
  const ExpressionAttributeValues* values = nullptr;
};
bool evaluate(const BoundCondition& condition, const Item& item);

// DynamoDB equality: numbers by value, sets as unordered sets, maps and lists
// element-wise. Values of different types are never equal.
bool values_equal(const AttributeValue& a, const AttributeValue& b);
// Ordering for S (UTF-8 bytes), N (numeric) and B (bytes) of the same type;
// nullopt for any other pair. Also the sort-key order of Query.
std::optional<std::strong_ordering> compare_values(const AttributeValue& a, const AttributeValue& b);

// Resolves a document path in an item; nullptr when any step is missing.
const AttributeValue* resolve(const Item& item, const DocumentPath& path);

// --- Update expressions -----------------------------------------------------

struct UpdateValue {
  enum class Kind : uint8_t { path, value, if_not_exists, list_append, plus, minus };
  Kind kind = Kind::value;
  DocumentPath path;             // path
  std::string placeholder;       // value
  AttributeValue value;          // value
  std::vector<UpdateValue> arguments;  // functions and plus/minus: two each

  bool operator==(const UpdateValue&) const = default;
};

struct UpdateAction {
  enum class Kind : uint8_t { set, remove, add, delete_elements };
  Kind kind = Kind::set;
  DocumentPath path;
  UpdateValue value;  // set: right-hand side; add/delete: the value operand; remove: unused

  bool operator==(const UpdateAction&) const = default;
};

struct UpdatePlan {
  std::vector<UpdateAction> actions;  // in the order written
  bool operator==(const UpdatePlan&) const = default;
};

// "One or more parameter values were invalid: Cannot update attribute pk. This
// attribute is part of the key" when an action touches a key attribute.
Result<void> check_key_attributes(const UpdatePlan& plan, const KeySchema& key_schema);

// Applies the plan to `item` (which the caller has set to the old item, or to
// the key alone when the item did not exist). Every operand reads the item as
// it was before the update. On error `item` is left unchanged. Checks the key
// attributes and the 400 KB item size limit.
Result<void> apply(const UpdatePlan& plan, const KeySchema& key_schema, Item& item);
// The same, returning the updated item and leaving `item` as it is: saves the
// caller a copy of the old item when it needs both.
Result<Item> applied(const UpdatePlan& plan, const KeySchema& key_schema, const Item& item);

// An update plan ready to apply without copying it, like BoundCondition: the
// plan, shared with the expression cache, and the request's values that its
// placeholders stand for (read when applied). `values` must outlive it.
struct BoundUpdatePlan {
  std::shared_ptr<const UpdatePlan> plan;
  const ExpressionAttributeValues* values = nullptr;
};
Result<Item> applied(const BoundUpdatePlan& plan, const KeySchema& key_schema, const Item& item);
// The value a value operand stands for: the request's value of its
// placeholder, or its own value when it has none (or `values` is null).
const AttributeValue& operand_value(const UpdateValue& value, const ExpressionAttributeValues* values);

// The attributes an update touched, as found in `item` (pass the old item for
// ReturnValues UPDATED_OLD, the new one for UPDATED_NEW).
Item updated_attributes(const UpdatePlan& plan, const Item& item);

// --- Key conditions -----------------------------------------------------------

enum class SortKeyOperator : uint8_t { eq, lt, le, gt, ge, between, begins_with };

struct SortKeyCondition {
  std::string attribute_name;
  SortKeyOperator op = SortKeyOperator::eq;
  AttributeValue value;
  std::optional<AttributeValue> upper;  // BETWEEN only

  bool operator==(const SortKeyCondition&) const = default;
};

struct KeyCondition {
  std::string partition_key_name;
  AttributeValue partition_value;
  std::optional<SortKeyCondition> sort;

  bool operator==(const KeyCondition&) const = default;
};

bool evaluate(const KeyCondition& condition, const Item& item);
bool evaluate(const SortKeyCondition& condition, const AttributeValue& sort_value);

// --- Projections --------------------------------------------------------------

struct ProjectionPlan {
  std::vector<DocumentPath> paths;
  bool operator==(const ProjectionPlan&) const = default;
};

// The item reduced to the projected paths (nested maps and lists keep only the
// projected members; projected list elements keep their relative order).
Item project(const ProjectionPlan& projection, const Item& item);

// --- Parsing --------------------------------------------------------------------

enum class ExpressionKind : uint8_t { condition, filter, key_condition, update, projection };
// "ConditionExpression", "FilterExpression", ... as used in messages.
std::string_view expression_kind_name(ExpressionKind kind);

// Parsed conditions, filters and update expressions, reused across requests
// that send the same text with the same names and the same value placeholders
// of the same types (a fleet sends a handful of shapes millions of times).
// Only the values differ between such requests: a hit copies the parsed plan
// and binds the request's values into it. Every validation that depends only
// on the text, the names and the value types has already passed; the two that
// read a value's content (BETWEEN's bound order, attribute_type's type name)
// make an expression uncacheable. Failed parses are never stored.
class ExpressionCache {
 public:
  explicit ExpressionCache(std::size_t capacity = 4096) : capacity_(capacity) {}

  std::size_t size() const { return size_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  // prepare_write() answered from one lookup / by parsing.
  uint64_t write_hits() const { return write_hits_; }
  uint64_t write_misses() const { return write_misses_; }

 private:
  friend class ExpressionContext;
  friend struct WriteShapeAccess;
  struct Entry {
    ExpressionKind kind = ExpressionKind::condition;
    std::string text;
    ExpressionAttributeNames names;
    std::vector<std::pair<std::string, AttributeType>> values;  // placeholder, type
    std::shared_ptr<const Condition> condition;  // shared with the BoundConditions made from it
    std::shared_ptr<const UpdatePlan> update;  // shared with the BoundUpdatePlans made from it
    std::set<std::string> used_names;
    std::set<std::string> used_values;
  };
  static uint64_t key_hash(ExpressionKind kind, std::string_view text, const ExpressionAttributeNames& names,
                           const ExpressionAttributeValues& values);
  static bool matches(const Entry& entry, ExpressionKind kind, std::string_view text,
                      const ExpressionAttributeNames& names, const ExpressionAttributeValues& values);
  const Entry* find(ExpressionKind kind, std::string_view text, const ExpressionAttributeNames& names,
                    const ExpressionAttributeValues& values);
  void insert(uint64_t hash, Entry entry);

  // A write request's expressions together (see prepare_write).
  struct WriteShape {
    std::optional<std::string> update;
    std::optional<std::string> condition;
    ExpressionAttributeNames names;
    std::vector<std::pair<std::string, AttributeType>> values;  // placeholder, type
    std::shared_ptr<const UpdatePlan> update_plan;
    std::shared_ptr<const Condition> condition_tree;
  };

  std::size_t capacity_;
  std::size_t size_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
  uint64_t write_hits_ = 0;
  uint64_t write_misses_ = 0;
  // Lookups only, never iterated: the unordered containers cannot leak their
  // order into a run. When full they are emptied (simple and deterministic).
  std::unordered_map<uint64_t, std::vector<Entry>> entries_;
  std::size_t write_count_ = 0;
  std::unordered_map<uint64_t, std::vector<WriteShape>> writes_;
};

// The expressions of one write request (UpdateItem, PutItem, DeleteItem, a
// transaction's action), parsed and checked together, bound to its values.
struct PreparedWrite {
  std::optional<BoundUpdatePlan> update;
  std::optional<BoundCondition> condition;
};
// Checks the placeholder keys, parses the update expression and then the
// condition (either may be absent), and checks that every name and value was
// used: the order, and so the first error, of a single-item write. Through
// `cache` (when not null): a request whose expression texts, names and value
// placeholders and types were all seen together before passed every one of
// those checks then, and is answered from one lookup. `names` and `values`
// must outlive the result.
Result<PreparedWrite> prepare_write(const std::optional<std::string>& update,
                                    const std::optional<std::string>& condition,
                                    const ExpressionAttributeNames& names, const ExpressionAttributeValues& values,
                                    ExpressionCache* cache);

// Parses the expressions of one request and tracks which placeholders they use.
class ExpressionContext {
 public:
  // Owns copies of the maps, so a context built from temporaries never dangles.
  ExpressionContext(ExpressionAttributeNames names, ExpressionAttributeValues values);
  // Refers to the caller's maps, which must outlive the context (a request
  // being served), and parses through `cache` when it is not null.
  static ExpressionContext borrowing(const ExpressionAttributeNames& names, const ExpressionAttributeValues& values,
                                     ExpressionCache* cache);
  // A temporary map would be gone before the context is (AddressSanitizer
  // found a test doing so): refused when compiling.
  static ExpressionContext borrowing(ExpressionAttributeNames&&, const ExpressionAttributeValues&,
                                     ExpressionCache*) = delete;
  static ExpressionContext borrowing(const ExpressionAttributeNames&, ExpressionAttributeValues&&,
                                     ExpressionCache*) = delete;
  static ExpressionContext borrowing(ExpressionAttributeNames&&, ExpressionAttributeValues&&, ExpressionCache*) = delete;
  ExpressionContext(const ExpressionContext&) = delete;
  ExpressionContext& operator=(const ExpressionContext&) = delete;

  // Condition or filter (kind selects the message prefix).
  Result<Condition> parse_condition(std::string_view text,
                                    ExpressionKind kind = ExpressionKind::condition);
  // The same, bound to this context's values instead of copied: what a store
  // evaluates while serving the request whose maps this context borrows.
  Result<BoundCondition> parse_bound_condition(std::string_view text,
                                               ExpressionKind kind = ExpressionKind::condition);
  Result<UpdatePlan> parse_update(std::string_view text);
  // The same, bound to this context's values instead of copied.
  Result<BoundUpdatePlan> parse_bound_update(std::string_view text);
  Result<KeyCondition> parse_key_condition(std::string_view text, const KeySchema& key_schema);
  Result<ProjectionPlan> parse_projection(std::string_view text);

  // Every name and value key is syntactically valid ("#x", ":x").
  Result<void> check_keys() const;
  // Every given name and value was used by some parsed expression.
  Result<void> check_all_used() const;

  std::set<std::string> used_names() const;
  std::set<std::string> used_values() const;

 private:
  struct Borrow {};
  ExpressionContext(Borrow, const ExpressionAttributeNames& names, const ExpressionAttributeValues& values,
                    ExpressionCache* cache);
  // The cache entry for `text` (its placeholders now marked used), or null.
  const ExpressionCache::Entry* cached(ExpressionKind kind, std::string_view text);
  // Stores a successful parse with the placeholders it used.
  void remember(ExpressionKind kind, std::string_view text, std::shared_ptr<const Condition> condition,
                std::shared_ptr<const UpdatePlan> update, const std::set<std::string>& names_used,
                const std::set<std::string>& values_used);

  ExpressionAttributeNames owned_names_;
  ExpressionAttributeValues owned_values_;
  const ExpressionAttributeNames* names_;
  const ExpressionAttributeValues* values_;
  ExpressionCache* cache_ = nullptr;
  // Placeholders used: those of fresh parses here, and those of the cache
  // entries hit (read in place, not copied: most requests only hit). The
  // entries stay valid until this context inserts one (remember() first folds
  // them into the sets).
  std::set<std::string> used_names_;
  std::set<std::string> used_values_;
  std::vector<const ExpressionCache::Entry*> hits_;
};

// One-shot forms without cross-expression tracking.
Result<Condition> parse_condition(std::string_view text, const ExpressionAttributeNames& names,
                                  const ExpressionAttributeValues& values);
Result<UpdatePlan> parse_update(std::string_view text, const ExpressionAttributeNames& names,
                                const ExpressionAttributeValues& values);
Result<ProjectionPlan> parse_projection(std::string_view text, const ExpressionAttributeNames& names);

// Case-insensitive membership in DynamoDB's reserved word list.
bool is_reserved_word(std::string_view word);

}  // namespace leaseproof::dynamo
