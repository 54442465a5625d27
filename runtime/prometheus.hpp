#pragma once
// Prometheus text exposition (format 0.0.4) for the processes' /metrics:
// one metric with its HELP and TYPE lines, or a counter with one label.

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include <limits>

#include <fmt/format.h>

namespace leaseproof::runtime {

inline void append_metric(std::string& out, const char* name, const char* type, const char* help, uint64_t value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}

// A counter with one label, a line per key of `values` (none: the HELP and
// TYPE lines only).
template <typename Key>
void append_labelled_counter(std::string& out, const char* name, const char* help, const char* label,
                             const std::map<Key, uint64_t>& values) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n", name, help);
  for (const auto& [key, value] : values) out += fmt::format("{}{{{}=\"{}\"}} {}\n", name, label, key, value);
}

// A histogram of durations in seconds, with fixed bucket bounds from 0.5 ms
// to 5 s (a fan-out, a write): cumulative `_bucket{le=...}` lines, `_sum`
// and `_count`, as Prometheus expects. Quantiles for tests and reports:
// quantile() answers the upper bound of the bucket that holds it.
class DurationHistogram {
 public:
  static constexpr std::array<double, 14> kBoundsSeconds = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                                            0.1,    0.2,   0.5,   1,     2,    5,    10};
  void observe(double seconds) {
    std::size_t i = 0;
    while (i < kBoundsSeconds.size() && seconds > kBoundsSeconds[i]) ++i;
    ++counts_[i];
    ++count_;
    sum_ += seconds;
  }
  uint64_t count() const { return count_; }
  // The upper bound of the bucket holding the q-quantile (q in (0, 1]);
  // infinity past the last bound, 0 with no observation.
  double quantile(double q) const {
    if (count_ == 0) return 0;
    const auto rank = static_cast<uint64_t>(q * static_cast<double>(count_) + 0.999999);
    uint64_t seen = 0;
    for (std::size_t i = 0; i < kBoundsSeconds.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return kBoundsSeconds[i];
    }
    return std::numeric_limits<double>::infinity();
  }
  void append(std::string& out, const char* name, const char* help) const {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
    uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kBoundsSeconds.size(); ++i) {
      cumulative += counts_[i];
      out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBoundsSeconds[i], cumulative);
    }
    out += fmt::format("{0}_bucket{{le=\"+Inf\"}} {1}\n{0}_sum {2}\n{0}_count {1}\n", name, count_, sum_);
  }

 private:
  std::array<uint64_t, kBoundsSeconds.size() + 1> counts_{};
  uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace leaseproof::runtime
