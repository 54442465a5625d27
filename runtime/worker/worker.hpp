#pragma once
// A worker in a real process: the embeddable runtime's LeaseHost
// (lease_host.hpp) holding leases in a DynamoDB-compatible endpoint, and for
// each connection it gains, core/resume's StreamSession streaming from the hub
// over a WebSocket and recording into the sink table, fenced by the lease
// epoch. Single-threaded on one io_context, wired as the simulator's worker
// model is (models/worker.cpp, models/stream_worker.cpp): the same cores, the
// same inputs, real clocks. Every input (a frame, a close, a sink reply, a
// stream timer) first lets the host act on a deadline that passed.
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
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>

#include "core/resume/session.hpp"
#include "runtime/worker/lease_host.hpp"

namespace leaseproof::runtime {

struct WorkerOptions {
  // The lease host's options: worker id, endpoint, lease config, seed, drain
  // timeout, release notices. Its sink is session.sink.
  LeaseHostOptions host;
  resume::SessionConfig session;  // put mode by default here: dynalite has no TransactWriteItems
  // Not empty: every session's stream goes to this hub (ws[s]://HOST[:PORT]/)
  // instead of the lease item's ws_url. Upstreams over wss:// are verified
  // with host.dynamo.tls_context.
  std::string hub_override;
};

struct WorkerCounters {
  uint64_t records = 0;  // messages the sink confirmed
  uint64_t fenced = 0;   // sessions whose sink refused a write for good
  uint64_t resets = 0;
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
  const LeaseHostCounters& host_counters() const;
  const WorkerCounters& counters() const;
  std::size_t owned() const;  // connections owned (and streamed) now
  bool draining() const;
  std::string readiness() const;  // LeaseHost::readiness
  // Prometheus text: the host's (lease_host.hpp), then records, fenced
  // sessions and resets.
  std::string metrics_text() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace leaseproof::runtime
