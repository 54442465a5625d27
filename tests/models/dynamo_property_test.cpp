#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/dynamo/codec.hpp"
#include "core/dynamo/decimal.hpp"
#include "models/dynamo/expression.hpp"

namespace leaseproof::dynamo {
namespace {

// Values every random condition may refer to. Numbers are listed in ascending
// order so that BETWEEN bounds picked as (i <= j) are valid.
const std::vector<std::string> ordered_numbers = {":n0", ":n1", ":n10"};
const ExpressionAttributeValues values = {
    {":n0", AttributeValue::number("0")}, {":n1", AttributeValue::number("1")},
    {":n10", AttributeValue::number("10.0")}, {":sa", AttributeValue::string("a")},
    {":sab", AttributeValue::string("ab")}, {":t", AttributeValue::string("N")},
    {":yes", AttributeValue::boolean(true)},
};
const std::vector<std::string> any_values = {":n0", ":n1", ":n10", ":sa", ":sab", ":t", ":yes"};
const std::vector<std::string> string_values = {":sa", ":sab"};

template <typename T>
const T& pick(const std::vector<T>& choices) {
  return choices[*rc::gen::inRange<std::size_t>(0, choices.size())];
}

DocumentPath random_path() {
  switch (*rc::gen::inRange(0, 5)) {
    case 0: return {PathElement{"a", false, 0}};
    case 1: return {PathElement{"b", false, 0}};
    case 2: return {PathElement{"c", false, 0}};
    case 3: return {PathElement{"m", false, 0}, PathElement{"x", false, 0}};
    default: return {PathElement{"l", false, 0}, PathElement{"", true, 0}};
  }
}

Operand path_operand() {
  Operand operand;
  operand.kind = Operand::Kind::path;
  operand.path = random_path();
  return operand;
}

Operand value_operand(const std::string& placeholder) {
  Operand operand;
  operand.kind = Operand::Kind::value;
  operand.placeholder = placeholder;
  operand.value = values.at(placeholder);
  return operand;
}

Operand random_operand() {
  switch (*rc::gen::inRange(0, 3)) {
    case 0: return path_operand();
    case 1: return value_operand(pick(any_values));
    default: {
      Operand operand = path_operand();
      operand.kind = Operand::Kind::size;
      return operand;
    }
  }
}

Condition random_leaf() {
  Condition condition;
  const int shape = *rc::gen::inRange(0, 8);
  if (shape <= 1) {
    condition.kind = ConditionKind::comparison;
    condition.comparator = static_cast<Comparator>(*rc::gen::inRange(0, 6));
    condition.operands = {random_operand(), random_operand()};
  } else if (shape == 2) {
    condition.kind = ConditionKind::between;
    const auto lower = *rc::gen::inRange<std::size_t>(0, ordered_numbers.size());
    const auto upper = *rc::gen::inRange<std::size_t>(lower, ordered_numbers.size());
    condition.operands = {random_operand(), value_operand(ordered_numbers[lower]),
                          value_operand(ordered_numbers[upper])};
  } else if (shape == 3) {
    condition.kind = ConditionKind::in;
    condition.operands = {random_operand()};
    const int count = *rc::gen::inRange(1, 4);
    for (int i = 0; i < count; ++i) condition.operands.push_back(random_operand());
  } else if (shape == 4) {
    condition.kind = *rc::gen::element(ConditionKind::attribute_exists, ConditionKind::attribute_not_exists);
    condition.operands = {path_operand()};
  } else if (shape == 5) {
    condition.kind = ConditionKind::attribute_type;
    condition.operands = {path_operand(), value_operand(":t")};
  } else if (shape == 6) {
    condition.kind = ConditionKind::begins_with;
    condition.operands = {path_operand(), value_operand(pick(string_values))};
  } else {
    condition.kind = ConditionKind::contains;
    condition.operands = {path_operand(), random_operand()};
  }
  return condition;
}

Condition random_condition(int depth) {
  if (depth == 0 || *rc::gen::inRange(0, 3) == 0) return random_leaf();
  Condition condition;
  condition.kind = *rc::gen::element(ConditionKind::logical_and, ConditionKind::logical_or,
                                     ConditionKind::logical_not);
  condition.children.push_back(random_condition(depth - 1));
  if (condition.kind != ConditionKind::logical_not) condition.children.push_back(random_condition(depth - 1));
  return condition;
}

AttributeValue random_scalar() {
  switch (*rc::gen::inRange(0, 4)) {
    case 0: return AttributeValue::number(std::to_string(*rc::gen::inRange(-2, 12)));
    case 1: return AttributeValue::string(*rc::gen::element<std::string>("", "a", "ab", "b", "N"));
    case 2: return AttributeValue::boolean(*rc::gen::arbitrary<bool>());
    default: return AttributeValue::null();
  }
}

Item random_item() {
  Item item;
  for (const char* name : {"a", "b", "c"}) {
    if (*rc::gen::arbitrary<bool>()) item[name] = random_scalar();
  }
  if (*rc::gen::arbitrary<bool>()) item["m"] = AttributeValue::map({{"x", random_scalar()}});
  if (*rc::gen::arbitrary<bool>()) item["l"] = AttributeValue::list({random_scalar(), random_scalar()});
  if (*rc::gen::arbitrary<bool>()) item["s"] = AttributeValue::string_set({"a", "ab"});
  return item;
}

RC_GTEST_PROP(DynamoProperty, PrintedConditionParsesBackToTheSameTree, ()) {
  const Condition condition = random_condition(4);
  const std::string text = to_string(condition);
  auto parsed = parse_condition(text, {}, values);
  RC_ASSERT(parsed.ok());
  RC_ASSERT(*parsed == condition);
}

RC_GTEST_PROP(DynamoProperty, DoubleNegationAndDeMorganHold, ()) {
  const Condition left = random_condition(2);
  const Condition right = random_condition(2);
  const Item item = random_item();
  Condition not_left{ConditionKind::logical_not, Comparator::eq, {}, {left}};
  Condition not_not_left{ConditionKind::logical_not, Comparator::eq, {}, {not_left}};
  RC_ASSERT(evaluate(not_not_left, item) == evaluate(left, item));

  Condition both{ConditionKind::logical_and, Comparator::eq, {}, {left, right}};
  Condition not_right{ConditionKind::logical_not, Comparator::eq, {}, {right}};
  Condition not_both{ConditionKind::logical_not, Comparator::eq, {}, {both}};
  Condition either_not{ConditionKind::logical_or, Comparator::eq, {}, {not_left, not_right}};
  RC_ASSERT(evaluate(not_both, item) == evaluate(either_not, item));
  RC_TAG(evaluate(left, item));  // shows that both outcomes occur
}

RC_GTEST_PROP(DynamoProperty, NotEqualIsTheNegationOfEqual, ()) {
  const Operand a = random_operand();
  const Operand b = random_operand();
  const Item item = random_item();
  const Condition equal{ConditionKind::comparison, Comparator::eq, {a, b}, {}};
  const Condition not_equal{ConditionKind::comparison, Comparator::ne, {a, b}, {}};
  RC_ASSERT(evaluate(not_equal, item) == !evaluate(equal, item));
}

Decimal scaled(int64_t mantissa, int scale) {
  std::string text = std::to_string(mantissa) + "e" + std::to_string(-scale);
  auto parsed = Decimal::parse(text);
  RC_ASSERT(parsed.ok());
  return *parsed;
}

// Number texts as requests send them: signs, leading zeros, "-0", 17 to 20
// digits around the int64 fast path's limit, fractions and exponents.
rc::Gen<std::string> gen_number_text() {
  return rc::gen::apply(
      [](bool minus, bool plus, std::string zeros, std::string digits, int shape) {
        std::string text = minus ? "-" : plus ? "+" : "";
        text += zeros + digits;
        if (shape == 1) text += ".5";
        if (shape == 2) text += "e2";
        if (shape == 3) text += ".0";
        return text;
      },
      rc::gen::weightedElement<bool>({{3, false}, {1, true}}), rc::gen::weightedElement<bool>({{9, false}, {1, true}}),
      rc::gen::weightedElement<std::string>({{6, ""}, {1, "0"}, {1, "00"}}),
      rc::gen::oneOf(rc::gen::element<std::string>("0", "1", "9", "10", "999999999999999999", "1000000000000000000",
                                                   "123456789012345678", "12345678901234567890"),
                     rc::gen::map(rc::gen::inRange<int64_t>(0, 1'000'000'000'000'000'000),
                                  [](int64_t v) { return std::to_string(v); })),
      rc::gen::weightedElement<int>({{6, 0}, {1, 1}, {1, 2}, {1, 3}}));
}

// The int64 fast paths (equality, and + and - in updates) answer exactly as
// decimal arithmetic does, on every text, canonical or not.
RC_GTEST_PROP(DynamoProperty, SmallIntegerFastPathsAgreeWithDecimals, ()) {
  const std::string a = *gen_number_text();
  const std::string b = *gen_number_text();
  const auto da = Decimal::parse(a);
  const auto db = Decimal::parse(b);
  RC_PRE(da.ok() && db.ok());
  if (const auto small = Decimal::small_integer(a)) {
    RC_ASSERT(da.value() == Decimal::from_int(*small));
    RC_ASSERT(da.value().to_string() == a);  // only canonical text takes the fast path
  }
  RC_ASSERT(values_equal(AttributeValue::number(a), AttributeValue::number(b)) == (da.value() == db.value()));
  const KeySchema key_schema = {{"pk", KeyType::hash}};
  for (const bool plus : {true, false}) {
    const std::string text = plus ? "SET x = x + :v" : "SET x = x - :v";
    const auto plan = parse_update(text, {}, {{":v", AttributeValue::number(b)}});
    RC_ASSERT(plan.ok());
    const auto next = applied(plan.value(), key_schema, Item{{"pk", AttributeValue::string("k")}, {"x", AttributeValue::number(a)}});
    const auto expected = plus ? da.value().add(db.value()) : da.value().subtract(db.value());
    RC_ASSERT(next.ok() == expected.ok());
    if (next.ok()) RC_ASSERT(next.value().at("x") == AttributeValue::number(expected.value().to_string()));
  }
  RC_CLASSIFY(Decimal::small_integer(a) && Decimal::small_integer(b), "both small integers");
}

RC_GTEST_PROP(DynamoProperty, DecimalArithmeticIsExactAndOrdered, (int64_t x, int64_t y)) {
  const int scale = *rc::gen::inRange(0, 20);
  const Decimal a = scaled(x, scale);
  const Decimal b = scaled(y, scale);
  auto sum = a.add(b);
  RC_ASSERT(sum.ok());
  auto back = sum->subtract(b);
  RC_ASSERT(back.ok());
  RC_ASSERT(*back == a);
  RC_ASSERT((a <=> b) == (x <=> y));  // same scale: order of the mantissas
  auto reparsed = Decimal::parse(a.to_string());
  RC_ASSERT(reparsed.ok());
  RC_ASSERT(*reparsed == a);
}

RC_GTEST_PROP(DynamoProperty, ItemsSurviveTheCodec, ()) {
  const Item item = random_item();
  auto back = decode<Item>(encode(item));
  RC_ASSERT(back.ok());
  RC_ASSERT(*back == item);
  auto reparsed = parse_json(encode(item).dump());
  RC_ASSERT(reparsed.ok());
  RC_ASSERT(*reparsed == encode(item));
}

// compare_values orders canonical integers without parsing them; the order
// must be the numeric one, also against non-integers that take the slow path.
RC_GTEST_PROP(DynamoNumberOrder, IntegerFastPathAgreesWithNumericOrder, (int64_t a, int64_t b)) {
  const auto order = compare_values(AttributeValue::number(a), AttributeValue::number(b));
  RC_ASSERT(order.has_value());
  RC_ASSERT(*order == (a <=> b));
  const std::string fraction = std::to_string(b) + ".5";  // b + 0.5 (b - 0.5 when negative)
  const auto mixed = compare_values(AttributeValue::number(a), AttributeValue::number(fraction));
  const auto expected = *Decimal::parse(std::to_string(a)) <=> *Decimal::parse(fraction);
  RC_ASSERT(mixed.has_value());
  RC_ASSERT(*mixed == expected);
}

// Canonical integers skip the decimal round trip when numbers are
// canonicalised; what they skip must have given the same text.
RC_GTEST_PROP(DynamoNumberOrder, CanonicalIntegersAreLeftAsTheDecimalWouldPrintThem, (int64_t value, uint8_t zeros)) {
  const std::string text = std::to_string(value) + std::string(zeros % 20, '0');  // up to 38 digits
  const AttributeValue canonical = with_canonical_numbers(AttributeValue::number(text));
  RC_ASSERT(canonical.text() == Decimal::parse(text)->to_string());
  const std::string padded = "00" + std::to_string(value < 0 ? -(value / 10) : value) + ".0";  // not canonical
  RC_ASSERT(with_canonical_numbers(AttributeValue::number(padded)).text() == Decimal::parse(padded)->to_string());
}

}  // namespace
}  // namespace leaseproof::dynamo
