// The upstream hub's side of the resume protocol: rings, resume rules,
// bounded subscriber queues, pings and deadlines.
//
// Queue accounting (why it looks like this):
//   - Only Data frames are queued and counted, at frame_bytes(Data) (header +
//     payload), because a Pong's consumed_bytes counts the Data the peer read
//     (protocol.hpp). Reset and Ping frames are control frames: they are
//     never counted, so they can neither fill a queue nor trip the write
//     deadline of a live peer. Both are bounded anyway: at most one Reset per
//     subscription, and pings stop at the pong timeout.
//   - consumed_bytes is applied from the front byte by byte: a frame fully
//     covered is popped; a partial remainder shrinks the front frame, which
//     keeps its send time (it is still not fully consumed, so the write
//     deadline still runs from when it was sent).
//   - A Pong claiming more than is queued is clamped (and marked): the peer's
//     count is wrong, but closing it would not make the stream any safer.
//     The transport clamps it first to the bytes it has written to the
//     socket (runtime/hub/hub_server.cpp): the core counts frames handed to the
//     transport, which a peer that stops reading never receives.
//   - A Pong for a ping not outstanding closes with 1002 (see on_pong).
#include "core/resume/hub.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "base/assert.hpp"

namespace leaseproof::resume {

std::string HubConfig::validate() const {
  auto positive = [](Duration d) { return d > Duration::zero(); };
  if (ring_messages_max == 0) return "hub.ring_messages_max (0) must be at least 1";
  if (ring_bytes_max == 0) return "hub.ring_bytes_max (0) must be at least 1";
  if (subscriber_queue_bytes_max == 0) return "hub.subscriber_queue_bytes_max (0) must be at least 1";
  if (replay_messages_max == 0 || replay_messages_max > ring_messages_max) {
    return fmt::format("hub.replay_messages_max ({}) must be between 1 and hub.ring_messages_max ({})",
                       replay_messages_max, ring_messages_max);
  }
  if (!positive(ping_interval)) return fmt::format("hub.ping_interval ({}) must be positive", ping_interval);
  if (!positive(pong_timeout)) return fmt::format("hub.pong_timeout ({}) must be positive", pong_timeout);
  // A live peer reports what it consumed in its answer to each ping: a
  // deadline shorter than the ping interval would cut peers that are fine.
  if (write_deadline <= ping_interval) {
    return fmt::format("hub.write_deadline ({}) must be longer than hub.ping_interval ({})", write_deadline,
                       ping_interval);
  }
  return {};
}

namespace {

// Drops the oldest messages until the ring is within both bounds. A single
// message larger than ring_bytes_max evicts itself: the ring is then empty
// and a resume from before it resets (evicted).
void evict(ChannelRing& ring, const HubConfig& config) {
  while (ring.messages.size() > config.ring_messages_max || ring.bytes > config.ring_bytes_max) {
    LP_ASSERT(!ring.messages.empty());
    LP_ASSERT_GE(ring.bytes, ring.messages.front().bytes);
    ring.bytes -= ring.messages.front().bytes;
    ring.messages.pop_front();
  }
}

// A ring from a shared store must be what this hub would have kept itself.
void check_ring(const ChannelRing& ring, uint64_t epoch) {
  LP_ASSERT_GE(ring.top, 0);
  uint64_t bytes = 0;
  int64_t seq = ring.top - static_cast<int64_t>(ring.messages.size()) + 1;
  LP_ASSERT_GE(seq, 1);
  for (const Message& message : ring.messages) {
    LP_ASSERT_EQ(message.epoch, epoch);
    LP_ASSERT_EQ(message.seq, seq);
    bytes += message.bytes;
    ++seq;
  }
  LP_ASSERT_EQ(bytes, ring.bytes);
}

int64_t oldest_seq(const ChannelRing& ring) {
  return ring.messages.empty() ? ring.top + 1 : ring.messages.front().seq;
}

// What a resume after a position sends: an optional Reset (with its coverage
// mark), then the ring's messages from first_seq to the top.
struct ResumePlan {
  std::optional<Reset> reset;
  const char* mark = nullptr;
  int64_t first_seq = 0;
};

ResumePlan plan_resume(const HubConfig& config, uint64_t epoch, int64_t oldest, int64_t top, Position after) {
  Position from = after;
  // A connection that never recorded anything (epoch 0) loses nothing while
  // the hub is in its first epoch and the ring still starts at 1: it simply
  // starts from the beginning. In a later epoch, what earlier epochs
  // published is gone, and the reset says so.
  if (after == Position{} && oldest == 1 && epoch == 1) from = Position{epoch, 0};
  if (from.epoch != epoch) {
    return {Reset{ResetKind::epoch_changed, after, Position{epoch, oldest - 1}}, "hub.reset_epoch_changed", oldest};
  }
  if (from.seq > top) {
    return {Reset{ResetKind::ahead_of_top, after, Position{epoch, top}}, "hub.reset_ahead_of_top", top + 1};
  }
  if (from.seq < oldest - 1) {
    if (config.bug_skip_evicted_without_reset) return {std::nullopt, "hub.bug_skip_evicted_without_reset", oldest};
    return {Reset{ResetKind::evicted, after, Position{epoch, oldest - 1}}, "hub.reset_evicted", oldest};
  }
  const int64_t replay_max = config.replay_messages_max;
  if (top - from.seq > replay_max) {
    return {Reset{ResetKind::over_limit, after, Position{epoch, top - replay_max}}, "hub.reset_over_limit",
            top - replay_max + 1};
  }
  return {std::nullopt, nullptr, from.seq + 1};
}

}  // namespace

Hub::Hub(HubConfig config, uint64_t epoch) : config_(std::move(config)) {
  LP_ASSERT_MSG(config_.validate().empty(), "invalid hub config: {}", config_.validate());
  LP_ASSERT_GE(epoch, 1u);  // epoch 0 means "no epoch" in a Position
  rings_.epoch = epoch;
}

Hub::Hub(HubConfig config, RingState rings) : config_(std::move(config)), rings_(std::move(rings)) {
  LP_ASSERT_MSG(config_.validate().empty(), "invalid hub config: {}", config_.validate());
  LP_ASSERT_GE(rings_.epoch, 1u);
  for (auto& [name, ring] : rings_.channels) {
    check_ring(ring, rings_.epoch);
    evict(ring, config_);  // the store may have been kept under larger bounds
    channel(name).ring = &ring;
  }
}

Hub::Channel& Hub::channel(std::string_view name) {
  auto it = channels_.find(name);
  if (it == channels_.end()) it = channels_.emplace(std::string{name}, Channel{}).first;
  return it->second;
}

const ChannelRing* Hub::find_ring(std::string_view name) const {
  auto it = channels_.find(name);
  return it == channels_.end() ? nullptr : it->second.ring;
}

int64_t Hub::top(std::string_view channel) const {
  const ChannelRing* ring = find_ring(channel);
  return ring == nullptr ? 0 : ring->top;
}

uint64_t Hub::queued_bytes(SubscriberId id) const {
  auto it = subscribers_.find(id);
  return it == subscribers_.end() ? 0 : it->second.queued_bytes;
}

Message Hub::publish(std::string_view name, uint32_t bytes, Instant now, HubActions& out) {
  Channel& target = channel(name);
  if (target.ring == nullptr) target.ring = &rings_.channels.emplace(std::string{name}, ChannelRing{}).first->second;
  ChannelRing& ring = *target.ring;
  const Message message{rings_.epoch, ring.top + 1, bytes};
  ring.top = message.seq;
  ring.messages.push_back(message);
  ring.bytes += bytes;
  evict(ring, config_);

  // A copy: a subscriber whose queue is full is closed (and leaves the set)
  // while we walk it.
  publish_to_.assign(target.subscribers.begin(), target.subscribers.end());
  for (const SubscriberId id : publish_to_) {
    auto it = subscribers_.find(id);
    LP_ASSERT(it != subscribers_.end());
    enqueue(id, it->second, Data{message}, now, out);
  }
  return message;
}

void Hub::subscribe(SubscriberId id, const Subscribe& request, Instant now, HubActions& out) {
  LP_ASSERT_MSG(!subscribers_.contains(id), "subscriber {} subscribed twice", id);
  Channel& subscribed = channel(request.channel);
  const ChannelRing* ring = subscribed.ring;
  const int64_t top = ring == nullptr ? 0 : ring->top;
  const int64_t oldest = ring == nullptr ? 1 : oldest_seq(*ring);
  const ResumePlan plan = plan_resume(config_, rings_.epoch, oldest, top, request.after);

  Subscriber& subscriber = subscribers_[id];
  subscriber.channel = &subscribed;
  subscriber.next_ping = now + config_.ping_interval;
  subscribed.subscribers.insert(id);

  if (plan.mark != nullptr) out.push_back(HubMark{plan.mark});
  if (plan.reset) enqueue(id, subscriber, *plan.reset, now, out);
  LP_ASSERT_GE(plan.first_seq, oldest);  // never a hole: every replayed message is still in the ring
  for (int64_t seq = plan.first_seq; seq <= top; ++seq) {
    const Message& message = ring->messages[static_cast<size_t>(seq - oldest)];
    LP_ASSERT_EQ(message.seq, seq);
    if (!enqueue(id, subscriber, Data{message}, now, out)) return;  // closed: the queue is full
  }
  touch(id, subscriber);
}

bool Hub::enqueue(SubscriberId id, Subscriber& subscriber, HubFrame frame, Instant now, HubActions& out) {
  if (std::holds_alternative<Data>(frame)) {
    const uint32_t bytes = frame_bytes(frame);
    if (subscriber.queued_bytes + bytes > config_.subscriber_queue_bytes_max) {
      // Sending anything after a skipped frame would be a hole: close instead.
      out.push_back(HubMark{"hub.close_queue_full"});
      close(id, close_code::try_again_later, "queue full", out);
      return false;
    }
    const bool was_empty = subscriber.queue.empty();
    subscriber.queue.push_back(Queued{bytes, now});
    subscriber.queued_bytes += bytes;
    LP_ASSERT_LE(subscriber.queued_bytes, config_.subscriber_queue_bytes_max);
    if (was_empty) touch(id, subscriber);  // the write deadline starts running
  }
  out.push_back(HubSend{id, std::move(frame)});
  return true;
}

void Hub::on_pong(SubscriberId id, const Pong& pong, Instant now, HubActions& out) {
  (void)now;
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return;  // closed already; the transport has not noticed yet
  Subscriber& subscriber = it->second;
  // Pings are answered in order: an answer to this ping or a later one
  // proves the peer is alive. A window update (ping 0) proves nothing.
  // Only the pings up to the answered one: a later ping still outstanding
  // keeps timing out from its own send time (with a round trip longer than
  // the ping interval, the answer to one ping arrives after the next is sent).
  // A pong naming a ping this subscriber has no answer outstanding for (never
  // sent to it, or answered already) is not the protocol: a peer could keep
  // itself alive with guessed ids while reading nothing.
  auto answered = subscriber.unanswered.end();
  if (pong.ping != 0) {
    answered = std::find_if(subscriber.unanswered.begin(), subscriber.unanswered.end(),
                            [&](const SentPing& sent) { return sent.id == pong.ping; });
    if (answered == subscriber.unanswered.end()) {
      out.push_back(HubMark{"hub.close_pong_unknown_ping"});
      close(id, close_code::protocol_error, "pong for a ping not outstanding", out);
      return;
    }
  }
  uint64_t consumed = pong.consumed_bytes;
  if (consumed > subscriber.queued_bytes) {
    out.push_back(HubMark{"hub.pong_overconsumed"});
    consumed = subscriber.queued_bytes;
  }
  subscriber.queued_bytes -= consumed;
  while (consumed > 0) {
    LP_ASSERT(!subscriber.queue.empty());
    Queued& front = subscriber.queue.front();
    if (front.bytes > consumed) {
      front.bytes -= static_cast<uint32_t>(consumed);  // partly read: still counts from its send time
      break;
    }
    consumed -= front.bytes;
    subscriber.queue.pop_front();
  }
  if (answered != subscriber.unanswered.end()) subscriber.unanswered.erase(subscriber.unanswered.begin(), answered + 1);
  touch(id, subscriber);
}

void Hub::on_disconnect(SubscriberId id, Instant now) {
  (void)now;
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return;
  const size_t erased = it->second.channel->subscribers.erase(id);
  LP_ASSERT_EQ(erased, 1u);
  subscribers_.erase(it);  // its wakeups go stale and are dropped when they surface
}

void Hub::close(SubscriberId id, uint16_t code, const char* reason, HubActions& out) {
  LP_ASSERT(subscribers_.contains(id));
  on_disconnect(id, Instant{});  // the same removal (it needs no time), then the close frame
  out.push_back(HubClose{id, code, reason});
}

void Hub::close_all(uint16_t code, const char* reason, Instant now, HubActions& out) {
  (void)now;
  // In id order (subscribers_ is hashed): the close frames go out in it.
  std::vector<SubscriberId> ids;
  ids.reserve(subscribers_.size());
  for (const auto& [id, subscriber] : subscribers_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (const SubscriberId id : ids) close(id, code, reason, out);
  LP_ASSERT(subscribers_.empty());
}

Instant Hub::due_time(const Subscriber& subscriber) const {
  Instant due = subscriber.next_ping;
  if (!subscriber.unanswered.empty()) due = std::min(due, subscriber.unanswered.front().sent + config_.pong_timeout);
  if (!subscriber.queue.empty()) due = std::min(due, subscriber.queue.front().sent + config_.write_deadline);
  return due;
}

// Invariant: every subscriber has a wakeup at exactly its due time (older
// entries may linger; they are dropped when they surface).
void Hub::touch(SubscriberId id, Subscriber& subscriber) {
  const Instant due = due_time(subscriber);
  if (subscriber.queued_at == due) return;  // already queued (the queue would keep it once anyway)
  subscriber.queued_at = due;
  wakeups_.push({due, id});
}

void Hub::pop_wakeup() const {
  const auto [at, id] = wakeups_.top();
  auto it = subscribers_.find(id);
  if (it != subscribers_.end() && it->second.queued_at == at) it->second.queued_at = Instant::max();
  wakeups_.pop();
}

void Hub::process(SubscriberId id, Instant now, HubActions& out) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return;  // a stale entry of a closed subscriber
  Subscriber& subscriber = it->second;
  if (!subscriber.unanswered.empty() && subscriber.unanswered.front().sent + config_.pong_timeout <= now) {
    out.push_back(HubMark{"hub.close_pong_timeout"});
    close(id, close_code::abnormal, "pong timeout", out);
    return;
  }
  if (!subscriber.queue.empty() && subscriber.queue.front().sent + config_.write_deadline <= now) {
    out.push_back(HubMark{"hub.close_write_deadline"});
    close(id, close_code::abnormal, "write deadline", out);
    return;
  }
  if (subscriber.next_ping <= now) {
    // Ping every interval even with one outstanding (it keeps idle cut-offs
    // on the way from firing), but time out the oldest unanswered one: a
    // dead peer is cut within ping_interval + pong_timeout of going silent.
    const uint64_t ping = next_ping_id_++;
    subscriber.unanswered.push_back(SentPing{ping, now});
    subscriber.next_ping = now + config_.ping_interval;
    enqueue(id, subscriber, Ping{ping}, now, out);
  }
  touch(id, subscriber);
}

void Hub::on_timer(Instant now, HubActions& out) {
  // Entries added while processing are all later than now (every due time is
  // now + a positive duration), so this visits each due entry once.
  const size_t bound = wakeups_.size();
  for (size_t steps = 0; !wakeups_.empty() && wakeups_.top().first <= now; ++steps) {
    LP_ASSERT_LT(steps, bound);
    const SubscriberId id = wakeups_.top().second;
    pop_wakeup();
    process(id, now, out);
  }
}

Instant Hub::next_deadline() const {
  // Drop entries that later changes made stale (the subscriber is due later,
  // or gone); a fresher entry exists for the real due time.
  while (!wakeups_.empty()) {
    const auto [at, id] = wakeups_.top();
    auto it = subscribers_.find(id);
    if (it != subscribers_.end() && at >= due_time(it->second)) return at;
    pop_wakeup();
  }
  return Instant::max();
}

}  // namespace leaseproof::resume
