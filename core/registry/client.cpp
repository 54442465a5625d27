#include "core/registry/client.hpp"

#include <algorithm>

#include "base/assert.hpp"
#include "base/backoff.hpp"

namespace leaseproof::registry {
namespace {

// Worth asking again: DynamoDB shed the request, failed inside, or the reply
// was lost (every registry write is idempotent: a put of the same row, a
// delete of a key).
bool retryable(const dynamo::Result<dynamo::Response>* reply) {
  if (reply == nullptr) return true;
  if (reply->ok()) return false;
  const std::string& type = reply->error().type;
  return type == dynamo::error_type::provisioned_throughput_exceeded || type == dynamo::error_type::throttling ||
         type == dynamo::error_type::request_limit_exceeded || type == dynamo::error_type::internal_server_error;
}

double units(const std::optional<dynamo::ConsumedCapacity>& consumed) {
  return consumed ? consumed->capacity_units : 0.0;
}

size_t batch_size(const dynamo::Request& request) {
  const auto& batch = std::get<dynamo::BatchWriteItemRequest>(request);
  size_t size = 0;
  for (const auto& [table, writes] : batch.request_items) size += writes.size();
  return size;
}

dynamo::Item key_of(const dynamo::Item& row) {
  dynamo::Item key;
  for (const char* name : {"pk", "sk"}) {
    if (const auto it = row.find(name); it != row.end()) key.emplace_sorted(name, dynamo::AttributeValue{it->second});
  }
  return key;
}

}  // namespace

RegistryClient::RegistryClient(RegistryConfig config, RandomSource& random)
    : config_(std::move(config)), random_(random) {
  LP_ASSERT_MSG(config_.validate().empty(), "invalid registry config: {}", config_.validate());
}

RegistryClient::Operation& RegistryClient::begin(OperationId id, Kind kind, std::string_view subject) {
  LP_ASSERT_MSG(!subject.empty(), "registry operation {} without a room, connection or user", id);
  const auto [it, inserted] = operations_.try_emplace(id);
  LP_ASSERT_MSG(inserted, "registry operation {} is already in flight", id);
  Operation& op = it->second;
  op.kind = kind;
  op.subject = std::string{subject};
  op.done.operation = id;
  return op;
}

void RegistryClient::join(OperationId id, std::string_view room, std::string_view connection, std::string_view user,
                          Clock now, Actions& out) {
  LP_ASSERT(!connection.empty() && !user.empty());
  Operation& op = begin(id, Kind::join, room);
  op.done.outcome = JoinDone{};
  send(id, op, Call{id, Purpose::write, 0, 0, join_request(config_, room, connection, user, now.wall.ms())}, out);
}

void RegistryClient::leave(OperationId id, std::string_view room, std::string_view connection, Clock now,
                           Actions& out) {
  (void)now;
  LP_ASSERT(!connection.empty());
  Operation& op = begin(id, Kind::leave, room);
  op.done.outcome = LeaveDone{};
  send(id, op, Call{id, Purpose::write, 0, 0, leave_request(config_, room, connection)}, out);
}

void RegistryClient::members(OperationId id, std::string_view room, Clock now, Actions& out) {
  Operation& op = begin(id, Kind::members, room);
  op.done.outcome = MembersDone{};
  // One Query chain per shard, all at once (the seed's Promise.all).
  for (uint32_t shard = 0; shard < room_shards(config_); ++shard) {
    ++op.pages;
    send(id, op, Call{id, Purpose::members_page, shard, 0, members_query(config_, room, shard, now.wall.ms(), {})},
         out);
  }
}

void RegistryClient::remove_connection(OperationId id, std::string_view connection, Clock now, Actions& out) {
  (void)now;
  Operation& op = begin(id, Kind::remove, connection);
  op.done.outcome = RemoveDone{};
  ++op.pages;
  send(id, op, Call{id, Purpose::rooms_page, 0, 0, connection_rooms_query(config_, connection, {})}, out);
}

void RegistryClient::presence(OperationId id, std::string_view user, Clock now, Actions& out) {
  Operation& op = begin(id, Kind::presence, user);
  op.done.outcome = PresenceDone{};
  ++op.pages;
  send(id, op, Call{id, Purpose::presence_page, 0, 0, presence_query(config_, user, now.wall.ms(), {})}, out);
}

void RegistryClient::broadcast(OperationId id, std::string_view room, std::string_view payload, Clock now,
                               Actions& out) {
  members(id, room, now, out);
  Operation& op = operations_.at(id);
  op.kind = Kind::broadcast;
  op.payload = std::string{payload};
  op.done.outcome = BroadcastDone{};
}

void RegistryClient::send(OperationId id, Operation& op, Call call, Actions& out) {
  LP_ASSERT_EQ(call.operation, id);
  const uint64_t token = next_token_++;
  ++op.waiting;
  ++op.done.requests;
  out.push_back(DynamoCall{token, id, call.request});
  calls_.emplace(token, std::move(call));
}

void RegistryClient::retry_later(Call call, Clock now, Actions& out) {
  out.push_back(Mark{"registry.retry"});
  const Duration delay =
      full_jitter(random_, backoff_ceiling(config_.retry_base, call.attempt, config_.retry_cap));
  ++call.attempt;
  retries_.emplace(std::pair{now.monotonic + delay, retries_scheduled_++}, std::move(call));
}

void RegistryClient::on_reply(uint64_t token, const dynamo::Result<dynamo::Response>* reply, Clock now,
                              Actions& out) {
  auto it = calls_.find(token);
  LP_ASSERT_MSG(it != calls_.end(), "reply for unknown registry token {}", token);
  Call call = std::move(it->second);
  calls_.erase(it);
  const OperationId id = call.operation;
  Operation& op = operations_.at(id);
  if (reply == nullptr || !reply->ok()) {
    const bool attempts_left = call.stalled + 1 < config_.attempts_max;
    if (retryable(reply) && attempts_left) {
      ++call.stalled;
      retry_later(std::move(call), now, out);  // still waiting
      return;
    }
    --op.waiting;
    if (op.done.error.empty()) {
      op.done.error = reply == nullptr ? "no answer" : reply->error().type;
      if (!attempts_left) op.done.error += " after every attempt";
    }
    out.push_back(Mark{"registry.operation_failed"});
    finish_if_done(id, now, out);
    return;
  }
  --op.waiting;
  const dynamo::Response& response = reply->value();
  switch (call.purpose) {
    case Purpose::write:
      if (const auto* put = std::get_if<dynamo::PutItemResponse>(&response)) {
        op.done.write_units += units(put->consumed_capacity);
      } else if (const auto* del = std::get_if<dynamo::DeleteItemResponse>(&response)) {
        op.done.write_units += units(del->consumed_capacity);
      }
      break;
    case Purpose::members_page:
    case Purpose::rooms_page:
    case Purpose::presence_page: {
      const auto& page = std::get<dynamo::QueryResponse>(response);
      op.done.read_units += units(page.consumed_capacity);
      on_page(id, op, call, page, now, out);
      break;
    }
    case Purpose::delete_batch: {
      const auto& batch = std::get<dynamo::BatchWriteItemResponse>(response);
      for (const auto& consumed : batch.consumed_capacity) op.done.write_units += consumed.capacity_units;
      on_batch(id, op, std::move(call), batch, now, out);
      break;
    }
  }
  finish_if_done(id, now, out);
}

void RegistryClient::on_page(OperationId id, Operation& op, const Call& call, const dynamo::QueryResponse& page,
                             Clock now, Actions& out) {
  if (call.purpose == Purpose::presence_page && page.count > 0) {
    std::get<PresenceDone>(op.done.outcome).online = true;
    return;  // one live row is enough
  }
  if (page.items) {
    for (const dynamo::Item& row : *page.items) {
      if (call.purpose == Purpose::rooms_page) {
        op.keys.push_back(key_of(row));
      } else if (std::optional<Member> member = parse_member(row)) {
        op.members.push_back(std::move(*member));
      }
    }
  }
  if (page.last_evaluated_key) {
    if (op.pages >= config_.query_pages_max) {
      out.push_back(Mark{"registry.query_pages_max"});
      if (op.done.error.empty()) op.done.error = "registry.query_pages_max reached";
      return;
    }
    ++op.pages;
    dynamo::Request next = call.request;
    std::get<dynamo::QueryRequest>(next).exclusive_start_key = page.last_evaluated_key;
    refresh_expiry_clock(next, now.wall.ms());
    send(id, op, Call{id, call.purpose, call.shard, 0, std::move(next)}, out);
    return;
  }
  if (call.purpose == Purpose::rooms_page) {
    std::get<RemoveDone>(op.done.outcome).rows_found = static_cast<uint32_t>(op.keys.size());
    next_batch(id, op, out);
  }
}

void RegistryClient::next_batch(OperationId id, Operation& op, Actions& out) {
  if (op.next_key >= op.keys.size()) return;
  const size_t end = std::min(op.keys.size(), op.next_key + config_.batch_items_max);
  std::vector<dynamo::Item> keys(op.keys.begin() + static_cast<std::ptrdiff_t>(op.next_key),
                                 op.keys.begin() + static_cast<std::ptrdiff_t>(end));
  op.next_key = end;
  send(id, op, Call{id, Purpose::delete_batch, 0, 0, delete_batch_request(config_, keys)}, out);
}

void RegistryClient::on_batch(OperationId id, Operation& op, Call call, const dynamo::BatchWriteItemResponse& reply,
                              Clock now, Actions& out) {
  auto& removed = std::get<RemoveDone>(op.done.outcome);
  const size_t sent = batch_size(call.request);
  const auto rest = reply.unprocessed_items.find(config_.table.name);
  const size_t unprocessed = rest == reply.unprocessed_items.end() ? 0 : rest->second.size();
  LP_ASSERT_LE(unprocessed, sent);
  removed.rows_deleted += static_cast<uint32_t>(sent - unprocessed);
  if (unprocessed > 0) {
    if (config_.has(Flaw::drop_unprocessed)) {
      out.push_back(Mark{"registry.unprocessed_dropped"});  // the seed's loop never looks
    } else {
      // Some went through (DynamoDB answers a batch of which nothing could
      // be written with an error): progress, so the count starts again.
      out.push_back(Mark{"registry.unprocessed_retried"});
      call.stalled = 0;
      dynamo::BatchWriteItemRequest again;
      again.return_consumed_capacity = dynamo::ReturnConsumedCapacity::total;
      again.request_items[config_.table.name] = rest->second;
      call.request = std::move(again);
      ++op.waiting;  // until the retry is sent (on_timer)
      retry_later(std::move(call), now, out);
      return;  // the next batch waits for this one
    }
  }
  next_batch(id, op, out);
}

void RegistryClient::pump_posts(OperationId id, Operation& op, Actions& out) {
  while (op.posts_waiting < config_.posts_in_flight_max && op.next_post < op.members.size()) {
    post(id, op, PostCall{id, op.next_post++, 0}, out);
  }
}

void RegistryClient::post(OperationId id, Operation& op, PostCall call, Actions& out) {
  const uint64_t token = next_token_++;
  ++op.posts_waiting;
  out.push_back(PostToConnection{token, id, op.members[call.member].connection, op.payload});
  posts_.emplace(token, call);
}

void RegistryClient::on_post_result(uint64_t token, PostStatus status, Clock now, Actions& out) {
  auto it = posts_.find(token);
  LP_ASSERT_MSG(it != posts_.end(), "post result for unknown registry token {}", token);
  PostCall call = it->second;
  posts_.erase(it);
  const OperationId id = call.operation;
  Operation& op = operations_.at(id);
  auto& result = std::get<BroadcastDone>(op.done.outcome);
  --op.posts_waiting;
  switch (status) {
    case PostStatus::ok: ++result.delivered; break;
    case PostStatus::gone: {
      ++result.gone;
      // Prune the dead connection's rows in every room, not only this one.
      const OperationId prune = next_internal_++;
      remove_connection(prune, op.members[call.member].connection, now, out);
      operations_.at(prune).parent = id;
      ++op.prunes_waiting;
      break;
    }
    case PostStatus::throttled:
    case PostStatus::failed:
      if (call.attempt + 1 < config_.post_attempts_max) {
        out.push_back(Mark{"registry.post_retry"});
        const Duration delay =
            full_jitter(random_, backoff_ceiling(config_.retry_base, call.attempt, config_.retry_cap));
        ++call.attempt;
        ++op.posts_waiting;
        retries_.emplace(std::pair{now.monotonic + delay, retries_scheduled_++}, call);
      } else {
        ++result.failed;
      }
      break;
  }
  pump_posts(id, op, out);
  finish_if_done(id, now, out);
}

void RegistryClient::on_timer(Clock now, Actions& out) {
  while (!retries_.empty() && retries_.begin()->first.first <= now.monotonic) {
    auto node = retries_.extract(retries_.begin());
    if (auto* call = std::get_if<Call>(&node.mapped())) {
      const OperationId id = call->operation;
      Operation& op = operations_.at(id);
      --op.waiting;  // send() counts it again
      refresh_expiry_clock(call->request, now.wall.ms());
      send(id, op, std::move(*call), out);
    } else {
      const PostCall& again = std::get<PostCall>(node.mapped());
      Operation& op = operations_.at(again.operation);
      --op.posts_waiting;  // post() counts it again
      post(again.operation, op, again, out);
    }
  }
}

Instant RegistryClient::next_deadline() const {
  return retries_.empty() ? Instant::max() : retries_.begin()->first.first;
}

void RegistryClient::finish_if_done(OperationId id, Clock now, Actions& out) {
  auto it = operations_.find(id);
  if (it == operations_.end()) return;
  Operation& op = it->second;
  if (op.waiting > 0) return;
  switch (op.kind) {
    case Kind::join:
    case Kind::leave:
    case Kind::presence: break;
    case Kind::members: std::get<MembersDone>(op.done.outcome).members = std::move(op.members); break;
    case Kind::remove: {
      if (op.done.error.empty() && op.next_key < op.keys.size()) return;  // a batch is due
      auto& removed = std::get<RemoveDone>(op.done.outcome);
      removed.rows_left = removed.rows_found - removed.rows_deleted;
      break;
    }
    case Kind::broadcast: {
      // The members are known: post to each (unless the query failed), then
      // wait for every post and every prune.
      auto& result = std::get<BroadcastDone>(op.done.outcome);
      result.members = static_cast<uint32_t>(op.members.size());
      if (op.done.error.empty()) pump_posts(id, op, out);
      if (op.posts_waiting > 0 || op.prunes_waiting > 0) return;
      break;
    }
  }
  Done done = std::move(op.done);
  const std::optional<OperationId> parent = op.parent;
  operations_.erase(it);
  if (!parent) {
    out.push_back(std::move(done));
    return;
  }
  // A broadcast's prune: folded into the broadcast's result.
  Operation& owner = operations_.at(*parent);
  const auto& removed = std::get<RemoveDone>(done.outcome);
  auto& result = std::get<BroadcastDone>(owner.done.outcome);
  result.rows_pruned += removed.rows_deleted;
  result.rows_left += removed.rows_left;
  if (!done.error.empty()) ++result.prune_failures;
  owner.done.requests += done.requests;
  owner.done.read_units += done.read_units;
  owner.done.write_units += done.write_units;
  --owner.prunes_waiting;
  finish_if_done(*parent, now, out);
}

}  // namespace leaseproof::registry
