#pragma once
// Inside the hub process (hub_server.hpp): what its source files share and
// no one else includes. A shard (HubServer::Impl) is single-threaded: every
// handler of its runs on its io_context's one thread, so its core and its
// state need no locks. What the shards share is the Fleet's, each piece under
// its own lock. The files:
//   hub_server.cpp   the Fleet (threads, the publish sequencer, gathering)
//                    and HubServer's public API
//   hub_shard.cpp    a shard: its core, its store, publishes and timers
//   hub_session.hpp  one subscriber's WebSocket (Session)
//   hub_http.cpp     accepting connections, and the HTTP API (HttpConnection)

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "base/time.hpp"
#include "runtime/clock.hpp"
#include "runtime/prometheus.hpp"
#include "runtime/hub/hub_server.hpp"
#include "runtime/hub/redis_ring.hpp"
#include "runtime/hub/resume_wire.hpp"
#include "runtime/hub/ws_stream.hpp"

namespace leaseproof::runtime {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

// A message encoded once as the Data frame every subscriber gets.
using Frame = std::shared_ptr<const std::string>;

std::optional<double> parse_number(std::string_view text);

using ConnectionCount = std::atomic<std::size_t>;

// Holds one of the server's connection slots while alive (on any shard).
class Slot {
 public:
  explicit Slot(std::shared_ptr<ConnectionCount> count) : count_(std::move(count)) { ++*count_; }
  ~Slot() { --*count_; }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  std::shared_ptr<ConnectionCount> count_;
};

// "" when a publish may go ahead, else why not.
std::string check_publish(std::string_view channel, std::string_view payload);

// A subscriber's WebSocket. Over plain TCP it runs on the socket itself, with
// the io_context's own executor type: not on Beast's tcp_stream over a
// type-erased executor, whose timed transfer operations and executor copies
// cost 37% of a delivered frame's instructions (docs/benchmarks.md). The
// WebSocket's own timer bounds its handshakes either way. Over TLS it is the
// TlsWebSocket of runtime/hub/ws_stream.hpp.
class HubWebSocket {
 public:
  using Socket = asio::basic_stream_socket<tcp, asio::io_context::executor_type>;
  using Plain = websocket::stream<Socket>;

  // From an HTTP connection's stream, its upgrade request read.
  HubWebSocket(asio::io_context& io, TcpStream stream) : ws_(std::in_place_type<Plain>, io) {
    tcp::socket socket = stream.release_socket();  // cancels the HTTP read's expiry
    beast::error_code ec;
    const tcp::endpoint local = socket.local_endpoint(ec);
    if (ec) return;  // already broken: the handshake fails and ends the session
    const auto native = socket.release(ec);
    if (ec) return;
    std::get<Plain>(ws_).next_layer().assign(local.protocol(), native, ec);
  }
  HubWebSocket(asio::io_context&, TlsStream stream) : ws_(std::in_place_type<TlsWebSocket>, std::move(stream)) {
    beast::get_lowest_layer(std::get<TlsWebSocket>(ws_)).expires_never();
  }

  template <typename Operation>
  decltype(auto) visit(Operation&& operation) {
    return std::visit(std::forward<Operation>(operation), ws_);
  }
  // Closes the TCP socket: the operations in flight fail.
  void close_socket() {
    beast::error_code ignored;
    if (auto* plain = std::get_if<Plain>(&ws_)) {
      plain->next_layer().close(ignored);
    } else {
      beast::get_lowest_layer(std::get<TlsWebSocket>(ws_)).socket().close(ignored);
    }
  }

 private:
  std::variant<Plain, TlsWebSocket> ws_;
};

// One published message's fan-out over every shard: it ends when the last
// shard's last subscriber's frame is written.
struct FanOutAcross {
  FanOutAcross(Instant at, uint32_t shards) : accepted(at), shards_left(shards) {}
  const Instant accepted;
  std::atomic<uint32_t> shards_left;
  std::atomic<uint32_t> written{0};        // subscribers' frames written, over the shards
  std::atomic<int64_t> last_written_ns{0};  // the latest of them (Instant::ns)
};

// One shard's share of /metrics.
struct ShardStats {
  HubServerCounters counters;
  uint64_t epoch = 0;
  uint64_t subscribers = 0, queued = 0, outbox = 0, ring_bytes = 0, ring_messages = 0;
};

void add_counters(HubServerCounters& total, const HubServerCounters& c);

// What the shards of one hub share (hub_server.hpp, "Threads"): the
// sequencer of publishes, the connection count, the fan-out histogram, the
// log and the session records, each under its own lock; and the threads and
// io_contexts of shards 1..N-1. A shard never waits for another: it posts.
// Only the caller's thread waits, in the *_wait calls of the public API.
class HubServer::Fleet {
 public:
  Fleet(asio::io_context& io, HubServerOptions options, std::function<void(std::string_view)> log);
  ~Fleet();  // stops and joins the shards' threads
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  std::size_t size() const { return shards_.size(); }
  Impl& shard(std::size_t k) const { return *shards_[k]; }
  const std::shared_ptr<Impl>& shard_ptr(std::size_t k) const { return shards_[k]; }
  asio::io_context& io(std::size_t k) const { return k == 0 ? io0_ : *ios_[k - 1]; }
  const std::shared_ptr<ConnectionCount>& open() const { return open_; }

  void start();
  void shutdown(uint16_t code, std::function<void()> done);
  // Sequences a publish. One shard: the shard publishes it (at once, or
  // through the shared store). More: the next seq of its channel, the frame
  // encoded once, posted to every shard in seq order; `done` gets the seq.
  bool publish(std::string_view channel, std::string_view payload, std::string* error,
               std::function<void(int64_t)> done = nullptr);
  // A fan-out is starting / one shard's share of it has ended.
  std::shared_ptr<FanOutAcross> begin_fanout(Instant accepted, uint32_t shards);
  void fanout_shard_done(FanOutAcross& across, uint32_t written, Instant last_written);

  // Thread-safe: one line to the log / one line to the session records.
  void log(std::string_view line);
  void record_session(const std::string& line);

  // Runs `f` on every shard's thread and hands the answers, in shard order,
  // to `done` on `reply_on`'s thread (at once with one shard).
  template <typename T>
  void each_shard(asio::io_context& reply_on, std::function<T(Impl&)> f, std::function<void(std::vector<T>)> done);
  // The same, waiting: only on shard 0's thread (or once it has stopped).
  template <typename T>
  std::vector<T> each_shard_wait(std::function<T(Impl&)> f) const;
  std::string metrics_text(const std::vector<ShardStats>& shards) const;

 private:
  void stop_threads();

  asio::io_context& io0_;
  std::function<void(std::string_view)> log_;
  std::mutex log_mutex_;
  std::ofstream sessions_log_;  // options.sessions_path, when set
  std::mutex sessions_mutex_;
  std::shared_ptr<ConnectionCount> open_ = std::make_shared<ConnectionCount>(0);
  uint64_t epoch_ = 0;  // with more than one shard (no shared store)
  std::mutex publish_mutex_;
  std::unordered_map<std::string, int64_t> tops_;  // the last seq of each channel
  mutable std::mutex fanout_mutex_;
  DurationHistogram fanout_seconds_;
  std::atomic<uint64_t> fanouts_in_progress_{0};
  std::vector<std::unique_ptr<asio::io_context>> ios_;  // shards 1..N-1
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  bool threads_stopped_ = false;
  std::vector<std::shared_ptr<Impl>> shards_;
};

class HubServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(Fleet& fleet, std::size_t index, asio::io_context& io, HubServerOptions options)
      : fleet_(fleet),
        index_(index),
        io_(io),
        options_(std::move(options)),
        log_([&fleet](std::string_view line) { fleet.log(line); }),
        acceptor_(io),
        core_timer_(io),
        shutdown_timer_(io),
        next_id_(index + 1) {
    if (options_.shared.port == 0) {
      hub_.emplace(options_.hub, proposed_epoch());
    } else {
      shared_ = std::make_unique<RedisRingStore>(io, options_.shared, [this](const std::string& why) { fatal(why); });
    }
    if (index_ != 0) return;  // shard 0 listens
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(options_.host, ec);
    if (ec) throw std::system_error(ec, fmt::format("listen address '{}'", options_.host));
    const tcp::endpoint endpoint{address, options_.port};
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint, ec);
    if (ec) throw std::system_error(ec, fmt::format("listen {}:{}", options_.host, options_.port));
    acceptor_.listen(asio::socket_base::max_listen_connections);
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  uint64_t epoch() const { return hub_ ? hub_->epoch() : 0; }
  const HubServerCounters& counters() const { return counters_; }
  bool failed() const { return failed_; }
  ShardStats stats() const;
  // The server is going away while the caller's io_context may still run:
  // the handlers that would reach the fleet end with operation_aborted.
  void detach() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    core_timer_.cancel();
    shutdown_timer_.cancel();
    for (auto& g : generators_) g->timer.cancel();
  }

  // Without a shared store: serves at once. With one: reads its snapshot,
  // rebuilds the rings from it, then serves and follows the log.
  void start() {
    if (!shared_) return serve();
    shared_->open(proposed_epoch(), [weak = weak_from_this()](SharedRingSnapshot snapshot) {
      if (auto self = weak.lock()) self->opened(std::move(snapshot));
    });
  }

  // Shard 0 accepts and generates; the others serve what it hands them.
  void serve() {
    if (index_ != 0) return;
    accept();
    for (const HubGenerator& g : options_.generators) {
      auto state = std::make_shared<Generator>(Generator{g, asio::steady_timer{io_}, monotonic_now(), 0});
      generators_.push_back(state);
      generate(state);
    }
  }

  void shutdown(uint16_t code, std::function<void()> done) {
    if (shutting_down_) return;
    shutting_down_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (auto& g : generators_) g->timer.cancel();
    resume::HubActions actions;
    const char* reason = code == resume::close_code::service_restart ? "service restart" : "going away";
    hub_->close_all(code, reason, monotonic_now(), actions);
    log_(fmt::format("hub: shutting down{}: closing {} connections with {}",
                     fleet_.size() > 1 ? fmt::format(" shard {}", index_) : "", sessions_.size(), code));
    apply(actions);
    close_unsubscribed(code, reason);
    rearm();
    const Instant give_up = monotonic_now() + options_.close_timeout + Duration::from_ms(500);
    wait_closed(std::move(done), give_up);
  }

  // Publishes (through the shared log when there is one; `done` gets the
  // sequence number). False with `error` set when check_publish refuses.
  // The only shard's path; with more, Fleet::publish sequences.
  bool publish(std::string_view channel, std::string_view payload, std::string* error,
               std::function<void(int64_t)> done = nullptr);
  // A sequenced message for this shard (more than one shard: Fleet::publish).
  struct Delivery {
    std::string channel;
    int64_t seq = 0;
    uint32_t bytes = 0;
    Frame frame;
    std::shared_ptr<FanOutAcross> across;
  };
  // From any thread, under the fleet's publish lock: appends to this shard's
  // inbox, so the inbox holds each channel's messages in seq order whatever
  // the threads, and posts a drain unless one is pending. The order never
  // rests on Asio's queues: a thread's posts to its own io_context wait in a
  // thread-private queue until its handler returns, and a post from another
  // thread meanwhile overtakes them.
  void enqueue(Delivery delivery);
  // On this shard's thread: every message in the inbox, in order, into the
  // core, the store and the outboxes. Also first thing when a subscriber's
  // frame arrives, so a subscribe never finds the core behind a publish
  // that some client was already told about.
  void drain_inbox();
  // A sequenced message into this shard's core, store and outboxes.
  void deliver(const std::string& channel, int64_t seq, uint32_t bytes, Frame frame,
               std::shared_ptr<FanOutAcross> across);
  // Closes every subscriber with `code`; the hub keeps running. Returns how many.
  std::size_t close_all(uint16_t code) {
    const std::size_t count = hub_->subscriber_count();
    resume::HubActions actions;
    hub_->close_all(code, code == resume::close_code::service_restart ? "service restart" : "going away",
                   monotonic_now(), actions);
    if (count > 0 || fleet_.size() == 1) log_(fmt::format("hub: closing {} subscribers with {}", count, code));
    quiet_closes_ = true;
    apply(actions);
    quiet_closes_ = false;
    rearm();
    return count;
  }

 private:
  struct Generator {
    HubGenerator config;
    asio::steady_timer timer;
    Instant started;
    uint64_t sent = 0;
  };
  struct StoredChannel {
    int64_t first_seq = 1;        // seq of frames.front()
    std::deque<Frame> frames;     // mirrors the core's ring
  };
  class Session;
  class HttpConnection;

  uint64_t proposed_epoch() const {
    return options_.epoch != 0 ? options_.epoch : static_cast<uint64_t>(wall_now_ns() / 1'000'000);
  }
  // A shared store failed or broke the log's order: this hub cannot serve
  // what the others serve. It stops (the process exits 1; a supervisor
  // restarts it and it reloads).
  void fatal(const std::string& why) {
    if (failed_) return;
    failed_ = true;
    log_(fmt::format("hub: fatal: {}", why));
    io_.stop();
  }
  void opened(SharedRingSnapshot snapshot);
  void on_log_entry(LogEntry entry);
  // Publishes into this hub's core now (the only shard); returns the seq.
  int64_t publish_local(std::string_view channel, std::string_view payload);
  void accept();
  void on_accepted(tcp::socket socket);
  void generate(const std::shared_ptr<Generator>& g);
  void wait_closed(std::function<void()> done, Instant give_up);
  void apply(resume::HubActions& actions);
  void rearm();
  void on_core_timer();
  // The transport's events, from sessions.
  // A message from a subscriber; `is_text` false for a binary one (refused).
  void on_client_text(Session& session, std::string_view text, bool is_text);
  void on_session_gone(Session& session, bool by_peer);
  // Connections that never subscribed are not the core's: closed here.
  void close_unsubscribed(uint16_t code, const char* reason);
  // Beast failed the connection with `code` (1007, 1009): a protocol error.
  void on_failed_by_beast(Session& session, uint16_t code, const std::string& why);
  // A TLS handshake failed (a plain-HTTP client, an old TLS version, a
  // client that does not trust the certificate): counted; the first few and
  // then every 100th logged, so a scanner cannot fill the log.
  void on_tls_failure(beast::error_code ec, const std::string& peer) {
    const uint64_t n = ++counters_.tls_handshake_failures;
    if (n <= 5 || n % 100 == 0) {
      log_(fmt::format("hub: TLS handshake with {} failed ({} so far): {}", peer, n, ec.message()));
    }
  }
  Frame data_frame(const std::string& channel, int64_t seq) const;
  // One subscriber's frame of a publish being fanned out was written
  // (`written`) or will never be (its subscriber closed or went away).
  void fanout_done(const std::string* frame, Instant now, bool written);

  Fleet& fleet_;  // outlives its shards' handlers (it joins their threads)
  const std::size_t index_;
  asio::io_context& io_;
  HubServerOptions options_;
  std::function<void(std::string_view)> log_;
  tcp::acceptor acceptor_;   // shard 0's
  std::size_t next_shard_ = 0;  // shard 0: the shard the next connection goes to
  std::optional<resume::Hub> hub_;  // from the shared store's snapshot when there is one
  std::unique_ptr<RedisRingStore> shared_;
  bool failed_ = false;
  asio::steady_timer core_timer_;
  Instant armed_ = Instant::max();
  asio::steady_timer shutdown_timer_;
  bool shutting_down_ = false;
  bool quiet_closes_ = false;  // a mass close logs one line, not one per subscriber
  std::unordered_map<resume::SubscriberId, std::shared_ptr<Session>> sessions_;
  // Ids unique in the process: shard k of N numbers k+1, k+1+N, ...
  resume::SubscriberId next_id_;
  std::unordered_map<std::string, StoredChannel> store_;
  std::vector<std::shared_ptr<Generator>> generators_;
  HubServerCounters counters_;
  // Fan-out timing: per published message whose frames this shard is still
  // writing (keyed by its encoded frame), how many subscribers' writes are
  // pending; publishing_ while a publish's actions are applied. Entries end
  // with their last write or subscriber, and report to the fleet.
  struct FanOut {
    std::shared_ptr<FanOutAcross> across;
    uint32_t pending = 0;
    uint32_t written = 0;
    Instant last_written;
  };
  std::unordered_map<const std::string*, FanOut> fanouts_;
  const std::string* publishing_ = nullptr;
  uint32_t publishing_pending_ = 0;
  // Sequenced messages not yet delivered (enqueue, drain_inbox).
  std::mutex inbox_mutex_;
  std::vector<Delivery> inbox_;      // under inbox_mutex_
  bool drain_posted_ = false;        // under inbox_mutex_
};

template <typename T>
void HubServer::Fleet::each_shard(asio::io_context& reply_on, std::function<T(Impl&)> f,
                                  std::function<void(std::vector<T>)> done) {
  if (size() == 1) return done(std::vector<T>{f(shard(0))});
  struct Gather {
    std::mutex mutex;
    std::vector<T> answers;
    std::size_t left = 0;
  };
  auto gather = std::make_shared<Gather>();
  gather->answers.resize(size());
  gather->left = size();
  auto shared_done = std::make_shared<std::function<void(std::vector<T>)>>(std::move(done));
  for (std::size_t k = 0; k < size(); ++k) {
    asio::post(io(k), [this, k, f, gather, shared_done, &reply_on] {
      T answer = f(shard(k));
      std::lock_guard lock(gather->mutex);
      gather->answers[k] = std::move(answer);
      if (--gather->left > 0) return;
      asio::post(reply_on, [gather, shared_done] { (*shared_done)(std::move(gather->answers)); });
    });
  }
}

template <typename T>
std::vector<T> HubServer::Fleet::each_shard_wait(std::function<T(Impl&)> f) const {
  std::vector<T> answers;
  answers.push_back(f(shard(0)));
  for (std::size_t k = 1; k < size(); ++k) {
    if (threads_stopped_ || threads_.size() < k) {
      answers.push_back(f(shard(k)));  // its thread is not running
      continue;
    }
    std::promise<T> promise;
    asio::post(io(k), [this, k, &f, &promise] { promise.set_value(f(shard(k))); });
    answers.push_back(promise.get_future().get());
  }
  return answers;
}

}  // namespace leaseproof::runtime
