// The hub process: core/resume's Hub carried out on Beast WebSockets
// (hub_server.hpp), in shards (hub_shard.hpp). This file: the helpers the
// shards share, the Fleet (threads, the publish sequencer, /metrics gathered
// over the shards) and HubServer's public API.
#include "runtime/hub/hub_server.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/assert.hpp"
#include "runtime/hub/hub_shard.hpp"

namespace leaseproof::runtime {

std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

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
    // Into every shard's inbox under the lock: each inbox gets the channel's
    // messages in seq order (Impl::enqueue says why not straight into Asio's queues).
    for (std::size_t k = 0; k < size(); ++k) {
      shards_[k]->enqueue(Impl::Delivery{std::string{channel}, message.seq, message.bytes, frame, across});
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
