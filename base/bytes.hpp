#pragma once
// Little-endian words read from byte strings, for the hashes folded over
// names, expressions and trace labels eight bytes at a time. A short tail is
// read with at most two loads, not a variable-length copy (a call into memcpy
// for every string).

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace leaseproof {

// Eight bytes as a little-endian word, whatever the host's byte order.
inline uint64_t load_le64(const char* bytes) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    uint64_t word;
    std::memcpy(&word, bytes, sizeof word);
    return word;
  } else {
    uint64_t word = 0;
    for (int i = 7; i >= 0; --i) word = (word << 8) | static_cast<unsigned char>(bytes[i]);
    return word;
  }
}

// The last 1 to 7 bytes of a string as a zero-padded little-endian word:
// exactly what load_le64 gives for them copied into eight zero bytes.
inline uint64_t load_le_tail(const char* bytes, std::size_t count) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    if (count >= 4) {  // two overlapping 4-byte loads; the overlap holds the same bytes
      uint32_t low;
      uint32_t high;
      std::memcpy(&low, bytes, 4);
      std::memcpy(&high, bytes + count - 4, 4);
      return uint64_t{low} | (uint64_t{high} << (8 * (count - 4)));
    }
    const std::size_t middle = count / 2;  // 1 to 3 bytes: first, middle and last
    return uint64_t{static_cast<unsigned char>(bytes[0])} |
           (uint64_t{static_cast<unsigned char>(bytes[middle])} << (8 * middle)) |
           (uint64_t{static_cast<unsigned char>(bytes[count - 1])} << (8 * (count - 1)));
  } else {
    uint64_t word = 0;
    for (std::size_t i = count; i-- > 0;) word = (word << 8) | static_cast<unsigned char>(bytes[i]);
    return word;
  }
}

// Calls fold(word) for each little-endian word of `text`: eight bytes at a
// time, then the last 1 to 7 zero-padded (nothing more when the size is a
// multiple of 8, or the text is empty).
template <typename Fold>
inline void for_each_le_word(std::string_view text, Fold&& fold) {
  const char* at = text.data();
  std::size_t left = text.size();
  for (; left >= 8; left -= 8, at += 8) fold(load_le64(at));
  if (left > 0) fold(load_le_tail(at, left));
}

}  // namespace leaseproof
