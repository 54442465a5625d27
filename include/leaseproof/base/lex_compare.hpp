#pragma once
// Byte-wise lexicographic comparison of strings, in exactly the order of
// std::string's operator< (unsigned bytes, then the shorter first), without a
// call into libc's memcmp. The keys that the simulation's maps compare millions
// of times a run (connection ids, attribute names, key values) are a few bytes
// long, and for those the call costs more than the comparison.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace leaseproof {

// Negative, zero or positive, as a.compare(b).
inline int lex_compare(std::string_view a, std::string_view b) noexcept {
  const std::size_t common = a.size() < b.size() ? a.size() : b.size();
  std::size_t at = 0;
  for (; at + 8 <= common; at += 8) {
    uint64_t x;
    uint64_t y;
    std::memcpy(&x, a.data() + at, 8);
    std::memcpy(&y, b.data() + at, 8);
    if (x != y) {
      if constexpr (std::endian::native == std::endian::little) {
        x = __builtin_bswap64(x);  // the first byte becomes the most significant
        y = __builtin_bswap64(y);
      }
      return x < y ? -1 : 1;
    }
  }
  for (; at < common; ++at) {
    const auto p = static_cast<unsigned char>(a[at]);
    const auto q = static_cast<unsigned char>(b[at]);
    if (p != q) return p < q ? -1 : 1;
  }
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

// A transparent "less" for ordered containers of strings: the same order as
// std::less<>, looked up by string_view.
struct LexLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return lex_compare(a, b) < 0; }
};

}  // namespace leaseproof
