// Evaluation of conditions, key conditions and projections: pure functions of
// (plan, item) that never fail. A missing attribute or an operand of the wrong
// type makes a predicate false, as in DynamoDB.

#include <algorithm>
#include <array>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/dynamo/decimal.hpp"
#include "models/dynamo/expression.hpp"

#include "models/dynamo/expression_parser.hpp"
#include "core/dynamo/base64.hpp"

namespace leaseproof::dynamo {

namespace {

// Canonical members of a set, sorted: numbers by canonical decimal text so
// that {1, 1.0} and {1.00} compare equal.
std::vector<std::string> canonical_members(const AttributeValue& set) {
  std::vector<std::string> members = set.as_set();
  if (set.is(AttributeType::ns)) {
    for (auto& member : members) {
      auto number = Decimal::parse(member);
      if (number) member = number->to_string();
    }
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  return members;
}

bool numbers_equal(const std::string& a, const std::string& b) {
  if (a == b) return true;  // the same text: the same number (or, unparsable, equal as text)
  // Two canonical integers are equal only as the same text.
  if (Decimal::small_integer(a) && Decimal::small_integer(b)) return false;
  auto left = Decimal::parse(a);
  auto right = Decimal::parse(b);
  if (!left || !right) return a == b;
  return *left == *right;
}

bool maps_equal(const Item& a, const Item& b) {
  if (a.size() != b.size()) return false;
  for (auto left = a.begin(), right = b.begin(); left != a.end(); ++left, ++right) {
    if (left->first != right->first || !values_equal(left->second, right->second)) return false;
  }
  return true;
}

}  // namespace

bool values_equal(const AttributeValue& a, const AttributeValue& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case AttributeType::s:
    case AttributeType::b: return a.text() == b.text();
    case AttributeType::n: return numbers_equal(a.text(), b.text());
    case AttributeType::boolean: return a.as_bool() == b.as_bool();
    case AttributeType::null: return true;
    case AttributeType::m: return maps_equal(a.as_map(), b.as_map());
    case AttributeType::l:
      return std::equal(a.as_list().begin(), a.as_list().end(), b.as_list().begin(), b.as_list().end(),
                        [](const AttributeValue& x, const AttributeValue& y) { return values_equal(x, y); });
    case AttributeType::ss:
    case AttributeType::ns:
    case AttributeType::bs: return canonical_members(a) == canonical_members(b);
  }
  LP_UNREACHABLE("attribute type {}", static_cast<int>(a.type()));
}

namespace {

// "0", or an optional '-' and digits without a leading zero: the canonical
// text of an integer, whose order needs no decimal parsing.
bool plain_integer(std::string_view text) {
  const std::size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() == start) return false;
  if (text[start] == '0') return text == "0";
  return std::all_of(text.begin() + static_cast<std::ptrdiff_t>(start), text.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::strong_ordering compare_plain_integers(std::string_view a, std::string_view b) {
  const bool a_negative = a[0] == '-';
  const bool b_negative = b[0] == '-';
  if (a_negative != b_negative) return a_negative ? std::strong_ordering::less : std::strong_ordering::greater;
  // Same sign: more digits is larger in magnitude, then digits bytewise.
  std::strong_ordering magnitude = a.size() <=> b.size();
  if (magnitude == 0) magnitude = a.compare(b) <=> 0;
  return a_negative ? 0 <=> magnitude : magnitude;
}

}  // namespace

std::optional<std::strong_ordering> compare_values(const AttributeValue& a, const AttributeValue& b) {
  if (a.type() != b.type()) return std::nullopt;
  switch (a.type()) {
    case AttributeType::s: return a.text().compare(b.text()) <=> 0;  // bytewise, unsigned (memcmp): UTF-8 order
    case AttributeType::n: {
      if (plain_integer(a.text()) && plain_integer(b.text())) return compare_plain_integers(a.text(), b.text());
      auto left = Decimal::parse(a.text());
      auto right = Decimal::parse(b.text());
      if (!left || !right) return std::nullopt;
      return *left <=> *right;
    }
    case AttributeType::b: {
      const auto left = base64_decode(a.text());
      const auto right = base64_decode(b.text());
      if (!left || !right) return std::nullopt;
      return left->compare(*right) <=> 0;
    }
    default: return std::nullopt;
  }
}

const AttributeValue* resolve(const Item& item, const DocumentPath& path) {
  LP_ASSERT(!path.empty() && !path[0].is_index);
  const auto top = item.find(path[0].name);
  if (top == item.end()) return nullptr;
  const AttributeValue* at = &top->second;
  for (std::size_t i = 1; i < path.size() && at != nullptr; ++i) at = expression_detail::descend(at, path[i]);
  return at;
}

namespace {

// size() of DynamoDB: string length (guessed: in UTF-8 bytes), binary bytes,
// element count of sets, lists and maps; no value for other types.
std::optional<AttributeValue> size_of(const AttributeValue& value) {
  switch (value.type()) {
    case AttributeType::s: return AttributeValue::number(static_cast<int64_t>(value.text().size()));
    case AttributeType::b: {
      const auto bytes = base64_decode(value.text());
      return AttributeValue::number(static_cast<int64_t>(bytes ? bytes->size() : 0));
    }
    case AttributeType::m: return AttributeValue::number(static_cast<int64_t>(value.as_map().size()));
    case AttributeType::l: return AttributeValue::number(static_cast<int64_t>(value.as_list().size()));
    case AttributeType::ss:
    case AttributeType::ns:
    case AttributeType::bs: return AttributeValue::number(static_cast<int64_t>(value.as_set().size()));
    default: return std::nullopt;
  }
}

// The operand's value, or null when it has none (a missing attribute), read
// in place (in the item or the expression) rather than copied; only size()
// computes a value, which it leaves in `computed`.
// `values`: the request's, when the tree's own values are not this request's
// (a cached tree); a value operand without a placeholder (REMOVE's) has none.
const AttributeValue* operand_value(const Operand& operand, const Item& item, const ExpressionAttributeValues* values,
                                    std::optional<AttributeValue>& computed) {
  switch (operand.kind) {
    case Operand::Kind::value: {
      if (values == nullptr || operand.placeholder.empty()) return &operand.value;
      const auto bound = values->find(operand.placeholder);
      LP_ASSERT_MSG(bound != values->end(), "placeholder {} has no value", operand.placeholder);
      return &bound->second;
    }
    case Operand::Kind::path: return resolve(item, operand.path);
    case Operand::Kind::size: {
      const AttributeValue* found = resolve(item, operand.path);
      if (found == nullptr) return nullptr;
      computed = size_of(*found);
      return computed ? &*computed : nullptr;
    }
  }
  LP_UNREACHABLE("operand kind {}", static_cast<int>(operand.kind));
}

bool compare(Comparator comparator, const AttributeValue* a, const AttributeValue* b) {
  if (comparator == Comparator::eq || comparator == Comparator::ne) {
    const bool equal = a && b && values_equal(*a, *b);
    return comparator == Comparator::eq ? equal : !equal;
  }
  if (!a || !b) return false;
  const auto order = compare_values(*a, *b);
  if (!order) return false;
  switch (comparator) {
    case Comparator::lt: return *order < 0;
    case Comparator::le: return *order <= 0;
    case Comparator::gt: return *order > 0;
    case Comparator::ge: return *order >= 0;
    default: LP_UNREACHABLE("comparator {}", static_cast<int>(comparator));
  }
}

bool begins_with(const AttributeValue& value, const AttributeValue& prefix) {
  if (value.is(AttributeType::s) && prefix.is(AttributeType::s)) return value.text().starts_with(prefix.text());
  if (value.is(AttributeType::b) && prefix.is(AttributeType::b)) {
    const auto bytes = base64_decode(value.text());
    const auto head = base64_decode(prefix.text());
    return bytes && head && bytes->starts_with(*head);
  }
  return false;
}

bool contains(const AttributeValue& haystack, const AttributeValue& needle) {
  switch (haystack.type()) {
    case AttributeType::s: return needle.is(AttributeType::s) && haystack.text().find(needle.text()) != std::string::npos;
    case AttributeType::ss:
    case AttributeType::ns:
    case AttributeType::bs: {
      const bool member_type = (haystack.is(AttributeType::ss) && needle.is(AttributeType::s)) ||
                               (haystack.is(AttributeType::ns) && needle.is(AttributeType::n)) ||
                               (haystack.is(AttributeType::bs) && needle.is(AttributeType::b));
      if (!member_type) return false;
      return std::any_of(haystack.as_set().begin(), haystack.as_set().end(), [&](const std::string& member) {
        return needle.is(AttributeType::n) ? values_equal(AttributeValue::number(member), needle)
                                           : member == needle.text();
      });
    }
    case AttributeType::l:
      return std::any_of(haystack.as_list().begin(), haystack.as_list().end(),
                         [&](const AttributeValue& element) { return values_equal(element, needle); });
    default: return false;
  }
}

bool evaluate_function(const Condition& condition, const Item& item, const ExpressionAttributeValues* values) {
  std::optional<AttributeValue> subject_computed;
  const AttributeValue* subject = operand_value(condition.operands[0], item, values, subject_computed);
  switch (condition.kind) {
    case ConditionKind::attribute_exists: return subject != nullptr;
    case ConditionKind::attribute_not_exists: return subject == nullptr;
    default: break;
  }
  std::optional<AttributeValue> argument_computed;
  const AttributeValue* argument = operand_value(condition.operands[1], item, values, argument_computed);
  if (!subject || !argument) return false;
  switch (condition.kind) {
    case ConditionKind::attribute_type:
      return argument->is(AttributeType::s) && type_descriptor(subject->type()) == argument->text();
    case ConditionKind::begins_with: return begins_with(*subject, *argument);
    case ConditionKind::contains: return contains(*subject, *argument);
    default: LP_UNREACHABLE("condition kind {}", static_cast<int>(condition.kind));
  }
}

bool evaluate_bound(const Condition& condition, const Item& item, const ExpressionAttributeValues* values) {
  switch (condition.kind) {
    case ConditionKind::comparison: {
      std::optional<AttributeValue> left;
      std::optional<AttributeValue> right;
      return compare(condition.comparator, operand_value(condition.operands[0], item, values, left),
                     operand_value(condition.operands[1], item, values, right));
    }
    case ConditionKind::between: {
      std::optional<AttributeValue> value_computed;
      std::optional<AttributeValue> low;
      std::optional<AttributeValue> high;
      const AttributeValue* value = operand_value(condition.operands[0], item, values, value_computed);
      return compare(Comparator::ge, value, operand_value(condition.operands[1], item, values, low)) &&
             compare(Comparator::le, value, operand_value(condition.operands[2], item, values, high));
    }
    case ConditionKind::in: {
      std::optional<AttributeValue> value_computed;
      const AttributeValue* value = operand_value(condition.operands[0], item, values, value_computed);
      return std::any_of(condition.operands.begin() + 1, condition.operands.end(), [&](const Operand& candidate) {
        std::optional<AttributeValue> candidate_computed;
        return compare(Comparator::eq, value, operand_value(candidate, item, values, candidate_computed));
      });
    }
    case ConditionKind::logical_and:
      return evaluate_bound(condition.children[0], item, values) && evaluate_bound(condition.children[1], item, values);
    case ConditionKind::logical_or:
      return evaluate_bound(condition.children[0], item, values) || evaluate_bound(condition.children[1], item, values);
    case ConditionKind::logical_not: return !evaluate_bound(condition.children[0], item, values);
    default: return evaluate_function(condition, item, values);
  }
}

}  // namespace

bool evaluate(const Condition& condition, const Item& item) { return evaluate_bound(condition, item, nullptr); }

bool evaluate(const BoundCondition& condition, const Item& item) {
  LP_ASSERT(condition.tree != nullptr);
  return evaluate_bound(*condition.tree, item, condition.values);
}

namespace {

std::string operand_text(const Operand& operand) {
  switch (operand.kind) {
    case Operand::Kind::path: return to_string(operand.path);
    case Operand::Kind::value: return operand.placeholder;
    case Operand::Kind::size: return "size(" + to_string(operand.path) + ")";
  }
  LP_UNREACHABLE("operand kind {}", static_cast<int>(operand.kind));
}

std::string function_text(std::string_view name, const std::vector<Operand>& operands) {
  std::vector<std::string> parts;
  for (const auto& operand : operands) parts.push_back(operand_text(operand));
  return fmt::format("{}({})", name, fmt::join(parts, ", "));
}

}  // namespace

std::string to_string(const Condition& condition) {
  static constexpr std::array<std::string_view, 6> comparators = {"=", "<>", "<", "<=", ">", ">="};
  const auto& operands = condition.operands;
  switch (condition.kind) {
    case ConditionKind::comparison:
      return fmt::format("({} {} {})", operand_text(operands[0]),
                         comparators[static_cast<std::size_t>(condition.comparator)], operand_text(operands[1]));
    case ConditionKind::between:
      return fmt::format("({} BETWEEN {} AND {})", operand_text(operands[0]), operand_text(operands[1]),
                         operand_text(operands[2]));
    case ConditionKind::in: {
      std::vector<std::string> parts;
      for (std::size_t i = 1; i < operands.size(); ++i) parts.push_back(operand_text(operands[i]));
      return fmt::format("({} IN ({}))", operand_text(operands[0]), fmt::join(parts, ", "));
    }
    case ConditionKind::logical_and:
      return fmt::format("({} AND {})", to_string(condition.children[0]), to_string(condition.children[1]));
    case ConditionKind::logical_or:
      return fmt::format("({} OR {})", to_string(condition.children[0]), to_string(condition.children[1]));
    case ConditionKind::logical_not: return fmt::format("(NOT {})", to_string(condition.children[0]));
    case ConditionKind::attribute_exists: return function_text("attribute_exists", operands);
    case ConditionKind::attribute_not_exists: return function_text("attribute_not_exists", operands);
    case ConditionKind::attribute_type: return function_text("attribute_type", operands);
    case ConditionKind::begins_with: return function_text("begins_with", operands);
    case ConditionKind::contains: return function_text("contains", operands);
  }
  LP_UNREACHABLE("condition kind {}", static_cast<int>(condition.kind));
}

bool evaluate(const SortKeyCondition& condition, const AttributeValue& sort_value) {
  const AttributeValue* value = &sort_value;
  const AttributeValue* bound = &condition.value;
  switch (condition.op) {
    case SortKeyOperator::eq: return compare(Comparator::eq, value, bound);
    case SortKeyOperator::lt: return compare(Comparator::lt, value, bound);
    case SortKeyOperator::le: return compare(Comparator::le, value, bound);
    case SortKeyOperator::gt: return compare(Comparator::gt, value, bound);
    case SortKeyOperator::ge: return compare(Comparator::ge, value, bound);
    case SortKeyOperator::between:
      return condition.upper && compare(Comparator::ge, value, bound) &&
             compare(Comparator::le, value, &*condition.upper);
    case SortKeyOperator::begins_with: return begins_with(sort_value, condition.value);
  }
  LP_UNREACHABLE("sort key operator {}", static_cast<int>(condition.op));
}

bool evaluate(const KeyCondition& condition, const Item& item) {
  const auto partition = item.find(condition.partition_key_name);
  if (partition == item.end() || !values_equal(partition->second, condition.partition_value)) return false;
  if (!condition.sort) return true;
  const auto sort = item.find(condition.sort->attribute_name);
  return sort != item.end() && evaluate(*condition.sort, sort->second);
}

namespace {

using PathTails = std::vector<DocumentPath>;

// The parts of `value` selected by the remaining path tails; nullopt when none
// of them exists. An empty tail selects the whole value.
std::optional<AttributeValue> project_value(const AttributeValue& value, const PathTails& tails) {
  if (std::any_of(tails.begin(), tails.end(), [](const DocumentPath& tail) { return tail.empty(); })) return value;
  std::map<std::size_t, PathTails> by_index;
  std::map<std::string, PathTails> by_name;
  for (const auto& tail : tails) {
    DocumentPath rest(tail.begin() + 1, tail.end());
    if (tail[0].is_index) {
      by_index[tail[0].index].push_back(std::move(rest));
    } else {
      by_name[tail[0].name].push_back(std::move(rest));
    }
  }
  if (value.is(AttributeType::l)) {
    AttributeList kept;  // projected elements, compacted, in index order
    for (const auto& [index, rest] : by_index) {
      if (index >= value.as_list().size()) continue;
      if (auto part = project_value(value.as_list()[index], rest)) kept.push_back(std::move(*part));
    }
    if (kept.empty()) return std::nullopt;
    return AttributeValue::list(std::move(kept));
  }
  if (value.is(AttributeType::m)) {
    Item kept;
    for (const auto& [name, rest] : by_name) {
      const auto member = value.as_map().find(name);
      if (member == value.as_map().end()) continue;
      if (auto part = project_value(member->second, rest)) kept.emplace(name, std::move(*part));
    }
    if (kept.empty()) return std::nullopt;
    return AttributeValue::map(std::move(kept));
  }
  return std::nullopt;
}

}  // namespace

Item project(const ProjectionPlan& projection, const Item& item) {
  std::map<std::string, PathTails> by_name;
  for (const auto& path : projection.paths) {
    LP_ASSERT(!path.empty() && !path[0].is_index);
    by_name[path[0].name].push_back(DocumentPath(path.begin() + 1, path.end()));
  }
  Item out;
  out.reserve(std::min(by_name.size(), item.size()));
  for (const auto& [name, tails] : by_name) {
    const auto found = item.find(name);
    if (found == item.end()) continue;
    if (auto part = project_value(found->second, tails)) out.emplace(name, std::move(*part));
  }
  return out;
}

}  // namespace leaseproof::dynamo
