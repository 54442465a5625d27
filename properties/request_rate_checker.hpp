#pragma once
// No request storm: within any one lease duration, a worker sends at most
// what the core's pacing allows about any one connection, of every request
// kind of the lease core together (acquire, renew, release, read, liveness;
// the sink's record and checkpoint writes follow the stream's message rate
// and are not counted, its probes are), and
// at most what the sweep allows of the requests that name no connection
// (reconcile pages). The bound, term by term:
//
//   per connection  ceil(lease / retry_backoff)   retries after a failure,
//                                                 at most one per backoff
//                 + ceil(lease / heartbeat)       renews
//                 + ceil(lease / watch_interval)  a watcher's reads
//                 + kSlack                        one-off requests (the
//                                                 acquire, its read, the
//                                                 release and its retries)
//   no connection   (ceil(lease / reconcile_interval) + 1) rounds
//                 x query_pages_max x (1 + kPageRetries) pages
//
// A failure that comes back at once (a refused connection, a TLS failure)
// must not be retried at once: a core that counts on the request timeout to
// pace its retries sends one per round trip instead, thousands per lease.
// Read from the workers' `lease.request` notes alone (docs/trace-format.md).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/ids.hpp"
#include "base/time.hpp"
#include "sim/trace.hpp"

namespace leaseproof::properties {

using NodeNamer = std::function<std::string(NodeId)>;  // as in lease_checkers.hpp

struct RequestRateBounds {
  Duration lease_duration;
  Duration heartbeat_interval;
  Duration retry_backoff;
  Duration watch_interval;
  Duration reconcile_interval;
  uint32_t query_pages_max = 0;

  static constexpr uint32_t kSlack = 10;
  static constexpr uint32_t kPageRetries = 3;  // core/lease: a page is asked again at most 3 times
  uint32_t per_connection() const;
  uint32_t without_connection() const;
  // "100 retries (20s / 200ms) + 4 renews (20s / 5s) + ..." for messages.
  std::string describe_per_connection() const;
  std::string describe_without_connection() const;
};

class RequestRateChecker {
 public:
  RequestRateChecker(NodeNamer names, RequestRateBounds bounds)
      : names_(std::move(names)),
        bounds_(bounds),
        per_connection_(bounds.per_connection()),
        without_connection_(bounds.without_connection()) {}
  // A `lease.request` note; other events are ignored.
  void observe(const sim::TraceEvent& event);

  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t violation_count() const { return violation_count_; }
  const RequestRateBounds& bounds() const { return bounds_; }
  uint64_t requests() const { return requests_; }
  // The most requests one worker sent about one connection, and naming
  // none, within one lease.
  uint32_t most_per_connection() const { return most_per_connection_; }
  uint32_t most_without_connection() const { return most_without_connection_; }

  static constexpr size_t kViolationsKept = 10;

 private:
  struct Recent {
    std::deque<Instant> sent;  // within the last lease
    bool reported = false;     // one violation per storm
  };
  // Every request note is looked up here (the hot path of every run): hashed,
  // found by the note's string_view without a copy. Only found, never walked.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  using ByConnection = std::unordered_map<std::string, Recent, Hash, std::equal_to<>>;
  NodeNamer names_;
  RequestRateBounds bounds_;
  uint32_t per_connection_ = 0;      // bounds_.per_connection(), once
  uint32_t without_connection_ = 0;  // bounds_.without_connection(), once
  std::map<NodeId, ByConnection> recent_;  // worker -> connection ("-") -> recent
  std::vector<std::string> violations_;
  uint64_t violation_count_ = 0;
  uint64_t requests_ = 0;
  uint32_t most_per_connection_ = 0;
  uint32_t most_without_connection_ = 0;
};

}  // namespace leaseproof::properties
