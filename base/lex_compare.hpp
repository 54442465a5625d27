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
#include <functional>
#include <string_view>
#include <type_traits>

#include "base/bytes.hpp"

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

// a == b, without the call into memcmp: lengths first, then 8 bytes a step
// (the last step overlapping the one before), or a few single bytes.
inline bool lex_equal(std::string_view a, std::string_view b) noexcept {
  const std::size_t size = a.size();
  if (size != b.size()) return false;
  if (size >= 8) {
    std::size_t at = 0;
    for (; at + 8 < size; at += 8) {
      uint64_t x;
      uint64_t y;
      std::memcpy(&x, a.data() + at, 8);
      std::memcpy(&y, b.data() + at, 8);
      if (x != y) return false;
    }
    uint64_t x;
    uint64_t y;
    std::memcpy(&x, a.data() + size - 8, 8);
    std::memcpy(&y, b.data() + size - 8, 8);
    return x == y;
  }
  if (size >= 4) {
    uint32_t x[2];
    uint32_t y[2];
    std::memcpy(&x[0], a.data(), 4);
    std::memcpy(&y[0], b.data(), 4);
    std::memcpy(&x[1], a.data() + size - 4, 4);
    std::memcpy(&y[1], b.data() + size - 4, 4);
    return x[0] == y[0] && x[1] == y[1];
  }
  // 0 to 3 bytes: the first, middle and last cover them all.
  return size == 0 || (a[0] == b[0] && a[size / 2] == b[size / 2] && a[size - 1] == b[size - 1]);
}

// The first 8 bytes of a string, zero-padded, as a number whose order is
// theirs: when the prefixes of two strings differ, they order the strings as
// lex_compare does (a string that ends sorts before any byte, and so does the
// padding); when they are equal, only lex_compare can tell.
inline uint64_t lex_prefix(std::string_view text) noexcept {
  uint64_t prefix = 0;
  const std::size_t size = text.size() < 8 ? text.size() : 8;
  for (std::size_t i = 0; i < size; ++i) prefix |= uint64_t{static_cast<unsigned char>(text[i])} << (56 - 8 * i);
  return prefix;
}

// A transparent "less" for ordered containers of strings: the same order as
// std::less<>, looked up by string_view.
struct LexLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return lex_compare(a, b) < 0; }
};

// A transparent hash for unordered containers of strings, looked up by
// string_view (with std::equal_to<>). Inline, for the short names and keys
// hashed millions of times a run (libstdc++'s hash is a call per string): 8
// bytes a multiply-xorshift round, a short tail read in at most two loads
// (base/bytes.hpp).
// Containers hashed with it are never walked where order could matter
// (docs/determinism.md), so its values decide nothing a run shows.
inline std::size_t hash_text(std::string_view text) noexcept {
  uint64_t state = 0x9E3779B97F4A7C15ULL ^ (text.size() * 0xFF51AFD7ED558CCDULL);
  auto mix = [&state](uint64_t word) {
    state = (state ^ word) * 0xBF58476D1CE4E5B9ULL;
    state ^= state >> 31;
  };
  for_each_le_word(text, mix);
  state ^= state >> 29;
  return static_cast<std::size_t>(state * 0x94D049BB133111EBULL);
}

// Not noexcept, on purpose: libstdc++ keeps each node's hash code in an
// unordered container only when the hash may throw (or is a slow one, as
// std::hash<std::string> is). Without the code, finding a key walks its
// bucket's chain hashing every node's string again to see where the bucket
// ends, a cache miss and a hash per node; with it, one compare of two words.
struct TextHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const { return hash_text(text); }
};
static_assert(!std::is_nothrow_invocable_v<TextHash, std::string_view>,
              "TextHash must not be noexcept: libstdc++ would stop caching hash codes in its nodes");

}  // namespace leaseproof
