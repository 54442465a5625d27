// Update expressions: SET, REMOVE, ADD and DELETE clauses, each at most once,
// in any order, with comma-separated actions.

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "models/dynamo/expression_parser.hpp"

namespace leaseproof::dynamo {

namespace expression_detail {

namespace {

void require_constant_type(Parser& parser, std::string_view function, const UpdateValue& operand,
                           std::initializer_list<AttributeType> accepted) {
  if (operand.kind != UpdateValue::Kind::value) return;
  if (std::any_of(accepted.begin(), accepted.end(), [&](AttributeType type) { return operand.value.is(type); })) {
    return;
  }
  parser.defer(parser.invalid(fmt::format(
      "Incorrect operand type for operator or function; operator or function: {}, operand type: {}", function,
      type_descriptor(operand.value.type()))));
}

UpdateValue value_operand(Parser& parser) {
  Operand operand = parser.take_value_operand();
  UpdateValue value;
  value.kind = UpdateValue::Kind::value;
  value.placeholder = std::move(operand.placeholder);
  value.value = std::move(operand.value);
  return value;
}

Result<UpdateValue> parse_set_operand(Parser& parser);

Result<UpdateValue> parse_update_function(Parser& parser) {
  const std::string name(parser.advance().text);
  LP_DYNAMO_TRY_VOID(parser.enter());
  LP_DYNAMO_TRY_VOID(parser.expect_symbol("("));
  UpdateValue call;
  while (true) {
    LP_DYNAMO_TRY(argument, parse_set_operand(parser));
    call.arguments.push_back(std::move(argument));
    if (!parser.at_symbol(",")) break;
    parser.advance();
  }
  LP_DYNAMO_TRY_VOID(parser.expect_symbol(")"));
  parser.leave();
  if (name == "if_not_exists" || name == "list_append") {
    call.kind = name == "if_not_exists" ? UpdateValue::Kind::if_not_exists : UpdateValue::Kind::list_append;
  } else if (name == "size" || is_condition_function(name)) {
    // Guessed wording for a condition function used in an update.
    parser.defer(parser.invalid(fmt::format("The function is not allowed in an update expression; function: {}", name)));
  } else {
    parser.defer(parser.invalid(fmt::format("Invalid function name; function: {}", name)));
  }
  if (call.arguments.size() != 2) {
    parser.defer(parser.invalid(fmt::format(
        "Incorrect number of operands for operator or function; operator or function: {}, number of operands: {}",
        name, call.arguments.size())));
    call.arguments.resize(2);
  }
  if (call.kind == UpdateValue::Kind::if_not_exists && call.arguments[0].kind != UpdateValue::Kind::path) {
    parser.defer(parser.invalid(
        fmt::format("Operator or function requires a document path; operator or function: {}", name)));
  }
  if (call.kind == UpdateValue::Kind::list_append) {
    for (const auto& argument : call.arguments) require_constant_type(parser, name, argument, {AttributeType::l});
  }
  return call;
}

Result<UpdateValue> parse_set_operand(Parser& parser) {
  if (parser.peek().kind == TokenKind::value_placeholder) return value_operand(parser);
  if (parser.at_function_call()) return parse_update_function(parser);
  LP_DYNAMO_TRY(path, parser.parse_path());
  UpdateValue value;
  value.kind = UpdateValue::Kind::path;
  value.path = std::move(path);
  return value;
}

Result<UpdateValue> parse_set_value(Parser& parser) {
  LP_DYNAMO_TRY(left, parse_set_operand(parser));
  if (!parser.at_symbol("+") && !parser.at_symbol("-")) return left;
  const bool plus = parser.advance().text == "+";
  LP_DYNAMO_TRY(right, parse_set_operand(parser));
  UpdateValue sum;
  sum.kind = plus ? UpdateValue::Kind::plus : UpdateValue::Kind::minus;
  require_constant_type(parser, plus ? "+" : "-", left, {AttributeType::n});
  require_constant_type(parser, plus ? "+" : "-", right, {AttributeType::n});
  sum.arguments.push_back(std::move(left));
  sum.arguments.push_back(std::move(right));
  return sum;
}

Result<UpdateAction> parse_action(Parser& parser, UpdateAction::Kind kind) {
  UpdateAction action;
  action.kind = kind;
  LP_DYNAMO_TRY(path, parser.parse_path());
  action.path = std::move(path);
  switch (kind) {
    case UpdateAction::Kind::set: {
      LP_DYNAMO_TRY_VOID(parser.expect_symbol("="));
      LP_DYNAMO_TRY(value, parse_set_value(parser));
      action.value = std::move(value);
      return action;
    }
    case UpdateAction::Kind::remove: return action;
    case UpdateAction::Kind::add:
    case UpdateAction::Kind::delete_elements: {
      if (parser.peek().kind != TokenKind::value_placeholder) return parser.syntax_error();
      action.value = value_operand(parser);
      const bool add = kind == UpdateAction::Kind::add;
      if (add) {
        require_constant_type(parser, "ADD", action.value,
                              {AttributeType::n, AttributeType::ss, AttributeType::ns, AttributeType::bs});
      } else {
        require_constant_type(parser, "DELETE", action.value, {AttributeType::ss, AttributeType::ns, AttributeType::bs});
      }
      return action;
    }
  }
  LP_UNREACHABLE("update action kind {}", static_cast<int>(kind));
}

std::optional<UpdateAction::Kind> clause_kind(const Parser& parser) {
  static constexpr std::array<std::pair<std::string_view, UpdateAction::Kind>, 4> clauses = {{
      {"SET", UpdateAction::Kind::set},
      {"REMOVE", UpdateAction::Kind::remove},
      {"ADD", UpdateAction::Kind::add},
      {"DELETE", UpdateAction::Kind::delete_elements},
  }};
  for (const auto& [keyword, kind] : clauses) {
    if (parser.at_keyword(keyword)) return kind;
  }
  return std::nullopt;
}

Result<UpdatePlan> parse_update_text(Parser& parser) {
  if (auto problem = parser.check_text()) return std::move(*problem);
  UpdatePlan plan;
  std::array<bool, 4> seen{};
  while (!parser.at_end()) {
    const auto kind = clause_kind(parser);
    if (!kind) return parser.syntax_error();
    const std::string keyword(parser.advance().text);
    auto& clause_seen = seen[static_cast<std::size_t>(*kind)];
    if (clause_seen) {
      std::string upper = keyword;
      std::transform(upper.begin(), upper.end(), upper.begin(), [](char c) {
        return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
      });
      parser.defer(parser.invalid(
          fmt::format("The \"{}\" section can only be used once in an update expression;", upper)));
    }
    clause_seen = true;
    while (true) {
      LP_DYNAMO_TRY(action, parse_action(parser, *kind));
      plan.actions.push_back(std::move(action));
      if (!parser.at_symbol(",")) break;
      parser.advance();
    }
  }
  if (auto problem = parser.deferred()) return std::move(*problem);
  std::vector<DocumentPath> paths;
  for (const auto& action : plan.actions) paths.push_back(action.path);
  if (auto overlap = find_path_overlap(paths)) return parser.invalid(*overlap);
  return plan;
}

}  // namespace

}  // namespace expression_detail

Result<UpdatePlan> ExpressionContext::parse_update(std::string_view text) {
  LP_DYNAMO_TRY(bound, parse_bound_update(text));
  // A copy with this request's values in the plan (the cache keeps its own).
  return expression_detail::bind_values(*bound.plan, *values_);
}

Result<BoundUpdatePlan> ExpressionContext::parse_bound_update(std::string_view text) {
  if (const ExpressionCache::Entry* entry = cached(ExpressionKind::update, text)) {
    return BoundUpdatePlan{entry->update, values_};
  }
  // The placeholders this expression alone uses (see parse_condition).
  std::set<std::string> names_used;
  std::set<std::string> values_used;
  expression_detail::Parser parser(text, ExpressionKind::update, *names_, *values_, names_used, values_used);
  auto parsed = expression_detail::parse_update_text(parser);
  std::shared_ptr<const UpdatePlan> plan;
  if (parsed.ok()) {
    plan = std::make_shared<const UpdatePlan>(std::move(parsed).value());
    remember(ExpressionKind::update, text, nullptr, plan, names_used, values_used);
  }
  used_names_.merge(names_used);
  used_values_.merge(values_used);
  if (!plan) return std::move(parsed).error();
  return BoundUpdatePlan{std::move(plan), values_};
}

Result<UpdatePlan> parse_update(std::string_view text, const ExpressionAttributeNames& names,
                                const ExpressionAttributeValues& values) {
  ExpressionContext context(names, values);
  return context.parse_update(text);
}

}  // namespace leaseproof::dynamo
