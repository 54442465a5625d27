#pragma once
// The application's own base/time.hpp, at the path one of leaseproof's
// in-tree headers has. An installed leaseproof header that reached this file
// instead of its own would find no leaseproof::Duration and fail to compile.
namespace application {
struct Duration {
  long seconds = 0;
};
}  // namespace application
