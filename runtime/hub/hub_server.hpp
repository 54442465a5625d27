#pragma once
// The upstream hub in a real process: core/resume's Hub behind a WebSocket
// server (Boost.Beast), on one io_context per thread (HubServerOptions::threads).
//
// One TCP port serves (over TLS only when HubServerOptions::tls is set):
//   WebSocket upgrade (any path)   a subscriber: the resume protocol in the
//                                  wire format of runtime/hub/resume_wire.hpp
//   GET  /metrics                  Prometheus text (docs/runtime.md lists them)
//   GET  /healthz                  "ok"
//   POST /publish?channel=C        the body is one message's payload
//   POST /publish?channel=C&count=K&size=S
//                                  K synthetic messages of S bytes each
//   POST /admin/close-all?code=N   with HubServerOptions::admin only
// plus built-in generators (HubServerOptions::generators) for labs and load.
//
// The core decides everything the protocol says (queues, resets, pings,
// deadlines, closes); this class only carries its actions out: each HubSend
// goes to the subscriber's outbox, written by that subscriber's own writer (one
// write in flight per connection), and each HubClose closes that connection
// with its code. The core keeps messages' sizes only: the payloads, encoded
// once per message as the Data frame every subscriber gets, sit in a store
// that mirrors the core's ring and is trimmed with it.
//
// Threads: the hub is split into shards, one per thread, each a whole hub on
// its own io_context: its own core (resume::Hub), store and subscribers, and
// no lock on its path to a socket. Shard 0 runs on the io_context the caller
// gives and owns the listening socket; it hands each accepted connection to
// the shards in turn. A publish takes the next sequence number of its channel
// under one lock, is encoded once, and is appended to every shard's inbox in
// that order, so every shard's core holds the same ring (docs/runtime.md,
// "Threads").

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "core/resume/hub.hpp"
#include "runtime/hub/redis_ring.hpp"
#include "runtime/aws/tls.hpp"

namespace leaseproof::runtime {

struct HubGenerator {
  std::string channel;
  double rate = 1;     // messages per second, > 0
  uint32_t bytes = 0;  // payload size of each message
};
// "CHANNEL:RATE:SIZE", e.g. "live:100:256"; an error names what is wrong.
std::variant<HubGenerator, std::string> parse_generator(std::string_view text);

struct HubServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the OS picks (port() tells)
  resume::HubConfig hub;
  // Must differ from every earlier epoch of this hub; 0 takes the wall clock
  // in milliseconds since 1970, which a restarted hub never repeats.
  uint64_t epoch = 0;
  std::vector<HubGenerator> generators;
  std::size_t connections_max = 20'000;   // further connections are closed at once
  std::size_t client_frame_bytes_max = 4096;  // a larger frame from a subscriber closes it (1009)
  // How long a closing connection may take to finish its close handshake
  // before its socket is closed without one.
  Duration close_timeout = Duration::from_s(2);
  // A WebSocket that has not subscribed this long after its upgrade is
  // closed with 1008: it would hold a connection slot for nothing.
  Duration subscribe_timeout = Duration::from_s(10);
  // Channels and rings shared with other hubs through Redis (redis_ring.hpp);
  // port 0: in this process only. With a store, the epoch is the store's
  // (the first hub's `epoch`, or its wall clock).
  SharedRingOptions shared{.host = "127.0.0.1", .port = 0};
  // Serve POST /admin/close-all?code=1012: every subscriber closed with that
  // code while the hub keeps running (a restart's close wave, for labs).
  bool admin = false;
  // Not empty: a file that gets one JSON line per WebSocket session when it
  // ends (docs/runtime.md, "Hub session records"): who it was (the worker and
  // lease epoch a worker puts in its URL's query), and on this machine's
  // monotonic clock when it opened, subscribed, last sent a frame, got its
  // first and last Data frame written, and ended. A lab judges ownership from
  // these, on one clock.
  std::string sessions_path;
  // Not null: every connection speaks TLS (wss://, https:// for /metrics and
  // /publish) with this server context (make_tls_server_context); a client
  // that does not is dropped after its failed handshake.
  TlsContextPtr tls;
  // Shards, each on its own thread (shard 0 on the caller's io_context,
  // 1..threads-1 on threads the server starts and joins): 1..64. More than
  // one is refused with a shared store (shared.port != 0).
  unsigned threads = 1;
};

// Counters for /metrics and the tests.
struct HubServerCounters {
  uint64_t accepted = 0;          // TCP connections
  uint64_t refused = 0;           // over connections_max
  uint64_t subscribes = 0;
  uint64_t published = 0;
  uint64_t data_frames_written = 0;
  uint64_t ring_evictions = 0;
  uint64_t disconnects = 0;       // the peer closed or the connection broke
  // Frames that are not the protocol: closed 1002 (not a frame of the wire
  // format, a pong for a ping not outstanding), 1003 (binary), 1007 (text
  // that is not UTF-8) or 1009 (larger than client_frame_bytes_max).
  uint64_t protocol_errors = 0;
  uint64_t subscribe_timeouts = 0;  // upgraded, never subscribed: closed 1008
  uint64_t tls_handshake_failures = 0;  // with a certificate: dropped before any HTTP
  // Pongs whose `consumed` exceeded the Data bytes written to the socket and
  // not yet credited: clamped to those (a peer cannot have read the rest).
  uint64_t pong_credit_clamped = 0;
  // Outboxes past their hard bound (closed 1013); the credit rule keeps them
  // within it, so a count here is a bug to report.
  uint64_t outbox_overflows = 0;
  uint64_t http_requests = 0;
  std::map<uint16_t, uint64_t> closes_by_code;  // closes the hub decided
  std::map<std::string, uint64_t> resets_by_kind;
  std::map<std::string, uint64_t> marks;        // the core's coverage marks
};

class HubServer {
 public:
  // Binds and listens at once; throws std::system_error naming the address
  // when that fails. `log` receives one line per notable event.
  HubServer(boost::asio::io_context& io, HubServerOptions options, std::function<void(std::string_view)> log);
  ~HubServer();
  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  uint16_t port() const;
  uint64_t epoch() const;  // 0 until a shared store has been read
  // A shared store failed or broke its order: the hub stopped its io_context
  // (the process should exit 1).
  bool failed() const;
  void start();
  // Stops accepting and generating, closes every subscriber with `code`
  // (1001 going away, 1012 service restart) and calls `done` once every
  // connection is closed, or after close_timeout.
  void shutdown(uint16_t code, std::function<void()> done);

  // Closes every subscriber with `code` (1001 or 1012) and keeps running:
  // a restart's close wave without the restart. Returns how many it closed.
  std::size_t close_all(uint16_t code);
  // Publishes one message (now, or through the shared store's log); false
  // with a reason if the channel name or the payload is not allowed. With
  // more than one thread every shard (shard 0 too) gets it through its
  // io_context's queue, after the messages sequenced before it.
  bool publish(std::string_view channel, std::string_view payload, std::string* error = nullptr);
  // metrics_text, counters and close_all: call them on the caller's
  // io_context's thread (or once it has stopped). With more than one thread
  // they wait for every other shard's share, which each shard's thread
  // answers between its handlers.
  std::string metrics_text() const;
  HubServerCounters counters() const;  // totals over the shards
  std::size_t connections() const;

 private:
  class Impl;
  class Fleet;
  std::unique_ptr<Fleet> fleet_;
};

// Resident memory of this process in bytes (/proc/self/statm), 0 if unknown.
uint64_t resident_bytes();

}  // namespace leaseproof::runtime
