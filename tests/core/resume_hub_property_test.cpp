// Stateful rapidcheck test of the upstream hub (core/resume): random sequences
// of publishes, subscribes from random positions (biased to the ring's
// boundaries), pongs, time steps (with peers that answer pings or stay
// silent), disconnects and restarts (ring kept or lost), under a random small
// configuration. A simple model keeps each channel's ring and derives what a
// resume must send; an observer (HubWorld) checks every action the hub emits:
//   - each subscriber's Data is contiguous after its position, or after a
//     Reset (the first frame) whose resume position matches the first Data,
//     and is exactly what the model expects;
//   - queued bytes never exceed the bound and match the observer's account;
//   - every close is justified (1013: the next frame would not fit; 1006: an
//     unanswered ping older than the pong timeout, or unread data older than
//     the write deadline; 1012: a restart), and every due close happens
//     (any ping unanswered for the pong timeout, whichever ping it is);
//   - subscriber_count() matches the observer's open subscribers.
// RC_PARAMS="reproduce=..." replays a failure.

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/resume/hub.hpp"

namespace leaseproof::resume::test {
namespace {

using namespace literals;

const std::vector<std::string> kChannels{"a", "b"};

// ---- the model ------------------------------------------------------------------------

struct RingModel {
  std::deque<Message> messages;
  uint64_t bytes = 0;
  int64_t top = 0;
  int64_t oldest() const { return messages.empty() ? top + 1 : messages.front().seq; }
};

struct HubModel {
  HubConfig config;
  uint64_t epoch = 1;
  std::map<std::string, RingModel> rings;
  SubscriberId next_id = 1;

  RingModel ring(const std::string& channel) const {
    auto it = rings.find(channel);
    return it == rings.end() ? RingModel{} : it->second;
  }
  void publish(const std::string& channel, uint32_t bytes) {
    RingModel& r = rings[channel];
    r.top += 1;
    r.messages.push_back(Message{epoch, r.top, bytes});
    r.bytes += bytes;
    while (r.messages.size() > config.ring_messages_max || r.bytes > config.ring_bytes_max) {
      r.bytes -= r.messages.front().bytes;
      r.messages.pop_front();
    }
  }
};

// What a resume must send, straight from the rules of hub.hpp.
struct ExpectedResume {
  std::optional<Reset> reset;
  std::vector<Message> replay;
};

ExpectedResume expected_resume(const HubModel& model, const std::string& channel, Position after) {
  const RingModel ring = model.ring(channel);
  const int64_t top = ring.top;
  const int64_t oldest = ring.oldest();
  const int64_t replay_max = model.config.replay_messages_max;
  const bool fresh = after == Position{} && oldest == 1 && model.epoch == 1;
  const int64_t seq = fresh ? 0 : after.seq;
  ExpectedResume expected;
  int64_t first = seq + 1;
  if (after.epoch != model.epoch && !fresh) {
    expected.reset = Reset{ResetKind::epoch_changed, after, Position{model.epoch, oldest - 1}};
    first = oldest;
  } else if (seq > top) {
    expected.reset = Reset{ResetKind::ahead_of_top, after, Position{model.epoch, top}};
    first = top + 1;
  } else if (seq < oldest - 1) {
    expected.reset = Reset{ResetKind::evicted, after, Position{model.epoch, oldest - 1}};
    first = oldest;
  } else if (top - seq > replay_max) {
    expected.reset = Reset{ResetKind::over_limit, after, Position{model.epoch, top - replay_max}};
    first = top - replay_max + 1;
  }
  for (const Message& message : ring.messages) {
    if (message.seq >= first) expected.replay.push_back(message);
  }
  return expected;
}

// ---- the observer and driver -----------------------------------------------------------

// One subscriber as the observer sees it: what it asked for, what it got, and
// the peer's side of flow control and liveness.
struct Peer {
  std::string channel;
  Position after;
  bool open = true;
  bool saw_reset = false;
  std::optional<Message> last_data;
  std::optional<Position> reset_resume;
  std::deque<std::pair<uint32_t, Instant>> queue;  // Data sent, not yet reported consumed
  uint64_t queued = 0;
  uint64_t unreported = 0;  // read by the peer, not yet reported in a Pong
  std::vector<std::pair<uint64_t, Instant>> pings;
  uint64_t answered_through = 0;  // highest ping id the peer answered
  Instant last_ping;              // or the subscribe time
};

// What the actions of one call may contain.
struct Expect {
  std::map<SubscriberId, std::deque<Message>> data;
  std::map<SubscriberId, std::optional<Reset>> reset;
  bool timers = false;     // pings and 1006 closes
  bool close_all = false;  // 1012 to everyone
  bool lie = false;        // a pong for a ping not outstanding: 1002
};

class HubWorld {
 public:
  HubWorld(HubConfig config, uint64_t epoch) : config_(config), hub_(std::make_unique<Hub>(config, epoch)) {}

  void publish(const HubModel& model, const std::string& channel, uint32_t bytes) {
    Expect expect;
    const Message message{model.epoch, model.ring(channel).top + 1, bytes};
    for (auto& [id, peer] : peers_) {
      if (peer.open && peer.channel == channel) expect.data[id].push_back(message);
    }
    HubActions out;
    const Message published = hub_->publish(channel, bytes, now_, out);
    if (published.seq != message.seq || published.epoch != message.epoch) violation("publish numbered wrongly");
    absorb(out, expect);
  }

  void subscribe(const HubModel& model, const std::string& channel, Position after) {
    const SubscriberId id = model.next_id;
    const ExpectedResume expected = expected_resume(model, channel, after);
    Expect expect;
    expect.data[id].assign(expected.replay.begin(), expected.replay.end());
    expect.reset[id] = expected.reset;
    Peer& peer = peers_[id];
    peer.channel = channel;
    peer.after = after;
    peer.last_ping = now_;
    HubActions out;
    hub_->subscribe(id, Subscribe{channel, after}, now_, out);
    absorb(out, expect);
    if (peers_[id].open && expected.reset && !peers_[id].saw_reset) violation("subscriber {}: Reset missing", id);
  }

  // `answer`: 0 window update, 1 the latest ping, 2 the oldest unanswered
  // ping (a window update when every ping is answered), 3 a lie: a ping id
  // never sent, which closes the peer with 1002.
  void pong(SubscriberId id, int answer, uint32_t consumed_permille) {
    Pong pong;
    Expect expect;
    auto it = peers_.find(id);
    if (it != peers_.end() && it->second.open) {
      Peer& peer = it->second;
      pong.consumed_bytes = peer.unreported * consumed_permille / 1000;
      if (answer == 3) {
        pong.ping = (peer.pings.empty() ? 0 : peer.pings.back().first) + 1'000'000;
        expect.lie = true;
      } else {
        pong.ping = ping_to_answer(peer, answer);
        report(peer, pong);
      }
    }
    HubActions out;
    hub_->on_pong(id, pong, now_, out);
    absorb(out, expect);
    if (expect.lie && it->second.open) violation("subscriber {}: a pong for ping {} never sent left it open", id, pong.ping);
  }

  // Peers answer every ping at once, never, or each ping `delay` after it
  // was sent (a round trip that may be longer than the ping interval, but
  // shorter than the pong timeout: such a peer is alive and must stay open).
  // `late_then_silent`: late for the first half, then silent (a peer with a
  // long round trip that dies).
  enum class Peers { answer, silent, late, late_then_silent };

  void advance(Duration d, Peers peers, Duration delay) {
    const Instant until = now_ + d;
    const Instant dies = peers == Peers::late_then_silent ? now_ + d / 2 : Instant::max();
    if (peers == Peers::late_then_silent) peers = Peers::late;
    for (int steps = 0;; ++steps) {
      Instant next = hub_->next_deadline();
      if (peers == Peers::late && now_ >= dies) peers = Peers::silent;
      if (peers == Peers::late) next = std::min(next, std::min(next_late_answer(delay), dies));
      if (next > until) break;
      if (steps > 100'000) return violation("on_timer does not make progress");
      if (next <= now_ && next == hub_->next_deadline()) return violation("next_deadline() is not in the future");
      now_ = std::max(now_, next);
      timer();
      if (peers == Peers::answer) answer_everyone();
      if (peers == Peers::late) answer_late(delay);
    }
    now_ = until;
    timer();
    check_due_closes();
  }

  void disconnect(SubscriberId id) {
    hub_->on_disconnect(id, now_);
    if (auto it = peers_.find(id); it != peers_.end()) it->second.open = false;
  }

  void restart(bool keep_ring, const HubModel& model) {
    Expect expect;
    expect.close_all = true;
    HubActions out;
    hub_->close_all(close_code::service_restart, "service restart", now_, out);
    absorb(out, expect);
    for (const auto& [id, peer] : peers_) {
      if (peer.open) violation("subscriber {} not closed by close_all", id);
    }
    hub_ = keep_ring ? std::make_unique<Hub>(config_, hub_->rings()) : std::make_unique<Hub>(config_, model.epoch + 1);
  }

  // After every command: the counts and queues agree with the observer.
  void check_state(const HubModel& model) {
    size_t open = 0;
    for (const auto& [id, peer] : peers_) {
      open += peer.open ? 1 : 0;
      const uint64_t expected = peer.open ? peer.queued : 0;
      if (hub_->queued_bytes(id) != expected) {
        violation("subscriber {}: hub queues {} bytes, observer {}", id, hub_->queued_bytes(id), expected);
      }
      if (hub_->queued_bytes(id) > config_.subscriber_queue_bytes_max) violation("subscriber {}: queue over bound", id);
    }
    if (hub_->subscriber_count() != open) violation("subscriber_count {} != {} open", hub_->subscriber_count(), open);
    if (hub_->epoch() != model.epoch) violation("epoch {} != model {}", hub_->epoch(), model.epoch);
    for (const auto& channel : kChannels) {
      if (hub_->top(channel) != model.ring(channel).top) violation("channel {}: top differs from the model", channel);
    }
  }

  const std::vector<std::string>& violations() const { return violations_; }
  const std::map<std::string, int>& marks() const { return marks_; }

 private:
  template <typename... Args>
  void violation(fmt::format_string<Args...> format, Args&&... args) {
    violations_.push_back(fmt::format("@{}ns: ", now_.ns()) + fmt::format(format, std::forward<Args>(args)...));
  }

  // A live peer answers each ping once: 0 (a window update) when there is
  // none left to answer.
  static uint64_t ping_to_answer(const Peer& peer, int answer) {
    if (answer == 0 || peer.pings.empty() || peer.pings.back().first <= peer.answered_through) return 0;
    if (answer == 1) return peer.pings.back().first;
    for (const auto& [ping, sent] : peer.pings) {
      if (ping > peer.answered_through) return ping;
    }
    return 0;
  }

  // The peer's report, applied to the observer's account of the hub's queue.
  static void report(Peer& peer, const Pong& pong) {
    if (pong.ping != 0) peer.answered_through = std::max(peer.answered_through, pong.ping);
    peer.unreported -= pong.consumed_bytes;
    uint64_t left = pong.consumed_bytes;
    peer.queued -= left;
    while (left > 0) {
      auto& [bytes, sent] = peer.queue.front();
      if (bytes > left) {
        bytes -= static_cast<uint32_t>(left);
        break;
      }
      left -= bytes;
      peer.queue.pop_front();
    }
  }

  void timer() {
    Expect expect;
    expect.timers = true;
    HubActions out;
    hub_->on_timer(now_, out);
    absorb(out, expect);
  }

  // A live peer: answers its latest ping at once and reports all it read.
  void answer_everyone() {
    for (auto& [id, peer] : peers_) {
      if (!peer.open || peer.pings.empty() || peer.pings.back().first <= peer.answered_through) continue;
      const Pong pong{peer.pings.back().first, peer.unreported};
      report(peer, pong);
      HubActions out;
      hub_->on_pong(id, pong, now_, out);
      Expect nothing;
      absorb(out, nothing);
    }
  }

  // The first ping a late peer still owes an answer to, answered `delay`
  // after it was sent.
  Instant next_late_answer(Duration delay) const {
    Instant next = Instant::max();
    for (const auto& [id, peer] : peers_) {
      if (!peer.open) continue;
      for (const auto& [ping, sent] : peer.pings) {
        if (ping > peer.answered_through) {
          next = std::min(next, sent + delay);
          break;
        }
      }
    }
    return next;
  }

  // A late peer answers each ping whose time has come, one pong each, in
  // order, and reports all it read.
  void answer_late(Duration delay) {
    for (auto& [id, peer] : peers_) {
      for (const auto& [ping, sent] : peer.pings) {
        if (!peer.open || ping <= peer.answered_through) continue;
        if (sent + delay > now_) break;
        const Pong pong{ping, peer.unreported};
        report(peer, pong);
        HubActions out;
        hub_->on_pong(id, pong, now_, out);
        Expect nothing;
        absorb(out, nothing);
      }
    }
  }

  // What must have happened by now: silent peers and stalled queues cut.
  void check_due_closes() {
    const Duration ping_interval = config_.ping_interval;
    for (const auto& [id, peer] : peers_) {
      if (!peer.open) continue;
      for (const auto& [ping, sent] : peer.pings) {
        // The rule itself, with no slack: any ping unanswered for a pong
        // timeout cuts the peer (a silent peer is then cut within
        // ping_interval + pong_timeout of going silent).
        if (ping > peer.answered_through && sent + config_.pong_timeout <= now_) {
          violation("subscriber {}: ping {} unanswered since @{}ns, still open", id, ping, sent.ns());
        }
      }
      if (!peer.queue.empty() && peer.queue.front().second + config_.write_deadline <= now_) {
        violation("subscriber {}: data unread past the write deadline, still open", id);
      }
      if (peer.last_ping + ping_interval <= now_) violation("subscriber {}: no ping for a ping interval", id);
    }
  }

  void absorb(const HubActions& out, Expect& expect);
  void on_data(SubscriberId id, Peer& peer, const Message& message, Expect& expect);
  void on_reset(SubscriberId id, Peer& peer, const Reset& reset, Expect& expect);
  void on_ping(SubscriberId id, Peer& peer, uint64_t ping, const Expect& expect);
  void on_close(const HubClose& close, Peer& peer, Expect& expect);

  HubConfig config_;
  std::unique_ptr<Hub> hub_;
  Instant now_ = Instant::zero() + 1_h;
  std::map<SubscriberId, Peer> peers_;
  std::vector<std::string> violations_;
  std::map<std::string, int> marks_;
};

void HubWorld::absorb(const HubActions& out, Expect& expect) {
  for (const HubAction& action : out) {
    if (const auto* mark = std::get_if<HubMark>(&action)) {
      ++marks_[mark->name];
      continue;
    }
    const SubscriberId id = std::holds_alternative<HubSend>(action) ? std::get<HubSend>(action).subscriber
                                                                    : std::get<HubClose>(action).subscriber;
    auto it = peers_.find(id);
    if (it == peers_.end() || !it->second.open) {
      violation("action for subscriber {} that is not open", id);
      continue;
    }
    Peer& peer = it->second;
    if (const auto* close = std::get_if<HubClose>(&action)) {
      on_close(*close, peer, expect);
      continue;
    }
    const HubFrame& frame = std::get<HubSend>(action).frame;
    if (const auto* data = std::get_if<Data>(&frame)) on_data(id, peer, data->message, expect);
    if (const auto* reset = std::get_if<Reset>(&frame)) on_reset(id, peer, *reset, expect);
    if (const auto* ping = std::get_if<Ping>(&frame)) on_ping(id, peer, ping->id, expect);
  }
  for (const auto& [id, messages] : expect.data) {
    if (peers_.at(id).open && !messages.empty()) {
      violation("subscriber {}: {} expected Data not sent (next seq {})", id, messages.size(), messages.front().seq);
    }
  }
  if (expect.close_all) {
    for (const auto& [id, peer] : peers_) {
      if (peer.open) violation("subscriber {}: close_all left it open", id);
    }
  }
}

void HubWorld::on_data(SubscriberId id, Peer& peer, const Message& message, Expect& expect) {
  // Contiguity, on its own terms: after the last Data, else after the
  // Reset's resume position, else right after the requested position.
  Position expected_next{message.epoch, 0};
  if (peer.last_data) {
    expected_next = Position{peer.last_data->epoch, peer.last_data->seq + 1};
  } else if (peer.reset_resume) {
    expected_next = Position{peer.reset_resume->epoch, peer.reset_resume->seq + 1};
  } else if (peer.after.epoch == 0 && peer.after.seq == 0) {
    expected_next = Position{message.epoch, 1};
  } else {
    expected_next = Position{peer.after.epoch, peer.after.seq + 1};
  }
  if (message.epoch != expected_next.epoch || message.seq != expected_next.seq) {
    violation("subscriber {}: hole: got Data ({}, {}), expected ({}, {})", id, message.epoch, message.seq,
              expected_next.epoch, expected_next.seq);
  }
  auto& wanted = expect.data[id];
  if (wanted.empty()) {
    violation("subscriber {}: unexpected Data seq {}", id, message.seq);
  } else {
    if (wanted.front().seq != message.seq || wanted.front().bytes != message.bytes) {
      violation("subscriber {}: Data seq {} where the model expects seq {}", id, message.seq, wanted.front().seq);
    }
    wanted.pop_front();
  }
  peer.last_data = message;
  const uint32_t bytes = frame_bytes(Data{message});
  peer.queue.emplace_back(bytes, now_);
  peer.queued += bytes;
  peer.unreported += bytes;
  if (peer.queued > config_.subscriber_queue_bytes_max) violation("subscriber {}: queue over its bound", id);
}

void HubWorld::on_reset(SubscriberId id, Peer& peer, const Reset& reset, Expect& expect) {
  if (peer.saw_reset || peer.last_data) violation("subscriber {}: Reset that is not the first frame", id);
  if (!(reset.after == peer.after)) violation("subscriber {}: Reset names another position", id);
  const auto wanted = expect.reset.find(id);
  if (wanted == expect.reset.end() || !wanted->second) {
    violation("subscriber {}: unexpected Reset {}", id, to_string(reset.kind));
  } else if (wanted->second->kind != reset.kind || !(wanted->second->resume == reset.resume)) {
    violation("subscriber {}: Reset {} resume ({}, {}), model expects {} ({}, {})", id, to_string(reset.kind),
              reset.resume.epoch, reset.resume.seq, to_string(wanted->second->kind), wanted->second->resume.epoch,
              wanted->second->resume.seq);
  }
  peer.saw_reset = true;
  peer.reset_resume = reset.resume;
}

void HubWorld::on_ping(SubscriberId id, Peer& peer, uint64_t ping, const Expect& expect) {
  if (!expect.timers) violation("subscriber {}: Ping outside on_timer", id);
  if (!peer.pings.empty() && ping <= peer.pings.back().first) violation("subscriber {}: ping ids not increasing", id);
  peer.pings.emplace_back(ping, now_);
  peer.last_ping = now_;
}

void HubWorld::on_close(const HubClose& close, Peer& peer, Expect& expect) {
  const SubscriberId id = close.subscriber;
  const std::string reason = close.reason;
  auto& wanted = expect.data[id];
  bool justified = false;
  if (close.code == close_code::try_again_later) {
    justified = !wanted.empty() && peer.queued + frame_bytes(Data{wanted.front()}) > config_.subscriber_queue_bytes_max;
  } else if (close.code == close_code::abnormal && reason == "pong timeout" && expect.timers) {
    for (const auto& [ping, sent] : peer.pings) {
      justified = justified || (ping > peer.answered_through && sent + config_.pong_timeout <= now_);
    }
  } else if (close.code == close_code::abnormal && reason == "write deadline" && expect.timers) {
    justified = !peer.queue.empty() && peer.queue.front().second + config_.write_deadline <= now_;
  } else if (close.code == close_code::service_restart) {
    justified = expect.close_all;
  } else if (close.code == close_code::protocol_error) {
    justified = expect.lie;
  }
  if (!justified) violation("subscriber {}: unjustified close {} ({})", id, close.code, reason);
  wanted.clear();
  peer.open = false;
}

// ---- commands --------------------------------------------------------------------------

using HubCommand = rc::state::Command<HubModel, HubWorld>;

void check_world(const HubModel& model, HubWorld& world) {
  world.check_state(model);
  if (!world.violations().empty()) RC_FAIL(world.violations().front());
}

struct Publish : HubCommand {
  std::string channel = *rc::gen::elementOf(kChannels);
  uint32_t bytes = *rc::gen::weightedOneOf<uint32_t>({{12, rc::gen::inRange<uint32_t>(0, 2'000)},
                                                      {1, rc::gen::inRange<uint32_t>(2'000, 40'000)}});
  explicit Publish(const HubModel&) {}
  void apply(HubModel& model) const override { model.publish(channel, bytes); }
  void run(const HubModel& model, HubWorld& world) const override {
    world.publish(model, channel, bytes);
    check_world(nextState(model), world);
  }
  void show(std::ostream& os) const override { os << "Publish(" << channel << ", " << bytes << ")"; }
};

// A position biased to the ring's boundaries and the special cases.
Position random_position(const HubModel& model, const std::string& channel) {
  const RingModel ring = model.ring(channel);
  const int64_t top = ring.top;
  const int64_t oldest = ring.oldest();
  const int64_t replay_max = model.config.replay_messages_max;
  auto clamp = [](int64_t seq) { return std::max<int64_t>(seq, 0); };
  const int kind = *rc::gen::inRange(0, 10);
  switch (kind) {
    case 0: return Position{};
    case 1: return Position{model.epoch, top};
    case 2: return Position{model.epoch, clamp(oldest - 1)};
    case 3: return Position{model.epoch, clamp(oldest - 2)};
    case 4: return Position{model.epoch, clamp(top - replay_max - *rc::gen::inRange<int64_t>(0, 2))};
    case 5: return Position{model.epoch, top + *rc::gen::inRange<int64_t>(1, 4)};
    case 6: return Position{model.epoch + 1, *rc::gen::inRange<int64_t>(0, top + 3)};
    case 7: return Position{model.epoch > 1 ? model.epoch - 1 : 0, *rc::gen::inRange<int64_t>(0, top + 3)};
    default: return Position{model.epoch, *rc::gen::inRange<int64_t>(0, top + 2)};
  }
}

struct SubscribeAt : HubCommand {
  std::string channel;
  Position after;
  explicit SubscribeAt(const HubModel& model)
      : channel(*rc::gen::elementOf(kChannels)), after(random_position(model, channel)) {}
  void apply(HubModel& model) const override { ++model.next_id; }
  void run(const HubModel& model, HubWorld& world) const override {
    world.subscribe(model, channel, after);
    check_world(nextState(model), world);
  }
  void show(std::ostream& os) const override {
    os << "Subscribe(" << channel << ", after {" << after.epoch << ", " << after.seq << "})";
  }
};

struct SendPong : HubCommand {
  SubscriberId id;
  int answer = *rc::gen::weightedElement<int>({{3, 0}, {3, 1}, {3, 2}, {1, 3}});
  uint32_t consumed_permille = *rc::gen::weightedElement<uint32_t>({{3, 1000}, {1, 0}, {1, 500}, {1, 333}});
  // Mostly the latest subscriber, which is the likeliest to be open: late
  // pongs answering one ping of several outstanding need an open peer.
  explicit SendPong(const HubModel& model)
      : id(*rc::gen::weightedOneOf<SubscriberId>(
            {{1, rc::gen::inRange<SubscriberId>(1, model.next_id + 1)},
             {2, rc::gen::just<SubscriberId>(model.next_id > 1 ? model.next_id - 1 : 1)}})) {}
  void checkPreconditions(const HubModel& model) const override { RC_PRE(id <= model.next_id); }
  void run(const HubModel& model, HubWorld& world) const override {
    world.pong(id, answer, consumed_permille);
    check_world(model, world);
  }
  void show(std::ostream& os) const override {
    os << "Pong(" << id << ", answer " << answer << ", consumed " << consumed_permille << "/1000)";
  }
};

struct Advance : HubCommand {
  // Often shorter than a ping interval, so that several pings can be
  // outstanding when a late pong answers only the oldest.
  Duration d = Duration::from_ms(*rc::gen::weightedOneOf<int64_t>(
      {{1, rc::gen::inRange<int64_t>(1, 15'000)}, {1, rc::gen::inRange<int64_t>(1, 2'000)}}));
  HubWorld::Peers peers = *rc::gen::weightedElement<HubWorld::Peers>(
      {{2, HubWorld::Peers::answer},
       {1, HubWorld::Peers::silent},
       {2, HubWorld::Peers::late},
       {3, HubWorld::Peers::late_then_silent}});
  Duration delay;  // late peers: under the pong timeout, often over the ping interval
  explicit Advance(const HubModel& model)
      : delay(Duration::from_ns(*rc::gen::inRange<int64_t>(0, model.config.pong_timeout.ns()))) {}
  void run(const HubModel& model, HubWorld& world) const override {
    world.advance(d, peers, delay);
    check_world(model, world);
  }
  void show(std::ostream& os) const override {
    os << "Advance(" << format_duration(d);
    switch (peers) {
      case HubWorld::Peers::answer: os << ", peers answer"; break;
      case HubWorld::Peers::silent: os << ", peers silent"; break;
      case HubWorld::Peers::late: os << ", peers answer " << format_duration(delay) << " late"; break;
      case HubWorld::Peers::late_then_silent:
        os << ", peers answer " << format_duration(delay) << " late, silent after half";
        break;
    }
    os << ")";
  }
};

struct Disconnect : HubCommand {
  SubscriberId id;
  explicit Disconnect(const HubModel& model) : id(*rc::gen::inRange<SubscriberId>(1, model.next_id + 1)) {}
  void checkPreconditions(const HubModel& model) const override { RC_PRE(id <= model.next_id); }
  void run(const HubModel& model, HubWorld& world) const override {
    world.disconnect(id);
    check_world(model, world);
  }
  void show(std::ostream& os) const override { os << "Disconnect(" << id << ")"; }
};

struct Restart : HubCommand {
  bool keep_ring = *rc::gen::arbitrary<bool>();
  explicit Restart(const HubModel&) {}
  void apply(HubModel& model) const override {
    if (keep_ring) return;
    ++model.epoch;
    model.rings.clear();
  }
  void run(const HubModel& model, HubWorld& world) const override {
    world.restart(keep_ring, model);
    check_world(nextState(model), world);
  }
  void show(std::ostream& os) const override { os << "Restart(" << (keep_ring ? "ring kept" : "ring lost") << ")"; }
};

HubConfig random_config() {
  HubConfig config;
  config.ring_messages_max = *rc::gen::inRange<uint32_t>(1, 21);
  config.replay_messages_max = *rc::gen::inRange<uint32_t>(1, config.ring_messages_max + 1);
  config.ring_bytes_max = *rc::gen::inRange<uint64_t>(500, 20'000);
  config.subscriber_queue_bytes_max = *rc::gen::inRange<uint64_t>(200, 12'000);
  config.ping_interval = Duration::from_ms(*rc::gen::inRange<int64_t>(500, 3'001));
  config.pong_timeout = Duration::from_ms(*rc::gen::inRange<int64_t>(500, 6'001));
  config.write_deadline = config.ping_interval + Duration::from_ms(*rc::gen::inRange<int64_t>(1, 10'001));
  RC_ASSERT(config.validate() == "");
  return config;
}

RC_GTEST_PROP(ResumeHubProperty, StreamsAreContiguousOrResetQueuesBoundedClosesJustified, ()) {
  HubModel model;
  model.config = random_config();
  model.epoch = *rc::gen::inRange<uint64_t>(1, 4);
  HubWorld world{model.config, model.epoch};
  rc::state::check(model, world,
                   rc::state::gen::execOneOfWithArgs<Publish, Publish, Publish, SubscribeAt, SubscribeAt, SendPong,
                                                     SendPong, Advance, Advance, Disconnect, Restart>());
  for (const auto& [mark, count] : world.marks()) RC_TAG(mark);
}

// The observer can fail: the deliberately broken hub skips the evicted Reset,
// and the hole it leaves is reported.
TEST(ResumeHubProperty, ObserverReportsTheHoleOfTheBrokenVariant) {
  for (const bool broken : {false, true}) {
    HubModel model;
    model.config.ring_messages_max = 5;
    model.config.replay_messages_max = 5;
    model.config.bug_skip_evicted_without_reset = broken;
    HubWorld world{model.config, model.epoch};
    for (int i = 0; i < 9; ++i) {
      world.publish(model, "a", 10);
      model.publish("a", 10);
    }
    world.subscribe(model, "a", Position{model.epoch, 2});  // oldest is 5: evicted
    ++model.next_id;
    world.check_state(model);
    if (!broken) {
      EXPECT_TRUE(world.violations().empty()) << world.violations().front();
      continue;
    }
    ASSERT_FALSE(world.violations().empty());
    bool hole = false;
    for (const std::string& v : world.violations()) hole = hole || v.find("hole") != std::string::npos;
    EXPECT_TRUE(hole) << world.violations().front();
  }
}

}  // namespace
}  // namespace leaseproof::resume::test
