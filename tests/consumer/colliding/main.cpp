// Uses the application's own base/, core/ and runtime/ headers and, beside
// them, leaseproof's installed core and runtime headers. Prints both; exits
// 1 unless each side's values are its own.
#include <cstdio>

#include "base/time.hpp"
#include "core/lease/config.hpp"
#include "runtime/clock.hpp"

#include <leaseproof/base/time.hpp>
#include <leaseproof/core/lease/config.hpp>
#include <leaseproof/runtime/clock.hpp>
#include <leaseproof/runtime/worker/lease_host.hpp>

int main() {
  const application::Duration own{30};
  const application::LeaseConfig own_config;
  const leaseproof::lease::LeaseConfig config;
  const leaseproof::runtime::LeaseHostOptions options;
  std::printf("application: duration %lds, table %s, ticks %ld\n", own.seconds, own_config.table,
              application::clock_ticks());
  std::printf("leaseproof: lease %s, heartbeat %s, host lease %s\n",
              leaseproof::format_duration(config.lease_duration).c_str(),
              leaseproof::format_duration(config.heartbeat_interval).c_str(),
              leaseproof::format_duration(options.lease.lease_duration).c_str());
  const bool ok = own.seconds == 30 && application::clock_ticks() == 42 &&
                  config.heartbeat_interval < config.lease_duration && options.lease.lease_duration == config.lease_duration;
  return ok ? 0 : 1;
}
