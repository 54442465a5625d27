#pragma once
// The embeddable runtime (docs/embedding.md): core/lease's LeaseManager hosted
// on an application's io_context against a DynamoDB endpoint, with renews,
// reconcile, release notices over SQS and the drain carried out on real
// sockets and timers. The application is told two things:
//
//   gained   it owns a connection now: an OwnedConnection with the lease
//            epoch, the upstream's ws_url, the checkpoint to resume after,
//            and fenced writes (checkpoint, record) for acting on it;
//   stopped  it must stop acting on that connection at once: the deadline
//            passed without a confirmed renew, the lease was lost or
//            released, the connection was stopped, or the worker drains.
//
// Every write an OwnedConnection makes is fenced twice: in this process (once
// stopped, or past its deadline, it sends nothing) and in DynamoDB (the
// checkpoint is conditional on this worker owning the lease at this epoch).
//
// `leaseproof worker` (runtime/worker/worker.hpp) is this API's user: it opens a
// stream from the upstream hub for every connection it gains.
//
// Single-threaded: every callback runs on the io_context, and every member
// is called from it. As in the simulator's worker model, every input first
// lets the lease manager act on a deadline that passed: a process resumed from
// SIGSTOP finds its queued input and its overdue timers, and must stop acting
// on expired leases before it touches their streams. An application with
// inputs of its own (its upstream's frames) calls expire() first.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "core/dynamo/error.hpp"
#include "core/dynamo/types.hpp"
#include "core/lease/config.hpp"
#include "core/lease/manager.hpp"
#include "core/resume/protocol.hpp"
#include "core/resume/recording.hpp"
#include "runtime/aws/aws_credentials.hpp"
#include "runtime/aws/dynamo_http_client.hpp"

namespace leaseproof::runtime {

struct LeaseHostOptions {
  std::string worker_id;
  // The endpoint; request_timeout is set from the lease config; its
  // tls_context also serves the SQS client.
  DynamoHttpClientOptions dynamo;
  std::size_t dynamo_connections = 4;  // keep-alive connections, requests spread over them
  lease::LeaseConfig lease;
  resume::SinkTable sink;  // where OwnedConnection::record puts messages
  uint64_t seed = 0;       // jitter of renews and retries; 0 draws one from the OS
  Duration drain_timeout = Duration::from_s(10);  // drain(): at most this long, then done anyway
  // Set when credentials expire and a CredentialsChain refreshes them:
  // /metrics then counts its refreshes by outcome.
  std::function<CredentialsChain::Stats()> credentials_stats;
  // Release notices (runtime/worker/worker.hpp says how they flow): both empty =
  // none (other workers find released connections by reconcile).
  std::string sqs_endpoint;   // http://127.0.0.1:PORT; https:// uses dynamo.tls_context
  std::string release_queue;  // the FIFO queue's name (ends in .fifo); its URL is looked up at start
  Duration release_wait = Duration::from_s(1);              // a receive's long poll (whole seconds)
  Duration release_poll_interval = Duration::from_ms(500);  // next receive when at capacity, or after an error
  Duration release_visibility = Duration::from_s(30);       // a received notice's visibility timeout
};

// Why the application must stop acting on a connection (lease::CloseReason):
// released (given up, e.g. to rebalance), deadline (no renew confirmed in
// time), lost (another worker holds it), drained (drain()), stopped (its
// desired state is no longer STARTED).
using StopReason = lease::CloseReason;
using lease::to_string;

// The outcome of a fenced write.
enum class WriteOutcome : uint8_t {
  written,   // DynamoDB confirmed it (or an earlier attempt of it)
  fenced,    // refused: this worker does not own the lease at this epoch any more
  stopped,   // not sent: the connection was stopped in this process first
  unknown,   // no answer (timeout, connection lost): it may or may not have applied; retry is safe
  failed,    // another error (throttled, validation): not applied
};
std::string_view to_string(WriteOutcome outcome);

using DynamoReply = std::function<void(const dynamo::Result<dynamo::Response>*)>;

class LeaseHostImpl;

// One connection this worker owns, from `gained` until `stopped`. The
// application may keep the shared_ptr longer: once stopped, acting() is false
// and its writes end `stopped` without being sent.
class OwnedConnection : public std::enable_shared_from_this<OwnedConnection> {
 public:
  const std::string& connection() const { return connection_; }
  int64_t epoch() const { return epoch_; }             // the lease epoch every write is fenced by
  const std::string& ws_url() const { return ws_url_; }  // the upstream, from the lease item
  // The checkpoint: the acquire's, advanced by every written checkpoint().
  resume::Position checkpoint() const { return checkpoint_; }
  // False once stopped; also false (and the stop delivered) when the lease's
  // deadline has passed, so check it before acting on input of your own.
  bool acting();

  // Advances the lease item's checkpoint to `through` (after checkpoint()),
  // conditional on this worker owning the lease at this epoch and the stored
  // checkpoint being before `through`. `done` runs on the io_context, never
  // inside this call.
  void checkpoint(resume::Position through, std::function<void(WriteOutcome)> done);
  // Records `messages` (in order, after checkpoint()) in the sink table, one
  // idempotent put each, then checkpoints through the last: an interrupted
  // record() is safe to repeat, and the checkpoint fences it. Messages out of
  // order throw std::invalid_argument before anything is sent.
  void record(std::vector<resume::Message> messages, std::function<void(WriteOutcome)> done);
  // Any DynamoDB request on this connection's behalf, counted as `kind`
  // (leaseproof_worker_calls_total); nullptr to `reply` when no answer came.
  // Not fenced by itself: build the request with the epoch in its condition
  // (core/resume/recording.hpp does). Once stopped, `reply` gets nullptr
  // without a request sent; the deadline is not checked here (acting() does).
  void call(std::string_view kind, dynamo::Request request, DynamoReply reply);

 private:
  friend class LeaseHostImpl;
  struct Recording;
  void put_next(const std::shared_ptr<Recording>& recording);

  std::weak_ptr<LeaseHostImpl> host_;
  std::string connection_;
  int64_t epoch_ = 0;
  std::string ws_url_;
  resume::Position checkpoint_;
  bool stopped_ = false;
};
using OwnedConnectionPtr = std::shared_ptr<OwnedConnection>;

struct LeaseHostCallbacks {
  // Called inside the host's step; may call the connection's writes.
  std::function<void(const OwnedConnectionPtr&)> gained;
  // Stop acting on it now. The connection is acting() == false already.
  std::function<void(const OwnedConnectionPtr&, StopReason)> stopped;
  // One JSON object per line (event(), below); empty: no log.
  std::function<void(std::string_view)> log;
};

struct LeaseHostCounters {
  uint64_t dynamo_calls = 0;
  uint64_t dynamo_transport_errors = 0;  // no answer: passed to the core as ambiguous
  uint64_t gained = 0;
  uint64_t stopped = 0;
  std::map<std::string, uint64_t> marks;             // the cores' coverage marks (lease.takeover_expired, ...)
  std::map<std::string, uint64_t> stops_by_reason;
  std::map<std::string, uint64_t> calls_by_kind;     // renew, acquire, ..., sink_record, sink_checkpoint
  // DynamoDB's ConsumedCapacity (ReturnConsumedCapacity TOTAL), in thousandths
  // of a capacity unit: "write" and "read".
  std::map<std::string, uint64_t> consumed_capacity_milliunits;
  uint64_t release_notices_sent = 0;
  uint64_t release_notice_send_errors = 0;  // not sent (or outcome unknown): reconcile finds the connection
  uint64_t release_notices_received = 0;
  uint64_t release_notices_taken = 0;        // acted on by the lease manager, then deleted
  uint64_t release_notices_handed_back = 0;  // not taken (no room, draining): visibility 0 for another worker
  uint64_t sqs_errors = 0;                   // receives, deletes, hand-backs and queue look-ups that failed
};

class LeaseHost {
 public:
  // Throws std::invalid_argument naming the option when `options` are wrong.
  LeaseHost(boost::asio::io_context& io, LeaseHostOptions options, LeaseHostCallbacks callbacks);
  // Stops: no callback runs after this; handlers still queued on the
  // io_context find the host gone and do nothing.
  ~LeaseHost();
  LeaseHost(const LeaseHost&) = delete;
  LeaseHost& operator=(const LeaseHost&) = delete;

  // Logs worker.start (the configuration a lab's checker computes its bounds
  // from), then acquires, renews and reconciles until drained.
  void start();
  // Releases every lease (each connection `stopped` with reason drained);
  // `done` once the core says the drain is complete and no SQS call is in
  // flight, or after drain_timeout.
  void drain(std::function<void()> done);
  // Acts on lease deadlines that passed (their connections `stopped`).
  void expire();

  std::size_t owned() const;
  bool draining() const;
  // Which process of its worker id this is: the owner_incarnation of the
  // leases it acquires (core algorithm), in every log line as "process".
  int64_t process_incarnation() const;
  // "" when ready to hold leases, else why not (for /readyz): draining; no
  // DynamoDB answer yet; or none within the window (the lease while this
  // worker owns connections, whose renews come every heartbeat; else a
  // reconcile interval, its jitter and a request timeout, the longest an
  // idle worker goes between calls). An answer is a success or a failed
  // condition: DynamoDB evaluated the request. Throttling, server errors and
  // no answer at all do not count.
  std::string readiness() const;
  const LeaseHostCounters& counters() const;
  void mark(const std::string& name);  // counted with the cores' marks on /metrics
  // Prometheus text: leaseproof_worker_active_connections (the autoscaler's
  // metric), calls by kind, ambiguous outcomes, stops by reason, the cores'
  // marks, consumed capacity, and with release notices their counters.
  std::string metrics_text() const;
  // One log line: {"t_ms": wall, "mono_ms": monotonic, "worker": id,
  // "event": name, ...fields}. Within a step of the lease core every line
  // carries the step's time, so what one step decided is one instant to a
  // lab's checker (the monotonic clock is the machine's, shared by every
  // process on it, and left alone by faketime with
  // FAKETIME_DONT_FAKE_MONOTONIC=1).
  void event(std::string_view name, nlohmann::json fields);

 private:
  std::shared_ptr<LeaseHostImpl> impl_;
};

}  // namespace leaseproof::runtime
