#pragma once
// A TCP relay that stands in for a load balancer in front of real servers:
// it accepts client connections, opens one connection to a target for each,
// and copies bytes both ways. Like the load balancers in front of the services
// leaseproof models, it cuts a connection that has been silent for `idle`
// (no byte in either direction), and it can cut every connection at once on
// request, so a lab can show what clients do when their connections drop.
//
// Targets are tried primary first, then fail over: every connection tries the
// first target, and the next only when that one refused, failed or did not
// answer within `idle`, and so on down the list. While the first target is up
// every connection goes to it (not round-robin), so a lab can put two servers
// behind the relay, kill the first, and know where each client landed. No
// byte is read from the client before a target is connected, so failing over
// loses none.
//
// Flow control is the sockets' own: each direction has at most one chunk
// (16 KiB) in flight and reads again only after the whole previous chunk was
// written, so a slow reader on one side slows the writer on the other (never
// an unbounded queue). Chunks are read into one buffer the relay shares and
// written on at once; a connection copies only what its sink did not take,
// until it is written, so an idle connection holds no buffer.
//
// Single-threaded: every call and every handler runs on the io_context given
// to the constructor; call the relay from the thread that runs it.
//
// Every accepted connection ends in exactly one of the counters
// connect_failed, idle_cuts, forced_cuts or closed (or is still open), which
// the relay asserts: accepted == connect_failed + idle_cuts + forced_cuts +
// closed + open_connections().

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "base/time.hpp"

namespace leaseproof::runtime {

struct RelayOptions {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;  // 0: the OS picks; Relay::port() tells which
  // (host, port), in the order tried; at least one, no port 0. Each is
  // resolved once, when the relay is built.
  std::vector<std::pair<std::string, uint16_t>> targets;
  // Cut a connection silent (no byte either way) this long. Also bounds each
  // connect attempt: a target that has not accepted by then is skipped, so a
  // connection waits at most targets.size() * idle before it counts as
  // connect_failed. The silence of a connection counts from the start of the
  // attempt that succeeded.
  Duration idle = Duration::from_ms(2500);
  std::size_t connections_max = 20000;  // further accepts are closed at once
};

struct RelayCounters {
  uint64_t accepted = 0;        // client connections taken on (not counting refused ones)
  uint64_t refused = 0;         // closed at once: connections_max were open
  uint64_t connect_failed = 0;  // every target refused, errored or did not answer within `idle`
  uint64_t failovers = 0;       // connected to a target other than the first (any end after that)
  uint64_t idle_cuts = 0;       // silent for `idle`
  uint64_t forced_cuts = 0;     // cut by cut_all(), stop() or the relay's destruction
  uint64_t closed = 0;          // ended by either side closing or failing
  uint64_t bytes_up = 0;        // client to target
  uint64_t bytes_down = 0;      // target to client
};

class Relay {
 public:
  using LogFunction = std::function<void(std::string_view line)>;

  // Resolves every address, binds and listens at once. Throws
  // std::system_error naming the address when it cannot (port in use, host
  // unknown). `log` receives one human-readable line per notable event (a
  // skipped target, a failed connect, a cut, refusals at connections_max);
  // never after the relay is destroyed. Connections that end normally are
  // only counted.
  Relay(boost::asio::io_context& io, RelayOptions options, LogFunction log);
  // Stops accepting and closes every connection without a log line. Handlers
  // still pending on the io_context finish harmlessly.
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  uint16_t port() const;  // the bound listen port
  void start();           // begins accepting; once
  // Closes every open connection now (both sockets), counts each as a
  // forced cut and logs "relay: cut N connections (why)".
  void cut_all(std::string_view why);
  // Stops accepting and closes everything (as cut_all when any are open).
  void stop();

  std::size_t open_connections() const;
  const RelayCounters& counters() const;

 private:
  class Impl;
  // Shared with pending handlers, so that destroying the relay while the
  // io_context still holds them is safe.
  std::shared_ptr<Impl> impl_;
};

}  // namespace leaseproof::runtime
