#pragma once
// A simulated Amazon SQS FIFO service served as a node of the simulated
// network. Callers see what a real client sees: a request can be lost, or
// applied with its reply lost, and both reach the caller as a timeout.
//
// The queues live in an SqsState owned outside the node's process (SQS is a
// durable service): a crash or restart of the node is an outage, never a loss.
// All times are readings of the SQS node's own monotonic clock, which keeps
// running across process restarts.
//
// Semantics (AWS SQS FIFO), and the choices made where the documentation
// leaves one:
// - Deduplication: a send whose MessageDeduplicationId was first accepted less
//   than `deduplication_window` (5 min) ago is acknowledged with the original's
//   sequence number and not enqueued. The window runs from the first accepted
//   send; duplicates do not extend it. Deleting the message does not end it.
// - Per-group ordering: while any message of a group is in flight (received,
//   not deleted, visibility timeout not expired), no message of that group is
//   returned. One receive returns as many messages of one group as it can (in
//   send order) before moving to the next group; groups are served oldest
//   first (by the sequence number of their first message).
// - At-least-once: a message not deleted before its visibility timeout expires
//   becomes visible again and is delivered again with an incremented receive
//   count and a new receipt handle.
// - Receipt handles name one receive of one message. Delete with the handle of
//   the message's latest receive while it is still in flight deletes it. A
//   handle whose visibility timeout expired (whether or not the message was
//   received again since) is refused with `receipt_handle_expired`, the error
//   SQS FIFO queues return, and nothing is deleted: the caller learns that the
//   message may be processed twice. Delete of a message already deleted
//   succeeds with `deleted = false` (SQS deletes are idempotent), so a retried
//   delete whose first reply was lost is harmless.
// - ChangeMessageVisibility: the handle of the message's latest receive, while
//   it is in flight, sets a new visibility timeout from now; zero makes the
//   message receivable at once (how a consumer that will not process a
//   message hands it back). A handle of an older receive, or one whose
//   visibility timeout expired, is refused with `receipt_handle_expired`; a
//   deleted message with `message_not_in_flight`. Nothing changes on a refusal.
// - A group is served only while none of its messages is in flight, whichever
//   they are (a visibility change can put a later message in flight alone).
// - Long polling: a receive with a wait time (WaitTimeSeconds, at most 20 s)
//   that finds nothing to return is held by the node instead of answered
//   empty. It is answered as soon as a message becomes receivable (a send; a
//   delete, a visibility change or an expired visibility timeout that frees a
//   group), or empty when its wait ends. Held receives are served oldest
//   first. A restart of the node loses them: their callers time out (SQS
//   gives no answer to a request it dropped), and what a lost receive would
//   have taken stays in the queue.
// - Not modelled: dead-letter queues, retention expiry,
//   content-based deduplication (a deduplication id is required), per-second
//   throughput limits, the 12-hour limit counted from the first receive.

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/time.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

// Expected failures of a request: values, never assertions.
enum class SqsError : uint8_t {
  none = 0,
  queue_does_not_exist,    // AWS.SimpleQueueService.NonExistentQueue
  invalid_parameter,       // out-of-range count, timeout, id length or body size
  receipt_handle_expired,  // ReceiptHandleIsInvalid: visibility timeout expired
  receipt_handle_invalid,  // a handle this queue never issued
  over_limit,              // the model's stored-message bound (messages_max) is reached
  message_not_in_flight,   // AWS.SimpleQueueService.MessageNotInflight: a visibility change of a deleted message
};
std::string_view to_string(SqsError error);

// Opaque to clients: names one receive of one message of one queue.
struct SqsReceiptHandle {
  uint64_t sequence_number = 0;
  uint32_t receive_count = 0;
  auto operator<=>(const SqsReceiptHandle&) const = default;
};

struct SqsQueueOptions {
  Duration deduplication_window = Duration::from_min(5);
  uint32_t receive_messages_max = 10;      // per ReceiveMessage call
  Duration receive_wait_max = Duration::from_s(20);  // WaitTimeSeconds
  Duration visibility_timeout_max = Duration::from_h(12);
  uint32_t id_chars_max = 128;             // group id and deduplication id
  uint32_t body_bytes_max = 256 * 1024;
  uint32_t messages_max = 120'000;         // stored messages; a send beyond it is refused (bound)
};

// ---- requests and replies (message payloads) ---------------------------------

struct SqsSendRequest {
  std::string queue;
  std::string group_id;
  std::string deduplication_id;
  std::string body;
};
struct SqsReceiveRequest {
  std::string queue;
  uint32_t messages_max = 1;
  Duration visibility_timeout;
  Duration wait_time = Duration::zero();  // zero: short polling (answer at once, maybe empty)
};
struct SqsDeleteRequest {
  std::string queue;
  SqsReceiptHandle receipt_handle;
};

struct SqsChangeVisibilityRequest {
  std::string queue;
  SqsReceiptHandle receipt_handle;
  Duration visibility_timeout;  // from now; zero: receivable at once
};

using SqsOperation = std::variant<SqsSendRequest, SqsReceiveRequest, SqsDeleteRequest, SqsChangeVisibilityRequest>;

struct SqsRequest final : sim::Payload {
  explicit SqsRequest(SqsOperation op) : operation(std::move(op)) {}
  SqsOperation operation;
};

struct SqsSendReply {
  SqsError error = SqsError::none;
  uint64_t sequence_number = 0;  // of the original message when deduplicated
  bool deduplicated = false;
};

struct SqsReceivedMessage {
  uint64_t sequence_number = 0;
  std::string group_id;
  std::string deduplication_id;
  std::string body;
  SqsReceiptHandle receipt_handle;
  uint32_t receive_count = 0;  // ApproximateReceiveCount: 1 on the first delivery
};
struct SqsReceiveReply {
  SqsError error = SqsError::none;
  std::vector<SqsReceivedMessage> messages;
};

struct SqsDeleteReply {
  SqsError error = SqsError::none;
  bool deleted = false;  // false with no error: it was already deleted
};

struct SqsChangeVisibilityReply {
  SqsError error = SqsError::none;
};

using SqsAnswer = std::variant<SqsSendReply, SqsReceiveReply, SqsDeleteReply, SqsChangeVisibilityReply>;

struct SqsReply final : sim::Payload {
  explicit SqsReply(SqsAnswer r) : reply(std::move(r)) {}
  SqsAnswer reply;
};

// ---- the durable state --------------------------------------------------------

class SqsQueue {
 public:
  explicit SqsQueue(SqsQueueOptions options) : options_(options) {}

  SqsSendReply send(const SqsSendRequest& request, Instant now);
  SqsReceiveReply receive(const SqsReceiveRequest& request, Instant now);
  SqsDeleteReply remove(const SqsDeleteRequest& request, Instant now);
  SqsChangeVisibilityReply change_visibility(const SqsChangeVisibilityRequest& request, Instant now);

  const SqsQueueOptions& options() const { return options_; }
  // Messages stored (visible or in flight), for tests and reports.
  size_t message_count() const { return messages_.size(); }
  size_t in_flight_count(Instant now) const;
  // The stored message with this sequence number, or nullptr (deleted or never sent).
  const SqsReceivedMessage* find(uint64_t sequence_number) const;
  // When the next in-flight message becomes visible again (Instant::max() if none is in flight).
  Instant next_visible(Instant now) const;

 private:
  struct Stored {
    SqsReceivedMessage message;   // receipt handle = that of the latest receive
    Instant invisible_until;      // in flight while now < invisible_until
  };
  struct DeduplicationEntry {
    uint64_t sequence_number = 0;
    Instant first_sent;
  };

  void forget_expired_deduplication(Instant now);
  bool in_flight(const Stored& stored, Instant now) const { return now < stored.invisible_until; }
  // The stored message this handle's receive returned, still in flight; or the error.
  SqsError check_handle(const SqsReceiptHandle& handle, Instant now, Stored** stored);
  SqsError check_send(const SqsSendRequest& request) const;

  SqsQueueOptions options_;
  uint64_t next_sequence_number_ = 1;
  std::map<uint64_t, Stored> messages_;                      // by sequence number = send order
  std::map<std::string, std::set<uint64_t>> groups_;         // group id -> its stored messages
  std::map<std::string, DeduplicationEntry> deduplication_;  // id -> first accepted send
  std::multimap<Instant, std::string> deduplication_expiry_; // first_sent -> id, for pruning
};

// Owned by the scenario; outlives every incarnation of the SQS node.
class SqsState {
 public:
  // Returns false if a queue of that name exists already.
  bool create_queue(const std::string& name, SqsQueueOptions options = {});
  SqsQueue* queue(std::string_view name);
  const SqsQueue* queue(std::string_view name) const;

 private:
  std::map<std::string, SqsQueue, std::less<>> queues_;
};

// ---- the node -----------------------------------------------------------------

class SqsNode final : public sim::Process {
 public:
  explicit SqsNode(SqsState& state) : state_(state) {}

  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;

  size_t held_receives() const { return held_.size(); }

 private:
  struct Held {
    sim::Envelope request;  // a receive with a wait time that found nothing yet
    Instant until;          // its wait ends (node's monotonic clock)
  };
  // Answers the held receives that now get messages, or whose wait ended,
  // oldest first; then sets the timer for the next of either.
  void serve_held(sim::NodeContext& context);
  void schedule_held(sim::NodeContext& context);
  void answer(sim::NodeContext& context, const sim::Envelope& request, SqsAnswer reply);

  SqsSendReply handle(sim::NodeContext& context, const SqsSendRequest& request);
  SqsReceiveReply handle(sim::NodeContext& context, const SqsReceiveRequest& request);
  SqsDeleteReply handle(sim::NodeContext& context, const SqsDeleteRequest& request);
  SqsChangeVisibilityReply handle(sim::NodeContext& context, const SqsChangeVisibilityRequest& request);

  SqsState& state_;
  std::vector<Held> held_;  // arrival order
  uint64_t held_timer_ = 0;
  Instant held_timer_at_ = Instant::max();
};

// ---- client helpers -------------------------------------------------------------
// Each callback gets the reply, or nullptr when the call timed out: the request
// may or may not have been applied (the ambiguous outcome).

using SqsSendCallback = std::function<void(const SqsSendReply* reply)>;
using SqsReceiveCallback = std::function<void(const SqsReceiveReply* reply)>;
using SqsDeleteCallback = std::function<void(const SqsDeleteReply* reply)>;
using SqsChangeVisibilityCallback = std::function<void(const SqsChangeVisibilityReply* reply)>;

uint64_t sqs_send(sim::NodeContext& context, NodeId sqs_node, std::string queue, std::string group_id,
                  std::string deduplication_id, std::string body, Duration timeout, SqsSendCallback on_reply);
// `wait_time` > 0: a long poll, answered when messages come or the wait ends;
// `timeout` must then be longer than the wait (as an SDK's is).
uint64_t sqs_receive(sim::NodeContext& context, NodeId sqs_node, std::string queue, uint32_t messages_max,
                     Duration visibility_timeout, Duration timeout, SqsReceiveCallback on_reply,
                     Duration wait_time = Duration::zero());
uint64_t sqs_delete(sim::NodeContext& context, NodeId sqs_node, std::string queue,
                    SqsReceiptHandle receipt_handle, Duration timeout, SqsDeleteCallback on_reply);
uint64_t sqs_change_visibility(sim::NodeContext& context, NodeId sqs_node, std::string queue,
                               SqsReceiptHandle receipt_handle, Duration visibility_timeout, Duration timeout,
                               SqsChangeVisibilityCallback on_reply);

}  // namespace leaseproof::models
