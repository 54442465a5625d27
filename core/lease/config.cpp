#include "core/lease/config.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace leaseproof::lease {

std::string_view to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::core: return "core";
    case Algorithm::seed: return "seed";
    case Algorithm::liveness: return "liveness";
  }
  return "?";
}
std::optional<Algorithm> parse_algorithm(std::string_view text) {
  for (Algorithm algorithm : {Algorithm::core, Algorithm::seed, Algorithm::liveness}) {
    if (text == to_string(algorithm)) return algorithm;
  }
  return std::nullopt;
}

std::string_view to_string(ExpiryMode mode) { return mode == ExpiryMode::wall ? "wall" : "counter"; }

std::string LeaseConfig::validate() const {
  auto positive = [](Duration d) { return d > Duration::zero(); };
  // Floors: below them a worker spends itself on timers (a 1us heartbeat
  // renews a million times a second per lease) and bounds nothing.
  const std::pair<const char*, std::pair<Duration, Duration>> floors[] = {
      {"heartbeat_interval", {heartbeat_interval, Duration::from_ms(100)}},
      {"reconcile_interval", {reconcile_interval, Duration::from_s(1)}},
      {"watch_interval", {watch_interval, Duration::from_ms(100)}},
      {"request_timeout", {request_timeout, Duration::from_ms(1)}},
      {"retry_backoff", {retry_backoff, Duration::from_ms(1)}}};
  for (const auto& [name, value_and_floor] : floors) {
    const auto [value, floor] = value_and_floor;
    if (value < floor) return fmt::format("lease.{} ({}) must be at least {}", name, value, floor);
  }
  if (!positive(lease_duration)) return fmt::format("lease.lease_duration ({}) must be positive", lease_duration);
  if (!positive(heartbeat_interval)) {
    return fmt::format("lease.heartbeat_interval ({}) must be positive", heartbeat_interval);
  }
  if (heartbeat_interval >= lease_duration) {
    return fmt::format("lease.heartbeat_interval ({}) must be shorter than lease.lease_duration ({})",
                       heartbeat_interval, lease_duration);
  }
  if (!positive(reconcile_interval)) {
    return fmt::format("lease.reconcile_interval ({}) must be positive", reconcile_interval);
  }
  if (reconcile_jitter_max.is_negative() || reconcile_jitter_max > reconcile_interval) {
    return fmt::format("lease.reconcile_jitter_max ({}) must be between 0 and lease.reconcile_interval ({})",
                       reconcile_jitter_max, reconcile_interval);
  }
  if (safety_margin.is_negative()) return fmt::format("lease.safety_margin ({}) must not be negative", safety_margin);
  if (algorithm != Algorithm::seed && safety_margin + heartbeat_interval >= lease_duration) {
    return fmt::format(
        "lease.safety_margin ({}) + lease.heartbeat_interval ({}) must be shorter than lease.lease_duration ({}): "
        "the owner would stop acting before its next renew",
        safety_margin, heartbeat_interval, lease_duration);
  }
  if (!positive(request_timeout) || request_timeout >= lease_duration) {
    return fmt::format("lease.request_timeout ({}) must be positive and shorter than lease.lease_duration ({})",
                       request_timeout, lease_duration);
  }
  if (!positive(retry_backoff)) return fmt::format("lease.retry_backoff ({}) must be positive", retry_backoff);
  if (capacity == 0) return "lease.capacity must be at least 1";
  if (acquire_per_round_max == 0) return "lease.acquire_per_round_max must be at least 1";
  if (watchers_per_lease == 0) return "lease.watchers_per_lease must be at least 1";
  if (!positive(watch_interval) || watch_interval > lease_duration) {
    return fmt::format("lease.watch_interval ({}) must be positive and at most lease.lease_duration ({})",
                       watch_interval, lease_duration);
  }
  if (query_page_items_max == 0 || query_pages_max == 0) {
    return "lease.query_page_items_max and lease.query_pages_max must be at least 1";
  }
  if (table.shards == 0 || table.shards > 1000) return fmt::format("lease.table.shards ({}) must be 1..1000", table.shards);
  return {};
}

Duration LeaseConfig::renew_interval() const {
  if (algorithm == Algorithm::seed) return heartbeat_interval;
  // With lease 8 s, margin 2 s and heartbeat 5 s, a renew sent at +5 s had
  // 1 s to be confirmed before the deadline at +6 s: any slower round trip
  // stopped the owner although nothing failed. A window of a request
  // timeout or less cannot be helped by renewing earlier; the heartbeat
  // stays (and the owner may stop at its deadline, as before).
  const Duration window = lease_duration - safety_margin - request_timeout;
  if (window <= Duration::zero()) return heartbeat_interval;
  return std::min(heartbeat_interval, window);
}

Duration LeaseConfig::skew_tolerated() const {
  if (algorithm == Algorithm::seed) return Duration::zero();
  return safety_margin * 2;
}

int64_t LeaseConfig::drift_ppm_tolerated() const {
  if (algorithm == Algorithm::seed) return 0;
  // Owner and observer may each be off by the rate error over one lease;
  // together that must stay within the two margins: 2 x L x e <= 2 x m.
  return safety_margin.ns() * 1'000'000 / lease_duration.ns();
}

std::string LeaseConfig::assumptions() const {
  if (algorithm == Algorithm::seed) {
    return "seed algorithm: assumes perfectly synchronised wall clocks and no pauses (no margin, no fencing)";
  }
  const std::string_view name = to_string(algorithm);
  const std::string common =
      algorithm == Algorithm::liveness
          ? "pauses of any length; lost and delayed replies; GSI lag; a worker's leases live and die with its "
            "liveness item, which a taker fences (a new incarnation) before taking any of them"
          : "pauses of any length; lost and delayed replies; GSI lag";
  if (expiry_mode == ExpiryMode::wall) {
    return fmt::format("{}/wall: wall-clock skew between workers at most {} (2 x safety margin {}); {}", name,
                       skew_tolerated(), safety_margin, common);
  }
  return fmt::format("{}/counter: clock rate error at most {} ppm (safety margin {} over lease {}); any wall skew; {}",
                     name, drift_ppm_tolerated(), safety_margin, lease_duration, common);
}

}  // namespace leaseproof::lease
