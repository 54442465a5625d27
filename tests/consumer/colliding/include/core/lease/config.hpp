#pragma once
// The application's own core/lease/config.hpp (see base/time.hpp beside it).
namespace application {
struct LeaseConfig {
  const char* table = "application-leases";
};
}  // namespace application
