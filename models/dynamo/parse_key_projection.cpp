// Key condition expressions (a restricted condition: partition key equality,
// optionally AND one sort key predicate) and projection expressions.

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "models/dynamo/expression_parser.hpp"

namespace leaseproof::dynamo {

namespace expression_detail {

namespace {

std::string_view comparator_text(Comparator comparator) {
  switch (comparator) {
    case Comparator::eq: return "=";
    case Comparator::ne: return "<>";
    case Comparator::lt: return "<";
    case Comparator::le: return "<=";
    case Comparator::gt: return ">";
    case Comparator::ge: return ">=";
  }
  LP_UNREACHABLE("comparator {}", static_cast<int>(comparator));
}

// The operator's name as DynamoDB prints it in "Invalid operator used in
// KeyConditionExpression: <op>".
std::string operator_name(const Condition& condition) {
  switch (condition.kind) {
    case ConditionKind::comparison: return std::string(comparator_text(condition.comparator));
    case ConditionKind::between: return "BETWEEN";
    case ConditionKind::in: return "IN";
    case ConditionKind::logical_and: return "AND";
    case ConditionKind::logical_or: return "OR";
    case ConditionKind::logical_not: return "NOT";
    case ConditionKind::attribute_exists: return "attribute_exists";
    case ConditionKind::attribute_not_exists: return "attribute_not_exists";
    case ConditionKind::attribute_type: return "attribute_type";
    case ConditionKind::begins_with: return "begins_with";
    case ConditionKind::contains: return "contains";
  }
  LP_UNREACHABLE("condition kind {}", static_cast<int>(condition.kind));
}

Result<void> flatten_and(const Parser& parser, const Condition& condition, std::vector<const Condition*>& leaves) {
  if (condition.kind == ConditionKind::logical_and) {
    LP_DYNAMO_TRY_VOID(flatten_and(parser, condition.children[0], leaves));
    return flatten_and(parser, condition.children[1], leaves);
  }
  const bool supported = (condition.kind == ConditionKind::comparison && condition.comparator != Comparator::ne) ||
                         condition.kind == ConditionKind::between || condition.kind == ConditionKind::begins_with;
  if (!supported) {
    return parser.invalid(fmt::format("Invalid operator used in KeyConditionExpression: {}", operator_name(condition)));
  }
  leaves.push_back(&condition);
  return {};
}

// One leaf as a SortKeyCondition (also used for the partition key's "=").
Result<SortKeyCondition> leaf_condition(const Condition& leaf) {
  const auto& operands = leaf.operands;
  const bool path_first = operands[0].kind == Operand::Kind::path && operands[0].path.size() == 1 &&
                          !operands[0].path[0].is_index;
  const bool values_after = std::all_of(operands.begin() + 1, operands.end(),
                                        [](const Operand& operand) { return operand.kind == Operand::Kind::value; });
  if (!path_first || !values_after) {
    // Guessed wording for a key condition on a nested path or between two values.
    return validation_error("Query key condition not supported");
  }
  SortKeyCondition out;
  out.attribute_name = operands[0].path[0].name;
  out.value = operands[1].value;
  if (leaf.kind == ConditionKind::between) {
    out.op = SortKeyOperator::between;
    out.upper = operands[2].value;
  } else if (leaf.kind == ConditionKind::begins_with) {
    out.op = SortKeyOperator::begins_with;
  } else {
    static constexpr std::array<SortKeyOperator, 6> by_comparator = {
        SortKeyOperator::eq, SortKeyOperator::eq, SortKeyOperator::lt,
        SortKeyOperator::le, SortKeyOperator::gt, SortKeyOperator::ge};
    out.op = by_comparator[static_cast<std::size_t>(leaf.comparator)];
  }
  return out;
}

struct KeyNames {
  std::string hash;
  std::optional<std::string> range;
};

KeyNames key_names(const KeySchema& key_schema) {
  KeyNames names;
  for (const auto& element : key_schema) {
    if (element.key_type == KeyType::hash) names.hash = element.attribute_name;
    if (element.key_type == KeyType::range) names.range = element.attribute_name;
  }
  return names;
}

Result<KeyCondition> match_key_schema(std::vector<SortKeyCondition> leaves, const KeySchema& key_schema) {
  const KeyNames names = key_names(key_schema);
  if (leaves.size() == 2 && leaves[0].attribute_name == leaves[1].attribute_name) {
    // Guessed wording.
    return validation_error("KeyConditionExpressions must only contain one condition per key");
  }
  const bool has_partition = std::any_of(leaves.begin(), leaves.end(), [&](const SortKeyCondition& leaf) {
    return leaf.attribute_name == names.hash;
  });
  if (!has_partition) return validation_error(fmt::format("Query condition missed key schema element: {}", names.hash));
  KeyCondition out;
  for (auto& leaf : leaves) {
    if (leaf.attribute_name == names.hash) {
      if (leaf.op != SortKeyOperator::eq) return validation_error("Query key condition not supported");
      out.partition_key_name = leaf.attribute_name;
      out.partition_value = std::move(leaf.value);
    } else if (names.range && leaf.attribute_name == *names.range) {
      out.sort = std::move(leaf);
    } else {
      // A non-key attribute: DynamoDB names the key element it was looking for.
      return validation_error(
          fmt::format("Query condition missed key schema element: {}", names.range.value_or(names.hash)));
    }
  }
  return out;
}

}  // namespace

}  // namespace expression_detail

Result<KeyCondition> ExpressionContext::parse_key_condition(std::string_view text, const KeySchema& key_schema) {
  using namespace expression_detail;
  Parser parser(text, ExpressionKind::key_condition, *names_, *values_, used_names_, used_values_);
  LP_DYNAMO_TRY(condition, parse_condition_text(parser));
  std::vector<const Condition*> leaves;
  LP_DYNAMO_TRY_VOID(flatten_and(parser, condition, leaves));
  if (leaves.size() > 2) return parser.invalid("Conditions can be of length 1 or 2 only");
  std::vector<SortKeyCondition> parsed;
  for (const Condition* leaf : leaves) {
    LP_DYNAMO_TRY(one, leaf_condition(*leaf));
    parsed.push_back(std::move(one));
  }
  return match_key_schema(std::move(parsed), key_schema);
}

Result<ProjectionPlan> ExpressionContext::parse_projection(std::string_view text) {
  using namespace expression_detail;
  Parser parser(text, ExpressionKind::projection, *names_, *values_, used_names_, used_values_);
  if (auto problem = parser.check_text()) return std::move(*problem);
  ProjectionPlan plan;
  while (true) {
    LP_DYNAMO_TRY(path, parser.parse_path());
    plan.paths.push_back(std::move(path));
    if (!parser.at_symbol(",")) break;
    parser.advance();
  }
  if (!parser.at_end()) return parser.syntax_error();
  if (auto problem = parser.deferred()) return std::move(*problem);
  if (auto overlap = find_path_overlap(plan.paths)) return parser.invalid(*overlap);
  return plan;
}

Result<ProjectionPlan> parse_projection(std::string_view text, const ExpressionAttributeNames& names) {
  ExpressionContext context(names, {});
  return context.parse_projection(text);
}

}  // namespace leaseproof::dynamo
