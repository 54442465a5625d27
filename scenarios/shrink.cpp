// Shrinking a failing lease run: candidates in a fixed order, the first that
// still fails the property is taken, greedy to a fixpoint
// (docs/shrink-and-replay.md).
#include "scenarios/shrink.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "base/assert.hpp"

namespace leaseproof::scenarios {

namespace {

using Options = LeaseScenarioOptions;

// Below these, a length is not worth halving again.
constexpr Duration kShortestFault = Duration::from_ms(100);
constexpr Duration kShortestRun = Duration::from_s(30);

template <typename Access, typename Describe>
void list_faults(std::vector<Fault>& out, const Options& options, Access access, Describe describe) {
  const auto& list = access(options);
  for (size_t i = 0; i < list.size(); ++i) {
    out.push_back(Fault{describe(list[i]), [access, i](Options& o) {
                          auto& entries = access(o);
                          entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
                        }});
  }
}

}  // namespace

std::span<const std::string_view> property_kinds() {
  static constexpr std::string_view kKinds[] = {
      "single ownership", "recovery", "liveness", "exactly-once", "exactly-once (liveness)",
      "dead peer",        "hub",      "subscriber queue bound",   "trace contract"};
  return kKinds;
}

bool is_lease_scenario(std::string_view scenario) { return lease_preset(scenario, 0).has_value(); }

std::string first_violation_of(const RunResult& result, std::string_view property) {
  for (const std::string& violation : result.violations) {
    if (violation_kind(violation) == property) return violation;
  }
  return {};
}

std::vector<Fault> faults_of(const Options& o) {
  std::vector<Fault> faults;
  auto setting = [&faults](bool on, std::string text, std::function<void(Options&)> remove) {
    if (on) faults.push_back(Fault{std::move(text), std::move(remove)});
  };
  setting(!o.crash_every.is_zero(),
          fmt::format("crashes: a random worker every {}, restarted after {}", o.crash_every, o.restart_after),
          [](Options& x) { x.crash_every = Duration::zero(); });
  setting(!o.loss.is_zero(), fmt::format("message loss: {} on every link", o.loss),
          [](Options& x) { x.loss = Ratio::zero(); });
  setting(o.throttle_partition_wcu_per_s > 0,
          fmt::format("throttling: {} WCU/s per DynamoDB partition", o.throttle_partition_wcu_per_s),
          [](Options& x) { x.throttle_partition_wcu_per_s = 0; });
  setting(o.deploy_at.has_value(), fmt::format("rolling deploy at {}", o.deploy_at.value_or(Duration::zero())),
          [](Options& x) { x.deploy_at.reset(); });
  setting(!o.skew_max.is_zero(), fmt::format("clock skew: wall offsets within +-{}", o.skew_max),
          [](Options& x) { x.skew_max = Duration::zero(); });
  setting(!o.fast_worker_offset.is_zero(),
          fmt::format("fast worker: worker 0's wall clock {} ahead", o.fast_worker_offset),
          [](Options& x) { x.fast_worker_offset = Duration::zero(); });
  setting(o.drift_ppm_max != 0, fmt::format("clock drift: rates within +-{} ppm", o.drift_ppm_max),
          [](Options& x) { x.drift_ppm_max = 0; });
  const bool streaming = o.stream.enabled;
  setting(streaming && o.stream.relay_idle.has_value(),
          fmt::format("relay: idle cut-off {}", o.stream.relay_idle.value_or(Duration::zero())),
          [](Options& x) { x.stream.relay_idle.reset(); });

  list_faults(faults, o, [](auto& x) -> auto& { return x.pauses; }, [](const WorkerFault& f) {
    return fmt::format("pause: worker {} at {} for {}", f.worker, f.at, f.length);
  });
  list_faults(faults, o, [](auto& x) -> auto& { return x.partitions; }, [](const WorkerFault& f) {
    return fmt::format("partition: worker {} <-> dynamodb at {} for {}", f.worker, f.at, f.length);
  });
  list_faults(faults, o, [](auto& x) -> auto& { return x.clock_steps; }, [](const WorkerFault& f) {
    return fmt::format("clock step: worker {} at {} by {}", f.worker, f.at, f.length);
  });
  list_faults(faults, o, [](auto& x) -> auto& { return x.stops; },
              [](const ConnectionStop& s) { return fmt::format("stop: connection c{} at {}", s.connection, s.at); });
  if (!streaming) return faults;
  list_faults(faults, o, [](auto& x) -> auto& { return x.stream.hub_crashes; },
              [down = o.stream.hub_down](Duration at) { return fmt::format("hub crash: at {} for {}", at, down); });
  list_faults(faults, o, [](auto& x) -> auto& { return x.stream.mass_closes; },
              [](Duration at) { return fmt::format("hub mass close (1012): at {}", at); });
  list_faults(faults, o, [](auto& x) -> auto& { return x.stream.hub_slow; },
              [](const TimedFault& f) { return fmt::format("hub slow: at {} for {}", f.at, f.length); });
  list_faults(faults, o, [](auto& x) -> auto& { return x.stream.cuts; },
              [](const TimedFault& f) { return fmt::format("stream cut: at {} for {}", f.at, f.length); });
  list_faults(faults, o, [](auto& x) -> auto& { return x.stream.crash_while_recording; },
              [](Duration at) { return fmt::format("crash while recording: from {}", at); });
  return faults;
}

nlohmann::json minimal_parameters(std::string_view scenario, uint64_t seed, const Options& options) {
  const nlohmann::json full = to_parameters(options);
  auto gives_options = [&](const nlohmann::json& parameters) {
    RunConfig config;
    config.seed = seed;
    config.duration = options.duration;
    config.parameters = parameters;
    Options derived;
    return derive_lease_options(scenario, config, derived).empty() && to_parameters(derived) == full;
  };
  LP_ASSERT_MSG(gives_options(full), "to_parameters does not reproduce the options: {}", full.dump());
  nlohmann::json parameters = full;
  for (const auto& [key, value] : full.items()) {
    nlohmann::json trial = parameters;
    trial.erase(key);
    if (gives_options(trial)) parameters = std::move(trial);
  }
  if (parameters.contains("stream")) {
    for (const auto& [key, value] : full["stream"].items()) {
      nlohmann::json trial = parameters;
      trial["stream"].erase(key);
      if (gives_options(trial)) parameters = std::move(trial);
    }
  }
  return parameters;
}

namespace {

struct Candidate {
  std::string change;
  Options options;
};

// ---- candidates, in the order they are tried --------------------------------------

std::vector<Candidate> switch_offs(const Options& o) {
  std::vector<Candidate> out;
  if (o.stream.enabled) {
    Options x = o;
    x.stream.enabled = false;
    out.push_back({"streaming off", x});
  }
  if (o.autoscaler) {
    Options x = o;
    x.autoscaler = false;
    out.push_back({"autoscaler off", x});
  }
  return out;
}

// Every fault of one kind at once, for kinds with more than one.
std::vector<Candidate> whole_lists(const Options& o) {
  std::vector<Candidate> out;
  auto clear = [&](std::string_view what, size_t count, auto access) {
    if (count < 2) return;
    Options x = o;
    access(x).clear();
    out.push_back({fmt::format("removed all {} {}", count, what), x});
  };
  clear("pauses", o.pauses.size(), [](Options& x) -> auto& { return x.pauses; });
  clear("partitions", o.partitions.size(), [](Options& x) -> auto& { return x.partitions; });
  clear("clock steps", o.clock_steps.size(), [](Options& x) -> auto& { return x.clock_steps; });
  clear("stops", o.stops.size(), [](Options& x) -> auto& { return x.stops; });
  if (!o.stream.enabled) return out;
  clear("hub crashes", o.stream.hub_crashes.size(), [](Options& x) -> auto& { return x.stream.hub_crashes; });
  clear("mass closes", o.stream.mass_closes.size(), [](Options& x) -> auto& { return x.stream.mass_closes; });
  clear("slow-hub windows", o.stream.hub_slow.size(), [](Options& x) -> auto& { return x.stream.hub_slow; });
  clear("stream cuts", o.stream.cuts.size(), [](Options& x) -> auto& { return x.stream.cuts; });
  clear("crashes while recording", o.stream.crash_while_recording.size(),
        [](Options& x) -> auto& { return x.stream.crash_while_recording; });
  return out;
}

std::vector<Candidate> single_faults(const Options& o) {
  std::vector<Candidate> out;
  for (const Fault& fault : faults_of(o)) {
    Options x = o;
    fault.remove(x);
    out.push_back({"removed " + fault.text, x});
  }
  return out;
}

std::string counted(uint32_t count, std::string_view noun) {
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
}

// Smallest first: the least, n/16, n/8, n/4, half, then steps down by less
// and less: 3n/4, 7n/8, n-1 (distinct, at least `low`, below n).
std::vector<uint32_t> smaller_counts(uint32_t n, uint32_t low) {
  std::vector<uint32_t> counts;
  for (const uint32_t count : {low, n / 16, n / 8, n / 4, n / 2, n - n / 4, n - n / 8, n - 1}) {
    if (n == 0 || count < low || count >= n) continue;
    if (std::find(counts.begin(), counts.end(), count) == counts.end()) counts.push_back(count);
  }
  return counts;
}

void drop_workers_from(uint32_t workers, Options& o) {
  for (auto* list : {&o.pauses, &o.partitions, &o.clock_steps}) {
    std::erase_if(*list, [workers](const WorkerFault& f) { return f.worker >= workers; });
  }
}

// Renumbers the workers that faults name, keeping their order, to the first
// of `workers` (0, 1, ...) or to the last (..., workers-1); worker 0 keeps
// its number when it is the fast one. Faults that still fall outside are
// dropped by the caller.
void move_faulted_workers(Options& o, uint32_t workers, bool to_last) {
  const bool fast_first = !o.fast_worker_offset.is_zero();
  std::set<uint32_t> named;
  for (const auto* list : {&o.pauses, &o.partitions, &o.clock_steps}) {
    for (const WorkerFault& f : *list) named.insert(f.worker);
  }
  if (fast_first) named.erase(0);
  const uint32_t first_free = fast_first ? 1 : 0;
  const auto count = static_cast<uint32_t>(named.size());
  uint32_t next = to_last && workers >= first_free + count ? workers - count : first_free;
  std::map<uint32_t, uint32_t> renumbered;
  if (fast_first) renumbered.emplace(0, 0);
  for (const uint32_t worker : named) renumbered.emplace(worker, next++);
  for (auto* list : {&o.pauses, &o.partitions, &o.clock_steps}) {
    for (WorkerFault& f : *list) f.worker = renumbered.at(f.worker);
  }
}

std::vector<Candidate> fewer_workers(const Options& o) {
  std::vector<Candidate> out;
  for (const uint32_t workers : smaller_counts(o.workers, 1)) {
    Options kept = o;
    kept.workers = workers;
    drop_workers_from(workers, kept);
    out.push_back({fmt::format("{} (was {})", counted(workers, "worker"), o.workers), kept});
    for (const bool to_last : {false, true}) {
      Options moved = o;
      moved.workers = workers;
      move_faulted_workers(moved, workers, to_last);
      drop_workers_from(workers, moved);
      const bool seen = std::any_of(out.begin(), out.end(), [&moved](const Candidate& c) {
        return c.options.workers == moved.workers && to_parameters(c.options) == to_parameters(moved);
      });
      if (seen) continue;
      out.push_back({fmt::format("{} (was {}), faults moved to the {} workers", counted(workers, "worker"), o.workers,
                                 to_last ? "last" : "first"),
                     moved});
    }
  }
  return out;
}

// Fewer connections. A failure that needs some connection's timing to meet
// a fault (a fast clock's acquire landing just before an owner's renew) is
// rarer with fewer connections: a run shortened earlier may have no room
// left for it, so each count is also tried with the starting run's length
// (`start`; the shorter run is tried again afterwards). And a fast worker 0
// takes every lease at the start when there are few: the other worker,
// whose lease the fast clock would take, then owns none. So each count is
// also tried with that clock on another worker (a clock step at 0s, which
// shrinks like any step). Connections only ever decrease, so the search
// still ends.
std::vector<Candidate> fewer_connections(const Options& o, const Options& start) {
  std::vector<Candidate> out;
  for (const uint32_t connections : smaller_counts(o.connections, 1)) {
    Options kept = o;
    kept.connections = connections;
    std::erase_if(kept.stops, [connections](const ConnectionStop& s) { return s.connection >= connections; });
    const std::string fewer = fmt::format("{} (was {})", counted(connections, "connection"), o.connections);
    std::vector<Candidate> variants{{fewer, kept}};
    if (!o.fast_worker_offset.is_zero()) {
      for (uint32_t worker = 1; worker < o.workers; ++worker) {
        Options moved = kept;
        moved.fast_worker_offset = Duration::zero();
        moved.clock_steps.push_back({worker, Duration::zero(), o.fast_worker_offset});
        variants.push_back({fmt::format("{}, worker 0's fast clock on worker {} instead (a clock step of {} at 0s)",
                                        fewer, worker, o.fast_worker_offset),
                            moved});
      }
    }
    for (Candidate& variant : variants) {
      out.push_back(variant);
      if (o.duration < start.duration) {
        variant.options.duration = start.duration;
        variant.change += fmt::format(", in a run of {} (was {})", start.duration, o.duration);
        out.push_back(std::move(variant));
      }
    }
    // Stops renumbered to the first connections, in their order.
    Options moved = kept;
    moved.stops = o.stops;
    std::map<uint32_t, uint32_t> renumbered;
    for (const ConnectionStop& s : o.stops) renumbered.emplace(s.connection, 0);
    uint32_t next = 0;
    for (auto& [from, to] : renumbered) to = next++;
    for (ConnectionStop& s : moved.stops) s.connection = renumbered.at(s.connection);
    std::erase_if(moved.stops, [connections](const ConnectionStop& s) { return s.connection >= connections; });
    if (to_parameters(moved) != to_parameters(kept)) {
      out.push_back({fmt::format("{} (was {}), stops moved to the first connections", counted(connections, "connection"),
                                 o.connections),
                     moved});
    }
  }
  return out;
}

// The true time by which every fault has happened (and every timed one ended).
Duration faults_end(const Options& o) {
  Duration end = Duration::zero();
  auto at_least = [&end](Duration t) { end = std::max(end, t); };
  if (!o.crash_every.is_zero()) at_least(o.crash_every + o.restart_after);
  if (o.deploy_at) at_least(*o.deploy_at + Duration::from_min(2));  // the swarm's room for a deploy
  for (const auto* list : {&o.pauses, &o.partitions}) {
    for (const WorkerFault& f : *list) at_least(f.at + f.length);
  }
  for (const WorkerFault& f : o.clock_steps) at_least(f.at);
  for (const ConnectionStop& s : o.stops) at_least(s.at);
  if (!o.stream.enabled) return end;
  for (const Duration at : o.stream.hub_crashes) at_least(at + o.stream.hub_down);
  for (const Duration at : o.stream.mass_closes) at_least(at);
  for (const Duration at : o.stream.crash_while_recording) at_least(at);
  for (const auto* list : {&o.stream.hub_slow, &o.stream.cuts}) {
    for (const TimedFault& f : *list) at_least(f.at + f.length);
  }
  return end;
}

// A shorter run keeps every fault before the faults heal (80% of the run
// unless heal_at is given).
bool fits(const Options& o, Duration duration) {
  if (duration < kShortestRun) return false;
  if (o.heal_at && *o.heal_at >= duration) return false;
  if (o.stream.enabled && o.stream.publish_until && *o.stream.publish_until > duration) return false;
  const Duration heal = o.heal_at.value_or(duration * 8 / 10);
  return faults_end(o) <= heal;
}

std::vector<Candidate> shorter_run(const Options& o) {
  // Just long enough for the faults (whole 10 s), then half, then 3/4.
  const Duration step = Duration::from_s(10);
  const Duration needed = faults_end(o) * 10 / 8;
  const Duration just_enough = std::max(kShortestRun, (needed + step - Duration::from_ns(1)) / step * step);
  std::vector<Candidate> out;
  std::vector<Duration> tried;
  for (const Duration duration : {just_enough, o.duration / 2, o.duration * 3 / 4}) {
    if (duration >= o.duration || !fits(o, duration)) continue;
    if (std::find(tried.begin(), tried.end(), duration) != tried.end()) continue;
    tried.push_back(duration);
    Options x = o;
    x.duration = duration;
    out.push_back({fmt::format("run of {} (was {})", duration, o.duration), x});
  }
  return out;
}

template <typename Access>
void halve_lengths(std::vector<Candidate>& out, const Options& o, std::string_view what, Access access) {
  const auto& list = access(o);
  for (size_t i = 0; i < list.size(); ++i) {
    const Duration length = list[i].length;
    const Duration magnitude = length.is_negative() ? -length : length;
    if (magnitude < kShortestFault * 2) continue;
    Options x = o;
    access(x)[i].length = length / 2;
    out.push_back({fmt::format("{} at {}: {} instead of {}", what, list[i].at, length / 2, length), x});
  }
}

std::vector<Candidate> shorter_faults(const Options& o) {
  std::vector<Candidate> out;
  auto change = [&](bool possible, std::string text, auto apply) {
    if (!possible) return;
    Options x = o;
    apply(x);
    out.push_back({std::move(text), x});
  };
  const Duration heal = o.healed_at();
  change(!o.crash_every.is_zero() && o.crash_every * 2 + o.restart_after <= heal,
         fmt::format("crashes every {} (was {})", o.crash_every * 2, o.crash_every),
         [](Options& x) { x.crash_every = x.crash_every * 2; });
  change(!o.crash_every.is_zero() && o.restart_after >= kShortestFault * 2,
         fmt::format("restart after {} (was {})", o.restart_after / 2, o.restart_after),
         [](Options& x) { x.restart_after = x.restart_after / 2; });
  change(!o.loss.is_zero() && o.loss.denominator <= UINT64_MAX / 2 && o.loss > Ratio{1, 100'000},
         fmt::format("message loss {}/{} (was {})", o.loss.numerator, o.loss.denominator * 2, o.loss),
         [](Options& x) { x.loss = Ratio{x.loss.numerator, x.loss.denominator * 2}; });
  change(o.skew_max >= kShortestFault * 2, fmt::format("clock skew +-{} (was +-{})", o.skew_max / 2, o.skew_max),
         [](Options& x) { x.skew_max = x.skew_max / 2; });
  const Duration fast = o.fast_worker_offset.is_negative() ? -o.fast_worker_offset : o.fast_worker_offset;
  change(fast >= kShortestFault * 2,
         fmt::format("fast worker {} ahead (was {})", o.fast_worker_offset / 2, o.fast_worker_offset),
         [](Options& x) { x.fast_worker_offset = x.fast_worker_offset / 2; });
  change(o.drift_ppm_max >= 2, fmt::format("clock drift +-{} ppm (was +-{})", o.drift_ppm_max / 2, o.drift_ppm_max),
         [](Options& x) { x.drift_ppm_max = x.drift_ppm_max / 2; });
  halve_lengths(out, o, "pause", [](auto& x) -> auto& { return x.pauses; });
  halve_lengths(out, o, "partition", [](auto& x) -> auto& { return x.partitions; });
  halve_lengths(out, o, "clock step", [](auto& x) -> auto& { return x.clock_steps; });
  if (!o.stream.enabled) return out;
  change(!o.stream.hub_crashes.empty() && o.stream.hub_down >= kShortestFault * 2,
         fmt::format("hub down for {} (was {})", o.stream.hub_down / 2, o.stream.hub_down),
         [](Options& x) { x.stream.hub_down = x.stream.hub_down / 2; });
  halve_lengths(out, o, "hub slow", [](auto& x) -> auto& { return x.stream.hub_slow; });
  halve_lengths(out, o, "stream cut", [](auto& x) -> auto& { return x.stream.cuts; });
  return out;
}

struct Generator {
  std::vector<Candidate> (*generate)(const Options& current, const Options& start);
  // After taking candidate k, the next list starts at k: its candidates are
  // per fault, and the ones before k were just refused (the next round tries
  // them again). Otherwise the next list starts from its first candidate.
  bool resume_at_taken;
};
// Fewer faults first (what a person must understand; a short run would
// leave them little room), then fewer workers, a shorter run (cheaper runs
// for what follows), fewer connections, shorter faults.
template <std::vector<Candidate> (*generate)(const Options&)>
std::vector<Candidate> from_current(const Options& current, const Options&) {
  return generate(current);
}
constexpr Generator kGenerators[] = {{from_current<switch_offs>, false},   {from_current<whole_lists>, false},
                                     {from_current<single_faults>, true}, {from_current<fewer_workers>, false},
                                     {from_current<shorter_run>, false},  {fewer_connections, false},
                                     {from_current<shorter_faults>, true}};

// ---- the search ------------------------------------------------------------------

class Shrinker {
 public:
  Shrinker(const Scenario& scenario, uint64_t seed, const ShrinkSettings& settings, ShrinkResult& result)
      : scenario_(scenario), seed_(seed), settings_(settings), result_(result) {}

  void run() {
    bool progress = true;
    while (progress && !result_.budget_exhausted) {
      progress = false;
      for (const Generator& generator : kGenerators) {
        size_t from = 0;
        while (!result_.budget_exhausted) {
          std::vector<Candidate> candidates = generator.generate(result_.last_options, result_.first_options);
          std::erase_if(candidates, [](const Candidate& c) { return !c.options.validate().empty(); });
          const std::optional<size_t> taken = first_failing(candidates, from);
          if (!taken) break;
          accept(std::move(candidates[*taken]));
          progress = true;
          from = generator.resume_at_taken ? *taken : 0;
        }
      }
    }
  }

 private:
  struct Outcome {
    std::shared_ptr<const RunResult> failing;  // null: the property held
  };

  RunConfig config_for(const Options& options) const {
    RunConfig config;
    config.seed = seed_;
    config.duration = options.duration;
    config.parameters = to_parameters(options);
    return config;
  }

  static std::string key_of(const Options& options) {
    return format_duration(options.duration) + " " + to_parameters(options).dump();
  }

  Outcome evaluate(const Options& options) const {
    const RunConfig config = config_for(options);
    Options derived;
    const std::string error = derive_lease_options(scenario_.name, config, derived);
    LP_ASSERT_MSG(error.empty(), "a shrink candidate is invalid: {}", error);
    LP_ASSERT_MSG(to_parameters(derived) == config.parameters, "to_parameters does not round-trip: {}",
                  config.parameters.dump());
    RunResult result = scenario_.run(config);
    if (first_violation_of(result, result_.property).empty()) return {};
    return {std::make_shared<const RunResult>(std::move(result))};
  }

  // The first candidate from `from` on whose run still fails the property,
  // as a sequential search would find it; the runs of a batch are made in
  // parallel, and those after the taken one are discarded (not cached), so
  // the outcome and the counted runs never depend on the number of threads.
  std::optional<size_t> first_failing(const std::vector<Candidate>& candidates, size_t from) {
    size_t next = from;
    while (next < candidates.size()) {
      std::vector<size_t> batch;
      std::set<std::string> batch_keys;
      for (size_t k = next; k < candidates.size() && batch.size() < std::max(1u, settings_.jobs) &&
                            result_.runs + batch.size() < settings_.budget_runs;
           ++k) {
        const std::string key = key_of(candidates[k].options);
        if (cache_.contains(key) || !batch_keys.insert(key).second) continue;
        batch.push_back(k);
      }
      std::vector<Outcome> outcomes(batch.size());
      auto body = [&](size_t i) { outcomes[i] = evaluate(candidates[batch[i]].options); };
      if (settings_.parallel && batch.size() > 1) {
        settings_.parallel(batch.size(), body);
      } else {
        for (size_t i = 0; i < batch.size(); ++i) body(i);
      }
      size_t used = 0;  // batch entries consumed in order
      for (; next < candidates.size(); ++next) {
        const std::string key = key_of(candidates[next].options);
        auto cached = cache_.find(key);
        if (cached == cache_.end()) {
          if (used == batch.size() || batch[used] != next) break;  // not run yet: the next batch
          ++result_.runs;
          cached = cache_.emplace(key, outcomes[used++]).first;
        }
        if (cached->second.failing) {
          result_.speculative_runs += batch.size() - used;
          pending_ = cached->second.failing;
          return next;
        }
      }
      if (next < candidates.size() && result_.runs >= settings_.budget_runs) {
        result_.budget_exhausted = true;
        return std::nullopt;
      }
    }
    return std::nullopt;
  }

  void accept(Candidate candidate) {
    result_.last_options = std::move(candidate.options);
    result_.last = *pending_;
    ++result_.steps;
    if (!settings_.on_step) return;
    const Options& o = result_.last_options;
    settings_.on_step(ShrinkStep{result_.steps, candidate.change, faults_of(o).size(), o.workers, o.connections,
                                 o.duration, result_.runs});
  }

  const Scenario& scenario_;
  uint64_t seed_;
  const ShrinkSettings& settings_;
  ShrinkResult& result_;
  std::map<std::string, Outcome> cache_;  // by duration and parameters
  std::shared_ptr<const RunResult> pending_;
};

}  // namespace

ShrinkResult shrink(const Scenario& scenario, const RunConfig& start, const ShrinkSettings& settings) {
  LP_ASSERT_MSG(is_lease_scenario(scenario.name), "shrink works on lease scenarios, not '{}'", scenario.name);
  LP_ASSERT(start.duration.has_value());
  LP_ASSERT_GT(settings.budget_runs, 0u);
  ShrinkResult result;
  const std::string error = derive_lease_options(scenario.name, start, result.first_options);
  LP_ASSERT_MSG(error.empty(), "unchecked parameters: {}", error);
  RunConfig plain = start;
  plain.trace_jsonl = nullptr;
  plain.keep_digests = false;
  plain.keep_lines = false;
  plain.observe_trace = nullptr;
  plain.before_run = nullptr;
  result.first = scenario.run(plain);
  result.runs = 1;
  result.property = settings.property;
  if (result.property.empty() && !result.first.passed()) {
    result.property = violation_kind(result.first.violations.front());
  }
  result.started_failing = !result.property.empty() && !first_violation_of(result.first, result.property).empty();
  result.last = result.first;
  result.last_options = result.first_options;
  if (!result.started_failing) return result;
  if (settings.on_step) {
    const Options& o = result.first_options;
    settings.on_step(ShrinkStep{0, fmt::format("fails {}", result.property), faults_of(o).size(), o.workers,
                                o.connections, o.duration, result.runs});
  }
  Shrinker{scenario, start.seed, settings, result}.run();
  if (result.steps > 0) result.last.parameters = minimal_parameters(scenario.name, start.seed, result.last_options);
  return result;
}

}  // namespace leaseproof::scenarios
