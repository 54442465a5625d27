#pragma once
// A fleet worker in the simulation: the production lease core (core/lease),
// unchanged, wrapped in a simulated process with its node's clock, network,
// randomness and fault sites. It talks to DynamoDB and SQS over the simulated
// network and tells the upstream hub when it opens and closes sessions. The
// trace events it writes are the contract in docs/trace-format.md.

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/lex_compare.hpp"
#include "base/random.hpp"
#include "base/wakeup_queue.hpp"
#include "core/lease/manager.hpp"
#include "core/resume/session.hpp"
#include "models/sqs.hpp"
#include "models/stream.hpp"
#include "sim/faults.hpp"
#include "sim/world.hpp"

namespace leaseproof::models {

// Streaming from the upstream hub (core/resume): each open session resumes
// its channel through `via` (the hub or a relay) and records into the sink.
struct StreamEnvironment {
  resume::SessionConfig session;
  NodeId via;
};

struct WorkerEnvironment {
  lease::LeaseConfig config;
  NodeId dynamo;
  NodeId sqs;
  NodeId upstream;
  std::string release_queue = "releases";
  bool notify_releases = true;  // the seed algorithm does not use SQS
  // Short polling (sqs_wait zero): a receive every interval, or at once after
  // one that returned notices. Long polling: each receive waits up to
  // sqs_wait for a notice and the next is sent when it is answered; the
  // interval is then only the wait of a worker with no room, or after a
  // receive that timed out.
  Duration sqs_poll_interval = Duration::from_ms(500);
  Duration sqs_wait = Duration::zero();
  Duration sqs_timeout = Duration::from_s(1);  // an SQS call's caller gives up after this (beyond a receive's wait)
  std::optional<StreamEnvironment> stream;  // none: sessions are only announced to `upstream`
  // The lease owner id. false: "<node>#<incarnation>", a restarted task is a
  // new worker. true: the node's name, the same in every incarnation, as
  // `leaseproof worker --worker-id` keeps it across restarts: a restarted
  // worker finds its predecessor's leases naming it and takes them back
  // under a new epoch, so only the epoch tells the two tenures apart.
  bool stable_worker_ids = false;
  // Non-empty: the lease owner id whatever stable_worker_ids says. A twin
  // (LeaseScenarioOptions::twins) runs under another node's stable id.
  std::string worker_id;
  // Fault sites the core reaches through its FaultHook, by name.
  std::map<std::string, sim::FaultSiteId, LexLess> fault_sites;
};

struct SessionPayload final : sim::Payload {
  SessionPayload(std::string c, std::string w) : connection(std::move(c)), worker(std::move(w)) {}
  std::string connection;
  std::string worker;
};

class WorkerProcess final : public sim::Process {
 public:
  explicit WorkerProcess(const WorkerEnvironment& environment) : environment_(environment) {}

  void on_start(sim::NodeContext& context) override;
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;
  void on_sigterm(sim::NodeContext& context) override;

  // The ActiveConnections metric (0 before start).
  uint32_t active_connections() const { return manager_ ? manager_->active_connections() : 0; }
  // The lease owner id (see WorkerEnvironment::stable_worker_ids).
  const std::string& worker_id() const { return worker_id_; }

 private:
  class Faults final : public FaultHook {
   public:
    Faults(sim::NodeContext& context, const WorkerEnvironment& environment)
        : context_(context), environment_(environment) {}
    bool fire(const char* site) override;

   private:
    sim::NodeContext& context_;
    const WorkerEnvironment& environment_;
  };

  template <typename Step>
  void run(Step step);
  void apply(lease::Actions& actions);
  void schedule_timer();
  void poll_releases(Duration wait);
  // Release notices this worker will not act on (it is draining, or has no
  // room) go back to the queue at once, for a worker that will; deleting them
  // would leave their connections to the watchers and sweeps. `mark` says why.
  // A worker at capacity does not receive at all (poll_releases).
  void hand_back(const SqsReceivedMessage& message, std::string_view mark);
  // A drained worker exits once no SQS receive or hand-back of its own is in
  // flight: a receive that reached SQS after the exit would hide the notices
  // it took for a whole visibility timeout.
  void exit_when_sqs_idle();

  // Streaming (stream_worker.cpp).
  struct Stream {
    const std::string* connection = nullptr;  // its key in streams_
    uint32_t id = 0;                          // the connection's number here (stream_names_)
    std::unique_ptr<resume::StreamSession> session;
    uint64_t generation = 0;  // tells sink replies of an earlier session apart
    ws::ConnectionId socket = 0;
    uint64_t received = 0;  // frames on the current socket
    uint64_t sent = 0;
    // The earliest wakeup this stream has queued, while it is queued
    // (Instant::max() otherwise). Wakeups are re-armed lazily: a stream whose
    // deadline moves later (every frame moves the hub-silence deadline) keeps
    // its earlier entry, which is moved to the real deadline when it surfaces.
    Instant queued_at = Instant::max();
  };
  void open_stream(const lease::OpenSession& open);
  void close_stream(const std::string& connection);
  void on_stream_message(const sim::Envelope& envelope);
  template <typename Step>
  void run_stream(const std::string& connection, Stream& stream, Step step);
  void apply_stream(const std::string& connection, Stream& stream, resume::SessionActions& actions);
  // Removes the first queued wakeup; `stream`, the stream it names (null:
  // gone), forgets it queued it.
  void pop_stream_wakeup(Stream* stream);
  // Queues a wakeup at `at` unless one at or before it is queued already.
  void queue_stream_wakeup(Stream& stream, Instant at);
  void schedule_streams();
  void on_stream_timer();
  void expire_leases();
  lease::Clock clock_of_worker() const { return lease::Clock{context_->wall(), context_->monotonic()}; }

  const WorkerEnvironment& environment_;
  sim::NodeContext* context_ = nullptr;
  std::unique_ptr<NodeRandom> random_;
  std::unique_ptr<Faults> faults_;
  std::optional<lease::LeaseManager> manager_;
  std::string worker_id_;   // the lease owner id
  std::string process_id_;  // "<node>#<incarnation>": this process, to the hub and SQS
  uint64_t timer_ = 0;
  Instant timer_at_ = Instant::max();
  uint32_t sqs_in_flight_ = 0;  // receives and hand-backs awaiting their reply
  bool drained_ = false;        // DrainComplete seen: exit when sqs_in_flight_ is 0
  std::unordered_map<std::string, Stream, TextHash, std::equal_to<>> streams_;  // found by name, never walked
  // The stream of each open socket: streams_ entries stay where they are
  // until erased, and a stream's socket is erased here first. Never walked.
  std::unordered_map<ws::ConnectionId, Stream*> stream_by_socket_;
  // Every connection this worker ever streamed gets a number for good: its
  // name is kept at a fixed address (a deque grows without moving), and the
  // stream open under it, if any, is found by the number. Wakeups name the
  // connection by number, so that they outlive a closed stream, copy no
  // string and are looked up without hashing one.
  uint32_t stream_id(const std::string& connection);
  std::deque<std::string> stream_names_;
  std::unordered_map<std::string_view, uint32_t, TextHash, std::equal_to<>> stream_ids_;  // views into stream_names_
  std::vector<Stream*> stream_by_id_;  // null while the connection has no stream here
  struct StreamWakeup {
    Instant at;
    uint64_t name_prefix = 0;  // lex_prefix(*name)
    const std::string* name = nullptr;  // in stream_names_: one address per name
    uint32_t id = 0;
  };
  // Due time, then connection name: the first bytes kept in the entry order
  // most ties without reading the names.
  struct StreamWakeupLess {
    bool operator()(const StreamWakeup& a, const StreamWakeup& b) const {
      if (a.at != b.at) return a.at < b.at;
      if (a.name_prefix != b.name_prefix) return a.name_prefix < b.name_prefix;
      return a.name != b.name && lex_compare(*a.name, *b.name) < 0;
    }
  };
  // Stale entries are dropped when they surface; observed through top() and
  // pop(), the queue is the set of (due time, connection) pairs.
  WakeupQueue<StreamWakeup, StreamWakeupLess> stream_wakeups_;
  uint64_t stream_timer_ = 0;
  Instant stream_timer_at_ = Instant::max();
  uint64_t stream_generation_ = 0;
  uint32_t next_socket_ = 1;
};

// The hub's side of sessions, as the minimal upstream endpoint: it records
// which workers have a session open per connection and counts overlaps (which
// workers alone cannot prevent: a paused owner's socket stays open).
class UpstreamEndpoint final : public sim::Process {
 public:
  void on_start(sim::NodeContext&) override {}
  void on_message(sim::NodeContext& context, const sim::Envelope& envelope) override;

 private:
  std::map<std::string, std::set<std::string>, LexLess> sessions_;
};

}  // namespace leaseproof::models
