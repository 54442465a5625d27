// Stateful rapidcheck test of the lease manager: random sequences of time
// steps, worker starts, crashes, pauses, SIGTERMs, lost replies, dropped
// requests, wall-clock steps and duplicate release notifications, in both
// expiry modes, with faults kept inside each mode's stated assumption (wall:
// skew within 2 x margin; counter: any wall skew, clock rate error within the
// bound). After every command: single ownership (at most one running worker
// owns each connection, and its epoch and name are the store's); at the end,
// with faults healed, every connection is owned again (liveness).
// RC_PARAMS="reproduce=..." replays a failure.

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <ostream>
#include <string>
#include <vector>

#include "lease_world.hpp"

namespace leaseproof::lease::test {
namespace {

using namespace literals;

constexpr size_t kWorkersMax = 5;
constexpr int kConnections = 6;

struct LeaseModel {
  ExpiryMode mode = ExpiryMode::wall;
  std::vector<bool> alive;  // per started worker: not crashed, not terminated

  std::vector<size_t> alive_workers() const {
    std::vector<size_t> result;
    for (size_t i = 0; i < alive.size(); ++i) {
      if (alive[i]) result.push_back(i);
    }
    return result;
  }
};

using LeaseCommand = rc::state::Command<LeaseModel, LeaseWorld>;

// Wall mode: every offset within +-margin keeps any two clocks within 2 x margin.
Duration wall_offset_for(const LeaseModel& model) {
  if (model.mode == ExpiryMode::wall) return Duration::from_ms(*rc::gen::inRange<int64_t>(-1'990, 1'991));
  return Duration::from_ms(*rc::gen::inRange<int64_t>(-120'000, 120'001));
}

size_t pick_alive(const LeaseModel& model) {
  const std::vector<size_t> alive = model.alive_workers();
  RC_PRE(!alive.empty());
  return *rc::gen::elementOf(alive);
}

// The invariant of the brief, on the world as the worker objects see it.
void check_single_ownership(LeaseWorld& world) {
  for (const std::string& connection : world.connections()) {
    std::vector<size_t> owners;
    for (size_t i = 0; i < world.worker_count(); ++i) {
      if (world.running(i) && world.worker(i).manager->owns(connection)) owners.push_back(i);
    }
    RC_ASSERT(owners.size() <= 1u);
    if (owners.empty()) continue;
    const auto lease = world.lease(connection);
    RC_ASSERT(lease.has_value());
    RC_ASSERT(lease->owner == world.worker(owners[0]).name);
    RC_ASSERT(lease->epoch == world.worker(owners[0]).sessions.at(connection));
  }
  if (!world.violations().empty()) {
    RC_FAIL(world.violations().front());
  }
}

struct AdvanceTime : LeaseCommand {
  Duration d = Duration::from_ms(*rc::gen::inRange<int64_t>(1, 30'000));
  explicit AdvanceTime(const LeaseModel&) {}
  void run(const LeaseModel&, LeaseWorld& world) const override {
    world.run_for(d);
    check_single_ownership(world);
  }
  void show(std::ostream& os) const override { os << "AdvanceTime(" << format_duration(d) << ")"; }
};

struct StartWorker : LeaseCommand {
  ClockModel clock;
  explicit StartWorker(const LeaseModel& model) {
    RC_PRE(model.alive.size() < kWorkersMax);
    clock.wall_offset = wall_offset_for(model);
    // Counter mode: rate error within half the tolerated bound (5% each way).
    if (model.mode == ExpiryMode::counter) clock.rate_ppm = *rc::gen::inRange<int64_t>(-50'000, 50'001);
  }
  void apply(LeaseModel& model) const override { model.alive.push_back(true); }
  void run(const LeaseModel&, LeaseWorld& world) const override {
    world.start_worker(clock);
    check_single_ownership(world);
  }
  void show(std::ostream& os) const override {
    os << "StartWorker(offset " << format_duration(clock.wall_offset) << ", " << clock.rate_ppm << " ppm)";
  }
};

struct CrashWorker : LeaseCommand {
  size_t i;
  explicit CrashWorker(const LeaseModel& model) : i(pick_alive(model)) {}
  void checkPreconditions(const LeaseModel& model) const override { RC_PRE(i < model.alive.size());
    RC_PRE(static_cast<bool>(model.alive[i])); }
  void apply(LeaseModel& model) const override { model.alive[i] = false; }
  void run(const LeaseModel&, LeaseWorld& world) const override { world.crash(i); }
  void show(std::ostream& os) const override { os << "CrashWorker(" << i << ")"; }
};

struct Sigterm : LeaseCommand {
  size_t i;
  explicit Sigterm(const LeaseModel& model) : i(pick_alive(model)) {}
  void checkPreconditions(const LeaseModel& model) const override { RC_PRE(i < model.alive.size());
    RC_PRE(static_cast<bool>(model.alive[i])); }
  void apply(LeaseModel& model) const override { model.alive[i] = false; }
  void run(const LeaseModel&, LeaseWorld& world) const override {
    world.sigterm(i);
    world.run_for(30_s);  // the stop timeout, then SIGKILL
    if (world.running(i)) RC_ASSERT(world.open_sessions(i) == 0u);
    world.crash(i);
    check_single_ownership(world);
  }
  void show(std::ostream& os) const override { os << "Sigterm(" << i << ")"; }
};

struct NextFate : LeaseCommand {
  size_t i;
  Fate fate = *rc::gen::element(Fate::lose_reply, Fate::drop_request);
  std::optional<RequestKind> kind = *rc::gen::element<std::optional<RequestKind>>(
      std::nullopt, RequestKind::acquire, RequestKind::renew, RequestKind::read, RequestKind::release);
  explicit NextFate(const LeaseModel& model) : i(pick_alive(model)) {}
  void checkPreconditions(const LeaseModel& model) const override { RC_PRE(i < model.alive.size()); }
  void run(const LeaseModel&, LeaseWorld& world) const override { world.next_fate(i, fate, kind); }
  void show(std::ostream& os) const override {
    os << (fate == Fate::lose_reply ? "LoseNextReply(" : "DropNextRequest(") << i << ", "
       << (kind ? to_string(*kind) : "any") << ")";
  }
};

struct PauseWorker : LeaseCommand {
  size_t i;
  Duration d = Duration::from_ms(*rc::gen::inRange<int64_t>(100, 60'000));
  explicit PauseWorker(const LeaseModel& model) : i(pick_alive(model)) {}
  void checkPreconditions(const LeaseModel& model) const override { RC_PRE(i < model.alive.size()); }
  void run(const LeaseModel&, LeaseWorld& world) const override { world.pause(i, d); }
  void show(std::ostream& os) const override { os << "PauseWorker(" << i << ", " << format_duration(d) << ")"; }
};

struct Unreachable : LeaseCommand {
  size_t i;
  Duration d = Duration::from_ms(*rc::gen::inRange<int64_t>(100, 40'000));
  explicit Unreachable(const LeaseModel& model) : i(pick_alive(model)) {}
  void checkPreconditions(const LeaseModel& model) const override { RC_PRE(i < model.alive.size()); }
  void run(const LeaseModel&, LeaseWorld& world) const override {
    world.set_unreachable(i, true);
    world.run_for(d);
    world.set_unreachable(i, false);
    check_single_ownership(world);
  }
  void show(std::ostream& os) const override { os << "Unreachable(" << i << ", " << format_duration(d) << ")"; }
};

struct SkewClock : LeaseCommand {
  size_t i;
  Duration offset;
  explicit SkewClock(const LeaseModel& model) : i(pick_alive(model)), offset(wall_offset_for(model)) {}
  void checkPreconditions(const LeaseModel& model) const override { RC_PRE(i < model.alive.size()); }
  void run(const LeaseModel&, LeaseWorld& world) const override {
    world.set_wall_offset(i, offset);
    check_single_ownership(world);
  }
  void show(std::ostream& os) const override { os << "SkewClock(" << i << ", " << format_duration(offset) << ")"; }
};

// A (possibly late or duplicate) release notification: SQS is at-least-once.
struct Notify : LeaseCommand {
  size_t i;
  int connection = *rc::gen::inRange(0, kConnections);
  explicit Notify(const LeaseModel& model) : i(pick_alive(model)) {}
  void checkPreconditions(const LeaseModel& model) const override { RC_PRE(i < model.alive.size()); }
  void run(const LeaseModel&, LeaseWorld& world) const override {
    world.notify(i, fmt::format("c{}", connection));
    check_single_ownership(world);
  }
  void show(std::ostream& os) const override { os << "Notify(" << i << ", c" << connection << ")"; }
};

void check_lease_manager(ExpiryMode mode) {
  LeaseConfig config;
  config.expiry_mode = mode;
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  models::DynamoStoreOptions options = models::DynamoStoreOptions::faults_off();
  options.gsi_lag = models::DynamoStoreOptions{}.gsi_lag;  // sweeps may see stale owners
  LeaseWorld world{config, seed, options};
  world.set_auto_notify(true);
  world.set_latency_jitter(30_ms);
  world.add_connections(kConnections);
  LeaseModel model;
  model.mode = mode;
  rc::state::check(model, world,
                   rc::state::gen::execOneOfWithArgs<AdvanceTime, AdvanceTime, StartWorker, CrashWorker, Sigterm,
                                                     NextFate, PauseWorker, Unreachable, SkewClock, Notify>());
  // Liveness: faults healed, a worker running, everything is owned again
  // within two reconcile rounds plus a lease.
  bool any_running = false;
  for (size_t i = 0; i < world.worker_count(); ++i) any_running = any_running || world.running(i);
  if (!any_running) world.start_worker();
  world.run_for(3_min);
  check_single_ownership(world);
  for (const std::string& connection : world.connections()) {
    RC_ASSERT(world.acting_owner(connection).has_value());
  }
}

RC_GTEST_PROP(LeaseManagerProperty, SingleOwnershipAndRecoveryWallMode, ()) { check_lease_manager(ExpiryMode::wall); }

RC_GTEST_PROP(LeaseManagerProperty, SingleOwnershipAndRecoveryCounterMode, ()) {
  check_lease_manager(ExpiryMode::counter);
}

}  // namespace
}  // namespace leaseproof::lease::test
