#pragma once
// Prometheus text exposition (format 0.0.4) for the processes' /metrics:
// one metric with its HELP and TYPE lines, or a counter with one label.

#include <cstdint>
#include <map>
#include <string>

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

}  // namespace leaseproof::runtime
