// Condition and filter expressions. Precedence, loosest first: OR, AND, NOT,
// then BETWEEN / IN / comparisons, as DynamoDB documents it.

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "models/dynamo/expression_parser.hpp"

namespace leaseproof::dynamo {

namespace expression_detail {

namespace {

struct FunctionCall {
  std::string name;
  std::vector<Operand> arguments;
};

constexpr std::array<std::string_view, 5> condition_functions = {
    "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains"};

bool is_keyword(const Token& token) {
  if (token.kind != TokenKind::identifier) return false;
  for (std::string_view keyword : {"AND", "OR", "NOT", "BETWEEN", "IN"}) {
    if (token.text.size() != keyword.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < keyword.size(); ++i) {
      const char c = token.text[i];
      same = same && (c == keyword[i] || c == keyword[i] - 'A' + 'a');
    }
    if (same) return true;
  }
  return false;
}

Result<Operand> parse_operand(Parser& parser);

Result<FunctionCall> parse_call(Parser& parser) {
  FunctionCall call{std::string(parser.advance().text), {}};
  LP_DYNAMO_TRY_VOID(parser.enter());
  LP_DYNAMO_TRY_VOID(parser.expect_symbol("("));
  while (true) {
    LP_DYNAMO_TRY(argument, parse_operand(parser));
    call.arguments.push_back(std::move(argument));
    if (!parser.at_symbol(",")) break;
    parser.advance();
  }
  LP_DYNAMO_TRY_VOID(parser.expect_symbol(")"));
  parser.leave();
  return call;
}

void check_arity(Parser& parser, const FunctionCall& call, std::size_t expected) {
  if (call.arguments.size() != expected) {
    parser.defer(parser.invalid(fmt::format(
        "Incorrect number of operands for operator or function; operator or function: {}, number of operands: {}",
        call.name, call.arguments.size())));
  }
}

void require_path(Parser& parser, const FunctionCall& call, std::size_t argument) {
  if (argument < call.arguments.size() && call.arguments[argument].kind != Operand::Kind::path) {
    parser.defer(parser.invalid(
        fmt::format("Operator or function requires a document path; operator or function: {}", call.name)));
  }
}

// A constant operand whose type the function can never accept is rejected up
// front, as DynamoDB does; attribute operands are judged at evaluation.
void require_value_type(Parser& parser, const std::string& function, const Operand& operand,
                        std::initializer_list<AttributeType> accepted) {
  if (operand.kind != Operand::Kind::value) return;
  for (AttributeType type : accepted) {
    if (operand.value.is(type)) return;
  }
  parser.defer(parser.invalid(fmt::format(
      "Incorrect operand type for operator or function; operator or function: {}, operand type: {}", function,
      type_descriptor(operand.value.type()))));
}

Result<Operand> size_operand(Parser& parser, FunctionCall call) {
  check_arity(parser, call, 1);
  require_path(parser, call, 0);
  Operand operand;
  operand.kind = Operand::Kind::size;
  if (!call.arguments.empty()) operand.path = std::move(call.arguments[0].path);
  return operand;
}

Result<Operand> parse_operand(Parser& parser) {
  if (parser.peek().kind == TokenKind::value_placeholder) return parser.take_value_operand();
  if (parser.at_function_call()) {
    LP_DYNAMO_TRY(call, parse_call(parser));
    if (call.name != "size") {
      const bool known = std::find(condition_functions.begin(), condition_functions.end(), call.name) !=
                         condition_functions.end();
      parser.defer(parser.invalid(
          known ? fmt::format("The function is not allowed to be used this way in an expression; function: {}", call.name)
                : fmt::format("Invalid function name; function: {}", call.name)));
    }
    return size_operand(parser, std::move(call));
  }
  if (is_keyword(parser.peek())) return parser.syntax_error();
  LP_DYNAMO_TRY(path, parser.parse_path());
  Operand operand;
  operand.kind = Operand::Kind::path;
  operand.path = std::move(path);
  return operand;
}

void check_attribute_type_name(Parser& parser, const Operand& operand) {
  if (operand.kind != Operand::Kind::value || !operand.value.is(AttributeType::s)) return;
  for (std::string_view name : {"S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"}) {
    if (operand.value.text() == name) return;
  }
  // Guessed list order and spacing.
  parser.defer(parser.invalid(fmt::format(
      "Invalid attribute type name found; type: {}, valid types: {{ B,NULL,SS,BOOL,L,BS,N,NS,S,M }}",
      operand.value.text())));
}

Condition function_condition(Parser& parser, FunctionCall call) {
  Condition condition;
  if (call.name == "attribute_exists" || call.name == "attribute_not_exists") {
    condition.kind = call.name == "attribute_exists" ? ConditionKind::attribute_exists
                                                     : ConditionKind::attribute_not_exists;
    check_arity(parser, call, 1);
    require_path(parser, call, 0);
  } else {
    condition.kind = call.name == "attribute_type" ? ConditionKind::attribute_type
                     : call.name == "begins_with"  ? ConditionKind::begins_with
                                                   : ConditionKind::contains;
    check_arity(parser, call, 2);
    require_path(parser, call, 0);
    if (call.arguments.size() == 2) {
      if (condition.kind == ConditionKind::attribute_type) {
        require_value_type(parser, call.name, call.arguments[1], {AttributeType::s});
        check_attribute_type_name(parser, call.arguments[1]);
      } else if (condition.kind == ConditionKind::begins_with) {
        require_value_type(parser, call.name, call.arguments[1], {AttributeType::s, AttributeType::b});
      }
    }
  }
  condition.operands = std::move(call.arguments);
  return condition;
}

void check_between_bounds(Parser& parser, const Condition& condition) {
  const Operand& lower = condition.operands[1];
  const Operand& upper = condition.operands[2];
  if (lower.kind != Operand::Kind::value || upper.kind != Operand::Kind::value) return;
  const auto order = compare_values(lower.value, upper.value);
  if (order && *order == std::strong_ordering::greater) {
    parser.defer(parser.invalid(fmt::format(
        "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: "
        "AttributeValue: {}, upper bound operand: AttributeValue: {}",
        describe(lower.value), describe(upper.value))));
  }
}

std::optional<Comparator> take_comparator(Parser& parser) {
  static constexpr std::array<std::pair<std::string_view, Comparator>, 6> comparators = {{
      {"=", Comparator::eq}, {"<>", Comparator::ne}, {"<", Comparator::lt},
      {"<=", Comparator::le}, {">", Comparator::gt}, {">=", Comparator::ge},
  }};
  for (const auto& [symbol, comparator] : comparators) {
    if (parser.at_symbol(symbol)) {
      parser.advance();
      return comparator;
    }
  }
  return std::nullopt;
}

Result<Condition> parse_in_list(Parser& parser, Condition condition) {
  LP_DYNAMO_TRY_VOID(parser.expect_symbol("("));
  while (true) {
    LP_DYNAMO_TRY(operand, parse_operand(parser));
    condition.operands.push_back(std::move(operand));
    if (!parser.at_symbol(",")) break;
    parser.advance();
  }
  LP_DYNAMO_TRY_VOID(parser.expect_symbol(")"));
  if (condition.operands.size() - 1 > in_operands_max) {
    parser.defer(parser.invalid(fmt::format(
        "The IN operator is provided with too many operands; number of operands: {}", condition.operands.size() - 1)));
  }
  return condition;
}

// left-operand followed by a comparator, BETWEEN or IN.
Result<Condition> parse_predicate(Parser& parser, Operand left) {
  Condition condition;
  condition.operands.push_back(std::move(left));
  if (const auto comparator = take_comparator(parser)) {
    condition.kind = ConditionKind::comparison;
    condition.comparator = *comparator;
    LP_DYNAMO_TRY(right, parse_operand(parser));
    condition.operands.push_back(std::move(right));
    return condition;
  }
  if (parser.at_keyword("BETWEEN")) {
    parser.advance();
    condition.kind = ConditionKind::between;
    LP_DYNAMO_TRY(lower, parse_operand(parser));
    if (!parser.at_keyword("AND")) return parser.syntax_error();
    parser.advance();
    LP_DYNAMO_TRY(upper, parse_operand(parser));
    condition.operands.push_back(std::move(lower));
    condition.operands.push_back(std::move(upper));
    check_between_bounds(parser, condition);
    return condition;
  }
  if (parser.at_keyword("IN")) {
    parser.advance();
    condition.kind = ConditionKind::in;
    return parse_in_list(parser, std::move(condition));
  }
  return parser.syntax_error();
}

Result<Condition> parse_or(Parser& parser);

Result<Condition> parse_primary(Parser& parser) {
  if (parser.at_symbol("(")) {
    parser.advance();
    LP_DYNAMO_TRY_VOID(parser.enter());
    LP_DYNAMO_TRY(inner, parse_or(parser));
    LP_DYNAMO_TRY_VOID(parser.expect_symbol(")"));
    parser.leave();
    return inner;
  }
  if (parser.at_function_call() && is_condition_function(parser.peek().text)) {
    LP_DYNAMO_TRY(call, parse_call(parser));
    return function_condition(parser, std::move(call));
  }
  if (parser.at_function_call() && parser.peek().text != "size") {
    const std::string name(parser.peek().text);
    LP_DYNAMO_TRY(call, parse_call(parser));
    parser.defer(parser.invalid(fmt::format("Invalid function name; function: {}", name)));
    Condition placeholder;
    placeholder.kind = ConditionKind::attribute_exists;
    placeholder.operands = std::move(call.arguments);
    return placeholder;
  }
  const bool size_first = parser.at_function_call();
  LP_DYNAMO_TRY(left, parse_operand(parser));
  if (size_first && (parser.at_end() || parser.at_symbol(")") || parser.at_keyword("AND") || parser.at_keyword("OR"))) {
    parser.defer(parser.invalid("The function is not allowed to be used this way in an expression; function: size"));
    Condition placeholder;
    placeholder.kind = ConditionKind::attribute_exists;
    placeholder.operands.push_back(std::move(left));
    return placeholder;
  }
  return parse_predicate(parser, std::move(left));
}

Result<Condition> parse_not(Parser& parser) {
  if (!parser.at_keyword("NOT")) return parse_primary(parser);
  parser.advance();
  LP_DYNAMO_TRY_VOID(parser.enter());
  LP_DYNAMO_TRY(inner, parse_not(parser));
  parser.leave();
  Condition condition;
  condition.kind = ConditionKind::logical_not;
  condition.children.push_back(std::move(inner));
  return condition;
}

Result<Condition> parse_and(Parser& parser) {
  LP_DYNAMO_TRY(left, parse_not(parser));
  while (parser.at_keyword("AND")) {
    parser.advance();
    LP_DYNAMO_TRY(right, parse_not(parser));
    Condition both;
    both.kind = ConditionKind::logical_and;
    both.children.push_back(std::move(left));
    both.children.push_back(std::move(right));
    left = std::move(both);
  }
  return left;
}

Result<Condition> parse_or(Parser& parser) {
  LP_DYNAMO_TRY(left, parse_and(parser));
  while (parser.at_keyword("OR")) {
    parser.advance();
    LP_DYNAMO_TRY(right, parse_and(parser));
    Condition either;
    either.kind = ConditionKind::logical_or;
    either.children.push_back(std::move(left));
    either.children.push_back(std::move(right));
    left = std::move(either);
  }
  return left;
}

}  // namespace

bool is_condition_function(std::string_view name) {
  return std::find(condition_functions.begin(), condition_functions.end(), name) != condition_functions.end();
}

Result<Condition> parse_condition_text(Parser& parser) {
  if (auto problem = parser.check_text()) return std::move(*problem);
  LP_DYNAMO_TRY(condition, parse_or(parser));
  if (!parser.at_end()) return parser.syntax_error();
  if (auto problem = parser.deferred()) return std::move(*problem);
  return condition;
}

}  // namespace expression_detail

Result<Condition> ExpressionContext::parse_condition(std::string_view text, ExpressionKind kind) {
  LP_DYNAMO_TRY(bound, parse_bound_condition(text, kind));
  // A copy with this request's values in the tree (the cache keeps its own).
  return expression_detail::bind_values(*bound.tree, *values_);
}

Result<BoundCondition> ExpressionContext::parse_bound_condition(std::string_view text, ExpressionKind kind) {
  LP_ASSERT(kind == ExpressionKind::condition || kind == ExpressionKind::filter);
  if (const ExpressionCache::Entry* entry = cached(kind, text)) return BoundCondition{entry->condition, values_};
  // The placeholders this expression alone uses (the cache entry must not
  // depend on the request's other expressions).
  std::set<std::string> names_used;
  std::set<std::string> values_used;
  expression_detail::Parser parser(text, kind, *names_, *values_, names_used, values_used);
  auto parsed = expression_detail::parse_condition_text(parser);
  std::shared_ptr<const Condition> tree;
  if (parsed.ok()) {
    tree = std::make_shared<const Condition>(std::move(parsed).value());
    remember(kind, text, tree, nullptr, names_used, values_used);  // before the merge empties the sets
  }
  used_names_.merge(names_used);
  used_values_.merge(values_used);
  if (!tree) return std::move(parsed).error();
  return BoundCondition{std::move(tree), values_};
}

Result<Condition> parse_condition(std::string_view text, const ExpressionAttributeNames& names,
                                  const ExpressionAttributeValues& values) {
  ExpressionContext context(names, values);
  return context.parse_condition(text);
}

}  // namespace leaseproof::dynamo
