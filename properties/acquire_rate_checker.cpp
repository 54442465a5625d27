#include "properties/acquire_rate_checker.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "properties/lease_text.hpp"

namespace leaseproof::properties {

void AcquireRateChecker::observe(const sim::TraceEvent& event) {
  if (event.kind != sim::EventKind::note || event.label != "lease.request" || !event.detail.starts_with("acquire ")) {
    return;
  }
  const text::Words words = text::split_words(event.detail);
  if (words.size() < 2) return;  // the ownership checker reports a malformed note
  ++acquires_;
  const Instant now = event.true_time;
  auto& of_worker = recent_[event.node];
  auto found = of_worker.find(words[1]);
  if (found == of_worker.end()) found = of_worker.emplace(std::string{words[1]}, Recent{}).first;
  Recent& recent = found->second;
  while (!recent.sent.empty() && recent.sent.front() + lease_ <= now) recent.sent.pop_front();
  if (recent.sent.empty()) recent.reported = false;
  recent.sent.push_back(now);
  const auto count = static_cast<uint32_t>(recent.sent.size());
  most_ = std::max(most_, count);
  if (count <= kAcquiresPerLeaseMax || recent.reported) return;
  recent.reported = true;
  ++violation_count_;
  if (violations_.size() < kViolationsKept) {
    violations_.push_back(fmt::format(
        "acquire storm: {} sent {} acquires of connection {} from {} to {}, more than {} within one lease ({}): "
        "a refused acquire must wait for the lease to change or run out",
        text::node_name(names_, event.node), count, words[1], recent.sent.front(), now, kAcquiresPerLeaseMax, lease_));
  }
}

}  // namespace leaseproof::properties
