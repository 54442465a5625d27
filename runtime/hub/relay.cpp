#include "runtime/hub/relay.hpp"

#include <array>
#include <chrono>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "base/assert.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

// The most a read takes at once, and so the most a connection holds in flight
// each way. Reads go into one buffer the relay shares; a connection holds a
// copy only of what its sink did not take at once, until it is written.
constexpr std::size_t direction_buffer_bytes = 16 * 1024;

// A failed accept that is not about one connection (out of file descriptors,
// say) would fail again at once; wait this long before trying again.
constexpr auto accept_retry_delay = std::chrono::milliseconds(100);

enum class ConnectionEnd { connect_failed, idle_cut, forced_cut, closed };

// Up: client to target; down: target to client.
enum class Direction : std::size_t { up = 0, down = 1 };

Clock::duration to_clock(Duration d) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(d.ns()));
}

// What `host`:`port` resolves to, at least one address: the listener binds
// the first, a connect to a target tries each in turn. Blocking, but done
// once per relay, and the usual host is a numeric address. Throws
// std::system_error naming the address.
tcp::resolver::results_type resolve(asio::io_context& io, const std::string& host, uint16_t port, bool passive,
                                    std::string_view role) {
  tcp::resolver resolver(io);
  error_code ec;
  const auto flags = tcp::resolver::numeric_service | (passive ? tcp::resolver::passive : tcp::resolver::flags{});
  auto results = resolver.resolve(host, std::to_string(port), flags, ec);
  if (!ec && results.empty()) {
    ec = asio::error::host_not_found;
  }
  if (ec) {
    throw std::system_error(std::error_code(ec), fmt::format("relay: cannot resolve {} {}:{}", role, host, port));
  }
  return results;
}

// One entry of RelayOptions::targets, resolved.
struct Target {
  std::string name;  // "HOST:PORT", for log lines
  tcp::resolver::results_type endpoints;
};

}  // namespace

// ---------------------------------------------------------------------------

class Relay::Impl : public std::enable_shared_from_this<Relay::Impl> {
 public:
  Impl(asio::io_context& io, RelayOptions options, LogFunction log)
      : io_(io),
        options_(std::move(options)),
        log_(std::move(log)),
        acceptor_(io),
        accept_retry_timer_(io) {
    LP_ASSERT_MSG(options_.idle > Duration::zero(), "idle must be positive, is {}", options_.idle);
    LP_ASSERT_GT(options_.connections_max, std::size_t{0});
    LP_ASSERT_MSG(!options_.targets.empty(), "a relay needs at least one target");
    for (const auto& [host, port] : options_.targets) {
      LP_ASSERT_MSG(port != 0, "target {}:{} has port 0", host, port);
      targets_.push_back(Target{fmt::format("{}:{}", host, port), resolve(io_, host, port, false, "target")});
    }
    listen();
  }

  uint16_t port() const { return port_; }

  void start() {
    LP_ASSERT(!started_);
    LP_ASSERT(!stopped_);
    started_ = true;
    accept_next();
  }

  void cut_all(std::string_view why) {
    const std::size_t cut = close_all();
    log(fmt::format("relay: cut {} connections ({})", cut, why));
  }

  void stop() {
    stop_accepting();
    if (!connections_.empty()) {
      cut_all("relay stopped");
    }
  }

  // The owning Relay is going away: nothing may reach the caller's log
  // callback or state any more, so close quietly and drop the callback.
  void shut_down() {
    stop_accepting();
    close_all();
    log_ = nullptr;
  }

  std::size_t open_connections() const { return connections_.size(); }
  const RelayCounters& counters() const { return counters_; }

 private:
  class Connection;

  void listen() {
    const tcp::endpoint endpoint = *resolve(io_, options_.listen_host, options_.listen_port, true, "listen").begin();
    error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) {
      // Lets a restarted relay bind while old connections sit in TIME_WAIT;
      // on Linux it does not allow two listeners on one port.
      acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor_.bind(endpoint, ec);
    }
    if (!ec) {
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (!ec) {
      port_ = acceptor_.local_endpoint(ec).port();
    }
    if (ec) {
      throw std::system_error(std::error_code(ec),
                              fmt::format("relay: cannot listen on {}:{}", options_.listen_host, options_.listen_port));
    }
  }

  void accept_next() {
    acceptor_.async_accept([self = shared_from_this()](error_code ec, tcp::socket client) {
      self->on_accepted(ec, std::move(client));
    });
  }

  void on_accepted(error_code ec, tcp::socket client);  // needs Connection: defined below it

  void on_accept_failed(error_code ec) {
    if (ec == asio::error::connection_aborted) {
      accept_next();  // that client gave up before we took it; the next one may not
      return;
    }
    log(fmt::format("relay: accept failed: {}; trying again in {}ms", ec.message(), accept_retry_delay.count()));
    accept_retry_timer_.expires_after(accept_retry_delay);
    accept_retry_timer_.async_wait([self = shared_from_this()](error_code wait_ec) {
      if (!wait_ec && !self->stopped_) {
        self->accept_next();
      }
    });
  }

  void stop_accepting() {
    stopped_ = true;
    error_code ignored;
    acceptor_.close(ignored);
    accept_retry_timer_.cancel();
  }

  std::size_t close_all();  // needs Connection: defined below it

  // Called once by every connection as it ends.
  void on_connection_end(uint64_t id, ConnectionEnd how) {
    LP_ASSERT_EQ(connections_.erase(id), std::size_t{1});
    switch (how) {
      case ConnectionEnd::connect_failed: ++counters_.connect_failed; break;
      case ConnectionEnd::idle_cut: ++counters_.idle_cuts; break;
      case ConnectionEnd::forced_cut: ++counters_.forced_cuts; break;
      case ConnectionEnd::closed: ++counters_.closed; break;
    }
    const uint64_t ended =
        counters_.connect_failed + counters_.idle_cuts + counters_.forced_cuts + counters_.closed;
    LP_ASSERT_EQ(counters_.accepted, ended + connections_.size());
  }

  void log(std::string_view line) const {
    if (log_) {
      log_(line);
    }
  }

  asio::io_context& io_;
  RelayOptions options_;
  LogFunction log_;
  std::vector<Target> targets_;  // RelayOptions::targets, in the order tried
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_timer_;
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
  bool refusing_ = false;  // at connections_max; logged once per episode, not per refusal
  // By id, which is the accept order: cut_all closes in that order.
  std::map<uint64_t, std::shared_ptr<Connection>> connections_;
  RelayCounters counters_;
  // Every connection's reads land here (one thread: one read at a time) and
  // are written on at once; only what a sink does not take is copied out.
  std::array<char, direction_buffer_bytes> scratch_{};
};

// ---------------------------------------------------------------------------

// One client connection and its target connection. Every handler holds a
// shared_ptr to it, and the relay's map holds one while it is open, so it
// lives until the last pending handler has run. Once ended (closed_), its
// handlers return at once and never reach the relay again.
//
// Before the target connection is up, it tries the targets in order, one
// connect attempt at a time; the idle timer bounds each attempt. Only the
// connect handler moves on to the next target (when the timer gives up on an
// attempt it closes the socket, and the handler then runs with
// operation_aborted), so target_ never has two connects outstanding.
class Relay::Impl::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Impl> relay, uint64_t id, tcp::socket client)
      : relay_(std::move(relay)),
        id_(id),
        client_(std::move(client)),
        target_(client_.get_executor()),
        idle_timer_(client_.get_executor()) {}

  void start() { connect_to(0); }

  // Closes both sockets (pending operations then finish with
  // operation_aborted, and their handlers see closed_) and reports the end to
  // the relay once.
  void end(ConnectionEnd how) {
    if (closed_) {
      return;
    }
    closed_ = true;
    const auto keep_alive = shared_from_this();  // the relay drops its reference below
    error_code ignored;
    idle_timer_.cancel();
    client_.close(ignored);
    target_.close(ignored);
    relay_->on_connection_end(id_, how);
  }

 private:
  Duration idle() const { return relay_->options_.idle; }
  Clock::time_point idle_deadline() const { return silent_since_ + to_clock(idle()); }

  // One attempt; its silence (the connect timeout) starts now.
  void connect_to(std::size_t index) {
    LP_ASSERT_LT(index, relay_->targets_.size());
    LP_ASSERT(!connected_);
    target_index_ = index;
    attempt_timed_out_ = false;
    silent_since_ = Clock::now();
    arm_idle_timer(idle_deadline());  // replaces a wait left from the previous attempt
    asio::async_connect(target_, relay_->targets_[index].endpoints,
                        [self = shared_from_this()](error_code ec, const tcp::endpoint&) { self->on_connected(ec); });
  }

  void arm_idle_timer(Clock::time_point deadline) {
    idle_timer_.expires_at(deadline);
    idle_timer_.async_wait([self = shared_from_this()](error_code ec) { self->on_idle_timer(ec); });
  }

  // Bytes do not re-arm the timer (that would cancel and re-queue a wait per
  // chunk); they move silent_since_, and the timer, on expiry, either sleeps
  // until the moved deadline or cuts.
  void on_idle_timer(error_code ec) {
    if (closed_ || ec) {
      return;
    }
    const Clock::time_point deadline = idle_deadline();
    if (Clock::now() < deadline) {
      arm_idle_timer(deadline);
      return;
    }
    if (!connected_) {
      // Give up on this attempt; its connect handler runs next and moves on.
      attempt_timed_out_ = true;
      error_code ignored;
      target_.close(ignored);
      return;
    }
    relay_->log(fmt::format("relay: idle cut connection {} after {} of silence", id_, idle()));
    end(ConnectionEnd::idle_cut);
  }

  void on_connected(error_code ec) {
    if (closed_) {
      return;
    }
    // Timed out wins over a success that completed as the timer fired: the
    // timer has closed the socket by now.
    if (attempt_timed_out_) {
      on_connect_failed(fmt::format("no answer within {}", idle()));
      return;
    }
    if (ec) {
      on_connect_failed(ec.message());
      return;
    }
    connected_ = true;
    if (target_index_ > 0) {
      ++relay_->counters_.failovers;
    }
    // Request/response traffic in small writes: do not let Nagle hold a
    // relayed segment back waiting for an acknowledgement.
    error_code ignored;
    client_.set_option(tcp::no_delay(true), ignored);
    target_.set_option(tcp::no_delay(true), ignored);
    // Reads and first writes are tried at once (read_some/write_some after
    // the socket is readable): they must not block the relay's one thread.
    client_.non_blocking(true, ignored);
    target_.non_blocking(true, ignored);
    read(Direction::up);
    read(Direction::down);
  }

  void on_connect_failed(const std::string& reason) {
    const std::vector<Target>& targets = relay_->targets_;
    const Target& failed = targets[target_index_];
    const std::size_t next = target_index_ + 1;
    if (next < targets.size()) {
      relay_->log(fmt::format("relay: connection {}: target {} failed ({}); trying {}", id_, failed.name, reason,
                              targets[next].name));
      connect_to(next);
      return;
    }
    const std::string every = targets.size() > 1 ? fmt::format(" (all {} targets failed)", targets.size()) : "";
    relay_->log(fmt::format("relay: connection {} could not connect to {}: {}{}", id_, failed.name, reason, every));
    end(ConnectionEnd::connect_failed);
  }

  tcp::socket& source(Direction d) { return d == Direction::up ? client_ : target_; }
  tcp::socket& sink(Direction d) { return d == Direction::up ? target_ : client_; }
  std::vector<char>& unsent(Direction d) { return unsent_[static_cast<std::size_t>(d)]; }

  // wait readable -> read a chunk into the shared buffer -> write it on at
  // once -> (what the sink did not take: copied, written, then freed) -> wait
  // again: at most one chunk in flight per direction, so a slow sink stops
  // reads from its source. An idle connection holds no buffer.
  void read(Direction d) {
    source(d).async_wait(tcp::socket::wait_read, [self = shared_from_this(), d](error_code ec) {
      self->on_readable(d, ec);
    });
  }

  void on_readable(Direction d, error_code ec) {
    if (closed_) {
      return;
    }
    std::array<char, direction_buffer_bytes>& scratch = relay_->scratch_;
    std::size_t bytes = 0;
    if (!ec) {
      bytes = source(d).read_some(asio::buffer(scratch), ec);
    }
    if (ec == asio::error::would_block) {  // woken with nothing to read after all
      read(d);
      return;
    }
    if (ec) {  // end of stream or an error: either way the relayed connection is over
      end(ConnectionEnd::closed);
      return;
    }
    LP_ASSERT_GT(bytes, std::size_t{0});
    LP_ASSERT_LE(bytes, direction_buffer_bytes);
    silent_since_ = Clock::now();
    (d == Direction::up ? relay_->counters_.bytes_up : relay_->counters_.bytes_down) += bytes;
    std::size_t written = sink(d).write_some(asio::buffer(scratch.data(), bytes), ec);
    if (ec == asio::error::would_block) {
      written = 0;
    } else if (ec) {
      end(ConnectionEnd::closed);
      return;
    }
    if (written == bytes) {
      read(d);
      return;
    }
    unsent(d).assign(scratch.data() + written, scratch.data() + bytes);
    asio::async_write(sink(d), asio::buffer(unsent(d)), [self = shared_from_this(), d](error_code write_ec, std::size_t) {
      std::vector<char>().swap(self->unsent(d));
      self->on_written(d, write_ec);
    });
  }

  void on_written(Direction d, error_code ec) {
    if (closed_) {
      return;
    }
    if (ec) {
      end(ConnectionEnd::closed);
      return;
    }
    // A write that took long because the sink was slow is still traffic:
    // the silence starts when it finished.
    silent_since_ = Clock::now();
    read(d);
  }

  std::shared_ptr<Impl> relay_;
  const uint64_t id_;
  tcp::socket client_;
  tcp::socket target_;
  asio::steady_timer idle_timer_;
  // The last byte either way; before the target connection is up, the start
  // of the current connect attempt.
  Clock::time_point silent_since_{};
  std::size_t target_index_ = 0;    // into relay_->targets_: the one connected or being tried
  bool attempt_timed_out_ = false;  // the idle timer gave up on the current connect attempt
  bool connected_ = false;
  bool closed_ = false;
  std::array<std::vector<char>, 2> unsent_;  // by Direction: what a sink has not taken yet
};

// ---------------------------------------------------------------------------

void Relay::Impl::on_accepted(error_code ec, tcp::socket client) {
  if (stopped_) {
    return;  // an accept completed as the relay stopped; `client` closes as it goes
  }
  if (ec) {
    on_accept_failed(ec);
    return;
  }
  if (connections_.size() >= options_.connections_max) {
    ++counters_.refused;
    error_code ignored;
    client.close(ignored);
    if (!refusing_) {
      refusing_ = true;
      log(fmt::format("relay: {} connections open (connections_max), refusing new ones", connections_.size()));
    }
    accept_next();
    return;
  }
  refusing_ = false;
  ++counters_.accepted;
  const uint64_t id = counters_.accepted;
  auto connection = std::make_shared<Connection>(shared_from_this(), id, std::move(client));
  connections_.emplace(id, connection);
  connection->start();
  accept_next();
}

std::size_t Relay::Impl::close_all() {
  std::size_t closed = 0;
  // Each end() removes its connection from the map.
  while (!connections_.empty()) {
    const std::shared_ptr<Connection> victim = connections_.begin()->second;
    victim->end(ConnectionEnd::forced_cut);
    ++closed;
  }
  return closed;
}

// ---------------------------------------------------------------------------

Relay::Relay(boost::asio::io_context& io, RelayOptions options, LogFunction log)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(log))) {}

Relay::~Relay() { impl_->shut_down(); }

uint16_t Relay::port() const { return impl_->port(); }

void Relay::start() { impl_->start(); }

void Relay::cut_all(std::string_view why) { impl_->cut_all(why); }

void Relay::stop() { impl_->stop(); }

std::size_t Relay::open_connections() const { return impl_->open_connections(); }

const RelayCounters& Relay::counters() const { return impl_->counters(); }

}  // namespace leaseproof::runtime
