// Throughput of the simulation kernel's hot paths. Run a release build:
//   build/release/bench/leaseproof_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include "scenarios/scenario.hpp"
#include "sim/prng.hpp"
#include "sim/scheduler.hpp"
#include "sim/trace.hpp"

namespace leaseproof::sim {
namespace {

// Schedule `batch` small events at pseudo-random times within a second, then
// run them all: one item = one event scheduled and run.
void BM_SchedulerScheduleAndRun(benchmark::State& state) {
  const auto batch = static_cast<uint64_t>(state.range(0));
  Scheduler scheduler;
  Prng prng{1};
  uint64_t sink = 0;
  for (auto _ : state) {
    const Instant base = scheduler.now();
    for (uint64_t i = 0; i < batch; ++i) {
      scheduler.at(base + Duration::from_ns(static_cast<int64_t>(prng.below(1'000'000'000))), [&sink] { ++sink; });
    }
    scheduler.run_until_idle(batch);
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
}
BENCHMARK(BM_SchedulerScheduleAndRun)->Arg(1'000)->Arg(100'000);

// A steady state like a simulation's: a fixed population of pending timers,
// each re-arming itself when it fires.
void BM_SchedulerSteadyState(benchmark::State& state) {
  const auto population = static_cast<uint64_t>(state.range(0));
  Scheduler scheduler;
  Prng prng{2};
  std::function<void()> rearm = [&] {
    scheduler.after(Duration::from_ns(1 + static_cast<int64_t>(prng.below(1'000'000))), rearm);
  };
  for (uint64_t i = 0; i < population; ++i) rearm();
  for (auto _ : state) scheduler.run_steps(1'000);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * 1'000));
}
BENCHMARK(BM_SchedulerSteadyState)->Arg(100)->Arg(10'000);

void BM_PrngNextU64(benchmark::State& state) {
  Prng prng{3};
  uint64_t x = 0;
  for (auto _ : state) x ^= prng.next_u64();
  benchmark::DoNotOptimize(x);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_PrngNextU64);

void BM_PrngBelow(benchmark::State& state) {
  Prng prng{4};
  uint64_t x = 0;
  for (auto _ : state) x += prng.below(1'000'003);
  benchmark::DoNotOptimize(x);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_PrngBelow);

void BM_PrngChance(benchmark::State& state) {
  Prng prng{5};
  uint64_t x = 0;
  for (auto _ : state) x += prng.chance(Ratio{1, 100}) ? 1 : 0;
  benchmark::DoNotOptimize(x);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_PrngChance);

TraceEvent typical_event(uint64_t i) {
  TraceEvent e;
  e.kind = EventKind::send;
  e.true_time = Instant::from_ns(static_cast<int64_t>(i) * 1'000);
  e.node = NodeId{3};
  e.wall = Instant::from_ns(1'767'225'600'000'000'000 + static_cast<int64_t>(i));
  e.monotonic = Instant::from_ns(static_cast<int64_t>(i) * 999);
  e.peer = NodeId{1};
  e.id = i;
  e.value = 64;
  e.label = "kernel.request";
  return e;
}

// The cost every event pays: folding it into the trace hash.
void BM_TraceHashPerEvent(benchmark::State& state) {
  Trace trace;
  uint64_t i = 0;
  for (auto _ : state) trace.record(typical_event(++i));
  benchmark::DoNotOptimize(trace.hash());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_TraceHashPerEvent);

// What the simulation's thread pays an event when the checkers run in the
// background (encoding it into a chunk; no checker attached).
void BM_TraceBackgroundPushPerEvent(benchmark::State& state) {
  Trace trace;
  trace.start_background();
  uint64_t i = 0;
  for (auto _ : state) trace.record(typical_event(++i));
  trace.finish_background();
  benchmark::DoNotOptimize(trace.hash());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_TraceBackgroundPushPerEvent);

// The cost when --trace asks for JSON lines (formatting, no file I/O).
void BM_TraceJsonLinePerEvent(benchmark::State& state) {
  Trace trace;
  trace.set_node_name(NodeId{1}, "server-0");
  trace.set_node_name(NodeId{3}, "client-1");
  uint64_t i = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    ++i;
    bytes += trace.to_json_line(i, typical_event(i)).size();
  }
  benchmark::DoNotOptimize(bytes);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_TraceJsonLinePerEvent);

// The whole kernel scenario, 10 simulated minutes; items = trace events.
void BM_KernelScenarioTenMinutes(benchmark::State& state) {
  uint64_t events = 0;
  uint64_t seed = 0;
  for (auto _ : state) {
    scenarios::RunConfig config;
    config.seed = ++seed;
    events += scenarios::find_scenario("kernel")->run(config).events;
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
}
BENCHMARK(BM_KernelScenarioTenMinutes)->Unit(benchmark::kMillisecond);

// The lease issue's reference fleet: 10 workers, 500 connections, lease 20 s,
// heartbeat 5 s, reconcile 60 s, a crash every 10 minutes, 1 simulated hour.
// Items = simulated seconds, so items/s is the speed-up over real time.
// Argument 1: the checkers on a thread of their own, as `leaseproof run`
// has them; 0: inline, as the commands that run many seeds have them.
void BM_LeaseReferenceFleetOneHour(benchmark::State& state) {
  for (auto _ : state) {
    scenarios::RunConfig config;
    config.seed = 1;
    config.background_checks = state.range(0) != 0;
    const scenarios::RunResult result = scenarios::find_scenario("lease-crash")->run(config);
    if (!result.passed()) state.SkipWithError("the reference fleet failed its checks");
  }
  state.SetItemsProcessed(state.iterations() * 3600);
}
BENCHMARK(BM_LeaseReferenceFleetOneHour)->ArgName("background")->Arg(0)->Arg(1)->Unit(benchmark::kSecond)->Iterations(1);

// One seed of the swarm (3-5 workers, 50 connections, 10 simulated minutes):
// what the CI gate pays per seed.
void BM_LeaseSwarmSeed(benchmark::State& state) {
  uint64_t seed = 0;
  for (auto _ : state) {
    scenarios::RunConfig config;
    config.seed = ++seed;
    benchmark::DoNotOptimize(scenarios::find_scenario("lease-swarm")->run(config).trace_hash);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LeaseSwarmSeed)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace leaseproof::sim

BENCHMARK_MAIN();
