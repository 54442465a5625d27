#include "core/registry/config.hpp"

#include <fmt/format.h>

namespace leaseproof::registry {

std::string_view to_string(Algorithm algorithm) { return algorithm == Algorithm::core ? "core" : "seed"; }

std::string_view to_string(Flaw flaw) {
  switch (flaw) {
    case Flaw::drop_unprocessed: return "drop_unprocessed";
    case Flaw::no_expiry_filter: return "no_expiry_filter";
    case Flaw::one_partition: return "one_partition";
  }
  return "?";
}

std::string RegistryConfig::validate() const {
  if (flaws > 7) return fmt::format("registry.flaws ({}) must be a combination of the three flaws (0..7)", flaws);
  if (table.name.empty()) return "registry.table.name must not be empty";
  if (table.by_connection_index.empty() || table.by_user_index.empty()) {
    return "registry.table index names must not be empty";
  }
  if (room_shards < 1 || room_shards > 1000) {
    return fmt::format("registry.room_shards ({}) must be between 1 and 1000", room_shards);
  }
  if (ttl < Duration::from_s(1) || ttl > Duration::from_h(24 * 365)) {
    return fmt::format("registry.ttl ({}) must be between 1s and 365 days", ttl);
  }
  if (query_page_items_max < 1 || query_page_items_max > 10000) {
    return fmt::format("registry.query_page_items_max ({}) must be between 1 and 10000", query_page_items_max);
  }
  if (query_pages_max < 1 || query_pages_max > 100000) {
    return fmt::format("registry.query_pages_max ({}) must be between 1 and 100000", query_pages_max);
  }
  if (batch_items_max < 1 || batch_items_max > 25) {
    return fmt::format("registry.batch_items_max ({}) must be between 1 and 25 (BatchWriteItem's limit)",
                       batch_items_max);
  }
  if (attempts_max < 1 || attempts_max > 64) {
    return fmt::format("registry.attempts_max ({}) must be between 1 and 64", attempts_max);
  }
  if (retry_base <= Duration::zero() || retry_cap < retry_base || retry_cap > Duration::from_min(10)) {
    return fmt::format("registry.retry_base ({}) must be positive and at most registry.retry_cap ({}), itself at "
                       "most 10m",
                       retry_base, retry_cap);
  }
  if (posts_in_flight_max < 1 || posts_in_flight_max > 10000) {
    return fmt::format("registry.posts_in_flight_max ({}) must be between 1 and 10000", posts_in_flight_max);
  }
  if (post_attempts_max < 1 || post_attempts_max > 64) {
    return fmt::format("registry.post_attempts_max ({}) must be between 1 and 64", post_attempts_max);
  }
  return "";
}

}  // namespace leaseproof::registry
