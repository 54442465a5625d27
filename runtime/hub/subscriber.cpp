// Reconnecting subscribers: core/resume's ResumeClient carried out on Beast
// WebSocket clients (subscriber.hpp). Single-threaded like the hub.
#include "runtime/hub/subscriber.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <deque>
#include <optional>
#include <random>
#include <system_error>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/assert.hpp"
#include "runtime/clock.hpp"
#include "runtime/os_random.hpp"
#include "runtime/hub/resume_wire.hpp"
#include "runtime/aws/tls.hpp"
#include "runtime/hub/ws_stream.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;


// The sink: an append-only file of "<epoch> <seq>\n" lines, or memory.
class Sink {
 public:
  explicit Sink(const std::string& path) : path_(path) {
    if (path.empty()) return;
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), fmt::format("sink {}", path));
    recover();
  }
  ~Sink() {
    if (fd_ >= 0) ::close(fd_);
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  resume::Position last() const { return last_; }

  // Appends and makes durable; "" on success, else the error.
  std::string append(const std::vector<resume::Message>& messages) {
    if (!messages.empty()) last_ = resume::Position{messages.back().epoch, messages.back().seq};
    if (fd_ < 0) return {};
    std::string text;
    for (const auto& m : messages) text += fmt::format("{} {}\n", m.epoch, m.seq);
    std::string_view rest = text;
    while (!rest.empty()) {
      const ssize_t n = ::write(fd_, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fmt::format("sink {}: write: {}", path_, std::strerror(errno));
      rest.remove_prefix(static_cast<size_t>(n));
    }
    if (::fdatasync(fd_) != 0) return fmt::format("sink {}: fdatasync: {}", path_, std::strerror(errno));
    return {};
  }

 private:
  // Reads the file through, checking every line, in bounded memory: each
  // complete line must be "<epoch> <seq>" (decimal, epoch 1..2^64-1, seq
  // 1..2^63-1). A last line without its newline is a crash mid-append and is
  // cut off, but only if it is the start of such a line. Anything else (a
  // JSON file, random bytes) is not a sink: refused with the line number,
  // and the file is left as it was.
  void recover() {
    static constexpr size_t kLineMax = 20 + 1 + 19;  // the longest valid line, without its newline
    if (::lseek(fd_, 0, SEEK_SET) < 0) throw std::system_error(errno, std::generic_category(), "sink seek");
    auto refuse = [&](uint64_t line, std::string_view why) {
      throw std::invalid_argument(fmt::format(
          "sink {}: line {} {}; a sink holds only lines '<epoch> <seq>' (refusing to touch a file that is not one)",
          path_, line, why));
    };
    std::string partial;       // the current line so far (at most kLineMax bytes)
    uint64_t line_number = 1;  // of `partial`
    off_t complete_end = 0;    // offset just past the last complete line
    off_t offset = 0;
    char chunk[65536];
    for (;;) {
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::system_error(errno, std::generic_category(), fmt::format("sink {}: read", path_));
      if (n == 0) break;
      for (ssize_t i = 0; i < n; ++i, ++offset) {
        const char c = chunk[i];
        if (c != '\n') {
          if (partial.size() == kLineMax) refuse(line_number, fmt::format("is longer than {} bytes", kLineMax));
          if (c != ' ' && (c < '0' || c > '9')) refuse(line_number, "holds a byte other than a digit or a space");
          partial.push_back(c);
          continue;
        }
        const auto position = parse_line(partial);
        if (!position) refuse(line_number, fmt::format("'{}' is not '<epoch> <seq>' in range", partial));
        last_ = *position;
        complete_end = offset + 1;
        partial.clear();
        ++line_number;
      }
    }
    if (partial.empty()) return;
    // A torn last line: digits, at most one space, nothing more.
    if (std::count(partial.begin(), partial.end(), ' ') > 1 || partial.front() == ' ') {
      refuse(line_number, fmt::format("'{}' (no newline) is not the start of '<epoch> <seq>'", partial));
    }
    if (::ftruncate(fd_, complete_end) != 0) {
      throw std::system_error(errno, std::generic_category(), fmt::format("sink {}: truncate", path_));
    }
  }

  // "<epoch> <seq>" with both in range; nullopt otherwise.
  static std::optional<resume::Position> parse_line(std::string_view line) {
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    uint64_t epoch = 0;
    int64_t seq = 0;
    const char* end = line.data() + line.size();
    const auto [epoch_end, epoch_ec] = std::from_chars(line.data(), line.data() + space, epoch);
    if (epoch_ec != std::errc{} || epoch_end != line.data() + space || epoch == 0) return std::nullopt;
    const auto [seq_end, seq_ec] = std::from_chars(line.data() + space + 1, end, seq);
    if (seq_ec != std::errc{} || seq_end != end || seq < 1) return std::nullopt;
    return resume::Position{epoch, seq};
  }

  std::string path_;
  int fd_ = -1;
  resume::Position last_;
};

double percentile(std::vector<float> samples, double q) {
  if (samples.empty()) return 0;
  const auto k = static_cast<size_t>(q * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(k), samples.end());
  return samples[k];
}

// Peak count in any one-second window that starts at one of `times`.
uint64_t peak_per_second(const std::vector<Instant>& times) {
  uint64_t peak = 0;
  size_t begin = 0;
  for (size_t end = 0; end < times.size(); ++end) {
    while (times[end] - times[begin] >= Duration::from_s(1)) ++begin;
    peak = std::max<uint64_t>(peak, end - begin + 1);
  }
  return peak;
}

constexpr size_t kLatencySamplesMax = 2'000'000;

}  // namespace

class SubscriberPool::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, SubscriberOptions options, std::function<void(std::string_view)> log)
      : io_(io), options_(std::move(options)), log_(std::move(log)), random_(options_.seed), stats_timer_(io) {
    if (std::string e = check_channel_name(options_.channel); !e.empty()) {
      throw std::invalid_argument("--channel: " + e);
    }
    if (options_.count < 1 || options_.count > 20'000) {
      throw std::invalid_argument(fmt::format("--count: {} is not in 1..20000", options_.count));
    }
    if (options_.count > 1 && !options_.sink_path.empty()) {
      throw std::invalid_argument("--sink: a sink file takes one client (--count 1)");
    }
    if (std::string e = options_.client.validate(); !e.empty()) throw std::invalid_argument(e);
    sink_ = std::make_unique<Sink>(options_.sink_path);
    boost::system::error_code ec;
    endpoint_ = tcp::endpoint{asio::ip::make_address(options_.host, ec), options_.port};
    if (ec) throw std::invalid_argument(fmt::format("url: host '{}' is not an IP address", options_.host));
  }

  void start();
  void stop(std::function<void()> done);
  void on_finished(std::function<void()> callback) {
    finished_ = std::move(callback);
    check_finished();  // in case every client was done already
  }
  SubscriberSummary summary() const;

 private:
  class Client;
  friend class Client;

  void check_finished();
  void stats_tick();
  void wait_stopped(std::function<void()> done, Instant give_up);

  asio::io_context& io_;
  SubscriberOptions options_;
  std::function<void(std::string_view)> log_;
  OsRandom random_;
  std::unique_ptr<Sink> sink_;
  tcp::endpoint endpoint_;
  std::vector<std::shared_ptr<Client>> clients_;
  std::function<void()> finished_;
  bool finished_called_ = false;
  uint32_t done_ = 0;  // clients that gave up or reached until_seq
  bool stopping_ = false;
  std::size_t closing_ = 0;  // close handshakes stop() started and that have not finished
  asio::steady_timer stats_timer_;
  Instant started_;
  SubscriberSummary summary_;
  std::vector<Instant> wave_connects_;
  Instant wave_at_ = Instant::max();
  std::vector<float> latencies_ms_;
  std::vector<float> window_latencies_ms_;
};

// One client: its core, its current connection (if any) and its timer.
class SubscriberPool::Impl::Client : public std::enable_shared_from_this<Client> {
 public:
  Client(Impl& pool, uint32_t index, resume::Position recorded)
      : pool_(pool),
        index_(index),
        core_(pool.options_.client, pool.options_.channel, recorded, pool.random_),
        timer_(pool.io_) {}

  const resume::ResumeClient& core() const { return core_; }
  bool open() const { return connection_ && connection_->open; }

  void start() {
    resume::ClientActions actions;
    core_.start(monotonic_now(), actions);
    run(actions);
  }

  // Closes the connection for good (the pool is stopping).
  void stop() {
    timer_.cancel();
    stopped_ = true;
    if (!connection_) return;
    auto connection = std::move(connection_);
    if (connection->open && !connection->writing) {
      ++pool_.closing_;
      connection->ws.visit([&](auto& ws) {
        ws.async_close(websocket::close_code::normal, [pool = pool_.shared_from_this(), connection](beast::error_code) {
          beast::error_code ignored;
          connection->ws.tcp().socket().close(ignored);
          --pool->closing_;
        });
      });
    } else {
      connection->ws.tcp().close();
    }
  }
  bool closed() const { return !connection_; }

 private:
  struct Connection {
    Connection(asio::io_context& io, asio::ssl::context* tls) : ws(io, tls) {}
    AnyWebSocket ws;
    beast::flat_buffer in;
    std::deque<std::string> outbox;
    bool writing = false;
    bool open = false;
  };

  void run(resume::ClientActions& actions) {
    const Instant now = monotonic_now();
    for (resume::ClientAction& action : actions) {
      if (auto* connect = std::get_if<resume::Connect>(&action)) {
        ++pool_.summary_.connects;
        if (connected_once_ && pool_.wave_at_ != Instant::max()) pool_.wave_connects_.push_back(now);
        connected_once_ = true;
        open_connection(connect->subscribe);
      } else if (auto* pong = std::get_if<resume::SendPong>(&action)) {
        send(encode_pong(pong->pong));
      } else if (auto* record = std::get_if<resume::Record>(&action)) {
        this->record(std::move(*record));
      } else if (auto* close = std::get_if<resume::CloseConnection>(&action)) {
        // The core saw a dead hub (silence): drop the socket, no handshake.
        ++pool_.summary_.closes_by_code[close->code];
        pool_.log_(fmt::format("subscriber {}: closing a silent connection ({})", index_, close->reason));
        if (connection_) connection_->ws.tcp().close();
        connection_.reset();
      } else if (auto* reset = std::get_if<resume::ResetSeen>(&action)) {
        const std::string kind{resume::to_string(reset->reset.kind)};
        ++pool_.summary_.resets_by_kind[kind];
        pool_.log_(fmt::format("subscriber {}: reset {}: asked after {}:{}, resumes after {}:{}", index_, kind,
                               reset->reset.after.epoch, reset->reset.after.seq, reset->reset.resume.epoch,
                               reset->reset.resume.seq));
      } else if (auto* give_up = std::get_if<resume::GiveUp>(&action)) {
        ++pool_.summary_.gave_up;
        pool_.log_(fmt::format("subscriber {}: gave up after close code {} (not one to reconnect after)", index_,
                               give_up->code));
      } else {
        ++pool_.summary_.marks[std::get<resume::ClientMark>(action).name];
      }
    }
    actions.clear();
    rearm();
    // Done: gave up, or recorded through --until-seq. Counted once per
    // client, so that a wave of 10,000 costs no scan of all of them.
    if (!done_ && (core_.given_up() || (pool_.options_.until_seq > 0 && core_.cursor().seq >= pool_.options_.until_seq))) {
      done_ = true;
      ++pool_.done_;
      pool_.check_finished();
    }
  }

  void open_connection(const resume::Subscribe& subscribe) {
    if (connection_) connection_->ws.tcp().close();
    auto connection = std::make_shared<Connection>(pool_.io_, pool_.options_.tls.get());
    connection_ = connection;
    connection->ws.tcp().expires_after(to_chrono(pool_.options_.connect_timeout));
    connection->ws.tcp().async_connect(pool_.endpoint_, [self = shared_from_this(), connection,
                                                         subscribe_text = encode_subscribe(subscribe)](beast::error_code ec) {
      if (connection != self->connection_) return;
      if (ec) return self->failed(true);
      beast::error_code ignored;
      connection->ws.tcp().socket().set_option(tcp::no_delay(true), ignored);
      self->secure(connection, subscribe_text);
    });
  }

  // wss://: the TLS handshake, the address checked against the certificate;
  // ws://: nothing to do. Within the connect timeout.
  void secure(const std::shared_ptr<Connection>& connection, const std::string& subscribe_text) {
    TlsWebSocket* tls = connection->ws.tls();
    if (tls == nullptr) return handshake(connection, subscribe_text);
    std::string problem;
    if (!prepare_tls_connection(tls->next_layer().native_handle(), pool_.options_.host, problem)) {
      pool_.log_(fmt::format("subscriber {}: {}", index_, problem));
      return failed(true);
    }
    tls->next_layer().async_handshake(asio::ssl::stream_base::client,
                                      [self = shared_from_this(), connection, subscribe_text](beast::error_code ec) {
      if (connection != self->connection_) return;
      if (ec) {
        self->log_tls_failure(describe_tls_failure(ec, connection->ws.native_tls()));
        return self->failed(true);
      }
      self->handshake(connection, subscribe_text);
    });
  }

  // The first few TLS failures of a client, and then every 100th, are
  // logged: a wrong certificate must be visible, a reconnect loop must not
  // flood the log.
  void log_tls_failure(const std::string& why) {
    ++tls_failures_;
    if (tls_failures_ <= 3 || tls_failures_ % 100 == 0) {
      pool_.log_(fmt::format("subscriber {}: TLS with wss://{}:{}: {} ({} so far)", index_, pool_.options_.host,
                             pool_.options_.port, why, tls_failures_));
    }
  }

  void handshake(const std::shared_ptr<Connection>& connection, const std::string& subscribe_text) {
    const std::string host = fmt::format("{}:{}", pool_.options_.host, pool_.options_.port);
    connection->ws.visit([&](auto& ws) {
      ws.async_handshake(host, pool_.options_.path, [self = shared_from_this(), connection, subscribe_text](beast::error_code ec) {
        if (connection != self->connection_) return;
        if (ec) return self->failed(true);
        connection->ws.tcp().expires_never();
        websocket::stream_base::timeout timeout{};
        timeout.handshake_timeout = std::chrono::seconds(2);  // bounds our close handshakes
        timeout.idle_timeout = websocket::stream_base::none();  // the core's hub-silence deadline decides
        timeout.keep_alive_pings = false;
        connection->ws.visit([&](auto& opened) {
          opened.set_option(timeout);
          opened.read_message_max(kPayloadBytesMax + 4096);
          opened.text(true);
        });
        connection->open = true;
        self->send(subscribe_text);
        if (self->pool_.options_.read) self->read(connection);
      });
    });
  }

  void read(const std::shared_ptr<Connection>& connection) {
    connection->ws.visit([&](auto& ws) {
      ws.async_read(connection->in, [self = shared_from_this(), connection](beast::error_code ec, std::size_t) {
        self->on_read(connection, ec);
      });
    });
  }

  // Called from the read's handler, which holds this client alive.
  void on_read(const std::shared_ptr<Connection>& connection, beast::error_code ec) {
    if (connection != connection_) return;
    if (ec) {
      uint16_t code = resume::close_code::abnormal;
      if (ec == websocket::error::closed) {
        const uint16_t sent = connection->ws.visit([](auto& ws) -> uint16_t { return ws.reason().code; });
        code = sent != 0 ? sent : 1005;
      }
      return closed_by_peer(code);
    }
    const auto data = connection->in.cdata();
    on_text(std::string_view{static_cast<const char*>(data.data()), data.size()});
    connection->in.consume(connection->in.size());
    if (connection == connection_) read(connection);
  }

  void on_text(std::string_view text) {
    auto decoded = decode_hub_frame(text);
    if (const auto* error = std::get_if<WireError>(&decoded)) return protocol_error(error->message);
    auto& wire = std::get<WireHubFrame>(decoded);
    const Instant now = monotonic_now();
    if (std::holds_alternative<resume::Data>(wire.frame)) {
      if (wire.channel != pool_.options_.channel) {
        return protocol_error(fmt::format("data of channel '{}' on a subscription to '{}'", wire.channel,
                                          pool_.options_.channel));
      }
      ++pool_.summary_.received;
      const int64_t sent = payload_send_time(wire.payload);
      if (sent > 0 && pool_.latencies_ms_.size() < kLatencySamplesMax) {
        const auto ms = static_cast<float>(static_cast<double>(wall_now_ns() - sent) / 1e6);
        pool_.latencies_ms_.push_back(ms);
        pool_.window_latencies_ms_.push_back(ms);
      }
    }
    resume::ClientActions actions;
    core_.on_frame(wire.frame, now, actions);
    run(actions);
  }

  void protocol_error(const std::string& why) {
    pool_.log_(fmt::format("subscriber {}: the hub broke the protocol: {}", index_, why));
    auto connection = std::move(connection_);
    if (connection) connection->ws.tcp().close();
    ++pool_.summary_.closes_by_code[resume::close_code::protocol_error];
    resume::ClientActions actions;
    core_.on_closed(resume::close_code::protocol_error, monotonic_now(), actions);
    run(actions);
  }

  void failed(bool during_connect) {
    if (during_connect) ++pool_.summary_.connect_failures;
    closed_by_peer(resume::close_code::abnormal);
  }

  void closed_by_peer(uint16_t code) {
    auto connection = std::move(connection_);
    if (connection) {
      beast::error_code ignored;
      connection->ws.tcp().socket().close(ignored);
    }
    if (stopped_) return;
    ++pool_.summary_.closes_by_code[code];
    const Instant now = monotonic_now();
    if (code == resume::close_code::service_restart && pool_.wave_at_ == Instant::max()) {
      pool_.wave_at_ = now;
      pool_.summary_.wave_seen = true;
    }
    resume::ClientActions actions;
    core_.on_closed(code, now, actions);
    run(actions);
  }

  void send(std::string text) {
    if (!connection_ || !connection_->open) return;  // the core resends what matters on the next connection
    connection_->outbox.push_back(std::move(text));
    write(connection_);
  }

  void write(const std::shared_ptr<Connection>& connection) {
    if (connection->writing || connection->outbox.empty()) return;
    connection->writing = true;
    connection->ws.visit([&](auto& ws) {
      ws.async_write(asio::buffer(connection->outbox.front()),
                     [self = shared_from_this(), connection](beast::error_code ec, std::size_t) {
        connection->writing = false;
        if (connection != self->connection_) return;
        if (ec) return self->closed_by_peer(resume::close_code::abnormal);
        connection->outbox.pop_front();
        self->write(connection);
      });
    });
  }

  void record(resume::Record record) {
    std::string error = pool_.sink_->append(record.messages);
    if (error.empty()) {
      pool_.summary_.recorded += record.messages.size();
    } else if (pool_.summary_.sink_error.empty()) {
      pool_.summary_.sink_error = error;
      pool_.log_(fmt::format("subscriber {}: {}", index_, error));
    }
    // Answered on the io_context, never inside the core's own call.
    asio::post(pool_.io_, [self = shared_from_this(), batch = record.batch, ok = error.empty()] {
      if (self->stopped_) return;
      resume::ClientActions actions;
      if (ok) {
        self->core_.on_recorded(batch, monotonic_now(), actions);
      } else {
        self->core_.on_record_failed(batch, monotonic_now(), actions);
      }
      self->run(actions);
    });
  }

  void rearm() {
    // A subscriber that never reads never answers anything: no timers either.
    if (!pool_.options_.read || stopped_) return;
    const Instant due = core_.next_deadline();
    if (due == armed_) return;
    armed_ = due;
    if (due == Instant::max()) {
      timer_.cancel();
      return;
    }
    timer_.expires_at(to_steady(due));
    timer_.async_wait([self = shared_from_this(), due](beast::error_code ec) {
      if (ec || self->armed_ != due || self->stopped_) return;
      self->armed_ = Instant::max();
      resume::ClientActions actions;
      self->core_.on_timer(monotonic_now(), actions);
      self->run(actions);
    });
  }

  Impl& pool_;
  uint32_t index_;
  resume::ResumeClient core_;
  asio::steady_timer timer_;
  Instant armed_ = Instant::max();
  std::shared_ptr<Connection> connection_;
  bool connected_once_ = false;
  uint64_t tls_failures_ = 0;
  bool stopped_ = false;
  bool done_ = false;
};

void SubscriberPool::Impl::start() {
  started_ = monotonic_now();
  const resume::Position recorded = sink_->last();
  if (!options_.sink_path.empty()) {
    log_(fmt::format("subscriber: sink {} resumes after {}:{}", options_.sink_path, recorded.epoch, recorded.seq));
  }
  for (uint32_t i = 0; i < options_.count; ++i) clients_.push_back(std::make_shared<Client>(*this, i, recorded));
  for (auto& client : clients_) client->start();
  if (options_.stats_interval > Duration::zero()) stats_tick();
}

void SubscriberPool::Impl::stats_tick() {
  stats_timer_.expires_after(to_chrono(options_.stats_interval));
  stats_timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->stopping_) return;
    uint64_t open = 0;
    for (const auto& client : self->clients_) open += client->open() ? 1 : 0;
    nlohmann::json line = {{"t_s", static_cast<double>((monotonic_now() - self->started_).ns()) / 1e9},
                           {"received", self->summary_.received},
                           {"recorded", self->summary_.recorded},
                           {"open", open},
                           {"window_samples", self->window_latencies_ms_.size()},
                           {"window_p99_ms", percentile(self->window_latencies_ms_, 0.99)}};
    self->window_latencies_ms_.clear();
    self->log_(nlohmann::json{{"stats", line}}.dump());
    self->stats_tick();
  });
}

void SubscriberPool::Impl::check_finished() {
  if (finished_called_ || !finished_ || done_ < options_.count) return;
  finished_called_ = true;
  asio::post(io_, finished_);
}

void SubscriberPool::Impl::stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  stats_timer_.cancel();
  for (auto& client : clients_) client->stop();
  wait_stopped(std::move(done), monotonic_now() + Duration::from_s(3));
}

void SubscriberPool::Impl::wait_stopped(std::function<void()> done, Instant give_up) {
  // Done once the close handshakes stop() started have finished (each is
  // bounded by its handshake timeout), or at `give_up`.
  if (closing_ == 0 || monotonic_now() >= give_up || io_.stopped()) return done();
  stats_timer_.expires_after(std::chrono::milliseconds(5));
  stats_timer_.async_wait([weak = weak_from_this(), done = std::move(done), give_up](beast::error_code) mutable {
    if (auto self = weak.lock()) self->wait_stopped(std::move(done), give_up);
  });
}

SubscriberSummary SubscriberPool::Impl::summary() const {
  SubscriberSummary s = summary_;
  s.clients = options_.count;
  s.latency.samples = latencies_ms_.size();
  s.latency.p50_ms = percentile(latencies_ms_, 0.50);
  s.latency.p99_ms = percentile(latencies_ms_, 0.99);
  s.latency.max_ms = latencies_ms_.empty() ? 0 : *std::max_element(latencies_ms_.begin(), latencies_ms_.end());
  s.wave_reconnects = wave_connects_.size();
  s.wave_peak_per_second = peak_per_second(wave_connects_);
  if (!clients_.empty()) s.first_cursor = clients_.front()->core().cursor();
  return s;
}

SubscriberPool::SubscriberPool(asio::io_context& io, SubscriberOptions options, std::function<void(std::string_view)> log)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(log))) {}
SubscriberPool::~SubscriberPool() = default;
void SubscriberPool::start() { impl_->start(); }
void SubscriberPool::stop(std::function<void()> done) { impl_->stop(std::move(done)); }
void SubscriberPool::on_finished(std::function<void()> callback) { impl_->on_finished(std::move(callback)); }
SubscriberSummary SubscriberPool::summary() const { return impl_->summary(); }

std::string summary_json(const SubscriberSummary& s) {
  nlohmann::json closes = nlohmann::json::object(), resets = nlohmann::json::object(), marks = nlohmann::json::object();
  for (const auto& [code, n] : s.closes_by_code) closes[std::to_string(code)] = n;
  for (const auto& [kind, n] : s.resets_by_kind) resets[kind] = n;
  for (const auto& [name, n] : s.marks) marks[name] = n;
  return nlohmann::json{{"clients", s.clients},
                        {"received", s.received},
                        {"recorded", s.recorded},
                        {"connects", s.connects},
                        {"connect_failures", s.connect_failures},
                        {"gave_up", s.gave_up},
                        {"closes_by_code", closes},
                        {"resets", resets},
                        {"marks", marks},
                        {"wave", {{"seen", s.wave_seen}, {"reconnects", s.wave_reconnects},
                                  {"peak_per_second", s.wave_peak_per_second}}},
                        {"latency_ms", {{"samples", s.latency.samples}, {"p50", s.latency.p50_ms},
                                        {"p99", s.latency.p99_ms}, {"max", s.latency.max_ms}}},
                        {"cursor", {{"epoch", s.first_cursor.epoch}, {"seq", s.first_cursor.seq}}},
                        {"sink_error", s.sink_error}}
      .dump();
}

std::string summary_text(const SubscriberSummary& s) {
  std::string closes;
  for (const auto& [code, n] : s.closes_by_code) closes += fmt::format(" {}x{}", n, code);
  std::string resets;
  for (const auto& [kind, n] : s.resets_by_kind) resets += fmt::format(" {}x{}", n, kind);
  std::string out = fmt::format(
      "subscribers: {} clients, {} received, {} recorded, {} connects ({} failed), {} gave up\n"
      "closes seen:{}\nresets:{}\n"
      "latency: {} samples, p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms\n"
      "cursor of client 0: epoch {} seq {}",
      s.clients, s.received, s.recorded, s.connects, s.connect_failures, s.gave_up, closes.empty() ? " none" : closes,
      resets.empty() ? " none" : resets, s.latency.samples, s.latency.p50_ms, s.latency.p99_ms, s.latency.max_ms,
      s.first_cursor.epoch, s.first_cursor.seq);
  if (s.wave_seen) {
    out += fmt::format("\nwave after the first 1012: {} reconnects, peak {} per second", s.wave_reconnects,
                       s.wave_peak_per_second);
  }
  if (!s.sink_error.empty()) out += "\nsink error: " + s.sink_error;
  return out;
}

}  // namespace leaseproof::runtime
