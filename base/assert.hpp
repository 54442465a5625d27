#pragma once
// Assertions that stay on in every build type (TIGER_STYLE: assertions are the
// method). Comparison forms print both operands, like FoundationDB's ASSERT_EQ.
//
//   LP_ASSERT(queue_bytes <= queue_bytes_max);
//   LP_ASSERT_LE(queue_bytes, queue_bytes_max);   // prints both values
//
// A failed assertion is a bug in leaseproof, never an expected outcome: expected
// failures (a conditional-check failure, a lost reply) are values, not asserts.

#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

namespace leaseproof::detail {

[[noreturn]] void assertion_failed(std::string_view file, int line, std::string_view expression,
                                   std::string_view operands);

template <typename T>
std::string describe_operand(const T& value) {
  if constexpr (fmt::is_formattable<T>::value) {
    return fmt::format("{}", value);
  } else if constexpr (std::is_enum_v<T>) {
    return fmt::format("{}", static_cast<std::underlying_type_t<T>>(value));
  } else {
    return "<not printable>";
  }
}

template <typename A, typename B>
[[noreturn]] void comparison_failed(std::string_view file, int line, std::string_view expression,
                                    const A& left, const B& right) {
  assertion_failed(file, line, expression,
                   fmt::format("left = {}, right = {}", describe_operand(left), describe_operand(right)));
}

}  // namespace leaseproof::detail

#define LP_ASSERT(condition)                                                      \
  do {                                                                            \
    if (!(condition)) [[unlikely]] {                                              \
      ::leaseproof::detail::assertion_failed(__FILE__, __LINE__, #condition, ""); \
    }                                                                             \
  } while (false)

#define LP_ASSERT_MSG(condition, ...)                                           \
  do {                                                                          \
    if (!(condition)) [[unlikely]] {                                            \
      ::leaseproof::detail::assertion_failed(__FILE__, __LINE__, #condition,    \
                                             ::fmt::format(__VA_ARGS__));       \
    }                                                                           \
  } while (false)

#define LP_ASSERT_CMP_(left, op, right)                                                    \
  do {                                                                                     \
    const auto& lp_left_ = (left);                                                         \
    const auto& lp_right_ = (right);                                                       \
    if (!(lp_left_ op lp_right_)) [[unlikely]] {                                           \
      ::leaseproof::detail::comparison_failed(__FILE__, __LINE__, #left " " #op " " #right, \
                                              lp_left_, lp_right_);                        \
    }                                                                                      \
  } while (false)

#define LP_ASSERT_EQ(left, right) LP_ASSERT_CMP_(left, ==, right)
#define LP_ASSERT_NE(left, right) LP_ASSERT_CMP_(left, !=, right)
#define LP_ASSERT_LT(left, right) LP_ASSERT_CMP_(left, <, right)
#define LP_ASSERT_LE(left, right) LP_ASSERT_CMP_(left, <=, right)
#define LP_ASSERT_GT(left, right) LP_ASSERT_CMP_(left, >, right)
#define LP_ASSERT_GE(left, right) LP_ASSERT_CMP_(left, >=, right)

#define LP_UNREACHABLE(...) \
  ::leaseproof::detail::assertion_failed(__FILE__, __LINE__, "unreachable", ::fmt::format(__VA_ARGS__))
