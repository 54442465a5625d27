#include "models/sqs.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include <fmt/format.h>

namespace leaseproof::models {
namespace {

// Message types are static strings (the trace keeps views of them).
constexpr std::string_view kSendType = "sqs.send";
constexpr std::string_view kReceiveType = "sqs.receive";
constexpr std::string_view kDeleteType = "sqs.delete";
constexpr std::string_view kChangeVisibilityType = "sqs.change_visibility";
constexpr std::string_view kReplyType = "sqs.reply";

constexpr uint32_t kEnvelopeBytes = 256;  // headers and framing, roughly

uint32_t saturated_bytes(size_t bytes) {
  return static_cast<uint32_t>(std::min<size_t>(bytes, UINT32_MAX));
}

}  // namespace

std::string_view to_string(SqsError error) {
  switch (error) {
    case SqsError::none: return "none";
    case SqsError::queue_does_not_exist: return "queue_does_not_exist";
    case SqsError::invalid_parameter: return "invalid_parameter";
    case SqsError::receipt_handle_expired: return "receipt_handle_expired";
    case SqsError::receipt_handle_invalid: return "receipt_handle_invalid";
    case SqsError::over_limit: return "over_limit";
    case SqsError::message_not_in_flight: return "message_not_in_flight";
  }
  LP_UNREACHABLE("sqs error {}", static_cast<int>(error));
}

// ---- SqsQueue -------------------------------------------------------------------

SqsError SqsQueue::check_send(const SqsSendRequest& request) const {
  const auto id_ok = [this](const std::string& id) { return !id.empty() && id.size() <= options_.id_chars_max; };
  if (!id_ok(request.group_id) || !id_ok(request.deduplication_id)) return SqsError::invalid_parameter;
  if (request.body.empty() || request.body.size() > options_.body_bytes_max) return SqsError::invalid_parameter;
  return SqsError::none;
}

void SqsQueue::forget_expired_deduplication(Instant now) {
  while (!deduplication_expiry_.empty()) {
    auto oldest = deduplication_expiry_.begin();
    if (now - oldest->first < options_.deduplication_window) break;
    deduplication_.erase(oldest->second);
    deduplication_expiry_.erase(oldest);
  }
}

SqsSendReply SqsQueue::send(const SqsSendRequest& request, Instant now) {
  SqsSendReply reply;
  reply.error = check_send(request);
  if (reply.error != SqsError::none) return reply;
  forget_expired_deduplication(now);
  if (auto seen = deduplication_.find(request.deduplication_id); seen != deduplication_.end()) {
    LP_ASSERT_LT(now - seen->second.first_sent, options_.deduplication_window);
    reply.sequence_number = seen->second.sequence_number;
    reply.deduplicated = true;
    return reply;
  }
  if (messages_.size() >= options_.messages_max) {
    reply.error = SqsError::over_limit;
    return reply;
  }
  const uint64_t sequence_number = next_sequence_number_++;
  Stored stored;
  stored.message.sequence_number = sequence_number;
  stored.message.group_id = request.group_id;
  stored.message.deduplication_id = request.deduplication_id;
  stored.message.body = request.body;
  stored.invisible_until = now;  // visible at once
  messages_.emplace(sequence_number, std::move(stored));
  groups_[request.group_id].insert(sequence_number);
  deduplication_.emplace(request.deduplication_id, DeduplicationEntry{sequence_number, now});
  deduplication_expiry_.emplace(now, request.deduplication_id);
  reply.sequence_number = sequence_number;
  return reply;
}

// A group is available when none of its messages is in flight. Receives take
// a prefix of an available group and deletes keep a prefix, but a visibility
// change can return any one message, so every message of the group is looked
// at (groups are short: one per connection here).
SqsReceiveReply SqsQueue::receive(const SqsReceiveRequest& request, Instant now) {
  SqsReceiveReply reply;
  if (request.messages_max == 0 || request.messages_max > options_.receive_messages_max ||
      request.visibility_timeout.is_negative() || request.visibility_timeout > options_.visibility_timeout_max ||
      request.wait_time.is_negative() || request.wait_time > options_.receive_wait_max) {
    reply.error = SqsError::invalid_parameter;
    return reply;
  }
  std::vector<std::pair<uint64_t, const std::set<uint64_t>*>> available;  // (first message, group)
  for (const auto& [group_id, sequence_numbers] : groups_) {
    LP_ASSERT(!sequence_numbers.empty());
    const bool busy = std::any_of(sequence_numbers.begin(), sequence_numbers.end(),
                                  [&](uint64_t sequence_number) { return in_flight(messages_.at(sequence_number), now); });
    if (busy) continue;
    available.emplace_back(*sequence_numbers.begin(), &sequence_numbers);
  }
  std::sort(available.begin(), available.end());
  const Instant invisible_until = now + request.visibility_timeout;
  for (const auto& [first, sequence_numbers] : available) {
    for (uint64_t sequence_number : *sequence_numbers) {
      if (reply.messages.size() == request.messages_max) return reply;
      Stored& stored = messages_.at(sequence_number);
      LP_ASSERT(!in_flight(stored, now));
      stored.message.receive_count += 1;
      stored.message.receipt_handle = SqsReceiptHandle{sequence_number, stored.message.receive_count};
      stored.invisible_until = invisible_until;
      reply.messages.push_back(stored.message);
    }
  }
  return reply;
}

SqsError SqsQueue::check_handle(const SqsReceiptHandle& handle, Instant now, Stored** stored) {
  if (handle.sequence_number == 0 || handle.sequence_number >= next_sequence_number_ || handle.receive_count == 0) {
    return SqsError::receipt_handle_invalid;
  }
  auto found = messages_.find(handle.sequence_number);
  if (found == messages_.end()) return SqsError::message_not_in_flight;  // deleted
  if (handle.receive_count > found->second.message.receive_count) return SqsError::receipt_handle_invalid;
  if (handle.receive_count < found->second.message.receive_count || !in_flight(found->second, now)) {
    return SqsError::receipt_handle_expired;
  }
  *stored = &found->second;
  return SqsError::none;
}

SqsDeleteReply SqsQueue::remove(const SqsDeleteRequest& request, Instant now) {
  SqsDeleteReply reply;
  Stored* stored = nullptr;
  const SqsError error = check_handle(request.receipt_handle, now, &stored);
  if (error == SqsError::message_not_in_flight) return reply;  // deleted before: success, nothing to do
  reply.error = error;
  if (error != SqsError::none) return reply;
  const uint64_t sequence_number = request.receipt_handle.sequence_number;
  auto group = groups_.find(stored->message.group_id);
  LP_ASSERT(group != groups_.end());
  group->second.erase(sequence_number);
  if (group->second.empty()) groups_.erase(group);
  messages_.erase(sequence_number);
  reply.deleted = true;
  return reply;
}

SqsChangeVisibilityReply SqsQueue::change_visibility(const SqsChangeVisibilityRequest& request, Instant now) {
  SqsChangeVisibilityReply reply;
  if (request.visibility_timeout.is_negative() || request.visibility_timeout > options_.visibility_timeout_max) {
    reply.error = SqsError::invalid_parameter;
    return reply;
  }
  Stored* stored = nullptr;
  reply.error = check_handle(request.receipt_handle, now, &stored);
  if (reply.error == SqsError::none) stored->invisible_until = now + request.visibility_timeout;
  return reply;
}

size_t SqsQueue::in_flight_count(Instant now) const {
  return static_cast<size_t>(std::count_if(messages_.begin(), messages_.end(),
                                           [&](const auto& entry) { return in_flight(entry.second, now); }));
}

const SqsReceivedMessage* SqsQueue::find(uint64_t sequence_number) const {
  auto found = messages_.find(sequence_number);
  return found == messages_.end() ? nullptr : &found->second.message;
}

Instant SqsQueue::next_visible(Instant now) const {
  Instant next = Instant::max();
  for (const auto& [sequence_number, stored] : messages_) {
    if (in_flight(stored, now)) next = std::min(next, stored.invisible_until);
  }
  return next;
}

// ---- SqsState -------------------------------------------------------------------

bool SqsState::create_queue(const std::string& name, SqsQueueOptions options) {
  return queues_.try_emplace(name, options).second;
}

SqsQueue* SqsState::queue(std::string_view name) {
  auto found = queues_.find(name);
  return found == queues_.end() ? nullptr : &found->second;
}

const SqsQueue* SqsState::queue(std::string_view name) const {
  auto found = queues_.find(name);
  return found == queues_.end() ? nullptr : &found->second;
}

// ---- SqsNode --------------------------------------------------------------------

void SqsNode::on_start(sim::NodeContext&) {}

void SqsNode::on_message(sim::NodeContext& context, const sim::Envelope& envelope) {
  LP_ASSERT(envelope.expects_reply);
  const SqsRequest& request = envelope.message.as<SqsRequest>();
  SqsAnswer reply =
      std::visit([&](const auto& operation) -> SqsAnswer { return handle(context, operation); }, request.operation);
  const auto* received = std::get_if<SqsReceiveReply>(&reply);
  const auto* receive = std::get_if<SqsReceiveRequest>(&request.operation);
  if (received != nullptr && received->error == SqsError::none && received->messages.empty() &&
      receive->wait_time > Duration::zero()) {
    held_.push_back(Held{envelope, context.monotonic() + receive->wait_time});
    schedule_held(context);
    return;
  }
  answer(context, envelope, std::move(reply));
  // A send, a delete or a visibility change may have made messages receivable.
  if (received == nullptr && !held_.empty()) serve_held(context);
}

void SqsNode::answer(sim::NodeContext& context, const sim::Envelope& request, SqsAnswer reply) {
  size_t bytes = kEnvelopeBytes;
  if (const auto* received = std::get_if<SqsReceiveReply>(&reply); received != nullptr) {
    for (const SqsReceivedMessage& message : received->messages) bytes += message.body.size();
  }
  context.reply(request,
                sim::Message{kReplyType, saturated_bytes(bytes), std::make_shared<SqsReply>(std::move(reply))});
}

void SqsNode::serve_held(sim::NodeContext& context) {
  const Instant now = context.monotonic();
  std::vector<Held> waiting;
  waiting.swap(held_);
  for (Held& held : waiting) {
    const auto& receive = std::get<SqsReceiveRequest>(held.request.message.as<SqsRequest>().operation);
    SqsReceiveReply reply = handle(context, receive);  // the queue exists: it did when the receive was held
    if (reply.messages.empty() && now < held.until) {
      held_.push_back(std::move(held));
      continue;
    }
    answer(context, held.request, std::move(reply));
  }
  schedule_held(context);
}

void SqsNode::schedule_held(sim::NodeContext& context) {
  Instant next = Instant::max();
  const SqsQueue* scanned = nullptr;  // held receives are of one queue here: scan it once
  for (const Held& held : held_) {
    next = std::min(next, held.until);
    const auto& receive = std::get<SqsReceiveRequest>(held.request.message.as<SqsRequest>().operation);
    const SqsQueue* queue = state_.queue(receive.queue);
    if (queue == nullptr || queue == scanned) continue;
    scanned = queue;
    next = std::min(next, queue->next_visible(context.monotonic()));
  }
  if (next == held_timer_at_) return;
  context.cancel_timer(held_timer_);
  held_timer_at_ = next;
  if (next == Instant::max()) return;
  held_timer_ = context.set_timer(next - context.monotonic(), "sqs.wait", [this, &context] {
    held_timer_at_ = Instant::max();
    serve_held(context);
  });
}

// Trace details: "<queue> <group> <deduplication id>" and an outcome, so that
// checkers can follow each message; the value is its sequence number.
SqsSendReply SqsNode::handle(sim::NodeContext& context, const SqsSendRequest& request) {
  SqsQueue* queue = state_.queue(request.queue);
  SqsSendReply reply;
  if (queue == nullptr) {
    reply.error = SqsError::queue_does_not_exist;
  } else {
    reply = queue->send(request, context.monotonic());
  }
  const std::string_view outcome =
      reply.error != SqsError::none ? to_string(reply.error) : (reply.deduplicated ? "duplicate" : "enqueued");
  context.note("sqs.send",
               fmt::format("{} {} {} {}", request.queue, request.group_id, request.deduplication_id, outcome),
               static_cast<int64_t>(reply.sequence_number));
  return reply;
}

SqsReceiveReply SqsNode::handle(sim::NodeContext& context, const SqsReceiveRequest& request) {
  SqsQueue* queue = state_.queue(request.queue);
  SqsReceiveReply reply;
  if (queue == nullptr) {
    reply.error = SqsError::queue_does_not_exist;
  } else {
    reply = queue->receive(request, context.monotonic());
  }
  if (reply.error != SqsError::none) {
    context.note("sqs.receive", fmt::format("{} {}", request.queue, to_string(reply.error)));
  }
  for (const SqsReceivedMessage& message : reply.messages) {
    context.note("sqs.receive",
                 fmt::format("{} {} {} receive={}", request.queue, message.group_id, message.deduplication_id,
                             message.receive_count),
                 static_cast<int64_t>(message.sequence_number));
  }
  return reply;
}

namespace {

// "<group> <deduplication id>" of the message a handle names, or "- -" when
// the queue holds no such message; read before the request changes the queue.
std::string group_and_id(const SqsQueue* queue, const SqsReceiptHandle& handle) {
  const SqsReceivedMessage* message = queue != nullptr ? queue->find(handle.sequence_number) : nullptr;
  return message != nullptr ? message->group_id + " " + message->deduplication_id : "- -";
}

}  // namespace

SqsDeleteReply SqsNode::handle(sim::NodeContext& context, const SqsDeleteRequest& request) {
  SqsQueue* queue = state_.queue(request.queue);
  const std::string named = group_and_id(queue, request.receipt_handle);
  SqsDeleteReply reply;
  if (queue == nullptr) {
    reply.error = SqsError::queue_does_not_exist;
  } else {
    reply = queue->remove(request, context.monotonic());
  }
  const std::string_view outcome =
      reply.error != SqsError::none ? to_string(reply.error) : (reply.deleted ? "deleted" : "already_deleted");
  context.note("sqs.delete", fmt::format("{} {} {}", request.queue, named, outcome),
               static_cast<int64_t>(request.receipt_handle.sequence_number));
  return reply;
}

SqsChangeVisibilityReply SqsNode::handle(sim::NodeContext& context, const SqsChangeVisibilityRequest& request) {
  SqsQueue* queue = state_.queue(request.queue);
  const std::string named = group_and_id(queue, request.receipt_handle);
  SqsChangeVisibilityReply reply;
  if (queue == nullptr) {
    reply.error = SqsError::queue_does_not_exist;
  } else {
    reply = queue->change_visibility(request, context.monotonic());
  }
  const std::string_view outcome = reply.error != SqsError::none ? to_string(reply.error) : "changed";
  context.note("sqs.change_visibility",
               fmt::format("{} {} {} {}", request.queue, named, request.visibility_timeout, outcome),
               static_cast<int64_t>(request.receipt_handle.sequence_number));
  return reply;
}

// ---- client helpers -----------------------------------------------------------------

namespace {

template <typename Reply, typename Callback>
uint64_t call_sqs(sim::NodeContext& context, NodeId sqs_node, std::string_view type, size_t bytes,
                  SqsRequest request, Duration timeout, Callback on_reply) {
  LP_ASSERT(on_reply != nullptr);
  return context.call(sqs_node,
                      sim::Message{type, saturated_bytes(bytes), std::make_shared<SqsRequest>(std::move(request))},
                      timeout, [on_reply = std::move(on_reply)](const sim::Envelope* reply) {
                        if (reply == nullptr) {
                          on_reply(nullptr);
                          return;
                        }
                        const auto* typed = std::get_if<Reply>(&reply->message.as<SqsReply>().reply);
                        LP_ASSERT(typed != nullptr);
                        on_reply(typed);
                      });
}

}  // namespace

uint64_t sqs_send(sim::NodeContext& context, NodeId sqs_node, std::string queue, std::string group_id,
                  std::string deduplication_id, std::string body, Duration timeout, SqsSendCallback on_reply) {
  const size_t bytes = kEnvelopeBytes + body.size();
  SqsRequest request{
      SqsSendRequest{std::move(queue), std::move(group_id), std::move(deduplication_id), std::move(body)}};
  return call_sqs<SqsSendReply>(context, sqs_node, kSendType, bytes, std::move(request), timeout, std::move(on_reply));
}

uint64_t sqs_receive(sim::NodeContext& context, NodeId sqs_node, std::string queue, uint32_t messages_max,
                     Duration visibility_timeout, Duration timeout, SqsReceiveCallback on_reply,
                     Duration wait_time) {
  LP_ASSERT_MSG(wait_time < timeout, "a long poll of {} needs a timeout longer than it ({})", wait_time, timeout);
  SqsRequest request{SqsReceiveRequest{std::move(queue), messages_max, visibility_timeout, wait_time}};
  return call_sqs<SqsReceiveReply>(context, sqs_node, kReceiveType, kEnvelopeBytes, std::move(request), timeout,
                                   std::move(on_reply));
}

uint64_t sqs_delete(sim::NodeContext& context, NodeId sqs_node, std::string queue, SqsReceiptHandle receipt_handle,
                    Duration timeout, SqsDeleteCallback on_reply) {
  SqsRequest request{SqsDeleteRequest{std::move(queue), receipt_handle}};
  return call_sqs<SqsDeleteReply>(context, sqs_node, kDeleteType, kEnvelopeBytes, std::move(request), timeout,
                                  std::move(on_reply));
}

uint64_t sqs_change_visibility(sim::NodeContext& context, NodeId sqs_node, std::string queue,
                               SqsReceiptHandle receipt_handle, Duration visibility_timeout, Duration timeout,
                               SqsChangeVisibilityCallback on_reply) {
  SqsRequest request{SqsChangeVisibilityRequest{std::move(queue), receipt_handle, visibility_timeout}};
  return call_sqs<SqsChangeVisibilityReply>(context, sqs_node, kChangeVisibilityType, kEnvelopeBytes,
                                            std::move(request), timeout, std::move(on_reply));
}

}  // namespace leaseproof::models
