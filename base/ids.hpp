#pragma once
// Small strong ids. A NodeId names a simulated (or real) node; an
// Incarnation counts restarts of the process on that node.

#include <compare>
#include <cstdint>

#include <fmt/format.h>

namespace leaseproof {

struct NodeId {
  uint32_t value = UINT32_MAX;
  constexpr bool valid() const { return value != UINT32_MAX; }
  constexpr auto operator<=>(const NodeId&) const = default;
};

inline constexpr NodeId kNoNode{};

struct Incarnation {
  uint64_t value = 0;
  constexpr auto operator<=>(const Incarnation&) const = default;
};

}  // namespace leaseproof

template <>
struct fmt::formatter<leaseproof::NodeId> : fmt::formatter<uint32_t> {
  auto format(leaseproof::NodeId id, fmt::format_context& ctx) const {
    return fmt::formatter<uint32_t>::format(id.value, ctx);
  }
};
template <>
struct fmt::formatter<leaseproof::Incarnation> : fmt::formatter<uint64_t> {
  auto format(leaseproof::Incarnation id, fmt::format_context& ctx) const {
    return fmt::formatter<uint64_t>::format(id.value, ctx);
  }
};
