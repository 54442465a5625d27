#pragma once
// The simulated DynamoDB served as a node of the simulated network: requests
// and replies cross links with latency, loss and partitions, so a caller sees
// exactly what a real client sees, including the ambiguous outcome (a write
// applied whose reply was lost reaches the caller as a timeout).
//
// The store outlives the node's process: DynamoDB is durable, so a crash or
// restart of the node (an outage) never loses a table.

#include <functional>

#include <leaseproof/core/dynamo/types.hpp>
#include <leaseproof/models/dynamo_store.hpp>
#include <leaseproof/sim/world.hpp>

namespace leaseproof::models {

struct DynamoRequestPayload final : sim::Payload {
  explicit DynamoRequestPayload(dynamo::Request r) : request(std::move(r)) {}
  dynamo::Request request;
};

struct DynamoReplyPayload final : sim::Payload {
  explicit DynamoReplyPayload(dynamo::Result<dynamo::Response> r) : result(std::move(r)) {}
  dynamo::Result<dynamo::Response> result;
};

class DynamoNode final : public sim::Process {
 public:
  explicit DynamoNode(DynamoStore& store) : store_(store) {}

  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;

 private:
  // GSI propagation and TTL sweeps happen at their due time even when no
  // request arrives, so a timer follows the store's next deadline.
  void schedule_background(sim::NodeContext& context);

  DynamoStore& store_;
  uint64_t background_timer_ = 0;
  Instant background_due_ = Instant::max();
};

// The answer to one call: the result, or nullptr when the call timed out
// (request lost, reply lost, or the node unreachable: the caller cannot tell).
using DynamoCallback = std::function<void(const dynamo::Result<dynamo::Response>* result)>;

// Sends `request` from the calling node to the DynamoDB node.
uint64_t call_dynamo(sim::NodeContext& context, NodeId dynamo_node, dynamo::Request request, Duration timeout,
                     DynamoCallback on_result);

}  // namespace leaseproof::models
