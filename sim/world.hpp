#pragma once
// The simulated world: nodes with their own clocks, processes that can crash,
// pause, be told to stop, and restart; a network of directed links with
// latency, loss, partitions and clogs; named fault sites; and the trace. One
// seed derives everything. Models (workers, DynamoDB, hubs) are Processes that
// see the world only through their NodeContext.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <typeinfo>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/assert.hpp"
#include "base/ids.hpp"
#include "base/inline_function.hpp"
#include "base/time.hpp"
#include "sim/clock.hpp"
#include "sim/faults.hpp"
#include "sim/prng.hpp"
#include "sim/scheduler.hpp"
#include "sim/trace.hpp"

namespace leaseproof::sim {

// A model's message body. Models derive their own payload types from it.
struct Payload {
  virtual ~Payload() = default;
};

struct Message {
  std::string_view type;  // must have static storage duration (a literal)
  uint32_t size_bytes = 0;
  std::shared_ptr<const Payload> body;

  template <typename T>
  const T& as() const {
    // The payload is almost always exactly a T: one type_info comparison
    // instead of dynamic_cast's walk, which still serves a derived payload.
    if (body != nullptr && typeid(*body) == typeid(T)) return static_cast<const T&>(*body);
    const T* typed = dynamic_cast<const T*>(body.get());
    LP_ASSERT_MSG(typed != nullptr, "message '{}' does not carry the requested payload type", type);
    return *typed;
  }
};

struct Envelope {
  uint64_t id = 0;  // unique in the run, starting at 1
  NodeId from;
  NodeId to;
  Message message;
  uint64_t reply_to = 0;  // non-zero: the reply to request `reply_to`
  bool expects_reply = false;
};

inline constexpr Duration kStreamRetransmitTimeout = Duration::from_ms(200);  // Linux's minimum RTO

struct LinkConfig {
  LatencyDistribution latency;
  Ratio loss = Ratio::zero();
  bool fifo = false;  // never reorder on this link (a TCP stream)
};

enum class ProcessState : uint8_t { running, paused, down };
std::string_view to_string(ProcessState state);

class NodeContext;

// What runs on a node. A new object is made for every (re)start: whatever it
// holds is volatile state, gone at a crash.
class Process {
 public:
  virtual ~Process() = default;
  virtual void on_start(NodeContext& context) = 0;
  virtual void on_message(NodeContext& context, const Envelope& envelope) = 0;
  // Default: exit at once. A model drains here, then calls context.exit().
  virtual void on_sigterm(NodeContext& context);
};

using ProcessFactory = std::function<std::unique_ptr<Process>()>;
// Called with the reply, or with nullptr when the call timed out. A timeout
// does not say whether the receiver applied the request (ambiguous outcome).
using ReplyCallback = InlineFunction<void(const Envelope* reply)>;
using TimerCallback = InlineFunction<void()>;

class World;

// A process's view of the world. Every operation is a no-op once the process
// is down (it may still be unwinding the callback in which it exited).
class NodeContext {
 public:
  NodeContext(World& world, NodeId node) : world_(&world), node_(node) {}

  NodeId id() const { return node_; }
  std::string_view name() const;
  Incarnation incarnation() const;
  Instant wall() const;
  Instant monotonic() const;
  Prng& prng();

  // A timer `delay` from now on this node's monotonic clock.
  uint64_t set_timer(Duration delay, std::string_view label, TimerCallback callback);
  bool cancel_timer(uint64_t timer);

  uint64_t send(NodeId to, Message message);
  uint64_t call(NodeId to, Message message, Duration timeout, ReplyCallback on_reply);
  void reply(const Envelope& request, Message message);
  // Graceful exit (after SIGTERM, or any time): no more code runs here.
  void exit();
  // Reaches a fault site; traced when it fires.
  bool fault(FaultSiteId site);
  // A model event in the trace.
  void note(std::string_view label, std::string_view detail = {}, int64_t value = 0);

 private:
  World* world_;
  NodeId node_;
};

class World {
 public:
  explicit World(uint64_t seed);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  uint64_t seed() const { return seed_; }
  Scheduler& scheduler() { return scheduler_; }
  const Scheduler& scheduler() const { return scheduler_; }
  Instant now() const { return scheduler_.now(); }
  Trace& trace() { return trace_; }
  const Trace& trace() const { return trace_; }
  FaultSites& faults() { return faults_; }
  const FaultSites& faults() const { return faults_; }
  // A generator for a named world component (scenario, orchestrator...).
  Prng prng_for(std::string_view name) const { return Prng{derive_seed(seed_, name)}; }

  // Adds a node; its process starts at the current time (a scheduled event).
  NodeId add_node(std::string name, ClockModel clock, ProcessFactory factory);
  size_t node_count() const { return nodes_.size(); }
  std::string_view node_name(NodeId node) const;
  const NodeClock& clock(NodeId node) const;
  ProcessState state(NodeId node) const;
  Incarnation incarnation(NodeId node) const;
  // The running process object, for checks in tests; nullptr when down.
  Process* process(NodeId node) const;

  void set_default_link(LinkConfig config) { default_link_ = config; }
  void set_link(NodeId from, NodeId to, LinkConfig config);
  // Sets the default and every link made so far (e.g. to heal loss).
  void set_every_link(LinkConfig config);
  // Directed: messages from -> to sent or arriving in [start, end) are lost.
  void partition(NodeId from, NodeId to, Instant start, Instant end);
  // Directed: messages from -> to that would arrive in [start, end) wait until end.
  void clog(NodeId from, NodeId to, Instant start, Instant end);
  // Directed: messages from -> to *sent* in [start, end) are held in flight
  // (a proxy's queue, a retransmission, a send already on the wire when its
  // process stalled) and arrive a delay drawn uniformly from [hold_min,
  // hold_max] after they were sent; later messages overtake them. Traced as
  // a clog window from `start` to `end + hold_max`, when the last can arrive.
  void hold(NodeId from, NodeId to, Instant start, Instant end, Duration hold_min, Duration hold_max);
  // Messages held so far (coverage).
  uint64_t held_messages() const { return held_messages_; }
  // Directed: requests from -> to *sent* in [start, end) are refused at
  // once, as a closed port, a TLS failure or a server that resets answer:
  // the request is dropped (traced as a drop labelled "refused") and the
  // caller's call fails with no answer kRefusedAfter later, not at its
  // timeout. Replies and one-way messages pass.
  void refuse(NodeId from, NodeId to, Instant start, Instant end);
  bool refused(NodeId from, NodeId to, Instant at) const;
  static constexpr Duration kRefusedAfter = Duration::from_ms(1);  // a refused connect's round trip
  // Requests refused so far (coverage).
  uint64_t refused_requests() const { return refused_requests_; }
  bool partitioned(NodeId from, NodeId to, Instant at) const;
  // Every link from or to `node` is a TCP stream, whatever its config says:
  // it never reorders, and random loss delays a message by one
  // retransmission timeout instead of dropping it. A partition still drops
  // messages; a stream transport detects that as a broken connection.
  void set_stream_node(NodeId node);

  // Lifecycle actions, applied now. Scenarios schedule them.
  void crash(NodeId node, std::string_view reason = "crash");
  void restart(NodeId node);
  void pause(NodeId node, Duration length);
  void sigterm(NodeId node, Duration stop_timeout);

  // A world-level action at `when` (not a node's code: runs even if all are down).
  void at(Instant when, InlineFunction<void()> action);
  // Runs events due by `deadline`, then sets now = deadline; after
  // request_stop(), returns once the current event is done (now stays at it).
  void run_until(Instant deadline);
  // For replays that stop at a chosen event (an observer may call it).
  void request_stop() { stop_requested_ = true; }

 private:
  friend class NodeContext;
  struct PendingCall;
  struct Deferred;
  struct Node;
  struct Link;

  Node& get(NodeId node);
  const Node& get(NodeId node) const;
  const Link* find_link(NodeId from, NodeId to) const;
  Link& link(NodeId from, NodeId to);
  TraceEvent event(EventKind kind, NodeId node) const;
  // Schedules the trace events that open and close a partition or clog window.
  void trace_link_window(NodeId from, NodeId to, Instant start, Instant end, EventKind begins, EventKind ends);

  void start_process(Node& node, EventKind kind);
  void tear_down(Node& node);
  void run_on_node(NodeId node, Incarnation incarnation, Deferred work);
  void resume(NodeId node, uint64_t pause_id);

  uint64_t send(NodeId from, NodeId to, Message message, uint64_t reply_to, bool expects_reply);
  void arrive(std::unique_ptr<Envelope> envelope);
  void deliver(Node& node, const Envelope& envelope);
  uint64_t set_timer(NodeId node, Duration delay, std::string_view label, TimerCallback callback, EventKind kind);
  void fire_timer(NodeId node, uint64_t timer);

  uint64_t seed_;
  Scheduler scheduler_;
  Trace trace_;
  FaultSites faults_;
  Prng network_prng_;
  Prng hold_prng_;  // held messages' delays: a run without holds draws nothing from it
  uint64_t held_messages_ = 0;
  uint64_t refused_requests_ = 0;
  bool any_refusals_ = false;  // calls skip the refusal lookup until one is set
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Process>> graveyard_;  // exited processes, freed between events
  LinkConfig default_link_;
  std::map<std::pair<uint32_t, uint32_t>, Link> links_;
  // The link of each (from, to), found without a search: a send looks it up.
  std::vector<std::vector<Link*>> link_index_;
  uint64_t next_message_id_ = 1;
  bool stop_requested_ = false;
};

}  // namespace leaseproof::sim
