#pragma once
// A small deterministic world for testing core/lease: several LeaseManagers
// ("workers"), each with its own clock (wall offset, rate error, monotonic
// base), driven against the real simulated DynamoDB store under one true time.
//
// At every instant the world first calls on_timer() on every running worker
// whose next_deadline() has passed (a worker must stop acting before another
// can take over), then delivers the network events due. A request can be
// dropped before it is applied, or applied with its reply lost; either way
// the worker sees on_reply(nullptr) after request_timeout (the ambiguous
// outcome). Paused workers receive nothing until they resume; crashed ones
// never again. After every instant the world checks single ownership: no two
// running workers have a session open for one connection, and (core) the one
// that has agrees with the store on owner and epoch.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/random.hpp"
#include "base/uint128.hpp"
#include "core/lease/manager.hpp"
#include "core/lease/requests.hpp"
#include "models/dynamo/store.hpp"
#include "sim/prng.hpp"

namespace leaseproof::lease::test {

// True time zero as a Unix-epoch instant (2023-11-14).
inline constexpr int64_t kEpochMs = 1'700'000'000'000LL;

using PrngSource = sim::PrngRandomSource;

// Fires a named site the next `count` times it is reached.
class OnDemandFaults final : public FaultHook {
 public:
  void arm(const std::string& site, int count) { armed_[site] += count; }
  bool fire(const char* site) override {
    auto it = armed_.find(site);
    if (it == armed_.end() || it->second == 0) return false;
    --it->second;
    return true;
  }

 private:
  std::map<std::string, int, std::less<>> armed_;
};

struct ClockModel {
  Duration wall_offset;      // wall = true + offset (+ rate error)
  int64_t rate_ppm = 0;      // both clocks run this much fast (negative: slow)
  Duration monotonic_base;   // monotonic zero differs per worker, as on real hosts
};

// A worker's clock that is `offset` ahead of true time (negative: behind).
inline ClockModel ahead(Duration offset) {
  ClockModel model;
  model.wall_offset = offset;
  return model;
}

enum class Fate : uint8_t { deliver, drop_request, lose_reply };

struct SessionEvent {
  Instant at;  // true time
  size_t worker = 0;
  std::string connection;
  int64_t epoch = 0;
  bool open = false;
  CloseReason reason = CloseReason::lost;
};

class LeaseWorld {
 public:
  struct Worker {
    std::string name;
    ClockModel clock;
    std::unique_ptr<PrngSource> random;
    std::unique_ptr<OnDemandFaults> faults;
    std::unique_ptr<LeaseManager> manager;
    bool crashed = false;
    bool exited = false;  // drained and gone
    Instant paused_until = Instant::zero();
    bool unreachable = false;  // every request dropped
    std::vector<std::pair<std::optional<RequestKind>, Fate>> next_fates;
    std::map<std::string, int64_t> sessions;  // open sessions: connection -> epoch
    std::map<std::string, int> marks;
    std::set<std::string> armed;  // leases it watches (WatchChange)
    std::vector<CloseSession> closes;
    std::vector<NotifyReleased> notified;
    std::vector<std::pair<Instant, DynamoCall>> sent;  // true send time, call
    // True send time of the latest acquire or renew the store accepted: the
    // worker acts at most until its monotonic clock has run lease - margin
    // past this instant.
    std::map<std::string, Instant> hold_sent;
    bool drain_complete = false;
  };

  LeaseWorld(LeaseConfig config, uint64_t seed,
             models::DynamoStoreOptions options = models::DynamoStoreOptions::faults_off())
      : config_(std::move(config)), store_(std::move(options), seed), prng_(sim::derive_seed(seed, "lease_world")) {
    EXPECT_EQ(config_.validate(), "");
    EXPECT_TRUE(store_.apply(create_table_request(config_), store_now()).ok());
  }

  // ---- setup -------------------------------------------------------------------
  void add_connections(int count) {
    for (int i = 0; i < count; ++i) {
      const std::string connection = fmt::format("c{}", connections_.size());
      const auto reply = store_.apply(create_connection_request(config_, connection, "wss://hub/" + connection),
                                      store_now());
      EXPECT_TRUE(reply.ok());
      connections_.push_back(connection);
    }
  }
  // `name`: the worker id; empty: "w<index>". A name already running is a
  // second process with that worker id.
  size_t start_worker(ClockModel clock = {}, std::optional<LeaseConfig> config = std::nullopt, std::string name = {}) {
    const size_t index = workers_.size();
    Worker worker;
    worker.name = name.empty() ? fmt::format("w{}", index) : std::move(name);
    if (clock.monotonic_base.is_zero()) clock.monotonic_base = Duration::from_s(1000 * static_cast<int64_t>(index + 1));
    worker.clock = clock;
    worker.random = std::make_unique<PrngSource>(prng_.next_u64());
    worker.faults = std::make_unique<OnDemandFaults>();
    worker.manager =
        std::make_unique<LeaseManager>(config.value_or(config_), worker.name, *worker.random, *worker.faults);
    workers_.push_back(std::move(worker));
    drive(index, [&](Clock now, Actions& out) { workers_[index].manager->start(now, out); });
    return index;
  }

  // ---- faults and inputs -------------------------------------------------------
  void crash(size_t i) { workers_[i].crashed = true; }
  void pause(size_t i, Duration d) { workers_[i].paused_until = std::max(workers_[i].paused_until, now_ + d); }
  void set_unreachable(size_t i, bool value) { workers_[i].unreachable = value; }
  void set_wall_offset(size_t i, Duration offset) { workers_[i].clock.wall_offset = offset; }
  void next_fate(size_t i, Fate fate, std::optional<RequestKind> kind = std::nullopt) {
    workers_[i].next_fates.emplace_back(kind, fate);
  }
  void set_auto_notify(bool value) { auto_notify_ = value; }
  void set_latency_jitter(Duration jitter) { latency_jitter_ = jitter; }
  // A signal to a paused process is handled when it resumes.
  void sigterm(size_t i) {
    if (workers_[i].paused_until > now_) return schedule(workers_[i].paused_until, Event{EventKind::sigterm, i, 0, {}});
    drive(i, [&](Clock now, Actions& out) { workers_[i].manager->on_sigterm(now, out); });
  }
  // What on_released answered: false when the worker had no room (or is not running).
  bool notify(size_t i, const std::string& connection) {
    bool taken = false;
    drive(i, [&](Clock now, Actions& out) { taken = workers_[i].manager->on_released(connection, now, out); });
    return taken;
  }
  uint32_t room(size_t i) const { return workers_[i].manager->room(); }
  // Applies a request to the store now, as an outsider (control plane, test).
  dynamo::Result<dynamo::Response> apply(const dynamo::Request& request) { return store_.apply(request, store_now()); }

  // ---- time ----------------------------------------------------------------------
  void run_for(Duration d) { run_until(now_ + d); }
  void run_until(Instant end) {
    for (int guard = 0; guard < 10'000'000; ++guard) {
      step();
      const Instant next = next_event();
      if (next > end) {
        now_ = end;
        step();
        return;
      }
      now_ = std::max(now_, next);
    }
    ADD_FAILURE() << "LeaseWorld did not make progress";
  }
  // Runs until `done` holds (checked after every instant) or `limit` passes.
  template <typename Predicate>
  bool run_until_true(Duration limit, Predicate done) {
    const Instant end = now_ + limit;
    while (now_ < end) {
      step();
      if (done()) return true;
      now_ = std::min(end, std::max(now_ + Duration::from_ns(1), next_event()));
    }
    step();
    return done();
  }

  // ---- observation -----------------------------------------------------------------
  Instant now() const { return now_; }
  Worker& worker(size_t i) { return workers_[i]; }
  size_t worker_count() const { return workers_.size(); }
  const std::vector<std::string>& connections() const { return connections_; }
  const LeaseConfig& config() const { return config_; }
  models::DynamoStore& store() { return store_; }
  const std::vector<std::string>& violations() const { return violations_; }
  const std::vector<SessionEvent>& session_log() const { return session_log_; }
  bool running(size_t i) const {
    const Worker& w = workers_[i];
    return !w.crashed && !w.exited && w.paused_until <= now_;
  }
  std::optional<LeaseView> lease(const std::string& connection) const {
    auto item = store_.peek(config_.table.name, dynamo::Item{{"pk", dynamo::AttributeValue::string(
                                                                         connection_key(connection))}});
    if (!item) return std::nullopt;
    return parse_lease(*item);
  }
  // The running worker with an open session for the connection, if exactly one.
  std::optional<size_t> acting_owner(const std::string& connection) const {
    std::optional<size_t> owner;
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (running(i) && workers_[i].sessions.contains(connection)) owner = i;
    }
    return owner;
  }
  int mark_count(const std::string& name) const {
    int total = 0;
    for (const Worker& w : workers_) {
      if (auto it = w.marks.find(name); it != w.marks.end()) total += it->second;
    }
    return total;
  }
  size_t open_sessions(size_t i) const { return workers_[i].sessions.size(); }
  Clock clock_of(size_t i) const { return clock_at(workers_[i].clock, now_); }
  // The latest true time at which worker i may still act on the connection:
  // lease - margin on its monotonic clock after its latest accepted acquire or renew.
  Instant latest_deadline(size_t i, const std::string& connection) const {
    auto it = workers_[i].hold_sent.find(connection);
    if (it == workers_[i].hold_sent.end()) return Instant::zero();
    const Instant mono = clock_at(workers_[i].clock, it->second).monotonic;
    return true_time_of(i, mono + config_.lease_duration - config_.safety_margin);
  }
  int calls(size_t i, RequestKind kind, Instant since = Instant::zero()) const {
    return static_cast<int>(std::count_if(workers_[i].sent.begin(), workers_[i].sent.end(), [&](const auto& s) {
      return s.first >= since && s.second.kind == kind;
    }));
  }
  // The true time at which worker i's monotonic clock reads `mono`.
  Instant true_time_of(size_t i, Instant mono) const {
    if (mono == Instant::max()) return Instant::max();
    const ClockModel& c = workers_[i].clock;
    const auto rate = static_cast<int128>(1'000'000 + c.rate_ppm);
    auto t = static_cast<int64_t>((static_cast<int128>((mono - c.monotonic_base).ns()) * 1'000'000) / rate);
    while (clock_at(c, Instant::from_ns(t)).monotonic < mono) ++t;
    return Instant::from_ns(t);
  }

 private:
  struct InFlight {
    size_t worker = 0;
    Instant sent;
    DynamoCall call;
    Fate fate = Fate::deliver;
    std::optional<dynamo::Result<dynamo::Response>> reply;
  };
  enum class EventKind : uint8_t { apply, reply, notify, sigterm };
  struct Event {
    EventKind kind;
    size_t worker = 0;
    uint64_t token = 0;
    std::string connection;
  };

  static Duration scaled(Duration d, int64_t ppm) {
    return d + Duration::from_ns(static_cast<int64_t>(static_cast<int128>(d.ns()) * ppm / 1'000'000));
  }
  static Clock clock_at(const ClockModel& c, Instant true_time) {
    const Duration elapsed = scaled(true_time.since_zero(), c.rate_ppm);
    return Clock{Instant::from_ms(kEpochMs) + elapsed + c.wall_offset, Instant::zero() + c.monotonic_base + elapsed};
  }
  Instant store_now() const { return Instant::from_ms(kEpochMs) + now_.since_zero(); }

  void schedule(Instant at, Event event) { events_.emplace(std::make_pair(at, next_seq_++), std::move(event)); }

  Instant next_event() const {
    Instant next = events_.empty() ? Instant::max() : events_.begin()->first.first;
    for (size_t i = 0; i < workers_.size(); ++i) {
      const Worker& w = workers_[i];
      if (w.crashed || w.exited) continue;
      if (w.paused_until > now_) {
        next = std::min(next, w.paused_until);
        continue;
      }
      next = std::min(next, true_time_of(i, w.manager->next_deadline()));
    }
    return next;
  }

  template <typename Call>
  void drive(size_t i, Call call) {
    if (!running(i)) return;
    Actions out;
    call(clock_of(i), out);
    carry_out(i, out);
  }

  // Everything due at now_: timers first, then the network, then the checks.
  void step() {
    for (int round = 0; round < 100'000; ++round) {
      bool acted = false;
      for (size_t i = 0; i < workers_.size(); ++i) {
        if (!running(i) || workers_[i].manager->next_deadline() > clock_of(i).monotonic) continue;
        drive(i, [&](Clock now, Actions& out) { workers_[i].manager->on_timer(now, out); });
        acted = true;
      }
      if (!events_.empty() && events_.begin()->first.first <= now_) {
        auto node = events_.extract(events_.begin());
        handle(node.mapped());
        acted = true;
      }
      if (!acted) {
        check_ownership();
        return;
      }
    }
    ADD_FAILURE() << "LeaseWorld: a worker's deadline stays in the past at " << now_.ns();
  }

  void handle(const Event& event) {
    Worker& w = workers_[event.worker];
    if (event.kind == EventKind::sigterm) return sigterm(event.worker);
    if (event.kind == EventKind::notify) {
      if (w.paused_until > now_) return schedule(w.paused_until, event);
      notify(event.worker, event.connection);  // a worker without room ignores it; the others also got it
      return;
    }
    auto it = in_flight_.find({event.worker, event.token});
    if (it == in_flight_.end()) return;
    InFlight& flight = it->second;
    if (event.kind == EventKind::apply) {
      flight.reply = store_.apply(flight.call.request, store_now());  // in the network: runs even if the worker is down
      const bool holds = flight.call.kind == RequestKind::acquire || flight.call.kind == RequestKind::renew;
      if (holds && flight.reply->ok()) {
        Instant& sent = w.hold_sent[flight.call.connection];
        sent = std::max(sent, flight.sent);
      }
      return;
    }
    if (w.crashed || w.exited) {
      in_flight_.erase(it);
      return;
    }
    if (w.paused_until > now_) return schedule(w.paused_until, event);
    const bool answered = flight.fate == Fate::deliver && flight.reply.has_value();
    std::optional<dynamo::Result<dynamo::Response>> reply = std::move(flight.reply);
    in_flight_.erase(it);
    drive(event.worker, [&](Clock now, Actions& out) {
      w.manager->on_reply(event.token, answered ? &*reply : nullptr, now, out);
    });
  }

  Fate take_fate(Worker& w, RequestKind kind) {
    if (w.unreachable) return Fate::drop_request;
    for (auto it = w.next_fates.begin(); it != w.next_fates.end(); ++it) {
      if (!it->first || *it->first == kind) {
        const Fate fate = it->second;
        w.next_fates.erase(it);
        return fate;
      }
    }
    return Fate::deliver;
  }

  Duration latency() {
    const Duration base = Duration::from_ms(2);
    if (latency_jitter_.is_zero()) return base;
    return base + Duration::from_ns(static_cast<int64_t>(prng_.below(static_cast<uint64_t>(latency_jitter_.ns()) + 1)));
  }

  void carry_out(size_t i, Actions& out) {
    Worker& w = workers_[i];
    for (Action& action : out) {
      if (auto* call = std::get_if<DynamoCall>(&action)) {
        send(i, std::move(*call));
      } else if (auto* open = std::get_if<OpenSession>(&action)) {
        if (w.sessions.contains(open->connection)) violations_.push_back(fmt::format("{} opened {} twice", w.name, open->connection));
        w.sessions[open->connection] = open->epoch;
        session_log_.push_back(SessionEvent{now_, i, open->connection, open->epoch, true, CloseReason::lost});
      } else if (auto* close = std::get_if<CloseSession>(&action)) {
        if (w.sessions.erase(close->connection) == 0) {
          violations_.push_back(fmt::format("{} closed {} that was not open", w.name, close->connection));
        }
        w.closes.push_back(*close);
        session_log_.push_back(SessionEvent{now_, i, close->connection, close->epoch, false, close->reason});
      } else if (auto* notify = std::get_if<NotifyReleased>(&action)) {
        w.notified.push_back(*notify);
        if (!auto_notify_) continue;
        for (size_t j = 0; j < workers_.size(); ++j) {
          if (j != i) schedule(now_ + Duration::from_ms(20), Event{EventKind::notify, j, 0, notify->connection});
        }
      } else if (std::holds_alternative<DrainComplete>(action)) {
        w.drain_complete = true;
        w.exited = true;  // the process ends once drained
      } else if (auto* mark = std::get_if<Mark>(&action)) {
        ++w.marks[mark->name];
      } else if (auto* watch = std::get_if<WatchChange>(&action)) {
        // Said on changes only: never armed twice, never disarmed unarmed.
        EXPECT_EQ(w.armed.contains(watch->connection), !watch->armed) << w.name << " " << watch->connection;
        if (watch->armed) {
          // A draining worker takes nothing over, so it watches nothing.
          EXPECT_FALSE(w.manager->draining()) << w.name << " arms a watch of " << watch->connection << " while draining";
          w.armed.insert(watch->connection);
        } else {
          w.armed.erase(watch->connection);
        }
      }
    }
  }

  void send(size_t i, DynamoCall call) {
    Worker& w = workers_[i];
    w.sent.emplace_back(now_, call);
    const Fate fate = take_fate(w, call.kind);
    const uint64_t token = call.token;
    const Duration there = latency();
    const Duration back = latency();
    in_flight_[{i, token}] = InFlight{i, now_, std::move(call), fate, std::nullopt};
    if (fate != Fate::drop_request) schedule(now_ + there, Event{EventKind::apply, i, token, {}});
    const Duration answer_after = fate == Fate::deliver ? there + back : config_.request_timeout;
    schedule(now_ + answer_after, Event{EventKind::reply, i, token, {}});
  }

  void check_ownership() {
    for (const std::string& connection : connections_) {
      std::vector<size_t> acting;
      for (size_t i = 0; i < workers_.size(); ++i) {
        if (!running(i)) continue;
        const bool open = workers_[i].sessions.contains(connection);
        if (open != workers_[i].manager->owns(connection)) {
          violations_.push_back(fmt::format("{}: owns({}) disagrees with its sessions", workers_[i].name, connection));
        }
        if (open) acting.push_back(i);
      }
      if (acting.size() > 1) {
        violations_.push_back(fmt::format("t={}: {} acting owners of {} ({} and {})", format_duration(now_.since_zero()),
                                          acting.size(), connection, workers_[acting[0]].name,
                                          workers_[acting[1]].name));
      }
      if (acting.size() != 1 || workers_[acting[0]].manager->config().algorithm != Algorithm::core) continue;
      const auto view = lease(connection);
      const Worker& w = workers_[acting[0]];
      if (!view || view->owner != w.name || view->epoch != w.sessions.at(connection)) {
        violations_.push_back(fmt::format("t={}: {} acts on {} epoch {} but the store says owner '{}' epoch {}",
                                          format_duration(now_.since_zero()), w.name, connection,
                                          w.sessions.at(connection), view ? view->owner : "?",
                                          view ? view->epoch : -1));
      }
    }
  }

  LeaseConfig config_;
  models::DynamoStore store_;
  sim::Prng prng_;
  Instant now_ = Instant::zero();
  std::vector<Worker> workers_;
  std::vector<std::string> connections_;
  std::map<std::pair<Instant, uint64_t>, Event> events_;
  uint64_t next_seq_ = 0;
  std::map<std::pair<size_t, uint64_t>, InFlight> in_flight_;
  std::vector<std::string> violations_;
  std::vector<SessionEvent> session_log_;
  bool auto_notify_ = false;
  Duration latency_jitter_;
};

}  // namespace leaseproof::lease::test
