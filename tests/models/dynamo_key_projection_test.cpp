#include <gtest/gtest.h>

#include "models/dynamo/expression.hpp"
#include "tests/core/dynamo_test_support.hpp"

namespace leaseproof::dynamo {
namespace {

using test::N;
using test::S;

const KeySchema schema = {{"part", KeyType::hash}, {"expires", KeyType::range}};
const ExpressionAttributeValues values = {{":s", S("STARTED#1")}, {":lo", N("10")}, {":hi", N("20")},
                                          {":p", S("STA")}};

Result<KeyCondition> key(std::string_view text) {
  ExpressionContext context({{"#e", "expires"}}, values);
  return context.parse_key_condition(text, schema);
}

TEST(DynamoKeyCondition, ParsesPartitionAndSortPredicatesInEitherOrder) {
  auto both = key("expires BETWEEN :lo AND :hi AND part = :s");
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_EQ(both->partition_key_name, "part");
  EXPECT_EQ(both->partition_value, S("STARTED#1"));
  ASSERT_TRUE(both->sort.has_value());
  EXPECT_EQ(both->sort->op, SortKeyOperator::between);

  EXPECT_TRUE(evaluate(*both, {{"part", S("STARTED#1")}, {"expires", N("10")}}));
  EXPECT_TRUE(evaluate(*both, {{"part", S("STARTED#1")}, {"expires", N("20")}}));
  EXPECT_FALSE(evaluate(*both, {{"part", S("STARTED#1")}, {"expires", N("21")}}));
  EXPECT_FALSE(evaluate(*both, {{"part", S("STARTED#2")}, {"expires", N("15")}}));

  auto only_partition = key("part = :s");
  ASSERT_TRUE(only_partition.ok());
  EXPECT_FALSE(only_partition->sort.has_value());
  auto less = key("part = :s AND #e < :lo");
  ASSERT_TRUE(less.ok());
  EXPECT_TRUE(evaluate(*less, {{"part", S("STARTED#1")}, {"expires", N("9")}}));
  EXPECT_FALSE(evaluate(*less, {{"part", S("STARTED#1")}, {"expires", N("10")}}));
}

TEST(DynamoKeyCondition, RejectsWhatQueryCannotDo) {
  EXPECT_EQ(key("expires < :lo").error().message, "Query condition missed key schema element: part");
  EXPECT_EQ(key("part = :s OR expires < :lo").error().message,
            "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: OR");
  EXPECT_EQ(key("part = :s AND attribute_exists(expires)").error().message,
            "Invalid KeyConditionExpression: Invalid operator used in KeyConditionExpression: attribute_exists");
  EXPECT_EQ(key("part < :s").error().message, "Query key condition not supported");
  EXPECT_EQ(key("part = :s AND extra = :lo").error().message, "Query condition missed key schema element: expires");
  EXPECT_EQ(key("part = :s AND expires > :lo AND expires < :hi").error().message,
            "Invalid KeyConditionExpression: Conditions can be of length 1 or 2 only");
  EXPECT_EQ(key("part = :s AND").error().message,
            R"(Invalid KeyConditionExpression: Syntax error; token: "<EOF>", near: "AND")");
}

TEST(DynamoKeyCondition, BeginsWithOnSortKey) {
  const KeySchema string_schema = {{"pk", KeyType::hash}, {"sk", KeyType::range}};
  ExpressionContext context({}, {{":pk", S("a")}, {":p", S("STA")}});
  auto condition = context.parse_key_condition("pk = :pk AND begins_with(sk, :p)", string_schema);
  ASSERT_TRUE(condition.ok()) << condition.error().message;
  EXPECT_TRUE(evaluate(*condition, {{"pk", S("a")}, {"sk", S("STARTED")}}));
  EXPECT_FALSE(evaluate(*condition, {{"pk", S("a")}, {"sk", S("STOPPED")}}));
}

TEST(DynamoProjection, KeepsOnlyProjectedPaths) {
  const Item item{{"pk", S("k")},
                  {"owner", S("w")},
                  {"m", AttributeValue::map({{"a", N("1")}, {"b", N("2")}})},
                  {"l", AttributeValue::list({S("x"), S("y"), S("z")})}};
  auto plan = parse_projection("pk, m.b, l[2], l[0], #o", {{"#o", "owner"}});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(project(*plan, item), (Item{{"pk", S("k")},
                                        {"owner", S("w")},
                                        {"m", AttributeValue::map({{"b", N("2")}})},
                                        {"l", AttributeValue::list({S("x"), S("z")})}}));
  auto missing = parse_projection("nothing, m.c", {});
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(project(*missing, item).empty());
}

TEST(DynamoProjection, RejectsOverlapsAndReservedWords) {
  EXPECT_EQ(parse_projection("m, m.a", {}).error().message,
            "Invalid ProjectionExpression: Two document paths overlap with each other; must remove or rewrite one of "
            "these paths; path one: [m], path two: [m, a]");
  EXPECT_EQ(parse_projection("name", {}).error().message,
            "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: name");
  EXPECT_EQ(parse_projection("meta.region", {}).error().message,
            "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: region");
  EXPECT_EQ(parse_projection("a,", {}).error().message,
            R"(Invalid ProjectionExpression: Syntax error; token: "<EOF>", near: ",")");
}

}  // namespace
}  // namespace leaseproof::dynamo
