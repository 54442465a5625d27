#include "properties/request_rate_checker.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "properties/lease_text.hpp"

namespace leaseproof::properties {
namespace {

uint32_t per(Duration whole, Duration part) {
  if (part <= Duration::zero()) return 0;
  return static_cast<uint32_t>((whole.ns() + part.ns() - 1) / part.ns());
}

}  // namespace

uint32_t RequestRateBounds::per_connection() const {
  return per(lease_duration, retry_backoff) + per(lease_duration, heartbeat_interval) +
         per(lease_duration, watch_interval) + kSlack;
}

uint32_t RequestRateBounds::without_connection() const {
  return (per(lease_duration, reconcile_interval) + 1) * query_pages_max * (1 + kPageRetries);
}

std::string RequestRateBounds::describe_per_connection() const {
  return fmt::format("{} = {} retries ({} / {}) + {} renews ({} / {}) + {} watch reads ({} / {}) + {} one-off",
                     per_connection(), per(lease_duration, retry_backoff), lease_duration, retry_backoff,
                     per(lease_duration, heartbeat_interval), lease_duration, heartbeat_interval,
                     per(lease_duration, watch_interval), lease_duration, watch_interval, kSlack);
}

std::string RequestRateBounds::describe_without_connection() const {
  return fmt::format("{} = {} rounds ({} / {} + 1) x {} pages x {} attempts", without_connection(),
                     per(lease_duration, reconcile_interval) + 1, lease_duration, reconcile_interval, query_pages_max,
                     1 + kPageRetries);
}

void RequestRateChecker::observe(const sim::TraceEvent& event) {
  if (event.kind != sim::EventKind::note || event.label != "lease.request") return;
  // "<kind> <connection> ...": the first two words, without splitting the rest.
  const std::string_view detail = event.detail;
  const size_t kind_end = detail.find(' ');
  if (kind_end == std::string_view::npos) return;  // the ownership checker reports a malformed note
  const std::string_view kind = detail.substr(0, kind_end);
  const size_t connection_end = detail.find(' ', kind_end + 1);
  const std::string_view connection = detail.substr(kind_end + 1, connection_end - kind_end - 1);
  if (connection.empty()) return;
  // The sink's record and checkpoint writes follow the stream's message rate
  // (their retries, its full-jitter backoff): not the lease core's pacing.
  if (kind == "record" || kind == "record_put" || kind == "checkpoint") return;
  ++requests_;
  const Instant now = event.true_time;
  const bool named = connection != "-";
  ByConnection& of_worker = recent_[event.node];
  auto found = of_worker.find(connection);
  if (found == of_worker.end()) found = of_worker.emplace(std::string{connection}, Recent{}).first;
  Recent& recent = found->second;
  while (!recent.sent.empty() && recent.sent.front() + bounds_.lease_duration <= now) recent.sent.pop_front();
  if (recent.sent.empty()) recent.reported = false;
  recent.sent.push_back(now);
  const auto count = static_cast<uint32_t>(recent.sent.size());
  uint32_t& most = named ? most_per_connection_ : most_without_connection_;
  most = std::max(most, count);
  const uint32_t bound = named ? per_connection_ : without_connection_;
  if (count <= bound || recent.reported) return;
  recent.reported = true;
  ++violation_count_;
  if (violations_.size() < kViolationsKept) {
    violations_.push_back(fmt::format(
        "request storm: {} sent {} requests {} from {} to {} (the last: {}), more than {} within one lease: a failure "
        "must be retried no faster than the core's backoff, however fast it came back",
        text::node_name(names_, event.node), count,
        named ? fmt::format("about connection {}", connection) : std::string{"naming no connection (reconcile pages)"},
        recent.sent.front(), now, event.detail,
        named ? bounds_.describe_per_connection() : bounds_.describe_without_connection()));
  }
}

}  // namespace leaseproof::properties
