// The hub process: core/resume's Hub carried out on Beast WebSockets
// (hub_server.hpp). A shard (Impl) is single-threaded: every handler of its
// runs on its io_context's one thread, so its core and its state need no
// locks. What the shards share is the Fleet's, each piece under its own lock.
#include "runtime/hub/hub_server.hpp"

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/url/parse.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/assert.hpp"
#include "runtime/clock.hpp"
#include "runtime/prometheus.hpp"
#include "runtime/hub/redis_ring.hpp"
#include "runtime/hub/resume_wire.hpp"
#include "runtime/hub/ws_stream.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

// A message encoded once as the Data frame every subscriber gets.
using Frame = std::shared_ptr<const std::string>;

std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

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
std::string check_publish(std::string_view channel, std::string_view payload) {
  if (std::string e = check_channel_name(channel); !e.empty()) return "channel: " + e;
  if (payload.size() > kPayloadBytesMax) {
    return fmt::format("payload: {} bytes, at most {} allowed", payload.size(), kPayloadBytesMax);
  }
  try {
    (void)nlohmann::json(payload).dump();
  } catch (const nlohmann::json::exception&) {
    return "payload: not valid UTF-8 (the wire format carries it as a JSON string)";
  }
  return {};
}

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

void add_counters(HubServerCounters& total, const HubServerCounters& c) {
  total.accepted += c.accepted;
  total.refused += c.refused;
  total.subscribes += c.subscribes;
  total.published = std::max(total.published, c.published);  // every shard publishes every message
  total.data_frames_written += c.data_frames_written;
  total.ring_evictions = std::max(total.ring_evictions, c.ring_evictions);  // every shard's ring is the same
  total.disconnects += c.disconnects;
  total.protocol_errors += c.protocol_errors;
  total.subscribe_timeouts += c.subscribe_timeouts;
  total.tls_handshake_failures += c.tls_handshake_failures;
  total.pong_credit_clamped += c.pong_credit_clamped;
  total.outbox_overflows += c.outbox_overflows;
  total.http_requests += c.http_requests;
  for (const auto& [code, n] : c.closes_by_code) total.closes_by_code[code] += n;
  for (const auto& [kind, n] : c.resets_by_kind) total.resets_by_kind[kind] += n;
  for (const auto& [name, n] : c.marks) total.marks[name] += n;
}

}  // namespace

std::variant<HubGenerator, std::string> parse_generator(std::string_view text) {
  const auto first = text.find(':');
  const auto second = first == std::string_view::npos ? first : text.find(':', first + 1);
  if (second == std::string_view::npos || text.find(':', second + 1) != std::string_view::npos) {
    return fmt::format("'{}': expected CHANNEL:RATE:SIZE, e.g. live:100:256", text);
  }
  HubGenerator g;
  g.channel = std::string{text.substr(0, first)};
  if (std::string e = check_channel_name(g.channel); !e.empty()) return fmt::format("'{}': channel {}", text, e);
  const auto rate = parse_number(text.substr(first + 1, second - first - 1));
  if (!rate || !(*rate > 0) || *rate > 1e6) {
    return fmt::format("'{}': RATE must be a number of messages per second in (0, 1000000]", text);
  }
  g.rate = *rate;
  const auto size = parse_number(text.substr(second + 1));
  if (!size || *size < 0 || *size > static_cast<double>(kPayloadBytesMax) || *size != static_cast<uint32_t>(*size)) {
    return fmt::format("'{}': SIZE must be a whole number of bytes in 0..{}", text, kPayloadBytesMax);
  }
  g.bytes = static_cast<uint32_t>(*size);
  return g;
}

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

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
};

// One subscriber's WebSocket: a read loop, and a writer draining its outbox
// one frame at a time.
//
// Why the outbox stays bounded: the core counts a Data frame as queued from
// the moment it hands it here, and frees it when a pong reports it consumed.
// A pong is credited at most the Data bytes this session has written to the
// socket and not yet credited (take_credit), so what waits in the outbox is
// never more than the core's queue, which is bounded (1013 past it). A peer
// that stops reading and claims it consumed everything still fills the
// core's queue. The hard bound is checked anyway: Data in the outbox above
// the core's bound, or more control frames than a live peer could leave
// unread, closes with 1013 ("outbox full").
class HubServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  // Pings go out every ping interval until the pong timeout; a Reset once.
  static constexpr std::size_t kControlFramesMax = 64;

  // Stream: TcpStream, or TlsStream with its handshake done.
  template <typename Stream>
  Session(std::weak_ptr<Impl> server, asio::io_context& io, resume::SubscriberId id, Stream stream, Slot* slot,
          uint64_t data_bytes_max)
      : server_(std::move(server)),
        id_(id),
        ws_(io, std::move(stream)),
        close_timer_(io),
        subscribe_timer_(io),
        slot_(slot),
        data_bytes_max_(data_bytes_max) {}

  resume::SubscriberId id() const { return id_; }
  const std::string& channel() const { return channel_; }
  bool subscribed() const { return subscribed_; }
  void set_subscribed(std::string channel) {
    subscribed_ = true;
    channel_ = std::move(channel);
    subscribe_timer_.cancel();
  }
  bool closing() const { return closing_; }
  bool in_core() const { return subscribed_ && !core_closed_; }
  void mark_core_closed() { core_closed_ = true; }
  std::size_t outbox_bytes() const { return outbox_bytes_; }
  // Of `claimed` consumed bytes, what the peer can have read: at most the
  // Data written to the socket and not yet credited.
  uint64_t take_credit(uint64_t claimed) {
    const uint64_t granted = std::min(claimed, data_written_ - data_credited_);
    data_credited_ += granted;
    return granted;
  }
  // A frame from the subscriber reached the core (subscribe or pong).
  void note_frame_in(Instant at) {
    if (frames_in_ == 0) first_in_ = at;
    last_in_ = at;
    ++frames_in_;
  }
  // One JSON line for the hub's session records.
  std::string record(Instant ended) const {
    auto ms = [](Instant at) { return static_cast<double>(at.ns()) / 1e6; };
    nlohmann::json line{{"session", id_},       {"channel", channel_},   {"worker", worker_},
                        {"lease_epoch", lease_epoch_}, {"opened_ms", ms(opened_)}, {"frames_in", frames_in_},
                        {"data_out", data_out_}, {"ended_ms", ms(ended)}};
    if (frames_in_ > 0) {
      line["first_in_ms"] = ms(first_in_);
      line["last_in_ms"] = ms(last_in_);
    }
    if (data_out_ > 0) {
      line["first_data_ms"] = ms(first_data_);
      line["last_data_ms"] = ms(last_data_);
    }
    line["closed_by"] = closing_ ? "hub" : "peer";
    if (closing_) line["close_code"] = close_code_;
    return line.dump();
  }

  void accept(http::request<http::string_body> request, std::size_t frame_max, Duration close_timeout,
              Duration subscribe_timeout) {
    opened_ = monotonic_now();
    const std::string_view target{request.target().data(), request.target().size()};
    if (const auto url = boost::urls::parse_origin_form(target)) {
      for (const auto& param : url->params()) {
        if (param.key == "worker") worker_ = param.value.substr(0, 128);
        if (param.key == "lease_epoch") {
          int64_t epoch = 0;
          const auto [end, ec] = std::from_chars(param.value.data(), param.value.data() + param.value.size(), epoch);
          if (ec == std::errc{} && end == param.value.data() + param.value.size()) lease_epoch_ = epoch;
        }
      }
    }
    websocket::stream_base::timeout timeout{};
    timeout.handshake_timeout = to_chrono(close_timeout);  // also bounds the close handshake
    timeout.idle_timeout = websocket::stream_base::none();  // the core's pings decide liveness
    timeout.keep_alive_pings = false;
    close_timeout_ = close_timeout;
    ws_.visit([&](auto& ws) {
      ws.set_option(timeout);
      ws.read_message_max(frame_max);
      ws.text(true);
      ws.async_accept(request, [self = shared_from_this(), subscribe_timeout](beast::error_code ec) {
        self->accepted(ec, subscribe_timeout);
      });
    });
  }

  // The upgrade's answer went out (or failed): read, and wait for the subscribe.
  void accepted(beast::error_code ec, Duration subscribe_timeout) {
    handshake_done_ = true;
    if (ec) return gone(true);
    // Closed while the handshake was finishing (a shutdown posted from
    // another thread can run before the accept's completion): the close
    // frame goes out now that the stream is a server's (before, Beast would
    // frame it as a client's, masked).
    if (closing_) return send_close();
    read();
    if (subscribed_) return;
    subscribe_timer_.expires_after(to_chrono(subscribe_timeout));
    subscribe_timer_.async_wait([self = shared_from_this(), subscribe_timeout](beast::error_code waited) {
      if (waited || self->subscribed_ || self->closing_) return;
      if (auto server = self->server_.lock()) {
        ++server->counters_.subscribe_timeouts;
        ++server->counters_.closes_by_code[resume::close_code::policy_violation];
        server->log_(fmt::format("hub: closing connection {} with 1008: no subscribe within {}", self->id_,
                                 subscribe_timeout));
      }
      self->close(resume::close_code::policy_violation, fmt::format("no subscribe within {}", subscribe_timeout));
    });
  }

  // Queues a frame for the socket. `credit` is a Data frame's share of the
  // core's queue (resume::frame_bytes), 0 for control frames. False when the
  // outbox is past its hard bound: nothing was queued and the caller closes.
  // `fanout`: this Data frame goes out as part of its message's publish (the
  // fan-out histogram times its write), not a replay.
  [[nodiscard]] bool send(Frame frame, uint32_t credit, bool is_data, bool fanout = false) {
    if (closing_) return true;
    if (is_data ? outbox_data_ + credit > data_bytes_max_ : outbox_control_ + 1 > kControlFramesMax) return false;
    if (is_data) {
      outbox_data_ += credit;
    } else {
      ++outbox_control_;
    }
    outbox_bytes_ += frame->size();
    outbox_.push_back({std::move(frame), credit, is_data, fanout});
    write();
    return true;
  }

  // Closes with `code`: what is not yet written is dropped (the core has
  // forgotten this subscriber already). A write in flight finishes first, or
  // the socket is closed without a close frame after close_timeout.
  void close(uint16_t code, std::string reason) {
    if (closing_) return;
    closing_ = true;
    close_code_ = code;
    close_reason_ = std::move(reason);
    abandon_fanouts();
    outbox_.clear();
    outbox_bytes_ = outbox_data_ = outbox_control_ = 0;
    subscribe_timer_.cancel();
    if (code == resume::close_code::abnormal) {
      // 1006 is what a peer sees when no close frame comes (RFC 6455 7.4.1
      // forbids sending it): a dead peer's connection is dropped. The read in
      // flight fails and ends the session.
      ws_.close_socket();
      return;
    }
    close_timer_.expires_after(to_chrono(close_timeout_));
    close_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->ws_.close_socket();  // the handlers in flight fail and end the session
    });
    if (!writing_ && handshake_done_) send_close();  // else accepted() sends it
  }

 private:
  void read() {
    ws_.visit([this](auto& ws) {
      ws.async_read(in_, [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
    });
  }

  // Called from the read's handler, which holds this session alive.
  void on_read(beast::error_code ec) {
    if (ec) {
      // Beast has failed the connection itself with a close frame: 1009
      // for a message over read_message_max, 1007 for a text message that
      // is not UTF-8. Both are the peer's protocol errors.
      const uint16_t code = ec == websocket::error::message_too_big     ? resume::close_code::message_too_big
                            : ec == websocket::error::bad_frame_payload ? resume::close_code::invalid_payload
                                                                        : 0;
      if (code != 0 && !closing_) {
        if (auto server = server_.lock()) server->on_failed_by_beast(*this, code, ec.message());
        return gone(false);
      }
      return gone(!closing_);
    }
    if (!closing_) {
      auto server = server_.lock();
      if (!server) return;
      const auto data = in_.cdata();
      const bool is_text = ws_.visit([](auto& ws) { return ws.got_text(); });
      server->on_client_text(*this, std::string_view{static_cast<const char*>(data.data()), data.size()}, is_text);
    }
    in_.consume(in_.size());
    read();
  }

  void write() {
    if (writing_ || outbox_.empty() || closing_) return;
    writing_ = true;
    ws_.visit([this](auto& ws) {
      ws.async_write(asio::buffer(*outbox_.front().frame),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_written(ec); });
    });
  }

  // Called from the write's handler, which holds this session alive.
  void on_written(beast::error_code ec) {
    writing_ = false;
    if (ec) return gone(!closing_);
    if (closing_) return send_close();
    const Outgoing& written = outbox_.front();
    if (written.is_data) {
      const Instant now = monotonic_now();
      if (auto server = server_.lock()) {
        ++server->counters_.data_frames_written;
        if (written.fanout) server->fanout_done(written.frame.get(), now, true);
      }
      if (data_out_++ == 0) first_data_ = now;
      last_data_ = now;
      data_written_ += written.credit;
      outbox_data_ -= written.credit;
    } else {
      --outbox_control_;
    }
    outbox_bytes_ -= written.frame->size();
    outbox_.pop_front();
    write();
  }

  void send_close() {
    if (close_sent_) return;
    close_sent_ = true;
    websocket::close_reason reason{close_code_};
    reason.reason = close_reason_.substr(0, 120);
    ws_.visit([&](auto& ws) {
      ws.async_close(reason, [self = shared_from_this()](beast::error_code) { self->gone(false); });
    });
  }

  // The connection is over (an error, the peer's close, or ours finished).
  void gone(bool by_peer) {
    if (gone_) return;
    gone_ = true;
    close_timer_.cancel();
    subscribe_timer_.cancel();
    ws_.close_socket();
    abandon_fanouts();
    if (auto server = server_.lock()) server->on_session_gone(*this, by_peer);
  }

  // Frames of publishes still being fanned out that this subscriber will
  // never write: its fan-out ends without it.
  void abandon_fanouts() {
    auto server = server_.lock();
    if (!server) return;
    for (Outgoing& outgoing : outbox_) {
      if (outgoing.fanout) server->fanout_done(outgoing.frame.get(), Instant{}, false);
      outgoing.fanout = false;
    }
  }

  struct Outgoing {
    Frame frame;
    uint32_t credit = 0;  // a Data frame's share of the core's queue
    bool is_data = false;
    bool fanout = false;  // timed by the fan-out histogram (see send)
  };
  std::weak_ptr<Impl> server_;
  resume::SubscriberId id_;
  HubWebSocket ws_;
  beast::flat_buffer in_;
  asio::steady_timer close_timer_;
  asio::steady_timer subscribe_timer_;
  std::unique_ptr<Slot> slot_;
  uint64_t data_bytes_max_;  // the core's queue bound
  Duration close_timeout_ = Duration::from_s(2);
  std::string channel_;
  std::deque<Outgoing> outbox_;
  std::size_t outbox_bytes_ = 0;  // encoded, for /metrics
  uint64_t outbox_data_ = 0;      // credit of the Data frames in the outbox
  std::size_t outbox_control_ = 0;
  uint64_t data_written_ = 0;     // credit of the Data frames written to the socket
  uint64_t data_credited_ = 0;    // of that, what pongs have credited to the core
  bool subscribed_ = false;
  bool core_closed_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool close_sent_ = false;
  bool handshake_done_ = false;  // the upgrade's answer is out (accepted() ran)
  bool gone_ = false;
  uint16_t close_code_ = resume::close_code::normal;
  std::string close_reason_;
  // For the session record.
  std::string worker_;       // ?worker= of the upgrade request
  int64_t lease_epoch_ = 0;  // ?lease_epoch=
  Instant opened_, first_in_, last_in_, first_data_, last_data_;
  uint64_t frames_in_ = 0;
  uint64_t data_out_ = 0;
};

// One HTTP connection (over TLS when the hub has a certificate): reads
// requests until it sees an upgrade (then hands its stream to a Session) or
// the peer stops.
class HubServer::Impl::HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(std::weak_ptr<Impl> server, tcp::socket socket, std::unique_ptr<Slot> slot, asio::ssl::context* tls)
      : server_(std::move(server)), stream_(make_stream(std::move(socket), tls)), slot_(std::move(slot)) {}

  // TLS first when there is a certificate, bounded by `handshake_timeout`;
  // then the requests.
  void start(Duration handshake_timeout) {
    auto* tls = std::get_if<TlsStream>(&stream_);
    if (tls == nullptr) return read();
    beast::get_lowest_layer(*tls).expires_after(to_chrono(handshake_timeout));
    tls->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
      if (!ec) return self->read();
      if (auto server = self->server_.lock()) server->on_tls_failure(ec, self->peer());
    });
  }

  void read() {
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(kPayloadBytesMax);
    tcp_stream().expires_after(std::chrono::seconds(30));
    std::visit([this](auto& stream) {
      http::async_read(stream, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec) {
          if (ec == http::error::body_limit || ec == http::error::header_limit) {
            return self->reply(http::status::payload_too_large,
                               fmt::format(R"({{"error":"request larger than {} bytes"}})", kPayloadBytesMax), false);
          }
          return;  // the peer went away or sent garbage: drop the connection
        }
        self->on_request();
      });
    }, stream_);
  }

 private:
  using Stream = std::variant<TcpStream, TlsStream>;
  static Stream make_stream(tcp::socket socket, asio::ssl::context* tls) {
    if (tls == nullptr) return Stream{std::in_place_type<TcpStream>, std::move(socket)};
    return Stream{std::in_place_type<TlsStream>, std::move(socket), *tls};
  }
  TcpStream& tcp_stream() {
    return std::visit([](auto& stream) -> TcpStream& { return beast::get_lowest_layer(stream); }, stream_);
  }
  std::string peer() {
    beast::error_code ec;
    const tcp::endpoint endpoint = tcp_stream().socket().remote_endpoint(ec);
    return ec ? std::string{"a peer"} : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
  }

  void on_request() {
    auto server = server_.lock();
    if (!server) return;
    ++server->counters_.http_requests;
    http::request<http::string_body> request = parser_->release();
    if (websocket::is_upgrade(request)) {
      if (server->shutting_down_) return;
      const resume::SubscriberId id = server->next_id_;
      server->next_id_ += server->fleet_.size();
      auto session = std::visit(
          [&](auto& stream) {
            return std::make_shared<Session>(server_, server->io_, id, std::move(stream), slot_.release(),
                                             server->options_.hub.subscriber_queue_bytes_max);
          },
          stream_);
      server->sessions_.emplace(id, session);
      session->accept(std::move(request), server->options_.client_frame_bytes_max, server->options_.close_timeout,
                      server->options_.subscribe_timeout);
      return;
    }
    const bool keep_alive = request.keep_alive();
    const std::string_view target{request.target().data(), request.target().size()};
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/metrics" && request.method() == http::verb::get) {
      Fleet& fleet = server->fleet_;
      fleet.each_shard<ShardStats>(
          server->io_, [](Impl& shard) { return shard.stats(); },
          [self = shared_from_this(), &fleet, keep_alive](std::vector<ShardStats> shards) {
            self->reply(http::status::ok, fleet.metrics_text(shards), keep_alive, "text/plain; version=0.0.4");
          });
      return;
    }
    if (path == "/healthz" && request.method() == http::verb::get) {
      return reply(http::status::ok, "ok\n", keep_alive, "text/plain");
    }
    if (path == "/admin/close-all" && server->options_.admin && request.method() == http::verb::post) {
      const auto at = target.find("code=");
      const auto code = at == std::string_view::npos ? std::nullopt : parse_number(target.substr(at + 5));
      if (!code || (*code != 1001 && *code != 1012)) {
        return reply(http::status::bad_request, R"({"error":"code: expected 1001 or 1012"})", keep_alive);
      }
      server->fleet_.each_shard<std::size_t>(
          server->io_, [code = static_cast<uint16_t>(*code)](Impl& shard) { return shard.close_all(code); },
          [self = shared_from_this(), keep_alive](std::vector<std::size_t> closed) {
            std::size_t total = 0;
            for (const std::size_t n : closed) total += n;
            self->reply(http::status::ok, fmt::format(R"({{"closed":{}}})", total), keep_alive);
          });
      return;
    }
    if (path == "/publish") {
      if (request.method() != http::verb::post) {
        return reply(http::status::method_not_allowed, R"({"error":"POST /publish?channel=C"})", keep_alive);
      }
      return publish(*server, target, request.body(), keep_alive);
    }
    reply(http::status::not_found, R"({"error":"not found; try /metrics, /healthz, POST /publish?channel=C"})",
          keep_alive);
  }

  void publish(Impl& server, std::string_view target, const std::string& body, bool keep_alive) {
    auto bad = [&](std::string why) {
      reply(http::status::bad_request, nlohmann::json{{"error", std::move(why)}}.dump(), keep_alive);
    };
    const auto url = boost::urls::parse_origin_form(target);
    if (!url) return bad("the request target is not a valid URL path and query");
    std::optional<std::string> channel;
    std::optional<uint64_t> count, size;
    for (const auto& param : url->params()) {
      auto whole = [&](uint64_t max) -> std::optional<uint64_t> {
        const auto number = parse_number(param.value);
        if (!number || *number < 0 || *number > static_cast<double>(max) || *number != static_cast<uint64_t>(*number)) {
          return std::nullopt;
        }
        return static_cast<uint64_t>(*number);
      };
      if (param.key == "channel") {
        channel = param.value;
      } else if (param.key == "count") {
        if (!(count = whole(100'000)) || *count == 0) return bad("count: expected a whole number in 1..100000");
      } else if (param.key == "size") {
        if (!(size = whole(kPayloadBytesMax))) return bad(fmt::format("size: expected a whole number in 0..{}", kPayloadBytesMax));
      } else {
        return bad(fmt::format("{}: unknown parameter; allowed: channel, count, size", std::string{param.key}));
      }
    }
    if (!channel) return bad("channel: missing (POST /publish?channel=C)");
    if (count.has_value() != size.has_value()) return bad("count and size go together (synthetic messages)");
    if (count && !body.empty()) return bad("a synthetic publish (count, size) takes no body");
    if (server.shutting_down_) return reply(http::status::service_unavailable, R"({"error":"shutting down"})", false);
    if (!server.hub_) return reply(http::status::service_unavailable, R"({"error":"not serving yet"})", false);
    // Reply once the last message has its number (at once without a shared
    // store; after the store's answers with one, which come in order).
    struct Progress {
      uint64_t left = 0;
      int64_t first = 0, last = 0;
    };
    auto progress = std::make_shared<Progress>(Progress{count.value_or(1)});
    const uint64_t epoch = server.hub_->epoch();
    auto on_seq = [self = shared_from_this(), progress, channel = *channel, epoch, keep_alive](int64_t seq) {
      if (progress->first == 0) progress->first = seq;
      progress->last = seq;
      if (--progress->left > 0) return;
      self->reply(http::status::ok,
                  nlohmann::json{{"channel", channel}, {"epoch", epoch}, {"first_seq", progress->first},
                                 {"last_seq", progress->last}}
                      .dump(),
                  keep_alive);
    };
    std::string error;
    const uint64_t n = progress->left;
    for (uint64_t i = 0; i < n; ++i) {
      const std::string payload = count ? synthetic_payload(static_cast<uint32_t>(*size), wall_now_ns()) : body;
      if (!server.fleet_.publish(*channel, payload, &error, on_seq)) return bad(error);  // the first one: nothing went out
    }
  }

  void reply(http::status status, std::string body, bool keep_alive,
             const char* content_type = "application/json") {
    auto response = std::make_shared<http::response<http::string_body>>(status, 11);
    response->set(http::field::content_type, content_type);
    response->set(http::field::server, "leaseproof-hub");
    response->keep_alive(keep_alive);
    response->body() = std::move(body);
    response->prepare_payload();
    std::visit([&](auto& stream) {
      http::async_write(stream, *response, [self = shared_from_this(), response](beast::error_code ec, std::size_t) {
        if (ec || !response->keep_alive()) return self->finish();
        self->read();
      });
    }, stream_);
  }

  // The last answer is out: TLS says goodbye (close_notify, bounded by the
  // read's 30 s expiry), then the sending side of the socket closes.
  void finish() {
    auto shut = [self = shared_from_this()] {
      beast::error_code ignored;
      self->tcp_stream().socket().shutdown(tcp::socket::shutdown_send, ignored);
    };
    if (auto* tls = std::get_if<TlsStream>(&stream_)) {
      return tls->async_shutdown([shut](beast::error_code) { shut(); });
    }
    shut();
  }

  std::weak_ptr<Impl> server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<Slot> slot_;
};

// Shard 0's: each connection goes to the shards in turn, its socket made on
// that shard's io_context and handed over through its queue.
void HubServer::Impl::accept() {
  const std::size_t k = next_shard_++ % fleet_.size();
  acceptor_.async_accept(fleet_.io(k), [self = shared_from_this(), k](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
    if (!ec) {
      if (k == 0) {
        self->on_accepted(std::move(socket));
      } else {
        asio::post(self->fleet_.io(k), [shard = self->fleet_.shard_ptr(k), socket = std::move(socket)]() mutable {
          shard->on_accepted(std::move(socket));
        });
      }
    }
    self->accept();
  });
}

void HubServer::Impl::on_accepted(tcp::socket socket) {
  ++counters_.accepted;
  if (*fleet_.open() >= options_.connections_max || shutting_down_) {
    ++counters_.refused;
    return;  // the socket closes as it goes out of scope
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto connection = std::make_shared<HttpConnection>(weak_from_this(), std::move(socket), std::make_unique<Slot>(fleet_.open()),
                                                     options_.tls.get());
  connection->start(options_.subscribe_timeout);
}

void HubServer::Impl::generate(const std::shared_ptr<Generator>& g) {
  if (shutting_down_) return;
  const Instant now = monotonic_now();
  const double elapsed_s = static_cast<double>((now - g->started).ns()) / 1e9;
  const auto due = static_cast<uint64_t>(elapsed_s * g->config.rate) + 1;  // the first goes at once
  // At most a second's worth per tick: a hub that fell behind catches up
  // without blocking its subscribers for long.
  const uint64_t burst = std::min<uint64_t>(due - std::min(due, g->sent), std::max<uint64_t>(1, static_cast<uint64_t>(g->config.rate)));
  for (uint64_t i = 0; i < burst; ++i) {
    fleet_.publish(g->config.channel, synthetic_payload(g->config.bytes, wall_now_ns()), nullptr);
    ++g->sent;
  }
  const auto interval = std::chrono::nanoseconds(std::max<int64_t>(1'000'000, static_cast<int64_t>(1e9 / g->config.rate)));
  g->timer.expires_after(interval);
  g->timer.async_wait([weak = weak_from_this(), g](beast::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->generate(g);
  });
}

void HubServer::Impl::wait_closed(std::function<void()> done, Instant give_up) {
  if (sessions_.empty() || monotonic_now() >= give_up) {
    if (!sessions_.empty()) log_(fmt::format("hub: {} connections still open at the shutdown deadline", sessions_.size()));
    return done();
  }
  shutdown_timer_.expires_after(std::chrono::milliseconds(20));
  shutdown_timer_.async_wait([weak = weak_from_this(), done = std::move(done), give_up](beast::error_code ec) mutable {
    if (ec) return;
    if (auto self = weak.lock()) self->wait_closed(std::move(done), give_up);
  });
}

bool HubServer::Impl::publish(std::string_view channel, std::string_view payload, std::string* error,
                              std::function<void(int64_t)> done) {
  if (std::string why = check_publish(channel, payload); !why.empty()) {
    if (error) *error = std::move(why);
    return false;
  }
  if (shared_) {
    // Into the shared log; this hub's core gets it back, in log order, like every other hub's.
    shared_->publish(channel, payload, [done = std::move(done)](int64_t seq) {
      if (done) done(seq);
    });
    return true;
  }
  const int64_t seq = publish_local(channel, payload);
  if (done) done(seq);
  return true;
}

int64_t HubServer::Impl::publish_local(std::string_view channel, std::string_view payload) {
  const Instant accepted = monotonic_now();
  const resume::Message next{hub_->epoch(), hub_->top(channel) + 1, static_cast<uint32_t>(payload.size())};
  deliver(std::string{channel}, next.seq, next.bytes,
          std::make_shared<const std::string>(encode_data(channel, next, payload)), fleet_.begin_fanout(accepted, 1));
  return next.seq;
}

void HubServer::Impl::deliver(const std::string& channel, int64_t seq, uint32_t bytes, Frame frame,
                              std::shared_ptr<FanOutAcross> across) {
  StoredChannel& stored = store_[channel];
  if (stored.frames.empty()) stored.first_seq = seq;
  stored.frames.push_back(std::move(frame));
  resume::HubActions actions;
  const resume::Message published = hub_->publish(channel, bytes, monotonic_now(), actions);
  // Every shard's core sees the same publishes in the same order.
  LP_ASSERT_EQ(published.seq, seq);
  ++counters_.published;
  // The frames this publish queues are timed until the last is written.
  publishing_ = stored.frames.back().get();
  publishing_pending_ = 0;
  const auto& rings = hub_->rings().channels;
  const auto ring = rings.find(channel);
  const int64_t oldest = ring == rings.end() || ring->second.messages.empty() ? seq + 1
                                                                              : ring->second.messages.front().seq;
  while (!stored.frames.empty() && stored.first_seq < oldest) {
    stored.frames.pop_front();
    ++stored.first_seq;
    ++counters_.ring_evictions;
  }
  apply(actions);
  if (publishing_pending_ > 0) {
    fanouts_.insert_or_assign(publishing_, FanOut{std::move(across), publishing_pending_, 0, Instant{}});
  } else {
    fleet_.fanout_shard_done(*across, 0, Instant{});
  }
  publishing_ = nullptr;
  rearm();
}

void HubServer::Impl::fanout_done(const std::string* frame, Instant now, bool written) {
  const auto it = fanouts_.find(frame);
  if (it == fanouts_.end()) return;
  FanOut& fanout = it->second;
  if (written) {
    ++fanout.written;
    fanout.last_written = now;
  }
  if (--fanout.pending > 0) return;
  // Every subscriber's frame on this shard is written (or its subscriber
  // went away): this shard's share of the fan-out has ended.
  fleet_.fanout_shard_done(*fanout.across, fanout.written, fanout.last_written);
  fanouts_.erase(it);
}

void HubServer::Impl::opened(SharedRingSnapshot snapshot) {
  std::map<std::pair<std::string, int64_t>, const std::string*> payloads;
  for (const LogEntry& entry : snapshot.log) payloads[{entry.channel, entry.seq}] = &entry.payload;
  hub_.emplace(options_.hub, rings_from_snapshot(snapshot));
  size_t kept = 0;
  for (const auto& [name, ring] : hub_->rings().channels) {
    StoredChannel& stored = store_[name];
    stored.first_seq = ring.messages.empty() ? ring.top + 1 : ring.messages.front().seq;
    for (const resume::Message& message : ring.messages) {
      const auto it = payloads.find({name, message.seq});
      LP_ASSERT(it != payloads.end());  // rings_from_snapshot took them from the log
      stored.frames.push_back(std::make_shared<const std::string>(encode_data(name, message, *it->second)));
      ++kept;
    }
  }
  log_(fmt::format("hub: shared store {}:{} ({}:*) opened: epoch {}, {} channels, {} messages kept of {} in the log",
                   options_.shared.host, options_.shared.port, options_.shared.prefix, hub_->epoch(),
                   hub_->rings().channels.size(), kept, snapshot.log.size()));
  serve();
  shared_->follow([weak = weak_from_this()](LogEntry entry) {
    if (auto self = weak.lock()) self->on_log_entry(std::move(entry));
  });
}

void HubServer::Impl::on_log_entry(LogEntry entry) {
  if (failed_) return;
  if (!check_publish(entry.channel, entry.payload).empty()) {
    return fatal(fmt::format("the shared log holds an entry no hub publishes (channel '{}')", entry.channel));
  }
  const int64_t top = hub_->top(entry.channel);
  if (entry.seq <= top) return;  // already here (the snapshot held it)
  if (entry.seq != top + 1) {
    return fatal(fmt::format("the shared log went from seq {} to {} in channel {}: entries were trimmed before this "
                             "hub read them",
                             top, entry.seq, entry.channel));
  }
  publish_local(entry.channel, entry.payload);
}

Frame HubServer::Impl::data_frame(const std::string& channel, int64_t seq) const {
  const auto it = store_.find(channel);
  if (it == store_.end() || seq < it->second.first_seq) return nullptr;
  const auto index = static_cast<std::size_t>(seq - it->second.first_seq);
  return index < it->second.frames.size() ? it->second.frames[index] : nullptr;
}

void HubServer::Impl::apply(resume::HubActions& actions) {
  for (resume::HubAction& action : actions) {
    if (auto* send = std::get_if<resume::HubSend>(&action)) {
      const auto it = sessions_.find(send->subscriber);
      LP_ASSERT_MSG(it != sessions_.end(), "the core sent to subscriber {} that the transport does not have",
                    send->subscriber);
      Session& session = *it->second;
      if (!session.in_core()) continue;  // its outbox overflowed earlier in this batch
      bool queued = true;
      if (const auto* data = std::get_if<resume::Data>(&send->frame)) {
        Frame frame = data_frame(session.channel(), data->message.seq);
        // The store mirrors the ring the core replays from: a miss is a bug here.
        LP_ASSERT_MSG(frame != nullptr, "no stored frame for {} seq {}", session.channel(), data->message.seq);
        const bool fanout = frame.get() == publishing_;
        queued = session.send(std::move(frame), resume::frame_bytes(send->frame), true, fanout);
        if (queued && fanout) ++publishing_pending_;
      } else if (const auto* reset = std::get_if<resume::Reset>(&send->frame)) {
        ++counters_.resets_by_kind[std::string{resume::to_string(reset->kind)}];
        queued = session.send(std::make_shared<const std::string>(encode_reset(*reset)), 0, false);
      } else {
        queued = session.send(std::make_shared<const std::string>(encode_ping(std::get<resume::Ping>(send->frame))), 0,
                              false);
      }
      if (!queued) {
        ++counters_.outbox_overflows;
        ++counters_.closes_by_code[resume::close_code::try_again_later];
        log_(fmt::format("hub: closing subscriber {} of channel {} with 1013: outbox past its hard bound",
                         session.id(), session.channel()));
        hub_->on_disconnect(session.id(), monotonic_now());
        session.mark_core_closed();
        session.close(resume::close_code::try_again_later, "outbox full");
      }
    } else if (auto* close = std::get_if<resume::HubClose>(&action)) {
      const auto it = sessions_.find(close->subscriber);
      LP_ASSERT(it != sessions_.end());
      if (!it->second->in_core()) continue;  // its outbox overflowed earlier in this batch
      ++counters_.closes_by_code[close->code];
      if (close->code == resume::close_code::protocol_error) ++counters_.protocol_errors;
      if (!shutting_down_ && !quiet_closes_) {
        log_(fmt::format("hub: closing subscriber {} of channel {} with {} ({})", close->subscriber,
                         it->second->channel(), close->code, close->reason));
      }
      it->second->mark_core_closed();
      it->second->close(close->code, close->reason);
    } else {
      ++counters_.marks[std::get<resume::HubMark>(action).name];
    }
  }
  actions.clear();
}

void HubServer::Impl::rearm() {
  const Instant due = hub_->next_deadline();
  if (due == armed_) return;
  armed_ = due;
  if (due == Instant::max()) {
    core_timer_.cancel();
    return;
  }
  core_timer_.expires_at(to_steady(due));
  core_timer_.async_wait([weak = weak_from_this(), due](beast::error_code ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self || self->armed_ != due) return;
    self->armed_ = Instant::max();
    self->on_core_timer();
  });
}

void HubServer::Impl::on_core_timer() {
  resume::HubActions actions;
  hub_->on_timer(monotonic_now(), actions);
  apply(actions);
  rearm();
}

void HubServer::Impl::on_client_text(Session& session, std::string_view text, bool is_text) {
  resume::HubActions actions;
  const Instant now = monotonic_now();
  auto protocol_error = [&](std::string why, uint16_t code = resume::close_code::protocol_error) {
    ++counters_.protocol_errors;
    log_(fmt::format("hub: subscriber {}: protocol error: {}", session.id(), why));
    if (session.in_core()) {
      hub_->on_disconnect(session.id(), now);
      rearm();
    }
    session.mark_core_closed();
    ++counters_.closes_by_code[code];
    session.close(code, why);
  };
  // 1003: "received a type of data it cannot accept" (RFC 6455 7.4.1).
  if (!is_text) return protocol_error("a binary frame; the protocol is JSON text frames", 1003);
  auto decoded = decode_client_frame(text);
  if (const auto* error = std::get_if<WireError>(&decoded)) return protocol_error(error->message);
  auto& frame = std::get<WireClientFrame>(decoded);
  session.note_frame_in(now);
  if (auto* subscribe = std::get_if<resume::Subscribe>(&frame)) {
    if (session.subscribed()) return protocol_error("a second subscribe on one connection");
    ++counters_.subscribes;
    session.set_subscribed(subscribe->channel);
    hub_->subscribe(session.id(), *subscribe, now, actions);
  } else {
    if (!session.in_core()) return protocol_error("a pong before subscribe");
    resume::Pong pong = std::get<resume::Pong>(frame);
    const uint64_t claimed = pong.consumed_bytes;
    pong.consumed_bytes = session.take_credit(claimed);
    if (pong.consumed_bytes != claimed) ++counters_.pong_credit_clamped;
    hub_->on_pong(session.id(), pong, now, actions);
  }
  apply(actions);
  rearm();
}

void HubServer::Impl::close_unsubscribed(uint16_t code, const char* reason) {
  for (auto& [id, session] : sessions_) {
    if (!session->subscribed()) session->close(code, reason);
  }
}

void HubServer::Impl::on_failed_by_beast(Session& session, uint16_t code, const std::string& why) {
  ++counters_.protocol_errors;
  ++counters_.closes_by_code[code];
  log_(fmt::format("hub: subscriber {}: protocol error: {} (closed with {})", session.id(), why, code));
}

void HubServer::Impl::on_session_gone(Session& session, bool by_peer) {
  if (session.in_core()) {
    hub_->on_disconnect(session.id(), monotonic_now());
    session.mark_core_closed();
    rearm();
  }
  if (by_peer) ++counters_.disconnects;
  if (!options_.sessions_path.empty()) fleet_.record_session(session.record(monotonic_now()));
  sessions_.erase(session.id());  // `session` may be destroyed once its handler returns
}

ShardStats HubServer::Impl::stats() const {
  ShardStats s;
  s.counters = counters_;
  s.epoch = epoch();
  if (!hub_) return s;
  s.subscribers = hub_->subscriber_count();
  for (const auto& [id, session] : sessions_) {
    s.queued += hub_->queued_bytes(id);
    s.outbox += session->outbox_bytes();
  }
  for (const auto& [name, ring] : hub_->rings().channels) {
    s.ring_bytes += ring.bytes;
    s.ring_messages += ring.messages.size();
  }
  return s;
}

std::string HubServer::Fleet::metrics_text(const std::vector<ShardStats>& shards) const {
  HubServerCounters counters;
  ShardStats t;
  for (const ShardStats& s : shards) {
    add_counters(counters, s.counters);
    t.subscribers += s.subscribers;
    t.queued += s.queued;
    t.outbox += s.outbox;
    // Every shard holds the same rings: counted once.
    t.ring_bytes = std::max(t.ring_bytes, s.ring_bytes);
    t.ring_messages = std::max(t.ring_messages, s.ring_messages);
  }
  const uint64_t queued = t.queued, outbox = t.outbox, ring_bytes = t.ring_bytes, ring_messages = t.ring_messages;
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t value) {
    append_metric(out, name, type, help, value);
  };
  metric("leaseproof_hub_epoch", "gauge", "The hub's epoch.", shards.at(0).epoch);
  metric("leaseproof_hub_connections", "gauge", "Open TCP connections (WebSocket and HTTP).", open_->load());
  metric("leaseproof_hub_subscribers", "gauge", "Subscribers the core holds.", t.subscribers);
  metric("leaseproof_hub_queue_bytes", "gauge", "Bytes sent to subscribers and not yet consumed (the core's queues).",
         queued);
  metric("leaseproof_hub_outbox_bytes", "gauge", "Encoded frames waiting for their socket.", outbox);
  metric("leaseproof_hub_ring_bytes", "gauge", "Payload bytes held in the rings.", ring_bytes);
  metric("leaseproof_hub_ring_messages", "gauge", "Messages held in the rings.", ring_messages);
  metric("leaseproof_hub_ring_evictions_total", "counter", "Messages evicted from the rings.", counters.ring_evictions);
  metric("leaseproof_hub_published_total", "counter", "Messages published.", counters.published);
  metric("leaseproof_hub_data_frames_written_total", "counter", "Data frames written to sockets.",
         counters.data_frames_written);
  metric("leaseproof_hub_subscribes_total", "counter", "Subscribe requests.", counters.subscribes);
  metric("leaseproof_hub_accepted_total", "counter", "TCP connections accepted.", counters.accepted);
  metric("leaseproof_hub_refused_total", "counter", "TCP connections refused (over the limit).", counters.refused);
  metric("leaseproof_hub_disconnects_total", "counter", "Connections the peer closed or that broke.",
         counters.disconnects);
  metric("leaseproof_hub_protocol_errors_total", "counter",
         "Frames that were not the protocol (closed with 1002, 1003, 1007 or 1009).", counters.protocol_errors);
  metric("leaseproof_hub_subscribe_timeouts_total", "counter", "Connections closed (1008) for not subscribing in time.",
         counters.subscribe_timeouts);
  metric("leaseproof_hub_tls_handshake_failures_total", "counter",
         "Connections dropped because their TLS handshake failed (with --tls-cert).", counters.tls_handshake_failures);
  metric("leaseproof_hub_pong_credit_clamped_total", "counter",
         "Pongs claiming more consumed bytes than were written to the socket (clamped).", counters.pong_credit_clamped);
  metric("leaseproof_hub_outbox_overflows_total", "counter", "Outboxes past their hard bound (closed with 1013).",
         counters.outbox_overflows);
  append_labelled_counter(out, "leaseproof_hub_closes_total", "Connections the hub closed, by close code.", "code",
                          counters.closes_by_code);
  append_labelled_counter(out, "leaseproof_hub_resets_total", "Typed resets sent, by kind.", "kind",
                          counters.resets_by_kind);
  metric("leaseproof_hub_threads", "gauge", "Shards of the hub, each on its own thread.", shards.size());
  out += "# HELP leaseproof_hub_shard_subscribers Subscribers each shard (thread) holds.\n"
         "# TYPE leaseproof_hub_shard_subscribers gauge\n";
  for (std::size_t k = 0; k < shards.size(); ++k) {
    out += fmt::format("leaseproof_hub_shard_subscribers{{shard=\"{}\"}} {}\n", k, shards[k].subscribers);
  }
  std::lock_guard lock(fanout_mutex_);
  fanout_seconds_.append(out, "leaseproof_hub_fanout_seconds",
                         "From a publish accepted to the completion of its Data frame's write (the kernel has it) for the "
                         "last of the subscribers it was sent to, over every thread (a subscriber that went away first "
                         "is not waited for).");
  metric("leaseproof_hub_fanouts_in_progress", "gauge", "Published messages whose frames are still being written.",
         fanouts_in_progress_.load());
  metric("process_resident_memory_bytes", "gauge", "Resident memory of the hub process.", resident_bytes());
  return out;
}

HubServer::Fleet::Fleet(asio::io_context& io, HubServerOptions options, std::function<void(std::string_view)> log)
    : io0_(io), log_(std::move(log)) {
  if (std::string error = options.hub.validate(); !error.empty()) throw std::invalid_argument(error);
  if (options.threads < 1 || options.threads > 64) {
    throw std::invalid_argument(fmt::format("threads: {} is not in 1..64", options.threads));
  }
  if (options.threads > 1 && options.shared.port != 0) {
    throw std::invalid_argument(
        "threads: more than 1 with a shared store (--redis) is not supported: the store's log is followed by one "
        "thread; run one thread per hub process and more processes");
  }
  if (!options.sessions_path.empty()) {
    sessions_log_.open(options.sessions_path, std::ios::app);
    if (!sessions_log_) {
      throw std::invalid_argument(fmt::format("--sessions: cannot open '{}' for appending", options.sessions_path));
    }
  }
  // One epoch for every shard's core.
  if (options.epoch == 0) options.epoch = static_cast<uint64_t>(wall_now_ns() / 1'000'000);
  epoch_ = options.epoch;
  for (unsigned k = 1; k < options.threads; ++k) {
    ios_.push_back(std::make_unique<asio::io_context>(1));
    work_.push_back(asio::make_work_guard(*ios_.back()));
  }
  for (unsigned k = 0; k < options.threads; ++k) shards_.push_back(std::make_shared<Impl>(*this, k, this->io(k), options));
}

HubServer::Fleet::~Fleet() {
  stop_threads();
  shard(0).detach();
  // Shards 1..N-1 end with their io_contexts, which destroy the handlers
  // holding their sessions; shard 0's handlers are the caller's io_context's.
  shards_.clear();
  work_.clear();
  ios_.clear();
}

void HubServer::Fleet::stop_threads() {
  if (threads_stopped_) return;
  threads_stopped_ = true;
  for (auto& io : ios_) io->stop();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void HubServer::Fleet::start() {
  for (std::size_t k = 1; k < size() && threads_.size() < ios_.size(); ++k) {
    threads_.emplace_back([io = ios_[k - 1].get()] { io->run(); });
  }
  for (const auto& shard : shards_) shard->start();
}

void HubServer::Fleet::shutdown(uint16_t code, std::function<void()> done) {
  if (size() == 1) return shard(0).shutdown(code, std::move(done));
  // Each shard closes its own; the last to finish, back on shard 0's thread,
  // stops the threads and calls `done`.
  auto left = std::make_shared<std::size_t>(size());
  auto finish = std::make_shared<std::function<void()>>(std::move(done));
  for (std::size_t k = 0; k < size(); ++k) {
    asio::post(io(k), [this, k, code, left, finish] {
      shard(k).shutdown(code, [this, left, finish] {
        asio::post(io0_, [this, left, finish] {
          if (--*left > 0) return;
          stop_threads();
          (*finish)();
        });
      });
    });
  }
}

bool HubServer::Fleet::publish(std::string_view channel, std::string_view payload, std::string* error,
                               std::function<void(int64_t)> done) {
  if (size() == 1) return shard(0).publish(channel, payload, error, std::move(done));
  if (std::string why = check_publish(channel, payload); !why.empty()) {
    if (error) *error = std::move(why);
    return false;
  }
  int64_t seq = 0;
  {
    std::lock_guard lock(publish_mutex_);
    auto& top = tops_[std::string{channel}];
    seq = ++top;
    const resume::Message message{epoch_, seq, static_cast<uint32_t>(payload.size())};
    auto frame = std::make_shared<const std::string>(encode_data(channel, message, payload));
    auto across = begin_fanout(monotonic_now(), static_cast<uint32_t>(size()));
    // Posted under the lock: every shard's queue gets the channel's messages in seq order.
    for (std::size_t k = 0; k < size(); ++k) {
      asio::post(io(k), [shard = shards_[k], channel = std::string{channel}, message, frame, across] {
        shard->deliver(channel, message.seq, message.bytes, frame, across);
      });
    }
  }
  if (done) done(seq);
  return true;
}

std::shared_ptr<FanOutAcross> HubServer::Fleet::begin_fanout(Instant accepted, uint32_t shards) {
  ++fanouts_in_progress_;
  return std::make_shared<FanOutAcross>(accepted, shards);
}

void HubServer::Fleet::fanout_shard_done(FanOutAcross& across, uint32_t written, Instant last_written) {
  if (written > 0) {
    across.written += written;
    int64_t seen = across.last_written_ns.load();
    while (seen < last_written.ns() && !across.last_written_ns.compare_exchange_weak(seen, last_written.ns())) {
    }
  }
  if (--across.shards_left > 0) return;
  // The last shard's share ended: so did the fan-out (timed when any
  // subscriber's frame was written).
  --fanouts_in_progress_;
  if (across.written.load() == 0) return;
  const Duration took = Instant::from_ns(across.last_written_ns.load()) - across.accepted;
  std::lock_guard lock(fanout_mutex_);
  fanout_seconds_.observe(static_cast<double>(took.ns()) / 1e9);
}

void HubServer::Fleet::log(std::string_view line) {
  std::lock_guard lock(log_mutex_);
  log_(line);
}

void HubServer::Fleet::record_session(const std::string& line) {
  std::lock_guard lock(sessions_mutex_);
  sessions_log_ << line << '\n';
  sessions_log_.flush();
}

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

HubServer::HubServer(asio::io_context& io, HubServerOptions options, std::function<void(std::string_view)> log)
    : fleet_(std::make_unique<Fleet>(io, std::move(options), std::move(log))) {}
HubServer::~HubServer() = default;
uint16_t HubServer::port() const { return fleet_->shard(0).port(); }
uint64_t HubServer::epoch() const { return fleet_->shard(0).epoch(); }
void HubServer::start() { fleet_->start(); }
void HubServer::shutdown(uint16_t code, std::function<void()> done) { fleet_->shutdown(code, std::move(done)); }
bool HubServer::publish(std::string_view channel, std::string_view payload, std::string* error) {
  return fleet_->publish(channel, payload, error);
}
bool HubServer::failed() const { return fleet_->shard(0).failed(); }
std::string HubServer::metrics_text() const {
  return fleet_->metrics_text(fleet_->each_shard_wait<ShardStats>([](Impl& shard) { return shard.stats(); }));
}
std::size_t HubServer::close_all(uint16_t code) {
  std::size_t total = 0;
  for (const std::size_t n : fleet_->each_shard_wait<std::size_t>([code](Impl& shard) { return shard.close_all(code); })) {
    total += n;
  }
  return total;
}
HubServerCounters HubServer::counters() const {
  HubServerCounters total;
  for (const HubServerCounters& c :
       fleet_->each_shard_wait<HubServerCounters>([](Impl& shard) { return shard.counters(); })) {
    add_counters(total, c);
  }
  return total;
}
std::size_t HubServer::connections() const { return fleet_->open()->load(); }

}  // namespace leaseproof::runtime
