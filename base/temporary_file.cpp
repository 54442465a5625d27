#include "base/temporary_file.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <unistd.h>

#include <fmt/format.h>

namespace leaseproof {

std::string unique_temporary_path(const std::string& path) {
  static std::atomic<unsigned> next{0};
  return fmt::format("{}.tmp-{}-{}", path, static_cast<long>(getpid()), next.fetch_add(1));
}

std::string rename_into_place(const std::string& temporary, const std::string& path) {
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (!error) return {};
  std::string message = fmt::format("cannot move '{}' into place as '{}': {}", temporary, path, error.message());
  std::filesystem::remove(temporary, error);
  return message;
}

bool write_whole_file(const std::string& path, const std::string& text) {
  const std::string temporary = unique_temporary_path(path);
  {
    std::ofstream out{temporary, std::ios::out | std::ios::trunc};
    out << text;
    out.close();
    if (!out) {
      std::filesystem::remove(temporary);
      return false;
    }
  }
  return rename_into_place(temporary, path).empty();
}

}  // namespace leaseproof
