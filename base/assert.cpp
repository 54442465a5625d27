#include "base/assert.hpp"

#include <cstdio>
#include <cstdlib>

namespace leaseproof::detail {

void assertion_failed(std::string_view file, int line, std::string_view expression,
                      std::string_view operands) {
  std::fprintf(stderr, "%.*s:%d: assertion failed: %.*s%s%.*s\n", static_cast<int>(file.size()),
               file.data(), line, static_cast<int>(expression.size()), expression.data(),
               operands.empty() ? "" : " with ", static_cast<int>(operands.size()), operands.data());
  std::fflush(stderr);
  std::abort();
}

}  // namespace leaseproof::detail
