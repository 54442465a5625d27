#include "properties/lease_checkers.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "base/assert.hpp"

#include "properties/lease_text.hpp"
#include "properties/reading.hpp"

namespace leaseproof::properties {

using sim::EventKind;

namespace {

// Kinds of lease.request whose acceptance by DynamoDB the stale-write rule judges
// (plus acquire, which moves the latest acquirer). read and reconcile write
// nothing, but are still matched so that unmatched notes mean a broken join.
bool is_tracked_request(std::string_view kind) {
  return kind == "acquire" || kind == "renew" || kind == "release" || kind == "checkpoint" || kind == "record";
}

}  // namespace

OwnershipChecker::OwnershipChecker(NodeNamer names)
    : names_(names), own_tracker_(std::make_unique<ActingTracker>(std::move(names))), tracker_(own_tracker_.get()) {}

OwnershipChecker::OwnershipChecker(NodeNamer names, ActingTracker& shared)
    : names_(std::move(names)), tracker_(&shared) {}

std::string OwnershipChecker::name(WorkerIdentity worker) const { return text::worker_name(names_, worker); }

OwnershipChecker::Reading OwnershipChecker::reading_of(NodeId node) const {
  const ActingTracker::NodeView view = tracker_->node(node);
  return Reading{view.read_at, view.wall, view.monotonic};
}

void OwnershipChecker::violation(std::string text) {
  ++violation_count_;
  if (violations_.size() < kViolationsKept) violations_.push_back(std::move(text));
}

void OwnershipChecker::observe(const sim::TraceEvent& event) {
  LP_ASSERT_MSG(own_tracker_ != nullptr, "a shared tracker is fed by LeaseCheckers");
  if (tracker_->begins_new_instant(event)) {
    settle(tracker_->now());
    tracker_->clear_touched();
  }
  before_apply(event);
  tracker_->apply(event);
  if (event.kind == EventKind::send) on_send(event);
  after_apply(event);
}

void OwnershipChecker::before_apply(const sim::TraceEvent& event) {
  LP_ASSERT_MSG(!finished_, "event at {} observed after finish", event.true_time);
  if ((event.kind == EventKind::crash || event.kind == EventKind::exit) && event.node.valid()) {
    if (upstream_nodes_.contains(event.node)) {
      // The hub itself died: it notes no close for the sessions it held, and
      // none of them outlives it.
      drop_all_hub_sessions();
    } else {
      // The kernel closes a dead process's sockets: the hub sees its sessions end.
      drop_hub_sessions(name(tracker_->identity_of(event.node)));
    }
  }
}

void OwnershipChecker::on_send(const sim::TraceEvent& event) {
  if (event.node == control_node_ && control_node_.valid()) control_requests_.insert(event.id);
}

void OwnershipChecker::after_apply(const sim::TraceEvent& event) {
  for (std::string& error : tracker_->take_errors()) violation("trace contract: " + error);
  if (event.kind == EventKind::start && !control_node_.valid() && names_(event.node) == "control") {
    control_node_ = event.node;
  }

  if (event.kind != EventKind::note) return;
  if (event.label == "lease.request") {
    on_request(event);
  } else if (event.label == "upstream.open" || event.label == "upstream.close") {
    on_upstream(event);
  } else if (text::is_dynamodb_operation(event.label)) {
    on_dynamodb(event);
  } else if (event.label == "dynamo.item") {
    on_item_note(event);
  } else if (event.label == "lease.open") {
    on_open(event);
  }
}

// "<connection> <epoch>": the tracker reports a malformed one.
void OwnershipChecker::on_open(const sim::TraceEvent& event) {
  const text::Words words = text::split_words(event.detail);
  const std::optional<uint64_t> epoch = words.size() == 2 ? text::parse_u64(words[1]) : std::nullopt;
  if (!epoch || !tenure_epochs_judged_) return;
  const WorkerIdentity worker = tracker_->identity_of(event.node);
  const auto found = highest_tenure_.find(words[0]);
  if (found == highest_tenure_.end()) {
    highest_tenure_.emplace(std::string(words[0]), Tenure{worker, *epoch, event.true_time});
    return;
  }
  ++tenures_judged_by_epoch_;
  Tenure& highest = found->second;
  if (*epoch <= highest.epoch) {
    violation(fmt::format("single ownership: tenure opened under an epoch not above an earlier one's: connection {} "
                          "opened by {} at {} under epoch {}, after {}'s tenure of epoch {} (opened at {}): a late "
                          "write of either tenure is fenced from the other by nothing",
                          words[0], name(worker), event.true_time, *epoch, name(highest.worker), highest.epoch,
                          highest.opened_at));
    return;
  }
  highest = Tenure{worker, *epoch, event.true_time};
}

void OwnershipChecker::finish(Instant end) {
  if (finished_) return;
  finished_ = true;
  LP_ASSERT_GE(end, tracker_->now());
  settle(tracker_->now());
  if (own_tracker_) tracker_->clear_touched();
  // An overlap that began at the very end has no length: not a violation.
  for (const auto& [connection, ongoing] : overlaps_) {
    for (const auto& [pair, start] : ongoing) {
      if (end > start.began) report_overlap(connection, pair, start, end);
    }
  }
  overlaps_.clear();
  for (auto& [connection, hub] : hub_) {
    if (hub.overlap_since) end_hub_overlap(connection, hub, end);
  }
}

void OwnershipChecker::settle(Instant at) {
  for (const std::string& connection : tracker_->touched()) settle_acting(connection, at);
  for (const std::string& connection : std::exchange(hub_touched_, {})) settle_hub(connection, at);
}

void OwnershipChecker::settle_acting(const std::string& connection, Instant at) {
  ++overlaps_checked_;
  const std::vector<WorkerIdentity> acting = tracker_->acting(connection);
  std::set<Pair> current;
  for (size_t i = 0; i < acting.size(); ++i) {
    for (size_t j = i + 1; j < acting.size(); ++j) current.emplace(acting[i], acting[j]);
  }
  std::map<Pair, OverlapStart>& ongoing = overlaps_[connection];
  for (auto it = ongoing.begin(); it != ongoing.end();) {
    if (current.contains(it->first)) {
      ++it;
      continue;
    }
    report_overlap(connection, it->first, it->second, at);
    it = ongoing.erase(it);
  }
  for (const Pair& pair : current) {
    if (ongoing.contains(pair)) continue;
    const ActingTracker::Session* first = tracker_->session(connection, pair.first);
    const ActingTracker::Session* second = tracker_->session(connection, pair.second);
    LP_ASSERT(first != nullptr && second != nullptr);
    ongoing.emplace(pair, OverlapStart{at, reading_of(pair.first.node), reading_of(pair.second.node), *first,
                                       *second});
  }
  if (ongoing.empty()) overlaps_.erase(connection);
}

void OwnershipChecker::report_overlap(const std::string& connection, const Pair& pair, const OverlapStart& start,
                                      Instant ended) {
  auto describe = [&](WorkerIdentity worker, const ActingTracker::Session& session, const Reading& reading) {
    return fmt::format(
        "{} (epoch {}, session opened at {}, acting since {}{}; its last clock readings, at {}: wall {}, "
        "monotonic {})",
        name(worker), session.epoch, session.opened_at, session.acting_since,
        session.resumed ? " when it resumed" : "", reading.read_at, text::wall_reading(reading.wall, reading.read_at),
        reading.monotonic);
  };
  violation(fmt::format("single ownership: connection {} had two acting owners for {}, from {} to {}: {} and {}",
                        connection, ended - start.began, start.began, ended,
                        describe(pair.first, start.first_session, start.first_reading),
                        describe(pair.second, start.second_session, start.second_reading)));
}

void OwnershipChecker::on_request(const sim::TraceEvent& event) {
  const text::Words words = text::split_words(event.detail);
  // A sink write adds the range it writes: "<kind> <connection> <epoch> <range>".
  const bool sized = words.size() == 3 || words.size() == 4;
  const std::optional<uint64_t> epoch = sized ? text::parse_u64(words[2]) : std::nullopt;
  if (!epoch || event.value <= 0) {
    violation(fmt::format("trace contract: malformed lease.request (detail '{}', message {}) at {}", event.detail,
                          event.value, event.true_time));
    return;
  }
  requests_[static_cast<uint64_t>(event.value)] =
      Request{tracker_->identity_of(event.node), std::string(words[0]), std::string(words[1]), *epoch};
}

void OwnershipChecker::on_dynamodb(const sim::TraceEvent& event) {
  const auto found = event.value > 0 ? requests_.find(static_cast<uint64_t>(event.value)) : requests_.end();
  if (found == requests_.end()) {
    // Requests no worker noted: the control plane's (tables, starts, stops).
    if (event.value > 0 && control_requests_.erase(static_cast<uint64_t>(event.value)) != 0) {
      ++control_dynamodb_notes_;
    } else {
      ++unmatched_dynamodb_notes_;
    }
    return;
  }
  const Request request = std::move(found->second);
  requests_.erase(found);  // a request message is applied (or refused) once
  if (!is_tracked_request(request.kind)) return;
  if (event.detail == "ok") {
    last_applied_message_ = static_cast<uint64_t>(event.value);
    last_applied_connection_ = request.connection;
    check_write(request, event.true_time, static_cast<uint64_t>(event.value));
  } else if (request.kind != "acquire") {
    const auto view = dynamo_.find(request.connection);
    if (view != dynamo_.end() && view->second.epoch && request.epoch < *view->second.epoch) ++stale_epoch_refused_;
  }
}

// "lease_epoch <n>" (or "lease_epoch -": gone) after the write just applied.
void OwnershipChecker::on_item_note(const sim::TraceEvent& event) {
  if (event.value <= 0 || static_cast<uint64_t>(event.value) != last_applied_message_) return;  // not a lease write
  const text::Words words = text::split_words(event.detail);
  if (words.size() != 2) {
    violation(fmt::format("trace contract: malformed dynamo.item detail '{}' at {}", event.detail, event.true_time));
    return;
  }
  DynamoView& view = dynamo_[last_applied_connection_];
  if (words[1] == "-") {
    view.epoch.reset();
  } else if (const std::optional<uint64_t> epoch = text::parse_u64(words[1])) {
    view.epoch = *epoch;
  } else {
    violation(fmt::format("trace contract: malformed dynamo.item detail '{}' at {}", event.detail, event.true_time));
  }
}

void OwnershipChecker::check_write(const Request& request, Instant at, uint64_t message) {
  DynamoView& view = dynamo_[request.connection];
  if (request.kind == "acquire") {
    view.latest = Acquirer{request.worker, request.epoch, at};
    view.released_at.reset();
    return;
  }
  ++writes_checked_;
  bool stale = false;
  if (view.epoch) {
    // The epoch this write was accepted under is the sender's tenure; the
    // item's, the newest tenure DynamoDB granted. Older: a fenced request got
    // through, whoever sent it (the same worker may have taken the lease back).
    ++writes_judged_by_epoch_;
    if (request.epoch < *view.epoch) {
      violation(fmt::format("single ownership: write accepted under a stale epoch: {} of connection {} from {} "
                            "(epoch {}, request message {}) applied by DynamoDB at {} while the lease's epoch was {}",
                            request.kind, request.connection, name(request.worker), request.epoch, message, at,
                            *view.epoch));
      stale = true;
    }
  }
  if (!stale && (!view.latest || view.latest->worker != request.worker)) {
    std::string latest;
    if (view.latest) {
      latest = fmt::format("{} (epoch {}, acquire applied at {})", name(view.latest->worker), view.latest->epoch,
                           view.latest->at);
    } else if (view.released_at) {
      latest = fmt::format("none (released at {})", *view.released_at);
    } else {
      latest = "none (no acquire applied yet)";
    }
    violation(fmt::format("single ownership: write accepted under a stale lease: {} of connection {} from {} "
                          "(epoch {}, request message {}) applied by DynamoDB at {}; latest acquirer: {}",
                          request.kind, request.connection, name(request.worker), request.epoch, message, at,
                          latest));
  }
  if (request.kind == "release") {
    view.latest.reset();
    view.released_at = at;
  }
}

void OwnershipChecker::on_upstream(const sim::TraceEvent& event) {
  const text::Words words = text::split_words(event.detail);
  if (words.size() != 2) {
    violation(fmt::format("trace contract: malformed {} detail '{}' at {}", event.label, event.detail,
                          event.true_time));
    return;
  }
  upstream_nodes_.insert(event.node);
  const std::string connection(words[0]);
  HubState& hub = hub_[connection];
  const std::string worker(words[1]);
  if (event.label == "upstream.open") {
    ++hub.open_by_worker[worker];
  } else if (const auto found = hub.open_by_worker.find(worker); found != hub.open_by_worker.end()) {
    if (--found->second == 0) hub.open_by_worker.erase(found);
  }
  hub_touched_.insert(connection);
}

void OwnershipChecker::drop_all_hub_sessions() {
  for (auto& [connection, hub] : hub_) {
    if (hub.open_by_worker.empty()) continue;
    hub.open_by_worker.clear();
    hub_touched_.insert(connection);
  }
}

void OwnershipChecker::drop_hub_sessions(const std::string& worker) {
  for (auto& [connection, hub] : hub_) {
    if (hub.open_by_worker.erase(worker) != 0) hub_touched_.insert(connection);
  }
}

void OwnershipChecker::settle_hub(const std::string& connection, Instant at) {
  HubState& hub = hub_[connection];
  uint64_t open = 0;
  for (const auto& [worker, count] : hub.open_by_worker) open += count;
  if (open >= 2 && !hub.overlap_since) {
    hub.overlap_since = at;
  } else if (open < 2 && hub.overlap_since) {
    end_hub_overlap(connection, hub, at);
  }
}

void OwnershipChecker::end_hub_overlap(const std::string& connection, HubState& hub, Instant at) {
  const Duration length = at - *hub.overlap_since;
  hub.overlap_since.reset();
  if (!length.is_negative() && !length.is_zero()) {
    HubOverlap& figures = hub_overlaps_[connection];
    ++figures.episodes;
    figures.total += length;
    figures.longest = std::max(figures.longest, length);
  }
}

uint64_t OwnershipChecker::hub_overlap_episodes() const {
  uint64_t episodes = 0;
  for (const auto& [connection, figures] : hub_overlaps_) episodes += figures.episodes;
  return episodes;
}

Duration OwnershipChecker::hub_overlap_time() const {
  Duration total = Duration::zero();
  for (const auto& [connection, figures] : hub_overlaps_) total += figures.total;
  return total;
}

std::string OwnershipChecker::summary() const {
  Duration longest = Duration::zero();
  for (const auto& [connection, figures] : hub_overlaps_) longest = std::max(longest, figures.longest);
  return fmt::format(
      "single ownership: {} violations; checked {} acting intervals, {} overlap evaluations, {} writes ({} "
      "judged by epoch; {} requests of a stale epoch refused; {} DynamoDB notes of the control plane's requests, "
      "{} of others matched no lease.request), {} tenures' epochs compared with the one before\n"
      "hub-side overlapping sessions: {} episodes on {} connections, {} in total, longest {} (figures, not "
      "violations: a paused or cut-off owner's socket stays open at the hub until it is closed)",
      violation_count_, acting_intervals(), overlaps_checked_, writes_checked_, writes_judged_by_epoch_,
      stale_epoch_refused_, control_dynamodb_notes_,
      unmatched_dynamodb_notes_, tenures_judged_by_epoch_, hub_overlap_episodes(), hub_overlaps_.size(), for_reading(hub_overlap_time()),
      for_reading(longest));
}

}  // namespace leaseproof::properties
