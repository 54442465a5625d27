#include <gtest/gtest.h>

#include "models/dynamo/expression.hpp"
#include "tests/core/dynamo_test_support.hpp"

namespace leaseproof::dynamo {
namespace {

using test::N;
using test::S;

const ExpressionAttributeValues values = {
    {":s", S("abc")},      {":a", S("a")},        {":n9", N("9")},  {":n10", N("10")}, {":n1", N("1")},
    {":x", N("10.000")},   {":t", S("S")},        {":tn", S("N")},  {":bool", AttributeValue::boolean(true)},
    {":big", N("12345678901234567890123456789012345678")},
    {":big1", N("12345678901234567890123456789012345679")},
};
const ExpressionAttributeNames names = {{"#s", "status"}, {"#o", "lease_owner"}};

Condition parse_ok(std::string_view text) {
  auto parsed = parse_condition(text, names, values);
  EXPECT_TRUE(parsed.ok()) << text << ": " << (parsed.ok() ? "" : parsed.error().message);
  return parsed.ok() ? parsed.value() : Condition{};
}

std::string parse_error(std::string_view text) {
  auto parsed = parse_condition(text, names, values);
  EXPECT_FALSE(parsed.ok()) << text;
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.error().type, "ValidationException");
  return parsed.error().message;
}

bool holds(std::string_view text, const Item& item) { return evaluate(parse_ok(text), item); }

TEST(DynamoCondition, SyntaxErrorsQuoteTokenAndNeighbours) {
  EXPECT_EQ(parse_error("a = = :n1"), R"(Invalid ConditionExpression: Syntax error; token: "=", near: "= = :n1")");
  EXPECT_EQ(parse_error("a ="), R"(Invalid ConditionExpression: Syntax error; token: "<EOF>", near: "=")");
  EXPECT_EQ(parse_error("a = :n1 b"), R"(Invalid ConditionExpression: Syntax error; token: "b", near: ":n1 b")");
  EXPECT_EQ(parse_error("(a = :n1"), R"(Invalid ConditionExpression: Syntax error; token: "<EOF>", near: ":n1")");
  EXPECT_EQ(parse_error("a = : n1"), R"(Invalid ConditionExpression: Syntax error; token: ":", near: "= : n1")");
  EXPECT_EQ(parse_error("a BETWEEN :n1 OR :n9"),
            R"(Invalid ConditionExpression: Syntax error; token: "OR", near: ":n1 OR :n9")");
  EXPECT_EQ(parse_error("   "), "Invalid ConditionExpression: The expression can not be empty;");
}

TEST(DynamoCondition, PlaceholderAndNameErrors) {
  EXPECT_EQ(parse_error("a = :missing"),
            "Invalid ConditionExpression: An expression attribute value used in expression is not defined; "
            "attribute value: :missing");
  EXPECT_EQ(parse_error("#nope = :a"),
            "Invalid ConditionExpression: An expression attribute name used in the document path is not defined; "
            "attribute name: #nope");
  EXPECT_EQ(parse_error("status = :a"),
            "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: status");
  // Every element of a document path is checked, not just the first: REGION
  // and DATA are on DynamoDB's list (dynalite rejects them too).
  EXPECT_EQ(parse_error("meta.region = :a"),
            "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: region");
  EXPECT_EQ(parse_error("attribute_exists(m.l[0].data)"),
            "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: data");
  // A syntax error wins over an undefined placeholder earlier in the text.
  EXPECT_EQ(parse_error("a = :missing ="),
            R"(Invalid ConditionExpression: Syntax error; token: "=", near: ":missing =")");
  EXPECT_TRUE(parse_condition("#s = :a", names, values).ok());
}

TEST(DynamoCondition, FunctionMisuseErrors) {
  EXPECT_EQ(parse_error("begins_with(a)"),
            "Invalid ConditionExpression: Incorrect number of operands for operator or function; operator or "
            "function: begins_with, number of operands: 1");
  EXPECT_EQ(parse_error("frob(a)"), "Invalid ConditionExpression: Invalid function name; function: frob");
  EXPECT_EQ(parse_error("size(a)"),
            "Invalid ConditionExpression: The function is not allowed to be used this way in an expression; "
            "function: size");
  EXPECT_EQ(parse_error("a = attribute_exists(b)"),
            "Invalid ConditionExpression: The function is not allowed to be used this way in an expression; "
            "function: attribute_exists");
  EXPECT_EQ(parse_error("attribute_exists(:a)"),
            "Invalid ConditionExpression: Operator or function requires a document path; operator or function: "
            "attribute_exists");
  EXPECT_EQ(parse_error("begins_with(a, :n1)"),
            "Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: "
            "begins_with, operand type: N");
  EXPECT_EQ(parse_error("a BETWEEN :n10 AND :n1"),
            "Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to "
            "lower bound; lower bound operand: AttributeValue: {N:10}, upper bound operand: AttributeValue: {N:1}");
}

TEST(DynamoCondition, PrecedenceIsComparisonThenNotThenAndThenOr) {
  const Condition c = parse_ok("a = :a OR b = :a AND NOT c = :a");
  ASSERT_EQ(c.kind, ConditionKind::logical_or);
  ASSERT_EQ(c.children[1].kind, ConditionKind::logical_and);
  EXPECT_EQ(c.children[1].children[1].kind, ConditionKind::logical_not);
  EXPECT_EQ(to_string(c), "((a = :a) OR ((b = :a) AND (NOT (c = :a))))");
  EXPECT_EQ(to_string(parse_ok("(a = :a OR b = :a) AND c = :a")), "(((a = :a) OR (b = :a)) AND (c = :a))");
  // Keywords are case-insensitive.
  EXPECT_EQ(parse_ok("a = :a and not b = :a"), parse_ok("a = :a AND NOT b = :a"));
}

TEST(DynamoCondition, TypeMismatchIsFalseNotAnError) {
  const Item item{{"a", S("10")}, {"n", N("10")}};
  EXPECT_FALSE(holds("a = :n10", item));   // S vs N
  EXPECT_TRUE(holds("a <> :n10", item));
  EXPECT_FALSE(holds("a > :n1", item));
  EXPECT_FALSE(holds("a < :n1", item));
  EXPECT_FALSE(holds("n > :a", item));
  EXPECT_FALSE(holds("n BETWEEN :a AND :s", item));
}

TEST(DynamoCondition, MissingAttributes) {
  const Item item{{"a", S("x")}};
  EXPECT_FALSE(holds("absent = :a", item));
  EXPECT_TRUE(holds("absent <> :a", item));
  EXPECT_FALSE(holds("absent < :n10", item));
  EXPECT_TRUE(holds("attribute_not_exists(absent)", item));
  EXPECT_FALSE(holds("attribute_exists(absent)", item));
  EXPECT_TRUE(holds("attribute_exists(a)", item));
  EXPECT_FALSE(holds("attribute_exists(a.b)", item));  // a is not a map
  EXPECT_FALSE(holds("size(absent) > :n1", item));
}

TEST(DynamoCondition, NumbersCompareNumerically) {
  const Item item{{"n", N("10")}, {"big", N("12345678901234567890123456789012345678")}};
  EXPECT_TRUE(holds("n > :n9", item));  // "10" > "9" as numbers, not as text
  EXPECT_TRUE(holds("n = :x", item));   // 10 = 10.000
  EXPECT_TRUE(holds("big = :big", item));
  EXPECT_TRUE(holds("big < :big1", item));  // differs only in the 38th digit
  EXPECT_FALSE(holds("big = :big1", item));
}

TEST(DynamoCondition, BetweenIsInclusiveAndInMatchesAnyListed) {
  EXPECT_TRUE(holds("n BETWEEN :n1 AND :n10", {{"n", N("1")}}));
  EXPECT_TRUE(holds("n BETWEEN :n1 AND :n10", {{"n", N("10")}}));
  EXPECT_FALSE(holds("n BETWEEN :n1 AND :n9", {{"n", N("10")}}));
  EXPECT_TRUE(holds("n IN (:a, :n10, :s)", {{"n", N("10.0")}}));
  EXPECT_FALSE(holds("n IN (:a, :n9)", {{"n", N("10")}}));
}

TEST(DynamoCondition, StringFunctions) {
  const Item item{{"s", S("abcdef")},
                  {"n", N("123")},
                  {"tags", AttributeValue::string_set({"a", "b"})},
                  {"nums", AttributeValue::number_set({"1", "10"})},
                  {"elems", AttributeValue::list({S("a"), N("9")})}};
  EXPECT_TRUE(holds("begins_with(s, :s)", item));
  EXPECT_FALSE(holds("begins_with(n, :a)", item));  // non-string: false
  EXPECT_TRUE(holds("contains(s, :s)", item));
  EXPECT_TRUE(holds("contains(tags, :a)", item));
  EXPECT_TRUE(holds("contains(nums, :x)", item));  // 10.000 is a member of {1, 10}
  EXPECT_TRUE(holds("contains(elems, :n9)", item));
  EXPECT_FALSE(holds("contains(n, :n1)", item));
  EXPECT_TRUE(holds("attribute_type(s, :t)", item));
  EXPECT_FALSE(holds("attribute_type(s, :tn)", item));
  EXPECT_TRUE(holds("size(s) > :n1", item));
  EXPECT_TRUE(holds("size(tags) BETWEEN :n1 AND :n9", item));
  EXPECT_TRUE(holds("size(elems) = :n1 OR size(elems) > :n1", item));
}

TEST(DynamoCondition, NestedPathsAndNames) {
  const Item item{{"m", AttributeValue::map({{"letters", AttributeValue::list({S("a"), S("abc")})}})},
                  {"status", S("a")}};
  EXPECT_TRUE(holds("m.letters[1] = :s", item));
  EXPECT_FALSE(holds("m.letters[2] = :s", item));
  EXPECT_TRUE(holds("#s = :a", item));
}

TEST(DynamoCondition, UnusedPlaceholdersAndInvalidKeys) {
  ExpressionContext context({{"#o", "lease_owner"}, {"#unused", "x"}}, {{":me", S("w")}, {":spare", N("1")}});
  ASSERT_TRUE(context.parse_condition("#o = :me").ok());
  auto unused = context.check_all_used();
  ASSERT_FALSE(unused.ok());
  EXPECT_EQ(unused.error().message, "Value provided in ExpressionAttributeNames unused in expressions: keys: {#unused}");

  ExpressionContext values_only({}, {{":me", S("w")}, {":spare", N("1")}, {":z", N("0")}});
  ASSERT_TRUE(values_only.parse_condition("a = :me").ok());
  auto unused_values = values_only.check_all_used();
  ASSERT_FALSE(unused_values.ok());
  EXPECT_EQ(unused_values.error().message,
            "Value provided in ExpressionAttributeValues unused in expressions: keys: {:spare, :z}");

  ExpressionContext bad_keys({{"owner", "lease_owner"}}, {});
  auto keys = bad_keys.check_keys();
  ASSERT_FALSE(keys.ok());
  EXPECT_EQ(keys.error().message, R"(ExpressionAttributeNames contains invalid key: Syntax error; key: "owner")");
  ExpressionContext bad_value_keys({}, {{"me", S("w")}});
  ASSERT_FALSE(bad_value_keys.check_keys().ok());
  EXPECT_EQ(bad_value_keys.check_keys().error().message,
            R"(ExpressionAttributeValues contains invalid key: Syntax error; key: "me")");
}

TEST(DynamoCondition, LeaseAcquireConditionSemantics) {
  const ExpressionAttributeValues lease_values = {{":me", S("worker-a")}, {":now", N("1000")}};
  auto condition = parse_condition(
      "attribute_not_exists(lease_owner) OR lease_expires_at_ms < :now OR lease_owner = :me", {}, lease_values);
  ASSERT_TRUE(condition.ok());
  EXPECT_TRUE(evaluate(*condition, {{"pk", S("CONN#1")}}));  // never leased
  EXPECT_TRUE(evaluate(*condition, {{"lease_owner", S("worker-b")}, {"lease_expires_at_ms", N("999")}}));  // expired
  EXPECT_FALSE(evaluate(*condition, {{"lease_owner", S("worker-b")}, {"lease_expires_at_ms", N("1000")}}));  // live
  EXPECT_TRUE(evaluate(*condition, {{"lease_owner", S("worker-a")}, {"lease_expires_at_ms", N("5000")}}));  // mine
}

TEST(DynamoCondition, ExpressionSizeAndNestingAreBounded) {
  std::string deep(expression_depth_max + 1, '(');
  deep += "a = :a";
  deep += std::string(expression_depth_max + 1, ')');
  EXPECT_NE(parse_error(deep).find("nesting"), std::string::npos);
  std::string long_text = "a = :a";
  while (long_text.size() <= expression_bytes_max) long_text += " OR a = :a";
  EXPECT_NE(parse_error(long_text).find("Expression size has exceeded the maximum allowed size"), std::string::npos);
}

}  // namespace
}  // namespace leaseproof::dynamo
