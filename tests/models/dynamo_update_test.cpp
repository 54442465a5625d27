#include <gtest/gtest.h>

#include "models/dynamo/expression.hpp"
#include "tests/core/dynamo_test_support.hpp"

namespace leaseproof::dynamo {
namespace {

using test::N;
using test::S;

const KeySchema key_schema = {{"pk", KeyType::hash}};
const ExpressionAttributeValues values = {
    {":one", N("1")},       {":zero", N("0")},       {":half", N("0.5")}, {":s", S("text")},
    {":list", AttributeValue::list({S("z")})},       {":tags", AttributeValue::string_set({"b", "c"})},
    {":nums", AttributeValue::number_set({"2"})},    {":v", S("v")},
};

UpdatePlan plan_ok(std::string_view text) {
  auto plan = parse_update(text, {}, values);
  EXPECT_TRUE(plan.ok()) << text << ": " << (plan.ok() ? "" : plan.error().message);
  return plan.ok() ? plan.value() : UpdatePlan{};
}

std::string plan_error(std::string_view text) {
  auto plan = parse_update(text, {}, values);
  EXPECT_FALSE(plan.ok()) << text;
  return plan.ok() ? "" : plan.error().message;
}

Item applied(std::string_view text, Item item) {
  auto result = apply(plan_ok(text), key_schema, item);
  EXPECT_TRUE(result.ok()) << text << ": " << (result.ok() ? "" : result.error().message);
  return item;
}

std::string apply_error(std::string_view text, Item item) {
  const Item before = item;
  auto result = apply(plan_ok(text), key_schema, item);
  EXPECT_FALSE(result.ok()) << text;
  EXPECT_EQ(item, before) << "a failed update must leave the item unchanged";
  return result.ok() ? "" : result.error().message;
}

TEST(DynamoUpdate, SetArithmeticAndIfNotExists) {
  const Item base{{"pk", S("k")}, {"n", N("41")}};
  EXPECT_EQ(applied("SET n = n + :one", base).at("n"), N("42"));
  EXPECT_EQ(applied("SET n = n - :half", base).at("n"), N("40.5"));
  EXPECT_EQ(applied("SET m = if_not_exists(m, :zero) + :one", base).at("m"), N("1"));
  EXPECT_EQ(applied("SET n = if_not_exists(n, :zero) + :one", base).at("n"), N("42"));
  EXPECT_EQ(applied("SET a = :s, b = n", base).at("b"), N("41"));
  // Operands read the old item: the two values swap.
  const Item swapped = applied("SET a = b, b = a", {{"pk", S("k")}, {"a", S("1")}, {"b", S("2")}});
  EXPECT_EQ(swapped.at("a"), S("2"));
  EXPECT_EQ(swapped.at("b"), S("1"));
}

TEST(DynamoUpdate, ListAppendNestedSetAndRemove) {
  Item item{{"pk", S("k")}, {"l", AttributeValue::list({S("a")})}, {"m", AttributeValue::map({{"x", N("1")}})}};
  EXPECT_EQ(applied("SET l = list_append(l, :list)", item).at("l"), AttributeValue::list({S("a"), S("z")}));
  EXPECT_EQ(applied("SET m.y = :s", item).at("m").as_map().at("y"), S("text"));
  EXPECT_EQ(applied("SET l[5] = :s", item).at("l").as_list().size(), 2U);  // past the end appends
  const Item removed = applied("REMOVE m.x, l[0]", item);
  EXPECT_TRUE(removed.at("m").as_map().empty());
  EXPECT_TRUE(removed.at("l").as_list().empty());
  EXPECT_FALSE(applied("REMOVE l", item).contains("l"));
  // Indices refer to the list as it was before the update.
  const Item three{{"pk", S("k")}, {"l", AttributeValue::list({S("a"), S("b"), S("c")})}};
  EXPECT_EQ(applied("REMOVE l[0], l[1]", three).at("l"), AttributeValue::list({S("c")}));
  EXPECT_EQ(applied("SET l[2] = :s REMOVE l[0]", three).at("l"), AttributeValue::list({S("b"), S("text")}));
  EXPECT_EQ(applied("REMOVE absent", item), item);
}

TEST(DynamoUpdate, AddAndDelete) {
  const Item item{{"pk", S("k")}, {"n", N("1")}, {"tags", AttributeValue::string_set({"a", "b"})}};
  EXPECT_EQ(applied("ADD n :one", item).at("n"), N("2"));
  EXPECT_EQ(applied("ADD fresh :one", item).at("fresh"), N("1"));
  EXPECT_EQ(applied("ADD tags :tags", item).at("tags"), AttributeValue::string_set({"a", "b", "c"}));
  EXPECT_EQ(applied("DELETE tags :tags", item).at("tags"), AttributeValue::string_set({"a"}));
  EXPECT_FALSE(applied("DELETE tags :tags", {{"pk", S("k")}, {"tags", AttributeValue::string_set({"b"})}})
                   .contains("tags"));
  EXPECT_EQ(applied("SET a = :s REMOVE n ADD c :one", item).size(), 4U);
}

TEST(DynamoUpdate, TypeErrorsAtApplyTime) {
  const Item item{{"pk", S("k")}, {"s", S("text")}, {"n", N("1")}};
  EXPECT_EQ(apply_error("ADD s :one", item), "An operand in the update expression has an incorrect data type");
  EXPECT_EQ(apply_error("SET n = s + :one", item), "An operand in the update expression has an incorrect data type");
  EXPECT_EQ(apply_error("ADD n :tags", item), "An operand in the update expression has an incorrect data type");
  EXPECT_EQ(apply_error("SET n = absent + :one", item),
            "The provided expression refers to an attribute that does not exist in the item");
  EXPECT_EQ(apply_error("SET nothing.deeper = :s", item),
            "The document path provided in the update expression is invalid for update");
}

TEST(DynamoUpdate, ParseTimeErrors) {
  EXPECT_EQ(plan_error("SET a = :one, a = :zero"),
            "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of "
            "these paths; path one: [a], path two: [a]");
  EXPECT_EQ(plan_error("SET a = :one REMOVE a.b"),
            "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of "
            "these paths; path one: [a], path two: [a, b]");
  EXPECT_EQ(plan_error("SET a.b = :one REMOVE a[0]"),
            "Invalid UpdateExpression: Two document paths conflict with each other; must remove or rewrite one of "
            "these paths; path one: [a, b], path two: [a, [0]]");
  EXPECT_EQ(plan_error("SET a = :one SET b = :one"),
            "Invalid UpdateExpression: The \"SET\" section can only be used once in an update expression;");
  EXPECT_EQ(plan_error("ADD hits : incr"), R"(Invalid UpdateExpression: Syntax error; token: ":", near: "hits : incr")");
  EXPECT_EQ(plan_error("INVALID SYNTAX HERE"),
            R"(Invalid UpdateExpression: Syntax error; token: "INVALID", near: "INVALID SYNTAX")");
  EXPECT_EQ(plan_error("ADD a :s"),
            "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: ADD, "
            "operand type: S");
  EXPECT_EQ(plan_error("SET a = :s + :one"),
            "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: +, "
            "operand type: S");
  EXPECT_EQ(plan_error("SET a = if_not_exists(:one, :zero)"),
            "Invalid UpdateExpression: Operator or function requires a document path; operator or function: "
            "if_not_exists");
  EXPECT_EQ(plan_error("SET a = :undefined"),
            "Invalid UpdateExpression: An expression attribute value used in expression is not defined; attribute "
            "value: :undefined");
  EXPECT_EQ(plan_error(""), "Invalid UpdateExpression: The expression can not be empty;");
  EXPECT_EQ(plan_error("SET a = b + c + :one"),
            R"(Invalid UpdateExpression: Syntax error; token: "+", near: "c + :one")");
}

TEST(DynamoUpdate, KeyAttributesCannotBeUpdated) {
  const auto plan = plan_ok("SET pk = :s");
  EXPECT_EQ(check_key_attributes(plan, key_schema).error().message,
            "One or more parameter values were invalid: Cannot update attribute pk. This attribute is part of the key");
  EXPECT_EQ(apply_error("SET pk = :s", {{"pk", S("k")}}),
            "One or more parameter values were invalid: Cannot update attribute pk. This attribute is part of the key");
  EXPECT_TRUE(check_key_attributes(plan_ok("SET extra = :s"), key_schema).ok());
}

TEST(DynamoUpdate, ItemSizeLimitIsEnforced) {
  const std::string big(300 * 1024, 'x');
  const ExpressionAttributeValues big_values = {{":big", S(big)}};
  auto plan = parse_update("SET b = :big", {}, big_values);
  ASSERT_TRUE(plan.ok());
  Item item{{"pk", S("k")}, {"a", S(big)}};
  auto result = apply(*plan, key_schema, item);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message, "Item size to update has exceeded the maximum allowed size");
  EXPECT_FALSE(item.contains("b"));
}

TEST(DynamoUpdate, UpdatedAttributesForReturnValues) {
  const auto plan = plan_ok("SET n = n + :one, m.x = :s REMOVE gone");
  const Item old_item{{"pk", S("k")}, {"n", N("1")}, {"m", AttributeValue::map({{"x", N("0")}, {"y", N("5")}})},
                      {"gone", S("g")}, {"other", S("o")}};
  Item new_item = old_item;
  ASSERT_TRUE(apply(plan, key_schema, new_item).ok());
  EXPECT_EQ(updated_attributes(plan, old_item),
            (Item{{"n", N("1")}, {"m", AttributeValue::map({{"x", N("0")}})}, {"gone", S("g")}}));
  EXPECT_EQ(updated_attributes(plan, new_item), (Item{{"n", N("2")}, {"m", AttributeValue::map({{"x", S("text")}})}}));
}

// Every element of a document path is checked in every clause (DynamoDB and
// dynalite answer ValidationException; the model accepted a nested one).
TEST(DynamoUpdate, ReservedWordsAnywhereInAPathAreRefused) {
  EXPECT_EQ(plan_error("SET meta.region = :v"),
            "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: region");
  EXPECT_EQ(plan_error("REMOVE meta.status"),
            "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: status");
  EXPECT_EQ(plan_error("ADD m.l[1].ttl :one"),
            "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: ttl");
  EXPECT_EQ(plan_error("SET a = meta.name"),
            "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: name");
  EXPECT_EQ(plan_error("DELETE tags.user :tags"),
            "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: user");
}

}  // namespace
}  // namespace leaseproof::dynamo
