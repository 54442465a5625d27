#include "core/dynamo/base64.hpp"

#include <array>
#include <cstdint>

namespace leaseproof::dynamo {

namespace {

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t at = 0; at < text.size(); at += 4) {
    const bool last_group = at + 4 == text.size();
    std::array<int, 4> values{};
    int padding = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      const char c = text[at + i];
      if (c == '=' && last_group && i >= 2) {
        ++padding;
        values[i] = 0;
        continue;
      }
      if (padding > 0) return std::nullopt;  // data after '='
      values[i] = sextet(c);
      if (values[i] < 0) return std::nullopt;
    }
    const uint32_t group = (static_cast<uint32_t>(values[0]) << 18) | (static_cast<uint32_t>(values[1]) << 12) |
                           (static_cast<uint32_t>(values[2]) << 6) | static_cast<uint32_t>(values[3]);
    out.push_back(static_cast<char>((group >> 16) & 0xff));
    if (padding < 2) out.push_back(static_cast<char>((group >> 8) & 0xff));
    if (padding < 1) out.push_back(static_cast<char>(group & 0xff));
  }
  return out;
}

}  // namespace leaseproof::dynamo
