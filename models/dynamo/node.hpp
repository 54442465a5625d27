#pragma once
// The simulated DynamoDB served as a node of the simulated network: requests
// and replies cross links with latency, loss and partitions, so a caller sees
// exactly what a real client sees, including the ambiguous outcome (a write
// applied whose reply was lost reaches the caller as a timeout).
//
// The store outlives the node's process: DynamoDB is durable, so a crash or
// restart of the node (an outage) never loses a table.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dynamo/types.hpp"
#include "models/dynamo/store.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

// The detail of the node's note for a TransactWriteItems retry answered from
// its ClientRequestToken: success, and nothing applied at this instant (the
// first attempt was). Every other success notes "ok".
inline constexpr std::string_view kIdempotentReplay = "idempotent_replay";

// The label of the note that follows an applied single-item write that can
// change the attribute the node watches (see the constructor): detail "<name>
// <value>" (the item's value after the write, "-" when the item or the
// attribute is gone), value = the request's message id.
inline constexpr std::string_view kItemNote = "dynamo.item";

struct DynamoRequestPayload final : sim::Payload {
  explicit DynamoRequestPayload(dynamo::Request r) : request(std::move(r)) {}
  dynamo::Request request;
};

struct DynamoReplyPayload final : sim::Payload {
  explicit DynamoReplyPayload(dynamo::Result<dynamo::Response> r) : result(std::move(r)) {}
  dynamo::Result<dynamo::Response> result;
};

// Notes that a table's change stream (DynamoStore::set_stream) queues while
// the store applies a request: the node writes them after the request's own
// note, each with the request's message id, so that what the stream shows
// is in the trace at the instant it happened (the sink's records, which the
// exactly-once checker reads). Kept by the scenario: it outlives the node.
struct StreamNotes {
  std::vector<std::pair<std::string_view, std::string>> queued;  // label (a static string), detail
};

// One request as the node applied it, for a tool that explains a run
// (`leaseproof replay` shows why DynamoDB accepted a write). Never traced:
// observing changes nothing of the run or its hash.
struct AppliedRequest {
  const dynamo::Request& request;
  // The item the request's key named just before it ran: UpdateItem and
  // DeleteItem only (nullopt otherwise, and when there was none).
  const std::optional<dynamo::Item>& before;
  std::string_view outcome;  // as noted: `ok`, `idempotent_replay` or the error type
  uint64_t message;          // the request's message id
  Instant wall;              // DynamoDB's clock at the apply
};
using AppliedObserver = std::function<void(const AppliedRequest&)>;

// A fault that throttles the writes of some callers while their reads go
// through (a hot partition throttles the writes to the items it holds, and
// so the workers whose leases live there): true refuses a write from `from`
// with ProvisionedThroughputExceededException before it reaches the store.
using WriteRefusal = std::function<bool(NodeId from)>;

class DynamoNode final : public sim::Process {
 public:
  // `watched`: an attribute whose value after each applied single-item write
  // that can change it the node notes (kItemNote), so that checkers can
  // follow it from the trace alone (the lease epoch); empty: none.
  // TransactWriteItems are not noted.
  // `observer`: called after each request is applied, before its note
  // (nullptr or an empty function: none); kept by the caller.
  explicit DynamoNode(DynamoStore& store, std::string_view watched = {}, StreamNotes* stream_notes = nullptr,
                      const AppliedObserver* observer = nullptr)
      : store_(store),
        watched_(watched),
        stream_notes_(stream_notes),
        observer_(observer != nullptr && *observer ? observer : nullptr) {}

  // Writes that `refusal` picks are refused, unapplied (nullptr: none);
  // kept by the caller.
  void refuse_writes(const WriteRefusal* refusal) { refusal_ = refusal; }

  void on_start(sim::NodeContext&) override {}
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;

 private:
  void note_watched(sim::NodeContext& context, const dynamo::Request& request, uint64_t message) const;

  // No timer drives the store's background work (GSI propagation, TTL
  // sweeps, forgetting tombstones and tokens): DynamoStore::apply first runs
  // everything due up to the request's time, in due order, with the due time
  // as each change's time. Only a request can observe the store, and no
  // request can tell whether the work ran at its due time or just before the
  // request, so running it lazily saves a timer event per write.
  DynamoStore& store_;
  std::string_view watched_;  // a static string
  StreamNotes* stream_notes_;
  const AppliedObserver* observer_;
  const WriteRefusal* refusal_ = nullptr;
};

// The answer to one call: the result, or nullptr when the call timed out
// (request lost, reply lost, or the node unreachable: the caller cannot tell).
using DynamoCallback = std::function<void(const dynamo::Result<dynamo::Response>* result)>;

// Sends `request` from the calling node to the DynamoDB node. Taken by
// rvalue: the request moves once, into the message.
uint64_t call_dynamo(sim::NodeContext& context, NodeId dynamo_node, dynamo::Request&& request, Duration timeout,
                     DynamoCallback on_result);

}  // namespace leaseproof::models
