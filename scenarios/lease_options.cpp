// Options of the lease scenarios: validation, description, JSON parameters and
// the named presets.
#include "scenarios/lease.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/prng.hpp"

namespace leaseproof::scenarios {

namespace {

// The most messages a streaming run may publish (see validate_stream).
constexpr uint64_t kPublishedMessagesMax = 10'000'000;

std::string validate_stream(const StreamOptions& s, Duration duration, Duration latency, uint32_t connections) {
  if (!s.enabled) return {};
  if (std::string error = s.hub.validate(); !error.empty()) return "stream." + error;
  // The simulation's floors: timers shorter than these only multiply events
  // (a 1us ping ran out of memory), so a run would not be bounded by what it
  // simulates.
  const std::pair<const char*, Duration> floors[] = {
      {"ping_interval", Duration::from_ms(100)},   {"pong_timeout", Duration::from_ms(1)},
      {"write_deadline", Duration::from_ms(1)},    {"reconnect_base", Duration::from_ms(1)},
      {"record_retry_base", Duration::from_ms(1)}, {"hub_silence_timeout", Duration::from_ms(1)},
      {"hub_down", Duration::from_ms(1)}};
  const Duration values[] = {s.hub.ping_interval,           s.hub.pong_timeout,
                             s.hub.write_deadline,          s.client.reconnect_base,
                             s.client.record_retry_base,    s.client.hub_silence_timeout,
                             s.hub_down};
  for (size_t i = 0; i < std::size(floors); ++i) {
    if (values[i] < floors[i].second) {
      return fmt::format("stream.{} ({}) must be at least {}", floors[i].first, values[i], floors[i].second);
    }
  }
  // A ping and its pong cross every hop twice (worker, relay, hub).
  const Duration round_trip = latency * (s.relay_idle ? 4 : 2);
  if (round_trip >= s.hub.pong_timeout) {
    return fmt::format("stream.pong_timeout ({}) must be longer than the shortest ping round trip ({}: latency {} x {} "
                       "hops): every live subscriber would be cut",
                       s.hub.pong_timeout, round_trip, latency, s.relay_idle ? 4 : 2);
  }
  if (std::string error = s.client.validate(); !error.empty()) return "stream." + error;
  // Publishing is the stream's work: bounded per simulated second, so that a
  // run costs time in proportion to what it simulates.
  constexpr int64_t kMessagesPerSecondMax = 10'000;
  if (s.publish_interval < Duration::from_ms(1)) {
    return fmt::format("stream.publish_interval ({}) must be at least 1ms", s.publish_interval);
  }
  if (static_cast<int64_t>(connections) * Duration::from_s(1).ns() / s.publish_interval.ns() > kMessagesPerSecondMax) {
    return fmt::format("stream.publish_interval ({}) with {} connections publishes more than {} messages a second: "
                       "give a longer interval or fewer connections",
                       s.publish_interval, connections, kMessagesPerSecondMax);
  }
  if (s.message_bytes == 0 || s.message_bytes > (1u << 20)) {
    return fmt::format("stream.message_bytes ({}) must be 1..1048576", s.message_bytes);
  }
  if (s.relay_idle && *s.relay_idle < Duration::from_ms(100)) {
    return fmt::format("stream.relay_idle ({}) must be at least 100ms", *s.relay_idle);
  }
  if (s.publish_until && (s.publish_until->is_negative() || *s.publish_until > duration)) {
    return "stream.publish_until must be within the run";
  }
  // What a run keeps grows with what it publishes (the simulated sink table
  // holds every record, the checkers every sink write): about 800 B a
  // message (stream-steady: 150 MB at 6 simulated minutes, 372 MB at 18). A
  // run that cannot fit in memory is refused before it starts.
  const uint64_t published = static_cast<uint64_t>(connections) *
                             static_cast<uint64_t>(s.publish_until.value_or(duration).ns() / s.publish_interval.ns());
  if (published > kPublishedMessagesMax) {
    return fmt::format("stream: {} connections publishing every {} for {} publish {} messages, about {} GB of "
                       "simulated state at about 800 B a message; at most {} messages (about 8 GB) fit: give a "
                       "shorter duration or publish_until, a longer publish_interval, or fewer connections",
                       connections, s.publish_interval, s.publish_until.value_or(duration), published,
                       published / 1'250'000, kPublishedMessagesMax);
  }
  for (const auto& [name, list] : {std::pair{"hub_crashes", &s.hub_crashes}, std::pair{"mass_closes", &s.mass_closes},
                                    std::pair{"crash_while_recording", &s.crash_while_recording}}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const Duration at = (*list)[i];
      if (at.is_negative() || at >= duration) {
        return fmt::format("stream.{}[{}] ({}) must be within the run (0s up to {})", name, i, at, duration);
      }
    }
  }
  for (const auto& [name, list] : {std::pair{"hub_slow", &s.hub_slow}, std::pair{"cuts", &s.cuts}}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const TimedFault& fault = (*list)[i];
      if (fault.at.is_negative() || fault.at >= duration) {
        return fmt::format("stream.{}[{}].at ({}) must be within the run (0s up to {})", name, i, fault.at, duration);
      }
      if (fault.length <= Duration::zero()) {
        return fmt::format("stream.{}[{}].length ({}) must be positive", name, i, fault.length);
      }
    }
  }
  return {};
}

}  // namespace

std::string LeaseScenarioOptions::validate() const {
  if (std::string error = lease.validate(); !error.empty()) return error;
  if (workers == 0 || workers > 1000) return fmt::format("workers ({}) must be 1..1000", workers);
  if (connections > 100'000) return fmt::format("connections ({}) must be at most 100000", connections);
  if (duration <= Duration::zero()) return "duration must be positive";
  if (skew_max.is_negative()) return "skew_max must not be negative";
  if (drift_ppm_max < 0 || drift_ppm_max > 100'000) return fmt::format("drift_ppm_max ({}) must be 0..100000", drift_ppm_max);
  if (latency.is_negative() || jitter.is_negative()) return "latency and jitter must not be negative";
  if (latency * 2 >= lease.request_timeout) {
    return fmt::format("latency ({}) must be under half of request_timeout ({}): every round trip takes at least "
                       "2 x latency, so no request would be answered in time",
                       latency, lease.request_timeout);
  }
  if (!loss.is_probability()) return fmt::format("loss ({}) must be a probability (at most 1)", loss);
  if (sqs_wait.is_negative() || sqs_wait > Duration::from_s(20)) {
    return fmt::format("sqs_wait ({}) must be 0..20s (SQS's longest receive wait)", sqs_wait);
  }
  if (crash_every.is_negative() || (crash_every > Duration::zero() && crash_every < Duration::from_s(1))) {
    return fmt::format("crash_every ({}) must be 0s (no crashes) or at least 1s", crash_every);
  }
  if (restart_after.is_negative()) return "restart_after must not be negative";
  for (const auto& [name, list] : {std::pair{"pauses", &pauses}, std::pair{"partitions", &partitions},
                                    std::pair{"holds", &holds}, std::pair{"write_throttles", &write_throttles},
                                    std::pair{"refusals", &refusals}, std::pair{"sqs_refusals", &sqs_refusals},
                                    std::pair{"twins", &twins}, std::pair{"clock_steps", &clock_steps}}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const WorkerFault& fault = (*list)[i];
      if (fault.worker >= workers) {
        return fmt::format("{}[{}].worker ({}) must name one of the {} workers (0..{})", name, i, fault.worker, workers,
                           workers - 1);
      }
      if (fault.at.is_negative() || fault.at >= duration) {
        return fmt::format("{}[{}].at ({}) must be within the run (0s up to {})", name, i, fault.at, duration);
      }
      // A clock step's length is its size and may be negative, not zero.
      if (list != &clock_steps && fault.length <= Duration::zero()) {
        return fmt::format("{}[{}].length ({}) must be positive", name, i, fault.length);
      }
      if (list == &clock_steps && fault.length == Duration::zero()) {
        return fmt::format("{}[{}].length must not be 0s (a step of nothing); negative steps the clock back", name, i);
      }
    }
  }
  if (!twins.empty() && !stable_worker_ids) {
    return "twins: needs stable_worker_ids true (a twin runs under another worker's stable id; without stable ids "
           "every process has an id of its own)";
  }
  if (hold_delay <= Duration::zero() || hold_delay > Duration::from_min(10)) {
    return fmt::format("hold_delay ({}) must be above 0s and at most 10m", hold_delay);
  }
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].connection >= connections) {
      return fmt::format("stops[{}].connection ({}) must name one of the {} connections", i, stops[i].connection,
                         connections);
    }
    if (stops[i].at.is_negative() || stops[i].at >= duration) {
      return fmt::format("stops[{}].at ({}) must be within the run (0s up to {})", i, stops[i].at, duration);
    }
  }
  if (throttle_partition_wcu_per_s < 0) return "throttle_partition_wcu_per_s must not be negative";
  if (autoscale_target <= 0) return "autoscale_target must be positive";
  if (heal_at && (*heal_at <= Duration::zero() || *heal_at > duration)) {
    return fmt::format("heal_at ({}) must be within the run (above 0s, up to {})", *heal_at, duration);
  }
  if (deploy_at && (deploy_at->is_negative() || *deploy_at >= duration)) {
    return fmt::format("deploy_at ({}) must be within the run (0s up to {})", *deploy_at, duration);
  }
  return validate_stream(stream, duration, latency, connections);
}

std::string LeaseScenarioOptions::beyond_assumptions() const {
  Duration steps = Duration::zero();
  for (const WorkerFault& step : clock_steps) steps += step.length.is_negative() ? -step.length : step.length;
  const Duration fast = fast_worker_offset.is_negative() ? -fast_worker_offset : fast_worker_offset;
  const Duration pairwise_skew = skew_max * 2 + fast + steps;
  if (lease.algorithm == lease::Algorithm::seed) {
    if (pairwise_skew > Duration::zero()) return fmt::format("clock skew up to {} (the seed assumes none)", pairwise_skew);
    if (!pauses.empty()) return "process pauses (the seed assumes none)";
    return {};
  }
  if (lease.expiry_mode == lease::ExpiryMode::wall && pairwise_skew > lease.skew_tolerated()) {
    return fmt::format("wall-clock skew up to {} > {} tolerated by wall mode", pairwise_skew, lease.skew_tolerated());
  }
  if (drift_ppm_max > lease.drift_ppm_tolerated()) {
    return fmt::format("clock rate error up to {} ppm > {} ppm tolerated", drift_ppm_max, lease.drift_ppm_tolerated());
  }
  if (loss > kLossAssumed) {
    // The recovery bounds count two timed-out requests per recovery; with
    // more loss, recoveries needing three or more retries are common
    // (docs/scenarios.md, limits).
    return fmt::format("message loss {} > {} the recovery bounds assume", loss, kLossAssumed);
  }
  if (!holds.empty() && stream.enabled && !resume::record_writes_fenced(stream.mode)) {
    // docs/resume-core.md: put mode's record puts are not fenced; their order
    // across a handover relies on no request outliving the safety margin.
    return fmt::format("requests held in flight up to {} > the {} margin {} mode's unfenced record puts assume",
                       hold_delay, lease.safety_margin, resume::to_string(stream.mode));
  }
  return {};
}

std::string LeaseScenarioOptions::describe() const {
  std::string text = fmt::format(
      "algorithm={} expiry={} workers={} connections={} duration={} lease={} heartbeat={} reconcile={}(+{}) "
      "margin={} capacity={} request_timeout={} skew_max={} fast_worker_offset={} drift_ppm_max={} latency={}+[0,{}] loss={} "
      "sqs_wait={} crash_every={} restart_after={} stable_worker_ids={} tenure_returns={} throttle_wcu={} deploy_at={} autoscaler={} "
      "heal_at={}",
      lease::to_string(lease.algorithm), lease::to_string(lease.expiry_mode), workers, connections, duration,
      lease.lease_duration, lease.heartbeat_interval, lease.reconcile_interval, lease.reconcile_jitter_max,
      lease.safety_margin, lease.capacity, lease.request_timeout, skew_max, fast_worker_offset, drift_ppm_max, latency, jitter, loss,
      sqs_wait, crash_every, restart_after, stable_worker_ids, tenure_returns, throttle_partition_wcu_per_s, deploy_at ? format_duration(*deploy_at) : "-",
      autoscaler, healed_at());
  for (const WorkerFault& f : pauses) text += fmt::format("\n  pause: worker {} at {} for {}", f.worker, f.at, f.length);
  for (const WorkerFault& f : partitions) {
    text += fmt::format("\n  partition: worker {} <-> dynamodb at {} for {}", f.worker, f.at, f.length);
  }
  for (const WorkerFault& f : holds) {
    text += fmt::format("\n  hold: worker {} -> dynamodb, requests sent at {} for {} arrive {}..{} late", f.worker,
                        f.at, f.length, hold_delay / 2, hold_delay);
  }
  for (const WorkerFault& f : write_throttles) {
    text += fmt::format("\n  write throttle: worker {} -> dynamodb, writes refused from {} for {}", f.worker, f.at,
                        f.length);
  }
  for (const WorkerFault& f : refusals) {
    text += fmt::format("\n  refusal: worker {} -> dynamodb, requests refused at once from {} for {}", f.worker, f.at,
                        f.length);
  }
  for (const WorkerFault& f : sqs_refusals) {
    text += fmt::format("\n  refusal: worker {} -> sqs, requests refused at once from {} for {}", f.worker, f.at,
                        f.length);
  }
  for (const WorkerFault& f : twins) {
    text += fmt::format("\n  twin: a second process with worker {}'s id from {}, crashed {} later", f.worker, f.at,
                        f.length);
  }
  if (late_notices && !write_throttles.empty()) {
    text += "\n  late notices: a duplicate release notice of a throttled worker's lease, just before its deadline";
  }
  for (const WorkerFault& f : clock_steps) {
    text += fmt::format("\n  clock step: worker {} at {} by {}", f.worker, f.at, f.length);
  }
  constexpr size_t kStopsListed = 10;
  for (size_t i = 0; i < stops.size() && i < kStopsListed; ++i) {
    text += fmt::format("\n  stop: connection c{} at {}", stops[i].connection, stops[i].at);
  }
  if (stops.size() > kStopsListed) text += fmt::format("\n  ... and {} more stops", stops.size() - kStopsListed);
  if (stream.enabled) {
    const StreamOptions& s = stream;
    text += fmt::format(
        "\n  stream: record={}{} publish every {} ({} B) until {} relay_idle={} ring={} msgs/{} B replay_max={} "
        "queue={} B ping={} pong_timeout={} write_deadline={} reconnect={}..{} jitter={} batch={} "
        "linger={} record_retry={}..{} keep_ring={}{}{}",
        resume::to_string(s.mode),
        s.mode == resume::RecordMode::packed ? fmt::format(" pack={} B", s.pack_bytes) : std::string{},
        s.publish_interval, s.message_bytes, s.published_until(healed_at()),
        s.relay_idle ? format_duration(*s.relay_idle) : "-", s.hub.ring_messages_max, s.hub.ring_bytes_max,
        s.hub.replay_messages_max, s.hub.subscriber_queue_bytes_max, s.hub.ping_interval, s.hub.pong_timeout,
        s.hub.write_deadline, s.client.reconnect_base, s.client.reconnect_cap, s.client.jitter,
        s.client.record_batch_max, s.client.record_linger, s.client.record_retry_base, s.client.record_retry_cap,
        s.keep_ring,
        s.client.bug_cursor_on_receive ? " BROKEN-CLIENT" : "",
        s.hub.bug_skip_evicted_without_reset ? " BROKEN-HUB" : "");
    for (const Duration at : s.hub_crashes) text += fmt::format("\n  hub crash: at {} for {}", at, s.hub_down);
    for (const Duration at : s.mass_closes) text += fmt::format("\n  hub mass close (1012): at {}", at);
    for (const TimedFault& f : s.hub_slow) text += fmt::format("\n  hub slow: at {} for {}", f.at, f.length);
    for (const TimedFault& f : s.cuts) text += fmt::format("\n  stream cut: at {} for {}", f.at, f.length);
    for (const Duration at : s.crash_while_recording) text += fmt::format("\n  crash while recording: from {}", at);
  }
  text += "\n  assumptions: " + lease.assumptions();
  if (std::string beyond = beyond_assumptions(); !beyond.empty()) text += "\n  BEYOND THE ASSUMPTIONS: " + beyond;
  return text;
}

namespace {

struct Reader {
  const nlohmann::json& json;
  std::string error;

  bool has(const char* key) const { return json.contains(key); }

  bool duration(const char* key, Duration& out) {
    if (!has(key)) return true;
    const auto& value = json[key];
    std::optional<Duration> parsed = value.is_string() ? parse_duration(value.get<std::string>()) : std::nullopt;
    if (!parsed) {
      error = fmt::format("{}: expected a duration string such as \"20s\" or \"1m30s\", got {}", key, value.dump());
      return false;
    }
    out = *parsed;
    return true;
  }
  // A duration, or null for none.
  bool optional_duration(const char* key, std::optional<Duration>& out) {
    if (!has(key)) return true;
    if (json[key].is_null()) {
      out.reset();
      return true;
    }
    Duration value;
    if (!duration(key, value)) return false;
    out = value;
    return true;
  }
  template <typename Int>
  bool integer(const char* key, Int& out, int64_t low, int64_t high) {
    if (!has(key)) return true;
    const auto& value = json[key];
    if (!value.is_number_integer() || value.get<int64_t>() < low || value.get<int64_t>() > high) {
      error = fmt::format("{}: expected an integer in {}..{}, got {}", key, low, high, value.dump());
      return false;
    }
    out = static_cast<Int>(value.get<int64_t>());
    return true;
  }
  bool boolean(const char* key, bool& out) {
    if (!has(key)) return true;
    if (!json[key].is_boolean()) {
      error = fmt::format("{}: expected true or false, got {}", key, json[key].dump());
      return false;
    }
    out = json[key].get<bool>();
    return true;
  }
  bool faults(const char* key, std::vector<WorkerFault>& out) {
    if (!has(key)) return true;
    const auto& list = json[key];
    if (!list.is_array()) {
      error = fmt::format("{}: expected a list of {{\"worker\", \"at\", \"length\"}} objects", key);
      return false;
    }
    out.clear();
    for (size_t i = 0; i < list.size(); ++i) {
      const auto& entry = list[i];
      WorkerFault fault;
      if (!entry.is_object()) {
        error = fmt::format("{}[{}]: expected an object with worker, at, length", key, i);
        return false;
      }
      for (const auto& [field, value] : entry.items()) {
        if (field != "worker" && field != "at" && field != "length") {
          error = fmt::format("{}[{}].{}: unknown field; allowed: worker, at, length", key, i, field);
          return false;
        }
      }
      // Every fault names all three: a missing one is a mistake, never a
      // default (an empty clock step would be a silent no-op).
      for (const char* field : {"worker", "at", "length"}) {
        if (!entry.contains(field)) {
          error = fmt::format("{}[{}].{}: missing; every entry needs worker, at and length", key, i, field);
          return false;
        }
      }
      Reader inner{entry, {}};
      if (!inner.integer("worker", fault.worker, 0, 999) || !inner.duration("at", fault.at) ||
          !inner.duration("length", fault.length)) {
        error = fmt::format("{}[{}].{}", key, i, inner.error);
        return false;
      }
      out.push_back(fault);
    }
    return true;
  }
};

constexpr const char* kKnownFields[] = {
    "algorithm", "expiry", "workers", "connections", "lease", "heartbeat", "reconcile", "reconcile_jitter",
    "margin", "request_timeout", "capacity", "watch_interval", "skew_max", "fast_worker_offset", "drift_ppm_max", "latency",
    "jitter", "loss", "sqs_wait", "crash_every", "restart_after", "stable_worker_ids", "tenure_returns", "pauses", "partitions", "holds", "hold_delay", "write_throttles", "refusals", "sqs_refusals", "twins", "late_notices",
    "clock_steps", "throttle_partition_wcu_per_s", "deploy_at", "stops", "autoscaler", "autoscale_target", "heal_at", "stream"};

constexpr const char* kStreamFields[] = {
    "enabled", "record_mode", "pack_bytes", "publish_interval", "message_bytes", "publish_until", "relay_idle", "hub_crashes",
    "hub_down", "keep_ring", "mass_closes", "hub_slow", "cuts", "ring_messages", "ring_bytes", "replay_messages",
    "queue_bytes", "ping_interval", "pong_timeout", "write_deadline", "reconnect_base", "reconnect_cap", "jitter",
    "record_batch", "record_linger", "record_retry_base", "record_retry_cap", "hub_silence_timeout", "broken_client",
    "broken_hub", "crash_while_recording"};

// "" when every key of `json` is one of `fields`; else names the first other
// one (after `prefix`) and lists what is allowed.
template <size_t N>
std::string unknown_field(const nlohmann::json& json, const char* const (&fields)[N], std::string_view prefix) {
  for (const auto& [key, value] : json.items()) {
    if (std::find(std::begin(fields), std::end(fields), key) != std::end(fields)) continue;
    std::string allowed;
    for (const char* field : fields) allowed += (allowed.empty() ? "" : ", ") + std::string{field};
    return fmt::format("{}{}: unknown field; allowed: {}", prefix, key, allowed);
  }
  return {};
}

bool durations(Reader& r, const char* key, std::vector<Duration>& out) {
  if (!r.has(key)) return true;
  const auto& list = r.json[key];
  if (!list.is_array()) {
    r.error = fmt::format("{}: expected a list of duration strings", key);
    return false;
  }
  out.clear();
  for (size_t i = 0; i < list.size(); ++i) {
    std::optional<Duration> parsed = list[i].is_string() ? parse_duration(list[i].get<std::string>()) : std::nullopt;
    if (!parsed) {
      r.error = fmt::format("{}[{}]: expected a duration string such as \"90s\", got {}", key, i, list[i].dump());
      return false;
    }
    out.push_back(*parsed);
  }
  return true;
}

bool timed_faults(Reader& r, const char* key, std::vector<TimedFault>& out) {
  if (!r.has(key)) return true;
  const auto& list = r.json[key];
  if (!list.is_array()) {
    r.error = fmt::format("{}: expected a list of {{\"at\", \"length\"}} objects", key);
    return false;
  }
  out.clear();
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_object()) {
      r.error = fmt::format("{}[{}]: expected an object with at, length", key, i);
      return false;
    }
    for (const auto& [field, value] : list[i].items()) {
      if (field != "at" && field != "length") {
        r.error = fmt::format("{}[{}].{}: unknown field; allowed: at, length", key, i, field);
        return false;
      }
    }
    Reader inner{list[i], {}};
    TimedFault fault;
    if (!inner.has("at") || !inner.has("length") || !inner.duration("at", fault.at) ||
        !inner.duration("length", fault.length)) {
      r.error = fmt::format("{}[{}]: {}", key, i, inner.error.empty() ? "expected at and length" : inner.error);
      return false;
    }
    out.push_back(fault);
  }
  return true;
}

}  // namespace

void StreamOptions::default_packing() {
  // A pack's keys and counts take about 110 bytes; the rest is payload.
  constexpr uint32_t kPackOverhead = 128;
  const uint32_t fits = pack_bytes > kPackOverhead ? (pack_bytes - kPackOverhead) / std::max<uint32_t>(message_bytes, 1) : 1;
  client.record_batch_max = std::clamp<uint32_t>(fits, 1, 99);
  client.record_linger = Duration::from_s(30);  // the longest linger ClientConfig allows
}

namespace {

std::string apply_stream_parameters(const nlohmann::json& json, StreamOptions& s) {
  if (!json.is_object()) return "stream: expected a JSON object";
  if (std::string error = unknown_field(json, kStreamFields, "stream."); !error.empty()) return error;
  Reader r{json, {}};
  s.enabled = true;
  if (r.has("record_mode")) {
    const auto& v = json["record_mode"];
    if (v == "transact") s.mode = resume::RecordMode::transact;
    else if (v == "put") s.mode = resume::RecordMode::put;
    else if (v == "packed") s.mode = resume::RecordMode::packed;
    else return fmt::format("stream.record_mode: expected \"transact\", \"put\" or \"packed\", got {}", v.dump());
  }
  const bool ok =
      r.boolean("enabled", s.enabled) && r.duration("publish_interval", s.publish_interval) &&
      r.integer("message_bytes", s.message_bytes, 1, 1 << 20) &&
      r.integer("pack_bytes", s.pack_bytes, resume::kPackBytesMin, resume::kPackBytesMax) &&
      r.optional_duration("publish_until", s.publish_until) &&
      r.optional_duration("relay_idle", s.relay_idle) && durations(r, "hub_crashes", s.hub_crashes) &&
      r.duration("hub_down", s.hub_down) && r.boolean("keep_ring", s.keep_ring) &&
      durations(r, "mass_closes", s.mass_closes) && durations(r, "crash_while_recording", s.crash_while_recording) && timed_faults(r, "hub_slow", s.hub_slow) &&
      timed_faults(r, "cuts", s.cuts) && r.integer("ring_messages", s.hub.ring_messages_max, 1, 10'000'000) &&
      r.integer("ring_bytes", s.hub.ring_bytes_max, 1, int64_t{1} << 40) &&
      r.integer("replay_messages", s.hub.replay_messages_max, 1, 10'000'000) &&
      r.integer("queue_bytes", s.hub.subscriber_queue_bytes_max, 1, int64_t{1} << 40) &&
      r.duration("ping_interval", s.hub.ping_interval) && r.duration("pong_timeout", s.hub.pong_timeout) &&
      r.duration("write_deadline", s.hub.write_deadline) && r.duration("reconnect_base", s.client.reconnect_base) &&
      r.duration("reconnect_cap", s.client.reconnect_cap) && r.boolean("jitter", s.client.jitter) &&
      r.integer("record_batch", s.client.record_batch_max, 1, 1000) &&
      r.duration("record_linger", s.client.record_linger) &&
      r.duration("record_retry_base", s.client.record_retry_base) &&
      r.duration("record_retry_cap", s.client.record_retry_cap) &&
      r.duration("hub_silence_timeout", s.client.hub_silence_timeout) &&
      r.boolean("broken_client", s.client.bug_cursor_on_receive) &&
      r.boolean("broken_hub", s.hub.bug_skip_evicted_without_reset);
  if (!ok) return "stream." + r.error;
  if (s.mode == resume::RecordMode::packed && !r.has("record_batch") && !r.has("record_linger")) s.default_packing();
  return {};
}

}  // namespace

std::string apply_parameters(const nlohmann::json& parameters, LeaseScenarioOptions& options) {
  if (!parameters.is_object()) return "parameters: expected a JSON object";
  if (std::string error = unknown_field(parameters, kKnownFields, ""); !error.empty()) return error;
  Reader r{parameters, {}};
  if (r.has("algorithm")) {
    const auto& v = parameters["algorithm"];
    const std::optional<lease::Algorithm> algorithm =
        v.is_string() ? lease::parse_algorithm(v.get<std::string>()) : std::nullopt;
    if (!algorithm) return fmt::format("algorithm: expected \"core\", \"liveness\" or \"seed\", got {}", v.dump());
    options.lease.algorithm = *algorithm;
  }
  if (r.has("expiry")) {
    const auto& v = parameters["expiry"];
    if (v == "wall") options.lease.expiry_mode = lease::ExpiryMode::wall;
    else if (v == "counter") options.lease.expiry_mode = lease::ExpiryMode::counter;
    else return fmt::format("expiry: expected \"wall\" or \"counter\", got {}", v.dump());
  }
  if (r.has("loss")) {
    const auto& v = parameters["loss"];
    std::optional<Ratio> loss = v.is_string() ? parse_ratio(v.get<std::string>()) : std::nullopt;
    if (!loss || !loss->is_probability()) return fmt::format("loss: expected a ratio such as \"1/100\" or \"5%\", got {}", v.dump());
    options.loss = *loss;
  }
  if (r.has("stops")) {
    const auto& list = parameters["stops"];
    if (!list.is_array()) return "stops: expected a list of {\"connection\", \"at\"} objects";
    options.stops.clear();
    for (size_t i = 0; i < list.size(); ++i) {
      ConnectionStop stop;
      Reader inner{list[i], {}};
      if (!list[i].is_object() || !inner.has("connection") || !inner.has("at")) {
        return fmt::format("stops[{}]: expected an object with connection and at", i);
      }
      for (const auto& [field, value] : list[i].items()) {
        if (field != "connection" && field != "at") return fmt::format("stops[{}].{}: unknown field; allowed: connection, at", i, field);
      }
      if (!inner.integer("connection", stop.connection, 0, 99'999) || !inner.duration("at", stop.at)) {
        return fmt::format("stops[{}].{}", i, inner.error);
      }
      options.stops.push_back(stop);
    }
  }
  const bool ok = r.integer("workers", options.workers, 1, 1000) &&
                  r.integer("connections", options.connections, 0, 100'000) &&
                  r.duration("lease", options.lease.lease_duration) &&
                  r.duration("heartbeat", options.lease.heartbeat_interval) &&
                  r.duration("reconcile", options.lease.reconcile_interval) &&
                  r.duration("reconcile_jitter", options.lease.reconcile_jitter_max) &&
                  r.duration("margin", options.lease.safety_margin) &&
                  r.duration("request_timeout", options.lease.request_timeout) &&
                  r.integer("capacity", options.lease.capacity, 1, 1'000'000) &&
                  r.duration("watch_interval", options.lease.watch_interval) &&
                  r.duration("skew_max", options.skew_max) &&
                  r.duration("fast_worker_offset", options.fast_worker_offset) &&
                  r.integer("drift_ppm_max", options.drift_ppm_max, 0, 100'000) &&
                  r.duration("latency", options.latency) && r.duration("jitter", options.jitter) &&
                  r.duration("sqs_wait", options.sqs_wait) &&
                  r.duration("crash_every", options.crash_every) &&
                  r.duration("restart_after", options.restart_after) &&
                  r.boolean("stable_worker_ids", options.stable_worker_ids) &&
                  r.boolean("tenure_returns", options.tenure_returns) && r.faults("pauses", options.pauses) &&
                  r.faults("partitions", options.partitions) && r.faults("holds", options.holds) &&
                  r.duration("hold_delay", options.hold_delay) && r.faults("write_throttles", options.write_throttles) &&
                  r.faults("refusals", options.refusals) && r.faults("sqs_refusals", options.sqs_refusals) &&
                  r.faults("twins", options.twins) &&
                  r.boolean("late_notices", options.late_notices) &&
                  r.faults("clock_steps", options.clock_steps) &&
                  r.integer("throttle_partition_wcu_per_s", options.throttle_partition_wcu_per_s, 0, 1'000'000) &&
                  r.optional_duration("deploy_at", options.deploy_at) && r.boolean("autoscaler", options.autoscaler) &&
                  r.integer("autoscale_target", options.autoscale_target, 1, 1'000'000) &&
                  r.optional_duration("heal_at", options.heal_at);
  if (!ok) return r.error;
  if (r.has("stream")) {
    if (std::string error = apply_stream_parameters(parameters["stream"], options.stream); !error.empty()) return error;
  }
  return {};
}

namespace {

nlohmann::json duration_or_null(const std::optional<Duration>& duration) {
  return duration ? nlohmann::json(format_duration(*duration)) : nlohmann::json(nullptr);
}

nlohmann::json durations_json(const std::vector<Duration>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const Duration at : list) out.push_back(format_duration(at));
  return out;
}

nlohmann::json worker_faults_json(const std::vector<WorkerFault>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const WorkerFault& f : list) {
    out.push_back({{"worker", f.worker}, {"at", format_duration(f.at)}, {"length", format_duration(f.length)}});
  }
  return out;
}

nlohmann::json timed_faults_json(const std::vector<TimedFault>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const TimedFault& f : list) out.push_back({{"at", format_duration(f.at)}, {"length", format_duration(f.length)}});
  return out;
}

nlohmann::json stream_parameters(const StreamOptions& s) {
  if (!s.enabled) return {{"enabled", false}};
  return {{"enabled", true},
          {"record_mode", resume::to_string(s.mode)},
          {"pack_bytes", s.pack_bytes},
          {"publish_interval", format_duration(s.publish_interval)},
          {"message_bytes", s.message_bytes},
          {"publish_until", duration_or_null(s.publish_until)},
          {"relay_idle", duration_or_null(s.relay_idle)},
          {"hub_crashes", durations_json(s.hub_crashes)},
          {"hub_down", format_duration(s.hub_down)},
          {"keep_ring", s.keep_ring},
          {"mass_closes", durations_json(s.mass_closes)},
          {"hub_slow", timed_faults_json(s.hub_slow)},
          {"cuts", timed_faults_json(s.cuts)},
          {"crash_while_recording", durations_json(s.crash_while_recording)},
          {"ring_messages", s.hub.ring_messages_max},
          {"ring_bytes", s.hub.ring_bytes_max},
          {"replay_messages", s.hub.replay_messages_max},
          {"queue_bytes", s.hub.subscriber_queue_bytes_max},
          {"ping_interval", format_duration(s.hub.ping_interval)},
          {"pong_timeout", format_duration(s.hub.pong_timeout)},
          {"write_deadline", format_duration(s.hub.write_deadline)},
          {"reconnect_base", format_duration(s.client.reconnect_base)},
          {"reconnect_cap", format_duration(s.client.reconnect_cap)},
          {"jitter", s.client.jitter},
          {"record_batch", s.client.record_batch_max},
          {"record_linger", format_duration(s.client.record_linger)},
          {"record_retry_base", format_duration(s.client.record_retry_base)},
          {"record_retry_cap", format_duration(s.client.record_retry_cap)},
          {"hub_silence_timeout", format_duration(s.client.hub_silence_timeout)},
          {"broken_client", s.client.bug_cursor_on_receive},
          {"broken_hub", s.hub.bug_skip_evicted_without_reset}};
}

}  // namespace

nlohmann::json to_parameters(const LeaseScenarioOptions& o) {
  nlohmann::json stops = nlohmann::json::array();
  for (const ConnectionStop& stop : o.stops) {
    stops.push_back({{"connection", stop.connection}, {"at", format_duration(stop.at)}});
  }
  const lease::LeaseConfig& c = o.lease;
  return {{"algorithm", lease::to_string(c.algorithm)},
          {"expiry", lease::to_string(c.expiry_mode)},
          {"workers", o.workers},
          {"connections", o.connections},
          {"lease", format_duration(c.lease_duration)},
          {"heartbeat", format_duration(c.heartbeat_interval)},
          {"reconcile", format_duration(c.reconcile_interval)},
          {"reconcile_jitter", format_duration(c.reconcile_jitter_max)},
          {"margin", format_duration(c.safety_margin)},
          {"request_timeout", format_duration(c.request_timeout)},
          {"capacity", c.capacity},
          {"watch_interval", format_duration(c.watch_interval)},
          {"skew_max", format_duration(o.skew_max)},
          {"fast_worker_offset", format_duration(o.fast_worker_offset)},
          {"drift_ppm_max", o.drift_ppm_max},
          {"clock_steps", worker_faults_json(o.clock_steps)},
          {"latency", format_duration(o.latency)},
          {"jitter", format_duration(o.jitter)},
          {"loss", o.loss.numerator == 0 && o.loss.denominator == 1 ? std::string{"0"} : fmt::format("{}", o.loss)},
          {"sqs_wait", format_duration(o.sqs_wait)},
          {"crash_every", format_duration(o.crash_every)},
          {"restart_after", format_duration(o.restart_after)},
          {"stable_worker_ids", o.stable_worker_ids},
          {"tenure_returns", o.tenure_returns},
          {"pauses", worker_faults_json(o.pauses)},
          {"partitions", worker_faults_json(o.partitions)},
          {"holds", worker_faults_json(o.holds)},
          {"hold_delay", format_duration(o.hold_delay)},
          {"write_throttles", worker_faults_json(o.write_throttles)},
          {"refusals", worker_faults_json(o.refusals)},
          {"sqs_refusals", worker_faults_json(o.sqs_refusals)},
          {"twins", worker_faults_json(o.twins)},
          {"late_notices", o.late_notices},
          {"stops", stops},
          {"throttle_partition_wcu_per_s", o.throttle_partition_wcu_per_s},
          {"deploy_at", duration_or_null(o.deploy_at)},
          {"autoscaler", o.autoscaler},
          {"autoscale_target", o.autoscale_target},
          {"heal_at", duration_or_null(o.heal_at)},
          {"stream", stream_parameters(o.stream)}};
}

}  // namespace leaseproof::scenarios
