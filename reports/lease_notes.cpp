#include "reports/lease_notes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace leaseproof::report::notes {

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> result;
  size_t at = 0;
  while (at < text.size()) {
    const size_t begin = text.find_first_not_of(' ', at);
    if (begin == std::string_view::npos) break;
    const size_t end = std::min(text.find(' ', begin), text.size());
    result.push_back(text.substr(begin, end - begin));
    at = end;
  }
  return result;
}

std::string_view word(std::string_view text, size_t index) {
  // Without building the vector: the timeline asks this of every note.
  size_t at = 0;
  for (size_t i = 0;; ++i) {
    const size_t begin = text.find_first_not_of(' ', at);
    if (begin == std::string_view::npos) return {};
    const size_t end = std::min(text.find(' ', begin), text.size());
    if (i == index) return text.substr(begin, end - begin);
    at = end;
  }
}

bool is_dynamodb_operation(std::string_view label) {
  static constexpr std::array<std::string_view, 8> kOperations = {
      "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem", "TransactWriteItems", "CreateTable"};
  return std::find(kOperations.begin(), kOperations.end(), label) != kOperations.end();
}

std::string format_measured(Duration duration) {
  const double ns = static_cast<double>(duration.ns());
  return duration < Duration::from_s(1) ? fmt::format("{:.1f}ms", ns / 1e6) : fmt::format("{:.3f}s", ns / 1e9);
}

std::string_view connection_of(const sim::TraceEvent& event) {
  if (event.kind != sim::EventKind::note) return {};
  // Notes whose detail starts with the connection (docs/trace-format.md).
  static constexpr std::array<std::string_view, 12> kFirstWord = {
      "lease.open",  "lease.close", "control.started", "control.stopped", "upstream.open", "upstream.close",
      "hub.publish", "hub.close",   "hub.drop",        "resume.recorded", "resume.reset",  "resume.give_up"};
  if (std::find(kFirstWord.begin(), kFirstWord.end(), event.label) != kFirstWord.end()) {
    return word(event.detail, 0);
  }
  if (event.label == "lease.request") {
    const std::string_view connection = word(event.detail, 1);
    return connection == "-" ? std::string_view{} : connection;
  }
  return {};
}

std::optional<std::pair<uint64_t, LeaseRequest>> parse_lease_request(const sim::TraceEvent& event) {
  if (event.kind != sim::EventKind::note || event.label != "lease.request" || event.value <= 0) return std::nullopt;
  LeaseRequest request;
  request.worker = event.node;
  request.kind = word(event.detail, 0);
  request.connection = word(event.detail, 1);
  request.epoch = word(event.detail, 2);
  request.sent_at = event.true_time;
  if (request.connection.empty()) return std::nullopt;
  return std::pair{static_cast<uint64_t>(event.value), request};
}

uint32_t RequestBook::intern(std::string_view text) {
  if (text.empty()) return 0;
  if (const auto found = interned_.find(text); found != interned_.end()) return found->second;
  const auto index = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(text);
  interned_.emplace(strings_.back(), index);
  return index;
}

void RequestBook::add(uint64_t id, const LeaseRequest& request) {
  Record made{id,
              request.sent_at,
              request.worker,
              intern(request.kind),
              intern(request.connection),
              intern(request.epoch),
              intern(request.operation),
              intern(request.outcome),
              false};
  if (records_.empty() || records_.back().id < id) {
    records_.push_back(made);  // the usual case: ids grow with time
    return;
  }
  const auto at = std::lower_bound(records_.begin(), records_.end(), id,
                                   [](const Record& r, uint64_t wanted) { return r.id < wanted; });
  if (at != records_.end() && at->id == id) {
    *at = made;
  } else {
    records_.insert(at, made);
  }
}

namespace {

// The record of `id` in records sorted by id, or nullptr.
template <typename Records>
auto locate(Records& records, uint64_t id) -> decltype(&*records.begin()) {
  const auto at = std::lower_bound(records.begin(), records.end(), id,
                                   [](const auto& r, uint64_t wanted) { return r.id < wanted; });
  return at != records.end() && at->id == id ? &*at : nullptr;
}

}  // namespace

RequestBook::Record* RequestBook::record(uint64_t id) { return locate(records_, id); }

LeaseRequest RequestBook::view(const Record& r) const {
  return LeaseRequest{r.worker, strings_[r.kind], strings_[r.connection], strings_[r.epoch], r.sent_at,
                      strings_[r.operation], strings_[r.outcome]};
}

std::optional<LeaseRequest> RequestBook::answered(uint64_t id, std::string_view operation, std::string_view outcome) {
  Record* found = record(id);
  if (found == nullptr) return std::nullopt;
  found->operation = intern(operation);
  found->outcome = intern(outcome);
  return view(*found);
}

std::optional<LeaseRequest> RequestBook::timed_out(uint64_t id) {
  Record* found = record(id);
  if (found == nullptr || found->timed_out) return std::nullopt;
  found->timed_out = true;
  return view(*found);
}

std::optional<LeaseRequest> RequestBook::find(uint64_t id) const {
  const Record* found = locate(records_, id);
  if (found == nullptr) return std::nullopt;
  return view(*found);
}

void RequestBook::forget_older_than_horizon(Instant now) {
  while (!records_.empty() && now - records_.front().sent_at > horizon_) records_.pop_front();
}

}  // namespace leaseproof::report::notes
