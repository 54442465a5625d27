// What the real-process commands share (process_common.hpp).
#include "cli/process_common.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>

#include "cli/cli_common.hpp"
#include "base/temporary_file.hpp"

namespace leaseproof::cli {

namespace asio = boost::asio;

void print_line(std::string_view line) {
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

std::pair<std::string, uint16_t> parse_address(const std::string& text, std::string_view flag) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw UsageError{fmt::format("{}: '{}' is not HOST:PORT, e.g. 127.0.0.1:8080", flag, text)};
  }
  std::string host = text.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  if (ec) throw UsageError{fmt::format("{}: '{}' is not an IP address (or localhost)", flag, host)};
  const std::string port_text = text.substr(colon + 1);
  unsigned long port = 0;
  size_t used = 0;
  try {
    port = std::stoul(port_text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != port_text.size() || port > 65535) {
    throw UsageError{fmt::format("{}: port '{}' is not a number in 0..65535", flag, port_text)};
  }
  return {host, static_cast<uint16_t>(port)};
}

Duration duration_flag(const std::string& text, std::string_view flag, bool zero_allowed) {
  if (!zero_allowed) return parse_positive_duration(text, flag);
  const auto parsed = parse_duration(text);
  if (!parsed || parsed->is_negative()) {
    throw UsageError{fmt::format("{}: '{}' is not a duration of zero or more, e.g. 0s, 20ms", flag, text)};
  }
  return *parsed;
}

void write_port_file(const std::string& path, uint16_t port) {
  if (path.empty()) return;
  const std::string temporary = unique_temporary_path(path);
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << port << "\n";
    if (!out) throw std::runtime_error(fmt::format("--port-file: cannot write {}", temporary));
  }
  if (std::string error = rename_into_place(temporary, path); !error.empty()) {
    throw std::runtime_error("--port-file: " + error);
  }
}

}  // namespace leaseproof::cli
