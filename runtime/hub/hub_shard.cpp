// A shard of the hub: core/resume's Hub carried out on this shard's
// subscribers: publishes into its core and store, the core's actions applied,
// its timer, and the subscribers' frames (hub_shard.hpp says what the hub's
// files share).
#include <map>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "runtime/hub/hub_session.hpp"
#include "runtime/hub/hub_shard.hpp"

namespace leaseproof::runtime {

void HubServer::Impl::generate(const std::shared_ptr<Generator>& g) {
  if (shutting_down_) return;
  const Instant now = monotonic_now();
  const double elapsed_s = static_cast<double>((now - g->started).ns()) / 1e9;
  const auto due = static_cast<uint64_t>(elapsed_s * g->config.rate) + 1;  // the first goes at once
  // At most a second's worth per tick: a hub that fell behind catches up
  // without blocking its subscribers for long.
  const uint64_t burst = std::min<uint64_t>(due - std::min(due, g->sent), std::max<uint64_t>(1, static_cast<uint64_t>(g->config.rate)));
  for (uint64_t i = 0; i < burst; ++i) {
    fleet_.publish(g->config.channel, synthetic_payload(g->config.bytes, wall_now_ns()), nullptr);
    ++g->sent;
  }
  const auto interval = std::chrono::nanoseconds(std::max<int64_t>(1'000'000, static_cast<int64_t>(1e9 / g->config.rate)));
  g->timer.expires_after(interval);
  g->timer.async_wait([weak = weak_from_this(), g](beast::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->generate(g);
  });
}

void HubServer::Impl::wait_closed(std::function<void()> done, Instant give_up) {
  if (sessions_.empty() || monotonic_now() >= give_up) {
    if (!sessions_.empty()) log_(fmt::format("hub: {} connections still open at the shutdown deadline", sessions_.size()));
    return done();
  }
  shutdown_timer_.expires_after(std::chrono::milliseconds(20));
  shutdown_timer_.async_wait([weak = weak_from_this(), done = std::move(done), give_up](beast::error_code ec) mutable {
    if (ec) return;
    if (auto self = weak.lock()) self->wait_closed(std::move(done), give_up);
  });
}

bool HubServer::Impl::publish(std::string_view channel, std::string_view payload, std::string* error,
                              std::function<void(int64_t)> done) {
  if (std::string why = check_publish(channel, payload); !why.empty()) {
    if (error) *error = std::move(why);
    return false;
  }
  if (shared_) {
    // Into the shared log; this hub's core gets it back, in log order, like every other hub's.
    shared_->publish(channel, payload, [done = std::move(done)](int64_t seq) {
      if (done) done(seq);
    });
    return true;
  }
  const int64_t seq = publish_local(channel, payload);
  if (done) done(seq);
  return true;
}

int64_t HubServer::Impl::publish_local(std::string_view channel, std::string_view payload) {
  const Instant accepted = monotonic_now();
  const resume::Message next{hub_->epoch(), hub_->top(channel) + 1, static_cast<uint32_t>(payload.size())};
  deliver(std::string{channel}, next.seq, next.bytes,
          std::make_shared<const std::string>(encode_data(channel, next, payload)), fleet_.begin_fanout(accepted, 1));
  return next.seq;
}

void HubServer::Impl::enqueue(Delivery delivery) {
  bool post = false;
  {
    std::lock_guard lock(inbox_mutex_);
    inbox_.push_back(std::move(delivery));
    post = !std::exchange(drain_posted_, true);
  }
  if (post) asio::post(io_, [self = shared_from_this()] { self->drain_inbox(); });
}

void HubServer::Impl::drain_inbox() {
  std::vector<Delivery> batch;
  {
    std::lock_guard lock(inbox_mutex_);
    batch.swap(inbox_);
    drain_posted_ = false;
  }
  for (Delivery& d : batch) deliver(d.channel, d.seq, d.bytes, std::move(d.frame), std::move(d.across));
}

void HubServer::Impl::deliver(const std::string& channel, int64_t seq, uint32_t bytes, Frame frame,
                              std::shared_ptr<FanOutAcross> across) {
  StoredChannel& stored = store_[channel];
  if (stored.frames.empty()) stored.first_seq = seq;
  stored.frames.push_back(std::move(frame));
  resume::HubActions actions;
  const resume::Message published = hub_->publish(channel, bytes, monotonic_now(), actions);
  // Every shard's core sees the same publishes in the same order.
  LP_ASSERT_EQ(published.seq, seq);
  ++counters_.published;
  // The frames this publish queues are timed until the last is written.
  publishing_ = stored.frames.back().get();
  publishing_pending_ = 0;
  const auto& rings = hub_->rings().channels;
  const auto ring = rings.find(channel);
  const int64_t oldest = ring == rings.end() || ring->second.messages.empty() ? seq + 1
                                                                              : ring->second.messages.front().seq;
  while (!stored.frames.empty() && stored.first_seq < oldest) {
    stored.frames.pop_front();
    ++stored.first_seq;
    ++counters_.ring_evictions;
  }
  apply(actions);
  if (publishing_pending_ > 0) {
    fanouts_.insert_or_assign(publishing_, FanOut{std::move(across), publishing_pending_, 0, Instant{}});
  } else {
    fleet_.fanout_shard_done(*across, 0, Instant{});
  }
  publishing_ = nullptr;
  rearm();
}

void HubServer::Impl::fanout_done(const std::string* frame, Instant now, bool written) {
  const auto it = fanouts_.find(frame);
  if (it == fanouts_.end()) return;
  FanOut& fanout = it->second;
  if (written) {
    ++fanout.written;
    fanout.last_written = now;
  }
  if (--fanout.pending > 0) return;
  // Every subscriber's frame on this shard is written (or its subscriber
  // went away): this shard's share of the fan-out has ended.
  fleet_.fanout_shard_done(*fanout.across, fanout.written, fanout.last_written);
  fanouts_.erase(it);
}

void HubServer::Impl::opened(SharedRingSnapshot snapshot) {
  std::map<std::pair<std::string, int64_t>, const std::string*> payloads;
  for (const LogEntry& entry : snapshot.log) payloads[{entry.channel, entry.seq}] = &entry.payload;
  hub_.emplace(options_.hub, rings_from_snapshot(snapshot));
  size_t kept = 0;
  for (const auto& [name, ring] : hub_->rings().channels) {
    StoredChannel& stored = store_[name];
    stored.first_seq = ring.messages.empty() ? ring.top + 1 : ring.messages.front().seq;
    for (const resume::Message& message : ring.messages) {
      const auto it = payloads.find({name, message.seq});
      LP_ASSERT(it != payloads.end());  // rings_from_snapshot took them from the log
      stored.frames.push_back(std::make_shared<const std::string>(encode_data(name, message, *it->second)));
      ++kept;
    }
  }
  log_(fmt::format("hub: shared store {}:{} ({}:*) opened: epoch {}, {} channels, {} messages kept of {} in the log",
                   options_.shared.host, options_.shared.port, options_.shared.prefix, hub_->epoch(),
                   hub_->rings().channels.size(), kept, snapshot.log.size()));
  serve();
  shared_->follow([weak = weak_from_this()](LogEntry entry) {
    if (auto self = weak.lock()) self->on_log_entry(std::move(entry));
  });
}

void HubServer::Impl::on_log_entry(LogEntry entry) {
  if (failed_) return;
  if (!check_publish(entry.channel, entry.payload).empty()) {
    return fatal(fmt::format("the shared log holds an entry no hub publishes (channel '{}')", entry.channel));
  }
  const int64_t top = hub_->top(entry.channel);
  if (entry.seq <= top) return;  // already here (the snapshot held it)
  if (entry.seq != top + 1) {
    return fatal(fmt::format("the shared log went from seq {} to {} in channel {}: entries were trimmed before this "
                             "hub read them",
                             top, entry.seq, entry.channel));
  }
  publish_local(entry.channel, entry.payload);
}

Frame HubServer::Impl::data_frame(const std::string& channel, int64_t seq) const {
  const auto it = store_.find(channel);
  if (it == store_.end() || seq < it->second.first_seq) return nullptr;
  const auto index = static_cast<std::size_t>(seq - it->second.first_seq);
  return index < it->second.frames.size() ? it->second.frames[index] : nullptr;
}

void HubServer::Impl::apply(resume::HubActions& actions) {
  for (resume::HubAction& action : actions) {
    if (auto* send = std::get_if<resume::HubSend>(&action)) {
      const auto it = sessions_.find(send->subscriber);
      LP_ASSERT_MSG(it != sessions_.end(), "the core sent to subscriber {} that the transport does not have",
                    send->subscriber);
      Session& session = *it->second;
      if (!session.in_core()) continue;  // its outbox overflowed earlier in this batch
      bool queued = true;
      if (const auto* data = std::get_if<resume::Data>(&send->frame)) {
        Frame frame = data_frame(session.channel(), data->message.seq);
        // The store mirrors the ring the core replays from: a miss is a bug here.
        LP_ASSERT_MSG(frame != nullptr, "no stored frame for {} seq {}", session.channel(), data->message.seq);
        const bool fanout = frame.get() == publishing_;
        queued = session.send(std::move(frame), resume::frame_bytes(send->frame), true, fanout);
        if (queued && fanout) ++publishing_pending_;
      } else if (const auto* reset = std::get_if<resume::Reset>(&send->frame)) {
        ++counters_.resets_by_kind[std::string{resume::to_string(reset->kind)}];
        queued = session.send(std::make_shared<const std::string>(encode_reset(*reset)), 0, false);
      } else {
        queued = session.send(std::make_shared<const std::string>(encode_ping(std::get<resume::Ping>(send->frame))), 0,
                              false);
      }
      if (!queued) {
        ++counters_.outbox_overflows;
        ++counters_.closes_by_code[resume::close_code::try_again_later];
        log_(fmt::format("hub: closing subscriber {} of channel {} with 1013: outbox past its hard bound",
                         session.id(), session.channel()));
        hub_->on_disconnect(session.id(), monotonic_now());
        session.mark_core_closed();
        session.close(resume::close_code::try_again_later, "outbox full");
      }
    } else if (auto* close = std::get_if<resume::HubClose>(&action)) {
      const auto it = sessions_.find(close->subscriber);
      LP_ASSERT(it != sessions_.end());
      if (!it->second->in_core()) continue;  // its outbox overflowed earlier in this batch
      ++counters_.closes_by_code[close->code];
      if (close->code == resume::close_code::protocol_error) ++counters_.protocol_errors;
      if (!shutting_down_ && !quiet_closes_) {
        log_(fmt::format("hub: closing subscriber {} of channel {} with {} ({})", close->subscriber,
                         it->second->channel(), close->code, close->reason));
      }
      it->second->mark_core_closed();
      it->second->close(close->code, close->reason);
    } else {
      ++counters_.marks[std::get<resume::HubMark>(action).name];
    }
  }
  actions.clear();
}

void HubServer::Impl::rearm() {
  const Instant due = hub_->next_deadline();
  if (due == armed_) return;
  armed_ = due;
  if (due == Instant::max()) {
    core_timer_.cancel();
    return;
  }
  core_timer_.expires_at(to_steady(due));
  core_timer_.async_wait([weak = weak_from_this(), due](beast::error_code ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self || self->armed_ != due) return;
    self->armed_ = Instant::max();
    self->on_core_timer();
  });
}

void HubServer::Impl::on_core_timer() {
  resume::HubActions actions;
  hub_->on_timer(monotonic_now(), actions);
  apply(actions);
  rearm();
}

void HubServer::Impl::on_client_text(Session& session, std::string_view text, bool is_text) {
  // Publishes sequenced before this frame was read go first (drain_inbox);
  // they may close this very session (its outbox past its bound).
  drain_inbox();
  if (session.closing()) return;
  resume::HubActions actions;
  const Instant now = monotonic_now();
  auto protocol_error = [&](std::string why, uint16_t code = resume::close_code::protocol_error) {
    ++counters_.protocol_errors;
    log_(fmt::format("hub: subscriber {}: protocol error: {}", session.id(), why));
    if (session.in_core()) {
      hub_->on_disconnect(session.id(), now);
      rearm();
    }
    session.mark_core_closed();
    ++counters_.closes_by_code[code];
    session.close(code, why);
  };
  // 1003: "received a type of data it cannot accept" (RFC 6455 7.4.1).
  if (!is_text) return protocol_error("a binary frame; the protocol is JSON text frames", 1003);
  auto decoded = decode_client_frame(text);
  if (const auto* error = std::get_if<WireError>(&decoded)) return protocol_error(error->message);
  auto& frame = std::get<WireClientFrame>(decoded);
  session.note_frame_in(now);
  if (auto* subscribe = std::get_if<resume::Subscribe>(&frame)) {
    if (session.subscribed()) return protocol_error("a second subscribe on one connection");
    ++counters_.subscribes;
    session.set_subscribed(subscribe->channel);
    hub_->subscribe(session.id(), *subscribe, now, actions);
  } else {
    if (!session.in_core()) return protocol_error("a pong before subscribe");
    resume::Pong pong = std::get<resume::Pong>(frame);
    const uint64_t claimed = pong.consumed_bytes;
    pong.consumed_bytes = session.take_credit(claimed);
    if (pong.consumed_bytes != claimed) ++counters_.pong_credit_clamped;
    hub_->on_pong(session.id(), pong, now, actions);
  }
  apply(actions);
  rearm();
}

void HubServer::Impl::close_unsubscribed(uint16_t code, const char* reason) {
  for (auto& [id, session] : sessions_) {
    if (!session->subscribed()) session->close(code, reason);
  }
}

void HubServer::Impl::on_failed_by_beast(Session& session, uint16_t code, const std::string& why) {
  ++counters_.protocol_errors;
  ++counters_.closes_by_code[code];
  log_(fmt::format("hub: subscriber {}: protocol error: {} (closed with {})", session.id(), why, code));
}

void HubServer::Impl::on_session_gone(Session& session, bool by_peer) {
  if (session.in_core()) {
    hub_->on_disconnect(session.id(), monotonic_now());
    session.mark_core_closed();
    rearm();
  }
  if (by_peer) ++counters_.disconnects;
  if (!options_.sessions_path.empty()) fleet_.record_session(session.record(monotonic_now()));
  sessions_.erase(session.id());  // `session` may be destroyed once its handler returns
}

ShardStats HubServer::Impl::stats() const {
  ShardStats s;
  s.counters = counters_;
  s.epoch = epoch();
  if (!hub_) return s;
  s.subscribers = hub_->subscriber_count();
  for (const auto& [id, session] : sessions_) {
    s.queued += hub_->queued_bytes(id);
    s.outbox += session->outbox_bytes();
  }
  for (const auto& [name, ring] : hub_->rings().channels) {
    s.ring_bytes += ring.bytes;
    s.ring_messages += ring.messages.size();
  }
  return s;
}

}  // namespace leaseproof::runtime
