// Streaming in the simulation: the WebSocket transport, the hub node, the
// relay and the subscriber pool (stream.hpp).
#include "models/stream.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace leaseproof::models {

namespace ws {

ConnectionId make_connection_id(NodeId node, Incarnation incarnation, uint32_t counter) {
  LP_ASSERT_LT(node.value, 1u << 16);
  return (static_cast<uint64_t>(node.value) << 48) | ((incarnation.value & 0xffff) << 32) | counter;
}

uint32_t frame_size(const resume::HubFrame& frame) { return resume::frame_bytes(frame); }

}  // namespace ws

namespace {

constexpr uint32_t kControlBytes = 16;  // open, pong, close frames

sim::Message close_message(ws::ConnectionId id, uint16_t code) {
  return sim::Message{ws::kClose, kControlBytes, std::make_shared<ws::Close>(id, code)};
}

}  // namespace

// ---- hub ---------------------------------------------------------------------

void HubProcess::on_start(sim::NodeContext& context) {
  context_ = &context;
  if (shared_.keep_ring && hub_) {
    resume::RingState rings = hub_->rings();  // a new hub: no subscriber survives the restart
    hub_.emplace(shared_.config, std::move(rings));
    context.note("hub.epoch", "kept", static_cast<int64_t>(hub_->epoch()));
  } else {
    hub_.emplace(shared_.config, ++shared_.last_epoch);
    context.note("hub.epoch", "new", static_cast<int64_t>(hub_->epoch()));
  }
  schedule_tick(Duration::zero());
  schedule_bursts();
}

void HubProcess::note_channel(std::string_view label, const Peer& peer) {
  const auto count = channel_subscribers_.find(peer.channel);
  fmt::memory_buffer detail;  // on the stack: no allocation per note
  fmt::format_to(std::back_inserter(detail), FMT_COMPILE("{} {}"), peer.channel, peer.who);
  context_->note(label, std::string_view{detail.data(), detail.size()},
                 count == channel_subscribers_.end() ? 0 : count->second);
}

void HubProcess::on_message(sim::NodeContext& context, const sim::Envelope& envelope) {
  const Instant now = context.monotonic();
  resume::HubActions actions;
  if (envelope.message.type == ws::kOpen) {
    const auto& open = envelope.message.as<ws::Open>();
    const Peer& peer = peers_[open.connection] = Peer{envelope.from, open.subscribe.channel, open.who};
    ++channel_subscribers_[peer.channel];
    note_channel("upstream.open", peer);
    hub_->subscribe(open.connection, open.subscribe, now, actions);
  } else if (envelope.message.type == ws::kPong) {
    const auto& pong = envelope.message.as<ws::PongFrame>();
    const auto peer = peers_.find(pong.connection);
    if (peer == peers_.end()) return;  // already closed here
    if (pong.index != ++peer->second.received) {
      drop(pong.connection, "stream gap");
    } else {
      hub_->on_pong(pong.connection, pong.pong, now, actions);
    }
  } else {
    LP_ASSERT_MSG(envelope.message.type == ws::kClose, "hub got an unexpected '{}'", envelope.message.type);
    const auto& close = envelope.message.as<ws::Close>();
    const auto peer = peers_.find(close.connection);
    if (peer == peers_.end()) return;
    hub_->on_disconnect(close.connection, now);
    --channel_subscribers_[peer->second.channel];
    note_channel("upstream.close", peer->second);
    peers_.erase(peer);
  }
  apply(actions);
  schedule_timer();
}

// The transport saw a broken stream: drop the subscriber and tell the peer.
void HubProcess::drop(ws::ConnectionId id, const char* reason) {
  const auto peer = peers_.find(id);
  LP_ASSERT(peer != peers_.end());
  hub_->on_disconnect(id, context_->monotonic());
  context_->send(peer->second.node, close_message(id, resume::close_code::abnormal));
  context_->note("hub.drop", fmt::format("{} {}", peer->second.channel, reason));
  --channel_subscribers_[peer->second.channel];
  note_channel("upstream.close", peer->second);
  peers_.erase(peer);
}

void HubProcess::apply(resume::HubActions& actions) {
  sim::NodeContext& context = *context_;
  for (resume::HubAction& action : actions) {
    if (auto* send = std::get_if<resume::HubSend>(&action)) {
      Peer& peer = peers_.at(send->subscriber);
      const uint32_t bytes = ws::frame_size(send->frame);
      context.send(peer.node, sim::Message{ws::kFrame, bytes,
                                           std::make_shared<ws::Frame>(send->subscriber, ++peer.sent,
                                                                       std::move(send->frame))});
      shared_.queue_peak_bytes = std::max(shared_.queue_peak_bytes, hub_->queued_bytes(send->subscriber));
    } else if (auto* close = std::get_if<resume::HubClose>(&action)) {
      const auto peer = peers_.find(close->subscriber);
      LP_ASSERT(peer != peers_.end());
      context.send(peer->second.node, close_message(close->subscriber, close->code));
      context.note("hub.close", fmt::format("{} {} {}", peer->second.channel, close->code, close->reason),
                   close->code);
      --channel_subscribers_[peer->second.channel];
      note_channel("upstream.close", peer->second);
      peers_.erase(peer);
    } else if (auto* mark = std::get_if<resume::HubMark>(&action)) {
      context.note("mark", mark->name);
    }
  }
}

void HubProcess::schedule_timer() {
  const Instant next = hub_->next_deadline();
  if (next == timer_at_) return;
  context_->cancel_timer(timer_);
  timer_at_ = next;
  if (next == Instant::max()) return;
  timer_ = context_->set_timer(std::max(Duration::zero(), next - context_->monotonic()), "hub.timer", [this] {
    timer_at_ = Instant::max();
    resume::HubActions actions;
    hub_->on_timer(context_->monotonic(), actions);
    apply(actions);
    schedule_timer();
  });
}

void HubProcess::close_all(uint16_t code) {
  resume::HubActions actions;
  hub_->close_all(code, "service restart", context_->monotonic(), actions);
  apply(actions);
  schedule_timer();
}

void HubProcess::publish(std::string_view channel, uint32_t bytes) {
  resume::HubActions actions;
  const resume::Message message = hub_->publish(channel, bytes, context_->monotonic(), actions);
  context_->note("hub.publish", channel, message.seq);
  apply(actions);
}

// Publishing follows true time (the hub's clock has no offset): a restarted
// hub carries on with the next tick, and what was due while it was down is
// never published. A burst in progress stops with the hub.
void HubProcess::schedule_tick(Duration not_before) {
  if (shared_.channels.empty()) return;
  const Duration elapsed = context_->wall() - sim::kWallEpoch;
  const int64_t interval = shared_.publish_interval.ns();
  const int64_t from = std::max({shared_.publish_from, elapsed, not_before}).ns();
  const Duration tick = Duration::from_ns((from + interval - 1) / interval * interval);
  if (tick >= shared_.publish_until) return;
  context_->set_timer(tick - elapsed, "hub.publish", [this, tick] {
    for (const std::string& channel : shared_.channels) publish(channel, shared_.message_bytes);
    schedule_timer();
    schedule_tick(tick + Duration::from_ns(1));
  });
}

void HubProcess::schedule_bursts() {
  const Duration elapsed = context_->wall() - sim::kWallEpoch;
  for (size_t i = 0; i < shared_.bursts.size(); ++i) {
    const HubShared::Burst& burst = shared_.bursts[i];
    if (elapsed > burst.at || burst.count == 0) continue;
    context_->set_timer(burst.at - elapsed, "hub.burst", [this, i] { burst_step(i, 0); });
  }
}

// Publishes message `n` of burst `i` (all of them at once when its interval
// is zero), then schedules the next.
void HubProcess::burst_step(size_t i, uint32_t n) {
  const HubShared::Burst& burst = shared_.bursts[i];
  do {
    publish(burst.channel, burst.bytes);
    ++n;
  } while (burst.interval.is_zero() && n < burst.count);
  schedule_timer();
  if (n < burst.count) context_->set_timer(burst.interval, "hub.burst", [this, i, n] { burst_step(i, n); });
}


// ---- relay -------------------------------------------------------------------

void RelayProcess::on_start(sim::NodeContext& context) {
  context_ = &context;
  sweep();
}

void RelayProcess::on_message(sim::NodeContext& context, const sim::Envelope& envelope) {
  const Instant now = context.monotonic();
  const std::string_view type = envelope.message.type;
  if (type == ws::kOpen) {
    routes_[envelope.message.as<ws::Open>().connection] = Route{envelope.from, now};
    context.send(hub_, envelope.message);
    return;
  }
  ws::ConnectionId id = 0;
  if (type == ws::kFrame) id = envelope.message.as<ws::Frame>().connection;
  if (type == ws::kPong) id = envelope.message.as<ws::PongFrame>().connection;
  if (type == ws::kClose) id = envelope.message.as<ws::Close>().connection;
  const auto route = routes_.find(id);
  if (route == routes_.end()) return;  // cut or closed already
  const bool from_hub = envelope.from == hub_;
  context.send(from_hub ? route->second.client : hub_, envelope.message);
  if (type == ws::kClose) {
    routes_.erase(route);
  } else {
    route->second.last_activity = now;
  }
}

// Idle connections are cut within [idle_limit, idle_limit * 9/8].
void RelayProcess::sweep() {
  const Instant now = context_->monotonic();
  for (auto it = routes_.begin(); it != routes_.end();) {
    if (now - it->second.last_activity < idle_limit_) {
      ++it;
      continue;
    }
    context_->note("relay.idle_cut", fmt::format("{}", it->first), (now - it->second.last_activity).ns());
    context_->send(it->second.client, close_message(it->first, resume::close_code::abnormal));
    context_->send(hub_, close_message(it->first, resume::close_code::abnormal));
    it = routes_.erase(it);
  }
  context_->set_timer(Duration::from_ns(idle_limit_.ns() / 8), "relay.sweep", [this] { sweep(); });
}

// ---- subscriber pool -----------------------------------------------------------

void SubscriberPool::on_start(sim::NodeContext& context) {
  context_ = &context;
  random_ = std::make_unique<NodeRandom>(context);
  clients_.resize(options_.count);
  for (uint32_t i = 0; i < options_.count; ++i) {
    clients_[i].client = std::make_unique<resume::ResumeClient>(
        options_.client, fmt::format("{}{}", options_.channel_prefix, i), resume::Position{}, *random_);
    resume::ClientActions actions;
    clients_[i].client->start(context.monotonic(), actions);
    apply(i, actions);
  }
}

void SubscriberPool::on_message(sim::NodeContext& context, const sim::Envelope& envelope) {
  const Instant now = context.monotonic();
  ws::ConnectionId id = 0;
  if (envelope.message.type == ws::kFrame) id = envelope.message.as<ws::Frame>().connection;
  if (envelope.message.type == ws::kClose) id = envelope.message.as<ws::Close>().connection;
  const auto found = by_connection_.find(id);
  if (found == by_connection_.end()) return;  // an old connection
  const uint32_t index = found->second;
  Slot& slot = clients_[index];
  resume::ClientActions actions;
  if (envelope.message.type == ws::kClose) {
    by_connection_.erase(found);
    slot.connection = 0;
    slot.client->on_closed(envelope.message.as<ws::Close>().code, now, actions);
  } else if (!options_.read) {
    return;  // never reads: its queue at the hub only grows
  } else {
    const auto& frame = envelope.message.as<ws::Frame>();
    if (frame.index != ++slot.received) {
      context.send(options_.via, close_message(slot.connection, resume::close_code::abnormal));
      by_connection_.erase(found);
      slot.connection = 0;
      slot.client->on_closed(resume::close_code::abnormal, now, actions);
    } else {
      if (std::holds_alternative<resume::Data>(frame.frame)) ++received_;
      slot.client->on_frame(frame.frame, now, actions);
    }
  }
  apply(index, actions);
}

void SubscriberPool::apply(uint32_t index, resume::ClientActions& actions) {
  sim::NodeContext& context = *context_;
  Slot& slot = clients_[index];
  const Instant now = context.monotonic();
  for (size_t i = 0; i < actions.size(); ++i) {
    resume::ClientAction& action = actions[i];
    if (auto* connect = std::get_if<resume::Connect>(&action)) {
      if (slot.connection != 0) by_connection_.erase(slot.connection);
      slot.connection = ws::make_connection_id(context.id(), context.incarnation(), next_connection_++);
      slot.received = 0;
      slot.sent = 0;
      by_connection_[slot.connection] = index;
      context.send(options_.via, sim::Message{ws::kOpen, kControlBytes,
                                              std::make_shared<ws::Open>(slot.connection, connect->subscribe,
                                                                         std::string{context.name()})});
    } else if (auto* pong = std::get_if<resume::SendPong>(&action)) {
      if (slot.connection == 0) continue;
      context.send(options_.via, sim::Message{ws::kPong, kControlBytes,
                                              std::make_shared<ws::PongFrame>(slot.connection, ++slot.sent,
                                                                              pong->pong)});
    } else if (auto* record = std::get_if<resume::Record>(&action)) {
      // No sink: recorded at once. The client's answer is appended and
      // handled in this same loop.
      resume::ClientActions more;
      slot.client->on_recorded(record->batch, now, more);
      for (resume::ClientAction& next : more) actions.push_back(std::move(next));
    } else if (auto* close = std::get_if<resume::CloseConnection>(&action)) {
      if (slot.connection == 0) continue;
      context.send(options_.via, close_message(slot.connection, close->code));
      by_connection_.erase(slot.connection);
      slot.connection = 0;
    } else if (auto* reset = std::get_if<resume::ResetSeen>(&action)) {
      const resume::Reset& r = reset->reset;
      context.note("resume.reset", fmt::format("{}{} {} {} {} {} {}", options_.channel_prefix, index,
                                               resume::to_string(r.kind), r.after.epoch, r.after.seq, r.resume.epoch,
                                               r.resume.seq));
    } else if (auto* give_up = std::get_if<resume::GiveUp>(&action)) {
      context.note("resume.give_up", fmt::format("{}{}", options_.channel_prefix, index), give_up->code);
    } else if (auto* mark = std::get_if<resume::ClientMark>(&action)) {
      context.note("mark", mark->name);
    }
  }
  schedule(index);
}

void SubscriberPool::schedule(uint32_t index) {
  Slot& slot = clients_[index];
  const Instant next = slot.client->next_deadline();
  if (next == slot.timer_at) return;
  context_->cancel_timer(slot.timer);
  slot.timer_at = next;
  if (next == Instant::max()) return;
  slot.timer = context_->set_timer(std::max(Duration::zero(), next - context_->monotonic()), "subscriber.timer",
                                   [this, index] {
                                     Slot& s = clients_[index];
                                     s.timer_at = Instant::max();
                                     resume::ClientActions actions;
                                     s.client->on_timer(context_->monotonic(), actions);
                                     apply(index, actions);
                                   });
}

}  // namespace leaseproof::models
