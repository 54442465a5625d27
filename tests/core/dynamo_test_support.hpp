#pragma once
// Short constructors for test items.

#include <string>

#include "core/dynamo/attribute_value.hpp"

namespace leaseproof::dynamo::test {

inline AttributeValue S(std::string text) { return AttributeValue::string(std::move(text)); }
inline AttributeValue N(std::string text) { return AttributeValue::number(std::move(text)); }

}  // namespace leaseproof::dynamo::test
