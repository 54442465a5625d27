// The expression cache must be invisible: a request parsed through it gets
// exactly what a fresh parse gives (plan, values, error, used placeholders).

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "models/dynamo/expression.hpp"

#include "tests/core/dynamo_test_support.hpp"

namespace leaseproof::dynamo {
namespace {

using test::N;
using test::S;

struct Outcome {
  bool ok = false;
  std::string error;
  std::optional<Condition> condition;
  std::optional<UpdatePlan> update;
  std::set<std::string> used_names;
  std::set<std::string> used_values;
  std::string all_used;  // check_all_used's error, or ""

  bool operator==(const Outcome&) const = default;
};

// Parses an optional update and an optional condition in one context, as an
// UpdateItem does.
Outcome parse_request(ExpressionContext& context, const std::optional<std::string>& update,
                      const std::optional<std::string>& condition) {
  Outcome out;
  out.ok = true;
  if (update) {
    auto plan = context.parse_update(*update);
    if (!plan.ok()) return Outcome{false, plan.error().message, {}, {}, {}, {}, {}};
    out.update = plan.value();
  }
  if (condition) {
    auto parsed = context.parse_condition(*condition);
    if (!parsed.ok()) return Outcome{false, parsed.error().message, {}, {}, {}, {}, {}};
    out.condition = parsed.value();
  }
  out.used_names = context.used_names();
  out.used_values = context.used_values();
  if (auto all = context.check_all_used(); !all.ok()) out.all_used = all.error().message;
  return out;
}

Outcome fresh(const ExpressionAttributeNames& names, const ExpressionAttributeValues& values,
              const std::optional<std::string>& update, const std::optional<std::string>& condition) {
  ExpressionContext context(names, values);
  return parse_request(context, update, condition);
}

Outcome through(ExpressionCache& cache, const ExpressionAttributeNames& names, const ExpressionAttributeValues& values,
                const std::optional<std::string>& update, const std::optional<std::string>& condition) {
  auto context = ExpressionContext::borrowing(names, values, &cache);
  return parse_request(context, update, condition);
}

const ExpressionAttributeNames kNames = {{"#o", "lease_owner"}, {"#e", "lease_epoch"}};

TEST(DynamoExpressionCache, AHitBindsTheNewRequestsValues) {
  ExpressionCache cache;
  const std::string condition = "#o = :me AND #e = :epoch";
  const std::string update = "SET lease_expires_at_ms = :until";
  ExpressionAttributeValues first = {{":me", S("w1")}, {":epoch", N("1")}, {":until", N("100")}};
  ExpressionAttributeValues second = {{":me", S("w2")}, {":epoch", N("7")}, {":until", N("200")}};
  EXPECT_EQ(through(cache, kNames, first, update, condition), fresh(kNames, first, update, condition));
  EXPECT_EQ(cache.misses(), 2u);
  const Outcome cached = through(cache, kNames, second, update, condition);
  EXPECT_EQ(cache.hits(), 2u);
  EXPECT_EQ(cached, fresh(kNames, second, update, condition));
  EXPECT_EQ(cached.condition->children[0].operands[1].value, S("w2"));
}

TEST(DynamoExpressionCache, AValueOfAnotherTypeIsAnotherEntry) {
  ExpressionCache cache;
  const std::string update = "SET n = n + :d";
  EXPECT_TRUE(through(cache, {}, {{":d", N("1")}}, update, std::nullopt).ok);
  // The type error must still be raised: a string is not a number to add.
  const Outcome wrong = through(cache, {}, {{":d", S("x")}}, update, std::nullopt);
  EXPECT_EQ(wrong, fresh({}, {{":d", S("x")}}, update, std::nullopt));
  EXPECT_FALSE(wrong.ok);
  EXPECT_EQ(cache.hits(), 0u);
}

TEST(DynamoExpressionCache, UnusedPlaceholdersAreJudgedPerRequest) {
  ExpressionCache cache;
  // The condition shares :v with the update in the first request only.
  const ExpressionAttributeValues values = {{":v", N("1")}};
  EXPECT_EQ(through(cache, {}, values, std::string("SET a = :v"), std::string("b = :v")),
            fresh({}, values, std::string("SET a = :v"), std::string("b = :v")));
  const Outcome alone = through(cache, {}, values, std::nullopt, std::string("b = :v"));
  EXPECT_EQ(alone, fresh({}, values, std::nullopt, std::string("b = :v")));
  EXPECT_EQ(alone.all_used, "");
  const ExpressionAttributeValues extra = {{":v", N("1")}, {":w", N("2")}};
  const Outcome unused = through(cache, {}, extra, std::nullopt, std::string("b = :v"));
  EXPECT_EQ(unused, fresh({}, extra, std::nullopt, std::string("b = :v")));
  EXPECT_NE(unused.all_used, "");
}

TEST(DynamoExpressionCache, ContentCheckedExpressionsAreNeverCached) {
  ExpressionCache cache;
  const std::string between = "a BETWEEN :lo AND :hi";
  EXPECT_TRUE(through(cache, {}, {{":lo", N("1")}, {":hi", N("2")}}, std::nullopt, between).ok);
  const ExpressionAttributeValues reversed = {{":lo", N("2")}, {":hi", N("1")}};
  const Outcome bad = through(cache, {}, reversed, std::nullopt, between);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad, fresh({}, reversed, std::nullopt, between));
  const std::string type_check = "attribute_type(a, :t)";
  EXPECT_TRUE(through(cache, {}, {{":t", S("N")}}, std::nullopt, type_check).ok);
  EXPECT_FALSE(through(cache, {}, {{":t", S("nope")}}, std::nullopt, type_check).ok);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(DynamoExpressionCache, FailedParsesAreNotStoredAndAFullCacheStartsOver) {
  ExpressionCache cache(2);
  EXPECT_FALSE(through(cache, {}, {}, std::nullopt, std::string("a = = b")).ok);
  EXPECT_EQ(cache.size(), 0u);
  for (const char* text : {"a = b", "b = c", "c = d"}) {
    EXPECT_TRUE(through(cache, {}, {}, std::nullopt, std::string(text)).ok);
  }
  EXPECT_EQ(cache.size(), 1u);  // emptied at the third insert
  EXPECT_TRUE(through(cache, {}, {}, std::nullopt, std::string("c = d")).ok);
  EXPECT_EQ(cache.hits(), 1u);
}

// Random requests of a few shapes, each parsed several times through one
// cache. Per case every placeholder keeps one type (so later rounds hit the
// cache) while its content changes; each parse must equal a fresh parse.
RC_GTEST_PROP(DynamoExpressionCache, CachedParsesEqualFreshParses, ()) {
  const std::vector<std::optional<std::string>> updates = {
      std::nullopt, "SET a = :x", "SET a = a + :y", "SET a = if_not_exists(a, :x), b = :y",
      "SET l = list_append(l, :x)", "REMOVE a, b", "ADD s :x", "DELETE s :y", "SET #o = :x REMOVE c",
  };
  const std::vector<std::optional<std::string>> conditions = {
      std::nullopt, "attribute_not_exists(a) OR #o = :x", "a < :x AND b >= :y", "begins_with(a, :x)",
      "a IN (:x, :y)", "NOT (a <> :y)", "size(a) > :y", "contains(s, :x)", "a BETWEEN :x AND :y",
      "attribute_type(a, :x)", "#o = :x",
  };
  // Values grouped by type: a case picks a type per placeholder, a round a value.
  const std::vector<std::vector<AttributeValue>> by_type = {
      {N("1"), N("-2.50"), N("7")},
      {S("N"), S("a"), S(""), S("SS")},
      {AttributeValue::boolean(true), AttributeValue::boolean(false)},
      {AttributeValue::string_set({"p", "q"}), AttributeValue::string_set({"r"})},
      {AttributeValue::number_set({"1"}), AttributeValue::number_set({"2", "3"})},
      {AttributeValue::list({N("1")}), AttributeValue::list({})},
      {AttributeValue::null()},
  };
  ExpressionCache cache;
  const auto update = *rc::gen::elementOf(updates);
  const auto condition = *rc::gen::elementOf(conditions);
  const bool name_given = *rc::gen::arbitrary<bool>();
  const ExpressionAttributeNames names = name_given ? ExpressionAttributeNames{{"#o", "owner"}}
                                                    : ExpressionAttributeNames{};
  const bool has_x = *rc::gen::inRange(0, 8) != 0;
  const bool has_y = *rc::gen::inRange(0, 8) != 0;
  const auto& x_values = by_type[*rc::gen::inRange<std::size_t>(0, by_type.size())];
  const auto& y_values = by_type[*rc::gen::inRange<std::size_t>(0, by_type.size())];
  for (int round = 0; round < 4; ++round) {
    ExpressionAttributeValues values;
    if (has_x) values[":x"] = *rc::gen::elementOf(x_values);
    if (has_y) values[":y"] = *rc::gen::elementOf(y_values);
    RC_ASSERT(through(cache, names, values, update, condition) == fresh(names, values, update, condition));
  }
  RC_CLASSIFY(cache.hits() > 0, "cache hit");
}

// What the store evaluates: a condition bound to the request's values (the
// cached tree holds the first request's) decides every item as a fresh parse
// of the same request does.
RC_GTEST_PROP(DynamoExpressionCache, BoundConditionsDecideAsFreshParses, ()) {
  const std::vector<std::string> conditions = {
      "attribute_not_exists(a) OR #o = :x", "a < :x AND b >= :y", "begins_with(a, :x)", "a IN (:x, :y)",
      "NOT (a <> :y)", "size(a) > :y", "contains(s, :x)", "#o = :x AND (a = :y OR b = :x)",
  };
  const std::vector<AttributeValue> values_pool = {N("1"),  N("-2.50"), N("7"), S("a"), S("ab"),
                                                   S(""),   AttributeValue::string_set({"a", "q"})};
  const std::string condition = *rc::gen::elementOf(conditions);
  const ExpressionAttributeNames names = {{"#o", "owner"}};
  auto item = [&] {
    Item out;
    for (const char* name : {"a", "b", "s", "owner"}) {
      if (*rc::gen::inRange(0, 4) != 0) out[name] = *rc::gen::elementOf(values_pool);
    }
    return out;
  };
  ExpressionCache cache;
  for (int round = 0; round < 4; ++round) {
    const ExpressionAttributeValues values = {{":x", *rc::gen::elementOf(values_pool)},
                                              {":y", *rc::gen::elementOf(values_pool)}};
    ExpressionContext fresh_context(names, values);
    auto fresh_parse = fresh_context.parse_condition(condition);
    auto context = ExpressionContext::borrowing(names, values, &cache);
    auto bound = context.parse_bound_condition(condition);
    RC_ASSERT(fresh_parse.ok() == bound.ok());
    if (!fresh_parse.ok()) continue;
    for (int i = 0; i < 6; ++i) {
      const Item target = item();
      RC_ASSERT(evaluate(bound.value(), target) == evaluate(fresh_parse.value(), target));
    }
  }
  RC_CLASSIFY(cache.hits() > 0, "cache hit");
}

TEST(DynamoExpressionCache, ABoundConditionReadsTheRequestsValuesNotTheCachedOnes) {
  ExpressionCache cache;
  const ExpressionAttributeNames names = {{"#o", "owner"}};
  const ExpressionAttributeValues first = {{":x", S("w1")}};
  const ExpressionAttributeValues second = {{":x", S("w2")}};
  const Item owned_by_w2 = {{"owner", S("w2")}};
  auto context_one = ExpressionContext::borrowing(names, first, &cache);
  ASSERT_TRUE(context_one.parse_bound_condition("#o = :x").ok());
  auto context_two = ExpressionContext::borrowing(names, second, &cache);
  auto bound = context_two.parse_bound_condition("#o = :x");
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_TRUE(evaluate(bound.value(), owned_by_w2));     // :x is w2, this request's
  EXPECT_FALSE(evaluate(*bound.value().tree, owned_by_w2));  // the tree alone still says w1
}

// The same for updates: a plan bound to the request's values (the cached plan
// holds the first request's) makes every item what a fresh parse makes it, or
// fails with the same error.
RC_GTEST_PROP(DynamoExpressionCache, BoundUpdatePlansApplyAsFreshParses, ()) {
  const std::vector<std::string> updates = {
      "SET a = :x", "SET a = a + :y, b = :x", "SET #o = if_not_exists(#o, :x) REMOVE b", "ADD s :x SET a = :y",
      "SET b = :y - a", "DELETE s :x", "SET a = :x, b = :x REMOVE s",
  };
  const std::vector<AttributeValue> values_pool = {N("1"), N("-2.50"), N("7"), S("a"), S("ab"),
                                                   AttributeValue::string_set({"a", "q"})};
  const std::string update = *rc::gen::elementOf(updates);
  const ExpressionAttributeNames names = update.find("#o") != std::string::npos
                                             ? ExpressionAttributeNames{{"#o", "owner"}}
                                             : ExpressionAttributeNames{};
  const KeySchema key_schema = {{"pk", KeyType::hash}};
  auto item = [&] {
    Item out{{"pk", S("k")}};
    for (const char* name : {"a", "b", "s", "owner"}) {
      if (*rc::gen::inRange(0, 4) != 0) out[name] = *rc::gen::elementOf(values_pool);
    }
    return out;
  };
  ExpressionCache cache;
  for (int round = 0; round < 4; ++round) {
    ExpressionAttributeValues values = {{":x", *rc::gen::elementOf(values_pool)}};
    if (update.find(":y") != std::string::npos) values[":y"] = *rc::gen::elementOf(values_pool);
    ExpressionContext fresh_context(names, values);
    auto fresh_parse = fresh_context.parse_update(update);
    auto context = ExpressionContext::borrowing(names, values, &cache);
    auto bound = context.parse_bound_update(update);
    RC_ASSERT(fresh_parse.ok() == bound.ok());
    if (!fresh_parse.ok()) continue;
    for (int i = 0; i < 6; ++i) {
      const Item target = item();
      auto from_fresh = applied(fresh_parse.value(), key_schema, target);
      auto from_bound = applied(bound.value(), key_schema, target);
      RC_ASSERT(from_fresh.ok() == from_bound.ok());
      if (from_fresh.ok()) {
        RC_ASSERT(from_fresh.value() == from_bound.value());
      } else {
        RC_ASSERT(from_fresh.error().message == from_bound.error().message);
      }
    }
  }
  RC_CLASSIFY(cache.hits() > 0, "cache hit");
}

TEST(DynamoExpressionCache, ABoundUpdatePlanReadsTheRequestsValuesNotTheCachedOnes) {
  ExpressionCache cache;
  const ExpressionAttributeValues first = {{":x", N("1")}};
  const ExpressionAttributeValues second = {{":x", N("2")}};
  const KeySchema key_schema = {{"pk", KeyType::hash}};
  const Item item = {{"pk", S("k")}, {"a", N("10")}};
  const ExpressionAttributeNames no_names;  // borrowed: must outlive the contexts
  auto context_one = ExpressionContext::borrowing(no_names, first, &cache);
  ASSERT_TRUE(context_one.parse_bound_update("SET a = a + :x").ok());
  auto context_two = ExpressionContext::borrowing(no_names, second, &cache);
  auto bound = context_two.parse_bound_update("SET a = a + :x");
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ(cache.hits(), 1u);
  auto next = applied(bound.value(), key_schema, item);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next.value().at("a"), N("12"));  // :x is 2, this request's
  auto unbound = applied(*bound.value().plan, key_schema, item);
  ASSERT_TRUE(unbound.ok());
  EXPECT_EQ(unbound.value().at("a"), N("11"));  // the plan alone still says 1
}

// prepare_write answers a request from one lookup when its whole shape (both
// texts, the names, the value placeholders and types) was seen before: the
// answer, error or not, must be the one parsing it afresh gives, including
// for shapes whose checks read a value's content (BETWEEN's bounds).
RC_GTEST_PROP(DynamoPrepareWrite, AnswersAsAFreshParseDoes, ()) {
  const std::vector<std::optional<std::string>> updates = {
      std::nullopt, "SET a = :x", "SET a = a + :y", "SET #o = :x", "REMOVE b", "SET a = :z", "SET a = :x,"};
  const std::vector<std::optional<std::string>> conditions = {
      std::nullopt, "attribute_not_exists(a) OR #o = :x", "a BETWEEN :x AND :y", "b < :y", "#o = :x AND a = :y",
      "a = :x AND"};
  const std::vector<ExpressionAttributeNames> names_pool = {
      {}, {{"#o", "owner"}}, {{"#o", "owner"}, {"#p", "pk"}}, {{"o", "owner"}}};
  const std::vector<AttributeValue> values_pool = {N("1"), N("7"), S("a"), S("b"), AttributeValue::string_set({"q"})};
  const KeySchema key_schema = {{"pk", KeyType::hash}};
  ExpressionCache cache;
  for (int round = 0; round < 12; ++round) {
    const auto update = *rc::gen::elementOf(updates);
    const auto condition = *rc::gen::elementOf(conditions);
    const ExpressionAttributeNames names = *rc::gen::elementOf(names_pool);
    ExpressionAttributeValues values;
    for (const char* key : {":x", ":y", ":z", "w"}) {
      if (*rc::gen::inRange(0, 3) != 0 && (key[0] == ':' || *rc::gen::inRange(0, 8) == 0)) {
        values[key] = *rc::gen::elementOf(values_pool);
      }
    }
    const auto cached = prepare_write(update, condition, names, values, &cache);
    const auto fresh = prepare_write(update, condition, names, values, nullptr);
    RC_ASSERT(cached.ok() == fresh.ok());
    if (!fresh.ok()) {
      RC_ASSERT(cached.error().message == fresh.error().message);
      continue;
    }
    RC_ASSERT(cached.value().update.has_value() == update.has_value());
    RC_ASSERT(cached.value().condition.has_value() == condition.has_value());
    for (int i = 0; i < 4; ++i) {
      Item item{{"pk", S("k")}};
      for (const char* name : {"a", "b", "owner"}) {
        if (*rc::gen::inRange(0, 3) != 0) item[name] = *rc::gen::elementOf(values_pool);
      }
      if (condition) RC_ASSERT(evaluate(*cached.value().condition, item) == evaluate(*fresh.value().condition, item));
      if (update) {
        const auto a = applied(*cached.value().update, key_schema, item);
        const auto b = applied(*fresh.value().update, key_schema, item);
        RC_ASSERT(a.ok() == b.ok());
        if (a.ok()) RC_ASSERT(a.value() == b.value());
      }
    }
  }
  RC_CLASSIFY(cache.write_hits() > 0, "shape hit");
}

TEST(DynamoPrepareWrite, ASeenShapeIsOneLookupAndAValueDependentShapeIsNeverKept) {
  ExpressionCache cache;
  const ExpressionAttributeNames names = {{"#o", "owner"}};
  const std::optional<std::string> update = "SET a = :x";
  const std::optional<std::string> condition = "#o = :me";
  const ExpressionAttributeValues first = {{":x", N("1")}, {":me", S("w1")}};
  const ExpressionAttributeValues second = {{":x", N("2")}, {":me", S("w2")}};
  ASSERT_TRUE(prepare_write(update, condition, names, first, &cache).ok());
  EXPECT_EQ(cache.write_misses(), 1u);
  const auto again = prepare_write(update, condition, names, second, &cache);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cache.write_hits(), 1u);
  EXPECT_TRUE(evaluate(*again.value().condition, Item{{"owner", S("w2")}}));  // bound to this request's values
  // Another value type is another shape; an unused value is an error, never kept.
  EXPECT_TRUE(prepare_write(update, condition, names, {{":x", S("s")}, {":me", S("w1")}}, &cache).ok());
  EXPECT_EQ(cache.write_misses(), 2u);
  const ExpressionAttributeValues extra = {{":x", N("1")}, {":me", S("w1")}, {":unused", N("0")}};
  for (int i = 0; i < 2; ++i) {
    const auto unused = prepare_write(update, condition, names, extra, &cache);
    ASSERT_FALSE(unused.ok());
    EXPECT_EQ(unused.error().message, "Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}");
  }
  EXPECT_EQ(cache.write_misses(), 4u);
  // BETWEEN's bounds are checked against their values: parsed every time.
  const std::optional<std::string> between = "a BETWEEN :lo AND :hi";
  ASSERT_TRUE(prepare_write(std::nullopt, between, {}, {{":lo", N("1")}, {":hi", N("2")}}, &cache).ok());
  const auto reversed = prepare_write(std::nullopt, between, {}, {{":lo", N("2")}, {":hi", N("1")}}, &cache);
  ASSERT_FALSE(reversed.ok());
  EXPECT_EQ(cache.write_hits(), 1u);
}

}  // namespace
}  // namespace leaseproof::dynamo
