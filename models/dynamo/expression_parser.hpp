#pragma once
// Private to core/dynamo: tokenizer and the recursive-descent machinery that
// the condition, update, key-condition and projection parsers share.
//
// Error order follows DynamoDB where it is observable: the whole text must be
// syntactically valid first (a syntax error wins over everything); problems
// found while parsing (undefined placeholders, reserved words, misuse of
// functions) are remembered and the first one is reported after the syntax
// check has passed.

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "models/dynamo/expression.hpp"

namespace leaseproof::dynamo::expression_detail {

enum class TokenKind : uint8_t { identifier, name_placeholder, value_placeholder, number, symbol, end };

struct Token {
  TokenKind kind = TokenKind::end;
  std::string_view text;   // "<EOF>" for end
  std::size_t begin = 0;   // byte offsets into the expression
  std::size_t end = 0;
};

// Always ends with an end token. Characters that start no token become
// one-character symbol tokens, which no grammar rule accepts.
std::vector<Token> tokenize(std::string_view text);

class Parser {
 public:
  Parser(std::string_view text, ExpressionKind kind, const ExpressionAttributeNames& names,
         const ExpressionAttributeValues& values, std::set<std::string>& used_names,
         std::set<std::string>& used_values);

  // Empty text and the size limit; call before parsing.
  std::optional<DynamoError> check_text() const;

  const Token& peek(std::size_t ahead = 0) const;
  const Token& advance();
  bool at_symbol(std::string_view symbol, std::size_t ahead = 0) const;
  bool at_keyword(std::string_view keyword) const;  // case-insensitive identifier
  bool at_end() const { return peek().kind == TokenKind::end; }
  bool at_function_call() const;  // identifier followed by '('
  std::size_t position() const { return position_; }

  // "Invalid <kind>: Syntax error; token: "<t>", near: "<context>"" at the
  // current token.
  DynamoError syntax_error() const;
  // "Invalid <kind>: <detail>".
  DynamoError invalid(std::string_view detail) const;
  // Remembers the first non-syntax problem; reported by finish().
  void defer(DynamoError error);
  // The deferred error, if any; call once the whole text has parsed.
  std::optional<DynamoError> deferred() const { return deferred_; }

  Result<void> expect_symbol(std::string_view symbol);
  Result<DocumentPath> parse_path();
  // Resolves the current ":v" token (which the caller has checked).
  Operand take_value_operand();

  // Nesting guard for parentheses, NOT and function arguments.
  Result<void> enter();
  void leave() { --depth_; }

 private:
  std::string resolve_name(const Token& token);

  std::string_view text_;
  ExpressionKind kind_;
  const ExpressionAttributeNames& names_;
  const ExpressionAttributeValues& values_;
  std::set<std::string>& used_names_;
  std::set<std::string>& used_values_;
  std::vector<Token> tokens_;
  std::size_t position_ = 0;
  std::size_t depth_ = 0;
  std::optional<DynamoError> deferred_;
};

// Paths as DynamoDB prints them in messages: [a, b, [0]].
std::string bracket_path(const DocumentPath& path);
// The overlap/conflict check shared by update and projection expressions.
std::optional<std::string> find_path_overlap(const std::vector<DocumentPath>& paths);

// Condition grammar entry point (also used for key conditions).
Result<Condition> parse_condition_text(Parser& parser);
// Applies DynamoDB's checks to a parsed function call used as a condition.
bool is_condition_function(std::string_view name);

// One step down a document path: the list element or map member `step`
// names, or nullptr when `at` has none. Const and mutable walks share it.
template <typename Value>
Value* descend(Value* at, const PathElement& step) {
  if (step.is_index) {
    if (!at->is(AttributeType::l) || step.index >= at->as_list().size()) return nullptr;
    return &at->as_list()[step.index];
  }
  if (!at->is(AttributeType::m)) return nullptr;
  const auto member = at->as_map().find(step.name);
  return member == at->as_map().end() ? nullptr : &member->second;
}

// A cached plan with this request's values put in place of its placeholders
// (every placeholder it names is present: the cache key lists them).
Condition bind_values(Condition condition, const ExpressionAttributeValues& values);
UpdatePlan bind_values(UpdatePlan plan, const ExpressionAttributeValues& values);

}  // namespace leaseproof::dynamo::expression_detail

// Propagates the error of a Result-returning expression, else binds its value.
#define LP_DYNAMO_TRY(target, expression)                                  \
  auto target##_result_ = (expression);                                    \
  if (!target##_result_.ok()) return std::move(target##_result_).error();  \
  auto target = std::move(target##_result_).value()

#define LP_DYNAMO_TRY_VOID(expression)                     \
  do {                                                     \
    auto lp_result_ = (expression);                        \
    if (!lp_result_.ok()) return std::move(lp_result_).error(); \
  } while (false)
