// A worker process's adapter (worker.hpp): the lease manager's and the stream
// sessions' actions carried out on real sockets.
#include "runtime/worker.hpp"

#include <random>
#include <unordered_map>
#include <variant>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/assert.hpp"
#include "core/dynamo/codec.hpp"
#include "core/lease/manager.hpp"
#include "runtime/clock.hpp"
#include "runtime/prometheus.hpp"
#include "runtime/resume_wire.hpp"
#include "runtime/ws_link.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;

class OsRandom final : public RandomSource {
 public:
  explicit OsRandom(uint64_t seed) : engine_(seed != 0 ? seed : std::random_device{}()) {}
  uint64_t below(uint64_t bound) override { return std::uniform_int_distribution<uint64_t>{0, bound - 1}(engine_); }

 private:
  std::mt19937_64 engine_;
};

lease::Clock clock_now() { return lease::Clock{Instant::from_ns(wall_now_ns()), monotonic_now()}; }

using DynamoReply = std::function<void(const dynamo::Result<dynamo::Response>*)>;

}  // namespace

class Worker::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, WorkerOptions options, std::function<void(std::string_view)> log)
      : io_(io), options_(std::move(options)), log_(std::move(log)), random_(options_.seed), lease_timer_(io),
        drain_timer_(io) {
    if (options_.worker_id.empty()) throw std::invalid_argument("--worker-id: must not be empty");
    if (std::string e = options_.lease.validate(); !e.empty()) throw std::invalid_argument(e);
    if (std::string e = options_.session.client.validate(); !e.empty()) throw std::invalid_argument(e);
    if (!options_.hub_override.empty()) {
      auto url = parse_ws_url(options_.hub_override);
      if (auto* error = std::get_if<std::string>(&url)) throw std::invalid_argument("--hub: " + *error);
    }
    options_.dynamo.request_timeout = options_.lease.request_timeout;
    for (std::size_t i = 0; i < std::max<std::size_t>(1, options_.dynamo_connections); ++i) {
      dynamo_.push_back(std::make_unique<DynamoHttpClient>(io, options_.dynamo));
    }
    manager_ = std::make_unique<lease::LeaseManager>(options_.lease, options_.worker_id, random_, faults_);
  }

  void start() {
    event("worker.start", {{"algorithm", lease::to_string(options_.lease.algorithm)},
                           {"expiry", lease::to_string(options_.lease.expiry_mode)}});
    run([&](lease::Actions& out) { manager_->start(clock_now(), out); });
  }

  void drain(std::function<void()> done) {
    if (draining_) return;
    draining_ = true;
    drained_ = std::move(done);
    event("worker.drain", {});
    run([&](lease::Actions& out) { manager_->on_sigterm(clock_now(), out); });
    drain_timer_.expires_after(to_chrono(options_.drain_timeout));
    drain_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      self->event("worker.drain_timeout", {});
      self->finish_drain();
    });
  }

  const WorkerCounters& counters() const { return counters_; }
  std::size_t owned() const { return streams_.size(); }
  bool draining() const { return draining_; }

  std::string metrics_text() const {
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, uint64_t value) {
      append_metric(out, name, type, help, value);
    };
    metric("leaseproof_worker_active_connections", "gauge", "Connections this worker streams now.", streams_.size());
    metric("leaseproof_worker_draining", "gauge", "1 while draining after SIGTERM.", draining_ ? 1 : 0);
    metric("leaseproof_worker_dynamo_calls_total", "counter", "DynamoDB calls.", counters_.dynamo_calls);
    metric("leaseproof_worker_dynamo_ambiguous_total", "counter",
           "DynamoDB calls with no answer (timeout, lost or refused connection): outcome unknown.",
           counters_.dynamo_transport_errors);
    metric("leaseproof_worker_sessions_opened_total", "counter", "Sessions opened (leases acquired).",
           counters_.sessions_opened);
    metric("leaseproof_worker_records_total", "counter", "Messages the sink confirmed.", counters_.records);
    metric("leaseproof_worker_fenced_total", "counter", "Sessions whose sink refused a write for good.",
           counters_.fenced);
    metric("leaseproof_worker_resets_total", "counter", "Typed resets seen.", counters_.resets);
    append_labelled_counter(out, "leaseproof_worker_calls_total", "DynamoDB calls by kind.", "kind",
                            counters_.calls_by_kind);
    append_labelled_counter(out, "leaseproof_worker_closes_total", "Sessions closed, by reason.", "reason",
                            counters_.closes_by_reason);
    append_labelled_counter(out, "leaseproof_worker_marks_total",
                            "The cores' coverage marks (takeovers, deadline stops, ...).", "name",
             counters_.marks);
    return out;
  }

 private:
  struct Stream {
    std::unique_ptr<resume::StreamSession> session;
    std::unique_ptr<WsLink> link;
    std::unique_ptr<asio::steady_timer> timer;
    Instant armed = Instant::max();
    uint64_t generation = 0;
  };

  // One JSON line: {"t_ms": wall, "mono_ms": monotonic, "worker": id,
  // "event": name, ...fields}. The monotonic clock is the machine's, shared by
  // every process on it (and left alone by faketime with
  // FAKETIME_DONT_FAKE_MONOTONIC=1): labs order events of several workers by it.
  void event(std::string_view name, nlohmann::json fields) {
    fields["t_ms"] = wall_now_ns() / 1'000'000;
    fields["mono_ms"] = monotonic_now().ns() / 1'000'000;
    fields["worker"] = options_.worker_id;
    fields["event"] = name;
    log_(fields.dump());
  }

  // Acts on lease deadlines that passed before touching anything else.
  void expire_leases() {
    if (manager_->next_deadline() <= monotonic_now()) {
      run([&](lease::Actions& out) { manager_->on_timer(clock_now(), out); });
    }
  }

  template <typename Step>
  void run(Step step) {
    lease::Actions actions;
    step(actions);
    apply(actions);
    rearm_lease_timer();
  }

  void rearm_lease_timer() {
    const Instant due = manager_->next_deadline();
    if (due == lease_armed_) return;
    lease_armed_ = due;
    if (due == Instant::max()) {
      lease_timer_.cancel();
      return;
    }
    lease_timer_.expires_at(to_steady(due));
    lease_timer_.async_wait([weak = weak_from_this(), due](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->lease_armed_ != due) return;
      self->lease_armed_ = Instant::max();
      self->run([&](lease::Actions& out) { self->manager_->on_timer(clock_now(), out); });
    });
  }

  // A DynamoDB call; `reply` gets the answer, or nullptr when none came
  // (timeout, connection lost or refused: the outcome is unknown).
  void call_dynamo(dynamo::Request request, DynamoReply reply) {
    ++counters_.dynamo_calls;
    const dynamo::Operation operation = dynamo::operation_of(request);
    DynamoHttpClient& client = *dynamo_[next_client_++ % dynamo_.size()];
    client.async_call(std::string{dynamo::operation_name(operation)}, dynamo::encode(request),
                      [weak = weak_from_this(), operation, reply = std::move(reply)](DynamoHttpResult result) {
      auto self = weak.lock();
      if (!self) return;
      if (!result.ok()) {
        ++self->counters_.dynamo_transport_errors;
        return reply(nullptr);
      }
      const DynamoHttpResponse& response = result.response();
      if (response.is_success()) {
        const dynamo::Result<dynamo::Response> decoded = dynamo::decode_response(operation, response.body);
        return reply(&decoded);
      }
      const dynamo::Result<dynamo::Response> error{dynamo::decode_error(response.body)};
      reply(&error);
    });
  }

  void apply(lease::Actions& actions) {
    for (lease::Action& action : actions) {
      if (auto* call = std::get_if<lease::DynamoCall>(&action)) {
        ++counters_.calls_by_kind[std::string{lease::to_string(call->kind)}];
        const uint64_t token = call->token;
        call_dynamo(std::move(call->request), [weak = weak_from_this(), token](const dynamo::Result<dynamo::Response>* r) {
          auto self = weak.lock();
          if (!self) return;
          self->run([&](lease::Actions& out) { self->manager_->on_reply(token, r, clock_now(), out); });
        });
      } else if (auto* open = std::get_if<lease::OpenSession>(&action)) {
        ++counters_.sessions_opened;
        event("lease.open", {{"connection", open->connection}, {"epoch", open->epoch},
                             {"resume_after", {{"epoch", open->stream_epoch}, {"seq", open->last_seq}}}});
        open_stream(*open);
      } else if (auto* close = std::get_if<lease::CloseSession>(&action)) {
        ++counters_.sessions_closed;
        ++counters_.closes_by_reason[std::string{lease::to_string(close->reason)}];
        event("lease.close", {{"connection", close->connection}, {"epoch", close->epoch},
                              {"reason", lease::to_string(close->reason)}});
        close_stream(close->connection);
      } else if (auto* notify = std::get_if<lease::NotifyReleased>(&action)) {
        event("lease.released", {{"connection", notify->connection}});
      } else if (std::holds_alternative<lease::DrainComplete>(action)) {
        event("worker.drained", {});
        asio::post(io_, [weak = weak_from_this()] {
          if (auto self = weak.lock()) self->finish_drain();
        });
      } else if (auto* mark = std::get_if<lease::Mark>(&action)) {
        ++counters_.marks[mark->name];
      }
    }
    actions.clear();
  }

  void finish_drain() {
    drain_timer_.cancel();
    if (auto done = std::move(drained_)) {
      drained_ = nullptr;
      done();
    }
  }

  void open_stream(const lease::OpenSession& open) {
    LP_ASSERT_MSG(!streams_.contains(open.connection), "stream {} opened twice", open.connection);
    Stream& stream = streams_[open.connection];
    const resume::Position recorded{static_cast<uint64_t>(std::max<int64_t>(0, open.stream_epoch)), open.last_seq};
    stream.session = std::make_unique<resume::StreamSession>(options_.session, options_.lease, open.connection,
                                                             options_.worker_id, open.epoch, recorded, random_);
    stream.timer = std::make_unique<asio::steady_timer>(io_);
    stream.generation = ++generation_;
    urls_[open.connection] = options_.hub_override.empty() ? open.ws_url : options_.hub_override;
    run_stream(open.connection, [&](resume::SessionActions& out) { stream.session->start(monotonic_now(), out); });
  }

  void close_stream(const std::string& connection) {
    const auto found = streams_.find(connection);
    if (found == streams_.end()) return;
    if (found->second.link) found->second.link->close(resume::close_code::normal);
    found->second.timer->cancel();
    streams_.erase(found);
  }

  // Runs one step of a stream's session and carries out its actions.
  template <typename Step>
  void run_stream(const std::string& connection, Step step) {
    auto found = streams_.find(connection);
    if (found == streams_.end()) return;
    resume::SessionActions actions;
    step(actions);
    apply_stream(connection, actions);
    found = streams_.find(connection);  // a step never closes its own stream, but stay safe
    if (found != streams_.end()) rearm_stream_timer(connection, found->second);
  }

  void rearm_stream_timer(const std::string& connection, Stream& stream) {
    const Instant due = stream.session->next_deadline();
    if (due == stream.armed) return;
    stream.armed = due;
    if (due == Instant::max()) {
      stream.timer->cancel();
      return;
    }
    stream.timer->expires_at(to_steady(due));
    stream.timer->async_wait([weak = weak_from_this(), connection, generation = stream.generation,
                              due](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      self->expire_leases();
      const auto found = self->streams_.find(connection);
      if (found == self->streams_.end() || found->second.generation != generation || found->second.armed != due) return;
      found->second.armed = Instant::max();
      self->run_stream(connection,
                       [&](resume::SessionActions& out) { found->second.session->on_timer(monotonic_now(), out); });
    });
  }

  void apply_stream(const std::string& connection, resume::SessionActions& actions) {
    const auto found = streams_.find(connection);
    if (found == streams_.end()) return;
    Stream& stream = found->second;
    const uint64_t generation = stream.generation;
    for (resume::SessionAction& action : actions) {
      if (auto* connect = std::get_if<resume::Connect>(&action)) {
        if (stream.link) stream.link->drop();
        auto url = parse_ws_url(urls_[connection]);
        if (auto* error = std::get_if<std::string>(&url)) {
          // A lease item whose ws_url this runtime cannot dial: the session
          // sees a dropped connection and backs off.
          event("stream.bad_url", {{"connection", connection}, {"error", *error}});
          asio::post(io_, [weak = weak_from_this(), connection, generation] {
            if (auto self = weak.lock()) self->on_stream_closed(connection, generation, resume::close_code::abnormal);
          });
          continue;
        }
        WsLink::Handlers handlers;
        handlers.on_text = [weak = weak_from_this(), connection, generation](std::string_view text) {
          if (auto self = weak.lock()) self->on_stream_text(connection, generation, text);
        };
        handlers.on_closed = [weak = weak_from_this(), connection, generation](uint16_t code) {
          if (auto self = weak.lock()) self->on_stream_closed(connection, generation, code);
        };
        stream.link = std::make_unique<WsLink>(io_, std::get<WsUrl>(url), encode_subscribe(connect->subscribe),
                                               Duration::from_s(5), std::move(handlers));
      } else if (auto* pong = std::get_if<resume::SendPong>(&action)) {
        if (stream.link) stream.link->send(encode_pong(pong->pong));
      } else if (std::holds_alternative<resume::CloseConnection>(action)) {
        if (stream.link) stream.link->drop();
        stream.link.reset();
      } else if (auto* call = std::get_if<resume::SinkCall>(&action)) {
        ++counters_.calls_by_kind[fmt::format("sink_{}", call->kind)];
        const uint64_t token = call->token;
        call_dynamo(std::move(call->request), [weak = weak_from_this(), connection, generation,
                                               token](const dynamo::Result<dynamo::Response>* r) {
          auto self = weak.lock();
          if (!self) return;
          self->expire_leases();
          const auto it = self->streams_.find(connection);
          if (it == self->streams_.end() || it->second.generation != generation) return;
          self->run_stream(connection, [&](resume::SessionActions& out) {
            it->second.session->on_sink_reply(token, r, monotonic_now(), out);
          });
        });
      } else if (auto* recorded = std::get_if<resume::Recorded>(&action)) {
        counters_.records += recorded->messages;
        event("resume.recorded", {{"connection", connection},
                                  {"lease_epoch", stream.session->lease_epoch()},
                                  {"after", {{"epoch", recorded->previous.epoch}, {"seq", recorded->previous.seq}}},
                                  {"through", {{"epoch", recorded->through.epoch}, {"seq", recorded->through.seq}}}});
      } else if (std::holds_alternative<resume::Fenced>(action)) {
        ++counters_.fenced;
        event("resume.fenced", {{"connection", connection}, {"lease_epoch", stream.session->lease_epoch()}});
      } else if (auto* reset = std::get_if<resume::ResetSeen>(&action)) {
        ++counters_.resets;
        event("resume.reset", {{"connection", connection}, {"kind", resume::to_string(reset->reset.kind)},
                               {"after", {{"epoch", reset->reset.after.epoch}, {"seq", reset->reset.after.seq}}},
                               {"resume", {{"epoch", reset->reset.resume.epoch}, {"seq", reset->reset.resume.seq}}}});
      } else if (auto* give_up = std::get_if<resume::GiveUp>(&action)) {
        event("resume.give_up", {{"connection", connection}, {"code", give_up->code}});
      } else if (auto* mark = std::get_if<resume::ClientMark>(&action)) {
        ++counters_.marks[mark->name];
      }
    }
    actions.clear();
  }

  void on_stream_text(const std::string& connection, uint64_t generation, std::string_view text) {
    expire_leases();
    const auto found = streams_.find(connection);
    if (found == streams_.end() || found->second.generation != generation) return;
    auto decoded = decode_hub_frame(text);
    if (const auto* error = std::get_if<WireError>(&decoded)) {
      event("stream.protocol_error", {{"connection", connection}, {"error", error->message}});
      if (found->second.link) found->second.link->drop();
      found->second.link.reset();
      return run_stream(connection, [&](resume::SessionActions& out) {
        found->second.session->on_closed(resume::close_code::protocol_error, monotonic_now(), out);
      });
    }
    const WireHubFrame& wire = std::get<WireHubFrame>(decoded);
    run_stream(connection,
               [&](resume::SessionActions& out) { found->second.session->on_frame(wire.frame, monotonic_now(), out); });
  }

  void on_stream_closed(const std::string& connection, uint64_t generation, uint16_t code) {
    expire_leases();
    const auto found = streams_.find(connection);
    if (found == streams_.end() || found->second.generation != generation) return;
    found->second.link.reset();
    run_stream(connection,
               [&](resume::SessionActions& out) { found->second.session->on_closed(code, monotonic_now(), out); });
  }

  asio::io_context& io_;
  WorkerOptions options_;
  std::function<void(std::string_view)> log_;
  OsRandom random_;
  FaultHook faults_;  // no fault sites fire in a real process
  std::vector<std::unique_ptr<DynamoHttpClient>> dynamo_;
  std::size_t next_client_ = 0;
  std::unique_ptr<lease::LeaseManager> manager_;
  asio::steady_timer lease_timer_;
  Instant lease_armed_ = Instant::max();
  asio::steady_timer drain_timer_;
  bool draining_ = false;
  std::function<void()> drained_;
  std::unordered_map<std::string, Stream> streams_;
  std::unordered_map<std::string, std::string> urls_;
  uint64_t generation_ = 0;
  WorkerCounters counters_;
};

Worker::Worker(asio::io_context& io, WorkerOptions options, std::function<void(std::string_view)> log)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(log))) {}
Worker::~Worker() = default;
void Worker::start() { impl_->start(); }
void Worker::drain(std::function<void()> done) { impl_->drain(std::move(done)); }
const WorkerCounters& Worker::counters() const { return impl_->counters(); }
std::size_t Worker::owned() const { return impl_->owned(); }
bool Worker::draining() const { return impl_->draining(); }
std::string Worker::metrics_text() const { return impl_->metrics_text(); }

}  // namespace leaseproof::runtime
