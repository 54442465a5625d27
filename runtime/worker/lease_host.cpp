// The embeddable runtime (lease_host.hpp): the lease manager's actions carried
// out on real sockets and timers, and its sessions handed to the application.
#include "runtime/worker/lease_host.hpp"

#include <cmath>
#include <optional>
#include <random>
#include <unordered_map>
#include <variant>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "base/assert.hpp"
#include "core/dynamo/codec.hpp"
#include "core/lease/manager.hpp"
#include "runtime/clock.hpp"
#include "runtime/os_random.hpp"
#include "runtime/prometheus.hpp"
#include "runtime/aws/sqs_client.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;

lease::Clock clock_now() { return lease::Clock{Instant::from_ns(wall_now_ns()), monotonic_now()}; }

// The capacity an operation consumes ("read" or "write"), or nullptr when it
// takes no ReturnConsumedCapacity.
const char* capacity_kind(dynamo::Operation operation) {
  switch (operation) {
    case dynamo::Operation::get_item:
    case dynamo::Operation::query:
      return "read";
    case dynamo::Operation::put_item:
    case dynamo::Operation::update_item:
    case dynamo::Operation::delete_item:
    case dynamo::Operation::batch_write_item:
    case dynamo::Operation::transact_write_items:
      return "write";
    case dynamo::Operation::create_table:
      return nullptr;
  }
  return nullptr;
}

// Thousandths of a unit; nullopt unless a finite number >= 0.
std::optional<uint64_t> capacity_milliunits(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  const double units = it->get<double>();
  if (!std::isfinite(units) || units < 0 || units > 1e12) return std::nullopt;
  return static_cast<uint64_t>(std::llround(units * 1000));
}

// Adds an answer's ConsumedCapacity (one object, or a list for the batch and
// transaction operations) to `out`: ReadCapacityUnits and WriteCapacityUnits
// to their own kinds when the answer splits them, else CapacityUnits to the
// operation's kind.
void add_consumed_capacity(const nlohmann::json& body, const char* kind, std::map<std::string, uint64_t>& out) {
  const auto capacity = body.find("ConsumedCapacity");
  if (capacity == body.end()) return;
  auto add_one = [&](const nlohmann::json& entry) {
    if (!entry.is_object()) return;
    const auto read = capacity_milliunits(entry, "ReadCapacityUnits");
    const auto write = capacity_milliunits(entry, "WriteCapacityUnits");
    if (read || write) {
      out["read"] += read.value_or(0);
      out["write"] += write.value_or(0);
    } else if (const auto total = capacity_milliunits(entry, "CapacityUnits")) {
      out[kind] += *total;
    }
  };
  if (capacity->is_array()) {
    for (const nlohmann::json& entry : *capacity) add_one(entry);
  } else {
    add_one(*capacity);
  }
}

// "12.345" from 12345 thousandths.
std::string format_milliunits(uint64_t milliunits) {
  return fmt::format("{}.{:03}", milliunits / 1000, milliunits % 1000);
}

}  // namespace

std::string_view to_string(WriteOutcome outcome) {
  switch (outcome) {
    case WriteOutcome::written: return "written";
    case WriteOutcome::fenced: return "fenced";
    case WriteOutcome::stopped: return "stopped";
    case WriteOutcome::unknown: return "unknown";
    case WriteOutcome::failed: return "failed";
  }
  LP_UNREACHABLE("write outcome {}", static_cast<int>(outcome));
}

class LeaseHostImpl : public std::enable_shared_from_this<LeaseHostImpl> {
 public:
  LeaseHostImpl(asio::io_context& io, LeaseHostOptions options, LeaseHostCallbacks callbacks)
      : io_(io), options_(std::move(options)), callbacks_(std::move(callbacks)), random_(options_.seed),
        lease_timer_(io), drain_timer_(io) {
    if (options_.worker_id.empty()) throw std::invalid_argument("--worker-id: must not be empty");
    if (std::string e = options_.lease.validate(); !e.empty()) throw std::invalid_argument(e);
    if (options_.sink.name.empty()) throw std::invalid_argument("sink: the sink table's name must not be empty");
    options_.dynamo.request_timeout = options_.lease.request_timeout;
    for (std::size_t i = 0; i < std::max<std::size_t>(1, options_.dynamo_connections); ++i) {
      dynamo_.push_back(std::make_unique<DynamoHttpClient>(io, options_.dynamo));
    }
    manager_ = std::make_unique<lease::LeaseManager>(options_.lease, options_.worker_id, random_, faults_);
    // From the operating system whatever --seed says: two processes started
    // with one worker id (and one seed) must still be two owners.
    std::random_device entropy;
    const uint64_t drawn = (uint64_t{entropy()} << 32) ^ entropy();
    manager_->set_process_incarnation(
        1 + static_cast<int64_t>(drawn % static_cast<uint64_t>(lease::LeaseManager::kProcessIncarnationMax)));
    counters_.consumed_capacity_milliunits = {{"read", 0}, {"write", 0}};
    setup_release_notices();
  }

  // The host is going away: no callback runs after this.
  void detach() {
    callbacks_ = {};
    lease_timer_.cancel();
    drain_timer_.cancel();
    release_timer_.cancel();
  }

  void start() {
    // The configuration a lab's checker computes the recovery bounds from
    // (leaseproof check-real), in milliseconds.
    const lease::LeaseConfig& c = options_.lease;
    auto ms = [](Duration d) { return d.ns() / 1'000'000; };
    event("worker.start", {{"algorithm", lease::to_string(c.algorithm)},
                           {"expiry", lease::to_string(c.expiry_mode)},
                           {"lease_ms", ms(c.lease_duration)},
                           {"heartbeat_ms", ms(c.heartbeat_interval)},
                           {"margin_ms", ms(c.safety_margin)},
                           {"reconcile_ms", ms(c.reconcile_interval)},
                           {"reconcile_jitter_ms", ms(c.reconcile_jitter_max)},
                           {"watch_ms", ms(c.watch_interval)},
                           {"request_timeout_ms", ms(c.request_timeout)},
                           {"capacity", c.capacity}});
    run([&](lease::Actions& out) { manager_->start(clock_now(), out); });
    if (sqs_) poll_releases();
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

  const LeaseHostCounters& counters() const { return counters_; }
  std::size_t owned() const { return owned_.size(); }
  bool draining() const { return draining_; }
  int64_t process_incarnation() const { return manager_->process_incarnation(); }
  void mark(const std::string& name) { ++counters_.marks[name]; }

  std::string readiness() const {
    if (draining_) return "draining";
    if (!last_evaluated_) return "no answer from DynamoDB yet";
    if (options_.lease.algorithm == lease::Algorithm::liveness && manager_->incarnation() == 0) {
      return counters_.marks.contains("lease.liveness_join_waits_for_predecessor")
                 ? fmt::format("worker id '{}' is live in another process (or a predecessor not yet expired): "
                               "waiting for it",
                               options_.worker_id)
                 : fmt::format("claiming worker id '{}'", options_.worker_id);
    }
    const lease::LeaseConfig& c = options_.lease;
    const Duration window = owned_.empty() ? c.reconcile_interval + c.reconcile_jitter_max + c.request_timeout
                                           : c.lease_duration;
    const Duration since = monotonic_now() - *last_evaluated_;
    if (since <= window) return "";
    return fmt::format("no answer from DynamoDB for {} (at most {} allowed {})", since, window,
                       owned_.empty() ? "between an idle worker's calls" : "while owning connections: the lease");
  }

  std::string metrics_text() const {
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, uint64_t value) {
      append_metric(out, name, type, help, value);
    };
    metric("leaseproof_worker_active_connections", "gauge", "Connections this worker owns now.", owned_.size());
    metric("leaseproof_worker_draining", "gauge", "1 while draining after SIGTERM.", draining_ ? 1 : 0);
    metric("leaseproof_worker_dynamo_calls_total", "counter", "DynamoDB calls.", counters_.dynamo_calls);
    metric("leaseproof_worker_dynamo_ambiguous_total", "counter",
           "DynamoDB calls with no answer (timeout, lost or refused connection): outcome unknown.",
           counters_.dynamo_transport_errors);
    metric("leaseproof_worker_sessions_opened_total", "counter", "Sessions opened (leases acquired).",
           counters_.gained);
    append_labelled_counter(out, "leaseproof_worker_calls_total", "DynamoDB calls by kind.", "kind",
                            counters_.calls_by_kind);
    append_labelled_counter(out, "leaseproof_worker_closes_total", "Sessions closed, by reason.", "reason",
                            counters_.stops_by_reason);
    append_release_metrics(out);
    if (options_.credentials_stats) {
      const CredentialsChain::Stats refreshes = options_.credentials_stats();
      append_labelled_counter(out, "leaseproof_worker_credentials_refreshes_total",
                              "Refreshes of expiring credentials, by outcome (a failure keeps the old ones).",
                              "outcome",
                              std::map<std::string, uint64_t>{{"failed", refreshes.refreshes_failed},
                                                              {"succeeded", refreshes.refreshes_succeeded}});
    }
    append_labelled_counter(out, "leaseproof_worker_marks_total",
                            "The cores' coverage marks (takeovers, deadline stops, ...).", "name", counters_.marks);
    return out;
  }

  void event(std::string_view name, nlohmann::json fields) {
    if (!callbacks_.log) return;
    fields["t_ms"] = wall_now_ns() / 1'000'000;
    // Microseconds kept: a lab orders these lines against its own acts.
    fields["mono_ms"] = static_cast<double>(step_at_.value_or(monotonic_now()).ns() / 1'000) / 1e3;
    fields["worker"] = options_.worker_id;
    // Which process of that worker id: its leases' owner_incarnation.
    fields["process"] = manager_->process_incarnation();
    fields["event"] = name;
    callbacks_.log(fields.dump());
  }

  // Acts on lease deadlines that passed before touching anything else.
  void expire() {
    if (manager_->next_deadline() <= monotonic_now()) {
      run([&](lease::Actions& out) { manager_->on_timer(clock_now(), out); });
    }
  }

  // ---- what OwnedConnection asks for --------------------------------------

  const LeaseHostOptions& options() const { return options_; }

  void count_call(std::string_view kind) { ++counters_.calls_by_kind[std::string{kind}]; }

  // A DynamoDB call; `reply` gets the answer, or nullptr when none came
  // (timeout, connection lost or refused: the outcome is unknown).
  void call_dynamo(dynamo::Request request, DynamoReply reply) {
    ++counters_.dynamo_calls;
    const dynamo::Operation operation = dynamo::operation_of(request);
    DynamoHttpClient& client = *dynamo_[next_client_++ % dynamo_.size()];
    nlohmann::json body = dynamo::encode(request);
    // The WCU and RCU the fleet costs, from DynamoDB's own count.
    const char* kind = capacity_kind(operation);
    if (kind != nullptr && !body.contains("ReturnConsumedCapacity")) body["ReturnConsumedCapacity"] = "TOTAL";
    client.async_call(std::string{dynamo::operation_name(operation)}, std::move(body),
                      [weak = weak_from_this(), operation, kind, reply = std::move(reply)](DynamoHttpResult result) {
      auto self = weak.lock();
      if (!self) return;
      if (!result.ok()) {
        self->note_transport_error(result.error());
        return reply(nullptr);
      }
      const DynamoHttpResponse& response = result.response();
      if (response.is_success() || response.error_type() == "ConditionalCheckFailedException") {
        self->last_evaluated_ = monotonic_now();  // DynamoDB evaluated it: reachable (readiness)
      }
      // A failed condition consumes write capacity too (dynalite's answer
      // carries none; DynamoDB's may).
      if (kind != nullptr && (response.is_success() || response.error_type() == "ConditionalCheckFailedException")) {
        add_consumed_capacity(response.body, kind, self->counters_.consumed_capacity_milliunits);
      }
      if (response.is_success()) {
        const dynamo::Result<dynamo::Response> decoded = dynamo::decode_response(operation, response.body);
        return reply(&decoded);
      }
      const dynamo::Result<dynamo::Response> error{dynamo::decode_error(response.body)};
      reply(&error);
    });
  }

  asio::io_context& io() { return io_; }

 private:
  template <typename Step>
  void run(Step step) {
    // Every line of one step of the core carries the step's time: what one
    // call decided (all the sessions a resumed worker finds expired) is one
    // instant to a lab's checker, as it is to the simulator's.
    const bool outer = !step_at_;
    if (outer) step_at_ = monotonic_now();
    lease::Actions actions;
    step(actions);
    apply(actions);
    rearm_lease_timer();
    if (outer) step_at_.reset();
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

  // A DynamoDB request without an answer is logged, so that an endpoint that
  // cannot be reached (refused, an untrusted certificate) says why: at the
  // first error, whenever the reason changes, and at most once a
  // transport_error_log_interval otherwise, with the count it stands for.
  static constexpr Duration transport_error_log_interval = Duration::from_s(10);
  void note_transport_error(const TransportError& error) {
    ++counters_.dynamo_transport_errors;
    ++transport_errors_unlogged_;
    const Instant now = monotonic_now();
    if (error.detail == last_transport_error_ && transport_error_logged_at_ &&
        now < *transport_error_logged_at_ + transport_error_log_interval) {
      return;
    }
    event("dynamo.transport_error", {{"kind", std::string{to_string(error.kind)}},
                                     {"detail", error.detail},
                                     {"errors", transport_errors_unlogged_}});
    last_transport_error_ = error.detail;
    transport_error_logged_at_ = now;
    transport_errors_unlogged_ = 0;
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
        gain(*open);
      } else if (auto* close = std::get_if<lease::CloseSession>(&action)) {
        stop(*close);
      } else if (auto* notify = std::get_if<lease::NotifyReleased>(&action)) {
        event("lease.released", {{"connection", notify->connection}});
        send_release_notice(*notify);
      } else if (std::holds_alternative<lease::DrainComplete>(action)) {
        event("worker.drained", {});
        core_drained_ = true;
        finish_drain_when_sqs_idle();
      } else if (auto* mark = std::get_if<lease::Mark>(&action)) {
        // Liveness: this worker id's item names a live incarnation. Said
        // once per wait: another process runs with this id, or a predecessor
        // has not expired yet; either way this one waits (/readyz says so).
        const uint64_t times = counters_.marks[mark->name]++;
        if (std::string_view{mark->name} == "lease.liveness_join_waits_for_predecessor" &&
            times == counters_.marks["lease.liveness_joined"]) {
          event("worker.id_in_use", {{"message", fmt::format("worker id '{}' is live in another process (or a "
                                                             "predecessor that has not expired): waiting for it "
                                                             "to expire or drain before acquiring anything",
                                                             options_.worker_id)}});
        }
      } else if (auto* watch = std::get_if<lease::WatchChange>(&action)) {
        // A line per change (not per sweep): check-real judges a watched gap by the watcher's bound.
        ++counters_.marks[watch->armed ? "lease.watch" : "lease.unwatch"];
        event(watch->armed ? "lease.watch" : "lease.unwatch", {{"connection", watch->connection}});
      }
    }
    actions.clear();
  }

  void gain(const lease::OpenSession& open) {
    ++counters_.gained;
    event("lease.open", {{"connection", open.connection}, {"epoch", open.epoch},
                         {"resume_after", {{"epoch", open.stream_epoch}, {"seq", open.last_seq}}}});
    LP_ASSERT_MSG(!owned_.contains(open.connection), "connection {} gained twice", open.connection);
    auto owned = std::make_shared<OwnedConnection>();
    owned->host_ = weak_from_this();
    owned->connection_ = open.connection;
    owned->epoch_ = open.epoch;
    owned->ws_url_ = open.ws_url;
    owned->checkpoint_ = resume::Position{static_cast<uint64_t>(std::max<int64_t>(0, open.stream_epoch)), open.last_seq};
    owned_[open.connection] = owned;
    if (callbacks_.gained) callbacks_.gained(owned);
  }

  void stop(const lease::CloseSession& close) {
    ++counters_.stopped;
    ++counters_.stops_by_reason[std::string{lease::to_string(close.reason)}];
    event("lease.close", {{"connection", close.connection}, {"epoch", close.epoch},
                          {"reason", lease::to_string(close.reason)}});
    const auto found = owned_.find(close.connection);
    if (found == owned_.end()) return;
    const OwnedConnectionPtr owned = std::move(found->second);
    owned_.erase(found);
    owned->stopped_ = true;
    if (callbacks_.stopped) callbacks_.stopped(owned, close.reason);
  }

  void finish_drain() {
    drain_timer_.cancel();
    release_timer_.cancel();
    if (auto done = std::move(drained_)) {
      drained_ = nullptr;
      done();
    }
  }

  // ---- release notices over SQS (runtime/worker/worker.hpp says how they flow) ------------------------------

  void setup_release_notices() {
    if (options_.sqs_endpoint.empty() != options_.release_queue.empty()) {
      throw std::invalid_argument(options_.sqs_endpoint.empty() ? "--release-queue: goes with --sqs-endpoint"
                                                                : "--sqs-endpoint: goes with --release-queue");
    }
    if (options_.sqs_endpoint.empty()) return;
    if (!options_.release_queue.ends_with(".fifo")) {
      throw std::invalid_argument(fmt::format("--release-queue: '{}' is not a FIFO queue's name (NAME.fifo)",
                                              options_.release_queue));
    }
    if (options_.release_wait.is_negative() || options_.release_wait > kSqsWaitTimeMax ||
        !(options_.release_wait % Duration::from_s(1)).is_zero()) {
      throw std::invalid_argument("release_wait: whole seconds, 0..20s");
    }
    if (options_.release_poll_interval <= Duration::zero()) throw std::invalid_argument("release_poll_interval: > 0");
    SqsClientOptions sqs;
    sqs.endpoint_url = options_.sqs_endpoint;
    sqs.tls_context = options_.dynamo.tls_context;
    sqs.region = options_.dynamo.region;
    sqs.credentials = options_.dynamo.credentials;
    sqs.credentials_source = options_.dynamo.credentials_source;
    sqs.request_timeout = options_.lease.request_timeout;
    sqs.receive_wait_max = options_.release_wait;
    sqs_ = std::make_unique<SqsClient>(io_, std::move(sqs));
  }

  // The next receive (or, before the queue's URL is known, its look-up).
  void poll_releases_after(Duration delay) {
    release_timer_.expires_after(to_chrono(delay));
    release_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      self->poll_releases();
    });
  }

  void poll_releases() {
    if (draining_) return;
    if (release_queue_url_.empty()) return resolve_release_queue();
    expire();
    // Only the notices this worker can act on: at capacity, none (they stay
    // queued for a worker with room, or until this one has room again).
    const uint32_t room = manager_->room();
    if (room == 0) {
      ++counters_.marks["worker.release_poll_skipped_full"];
      return poll_releases_after(options_.release_poll_interval);
    }
    const SqsReceiveRequest request{std::min(room, kSqsReceiveMessagesMax), options_.release_visibility,
                                    options_.release_wait};
    ++sqs_in_flight_;
    receive_sent_at_ = monotonic_now();
    sqs_->receive_message(release_queue_url_, request,
                          [weak = weak_from_this()](SqsResult<std::vector<SqsMessage>> result) {
      if (auto self = weak.lock()) self->on_release_notices(result);
    });
  }

  void resolve_release_queue() {
    ++sqs_in_flight_;
    sqs_->get_queue_url(options_.release_queue, [weak = weak_from_this()](SqsResult<std::string> result) {
      auto self = weak.lock();
      if (!self) return;
      --self->sqs_in_flight_;
      if (result.ok()) {
        self->release_queue_url_ = result.value();
        self->event("release.queue", {{"queue", self->options_.release_queue}, {"url", result.value()}});
      } else {
        ++self->counters_.sqs_errors;
        self->event("release.queue_error",
                    {{"queue", self->options_.release_queue}, {"error", result.error().describe()}});
      }
      if (self->draining_) return self->finish_drain_when_sqs_idle();
      self->poll_releases_after(result.ok() ? Duration::zero() : self->options_.release_poll_interval);
    });
  }

  void on_release_notices(const SqsResult<std::vector<SqsMessage>>& result) {
    --sqs_in_flight_;
    expire();
    if (result.ok()) {
      for (const SqsMessage& message : result.value()) take_release_notice(message);
    } else {
      ++counters_.sqs_errors;
      event("release.receive_error", {{"error", result.error().describe()}});
    }
    if (draining_) return finish_drain_when_sqs_idle();
    // A non-empty answer may have left more behind, and a long poll's empty
    // answer after its wait ran out means the queue is quiet: either way, ask
    // again at once. An empty answer much sooner than the wait (a server that
    // does not long-poll answered at once) waits the poll interval, or the
    // worker would ask thousands of times a second.
    const bool waited = monotonic_now() - receive_sent_at_ >= options_.release_wait / 2;
    const bool again = result.ok() && (!result.value().empty() || (options_.release_wait > Duration::zero() && waited));
    if (result.ok() && result.value().empty() && options_.release_wait > Duration::zero() && !waited) {
      ++counters_.marks["worker.release_poll_answered_early"];
    }
    poll_releases_after(again ? Duration::zero() : options_.release_poll_interval);
  }

  // Acted on: deleted. Not taken (no room since the receive, draining):
  // handed back at once for another worker instead of waiting out the
  // visibility timeout.
  void take_release_notice(const SqsMessage& message) {
    ++counters_.release_notices_received;
    const std::string& connection = message.body;
    bool taken = false;
    if (!draining_ && !connection.empty()) {
      run([&](lease::Actions& out) { taken = manager_->on_released(connection, clock_now(), out); });
    }
    nlohmann::json fields = {{"connection", connection}, {"taken", taken},
                             {"deduplication_id", message.deduplication_id}, {"receive_count", message.receive_count}};
    if (!taken) fields["reason"] = draining_ ? "draining" : connection.empty() ? "empty" : "no_room";
    event("release.received", std::move(fields));
    // An empty notice names nothing: nobody can act on it.
    if (taken || connection.empty()) {
      if (taken) ++counters_.release_notices_taken;
      return settle_release_notice("DeleteMessage", message, [&](SqsDoneHandler done) {
        sqs_->delete_message(release_queue_url_, message.receipt_handle, std::move(done));
      });
    }
    ++counters_.release_notices_handed_back;
    settle_release_notice("ChangeMessageVisibility", message, [&](SqsDoneHandler done) {
      sqs_->change_message_visibility(release_queue_url_, message.receipt_handle, Duration::zero(), std::move(done));
    });
  }

  template <typename Start>
  void settle_release_notice(const char* operation, const SqsMessage& message, Start start) {
    ++sqs_in_flight_;
    start([weak = weak_from_this(), operation, connection = message.body](SqsResult<SqsDone> result) {
      auto self = weak.lock();
      if (!self) return;
      --self->sqs_in_flight_;
      if (!result.ok()) {
        ++self->counters_.sqs_errors;
        self->event("release.settle_error",
                    {{"connection", connection}, {"operation", operation}, {"error", result.error().describe()}});
      }
      self->finish_drain_when_sqs_idle();
    });
  }

  // Group = connection (a connection's notices stay in order); the core's
  // deduplication id names this release (connection, epoch, worker, process),
  // so only a resend of the same notice is dropped, never a later release.
  void send_release_notice(const lease::NotifyReleased& notice) {
    const std::string& connection = notice.connection;
    if (!sqs_) return;
    if (release_queue_url_.empty()) {
      ++counters_.release_notice_send_errors;
      event("release.send_error", {{"connection", connection}, {"error", "the release queue's URL is not known yet"}});
      return;
    }
    std::string deduplication_id = notice.deduplication_id;
    if (deduplication_id.size() > kSqsIdCharsMax) deduplication_id = sha256_hex(deduplication_id);
    ++sqs_in_flight_;
    sqs_->send_message(release_queue_url_, SqsSendRequest{connection, deduplication_id, connection},
                       [weak = weak_from_this(), connection, deduplication_id](SqsResult<SqsSent> result) {
      auto self = weak.lock();
      if (!self) return;
      --self->sqs_in_flight_;
      if (result.ok()) {
        ++self->counters_.release_notices_sent;
        self->event("release.sent", {{"connection", connection}, {"deduplication_id", deduplication_id},
                                     {"sequence_number", result.value().sequence_number}});
      } else {
        ++self->counters_.release_notice_send_errors;
        self->event("release.send_error", {{"connection", connection}, {"error", result.error().describe()}});
      }
      self->finish_drain_when_sqs_idle();
    });
  }

  // After the core's DrainComplete: finish once no SQS call is in flight (a
  // notice being sent, a receive whose messages would otherwise stay
  // invisible for their visibility timeout). drain_timeout still bounds it.
  void finish_drain_when_sqs_idle() {
    if (!core_drained_) return;
    if (sqs_in_flight_ > 0) {
      if (!drain_waits_logged_) {
        drain_waits_logged_ = true;
        ++counters_.marks["worker.exit_waits_for_sqs"];
        event("worker.drain_waits_for_sqs", {{"in_flight", sqs_in_flight_}});
      }
      return;
    }
    asio::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->finish_drain();
    });
  }

  void append_release_metrics(std::string& out) const {
    out += "# HELP leaseproof_worker_dynamo_consumed_capacity_units_total DynamoDB capacity units consumed "
           "(ReturnConsumedCapacity TOTAL), by kind.\n"
           "# TYPE leaseproof_worker_dynamo_consumed_capacity_units_total counter\n";
    for (const auto& [kind, milliunits] : counters_.consumed_capacity_milliunits) {
      out += fmt::format("leaseproof_worker_dynamo_consumed_capacity_units_total{{kind=\"{}\"}} {}\n", kind,
                         format_milliunits(milliunits));
    }
    if (!sqs_) return;
    auto metric = [&](const char* name, const char* help, uint64_t value) {
      append_metric(out, name, "counter", help, value);
    };
    metric("leaseproof_worker_release_notices_sent_total", "Release notices sent to the queue.",
           counters_.release_notices_sent);
    metric("leaseproof_worker_release_notice_send_errors_total",
           "Release notices not sent (or outcome unknown): reconcile finds those connections.",
           counters_.release_notice_send_errors);
    metric("leaseproof_worker_release_notices_received_total", "Release notices received.",
           counters_.release_notices_received);
    metric("leaseproof_worker_release_notices_taken_total", "Release notices the lease manager acted on.",
           counters_.release_notices_taken);
    metric("leaseproof_worker_release_notices_handed_back_total",
           "Release notices not taken (no room, draining), made visible again for another worker.",
           counters_.release_notices_handed_back);
    metric("leaseproof_worker_sqs_errors_total", "Receives, deletes, hand-backs and queue look-ups that failed.",
           counters_.sqs_errors);
  }

  asio::io_context& io_;
  LeaseHostOptions options_;
  LeaseHostCallbacks callbacks_;
  OsRandom random_;
  FaultHook faults_;  // no fault sites fire in a real process
  std::vector<std::unique_ptr<DynamoHttpClient>> dynamo_;
  std::size_t next_client_ = 0;
  std::unique_ptr<lease::LeaseManager> manager_;
  asio::steady_timer lease_timer_;
  Instant lease_armed_ = Instant::max();
  asio::steady_timer drain_timer_;
  bool draining_ = false;
  std::optional<Instant> last_evaluated_;  // the last DynamoDB answer that evaluated a request (readiness)
  std::function<void()> drained_;
  std::unordered_map<std::string, OwnedConnectionPtr> owned_;
  std::optional<Instant> step_at_;  // while run() carries out one step of the lease core
  LeaseHostCounters counters_;
  // Release notices (null sqs_: none).
  std::unique_ptr<SqsClient> sqs_;
  std::string release_queue_url_;  // empty until GetQueueUrl answered
  asio::steady_timer release_timer_{io_};
  uint64_t sqs_in_flight_ = 0;     // SQS calls not answered yet: a drain waits for them
  Instant receive_sent_at_;        // the last ReceiveMessage, on the monotonic clock
  bool core_drained_ = false;      // the core said DrainComplete
  bool drain_waits_logged_ = false;
  // The last DynamoDB transport error logged, when, and how many since.
  std::string last_transport_error_;
  std::optional<Instant> transport_error_logged_at_;
  uint64_t transport_errors_unlogged_ = 0;
};

// ---- OwnedConnection -------------------------------------------------------

bool OwnedConnection::acting() {
  if (stopped_) return false;
  if (auto host = host_.lock()) host->expire();  // may stop this one
  return !stopped_;
}

namespace {

// `done(outcome)` on the io_context, never inside the caller's call.
void post_outcome(asio::io_context& io, std::function<void(WriteOutcome)> done, WriteOutcome outcome) {
  asio::post(io, [done = std::move(done), outcome] { done(outcome); });
}

WriteOutcome outcome_of(const dynamo::Result<dynamo::Response>* reply) {
  if (reply == nullptr) return WriteOutcome::unknown;
  if (reply->ok()) return WriteOutcome::written;
  return reply->error().type == dynamo::error_type::conditional_check_failed ? WriteOutcome::fenced
                                                                               : WriteOutcome::failed;
}

}  // namespace

void OwnedConnection::checkpoint(resume::Position through, std::function<void(WriteOutcome)> done) {
  auto host = host_.lock();
  if (!host) return;
  if (!acting()) return post_outcome(host->io(), std::move(done), WriteOutcome::stopped);
  if (!resume::before(checkpoint_, through)) {
    // Already there: nothing to write.
    return post_outcome(host->io(), std::move(done), WriteOutcome::written);
  }
  const LeaseHostOptions& options = host->options();
  dynamo::Request request = resume::checkpoint_position(options.lease, connection_, options.worker_id, epoch_,
                                                        checkpoint_, through);
  // A refusal answered with the item shows whether an earlier attempt applied.
  std::get<dynamo::UpdateItemRequest>(request).write.return_values_on_condition_check_failure =
      dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  host->count_call("sink_checkpoint");
  host->call_dynamo(std::move(request), [weak = std::weak_ptr<OwnedConnection>{shared_from_this()}, through,
                                         worker = options.worker_id,
                                         done = std::move(done)](const dynamo::Result<dynamo::Response>* reply) {
    auto self = weak.lock();
    WriteOutcome outcome = outcome_of(reply);
    if (self && outcome == WriteOutcome::fenced &&
        resume::checkpoint_applied(reply->error().item, worker, self->epoch_, through)) {
      outcome = WriteOutcome::written;
    }
    if (self && outcome == WriteOutcome::written && resume::before(self->checkpoint_, through)) {
      self->checkpoint_ = through;
    }
    done(outcome);
  });
}

struct OwnedConnection::Recording {
  std::vector<resume::Message> messages;
  std::size_t next = 0;
  std::function<void(WriteOutcome)> done;
};

void OwnedConnection::record(std::vector<resume::Message> messages, std::function<void(WriteOutcome)> done) {
  auto host = host_.lock();
  if (!host) return;
  if (!acting()) return post_outcome(host->io(), std::move(done), WriteOutcome::stopped);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const resume::Position previous = i == 0 ? checkpoint_ : resume::position_of(messages[i - 1]);
    if (!resume::before(previous, resume::position_of(messages[i]))) {
      throw std::invalid_argument(fmt::format("record: message {}.{} is not after {}.{}", messages[i].epoch,
                                              messages[i].seq, previous.epoch, previous.seq));
    }
  }
  if (messages.empty()) return post_outcome(host->io(), std::move(done), WriteOutcome::written);
  put_next(std::make_shared<Recording>(Recording{std::move(messages), 0, std::move(done)}));
}

void OwnedConnection::put_next(const std::shared_ptr<Recording>& recording) {
  auto host = host_.lock();
  if (!host) return;
  if (!acting()) return recording->done(WriteOutcome::stopped);
  if (recording->next == recording->messages.size()) {
    return checkpoint(resume::position_of(recording->messages.back()), std::move(recording->done));
  }
  const LeaseHostOptions& options = host->options();
  host->count_call("sink_record");
  host->call_dynamo(resume::record_put(options.sink, connection_, options.worker_id, epoch_,
                                       recording->messages[recording->next]),
                    [weak = std::weak_ptr<OwnedConnection>{shared_from_this()},
                     recording](const dynamo::Result<dynamo::Response>* reply) {
    auto self = weak.lock();
    if (!self) return;
    const WriteOutcome outcome = outcome_of(reply);
    // A put refused because the record exists: an earlier attempt wrote it.
    if (outcome != WriteOutcome::written && outcome != WriteOutcome::fenced) return recording->done(outcome);
    ++recording->next;
    self->put_next(recording);
  });
}

void OwnedConnection::call(std::string_view kind, dynamo::Request request, DynamoReply reply) {
  auto host = host_.lock();
  if (!host) return;
  // Only the stop already delivered: the deadline is the caller's to check
  // (acting()), so that a host stepping through its own actions is never
  // re-entered from here.
  if (stopped_) {
    asio::post(host->io(), [reply = std::move(reply)] { reply(nullptr); });
    return;
  }
  host->count_call(kind);
  host->call_dynamo(std::move(request), std::move(reply));
}

// ---- LeaseHost -------------------------------------------------------------

LeaseHost::LeaseHost(asio::io_context& io, LeaseHostOptions options, LeaseHostCallbacks callbacks)
    : impl_(std::make_shared<LeaseHostImpl>(io, std::move(options), std::move(callbacks))) {}
LeaseHost::~LeaseHost() { impl_->detach(); }
void LeaseHost::start() { impl_->start(); }
void LeaseHost::drain(std::function<void()> done) { impl_->drain(std::move(done)); }
void LeaseHost::expire() { impl_->expire(); }
std::size_t LeaseHost::owned() const { return impl_->owned(); }
bool LeaseHost::draining() const { return impl_->draining(); }
std::string LeaseHost::readiness() const { return impl_->readiness(); }
int64_t LeaseHost::process_incarnation() const { return impl_->process_incarnation(); }
const LeaseHostCounters& LeaseHost::counters() const { return impl_->counters(); }
void LeaseHost::mark(const std::string& name) { impl_->mark(name); }
std::string LeaseHost::metrics_text() const { return impl_->metrics_text(); }
void LeaseHost::event(std::string_view name, nlohmann::json fields) { impl_->event(name, std::move(fields)); }

}  // namespace leaseproof::runtime
