#include "models/dynamo/node.hpp"

#include "core/dynamo/attribute_value.hpp"

namespace leaseproof::models {
namespace {

// Message types are static strings (the trace keeps views of them).
std::string_view request_type(const dynamo::Request& request) {
  return dynamo::operation_name(dynamo::operation_of(request));
}

bool is_write(dynamo::Operation operation) {
  return operation != dynamo::Operation::get_item && operation != dynamo::Operation::query &&
         operation != dynamo::Operation::create_table;
}

constexpr uint32_t kEnvelopeBytes = 256;  // headers and framing, roughly

uint32_t reply_bytes(const dynamo::Result<dynamo::Response>& result) {
  if (!result.ok()) return kEnvelopeBytes;
  if (const auto* get = std::get_if<dynamo::GetItemResponse>(&*result); get != nullptr && get->item) {
    return kEnvelopeBytes + static_cast<uint32_t>(dynamo::item_size_bytes(*get->item));
  }
  if (const auto* query = std::get_if<dynamo::QueryResponse>(&*result); query != nullptr && query->items) {
    size_t bytes = kEnvelopeBytes;
    for (const dynamo::Item& item : *query->items) bytes += dynamo::item_size_bytes(item);
    return static_cast<uint32_t>(bytes);
  }
  return kEnvelopeBytes;
}

// The item an UpdateItem or DeleteItem names, as stored before it runs.
std::optional<dynamo::Item> item_before(const DynamoStore& store, const dynamo::Request& request) {
  if (const auto* update = std::get_if<dynamo::UpdateItemRequest>(&request)) {
    return store.peek(update->table_name, update->key);
  }
  if (const auto* erase = std::get_if<dynamo::DeleteItemRequest>(&request)) {
    return store.peek(erase->table_name, erase->key);
  }
  return std::nullopt;
}

}  // namespace

// Only a write that can change the attribute is noted: an UpdateItem whose
// update expression names it (directly or through an alias), a PutItem, a
// DeleteItem. Every other write leaves it as the last note said, so checkers
// still know it at every write, and the heartbeats (most writes) cost nothing.
void DynamoNode::note_watched(sim::NodeContext& context, const dynamo::Request& request, uint64_t message) const {
  const dynamo::AttributeValue* value = nullptr;
  if (const auto* update = std::get_if<dynamo::UpdateItemRequest>(&request)) {
    bool named = update->update_expression && update->update_expression->find(watched_) != std::string::npos;
    for (const auto& [alias, name] : update->write.expression_attribute_names) named = named || name == watched_;
    if (!named) return;
    value = store_.peek_attribute(update->table_name, update->key, watched_);
  } else if (const auto* put = std::get_if<dynamo::PutItemRequest>(&request)) {
    const auto found = put->item.find(watched_);
    if (found != put->item.end()) value = &found->second;
  } else if (!std::holds_alternative<dynamo::DeleteItemRequest>(request)) {
    return;
  }
  std::string detail{watched_};
  detail += ' ';
  detail += value != nullptr && value->type() == dynamo::AttributeType::n ? std::string_view{value->text()} : "-";
  context.note(kItemNote, detail, static_cast<int64_t>(message));
}

void DynamoNode::on_message(sim::NodeContext& context, const sim::Envelope& envelope) {
  LP_ASSERT(envelope.expects_reply);
  const dynamo::Request& request = envelope.message.as<DynamoRequestPayload>().request;
  const uint64_t replays_before = store_.idempotent_replays();
  if (stream_notes_ != nullptr) stream_notes_->queued.clear();  // queued outside a request: not this one's
  std::optional<dynamo::Item> before;
  if (observer_ != nullptr) before = item_before(store_, request);
  // Asked only of writes, and only while a write throttle is configured.
  const bool refused = refusal_ != nullptr && is_write(dynamo::operation_of(request)) && (*refusal_)(envelope.from);
  dynamo::Result<dynamo::Response> result =
      refused ? dynamo::Result<dynamo::Response>{hot_partition_error()} : store_.apply(request, context.wall());
  // value = the request's message id: checkers join it with the caller's notes.
  // A retried transaction answered from its token applied nothing now: it says
  // so, so that no checker takes it for a write made at this instant.
  std::string_view outcome = result.ok() ? std::string_view{"ok"} : std::string_view{result.error().type};
  if (result.ok() && store_.idempotent_replays() != replays_before) outcome = kIdempotentReplay;
  if (observer_ != nullptr) (*observer_)(AppliedRequest{request, before, outcome, envelope.id, context.wall()});
  context.note(request_type(request), outcome, static_cast<int64_t>(envelope.id));
  if (!watched_.empty() && outcome == "ok") note_watched(context, request, envelope.id);
  if (stream_notes_ != nullptr) {
    for (const auto& [label, detail] : stream_notes_->queued) {
      context.note(label, detail, static_cast<int64_t>(envelope.id));
    }
    stream_notes_->queued.clear();
  }
  const uint32_t bytes = reply_bytes(result);
  context.reply(envelope, sim::Message{"dynamo.reply", bytes, std::make_shared<DynamoReplyPayload>(std::move(result))});
}

uint64_t call_dynamo(sim::NodeContext& context, NodeId dynamo_node, dynamo::Request&& request, Duration timeout,
                     DynamoCallback on_result) {
  const std::string_view type = request_type(request);
  const uint32_t bytes = kEnvelopeBytes;
  return context.call(dynamo_node, sim::Message{type, bytes, std::make_shared<DynamoRequestPayload>(std::move(request))},
                      timeout, [on_result = std::move(on_result)](const sim::Envelope* reply) {
                        if (reply == nullptr) {
                          on_result(nullptr);
                          return;
                        }
                        on_result(&reply->message.as<DynamoReplyPayload>().result);
                      });
}

}  // namespace leaseproof::models
