#include "properties/lease_checkers.hpp"

#include <algorithm>
#include <array>
#include <charconv>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "sim/clock.hpp"

#include "properties/lease_text.hpp"

namespace leaseproof::properties {

namespace text {

Words split_words(std::string_view text) {
  Words words;
  size_t at = 0;
  while (at < text.size()) {
    const size_t begin = text.find_first_not_of(' ', at);
    if (begin == std::string_view::npos) break;
    const size_t end = std::min(text.find(' ', begin), text.size());
    words.add(text.substr(begin, end - begin));
    at = end;
  }
  return words;
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || ptr != end || text.empty()) return std::nullopt;
  return value;
}

std::string node_name(const NodeNamer& names, NodeId node) {
  if (names) return names(node);
  return fmt::format("node{}", node);
}

std::string worker_name(const NodeNamer& names, WorkerIdentity worker) {
  return fmt::format("{}#{}", node_name(names, worker.node), worker.incarnation);
}

std::string wall_reading(Instant wall, Instant read_at) {
  const Duration since_epoch = wall - sim::kWallEpoch;
  const Duration error = since_epoch - read_at.since_zero();
  return fmt::format("{}{} (clock {}{})", since_epoch.is_negative() ? "" : "+", since_epoch,
                     error.is_negative() ? "" : "+", error);
}

bool is_dynamodb_operation(std::string_view label) {
  static constexpr std::array<std::string_view, 8> kOperations = {
      "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem", "TransactWriteItems",
      "CreateTable"};
  for (std::string_view operation : kOperations) {
    if (label == operation) return true;
  }
  return false;
}

}  // namespace text

std::string_view to_string(GapCause cause) {
  switch (cause) {
    case GapCause::initial: return "initial";
    case GapCause::crash: return "crash";
    case GapCause::pause: return "pause";
    case GapCause::graceful: return "graceful";
    case GapCause::lease_lost: return "lease_lost";
    case GapCause::stopped: return "stopped";
  }
  return "?";
}

Duration nearest_rank(const std::vector<Duration>& ascending, uint32_t percent) {
  if (ascending.empty()) return Duration::zero();
  const uint64_t n = ascending.size();
  // ceil(percent * n / 100) in integers; rank 1 at least, n at most.
  uint64_t rank = (static_cast<uint64_t>(percent) * n + 99) / 100;
  rank = std::clamp<uint64_t>(rank, 1, n);
  return ascending[rank - 1];
}

Duration RecoveryBound::total() const {
  Duration sum = Duration::zero();
  for (const auto& [term, length] : terms) sum += length;
  return sum;
}

std::string RecoveryBound::formula() const {
  std::string out;
  for (const auto& [term, length] : terms) {
    if (!out.empty()) out += " + ";
    out += fmt::format("{} {}", term, length);
  }
  if (out.empty()) out = "(no terms)";
  return fmt::format("{} = {}", out, total());
}

LeaseCheckers::LeaseCheckers(NodeNamer names, std::map<GapCause, RecoveryBound> bounds)
    : names_(names), tracker_(names), ownership_(names, tracker_), recovery_(std::move(names), std::move(bounds), tracker_) {}

// What each checker's observe() does with its own tracker, with one tracker
// applied once.
void LeaseCheckers::observe(const sim::TraceEvent& event) {
  LP_ASSERT_MSG(!finished_, "event at {} observed after finish", event.true_time);
  if (tracker_.begins_new_instant(event)) settle();
  switch (event.kind) {
    case sim::EventKind::send:
    case sim::EventKind::deliver:
    case sim::EventKind::drop:
    case sim::EventKind::queued:
    case sim::EventKind::timer:
    case sim::EventKind::timeout:
      // Four events in five; none changes who acts or opens a fault window.
      // The tracker still takes the node's clock readings (for reports).
      // Timeouts are counted against the watcher's bound's assumption.
      tracker_.apply(event);
      if (event.kind == sim::EventKind::send) ownership_.on_send(event);
      if (event.kind == sim::EventKind::timeout) recovery_.on_timeout(event);
      return;
    default: break;
  }
  ownership_.before_apply(event);
  tracker_.apply(event);
  ownership_.after_apply(event);  // takes the tracker's errors: it reports them
  recovery_.after_apply(event);
  if (acquire_rate_) acquire_rate_->observe(event);
  if (request_rate_) request_rate_->observe(event);
}

void LeaseCheckers::settle() {
  ownership_.settle(tracker_.now());
  recovery_.settle(tracker_.now());
  tracker_.clear_touched();
}

void LeaseCheckers::add_fault_window(Instant start, Instant end, std::string label, NodeId node) {
  recovery_.add_fault_window(start, end, std::move(label), node);
}

void LeaseCheckers::finish(Instant end) {
  finished_ = true;
  ownership_.finish(end);
  recovery_.finish(end);
  tracker_.clear_touched();
}

void LeaseCheckers::check_liveness(Instant healed_at, Duration bound, Instant end) {
  finished_ = true;
  ownership_.finish(end);
  recovery_.check_liveness(healed_at, bound, end);
  tracker_.clear_touched();
}

std::vector<std::string> LeaseCheckers::violations() const {
  std::vector<std::string> all;
  auto add = [&](const std::vector<std::string>& from) {
    for (const std::string& text : from) {
      all.push_back(reproduce_.empty() ? text : fmt::format("{}\n  reproduce: {}", text, reproduce_));
    }
  };
  add(ownership_.violations());
  add(recovery_.violations());
  if (acquire_rate_) add(acquire_rate_->violations());
  if (request_rate_) add(request_rate_->violations());
  return all;
}

std::string LeaseCheckers::summary() const {
  std::string text = fmt::format("{}\n{}", ownership_.summary(), recovery_.summary());
  if (acquire_rate_) {
    text += fmt::format("\nacquires: {} sent, at most {} of one connection by one worker within a lease (a storm: more "
                        "than {})",
                        acquire_rate_->acquires(), acquire_rate_->most_within_a_lease(),
                        AcquireRateChecker::kAcquiresPerLeaseMax);
  }
  if (request_rate_) {
    text += fmt::format("\nrequests: {} sent, at most {} about one connection by one worker within a lease (bound {}), "
                        "at most {} naming none (bound {})",
                        request_rate_->requests(), request_rate_->most_per_connection(),
                        request_rate_->bounds().describe_per_connection(), request_rate_->most_without_connection(),
                        request_rate_->bounds().describe_without_connection());
  }
  return text;
}

}  // namespace leaseproof::properties
