#include "sim/world.hpp"

#include <algorithm>

namespace leaseproof::sim {

std::string_view to_string(ProcessState state) {
  switch (state) {
    case ProcessState::running: return "running";
    case ProcessState::paused: return "paused";
    case ProcessState::down: return "down";
  }
  LP_UNREACHABLE("process state {}", static_cast<int>(state));
}

void Process::on_sigterm(NodeContext& context) { context.exit(); }

struct World::PendingCall {
  ReplyCallback on_reply;
  uint64_t timeout_timer = 0;
};

// Work for a node that may have to wait for the end of a pause. A message is
// remembered so that its loss is traced if the process dies first.
struct World::Deferred {
  static Deferred code(InlineFunction<void()> run) {
    Deferred work;
    work.run = std::move(run);
    return work;
  }
  InlineFunction<void()> run;
  uint64_t message_id = 0;
  NodeId from;
  std::string_view type;
};

struct World::Node {
  NodeId id;
  std::string name;
  NodeClock clock;
  ProcessFactory factory;
  std::unique_ptr<Process> process;
  ProcessState state = ProcessState::down;
  Incarnation incarnation{0};
  uint64_t pause_id = 0;
  std::vector<Deferred> deferred;
  uint64_t next_timer_id = 1;
  // Armed timers by id; cancelling one erases it. Never iterated.
  struct Timer {
    std::string_view label;
    EventKind kind;
    TimerCallback callback;
  };
  std::unordered_map<uint64_t, Timer> timers;
  std::unordered_map<uint64_t, PendingCall> pending_calls;  // by request id; never iterated
  Prng prng{0};
  std::unique_ptr<NodeContext> context;
  bool streams = false;  // every link from or to this node is FIFO
};

struct World::Link {
  LinkConfig config;
  std::vector<std::pair<Instant, Instant>> partitions;
  std::vector<std::pair<Instant, Instant>> clogs;
  struct Hold {
    Instant start;
    Instant end;
    Duration min;
    Duration max;
  };
  std::vector<Hold> holds;
  std::vector<std::pair<Instant, Instant>> refusals;
  Instant last_arrival = Instant::zero();
};

World::World(uint64_t seed)
    : seed_(seed), faults_(derive_seed(seed, "faults")), network_prng_(derive_seed(seed, "network")),
      hold_prng_(derive_seed(seed, "network/hold")) {}

World::~World() = default;

std::string_view World::node_name(NodeId node) const { return get(node).name; }
const NodeClock& World::clock(NodeId node) const { return get(node).clock; }
ProcessState World::state(NodeId node) const { return get(node).state; }
Incarnation World::incarnation(NodeId node) const { return get(node).incarnation; }
Process* World::process(NodeId node) const { return get(node).process.get(); }

World::Node& World::get(NodeId node) {
  LP_ASSERT_LT(node.value, nodes_.size());
  return *nodes_[node.value];
}
const World::Node& World::get(NodeId node) const {
  LP_ASSERT_LT(node.value, nodes_.size());
  return *nodes_[node.value];
}

TraceEvent World::event(EventKind kind, NodeId node) const {
  TraceEvent e;
  e.kind = kind;
  e.true_time = now();
  e.node = node;
  if (node.valid()) {
    const NodeClock& c = get(node).clock;
    e.wall = c.wall(now());
    e.monotonic = c.monotonic(now());
  }
  return e;
}

NodeId World::add_node(std::string name, ClockModel clock, ProcessFactory factory) {
  LP_ASSERT(factory != nullptr);
  const NodeId id{static_cast<uint32_t>(nodes_.size())};
  auto node = std::make_unique<Node>();
  node->id = id;
  node->name = std::move(name);
  node->clock = NodeClock{std::move(clock)};
  node->factory = std::move(factory);
  node->context = std::make_unique<NodeContext>(*this, id);
  trace_.set_node_name(id, node->name);
  // Clock steps are observable events of the node.
  for (const ClockStep& step : node->clock.model().steps) {
    if (step.at < now()) continue;
    scheduler_.at(step.at, [this, id, jump = step.jump] {
      TraceEvent e = event(EventKind::clock_step, id);
      e.value = jump.ns();
      trace_.record(e);
    });
  }
  nodes_.push_back(std::move(node));
  scheduler_.at(now(), [this, id] { start_process(get(id), EventKind::start); });
  return id;
}

void World::start_process(Node& node, EventKind kind) {
  LP_ASSERT(node.state == ProcessState::down);
  node.incarnation.value += 1;
  node.state = ProcessState::running;
  node.prng = Prng{derive_seed(seed_, fmt::format("node/{}/{}", node.name, node.incarnation.value))};
  node.process = node.factory();
  TraceEvent e = event(kind, node.id);
  e.id = node.incarnation.value;
  trace_.record(e);
  node.process->on_start(*node.context);
}

void World::tear_down(Node& node) {
  node.state = ProcessState::down;
  for (const Deferred& work : node.deferred) {
    if (work.message_id == 0) continue;
    TraceEvent e = event(EventKind::drop, node.id);
    e.peer = work.from;
    e.id = work.message_id;
    e.label = "receiver_down";
    trace_.record(e);
  }
  node.deferred.clear();
  node.timers.clear();
  node.pending_calls.clear();
  // The process may be the caller (exit from its own callback): free it later.
  graveyard_.push_back(std::move(node.process));
}

void World::crash(NodeId id, std::string_view reason) {
  Node& node = get(id);
  if (node.state == ProcessState::down) return;
  TraceEvent e = event(EventKind::crash, id);
  e.label = reason;
  trace_.record(e);
  tear_down(node);
}

void World::restart(NodeId id) {
  Node& node = get(id);
  if (node.state != ProcessState::down) return;
  start_process(node, EventKind::restart);
}

void World::pause(NodeId id, Duration length) {
  LP_ASSERT(!length.is_negative());
  Node& node = get(id);
  if (node.state != ProcessState::running) return;
  node.state = ProcessState::paused;
  const uint64_t pause_id = ++node.pause_id;
  TraceEvent e = event(EventKind::pause, id);
  e.value = length.ns();
  trace_.record(e);
  scheduler_.after(length, [this, id, pause_id] { resume(id, pause_id); });
}

void World::resume(NodeId id, uint64_t pause_id) {
  Node& node = get(id);
  if (node.state != ProcessState::paused || node.pause_id != pause_id) return;
  TraceEvent e = event(EventKind::resume, id);
  e.value = static_cast<int64_t>(node.deferred.size());
  trace_.record(e);
  node.state = ProcessState::running;
  // Everything that came due during the pause runs now, in the order it came
  // due. Work may exit the process; whatever is left is then dropped.
  std::vector<Deferred> waiting = std::move(node.deferred);
  node.deferred.clear();
  const Incarnation incarnation = node.incarnation;
  size_t i = 0;
  for (; i < waiting.size() && node.state == ProcessState::running && node.incarnation == incarnation; ++i) {
    waiting[i].run();
  }
  for (; i < waiting.size(); ++i) node.deferred.push_back(std::move(waiting[i]));
  if (node.state == ProcessState::down) tear_down(node);
}

void World::sigterm(NodeId id, Duration stop_timeout) {
  Node& node = get(id);
  if (node.state == ProcessState::down) return;
  TraceEvent e = event(EventKind::sigterm, id);
  e.value = stop_timeout.ns();
  trace_.record(e);
  const Incarnation incarnation = node.incarnation;
  // The orchestrator's SIGKILL does not wait for a pause to end.
  scheduler_.after(stop_timeout, [this, id, incarnation] {
    if (get(id).incarnation == incarnation) crash(id, "sigkill");
  });
  run_on_node(id, incarnation, Deferred::code([this, id] {
                Node& n = get(id);
                n.process->on_sigterm(*n.context);
              }));
}

void World::run_on_node(NodeId id, Incarnation incarnation, Deferred work) {
  Node& node = get(id);
  if (node.state == ProcessState::down || node.incarnation != incarnation) {
    if (work.message_id != 0) {
      TraceEvent e = event(EventKind::drop, id);
      e.peer = work.from;
      e.id = work.message_id;
      e.label = "receiver_down";
      trace_.record(e);
    }
    return;
  }
  if (node.state == ProcessState::paused) {
    if (work.message_id != 0) {
      // The message is in the node's socket buffer: the network's part is
      // done (a later partition does not take it back); the process sees it
      // when it resumes.
      TraceEvent e = event(EventKind::queued, id);
      e.peer = work.from;
      e.id = work.message_id;
      e.label = work.type;
      trace_.record(e);
    }
    node.deferred.push_back(std::move(work));
    return;
  }
  work.run();
}

void World::at(Instant when, InlineFunction<void()> action) { scheduler_.at(when, std::move(action)); }

void World::run_until(Instant deadline) {
  while (!stop_requested_ && scheduler_.step_until(deadline)) {
    graveyard_.clear();
  }
  if (!stop_requested_) scheduler_.run_until(deadline);
}

// ---- network ---------------------------------------------------------------

const World::Link* World::find_link(NodeId from, NodeId to) const {
  if (from.value >= link_index_.size() || to.value >= link_index_[from.value].size()) return nullptr;
  return link_index_[from.value][to.value];
}

World::Link& World::link(NodeId from, NodeId to) {
  if (from.value < link_index_.size() && to.value < link_index_[from.value].size()) {
    if (Link* known = link_index_[from.value][to.value]; known != nullptr) return *known;
  }
  auto [it, inserted] = links_.try_emplace({from.value, to.value});
  if (inserted) it->second.config = default_link_;
  if (link_index_.size() <= from.value) link_index_.resize(from.value + 1);
  if (link_index_[from.value].size() <= to.value) link_index_[from.value].resize(to.value + 1, nullptr);
  link_index_[from.value][to.value] = &it->second;  // std::map nodes never move
  return it->second;
}

void World::set_link(NodeId from, NodeId to, LinkConfig config) { link(from, to).config = config; }

void World::set_stream_node(NodeId node) { get(node).streams = true; }

void World::set_every_link(LinkConfig config) {
  default_link_ = config;
  for (auto& [pair, l] : links_) l.config = config;  // std::map: ordered, and order does not matter here
}

void World::trace_link_window(NodeId from, NodeId to, Instant start, Instant end, EventKind begins, EventKind ends) {
  LP_ASSERT_LT(start, end);
  LP_ASSERT_GE(start, now());
  for (auto [when, kind] : {std::pair{start, begins}, std::pair{end, ends}}) {
    scheduler_.at(when, [this, from, to, kind = kind] {
      TraceEvent e = event(kind, from);
      e.peer = to;
      trace_.record(e);
    });
  }
}

void World::partition(NodeId from, NodeId to, Instant start, Instant end) {
  trace_link_window(from, to, start, end, EventKind::partition_start, EventKind::partition_end);
  link(from, to).partitions.emplace_back(start, end);
}

void World::clog(NodeId from, NodeId to, Instant start, Instant end) {
  trace_link_window(from, to, start, end, EventKind::clog_start, EventKind::clog_end);
  link(from, to).clogs.emplace_back(start, end);
}

void World::hold(NodeId from, NodeId to, Instant start, Instant end, Duration hold_min, Duration hold_max) {
  LP_ASSERT_LE(Duration::zero(), hold_min);
  LP_ASSERT_LE(hold_min, hold_max);
  trace_link_window(from, to, start, end + hold_max, EventKind::clog_start, EventKind::clog_end);
  link(from, to).holds.push_back(Link::Hold{start, end, hold_min, hold_max});
}

void World::refuse(NodeId from, NodeId to, Instant start, Instant end) {
  LP_ASSERT_LE(start, end);
  link(from, to).refusals.emplace_back(start, end);
  any_refusals_ = true;
}

bool World::refused(NodeId from, NodeId to, Instant at_time) const {
  const Link* l = find_link(from, to);
  if (l == nullptr) return false;
  return std::any_of(l->refusals.begin(), l->refusals.end(),
                     [at_time](const auto& r) { return r.first <= at_time && at_time < r.second; });
}

bool World::partitioned(NodeId from, NodeId to, Instant at_time) const {
  const Link* l = find_link(from, to);
  if (l == nullptr) return false;
  return std::any_of(l->partitions.begin(), l->partitions.end(),
                     [at_time](const auto& p) { return p.first <= at_time && at_time < p.second; });
}

uint64_t World::send(NodeId from, NodeId to, Message message, uint64_t reply_to, bool expects_reply) {
  LP_ASSERT_LT(to.value, nodes_.size());
  // Owned by exactly one closure at a time (the network's, then the node's):
  // a unique_ptr, without shared_ptr's atomic counts on every hand-over.
  auto envelope = std::make_unique<Envelope>();
  envelope->id = next_message_id_++;
  envelope->from = from;
  envelope->to = to;
  envelope->message = std::move(message);
  envelope->reply_to = reply_to;
  envelope->expects_reply = expects_reply;

  TraceEvent sent = event(EventKind::send, from);
  sent.peer = to;
  sent.id = envelope->id;
  sent.value = envelope->message.size_bytes;
  sent.label = envelope->message.type;
  trace_.record(sent);

  Link& l = link(from, to);
  const bool stream = get(from).streams || get(to).streams;
  std::string_view lost_reason;
  Duration retransmit = Duration::zero();
  if (!l.partitions.empty() && partitioned(from, to, now())) {
    lost_reason = "partition";
  } else if (expects_reply && !l.refusals.empty() && refused(from, to, now())) {
    lost_reason = "refused";  // the caller's call fails after kRefusedAfter (NodeContext::call)
    ++refused_requests_;
  } else if (network_prng_.chance(l.config.loss)) {
    // A TCP stream retransmits a lost segment: it arrives one RTO late (and,
    // the link being FIFO, holds back what follows). Datagram-like traffic
    // (requests, replies) is lost.
    if (stream) {
      retransmit = kStreamRetransmitTimeout;
    } else {
      lost_reason = "loss";
    }
  }
  if (!lost_reason.empty()) {
    TraceEvent dropped = event(EventKind::drop, from);
    dropped.peer = to;
    dropped.id = envelope->id;
    dropped.label = lost_reason;
    trace_.record(dropped);
    return envelope->id;
  }
  const uint64_t id = envelope->id;
  Instant arrival = now() + retransmit + l.config.latency.sample(network_prng_);
  for (const auto& [start, end] : l.clogs) {
    if (start <= arrival && arrival < end) arrival = end;
  }
  for (const Link::Hold& held : l.holds) {
    if (held.start <= now() && now() < held.end) {
      arrival = std::max(arrival, now() + hold_prng_.uniform_duration(held.min, held.max));
      ++held_messages_;
      break;
    }
  }
  if (l.config.fifo || stream) {
    arrival = std::max(arrival, l.last_arrival);
    l.last_arrival = arrival;
  }
  scheduler_.at(arrival, [this, envelope = std::move(envelope)]() mutable { arrive(std::move(envelope)); });
  return id;
}

void World::arrive(std::unique_ptr<Envelope> envelope) {
  if (partitioned(envelope->from, envelope->to, now())) {
    TraceEvent dropped = event(EventKind::drop, envelope->to);
    dropped.peer = envelope->from;
    dropped.id = envelope->id;
    dropped.label = "partition";
    trace_.record(dropped);
    return;
  }
  const NodeId to = envelope->to;
  const uint64_t id = envelope->id;
  const NodeId from = envelope->from;
  const std::string_view type = envelope->message.type;
  Deferred work{[this, envelope = std::move(envelope)] { deliver(get(envelope->to), *envelope); }, id, from, type};
  run_on_node(to, get(to).incarnation, std::move(work));
}

void World::deliver(Node& node, const Envelope& envelope) {
  if (envelope.reply_to != 0) {
    auto pending = node.pending_calls.find(envelope.reply_to);
    if (pending == node.pending_calls.end()) {
      // The caller gave up (timed out) or is a later incarnation.
      TraceEvent dropped = event(EventKind::drop, node.id);
      dropped.peer = envelope.from;
      dropped.id = envelope.id;
      dropped.value = static_cast<int64_t>(envelope.reply_to);  // the request it answers
      dropped.label = "late_reply";
      trace_.record(dropped);
      return;
    }
    PendingCall call = std::move(pending->second);
    node.pending_calls.erase(pending);
    node.timers.erase(call.timeout_timer);
    TraceEvent delivered = event(EventKind::deliver, node.id);
    delivered.peer = envelope.from;
    delivered.id = envelope.id;
    delivered.value = static_cast<int64_t>(envelope.reply_to);  // the request it answers
    delivered.label = envelope.message.type;
    trace_.record(delivered);
    call.on_reply(&envelope);
    return;
  }
  TraceEvent delivered = event(EventKind::deliver, node.id);
  delivered.peer = envelope.from;
  delivered.id = envelope.id;
  delivered.label = envelope.message.type;
  trace_.record(delivered);
  node.process->on_message(*node.context, envelope);
}

uint64_t World::set_timer(NodeId id, Duration delay, std::string_view label, TimerCallback callback, EventKind kind) {
  Node& node = get(id);
  const uint64_t timer = node.next_timer_id++;
  node.timers.emplace(timer, Node::Timer{label, kind, std::move(callback)});
  const Incarnation incarnation = node.incarnation;
  scheduler_.after(node.clock.true_delay_for(delay), [this, id, incarnation, timer] {
    // A timer cancelled while its process runs on: nothing would run or be
    // traced (a paused process still counts it among the events that waited).
    const Node& n = get(id);
    if (n.state == ProcessState::running && n.incarnation == incarnation && !n.timers.contains(timer)) return;
    run_on_node(id, incarnation, Deferred::code([this, id, timer] { fire_timer(id, timer); }));
  });
  return timer;
}

void World::fire_timer(NodeId id, uint64_t timer) {
  Node& node = get(id);
  auto it = node.timers.find(timer);
  if (it == node.timers.end()) return;  // cancelled
  Node::Timer fired = std::move(it->second);
  node.timers.erase(it);
  if (fired.kind == EventKind::timer) {
    TraceEvent e = event(EventKind::timer, id);
    e.id = timer;
    e.label = fired.label;
    trace_.record(e);
  }
  fired.callback();
}

// ---- NodeContext -------------------------------------------------------------

std::string_view NodeContext::name() const { return world_->get(node_).name; }
Incarnation NodeContext::incarnation() const { return world_->get(node_).incarnation; }
Instant NodeContext::wall() const { return world_->get(node_).clock.wall(world_->now()); }
Instant NodeContext::monotonic() const { return world_->get(node_).clock.monotonic(world_->now()); }
Prng& NodeContext::prng() { return world_->get(node_).prng; }

uint64_t NodeContext::set_timer(Duration delay, std::string_view label, TimerCallback callback) {
  if (world_->get(node_).state == ProcessState::down) return 0;
  return world_->set_timer(node_, delay, label, std::move(callback), EventKind::timer);
}

bool NodeContext::cancel_timer(uint64_t timer) { return world_->get(node_).timers.erase(timer) != 0; }

uint64_t NodeContext::send(NodeId to, Message message) {
  if (world_->get(node_).state == ProcessState::down) return 0;
  return world_->send(node_, to, std::move(message), 0, false);
}

uint64_t NodeContext::call(NodeId to, Message message, Duration timeout, ReplyCallback on_reply) {
  World::Node& node = world_->get(node_);
  if (node.state == ProcessState::down) return 0;
  LP_ASSERT(on_reply != nullptr);
  // Decided on the same instant as send() decides it (a partition drops the
  // request first: the call then times out).
  const bool refused = world_->any_refusals_ && world_->refused(node_, to, world_->now()) &&
                       !world_->partitioned(node_, to, world_->now());
  const uint64_t request = world_->send(node_, to, std::move(message), 0, true);
  const uint64_t timer = world_->set_timer(
      node_, refused ? World::kRefusedAfter : timeout, "rpc_timeout",
      [world = world_, id = node_, request] {
        World::Node& n = world->get(id);
        auto pending = n.pending_calls.find(request);
        LP_ASSERT(pending != n.pending_calls.end());
        ReplyCallback on_timeout = std::move(pending->second.on_reply);
        n.pending_calls.erase(pending);
        TraceEvent e = world->event(EventKind::timeout, id);
        e.id = request;
        world->trace_.record(e);
        on_timeout(nullptr);
      },
      EventKind::timeout);
  node.pending_calls.emplace(request, World::PendingCall{std::move(on_reply), timer});
  return request;
}

void NodeContext::reply(const Envelope& request, Message message) {
  LP_ASSERT(request.expects_reply);
  if (world_->get(node_).state == ProcessState::down) return;
  world_->send(node_, request.from, std::move(message), request.id, false);
}

void NodeContext::exit() {
  World::Node& node = world_->get(node_);
  if (node.state == ProcessState::down) return;
  world_->trace_.record(world_->event(EventKind::exit, node_));
  world_->tear_down(node);
}

bool NodeContext::fault(FaultSiteId site) {
  if (!world_->faults_.reach(site)) return false;
  TraceEvent e = world_->event(EventKind::fault, node_);
  e.label = world_->faults_.site(site).name;
  world_->trace_.record(e);
  return true;
}

void NodeContext::note(std::string_view label, std::string_view detail, int64_t value) {
  TraceEvent e = world_->event(EventKind::note, node_);
  e.label = label;
  e.detail = detail;
  e.value = value;
  world_->trace_.record(e);
}

}  // namespace leaseproof::sim
