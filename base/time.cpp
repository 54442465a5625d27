#include "base/time.hpp"

#include <array>
#include <cstdlib>

namespace leaseproof {
namespace {

constexpr int64_t kNsPerUs = 1'000;
constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kNsPerS = 1'000'000'000;
constexpr int64_t kNsPerMin = 60 * kNsPerS;
constexpr int64_t kNsPerH = 60 * kNsPerMin;

// "<whole>[.<fraction>]<unit>" where fraction has the digits of (rest / unit)
// with trailing zeros removed.
std::string format_unit(uint64_t ns, uint64_t unit_ns, std::string_view unit) {
  std::string text = std::to_string(ns / unit_ns);
  uint64_t rest = ns % unit_ns;
  if (rest != 0) {
    std::string digits;
    for (uint64_t scale = unit_ns / 10; scale > 0; scale /= 10) {
      digits.push_back(static_cast<char>('0' + (rest / scale) % 10));
    }
    while (!digits.empty() && digits.back() == '0') digits.pop_back();
    text += "." + digits;
  }
  text += unit;
  return text;
}

}  // namespace

std::string format_duration(Duration d) {
  int64_t ns_signed = d.ns();
  if (ns_signed == 0) return "0s";
  std::string sign = ns_signed < 0 ? "-" : "";
  // Magnitude as unsigned so that INT64_MIN formats too.
  uint64_t ns = ns_signed < 0 ? uint64_t{0} - static_cast<uint64_t>(ns_signed) : static_cast<uint64_t>(ns_signed);
  if (ns < kNsPerUs) return sign + std::to_string(ns) + "ns";
  if (ns < kNsPerMs) return sign + format_unit(ns, kNsPerUs, "us");
  if (ns < kNsPerS) return sign + format_unit(ns, kNsPerMs, "ms");
  if (ns < kNsPerMin) return sign + format_unit(ns, kNsPerS, "s");
  std::string text = sign;
  if (ns >= static_cast<uint64_t>(kNsPerH)) {
    text += std::to_string(ns / kNsPerH) + "h";
    ns %= kNsPerH;
  }
  text += std::to_string(ns / kNsPerMin) + "m";
  ns %= kNsPerMin;
  text += format_unit(ns, kNsPerS, "s");
  return text;
}

std::optional<Duration> parse_duration(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text == "0") return Duration::zero();
  if (text.empty()) return std::nullopt;

  struct Unit {
    std::string_view name;
    int64_t ns;
  };
  // Longer names first so that "ms" is not read as "m" followed by "s".
  constexpr std::array<Unit, 6> kUnits{{{"ns", 1}, {"us", kNsPerUs}, {"ms", kNsPerMs},
                                        {"s", kNsPerS}, {"m", kNsPerMin}, {"h", kNsPerH}}};
  int64_t total = 0;
  while (!text.empty()) {
    size_t i = 0;
    int64_t whole = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (__builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, text[i] - '0', &whole)) {
        return std::nullopt;
      }
      ++i;
    }
    if (i == 0) return std::nullopt;
    std::string_view fraction;
    if (i < text.size() && text[i] == '.') {
      size_t start = ++i;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
      fraction = text.substr(start, i - start);
      if (fraction.empty()) return std::nullopt;
    }
    text.remove_prefix(i);
    const Unit* unit = nullptr;
    for (const Unit& candidate : kUnits) {
      if (text.starts_with(candidate.name)) {
        unit = &candidate;
        break;
      }
    }
    if (unit == nullptr) return std::nullopt;
    text.remove_prefix(unit->name.size());

    int64_t part = 0;
    if (__builtin_mul_overflow(whole, unit->ns, &part)) return std::nullopt;
    // The fraction must be a whole number of nanoseconds.
    int64_t scale = unit->ns;
    for (char digit : fraction) {
      if (scale % 10 != 0) {
        if (digit != '0') return std::nullopt;
        continue;
      }
      scale /= 10;
      part += (digit - '0') * scale;
    }
    if (__builtin_add_overflow(total, part, &total)) return std::nullopt;
  }
  return Duration::from_ns(negative ? -total : total);
}

}  // namespace leaseproof
