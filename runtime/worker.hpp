#pragma once
// A worker in a real process: core/lease's LeaseManager holding leases in a
// DynamoDB-compatible endpoint, and for each connection it owns, core/resume's
// StreamSession streaming from the hub over a WebSocket and recording into the
// sink table, fenced by the lease epoch. Single-threaded on one io_context,
// wired as the simulator's worker model is (models/worker.cpp,
// models/stream_worker.cpp): the same cores, the same inputs, real clocks.
//
// As in the model, every input first lets the lease manager act on a deadline
// that passed (a process resumed from SIGSTOP finds its queued input and its
// overdue timers: it must stop acting on expired leases before it touches
// their streams).
//
// Release notices: with an SQS endpoint and a release queue (a FIFO queue),
// every NotifyReleased becomes a message (group = connection, so notices of
// one connection stay in order; a deduplication id per release, so a resent
// notice is dropped), and a receive loop hands each notice it gets to the
// lease manager, as the simulator's worker model does (models/worker.cpp):
// long polls, only as many messages as the manager has room for and none at
// capacity; a notice acted on is deleted, one not taken (no room, draining)
// is handed back at once (visibility 0) for another worker. A drain waits for
// its SQS calls in flight (within drain_timeout). Without them, other workers
// find released connections by reconcile (docs/runtime.md).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>

#include "core/lease/config.hpp"
#include "core/resume/session.hpp"
#include "runtime/aws_credentials.hpp"
#include "runtime/dynamo_http_client.hpp"

namespace leaseproof::runtime {

struct WorkerOptions {
  std::string worker_id;
  // endpoint; request_timeout is set from the lease config; its tls_context
  // also verifies wss:// upstreams.
  DynamoHttpClientOptions dynamo;
  // Set when credentials expire and a CredentialsChain refreshes them:
  // /metrics then counts its refreshes by outcome.
  std::function<CredentialsChain::Stats()> credentials_stats;
  std::size_t dynamo_connections = 4;  // keep-alive connections, requests spread over them
  lease::LeaseConfig lease;
  resume::SessionConfig session;  // put mode by default here: dynalite has no TransactWriteItems
  // Not empty: every session's stream goes to this hub (ws[s]://HOST[:PORT]/)
  // instead of the lease item's ws_url.
  std::string hub_override;
  uint64_t seed = 0;  // jitter of renews, reconnects and retries; 0 draws one from the OS
  Duration drain_timeout = Duration::from_s(10);  // SIGTERM: at most this long, then exit anyway
  // Release notices: both empty = none (reconcile only); both set or neither.
  std::string sqs_endpoint;   // http://127.0.0.1:PORT; https:// uses dynamo.tls_context
  std::string release_queue;  // the FIFO queue's name (ends in .fifo); its URL is looked up at start
  Duration release_wait = Duration::from_s(1);          // a receive's long poll (whole seconds); bounds a drain's wait
  Duration release_poll_interval = Duration::from_ms(500);  // next receive when at capacity, or after an error
  Duration release_visibility = Duration::from_s(30);   // a received notice's visibility timeout
};

struct WorkerCounters {
  uint64_t dynamo_calls = 0;
  uint64_t dynamo_transport_errors = 0;  // no answer: passed to the core as ambiguous
  uint64_t sessions_opened = 0;
  uint64_t sessions_closed = 0;
  uint64_t records = 0;        // messages the sink confirmed
  uint64_t fenced = 0;         // sessions whose sink refused a write for good
  uint64_t resets = 0;
  std::map<std::string, uint64_t> marks;             // the cores' coverage marks (lease.takeover_expired, ...)
  std::map<std::string, uint64_t> closes_by_reason;
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

class Worker {
 public:
  // Throws std::invalid_argument naming the option when `options` are wrong.
  Worker(boost::asio::io_context& io, WorkerOptions options, std::function<void(std::string_view)> log);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void start();
  // Drains: closes sessions, releases leases; `done` when the core says the
  // drain is complete, or after drain_timeout.
  void drain(std::function<void()> done);
  const WorkerCounters& counters() const;
  std::size_t owned() const;  // sessions open now
  bool draining() const;
  // Prometheus text: leaseproof_worker_active_connections (the autoscaler's
  // metric), calls by kind, ambiguous outcomes, records, fenced sessions,
  // closes by reason, the cores' marks (takeovers, deadline stops, ...),
  // consumed capacity units by kind, and with release notices their counters.
  std::string metrics_text() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace leaseproof::runtime
