#pragma once
// Reading the lease simulation's notes (docs/trace-format.md, "Lease events")
// for the reports: which connection a note is about, and lease requests
// paired with what became of them. Private to reports/.

#include <cstdint>
#include <deque>
#include "base/ids.hpp"
#include "base/time.hpp"
#include "sim/trace.hpp"
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace leaseproof::report::notes {

// Words separated by one or more spaces.
std::vector<std::string_view> words(std::string_view text);
std::string_view word(std::string_view text, size_t index);  // empty when absent

bool is_dynamodb_operation(std::string_view label);

// A measured time, rounded for reading: "2.8ms", "2.000s".
std::string format_measured(Duration duration);

// The connection a note names (its detail's first word, or the second for
// lease.request), or empty: for other events, and for a reconcile ("-").
std::string_view connection_of(const sim::TraceEvent& event);

// A `lease.request` note: detail "<kind> <connection> <epoch>", value = the
// message id of the DynamoDB request. The views point into the event (from
// parse_lease_request) or into a RequestBook (from its lookups).
struct LeaseRequest {
  NodeId worker;
  std::string_view kind;        // acquire, renew, release, checkpoint, record, read, reconcile...
  std::string_view connection;  // "-" for a reconcile
  std::string_view epoch;       // the lease epoch the request is fenced by; "0": none
  Instant sent_at;
  std::string_view operation;   // the DynamoDB label, once DynamoDB applied or refused it
  std::string_view outcome;     // "ok" or the error type; empty while unanswered
};
std::optional<std::pair<uint64_t, LeaseRequest>> parse_lease_request(const sim::TraceEvent& event);

// Lease requests by message id, until they are older than `horizon`: a reply
// that arrived leaves no event carrying the request's id, so an answered
// request cannot be retired sooner. The horizon must exceed the longest time
// from a request to its timeout, pauses of the caller included. Compact
// records in id order (ids grow with time) and interned strings: the book
// holds every request of the horizon, and a large one slows the run.
class RequestBook {
 public:
  explicit RequestBook(Duration horizon) : horizon_(horizon) {}

  void add(uint64_t id, const LeaseRequest& request);
  // DynamoDB applied or refused request `id`; nullopt when it is not a known
  // lease request (the control plane's writes, or forgotten).
  std::optional<LeaseRequest> answered(uint64_t id, std::string_view operation, std::string_view outcome);
  // The caller gave up on request `id` (once; a second call finds nothing).
  std::optional<LeaseRequest> timed_out(uint64_t id);
  std::optional<LeaseRequest> find(uint64_t id) const;
  void forget_older_than_horizon(Instant now);
  size_t size() const { return records_.size(); }

 private:
  struct Record {
    uint64_t id = 0;
    Instant sent_at;
    NodeId worker;
    uint32_t kind = 0;  // indexes into strings_
    uint32_t connection = 0;
    uint32_t epoch = 0;
    uint32_t operation = 0;
    uint32_t outcome = 0;
    bool timed_out = false;
  };

  uint32_t intern(std::string_view text);
  Record* record(uint64_t id);
  LeaseRequest view(const Record& record) const;

  Duration horizon_;
  std::deque<Record> records_;                               // by id
  std::deque<std::string> strings_{std::string{}};           // index 0: ""; a deque keeps views valid
  std::unordered_map<std::string_view, uint32_t> interned_;  // looked up only, never iterated
};

}  // namespace leaseproof::report::notes
