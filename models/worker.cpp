#include "models/worker.hpp"

#include <iterator>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "models/dynamo/node.hpp"
#include "models/sqs.hpp"

namespace leaseproof::models {
namespace {

constexpr std::string_view kOpen = "upstream.open";
constexpr std::string_view kClose = "upstream.close";
constexpr Duration kSqsVisibility = Duration::from_s(30);

lease::Clock clock_of(const sim::NodeContext& context) { return lease::Clock{context.wall(), context.monotonic()}; }

}  // namespace

bool WorkerProcess::Faults::fire(const char* site) {
  auto it = environment_.fault_sites.find(std::string_view{site});
  return it != environment_.fault_sites.end() && context_.fault(it->second);
}

void WorkerProcess::on_start(sim::NodeContext& context) {
  context_ = &context;
  // A restarted task is a new process; it is a new worker too unless worker
  // ids are stable (then its predecessor's leases name it).
  process_id_ = fmt::format("{}#{}", context.name(), context.incarnation().value);
  worker_id_ = !environment_.worker_id.empty()       ? environment_.worker_id
               : environment_.stable_worker_ids ? std::string(context.name())
                                                : process_id_;
  random_ = std::make_unique<NodeRandom>(context);
  faults_ = std::make_unique<Faults>(context, environment_);
  manager_.emplace(environment_.config, worker_id_, *random_, *faults_);
  run([&](lease::Actions& out) { manager_->start(clock_of(context), out); });
  if (environment_.notify_releases) poll_releases(environment_.sqs_poll_interval);
}

template <typename Step>
void WorkerProcess::run(Step step) {
  lease::Actions actions;
  step(actions);
  apply(actions);
  schedule_timer();
}

void WorkerProcess::apply(lease::Actions& actions) {
  sim::NodeContext& context = *context_;
  for (lease::Action& action : actions) {
    if (auto* call = std::get_if<lease::DynamoCall>(&action)) {
      const uint64_t token = call->token;
      fmt::memory_buffer detail;  // on the stack: a note per call, no allocation
      fmt::format_to(std::back_inserter(detail), FMT_COMPILE("{} {} {}"), lease::to_string(call->kind),
                     call->connection.empty() ? "-" : call->connection, call->epoch);
      const uint64_t message = call_dynamo(context, environment_.dynamo, std::move(call->request),
                                           environment_.config.request_timeout,
                                           [this, token](const dynamo::Result<dynamo::Response>* result) {
                                             run([&](lease::Actions& out) {
                                               manager_->on_reply(token, result, clock_of(*context_), out);
                                             });
                                           });
      context.note("lease.request", std::string_view{detail.data(), detail.size()}, static_cast<int64_t>(message));
    } else if (auto* open = std::get_if<lease::OpenSession>(&action)) {
      context.note("lease.open", fmt::format("{} {}", open->connection, open->epoch), open->epoch);
      if (environment_.stream) {
        open_stream(*open);
      } else {
        context.send(environment_.upstream,
                     sim::Message{kOpen, 64, std::make_shared<SessionPayload>(open->connection, process_id_)});
      }
    } else if (auto* close = std::get_if<lease::CloseSession>(&action)) {
      context.note("lease.close", fmt::format("{} {} {}", close->connection, close->epoch, lease::to_string(close->reason)),
                   close->epoch);
      if (environment_.stream) {
        close_stream(close->connection);
      } else {
        context.send(environment_.upstream,
                     sim::Message{kClose, 64, std::make_shared<SessionPayload>(close->connection, process_id_)});
      }
    } else if (auto* notify = std::get_if<lease::NotifyReleased>(&action)) {
      if (!environment_.notify_releases) continue;
      // Group by connection (FIFO order per connection only); the core's
      // deduplication id names this release, so only a resend is dropped.
      sqs_send(context, environment_.sqs, environment_.release_queue, notify->connection,
               notify->deduplication_id, notify->connection, environment_.sqs_timeout,
               [](const SqsSendReply*) {});
    } else if (std::holds_alternative<lease::DrainComplete>(action)) {
      exit_when_sqs_idle();
      return;
    } else if (auto* mark = std::get_if<lease::Mark>(&action)) {
      context.note("mark", mark->name);
    } else if (auto* watch = std::get_if<lease::WatchChange>(&action)) {
      context.note(watch->armed ? "lease.watch" : "lease.unwatch", watch->connection);
    }
  }
}

// A worker resuming from a pause finds its queued input and its overdue
// timers; it must stop acting on leases whose deadline passed before it
// touches their streams (docs/lease-core.md: check the deadline before acting).
void WorkerProcess::expire_leases() {
  if (manager_ && manager_->next_deadline() <= context_->monotonic()) {
    run([&](lease::Actions& out) { manager_->on_timer(clock_of_worker(), out); });
  }
}

void WorkerProcess::schedule_timer() {
  if (!manager_ || context_ == nullptr) return;
  const Instant next = manager_->next_deadline();
  if (next == timer_at_) return;
  context_->cancel_timer(timer_);
  timer_at_ = next;
  if (next == Instant::max()) return;
  const Duration delay = std::max(Duration::zero(), next - context_->monotonic());
  timer_ = context_->set_timer(delay, "lease.timer", [this] {
    timer_at_ = Instant::max();
    run([&](lease::Actions& out) { manager_->on_timer(clock_of(*context_), out); });
  });
}

void WorkerProcess::on_message(sim::NodeContext&, const sim::Envelope& envelope) {
  LP_ASSERT_MSG(environment_.stream && (envelope.message.type == ws::kFrame || envelope.message.type == ws::kClose),
                "worker got an unexpected '{}'", envelope.message.type);
  on_stream_message(envelope);
}

void WorkerProcess::on_sigterm(sim::NodeContext& context) {
  run([&](lease::Actions& out) { manager_->on_sigterm(clock_of(context), out); });
}

void WorkerProcess::poll_releases(Duration wait) {
  sim::NodeContext& context = *context_;
  context.set_timer(wait, "sqs.poll", [this] {
    if (manager_->draining()) return;
    // Take only the notices this worker can act on: at capacity, none (they
    // stay queued for a worker with room, or until this one has room again).
    const uint32_t room = manager_->room();
    if (room == 0) {
      context_->note("mark", "worker.release_poll_skipped_full");
      poll_releases(environment_.sqs_poll_interval);
      return;
    }
    ++sqs_in_flight_;
    const Duration long_poll = environment_.sqs_wait;
    sqs_receive(*context_, environment_.sqs, environment_.release_queue, std::min<uint32_t>(room, 10), kSqsVisibility,
                long_poll + environment_.sqs_timeout,
                [this, long_poll](const SqsReceiveReply* reply) {
                  --sqs_in_flight_;
                  // A non-empty answer may have left more behind, and a long
                  // poll's empty answer means its wait ran out: either way,
                  // ask again at once. Otherwise after the interval.
                  const bool more = reply != nullptr && (!reply->messages.empty() || long_poll > Duration::zero());
                  if (reply != nullptr) {
                    for (const SqsReceivedMessage& message : reply->messages) {
                      if (manager_->draining()) {
                        hand_back(message, "worker.release_notice_handed_back");
                        continue;
                      }
                      bool taken = true;
                      run([&](lease::Actions& out) {
                        taken = manager_->on_released(message.body, clock_of(*context_), out);
                      });
                      // Room taken since the receive (a sweep's acquires): another worker's.
                      if (!taken) {
                        hand_back(message, "worker.release_notice_no_room");
                        continue;
                      }
                      sqs_delete(*context_, environment_.sqs, environment_.release_queue, message.receipt_handle,
                                 environment_.sqs_timeout, [](const SqsDeleteReply*) {});
                    }
                  }
                  if (drained_) {
                    exit_when_sqs_idle();
                    return;
                  }
                  poll_releases(more ? Duration::zero() : environment_.sqs_poll_interval);
                },
                long_poll);
  });
}

void WorkerProcess::hand_back(const SqsReceivedMessage& message, std::string_view mark) {
  context_->note("mark", mark);
  ++sqs_in_flight_;
  sqs_change_visibility(*context_, environment_.sqs, environment_.release_queue, message.receipt_handle,
                        Duration::zero(), environment_.sqs_timeout, [this](const SqsChangeVisibilityReply*) {
                          --sqs_in_flight_;
                          if (drained_) exit_when_sqs_idle();
                        });
}

void WorkerProcess::exit_when_sqs_idle() {
  if (sqs_in_flight_ > 0) {
    if (!drained_) context_->note("mark", "worker.exit_waits_for_sqs");
    drained_ = true;
    return;
  }
  drained_ = true;
  context_->note("lease.drained");
  context_->exit();
}

void UpstreamEndpoint::on_message(sim::NodeContext& context, const sim::Envelope& envelope) {
  const auto& session = envelope.message.as<SessionPayload>();
  const std::string detail = fmt::format("{} {}", session.connection, session.worker);
  if (envelope.message.type == kOpen) {
    sessions_[session.connection].insert(session.worker);
    context.note("upstream.open", detail, static_cast<int64_t>(sessions_[session.connection].size()));
  } else {
    LP_ASSERT(envelope.message.type == kClose);
    sessions_[session.connection].erase(session.worker);
    context.note("upstream.close", detail, static_cast<int64_t>(sessions_[session.connection].size()));
  }
}

}  // namespace leaseproof::models
