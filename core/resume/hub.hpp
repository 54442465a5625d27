#pragma once
// The upstream hub's publisher side of the resume protocol. Sans-IO: every
// entry point takes the hub's monotonic clock reading and appends the frames
// to send and the subscribers to close; the caller calls on_timer() at
// next_deadline() and reports what the transport did (pongs, disconnects).
//
// Per channel: messages numbered 1, 2, ... within the hub's epoch, kept in a
// ring bounded by count and bytes. Per subscriber: one bounded queue (bytes
// sent and not yet consumed by the peer, as its Pongs report). Rules:
//   - a frame that would take a queue above its bound closes the subscriber
//     with 1013 instead: a subscriber gets every message or is closed, never
//     a hole; replay goes through the same queue;
//   - a resume either replays exactly the messages after the position or
//     sends a typed Reset first (evicted, epoch_changed, ahead_of_top,
//     over_limit) naming where delivery resumes;
//   - every subscriber is pinged each ping_interval (shorter than any idle
//     cut-off on the way); no Pong within pong_timeout closes it (1006); data
//     left unconsumed for write_deadline closes it too (a stalled write is as
//     dead as a silent peer);
//   - a closed subscriber leaves the count at once.
// See docs/resume-core.md.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "base/lex_compare.hpp"
#include "base/time.hpp"
#include "base/wakeup_queue.hpp"
#include "core/resume/protocol.hpp"

namespace leaseproof::resume {

struct HubConfig {
  uint32_t ring_messages_max = 10'000;              // per channel
  uint64_t ring_bytes_max = 16ull << 20;            // per channel
  uint64_t subscriber_queue_bytes_max = 1ull << 20; // per subscriber
  uint32_t replay_messages_max = 5'000;             // a longer replay resets (over_limit)
  Duration ping_interval = Duration::from_s(2);
  Duration pong_timeout = Duration::from_s(4);
  Duration write_deadline = Duration::from_s(10);
  // Deliberately broken variant for checker tests: a resume from an evicted
  // position replays from the oldest message without sending a Reset.
  bool bug_skip_evicted_without_reset = false;

  // "" when valid, else names the field and what is allowed, e.g.
  // "hub.pong_timeout (0s) must be positive".
  std::string validate() const;
};

using SubscriberId = uint64_t;

// Hub actions.
struct HubSend {
  SubscriberId subscriber = 0;
  HubFrame frame;
};
struct HubClose {
  SubscriberId subscriber = 0;
  uint16_t code = close_code::normal;
  const char* reason = "";  // static string: "queue full", "pong timeout", ...
};
struct HubMark {
  const char* name;  // coverage mark, e.g. "hub.reset_evicted"
};
using HubAction = std::variant<HubSend, HubClose, HubMark>;
using HubActions = std::vector<HubAction>;

// A channel's ring, as kept by a shared store across hub restarts.
struct ChannelRing {
  std::deque<Message> messages;  // oldest first
  uint64_t bytes = 0;
  int64_t top = 0;  // last seq published in the epoch (0: none)
};
struct RingState {
  uint64_t epoch = 1;
  std::map<std::string, ChannelRing, LexLess> channels;
};

class Hub {
 public:
  // A fresh hub: `epoch` must differ from every earlier epoch of this hub
  // (the caller persists a counter); every ring starts empty.
  Hub(HubConfig config, uint64_t epoch);
  // A hub restarted with its rings kept in a shared store: same epoch.
  Hub(HubConfig config, RingState rings);
  // Its channel index points into its own rings: moved, never copied.
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;
  Hub(Hub&&) = default;
  Hub& operator=(Hub&&) = default;

  // Appends the next message of `channel` and sends it to its subscribers.
  Message publish(std::string_view channel, uint32_t bytes, Instant now, HubActions& out);
  // A new subscriber (the transport's id, unique for this hub) resuming after
  // `request.after`. Sends the Reset and replay it needs.
  void subscribe(SubscriberId id, const Subscribe& request, Instant now, HubActions& out);
  void on_pong(SubscriberId id, const Pong& pong, Instant now, HubActions& out);
  // The transport lost the subscriber (peer closed, connection dropped).
  void on_disconnect(SubscriberId id, Instant now);
  // Closes every subscriber with `code` (1012 on a service restart).
  void close_all(uint16_t code, const char* reason, Instant now, HubActions& out);
  void on_timer(Instant now, HubActions& out);
  // Monotonic time of the next on_timer() call needed; Instant::max() if none.
  Instant next_deadline() const;

  uint64_t epoch() const { return rings_.epoch; }
  const RingState& rings() const { return rings_; }
  int64_t top(std::string_view channel) const;
  size_t subscriber_count() const { return subscribers_.size(); }
  // Bytes queued for a subscriber (0 if unknown); never above the bound.
  uint64_t queued_bytes(SubscriberId id) const;
  const HubConfig& config() const { return config_; }

 private:
  struct Queued {
    uint32_t bytes = 0;
    Instant sent;
  };
  struct SentPing {
    uint64_t id = 0;
    Instant sent;
  };
  struct Channel;
  struct Subscriber {
    Channel* channel = nullptr;  // its entry in channels_ (node-based: the pointer stays valid)
    std::deque<Queued> queue;  // sent, not yet consumed; oldest first
    uint64_t queued_bytes = 0;
    // Pings sent and not yet answered, oldest first. A pong answers its ping
    // and every earlier one; the oldest left times out. Bounded: one is sent
    // a ping interval, and the peer is cut a pong timeout after the oldest.
    std::vector<SentPing> unanswered;
    Instant next_ping;
    // The due time of this subscriber's latest wakeup while that wakeup is
    // queued (max otherwise): a touch with the same due time queues nothing.
    // Mutable: next_deadline(), a const call, drops entries.
    mutable Instant queued_at = Instant::max();
  };
  // A channel's ring (in rings_) and its subscribers, found by name once per publish.
  struct Channel {
    ChannelRing* ring = nullptr;          // null until something is published or kept
    std::set<SubscriberId> subscribers;  // in id order: the order frames are sent in
  };

  // Sends `frame` through the subscriber's queue; false if it closed instead.
  bool enqueue(SubscriberId id, Subscriber& subscriber, HubFrame frame, Instant now, HubActions& out);
  void close(SubscriberId id, uint16_t code, const char* reason, HubActions& out);
  Instant due_time(const Subscriber& subscriber) const;
  void touch(SubscriberId id, Subscriber& subscriber);
  // Whatever is due for one subscriber: pong timeout, write deadline, ping.
  void process(SubscriberId id, Instant now, HubActions& out);
  // Removes the first wakeup (every copy of it) and notes that it is gone.
  void pop_wakeup() const;
  Channel& channel(std::string_view name);  // made on first use
  const ChannelRing* find_ring(std::string_view name) const;

  HubConfig config_;
  RingState rings_;
  // Hashed: found by id or name on every frame; nothing walks them in an
  // order that shows (close_all sorts the ids it closes).
  std::unordered_map<SubscriberId, Subscriber> subscribers_;
  std::unordered_map<std::string, Channel, TextHash, std::equal_to<>> channels_;
  std::vector<SubscriberId> publish_to_;  // publish's copy of a channel's subscribers (reused)
  uint64_t next_ping_id_ = 1;
  // Due times, as in the lease manager: entries made stale are dropped when
  // they surface (next_deadline() drops them too, hence mutable). Observed
  // through top() and pop(), the queue is the set of (due time, id) pairs.
  mutable WakeupQueue<std::pair<Instant, SubscriberId>, std::less<>> wakeups_;
};

}  // namespace leaseproof::resume
