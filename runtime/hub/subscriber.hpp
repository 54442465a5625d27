#pragma once
// Reconnecting subscribers in a real process: core/resume's ResumeClient
// behind Beast WebSocket clients, single-threaded on one io_context. One
// process runs `count` clients of one channel (a wave of 1,000 needs no 1,000
// processes).
//
// The client core decides everything the protocol says (resume position,
// duplicates, batching, full-jitter reconnect by close code, the hub-silence
// deadline); this class carries its actions out: Connect opens a WebSocket and
// sends the subscribe, SendPong writes, Record goes to the sink and answers
// on_recorded, CloseConnection closes. A Record is answered only after the
// sink write is durable (fdatasync): the cursor is what was recorded.
//
// The sink file (one client only) holds one line per recorded message,
// "<epoch> <seq>\n", appended in order; a restarted subscriber resumes after
// its last complete line (a torn last line is cut off first).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "core/resume/client.hpp"
#include "runtime/aws/tls.hpp"

namespace leaseproof::runtime {

struct SubscriberOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string path = "/";
  std::string channel;
  uint32_t count = 1;  // clients, 1..20000
  resume::ClientConfig client;
  std::string sink_path;  // "" keeps records in memory (count > 1 must)
  // false: subscribe once and never read again (a stuck consumer, for labs):
  // no pongs, no reconnects; the hub's bounds are what is being tested.
  bool read = true;
  uint64_t seed = 0;                     // reconnect jitter; 0 draws one from the OS
  Duration stats_interval = Duration::zero();  // > 0: a stats line this often
  int64_t until_seq = 0;                 // > 0: finish once every cursor reaches this seq
  Duration connect_timeout = Duration::from_s(5);  // TCP connect, TLS and WebSocket handshakes together
  // Not null: wss:// with this client context (make_tls_client_context);
  // the certificate is checked against `host`, an IP address.
  TlsContextPtr tls;
};

struct LatencyStats {
  uint64_t samples = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

struct SubscriberSummary {
  uint32_t clients = 0;
  uint64_t received = 0;            // Data frames read
  uint64_t recorded = 0;            // messages the sink confirmed
  uint64_t connects = 0;            // Connect actions (the first of each client included)
  uint64_t connect_failures = 0;    // TCP or handshake failures
  uint64_t gave_up = 0;
  std::map<uint16_t, uint64_t> closes_by_code;  // as the client saw them (1006: dropped)
  std::map<std::string, uint64_t> resets_by_kind;
  std::map<std::string, uint64_t> marks;
  // Reconnects after the first 1012 close seen (the wave), and the most in
  // any one second, counted at each Connect as the simulated stream-wave does.
  bool wave_seen = false;
  uint64_t wave_reconnects = 0;
  uint64_t wave_peak_per_second = 0;
  LatencyStats latency;  // publish-to-receive, from synthetic payloads' send times
  resume::Position first_cursor;  // client 0's cursor at the end
  std::string sink_error;         // not empty: the sink failed (the process exits 1)
};

class SubscriberPool {
 public:
  // Throws std::invalid_argument naming the option when `options` are wrong,
  // std::system_error when the sink cannot be opened or read.
  SubscriberPool(boost::asio::io_context& io, SubscriberOptions options, std::function<void(std::string_view)> log);
  ~SubscriberPool();
  SubscriberPool(const SubscriberPool&) = delete;
  SubscriberPool& operator=(const SubscriberPool&) = delete;

  void start();
  // Closes every connection (1000) and calls `done` once they are closed,
  // or after a second.
  void stop(std::function<void()> done);
  // Called once when every cursor reached until_seq, or every client gave up.
  void on_finished(std::function<void()> callback);
  SubscriberSummary summary() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

// The summary as JSON (for labs) and as text lines (for people).
std::string summary_json(const SubscriberSummary& summary);
std::string summary_text(const SubscriberSummary& summary);

}  // namespace leaseproof::runtime
