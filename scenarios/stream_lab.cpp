// The article's lab as scenarios (stream_lab.hpp).
#include "scenarios/stream_lab.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "models/stream.hpp"
#include "properties/sim_invariants.hpp"
#include "properties/stream_checkers.hpp"
#include "sim/world.hpp"

namespace leaseproof::scenarios {
namespace {

struct LabOptions {
  resume::HubConfig hub;
  resume::ClientConfig client;
  uint32_t subscribers = 1;
  bool read = true;
  std::optional<Duration> relay_idle;
  Duration duration = Duration::from_s(20);
};

// What the lab reads from the trace.
struct LabObserver {
  std::map<std::string, uint64_t, std::less<>> notes;  // by label (marks by name)
  std::vector<Instant> opens;                          // upstream.open times
  std::vector<std::pair<Instant, std::string>> closes; // hub.close: time, detail
  std::vector<Instant> idle_cuts;

  void observe(const sim::TraceEvent& e) {
    if (e.kind != sim::EventKind::note) return;
    ++notes[e.label == "mark" ? "mark." + std::string{e.detail} : std::string{e.label}];
    if (e.label == "upstream.open") opens.push_back(e.true_time);
    if (e.label == "hub.close") closes.emplace_back(e.true_time, std::string{e.detail});
    if (e.label == "relay.idle_cut") idle_cuts.push_back(e.true_time);
  }
  uint64_t count(std::string_view name) const {
    const auto it = notes.find(name);
    return it == notes.end() ? 0 : it->second;
  }
};

std::string read_parameters(std::string_view name, const nlohmann::json& p, LabOptions& o) {
  if (!p.is_object()) return "parameters: expected a JSON object";
  const bool wave = name == "stream-wave";
  for (const auto& [key, value] : p.items()) {
    const bool known = key == "ping_interval" || key == "pong_timeout" || (wave && (key == "jitter" || key == "subscribers"));
    if (!known) {
      return fmt::format("{}: unknown field; allowed: ping_interval, pong_timeout{}", key,
                         wave ? ", jitter, subscribers" : "");
    }
  }
  auto duration = [&](const char* key, Duration& out) -> std::string {
    if (!p.contains(key)) return {};
    std::optional<Duration> parsed = p[key].is_string() ? parse_duration(p[key].get<std::string>()) : std::nullopt;
    if (!parsed) return fmt::format("{}: expected a duration string such as \"2s\", got {}", key, p[key].dump());
    out = *parsed;
    return {};
  };
  if (std::string e = duration("ping_interval", o.hub.ping_interval); !e.empty()) return e;
  if (std::string e = duration("pong_timeout", o.hub.pong_timeout); !e.empty()) return e;
  if (p.contains("jitter")) {
    if (!p["jitter"].is_boolean()) return fmt::format("jitter: expected true or false, got {}", p["jitter"].dump());
    o.client.jitter = p["jitter"].get<bool>();
  }
  if (p.contains("subscribers")) {
    const auto& v = p["subscribers"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 10'000) {
      return fmt::format("subscribers: expected an integer in 1..10000, got {}", v.dump());
    }
    o.subscribers = static_cast<uint32_t>(v.get<int64_t>());
  }
  if (std::string e = o.hub.validate(); !e.empty()) return e;
  return o.client.validate();
}

// The preset of each lab scenario, before parameters.
std::optional<LabOptions> preset(std::string_view name) {
  LabOptions o;
  if (name == "stream-slow-subscriber") {
    o.read = false;
    o.hub.ring_bytes_max = 16ull << 20;
    o.duration = Duration::from_s(10);
    return o;
  }
  if (name == "stream-relay-idle") {
    o.relay_idle = Duration::from_ms(2500);
    o.duration = Duration::from_s(7);
    return o;
  }
  if (name == "stream-silent-subscriber") {
    o.read = false;
    o.duration = Duration::from_s(10);
    return o;
  }
  if (name == "stream-wave") {
    o.subscribers = 1000;
    // A restarting service (1012) needs seconds: a larger base for it, as
    // the protocol allows per close code.
    o.client.reconnect_base = Duration::from_s(1);
    o.client.reconnect_base_by_code[resume::close_code::service_restart] = Duration::from_s(10);
    o.client.reconnect_cap = Duration::from_s(30);
    o.duration = Duration::from_s(60);
    return o;
  }
  if (name == "stream-empty-reconnect") {
    o.duration = Duration::from_s(30);
    return o;
  }
  return std::nullopt;
}

// Peak reconnects in any one-second window starting at an open, after `from`.
uint64_t peak_per_second(const std::vector<Instant>& opens, Instant from) {
  uint64_t peak = 0;
  size_t begin = 0;
  for (size_t end = 0; end < opens.size(); ++end) {
    if (opens[end] < from) {
      begin = end + 1;
      continue;
    }
    while (opens[end] - opens[begin] >= Duration::from_s(1)) ++begin;
    peak = std::max<uint64_t>(peak, end - begin + 1);
  }
  return peak;
}

void judge(std::string_view name, const LabOptions& o, const LabObserver& seen, const models::HubShared& hub,
           Instant wave_at, RunResult& result) {
  auto fail = [&](std::string text) { result.violations.push_back(std::move(text)); };
  // The timers' own event ordering adds nanoseconds: a millisecond of slack.
  const Duration cut_bound = o.hub.ping_interval + o.hub.pong_timeout + Duration::from_ms(1);
  if (hub.queue_peak_bytes > o.hub.subscriber_queue_bytes_max) {
    fail(fmt::format("subscriber queue bound: peak {} B above {} B", hub.queue_peak_bytes,
                     o.hub.subscriber_queue_bytes_max));
  }
  result.summary = fmt::format("subscriber queue peak {} B (bound {} B); {} opens; hub closes: {}", hub.queue_peak_bytes,
                               o.hub.subscriber_queue_bytes_max, seen.opens.size(), seen.closes.size());
  // One line per close; closes at one instant for one reason (a mass close)
  // folded into one line naming the first and last connection.
  for (size_t i = 0; i < seen.closes.size();) {
    const auto& [at, detail] = seen.closes[i];
    const std::string_view reason = std::string_view{detail}.substr(std::min(detail.find(' '), detail.size()));
    size_t j = i + 1;
    while (j < seen.closes.size() && seen.closes[j].first == at &&
           std::string_view{seen.closes[j].second}.ends_with(reason) &&
           seen.closes[j].second.size() - reason.size() == seen.closes[j].second.find(' ')) {
      ++j;
    }
    if (j - i > 2) {
      const std::string& last = seen.closes[j - 1].second;
      result.summary += fmt::format("\n  {} hub.close{}: {} connections, {} .. {}", at, reason, j - i,
                                    detail.substr(0, detail.size() - reason.size()),
                                    last.substr(0, last.size() - reason.size()));
    } else {
      for (size_t k = i; k < j; ++k) result.summary += fmt::format("\n  {} hub.close {}", at, seen.closes[k].second);
    }
    i = j;
  }
  if (name == "stream-slow-subscriber") {
    const bool full = std::any_of(seen.closes.begin(), seen.closes.end(),
                                  [](const auto& c) { return c.second.find(" 1013 ") != std::string::npos; });
    if (!full) fail("slow subscriber: the hub never closed it with 1013");
  } else if (name == "stream-relay-idle") {
    if (!seen.idle_cuts.empty()) fail(fmt::format("relay idle cut at {}: pings did not keep the connection up", seen.idle_cuts[0]));
    if (seen.opens.size() != 1) fail(fmt::format("the connection was opened {} times, expected once", seen.opens.size()));
  } else if (name == "stream-silent-subscriber") {
    if (seen.closes.empty() || seen.opens.empty()) {
      fail("silent subscriber: never cut");
    } else if (seen.closes[0].first - seen.opens[0] > cut_bound) {
      fail(fmt::format("silent subscriber cut after {}, bound {} (ping interval + pong timeout)",
                       seen.closes[0].first - seen.opens[0], cut_bound));
    } else {
      result.summary += fmt::format("\nsilent subscriber cut {} after it connected (bound {})",
                                    seen.closes[0].first - seen.opens[0], cut_bound);
    }
  } else if (name == "stream-wave") {
    const uint64_t reconnects = static_cast<uint64_t>(
        std::count_if(seen.opens.begin(), seen.opens.end(), [&](Instant t) { return t >= wave_at; }));
    const uint64_t peak = peak_per_second(seen.opens, wave_at);
    result.counters.emplace_back("wave.reconnects", reconnects);
    result.counters.emplace_back("wave.peak_per_second", peak);
    result.summary += fmt::format("\nreconnect wave after a mass close of {} subscribers ({}): {} reconnects, peak "
                                  "{} per second",
                                  o.subscribers, o.client.jitter ? "full jitter" : "no jitter", reconnects, peak);
    if (reconnects != o.subscribers) fail(fmt::format("{} of {} subscribers reconnected", reconnects, o.subscribers));
  } else if (name == "stream-empty-reconnect") {
    // The restarted hub is in a new epoch: one epoch_changed reset that
    // declares nothing lost (the channel never had a message), no give-up.
    if (seen.count("resume.reset") > 1) fail("an empty channel's subscriber got more than one reset");
    if (seen.count("resume.give_up") != 0) fail("an empty channel's subscriber gave up");
    if (seen.opens.size() < 2) fail("the subscriber never reconnected");
  }
}

}  // namespace

std::string validate_stream_lab(std::string_view name, const RunConfig& config) {
  std::optional<LabOptions> o = preset(name);
  if (!o) return fmt::format("unknown lab scenario {}", name);
  return read_parameters(name, config.parameters, *o);
}

RunResult run_stream_lab(std::string_view name, const RunConfig& config) {
  LabOptions o = *preset(name);
  const std::string error = read_parameters(name, config.parameters, o);
  LP_ASSERT_MSG(error.empty(), "unchecked parameters: {}", error);
  const Duration duration = config.duration.value_or(o.duration);
  sim::World world{config.seed};
  configure_trace(world, config);
  properties::SimInvariants invariants;
  LabObserver seen;
  properties::ReconnectStormChecker storms{o.client};
  world.trace().add_observer([&](const sim::TraceEvent& e) {
    invariants.observe(e);
    seen.observe(e);
    storms.observe(e);
  });
  world.set_default_link(sim::LinkConfig{sim::LatencyDistribution{Duration::from_ms(2), Duration::from_ms(3),
                                                                   Ratio{1, 200}, Duration::from_ms(200)},
                                         Ratio::zero(), false});
  models::HubShared hub;
  hub.config = o.hub;
  if (name == "stream-slow-subscriber") {
    // 64 MB in 64 KiB messages, all at once, one second in.
    hub.bursts.push_back(models::HubShared::Burst{"c0", Duration::from_s(1), 1024, 64u << 10, Duration::zero()});
  }
  const NodeId hub_node = world.add_node("hub", {}, [&hub] { return std::make_unique<models::HubProcess>(hub); });
  world.set_stream_node(hub_node);
  NodeId via = hub_node;
  if (o.relay_idle) {
    via = world.add_node("relay", {}, [hub_node, idle = *o.relay_idle] {
      return std::make_unique<models::RelayProcess>(hub_node, idle);
    });
    world.set_stream_node(via);
  }
  models::SubscriberPoolOptions pool{via, "c", o.subscribers, o.client, o.read};
  world.add_node("subscribers", {}, [&pool] { return std::make_unique<models::SubscriberPool>(pool); });
  const Instant wave_at = Instant::zero() + Duration::from_s(5);
  if (name == "stream-wave") {
    world.at(wave_at, [&world, hub_node] {
      dynamic_cast<models::HubProcess*>(world.process(hub_node))->close_all(resume::close_code::service_restart);
    });
  }
  if (name == "stream-empty-reconnect") {
    world.at(Instant::zero() + Duration::from_s(5), [&world, hub_node] { world.crash(hub_node); });
    world.at(Instant::zero() + Duration::from_s(6), [&world, hub_node] { world.restart(hub_node); });
  }
  if (config.before_run) config.before_run(world);
  world.run_until(Instant::zero() + duration);

  RunResult result = world_result(world, config, duration,
                                  fmt::format("lab {}: subscribers={} read={} relay_idle={} ping={} pong_timeout={} "
                                              "queue={} B reconnect={}..{} jitter={}",
                                              name, o.subscribers, o.read,
                                              o.relay_idle ? format_duration(*o.relay_idle) : "-", o.hub.ping_interval,
                                              o.hub.pong_timeout, o.hub.subscriber_queue_bytes_max,
                                              o.client.reconnect_base, o.client.reconnect_cap, o.client.jitter));
  result.scenario = std::string{name};
  result.violations = invariants.violations();
  judge(name, o, seen, hub, wave_at, result);
  storms.finish();
  for (const std::string& v : storms.violations()) result.violations.push_back(v);
  if (!storms.waves().empty()) result.summary += "\n" + storms.summary();
  for (const auto& [label, count] : seen.notes) result.counters.emplace_back(label, count);
  result.counters.emplace_back("stream.queue_peak_bytes", hub.queue_peak_bytes);
  return result;
}

}  // namespace leaseproof::scenarios
