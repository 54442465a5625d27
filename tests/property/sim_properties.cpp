// rapidcheck properties of base/ and sim/. RC_PARAMS="reproduce=..." replays a
// failure; RC_PARAMS="max_success=1000" runs more cases.

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "properties/sim_invariants.hpp"
#include "sim/clock.hpp"
#include "sim/prng.hpp"
#include "sim/scheduler.hpp"
#include "sim/world.hpp"

namespace leaseproof::sim {
namespace {

using namespace literals;

RC_GTEST_PROP(SchedulerProperty, RunsInNonDecreasingTimeAndFifoAmongEqualTimes,
              (const std::vector<std::tuple<uint8_t, bool>>& plan)) {
  // Few distinct times (0..15 ms) so that ties are common; some events cancelled.
  Scheduler scheduler;
  std::vector<std::pair<int64_t, size_t>> ran;  // (time, insertion index)
  std::vector<TimerId> ids;
  for (size_t i = 0; i < plan.size(); ++i) {
    const int64_t time_ms = std::get<0>(plan[i]) % 16;
    ids.push_back(scheduler.at(Instant::from_ms(time_ms), [&ran, &scheduler, i] {
      ran.emplace_back(scheduler.now().ns(), i);
    }));
  }
  size_t cancelled = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (std::get<1>(plan[i])) {
      RC_ASSERT(scheduler.cancel(ids[i]));
      ++cancelled;
    }
  }
  scheduler.run_until_idle(plan.size() + 1);
  RC_ASSERT(ran.size() == plan.size() - cancelled);
  for (size_t k = 1; k < ran.size(); ++k) {
    RC_ASSERT(ran[k - 1].first <= ran[k].first);
    if (ran[k - 1].first == ran[k].first) RC_ASSERT(ran[k - 1].second < ran[k].second);
  }
  for (const auto& [time, index] : ran) RC_ASSERT(!std::get<1>(plan[index]));
}

RC_GTEST_PROP(ClockProperty, MonotonicNeverDecreasesWhateverTheDriftAndSteps,
              (int32_t drift_seed, const std::vector<std::pair<uint32_t, int32_t>>& steps,
               std::vector<uint32_t> probe_ms)) {
  ClockModel model;
  model.drift_ppm = drift_seed % (NodeClock::kDriftPpmMax + 1);
  for (const auto& [at_ms, jump_ms] : steps) {
    model.steps.push_back(ClockStep{Instant::from_ms(at_ms % 100'000), Duration::from_ms(jump_ms % 60'000)});
  }
  NodeClock clock{model};
  std::sort(probe_ms.begin(), probe_ms.end());
  Instant previous = clock.monotonic(Instant::zero());
  for (uint32_t ms : probe_ms) {
    const Instant t = Instant::from_ns(static_cast<int64_t>(ms) * 1'000'003);  // off the millisecond grid
    const Instant reading = clock.monotonic(t);
    RC_ASSERT(reading >= previous);
    previous = reading;
    // Wall differs from monotonic by a constant plus the steps taken so far.
    RC_ASSERT((clock.wall(t) - clock.monotonic(t)) - clock.steps_until(t) ==
              clock.wall(Instant::zero()) - clock.monotonic(Instant::zero()) - clock.steps_until(Instant::zero()));
  }
}

RC_GTEST_PROP(PrngProperty, BelowStaysInRangeAndSubSeedsOfDifferentNamesDiffer,
              (uint64_t seed, uint64_t bound, const std::string& a, const std::string& b)) {
  RC_PRE(bound > 0);
  Prng prng{seed};
  for (int i = 0; i < 20; ++i) RC_ASSERT(prng.below(bound) < bound);
  RC_PRE(a != b);
  RC_ASSERT(derive_seed(seed, a) != derive_seed(seed, b));
}

RC_GTEST_PROP(DurationProperty, FormatThenParseIsTheIdentity, (int64_t ns)) {
  RC_PRE(ns != INT64_MIN);
  const Duration d = Duration::from_ns(ns);
  RC_ASSERT(parse_duration(format_duration(d)) == d);
}

struct Blob final : Payload {};

// A chatty process: sends to a random peer every few milliseconds.
class Chatter final : public Process {
 public:
  explicit Chatter(uint32_t nodes) : nodes_(nodes) {}
  void on_start(NodeContext& c) override { tick(c); }
  void on_message(NodeContext&, const Envelope&) override {}

 private:
  void tick(NodeContext& c) {
    const NodeId to{static_cast<uint32_t>(c.prng().below(nodes_))};
    if (to != c.id()) c.send(to, Message{"blob", 1, std::make_shared<Blob>()});
    c.set_timer(c.prng().uniform_duration(1_ms, 20_ms), "tick", [this, &c] { tick(c); });
  }
  uint32_t nodes_;
};

// For any random set of directed partitions, pauses and crashes, nothing
// crosses an active partition: checked at arrival (delivery, or 'queued' at a
// paused node) against the world's own partition table, and by the trace checker.
RC_GTEST_PROP(NetworkProperty, NothingIsDeliveredAcrossAnActivePartition, (uint64_t seed)) {
  World world{seed};
  Prng plan{seed};
  properties::SimInvariants invariants;
  uint64_t deliveries = 0;
  bool crossed = false;
  std::set<uint64_t> queued;  // arrived while the receiver was paused
  world.trace().add_observer([&](const TraceEvent& e) {
    invariants.observe(e);
    if (e.kind == EventKind::queued) {
      queued.insert(e.id);
      crossed |= world.partitioned(e.peer, e.node, e.true_time);
    }
    if (e.kind == EventKind::deliver) {
      ++deliveries;
      if (queued.erase(e.id) == 0) crossed |= world.partitioned(e.peer, e.node, e.true_time);
    }
  });
  world.set_default_link(LinkConfig{LatencyDistribution{1_ms, 10_ms, Ratio{1, 50}, 500_ms}, Ratio{1, 100}, false});
  static constexpr uint32_t kNodes = 4;
  for (uint32_t i = 0; i < kNodes; ++i) {
    world.add_node("n" + std::to_string(i), ClockModel{}, [] { return std::make_unique<Chatter>(kNodes); });
  }
  for (int i = 0; i < 6; ++i) {
    const NodeId from{static_cast<uint32_t>(plan.below(kNodes))};
    const NodeId to{static_cast<uint32_t>((from.value + 1 + plan.below(kNodes - 1)) % kNodes)};
    const Instant start = Instant::zero() + plan.uniform_duration(0_s, 8_s);
    world.partition(from, to, start, start + plan.uniform_duration(1_ms, 3_s));
  }
  const NodeId victim{static_cast<uint32_t>(plan.below(kNodes))};
  world.at(Instant::zero() + 2_s, [&] { world.pause(victim, 2_s); });
  world.at(Instant::zero() + 5_s, [&] { world.crash(victim); });
  world.at(Instant::zero() + 6_s, [&] { world.restart(victim); });
  world.run_until(Instant::zero() + 10_s);
  RC_ASSERT(deliveries > 100u);  // the property is not vacuous
  RC_ASSERT(!crossed);
  RC_ASSERT(invariants.violations().empty());
}

}  // namespace
}  // namespace leaseproof::sim
