// A worker process (worker.hpp): a LeaseHost whose gained connections each
// stream from the hub and record into the sink, fenced by the lease epoch.
#include "runtime/worker/worker.hpp"

#include <optional>
#include <unordered_map>
#include <variant>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/assert.hpp"
#include "runtime/clock.hpp"
#include "runtime/os_random.hpp"
#include "runtime/prometheus.hpp"
#include "runtime/hub/resume_wire.hpp"
#include "runtime/worker/ws_link.hpp"

namespace leaseproof::runtime {

namespace asio = boost::asio;

class Worker::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, WorkerOptions options, std::function<void(std::string_view)> log)
      : io_(io), options_(std::move(options)), log_(std::move(log)),
        random_(options_.host.seed != 0 ? options_.host.seed + 1 : 0) {
    if (std::string e = options_.session.client.validate(); !e.empty()) throw std::invalid_argument(e);
    if (!options_.hub_override.empty()) {
      auto url = parse_ws_url(options_.hub_override);
      if (auto* error = std::get_if<std::string>(&url)) throw std::invalid_argument("--hub: " + *error);
    }
    options_.host.sink = options_.session.sink;
  }

  // After construction (the callbacks hold a weak pointer to this).
  void init() {
    LeaseHostCallbacks callbacks;
    callbacks.gained = [weak = weak_from_this()](const OwnedConnectionPtr& owned) {
      if (auto self = weak.lock()) self->open_stream(owned);
    };
    callbacks.stopped = [weak = weak_from_this()](const OwnedConnectionPtr& owned, StopReason) {
      if (auto self = weak.lock()) self->close_stream(owned->connection());
    };
    callbacks.log = log_;
    host_ = std::make_unique<LeaseHost>(io_, options_.host, std::move(callbacks));
  }

  void start() { host_->start(); }
  void drain(std::function<void()> done) { host_->drain(std::move(done)); }
  const LeaseHostCounters& host_counters() const { return host_->counters(); }
  const WorkerCounters& counters() const { return counters_; }
  std::size_t owned() const { return host_->owned(); }
  bool draining() const { return host_->draining(); }
  std::string readiness() const { return host_->readiness(); }

  std::string metrics_text() const {
    std::string out = host_->metrics_text();
    append_metric(out, "leaseproof_worker_records_total", "counter", "Messages the sink confirmed.", counters_.records);
    append_metric(out, "leaseproof_worker_fenced_total", "counter", "Sessions whose sink refused a write for good.",
                  counters_.fenced);
    append_metric(out, "leaseproof_worker_resets_total", "counter", "Typed resets seen.", counters_.resets);
    return out;
  }

 private:
  struct Stream {
    OwnedConnectionPtr owned;
    std::string url;  // the upstream: the lease item's ws_url, or --hub
    std::unique_ptr<resume::StreamSession> session;
    std::unique_ptr<WsLink> link;
    std::unique_ptr<asio::steady_timer> timer;
    Instant armed = Instant::max();
    uint64_t generation = 0;
  };

  // A connection gained: its stream resumes after the acquire's checkpoint.
  void open_stream(const OwnedConnectionPtr& owned) {
    const std::string& connection = owned->connection();
    LP_ASSERT_MSG(!streams_.contains(connection), "stream {} opened twice", connection);
    Stream& stream = streams_[connection];
    stream.owned = owned;
    stream.session = std::make_unique<resume::StreamSession>(options_.session, options_.host.lease, connection,
                                                             options_.host.worker_id, owned->epoch(),
                                                             owned->checkpoint(), random_);
    stream.timer = std::make_unique<asio::steady_timer>(io_);
    stream.generation = ++generation_;
    stream.url = options_.hub_override.empty() ? owned->ws_url() : options_.hub_override;
    run_stream(connection, [&](resume::SessionActions& out) { stream.session->start(monotonic_now(), out); });
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
      self->host_->expire();
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
        auto url = parse_ws_url(stream.url);
        if (auto* parsed = std::get_if<WsUrl>(&url)) {
          // Names this session in the hub's session records (hub --sessions):
          // which worker (and which process of it), under which lease epoch.
          parsed->add_param("worker", options_.host.worker_id);
          parsed->add_param("process", std::to_string(host_->process_incarnation()));
          parsed->add_param("lease_epoch", std::to_string(stream.session->lease_epoch()));
        }
        if (auto* error = std::get_if<std::string>(&url)) {
          // A lease item whose ws_url this runtime cannot dial: the session
          // sees a dropped connection and backs off.
          host_->event("stream.bad_url", {{"connection", connection}, {"error", *error}});
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
        // Why the upstream could not be reached (refused, a certificate the
        // worker does not trust): one line per attempt, as the session's
        // reconnect backoff paces them.
        handlers.on_failed = [weak = weak_from_this(), connection](std::string_view why) {
          if (auto self = weak.lock()) self->host_->event("stream.connect_error", {{"connection", connection}, {"error", why}});
        };
        stream.link = std::make_unique<WsLink>(io_, std::get<WsUrl>(url), encode_subscribe(connect->subscribe),
                                               Duration::from_s(5), std::move(handlers), options_.host.dynamo.tls_context);
      } else if (auto* pong = std::get_if<resume::SendPong>(&action)) {
        if (stream.link) stream.link->send(encode_pong(pong->pong));
      } else if (std::holds_alternative<resume::CloseConnection>(action)) {
        if (stream.link) stream.link->drop();
        stream.link.reset();
      } else if (auto* call = std::get_if<resume::SinkCall>(&action)) {
        const uint64_t token = call->token;
        stream.owned->call(fmt::format("sink_{}", call->kind), std::move(call->request), [weak = weak_from_this(), connection, generation,
                                               token](const dynamo::Result<dynamo::Response>* r) {
          auto self = weak.lock();
          if (!self) return;
          self->host_->expire();
          const auto it = self->streams_.find(connection);
          if (it == self->streams_.end() || it->second.generation != generation) return;
          self->run_stream(connection, [&](resume::SessionActions& out) {
            it->second.session->on_sink_reply(token, r, monotonic_now(), out);
          });
        });
      } else if (auto* recorded = std::get_if<resume::Recorded>(&action)) {
        counters_.records += recorded->messages;
        host_->event("resume.recorded", {{"connection", connection},
                                  {"lease_epoch", stream.session->lease_epoch()},
                                  {"after", {{"epoch", recorded->previous.epoch}, {"seq", recorded->previous.seq}}},
                                  {"through", {{"epoch", recorded->through.epoch}, {"seq", recorded->through.seq}}}});
      } else if (std::holds_alternative<resume::Fenced>(action)) {
        ++counters_.fenced;
        host_->event("resume.fenced", {{"connection", connection}, {"lease_epoch", stream.session->lease_epoch()}});
      } else if (auto* reset = std::get_if<resume::ResetSeen>(&action)) {
        ++counters_.resets;
        host_->event("resume.reset", {{"connection", connection}, {"kind", resume::to_string(reset->reset.kind)},
                               {"after", {{"epoch", reset->reset.after.epoch}, {"seq", reset->reset.after.seq}}},
                               {"resume", {{"epoch", reset->reset.resume.epoch}, {"seq", reset->reset.resume.seq}}}});
      } else if (auto* give_up = std::get_if<resume::GiveUp>(&action)) {
        host_->event("resume.give_up", {{"connection", connection}, {"code", give_up->code}});
      } else if (auto* mark = std::get_if<resume::ClientMark>(&action)) {
        host_->mark(mark->name);
      }
    }
    actions.clear();
  }

  void on_stream_text(const std::string& connection, uint64_t generation, std::string_view text) {
    host_->expire();
    const auto found = streams_.find(connection);
    if (found == streams_.end() || found->second.generation != generation) return;
    auto decoded = decode_hub_frame(text);
    if (const auto* error = std::get_if<WireError>(&decoded)) {
      host_->event("stream.protocol_error", {{"connection", connection}, {"error", error->message}});
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
    host_->expire();
    const auto found = streams_.find(connection);
    if (found == streams_.end() || found->second.generation != generation) return;
    found->second.link.reset();
    run_stream(connection,
               [&](resume::SessionActions& out) { found->second.session->on_closed(code, monotonic_now(), out); });
  }

  asio::io_context& io_;
  WorkerOptions options_;
  std::function<void(std::string_view)> log_;
  OsRandom random_;  // the sessions' reconnect jitter
  std::unique_ptr<LeaseHost> host_;
  std::unordered_map<std::string, Stream> streams_;
  uint64_t generation_ = 0;
  WorkerCounters counters_;
};

Worker::Worker(asio::io_context& io, WorkerOptions options, std::function<void(std::string_view)> log)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(log))) {
  impl_->init();
}
Worker::~Worker() = default;
void Worker::start() { impl_->start(); }
void Worker::drain(std::function<void()> done) { impl_->drain(std::move(done)); }
const LeaseHostCounters& Worker::host_counters() const { return impl_->host_counters(); }
const WorkerCounters& Worker::counters() const { return impl_->counters(); }
std::size_t Worker::owned() const { return impl_->owned(); }
bool Worker::draining() const { return impl_->draining(); }
std::string Worker::readiness() const { return impl_->readiness(); }
std::string Worker::metrics_text() const { return impl_->metrics_text(); }

}  // namespace leaseproof::runtime
