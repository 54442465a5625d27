// Application of update plans. Every operand reads the item as it was before
// the update (DynamoDB evaluates all right-hand sides first), and the item is
// replaced only when every action succeeded, so a failed update changes
// nothing.

#include <algorithm>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/dynamo/decimal.hpp"
#include "models/dynamo/expression.hpp"

#include "models/dynamo/expression_parser.hpp"

namespace leaseproof::dynamo {

namespace {

DynamoError incorrect_type() {
  return validation_error("An operand in the update expression has an incorrect data type");
}

DynamoError missing_operand() {
  return validation_error("The provided expression refers to an attribute that does not exist in the item");
}

DynamoError invalid_path() {
  return validation_error("The document path provided in the update expression is invalid for update");
}

Result<AttributeValue> arithmetic(const AttributeValue& left, const AttributeValue& right, bool plus) {
  if (!left.is(AttributeType::n) || !right.is(AttributeType::n)) return incorrect_type();
  // Counters and timestamps: integers whose sum fits int64, canonical as printed.
  const auto small_left = Decimal::small_integer(left.text());
  const auto small_right = small_left ? Decimal::small_integer(right.text()) : std::nullopt;
  if (small_left && small_right) return AttributeValue::number(plus ? *small_left + *small_right : *small_left - *small_right);
  auto a = Decimal::parse(left.text());
  if (!a) return std::move(a).error();
  auto b = Decimal::parse(right.text());
  if (!b) return std::move(b).error();
  auto result = plus ? a->add(*b) : a->subtract(*b);
  if (!result) return std::move(result).error();
  return AttributeValue::number(result->to_string());
}

Result<AttributeValue> evaluate_value(const UpdateValue& value, const Item& old_item,
                                      const ExpressionAttributeValues* values) {
  switch (value.kind) {
    case UpdateValue::Kind::value: return operand_value(value, values);
    case UpdateValue::Kind::path: {
      const AttributeValue* found = resolve(old_item, value.path);
      if (found == nullptr) return missing_operand();
      return *found;
    }
    case UpdateValue::Kind::if_not_exists: {
      const AttributeValue* found = resolve(old_item, value.arguments[0].path);
      if (found != nullptr) return *found;
      return evaluate_value(value.arguments[1], old_item, values);
    }
    default: break;
  }
  auto left = evaluate_value(value.arguments[0], old_item, values);
  if (!left) return left;
  auto right = evaluate_value(value.arguments[1], old_item, values);
  if (!right) return right;
  if (value.kind == UpdateValue::Kind::list_append) {
    if (!left->is(AttributeType::l) || !right->is(AttributeType::l)) return incorrect_type();
    AttributeList joined = left->as_list();
    joined.insert(joined.end(), right->as_list().begin(), right->as_list().end());
    return AttributeValue::list(std::move(joined));
  }
  return arithmetic(*left, *right, value.kind == UpdateValue::Kind::plus);
}

// The container holding the path's last element; nullptr when a step is
// missing or has the wrong type.
AttributeValue* parent_of(Item& item, const DocumentPath& path) {
  LP_ASSERT_GE(path.size(), std::size_t{2});
  const auto top = item.find(path[0].name);
  if (top == item.end()) return nullptr;
  AttributeValue* at = &top->second;
  for (std::size_t i = 1; i + 1 < path.size() && at != nullptr; ++i) at = expression_detail::descend(at, path[i]);
  return at;
}

// `size`: the item's size, followed through top-level writes (the member's
// old size out, its new size in); reset by a nested write, whose effect on
// the enclosing member is not followed.
using FollowedSize = std::optional<std::size_t>;

Result<void> set_path(Item& item, const DocumentPath& path, AttributeValue value, FollowedSize& size) {
  if (path.size() == 1) {
    const std::string& name = path[0].name;
    // Mostly an attribute the item has: found by a scan, inserted in order
    // only when new.
    auto at = item.find(name);
    if (at == item.end()) {
      at = item.try_emplace(name).first;
    } else if (size) {
      *size -= name.size() + attribute_size_bytes(at->second);
    }
    at->second = std::move(value);
    if (size) *size += name.size() + attribute_size_bytes(at->second);
    return {};
  }
  size.reset();
  AttributeValue* parent = parent_of(item, path);
  const PathElement& last = path.back();
  if (parent == nullptr) return invalid_path();
  if (last.is_index) {
    if (!parent->is(AttributeType::l)) return invalid_path();
    auto& list = parent->as_list();
    // An index past the end appends, as DynamoDB does.
    if (last.index < list.size()) {
      list[last.index] = std::move(value);
    } else {
      list.push_back(std::move(value));
    }
    return {};
  }
  if (!parent->is(AttributeType::m)) return invalid_path();
  parent->as_map()[last.name] = std::move(value);
  return {};
}

Result<void> remove_path(Item& item, const DocumentPath& path, FollowedSize& size) {
  if (path.size() == 1) {
    const std::string& name = path[0].name;
    if (size) {
      const Item& members = item;
      if (const auto found = members.find(name); found != members.end()) {
        *size -= name.size() + attribute_size_bytes(found->second);
      }
    }
    item.erase(name);
    return {};
  }
  size.reset();
  AttributeValue* parent = parent_of(item, path);
  if (parent == nullptr) return invalid_path();
  const PathElement& last = path.back();
  if (last.is_index) {
    if (!parent->is(AttributeType::l)) return invalid_path();
    auto& list = parent->as_list();
    if (last.index < list.size()) list.erase(list.begin() + static_cast<std::ptrdiff_t>(last.index));
    return {};
  }
  if (!parent->is(AttributeType::m)) return invalid_path();
  parent->as_map().erase(last.name);
  return {};
}

std::string canonical_member(const AttributeValue& set, const std::string& member) {
  if (!set.is(AttributeType::ns)) return member;
  auto number = Decimal::parse(member);
  return number ? number->to_string() : member;
}

bool set_has(const AttributeValue& set, const std::string& member) {
  const std::string wanted = canonical_member(set, member);
  return std::any_of(set.as_set().begin(), set.as_set().end(),
                     [&](const std::string& present) { return canonical_member(set, present) == wanted; });
}

Result<std::optional<AttributeValue>> add_or_delete(const AttributeValue* current, const AttributeValue& operand,
                                                    bool add) {
  if (add && operand.is(AttributeType::n)) {
    if (current == nullptr) return std::optional<AttributeValue>{operand};
    auto sum = arithmetic(*current, operand, true);
    if (!sum) return std::move(sum).error();
    return std::optional<AttributeValue>{std::move(sum).value()};
  }
  if (!operand.is_set()) return incorrect_type();
  if (current == nullptr) return add ? std::optional<AttributeValue>{operand} : std::nullopt;
  if (current->type() != operand.type()) return incorrect_type();
  AttributeValue result = *current;
  auto& members = result.as_set();
  for (const auto& member : operand.as_set()) {
    if (add && !set_has(result, member)) members.push_back(member);
    if (!add) {
      const std::string wanted = canonical_member(result, member);
      std::erase_if(members, [&](const std::string& present) { return canonical_member(result, present) == wanted; });
    }
  }
  if (members.empty()) return std::optional<AttributeValue>{};  // an empty set removes the attribute
  return std::optional<AttributeValue>{std::move(result)};
}

Result<void> apply_action(const UpdateAction& action, const Item& old_item, Item& item,
                          const ExpressionAttributeValues* values, FollowedSize& size) {
  switch (action.kind) {
    case UpdateAction::Kind::set: {
      auto value = evaluate_value(action.value, old_item, values);
      if (!value) return std::move(value).error();
      return set_path(item, action.path, std::move(value).value(), size);
    }
    case UpdateAction::Kind::remove: return remove_path(item, action.path, size);
    case UpdateAction::Kind::add:
    case UpdateAction::Kind::delete_elements: {
      auto next = add_or_delete(resolve(item, action.path), operand_value(action.value, values),
                                action.kind == UpdateAction::Kind::add);
      if (!next) return std::move(next).error();
      if (next->has_value()) return set_path(item, action.path, std::move(**next), size);
      if (resolve(item, action.path) == nullptr) return {};
      return remove_path(item, action.path, size);
    }
  }
  LP_UNREACHABLE("update action kind {}", static_cast<int>(action.kind));
}

bool path_less(const DocumentPath& a, const DocumentPath& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](const PathElement& x, const PathElement& y) {
                                        return std::tie(x.is_index, x.index, x.name) <
                                               std::tie(y.is_index, y.index, y.name);
                                      });
}

}  // namespace

Result<void> check_key_attributes(const UpdatePlan& plan, const KeySchema& key_schema) {
  for (const auto& action : plan.actions) {
    for (const auto& key : key_schema) {
      if (action.path[0].name == key.attribute_name) {
        return validation_error(fmt::format(
            "One or more parameter values were invalid: Cannot update attribute {}. This attribute is part of the key",
            key.attribute_name));
      }
    }
  }
  return {};
}

namespace {

Result<Item> applied_with(const UpdatePlan& plan, const ExpressionAttributeValues* values, const KeySchema& key_schema,
                          const Item& item) {
  if (auto keys = check_key_attributes(plan, key_schema); !keys) return std::move(keys).error();
  Item next = item;
  // The new size follows the writes from the old one (kept in stored
  // versions), rather than a sum over every member afterwards.
  FollowedSize size = item_size_bytes(item);
  // List indices in REMOVE refer to the list before the update, so removals
  // run last and from the highest index down (paths never overlap, so this
  // cannot change what the other actions see).
  std::vector<const UpdateAction*> removals;
  for (const auto& action : plan.actions) {
    if (action.kind == UpdateAction::Kind::remove) {
      removals.push_back(&action);
      continue;
    }
    if (auto done = apply_action(action, item, next, values, size); !done) return std::move(done).error();
  }
  std::sort(removals.begin(), removals.end(), [](const UpdateAction* a, const UpdateAction* b) {
    return path_less(b->path, a->path);
  });
  for (const UpdateAction* action : removals) {
    if (auto done = apply_action(*action, item, next, values, size); !done) return std::move(done).error();
  }
  if (size) next.keep_size(*size);
  if (item_size_bytes(next) > item_size_bytes_max) {
    return validation_error("Item size to update has exceeded the maximum allowed size");
  }
  return next;
}

}  // namespace

const AttributeValue& operand_value(const UpdateValue& value, const ExpressionAttributeValues* values) {
  if (values == nullptr || value.placeholder.empty()) return value.value;
  return values->at(value.placeholder);
}

Result<Item> applied(const UpdatePlan& plan, const KeySchema& key_schema, const Item& item) {
  return applied_with(plan, nullptr, key_schema, item);
}

Result<Item> applied(const BoundUpdatePlan& plan, const KeySchema& key_schema, const Item& item) {
  return applied_with(*plan.plan, plan.values, key_schema, item);
}

Result<void> apply(const UpdatePlan& plan, const KeySchema& key_schema, Item& item) {
  auto next = applied(plan, key_schema, item);
  if (!next) return std::move(next).error();
  item = std::move(next).value();
  return {};
}

Item updated_attributes(const UpdatePlan& plan, const Item& item) {
  ProjectionPlan touched;
  for (const auto& action : plan.actions) touched.paths.push_back(action.path);
  return project(touched, item);
}

}  // namespace leaseproof::dynamo
