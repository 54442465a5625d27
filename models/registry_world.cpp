#include "models/registry_world.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "models/stream.hpp"  // NodeRandom

namespace leaseproof::models {
namespace {

struct RegistryEvent final : sim::Payload {
  RegistryEvent(std::string c, std::string u, std::string r)
      : connection(std::move(c)), user(std::move(u)), room(std::move(r)) {}
  std::string connection;
  std::string user;
  std::string room;
};
struct JoinAnswer final : sim::Payload {
  explicit JoinAnswer(bool joined) : ok(joined) {}
  bool ok = false;
};
struct PostRequest final : sim::Payload {
  PostRequest(std::string c, uint64_t b) : connection(std::move(c)), broadcast(b) {}
  std::string connection;
  uint64_t broadcast = 0;
};
struct PostAnswer final : sim::Payload {
  explicit PostAnswer(registry::PostStatus s) : status(s) {}
  registry::PostStatus status = registry::PostStatus::ok;
};

sim::Message event(std::string_view type, std::string connection, std::string user = {}, std::string room = {}) {
  return sim::Message{type, static_cast<uint32_t>(64 + connection.size() + room.size()),
                      std::make_shared<RegistryEvent>(std::move(connection), std::move(user), std::move(room))};
}

std::string_view to_text(registry::PostStatus status) {
  switch (status) {
    case registry::PostStatus::ok: return "ok";
    case registry::PostStatus::gone: return "gone";
    case registry::PostStatus::throttled: return "throttled";
    case registry::PostStatus::failed: return "failed";
  }
  return "?";
}

}  // namespace

// ---- the gateway and its clients ---------------------------------------------

void GatewayProcess::on_start(sim::NodeContext& context) {
  context_ = &context;
  const RegistryWorkload& w = shared_.workload;
  client_rooms_.resize(w.clients);
  bucket_at_ = context.monotonic();
  bucket_tokens_ = w.posts_per_s;
  for (uint32_t client = 0; client < w.clients; ++client) {
    std::set<std::string> rooms;
    if (context.prng().chance(w.big_room_share)) rooms.insert("r0");
    while (rooms.size() < std::min<uint32_t>(w.rooms_per_client, w.rooms)) {
      rooms.insert(fmt::format("r{}", context.prng().below(w.rooms)));
    }
    client_rooms_[client].assign(rooms.begin(), rooms.end());
    // Clients arrive over the first minute.
    context.set_timer(context.prng().uniform_duration(Duration::zero(), Duration::from_min(1)), "gw.arrive",
                      [this, &context, client] { connect(context, client); });
  }
}

void GatewayProcess::connect(sim::NodeContext& context, uint32_t client) {
  const RegistryWorkload& w = shared_.workload;
  const std::string connection = fmt::format("g{}", next_connection_++);
  const std::string user = fmt::format("u{}", client % w.users);
  Connection& c = live_[connection];
  c.client = client;
  c.user = user;
  context.note("gw.connect", fmt::format("{} {}", connection, user));
  context.send(shared_.handler, event("ws.connect", connection, user));
  for (const std::string& room : rooms_of(client)) join(context, connection, room, 0);
  const Duration lifetime = std::min(context.prng().uniform_duration(w.lifetime_min, w.lifetime_max), w.connection_cap);
  const bool capped = lifetime == w.connection_cap;
  c.lifetime_timer = context.set_timer(lifetime, "gw.lifetime", [this, &context, connection, capped] {
    const RegistryWorkload& wl = shared_.workload;
    if (capped) {
      end(context, connection, "cap", !context.prng().chance(wl.disconnect_loss));
    } else if (context.prng().chance(wl.abrupt_share)) {
      end(context, connection, "abrupt", false);
    } else {
      end(context, connection, "closed", !context.prng().chance(wl.disconnect_loss));
    }
  });
}

void GatewayProcess::join(sim::NodeContext& context, const std::string& connection, const std::string& room,
                          uint32_t attempt) {
  if (!live_.contains(connection)) return;
  context.note("gw.join", fmt::format("{} {}", connection, room), attempt);
  context.call(shared_.handler, event("ws.join", connection, live_.at(connection).user, room),
               shared_.workload.invoke_timeout, [this, &context, connection, room, attempt](const sim::Envelope* reply) {
                 const bool ok = reply != nullptr && reply->message.as<JoinAnswer>().ok;
                 if (ok && live_.contains(connection) && context.prng().chance(shared_.workload.leave_share)) {
                   const Duration after = context.prng().uniform_duration(shared_.workload.leave_after_min,
                                                                          shared_.workload.leave_after_max);
                   context.set_timer(after, "gw.leave",
                                     [this, &context, connection, room] { leave(context, connection, room); });
                 }
                 if (ok || attempt + 1 >= kJoinAttempts || !live_.contains(connection)) return;
                 // The client sees an error and asks again a little later.
                 context.set_timer(context.prng().uniform_duration(Duration::from_s(1), kJoinRetryWaitMax),
                                   "gw.rejoin",
                                   [this, &context, connection, room, attempt] { join(context, connection, room, attempt + 1); });
               });
}

void GatewayProcess::leave(sim::NodeContext& context, const std::string& connection, const std::string& room) {
  if (!live_.contains(connection)) return;
  context.note("gw.leave", fmt::format("{} {}", connection, room));
  context.send(shared_.handler, event("ws.leave", connection, live_.at(connection).user, room));
}

void GatewayProcess::end(sim::NodeContext& context, const std::string& connection, std::string_view cause,
                         bool disconnect) {
  auto it = live_.find(connection);
  if (it == live_.end()) return;
  const uint32_t client = it->second.client;
  context.cancel_timer(it->second.lifetime_timer);
  live_.erase(it);
  context.note("gw.gone", fmt::format("{} {}", connection, cause), disconnect ? 1 : 0);
  if (disconnect) context.send(shared_.handler, event("ws.disconnect", connection));
  const RegistryWorkload& w = shared_.workload;
  const bool vanish = cause == "abrupt" && context.prng().chance(w.vanish_share);
  const Duration away = vanish ? context.prng().uniform_duration(w.vanish_min, w.vanish_max)
                               : context.prng().uniform_duration(Duration::from_ms(100), w.reconnect_max);
  context.set_timer(away, "gw.reconnect", [this, &context, client] { connect(context, client); });
}

void GatewayProcess::maintenance(sim::NodeContext& context) {
  std::vector<std::string> dropped;
  for (const auto& [connection, c] : live_) {
    if (context.prng().chance(shared_.workload.maintenance_share)) dropped.push_back(connection);
  }
  context.note("gw.maintenance", "", static_cast<int64_t>(dropped.size()));
  for (const std::string& connection : dropped) end(context, connection, "maintenance", false);
}

void GatewayProcess::mass_close_now() {
  sim::NodeContext& context = *context_;
  std::vector<std::string> all;
  for (const auto& [connection, c] : live_) all.push_back(connection);
  context.note("gw.mass_close", "", static_cast<int64_t>(all.size()));
  for (const std::string& connection : all) {
    end(context, connection, "closed", !context.prng().chance(shared_.workload.disconnect_loss));
  }
}

void GatewayProcess::on_message(sim::NodeContext& context, const sim::Envelope& envelope) {
  if (envelope.message.type != "gw.post") return;
  const auto& post = envelope.message.as<PostRequest>();
  // Token bucket: posts_per_s, one second of burst.
  const int64_t rate = shared_.workload.posts_per_s;
  const Duration elapsed = context.monotonic() - bucket_at_;
  bucket_tokens_ = std::min(rate, bucket_tokens_ + elapsed.ns() * rate / 1'000'000'000);
  if (elapsed.ns() * rate >= 1'000'000'000) bucket_at_ = context.monotonic();
  registry::PostStatus status = registry::PostStatus::ok;
  if (!live_.contains(post.connection)) {
    status = registry::PostStatus::gone;
  } else if (bucket_tokens_ <= 0) {
    status = registry::PostStatus::throttled;
  } else {
    --bucket_tokens_;
  }
  context.note("gw.post", fmt::format("{} {}", post.connection, to_text(status)), static_cast<int64_t>(post.broadcast));
  context.reply(envelope, sim::Message{"gw.post_answer", 16, std::make_shared<PostAnswer>(status)});
}

// ---- the handler (Lambda) -----------------------------------------------------

registry::Clock RegistryHandler::clock(sim::NodeContext& context) const {
  return registry::Clock{context.wall(), context.monotonic()};
}

void RegistryHandler::on_start(sim::NodeContext& context) {
  random_ = std::make_unique<NodeRandom>(context);
  client_ = std::make_unique<registry::RegistryClient>(shared_.config, *random_);
  context.set_timer(shared_.workload.broadcast_interval, "registry.broadcast_tick",
                    [this, &context] { broadcast_tick(context); });
  context.set_timer(shared_.workload.presence_interval, "registry.presence_tick",
                    [this, &context] { presence_tick(context); });
}

void RegistryHandler::broadcast_tick(sim::NodeContext& context) {
  const RegistryWorkload& w = shared_.workload;
  const uint32_t active = std::max<uint32_t>(1, w.rooms - std::min(w.quiet_rooms, w.rooms - 1));
  const std::string room = context.prng().below(4) == 0 ? "r0" : fmt::format("r{}", context.prng().below(active));
  const registry::OperationId id = next_op_++;
  pending_[id] = Pending{Pending::Kind::broadcast, room, {}, std::nullopt};
  context.note("registry.broadcast", room, static_cast<int64_t>(id));
  registry::Actions out;
  client_->broadcast(id, room, fmt::format("b{}", id), clock(context), out);
  run(context, out);
  context.set_timer(w.broadcast_interval, "registry.broadcast_tick", [this, &context] { broadcast_tick(context); });
}

void RegistryHandler::presence_tick(sim::NodeContext& context) {
  const RegistryWorkload& w = shared_.workload;
  const std::string user = fmt::format("u{}", context.prng().below(w.users));
  const registry::OperationId id = next_op_++;
  pending_[id] = Pending{Pending::Kind::presence, user, {}, std::nullopt};
  registry::Actions out;
  client_->presence(id, user, clock(context), out);
  run(context, out);
  context.set_timer(w.presence_interval, "registry.presence_tick", [this, &context] { presence_tick(context); });
}

void RegistryHandler::on_message(sim::NodeContext& context, const sim::Envelope& envelope) {
  const std::string_view type = envelope.message.type;
  if (type != "ws.connect" && type != "ws.join" && type != "ws.leave" && type != "ws.disconnect") return;
  const auto& e = envelope.message.as<RegistryEvent>();
  registry::Actions out;
  if (type == "ws.join") {
    const registry::OperationId id = next_op_++;
    pending_[id] = Pending{Pending::Kind::join, e.connection, e.room, envelope};
    client_->join(id, e.room, e.connection, e.user, clock(context), out);
  } else if (type == "ws.leave") {
    const registry::OperationId id = next_op_++;
    pending_[id] = Pending{Pending::Kind::leave, e.connection, e.room, std::nullopt};
    context.note("registry.leave", fmt::format("{} {}", e.connection, e.room), static_cast<int64_t>(id));
    client_->leave(id, e.room, e.connection, clock(context), out);
  } else if (type == "ws.disconnect") {
    const registry::OperationId id = next_op_++;
    pending_[id] = Pending{Pending::Kind::remove, e.connection, {}, std::nullopt};
    context.note("registry.remove", e.connection, static_cast<int64_t>(id));
    client_->remove_connection(id, e.connection, clock(context), out);
  }
  // $connect: the registry writes rows at join (seed 003), nothing to do.
  run(context, out);
}

namespace {

// "room#<room>#<shard>" and "conn#<connection>" of a membership key: its
// room and connection ("" when the key is not one).
std::pair<std::string_view, std::string_view> membership_of(const dynamo::Item& key) {
  const auto pk = key.find("pk");
  const auto sk = key.find("sk");
  if (pk == key.end() || sk == key.end()) return {};
  std::string_view room = pk->second.text();
  std::string_view connection = sk->second.text();
  if (!room.starts_with("room#") || !connection.starts_with("conn#")) return {};
  room.remove_prefix(5);
  room = room.substr(0, room.rfind('#'));
  connection.remove_prefix(5);
  return {room, connection};
}

}  // namespace

// Every membership row a request deletes, as it leaves the handler: what the
// checker's lost-membership property judges (docs/trace-format.md).
void RegistryHandler::note_deletes(sim::NodeContext& context, const dynamo::Request& request, uint64_t operation) {
  auto note = [&](const dynamo::Item& key) {
    const auto [room, connection] = membership_of(key);
    if (!connection.empty()) {
      context.note("registry.delete", fmt::format("{} {}", connection, room), static_cast<int64_t>(operation));
    }
  };
  if (const auto* del = std::get_if<dynamo::DeleteItemRequest>(&request)) note(del->key);
  if (const auto* batch = std::get_if<dynamo::BatchWriteItemRequest>(&request)) {
    for (const auto& [table, writes] : batch->request_items) {
      for (const dynamo::WriteRequest& write : writes) {
        if (const auto* del = std::get_if<dynamo::DeleteRequest>(&write)) note(del->key);
      }
    }
  }
}

void RegistryHandler::run(sim::NodeContext& context, registry::Actions& actions) {
  for (size_t i = 0; i < actions.size(); ++i) {
    registry::Action& action = actions[i];
    if (auto* call = std::get_if<registry::DynamoCall>(&action)) {
      note_deletes(context, call->request, call->operation);
      const uint64_t token = call->token;
      call_dynamo(context, shared_.dynamo, std::move(call->request), shared_.workload.dynamo_timeout,
                  [this, &context, token](const dynamo::Result<dynamo::Response>* result) {
                    registry::Actions out;
                    client_->on_reply(token, result, clock(context), out);
                    run(context, out);
                  });
    } else if (auto* post = std::get_if<registry::PostToConnection>(&action)) {
      const uint64_t token = post->token;
      const uint64_t broadcast = post->operation;
      context.call(shared_.gateway,
                   sim::Message{"gw.post", static_cast<uint32_t>(64 + post->payload.size()),
                                std::make_shared<PostRequest>(post->connection, broadcast)},
                   shared_.workload.dynamo_timeout, [this, &context, token](const sim::Envelope* reply) {
                     const registry::PostStatus status =
                         reply != nullptr ? reply->message.as<PostAnswer>().status : registry::PostStatus::failed;
                     registry::Actions out;
                     client_->on_post_result(token, status, clock(context), out);
                     run(context, out);
                   });
    } else if (auto* finished = std::get_if<registry::Done>(&action)) {
      done(context, *finished);
    } else if (auto* mark = std::get_if<registry::Mark>(&action)) {
      context.note(mark->name);
    }
  }
  arm(context);
}

void RegistryHandler::done(sim::NodeContext& context, registry::Done& finished) {
  auto it = pending_.find(finished.operation);
  LP_ASSERT(it != pending_.end());
  Pending pending = std::move(it->second);
  pending_.erase(it);
  const std::string error = finished.error.empty() ? "-" : finished.error;
  const auto id = static_cast<int64_t>(finished.operation);
  if (shared_.tally != nullptr) {
    RegistryTally::Units& units =
        pending.kind == Pending::Kind::broadcast ? shared_.tally->broadcast : shared_.tally->connection;
    units.read += finished.read_units;
    units.write += finished.write_units;
  }
  switch (pending.kind) {
    case Pending::Kind::join: {
      const bool ok = finished.error.empty();
      context.note(ok ? "registry.joined" : "registry.join_failed",
                   fmt::format("{} {}{}", pending.subject, pending.room, ok ? "" : " " + error), id);
      context.reply(*pending.call, sim::Message{"ws.join_answer", 16, std::make_shared<JoinAnswer>(ok)});
      break;
    }
    case Pending::Kind::leave:
      context.note("registry.left", fmt::format("{} {} {}", pending.subject, pending.room, error), id);
      break;
    case Pending::Kind::remove: {
      const auto& removed = std::get<registry::RemoveDone>(finished.outcome);
      context.note("registry.removed",
                   fmt::format("{} {} {} {}", pending.subject, removed.rows_deleted, removed.rows_left, error), id);
      break;
    }
    case Pending::Kind::broadcast: {
      const auto& b = std::get<registry::BroadcastDone>(finished.outcome);
      context.note("registry.broadcast_end",
                   fmt::format("{} {} {} {} {} {} {} {}", pending.subject, b.members, b.delivered, b.gone, b.failed,
                               b.rows_left, b.prune_failures, error),
                   id);
      break;
    }
    case Pending::Kind::presence: {
      const auto& p = std::get<registry::PresenceDone>(finished.outcome);
      context.note("registry.presence",
                   fmt::format("{} {}", pending.subject, !finished.error.empty() ? "failed" : p.online ? "online" : "offline"),
                   id);
      break;
    }
  }
}

void RegistryHandler::arm(sim::NodeContext& context) {
  const Instant due = client_->next_deadline();
  if (due == timer_due_) return;
  if (timer_ != 0) context.cancel_timer(timer_);
  timer_ = 0;
  timer_due_ = due;
  if (due == Instant::max()) return;
  const Duration delay = std::max(Duration::zero(), due - context.monotonic());
  timer_ = context.set_timer(delay, "registry.retry", [this, &context] {
    timer_ = 0;
    timer_due_ = Instant::max();
    registry::Actions out;
    client_->on_timer(clock(context), out);
    run(context, out);
  });
}

}  // namespace leaseproof::models
