#include "models/dynamo/expression_parser.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace leaseproof::dynamo {

namespace expression_detail {

namespace {

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_letter(c) || is_digit(c); }

// Length of the UTF-8 sequence that starts with `lead`, so an unexpected
// non-ASCII character is reported whole.
std::size_t utf8_length(unsigned char lead) {
  if (lead >= 0xf0) return 4;
  if (lead >= 0xe0) return 3;
  if (lead >= 0xc0) return 2;
  return 1;
}

std::size_t word_end(std::string_view text, std::size_t at) {
  while (at < text.size() && is_word(text[at])) ++at;
  return at;
}

Token next_token(std::string_view text, std::size_t at) {
  const char c = text[at];
  if (is_letter(c)) return {TokenKind::identifier, {}, at, word_end(text, at)};
  if (is_digit(c)) {
    std::size_t end = at;
    while (end < text.size() && is_digit(text[end])) ++end;
    return {TokenKind::number, {}, at, end};
  }
  if ((c == '#' || c == ':') && at + 1 < text.size() && is_word(text[at + 1])) {
    return {c == '#' ? TokenKind::name_placeholder : TokenKind::value_placeholder, {}, at, word_end(text, at + 1)};
  }
  if (at + 1 < text.size()) {
    const std::string_view pair = text.substr(at, 2);
    if (pair == "<>" || pair == "<=" || pair == ">=") return {TokenKind::symbol, {}, at, at + 2};
  }
  const std::size_t length = std::min(utf8_length(static_cast<unsigned char>(c)), text.size() - at);
  return {TokenKind::symbol, {}, at, at + length};
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  std::size_t at = 0;
  while (true) {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) ++at;
    if (at == text.size()) break;
    Token token = next_token(text, at);
    token.text = text.substr(token.begin, token.end - token.begin);
    tokens.push_back(token);
    at = token.end;
  }
  tokens.push_back(Token{TokenKind::end, "<EOF>", text.size(), text.size()});
  return tokens;
}

Parser::Parser(std::string_view text, ExpressionKind kind, const ExpressionAttributeNames& names,
               const ExpressionAttributeValues& values, std::set<std::string>& used_names,
               std::set<std::string>& used_values)
    : text_(text),
      kind_(kind),
      names_(names),
      values_(values),
      used_names_(used_names),
      used_values_(used_values),
      tokens_(tokenize(text)) {}

std::optional<DynamoError> Parser::check_text() const {
  if (text_.size() > expression_bytes_max) {
    // Guessed wording; the 4 KB limit itself is documented.
    return invalid(fmt::format("Expression size has exceeded the maximum allowed size; expression size: {}",
                               text_.size()));
  }
  if (tokens_.size() == 1) return invalid("The expression can not be empty;");
  return std::nullopt;
}

const Token& Parser::peek(std::size_t ahead) const {
  return tokens_[std::min(position_ + ahead, tokens_.size() - 1)];
}

const Token& Parser::advance() {
  const Token& token = peek();
  if (position_ + 1 < tokens_.size()) ++position_;
  return token;
}

bool Parser::at_symbol(std::string_view symbol, std::size_t ahead) const {
  const Token& token = peek(ahead);
  return token.kind == TokenKind::symbol && token.text == symbol;
}

bool Parser::at_keyword(std::string_view keyword) const {
  return peek().kind == TokenKind::identifier && equals_ignoring_case(peek().text, keyword);
}

bool Parser::at_function_call() const {
  return peek().kind == TokenKind::identifier && at_symbol("(", 1);
}

DynamoError Parser::syntax_error() const {
  // DynamoDB quotes the offending token and the source from the start of the
  // token before it to the end of the token after it, e.g. token: ":", near:
  // "hits : incr". At the end of the text the token is <EOF>.
  const Token& token = peek();
  const std::size_t begin = position_ > 0 ? tokens_[position_ - 1].begin : token.begin;
  std::size_t end = token.end;
  if (token.kind != TokenKind::end && position_ + 1 < tokens_.size()) {
    const Token& next = tokens_[position_ + 1];
    end = next.kind == TokenKind::end ? token.end : next.end;
  }
  return invalid(fmt::format("Syntax error; token: \"{}\", near: \"{}\"", token.text,
                             text_.substr(begin, end - begin)));
}

DynamoError Parser::invalid(std::string_view detail) const {
  return validation_error(fmt::format("Invalid {}: {}", expression_kind_name(kind_), detail));
}

void Parser::defer(DynamoError error) {
  if (!deferred_) deferred_ = std::move(error);
}

Result<void> Parser::expect_symbol(std::string_view symbol) {
  if (!at_symbol(symbol)) return syntax_error();
  advance();
  return {};
}

std::string Parser::resolve_name(const Token& token) {
  if (token.kind == TokenKind::name_placeholder) {
    const std::string key(token.text);
    const auto found = names_.find(key);
    if (found == names_.end()) {
      defer(invalid(fmt::format(
          "An expression attribute name used in the document path is not defined; attribute name: {}", key)));
      return key;
    }
    used_names_.insert(key);
    return found->second;
  }
  if (is_reserved_word(token.text)) {
    defer(invalid(fmt::format("Attribute name is a reserved keyword; reserved keyword: {}", token.text)));
  }
  return std::string(token.text);
}

Result<DocumentPath> Parser::parse_path() {
  // Index digits beyond this cannot address a list that fits in 400 KB.
  constexpr std::size_t index_digits_max = 9;
  DocumentPath path;
  if (peek().kind != TokenKind::identifier && peek().kind != TokenKind::name_placeholder) return syntax_error();
  path.push_back(PathElement{resolve_name(advance()), false, 0});
  while (true) {
    if (at_symbol(".")) {
      advance();
      if (peek().kind != TokenKind::identifier && peek().kind != TokenKind::name_placeholder) return syntax_error();
      path.push_back(PathElement{resolve_name(advance()), false, 0});
    } else if (at_symbol("[")) {
      advance();
      if (peek().kind != TokenKind::number || peek().text.size() > index_digits_max) return syntax_error();
      const std::size_t index = std::stoul(std::string(advance().text));
      LP_DYNAMO_TRY_VOID(expect_symbol("]"));
      path.push_back(PathElement{"", true, index});
    } else {
      return path;
    }
  }
}

Operand Parser::take_value_operand() {
  const Token& token = advance();
  LP_ASSERT(token.kind == TokenKind::value_placeholder);
  Operand operand;
  operand.kind = Operand::Kind::value;
  operand.placeholder = std::string(token.text);
  const auto found = values_.find(operand.placeholder);
  if (found == values_.end()) {
    defer(invalid(fmt::format("An expression attribute value used in expression is not defined; attribute value: {}",
                              operand.placeholder)));
  } else {
    used_values_.insert(operand.placeholder);
    operand.value = found->second;
  }
  return operand;
}

Result<void> Parser::enter() {
  if (depth_ >= expression_depth_max) {
    // Guessed wording: DynamoDB's own nesting limit message is not documented.
    return invalid(fmt::format("The expression has exceeded the maximum nesting depth of {}", expression_depth_max));
  }
  ++depth_;
  return {};
}

std::string bracket_path(const DocumentPath& path) {
  std::vector<std::string> parts;
  for (const auto& element : path) {
    parts.push_back(element.is_index ? fmt::format("[{}]", element.index) : element.name);
  }
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::optional<std::string> find_path_overlap(const std::vector<DocumentPath>& paths) {
  for (std::size_t i = 0; i < paths.size(); ++i) {
    for (std::size_t j = i + 1; j < paths.size(); ++j) {
      const auto& a = paths[i];
      const auto& b = paths[j];
      const std::size_t common = std::min(a.size(), b.size());
      std::size_t k = 0;
      while (k < common && a[k] == b[k]) ++k;
      const char* relation = nullptr;
      if (k == common) {
        relation = "overlap";
      } else if (a[k].is_index != b[k].is_index) {
        relation = "conflict";  // one path treats the parent as a map, the other as a list
      }
      if (relation != nullptr) {
        return fmt::format(
            "Two document paths {} with each other; must remove or rewrite one of these paths; path one: {}, "
            "path two: {}",
            relation, bracket_path(a), bracket_path(b));
      }
    }
  }
  return std::nullopt;
}

}  // namespace expression_detail

std::string to_string(const DocumentPath& path) {
  std::string out;
  for (const auto& element : path) {
    if (element.is_index) {
      out += fmt::format("[{}]", element.index);
    } else {
      if (!out.empty()) out += '.';
      out += element.name;
    }
  }
  return out;
}

std::string_view expression_kind_name(ExpressionKind kind) {
  switch (kind) {
    case ExpressionKind::condition: return "ConditionExpression";
    case ExpressionKind::filter: return "FilterExpression";
    case ExpressionKind::key_condition: return "KeyConditionExpression";
    case ExpressionKind::update: return "UpdateExpression";
    case ExpressionKind::projection: return "ProjectionExpression";
  }
  LP_UNREACHABLE("expression kind {}", static_cast<int>(kind));
}


namespace {

bool valid_placeholder(std::string_view key, char sigil) {
  if (key.size() < 2 || key[0] != sigil) return false;
  return std::all_of(key.begin() + 1, key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

Result<void> ExpressionContext::check_keys() const {
  for (const auto& [key, name] : *names_) {
    if (!valid_placeholder(key, '#')) {
      return validation_error(fmt::format("ExpressionAttributeNames contains invalid key: Syntax error; key: \"{}\"", key));
    }
    if (name.empty()) {
      // Guessed wording.
      return validation_error(fmt::format("ExpressionAttributeNames contains invalid value: Empty attribute name for key {}", key));
    }
  }
  for (const auto& [key, value] : *values_) {
    if (!valid_placeholder(key, ':')) {
      return validation_error(fmt::format("ExpressionAttributeValues contains invalid key: Syntax error; key: \"{}\"", key));
    }
  }
  return {};
}

std::set<std::string> ExpressionContext::used_names() const {
  std::set<std::string> used = used_names_;
  for (const ExpressionCache::Entry* hit : hits_) used.insert(hit->used_names.begin(), hit->used_names.end());
  return used;
}

std::set<std::string> ExpressionContext::used_values() const {
  std::set<std::string> used = used_values_;
  for (const ExpressionCache::Entry* hit : hits_) used.insert(hit->used_values.begin(), hit->used_values.end());
  return used;
}

Result<void> ExpressionContext::check_all_used() const {
  auto name_used = [this](const std::string& key) {
    if (used_names_.contains(key)) return true;
    return std::any_of(hits_.begin(), hits_.end(), [&](const auto* hit) { return hit->used_names.contains(key); });
  };
  auto value_used = [this](const std::string& key) {
    if (used_values_.contains(key)) return true;
    return std::any_of(hits_.begin(), hits_.end(), [&](const auto* hit) { return hit->used_values.contains(key); });
  };
  std::vector<std::string> unused_names;
  for (const auto& [key, name] : *names_) {
    if (!name_used(key)) unused_names.push_back(key);
  }
  if (!unused_names.empty()) {
    return validation_error(fmt::format("Value provided in ExpressionAttributeNames unused in expressions: keys: {{{}}}",
                                        fmt::join(unused_names, ", ")));
  }
  std::vector<std::string> unused_values;
  for (const auto& [key, value] : *values_) {
    if (!value_used(key)) unused_values.push_back(key);
  }
  if (!unused_values.empty()) {
    return validation_error(fmt::format("Value provided in ExpressionAttributeValues unused in expressions: keys: {{{}}}",
                                        fmt::join(unused_values, ", ")));
  }
  return {};
}

}  // namespace leaseproof::dynamo
