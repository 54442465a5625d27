#include "base/ratio.hpp"

#include <charconv>

namespace leaseproof {
namespace {

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<Ratio> parse_ratio(std::string_view text) {
  if (text.ends_with('%')) {
    auto percent = parse_u64(text.substr(0, text.size() - 1));
    if (!percent) return std::nullopt;
    return Ratio{*percent, 100};
  }
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    auto whole = parse_u64(text);
    if (!whole) return std::nullopt;
    return Ratio{*whole, 1};
  }
  auto numerator = parse_u64(text.substr(0, slash));
  auto denominator = parse_u64(text.substr(slash + 1));
  if (!numerator || !denominator || *denominator == 0) return std::nullopt;
  return Ratio{*numerator, *denominator};
}

}  // namespace leaseproof
