#pragma once
// What the commands that run real processes share (`hub`, `subscribe`,
// `relay`, `worker`): output lines, addresses, durations, port files.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/time.hpp"

namespace leaseproof::cli {

// One line on stdout, flushed at once (labs read the output as it comes).
void print_line(std::string_view line);
// "HOST:PORT" with an IPv4 address (or localhost) and a port 0..65535;
// UsageError naming `flag` otherwise.
std::pair<std::string, uint16_t> parse_address(const std::string& text, std::string_view flag);
// A duration flag: positive, or (zero_allowed) zero or more; UsageError otherwise.
Duration duration_flag(const std::string& text, std::string_view flag, bool zero_allowed);
// Writes the bound port to `path` (atomically: a reader never sees half); nothing when empty.
void write_port_file(const std::string& path, uint16_t port);

}  // namespace leaseproof::cli
