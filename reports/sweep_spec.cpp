// The sweep spec: parsing (every error names its field), the cartesian
// product of the axes into cells, and shards.
#include "reports/sweep.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "scenarios/lease.hpp"
#include "scenarios/scenario.hpp"

namespace leaseproof::report {

namespace {

constexpr uint64_t kSeedsMax = 1'000'000;
constexpr uint64_t kCellsMax = 10'000;
constexpr uint64_t kRunsMax = 10'000'000;
constexpr uint64_t kShardsMax = 1'000'000;

constexpr const char* kSpecFields[] = {"title",      "scenario",          "duration",        "seeds",
                                       "first_seed", "base",              "axes",            "prices",
                                       "price_connections", "recovery_target", "safety_margin", "pause_at",
                                       "timeline"};
constexpr const char* kPriceFields[] = {"preset",
                                        "name",
                                        "on_demand_write_per_million",
                                        "on_demand_read_per_million",
                                        "provisioned_wcu_hour",
                                        "provisioned_rcu_hour",
                                        "hours_per_month",
                                        "source"};

[[noreturn]] void fail(std::string message) { throw SweepInputError{std::move(message)}; }

template <size_t N>
std::string allowed(const char* const (&fields)[N]) {
  std::string text;
  for (const char* field : fields) text += (text.empty() ? "" : ", ") + std::string{field};
  return text;
}

template <size_t N>
void reject_unknown_fields(const nlohmann::json& object, const char* const (&fields)[N], std::string_view where) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(std::begin(fields), std::end(fields), key) != std::end(fields)) continue;
    fail(fmt::format("{}{}: unknown field; allowed: {}", where, key, allowed(fields)));
  }
}

Duration duration_field(const nlohmann::json& spec, const char* field, Duration fallback, Duration minimum) {
  if (!spec.contains(field)) return fallback;
  const nlohmann::json& value = spec[field];
  const std::optional<Duration> parsed = value.is_string() ? parse_duration(value.get<std::string>()) : std::nullopt;
  if (!parsed) fail(fmt::format("spec {}: expected a duration string such as \"90s\", got {}", field, value.dump()));
  if (*parsed < minimum) {
    fail(fmt::format("spec {}: {} must be at least {}", field, format_duration(*parsed), format_duration(minimum)));
  }
  return *parsed;
}

uint64_t integer_field(const nlohmann::json& spec, const char* field, uint64_t fallback, uint64_t low, uint64_t high) {
  if (!spec.contains(field)) return fallback;
  const nlohmann::json& value = spec[field];
  if (!value.is_number_integer() || value.get<int64_t>() < static_cast<int64_t>(low) ||
      value.get<uint64_t>() > high) {
    fail(fmt::format("spec {}: expected an integer in {}..{}, got {}", field, low, high, value.dump()));
  }
  return value.get<uint64_t>();
}

double price_number(const nlohmann::json& object, const char* field, double fallback, std::string_view where) {
  if (!object.contains(field)) return fallback;
  const nlohmann::json& value = object[field];
  if (!value.is_number()) fail(fmt::format("{}.{}: expected a number, got {}", where, field, value.dump()));
  const double number = value.get<double>();
  if (!std::isfinite(number) || number < 0) {
    fail(fmt::format("{}.{}: {} is below zero; prices and hours must be >= 0", where, field, value.dump()));
  }
  return number;
}

Prices preset_or_fail(const std::string& name, std::string_view where) {
  if (std::optional<Prices> prices = price_preset(name)) return *prices;
  fail(fmt::format("{}: unknown price preset '{}'; presets: current, articles", where, name));
}

// A price set: a preset's name, or an object (optionally starting from a
// preset) whose fields override it.
Prices parse_prices(const nlohmann::json& entry, std::string_view where) {
  if (entry.is_string()) return preset_or_fail(entry.get<std::string>(), where);
  if (!entry.is_object()) fail(fmt::format("{}: expected a preset name or an object", where));
  reject_unknown_fields(entry, kPriceFields, fmt::format("{}.", where));
  Prices prices;
  if (entry.contains("preset")) {
    if (!entry["preset"].is_string()) fail(fmt::format("{}.preset: expected \"current\" or \"articles\"", where));
    prices = preset_or_fail(entry["preset"].get<std::string>(), fmt::format("{}.preset", where));
  } else if (!entry.contains("name")) {
    fail(fmt::format("{}: a price set needs a \"name\" (or a \"preset\" to start from)", where));
  }
  for (const char* text_field : {"name", "source"}) {
    if (!entry.contains(text_field)) continue;
    if (!entry[text_field].is_string() || entry[text_field].get<std::string>().empty()) {
      fail(fmt::format("{}.{}: expected a non-empty string", where, text_field));
    }
    (std::string_view{text_field} == "name" ? prices.name : prices.source) = entry[text_field].get<std::string>();
  }
  prices.on_demand_write_per_million =
      price_number(entry, "on_demand_write_per_million", prices.on_demand_write_per_million, where);
  prices.on_demand_read_per_million =
      price_number(entry, "on_demand_read_per_million", prices.on_demand_read_per_million, where);
  prices.provisioned_wcu_hour = price_number(entry, "provisioned_wcu_hour", prices.provisioned_wcu_hour, where);
  prices.provisioned_rcu_hour = price_number(entry, "provisioned_rcu_hour", prices.provisioned_rcu_hour, where);
  prices.hours_per_month = price_number(entry, "hours_per_month", prices.hours_per_month, where);
  return prices;
}

std::vector<Prices> parse_price_list(const nlohmann::json& spec) {
  if (!spec.contains("prices")) return {*price_preset("current")};
  const nlohmann::json& value = spec["prices"];
  std::vector<Prices> list;
  if (value.is_string()) {
    list.push_back(parse_prices(value, "spec prices"));
  } else if (value.is_array()) {
    if (value.empty()) fail("spec prices: the list is empty; give at least one price set (e.g. \"current\")");
    for (size_t i = 0; i < value.size(); ++i) list.push_back(parse_prices(value[i], fmt::format("spec prices[{}]", i)));
  } else {
    fail("spec prices: expected a preset name or a list of price sets");
  }
  std::set<std::string> names;
  for (const Prices& prices : list) {
    if (!names.insert(prices.name).second) fail(fmt::format("spec prices: the name '{}' is used twice", prices.name));
  }
  return list;
}

const scenarios::Scenario& scenario_or_fail(const nlohmann::json& spec) {
  if (!spec.contains("scenario") || !spec["scenario"].is_string()) {
    fail("spec scenario: required, a scenario name (see 'leaseproof scenarios')");
  }
  const std::string name = spec["scenario"].get<std::string>();
  if (const scenarios::Scenario* scenario = scenarios::find_scenario(name)) return *scenario;
  std::string known;
  for (const auto& s : scenarios::scenarios()) known += (known.empty() ? "" : ", ") + std::string{s.name};
  fail(fmt::format("spec scenario: unknown scenario '{}'; known: {}", name, known));
}

// The scenario's own message for parameters that it does not know at all
// (as opposed to values that are only invalid in combination, which make a
// cell invalid): those are spec errors.
bool names_unknown_field(const std::string& error) {
  return error.find("unknown field") != std::string::npos || error == "this scenario takes no parameters";
}

std::string validate_parameters(const SweepSpec& spec, const nlohmann::json& parameters, uint64_t seed) {
  scenarios::RunConfig config;
  config.seed = seed;
  config.duration = spec.duration;
  config.parameters = parameters;
  return spec.find_scenario().validate ? spec.find_scenario().validate(config) : std::string{};
}

std::string validate_parameters(const SweepSpec& spec, const nlohmann::json& parameters) {
  return validate_parameters(spec, parameters, spec.first_seed);
}

// The swarm draws per seed (a relay, say): parameters its first seed takes
// can be refused for another. Every seed of the cell is checked, so that a
// cell runs all its seeds or none.
std::string validate_cell(const SweepSpec& spec, const nlohmann::json& parameters) {
  if (std::string error = validate_parameters(spec, parameters); !error.empty()) return error;
  for (uint64_t seed = spec.first_seed + 1; seed < spec.first_seed + spec.seeds; ++seed) {
    if (std::string error = validate_parameters(spec, parameters, seed); !error.empty()) {
      return fmt::format("seed {}: {}", seed, error);
    }
  }
  return {};
}

void check_axis_values(const SweepSpec& spec, const SweepAxis& axis, std::string_view where) {
  for (size_t i = 0; i < axis.values.size(); ++i) {
    const nlohmann::json& value = axis.values[i];
    if (axis.name == "ratio" && (!value.is_number() || !(value.get<double>() > 0))) {
      fail(fmt::format("{}.values[{}]: a ratio (lease / heartbeat) must be a number above 0, got {}", where, i,
                       value.dump()));
    }
    if (axis.name == "pause" || is_stress_axis(axis.name)) {
      const std::optional<Duration> parsed = value.is_string() ? parse_duration(value.get<std::string>()) : std::nullopt;
      if (!parsed || parsed->is_negative()) {
        fail(fmt::format("{}.values[{}]: expected a duration string such as \"5s\" (0s or more), got {}", where, i,
                         value.dump()));
      }
    }
  }
  if (axis.name == "ratio" || axis.name == "pause") {
    if (!scenarios::lease_preset(spec.scenario, spec.first_seed, spec.duration)) {
      fail(fmt::format("{}: the derived axis '{}' needs a lease scenario, not {}", where, axis.name, spec.scenario));
    }
    return;
  }
  // A value that is wrong on its own (a number where a duration goes, a
  // duration out of its range) is bad input, not an invalid cell: only
  // values that are valid alone can be invalid in combination.
  if (const auto preset = scenarios::lease_preset(spec.scenario, spec.first_seed, spec.duration)) {
    for (size_t i = 0; i < axis.values.size(); ++i) {
      scenarios::LeaseScenarioOptions options = *preset;
      const std::string alone = scenarios::apply_parameters(nlohmann::json{{axis.name, axis.values[i]}}, options);
      if (!alone.empty() && !names_unknown_field(alone)) {
        fail(fmt::format("{} ({}).values[{}]: {}", where, axis.name, i, alone));
      }
    }
  }
  nlohmann::json parameters = spec.base;
  parameters[axis.name] = axis.values.front();
  const std::string error = validate_parameters(spec, parameters);
  if (names_unknown_field(error) && error.starts_with(axis.name)) {
    fail(fmt::format("{}.name: '{}' is not a parameter of scenario {}: {}", where, axis.name, spec.scenario, error));
  }
}

std::vector<SweepAxis> parse_axes(const nlohmann::json& spec, const SweepSpec& partial) {
  if (!spec.contains("axes")) return {};
  const nlohmann::json& list = spec["axes"];
  if (!list.is_array()) fail("spec axes: expected a list of {\"name\", \"values\"} objects");
  std::vector<SweepAxis> axes;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("spec axes[{}]", i);
    const nlohmann::json& entry = list[i];
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("values")) {
      fail(fmt::format("{}: expected an object with \"name\" (a parameter) and \"values\" (a list)", where));
    }
    for (const auto& [key, value] : entry.items()) {
      if (key != "name" && key != "values") fail(fmt::format("{}.{}: unknown field; allowed: name, values", where, key));
    }
    SweepAxis axis{entry["name"].get<std::string>(), {}};
    const nlohmann::json& values = entry["values"];
    if (!values.is_array()) fail(fmt::format("{} ({}).values: expected a list", where, axis.name));
    if (values.empty()) fail(fmt::format("{} ({}): no values: the grid would be empty", where, axis.name));
    if (values.size() > kCellsMax) {
      fail(fmt::format("{} ({}).values: {} values, more than the {} cells a sweep may have", where, axis.name,
                       values.size(), kCellsMax));
    }
    std::map<std::string, size_t> seen;  // a value's JSON text: its first index
    for (size_t k = 0; k < values.size(); ++k) {
      // A value given twice would run its cells twice and weigh them double.
      const auto [first, fresh] = seen.try_emplace(values[k].dump(), k);
      if (!fresh) {
        fail(fmt::format("{} ({}).values[{}]: {} is given twice (also values[{}])", where, axis.name, k,
                         values[k].dump(), first->second));
      }
      axis.values.push_back(values[k]);
    }
    if (!names.insert(axis.name).second) fail(fmt::format("{}.name: the axis '{}' is given twice", where, axis.name));
    check_axis_values(partial, axis, where);
    axes.push_back(std::move(axis));
  }
  if (names.contains("ratio") && names.contains("lease")) {
    fail("spec axes: 'ratio' (lease = ratio x heartbeat) and 'lease' cannot both be axes");
  }
  if (names.contains("pause") && names.contains("pauses")) {
    fail("spec axes: 'pause' (one pause of worker 0) and 'pauses' cannot both be axes");
  }
  return axes;
}

uint64_t cell_count(const std::vector<SweepAxis>& axes) {
  uint64_t count = 1;
  for (const SweepAxis& axis : axes) {
    count *= axis.values.size();
    if (count > kCellsMax) fail(fmt::format("spec axes: more than {} cells; split the sweep", kCellsMax));
  }
  return count;
}

std::optional<TimelineChoice> parse_timeline(const nlohmann::json& spec, uint64_t cells, uint64_t first_seed,
                                             uint64_t seeds) {
  if (!spec.contains("timeline") || spec["timeline"].is_null()) return std::nullopt;
  const nlohmann::json& value = spec["timeline"];
  if (!value.is_object() || !value.contains("cell") || !value.contains("seed")) {
    fail("spec timeline: expected {\"cell\": index, \"seed\": seed}");
  }
  for (const auto& [key, field] : value.items()) {
    if (key != "cell" && key != "seed") fail(fmt::format("spec timeline.{}: unknown field; allowed: cell, seed", key));
  }
  const uint64_t cell = integer_field(value, "cell", 0, 0, cells - 1);
  const uint64_t seed = integer_field(value, "seed", first_seed, first_seed, first_seed + seeds - 1);
  return TimelineChoice{static_cast<size_t>(cell), seed};
}

}  // namespace

bool is_stress_axis(std::string_view axis) {
  return axis == "fast_worker_offset" || axis == "skew_max" || axis == "pause";
}

bool is_registry_configuration_axis(std::string_view axis) {
  return axis == "room_shards" || axis == "ttl" || axis == "algorithm" || axis == "flaws";
}

const scenarios::Scenario& SweepSpec::find_scenario() const {
  const scenarios::Scenario* found = scenarios::find_scenario(scenario);
  LP_ASSERT_MSG(found != nullptr, "spec scenario '{}' was checked when parsed", scenario);
  return *found;
}

SweepSpec parse_sweep_spec(const nlohmann::json& json) {
  if (!json.is_object()) fail("spec: expected a JSON object");
  reject_unknown_fields(json, kSpecFields, "spec ");
  SweepSpec spec;
  const scenarios::Scenario& scenario = scenario_or_fail(json);
  spec.scenario = std::string{scenario.name};
  if (json.contains("title")) {
    if (!json["title"].is_string()) fail("spec title: expected a string");
    spec.title = json["title"].get<std::string>();
  }
  spec.duration = duration_field(json, "duration", scenario.default_duration, Duration::from_ns(1));
  spec.seeds = integer_field(json, "seeds", spec.seeds, 1, kSeedsMax);
  spec.first_seed = integer_field(json, "first_seed", spec.first_seed, 0, UINT64_MAX - kSeedsMax);
  if (json.contains("base")) {
    if (!json["base"].is_object()) fail("spec base: expected a JSON object of scenario parameters");
    spec.base = json["base"];
  }
  if (const std::string error = validate_parameters(spec, spec.base); names_unknown_field(error)) {
    fail(fmt::format("spec base: {}", error));
  }
  spec.pause_at = duration_field(json, "pause_at", spec.duration / 3, Duration::zero());
  spec.axes = parse_axes(json, spec);
  spec.prices = parse_price_list(json);
  if (json.contains("price_connections") && !json["price_connections"].is_null()) {
    spec.price_connections = integer_field(json, "price_connections", 0, 1, 100'000'000);
  }
  spec.recovery_target = duration_field(json, "recovery_target", spec.recovery_target, Duration::from_ns(1));
  spec.safety_margin = duration_field(json, "safety_margin", spec.safety_margin, Duration::zero());
  const uint64_t cells = cell_count(spec.axes);
  if (cells * spec.seeds > kRunsMax) fail(fmt::format("spec: {} cells x {} seeds is more than {} runs", cells, spec.seeds, kRunsMax));
  spec.timeline = parse_timeline(json, cells, spec.first_seed, spec.seeds);
  return spec;
}

nlohmann::json SweepSpec::to_json() const {
  nlohmann::json axes_json = nlohmann::json::array();
  for (const SweepAxis& axis : axes) axes_json.push_back({{"name", axis.name}, {"values", axis.values}});
  nlohmann::json prices_json = nlohmann::json::array();
  for (const Prices& p : prices) {
    prices_json.push_back({{"name", p.name},
                           {"on_demand_write_per_million", p.on_demand_write_per_million},
                           {"on_demand_read_per_million", p.on_demand_read_per_million},
                           {"provisioned_wcu_hour", p.provisioned_wcu_hour},
                           {"provisioned_rcu_hour", p.provisioned_rcu_hour},
                           {"hours_per_month", p.hours_per_month},
                           {"source", p.source}});
  }
  nlohmann::json json = {{"title", title},
                         {"scenario", scenario},
                         {"duration", format_duration(duration)},
                         {"seeds", seeds},
                         {"first_seed", first_seed},
                         {"base", base},
                         {"axes", axes_json},
                         {"prices", prices_json},
                         {"price_connections", nullptr},
                         {"recovery_target", format_duration(recovery_target)},
                         {"safety_margin", format_duration(safety_margin)},
                         {"pause_at", format_duration(pause_at)},
                         {"timeline", nullptr}};
  if (price_connections) json["price_connections"] = *price_connections;
  if (timeline) json["timeline"] = {{"cell", timeline->cell}, {"seed", timeline->seed}};
  return json;
}

std::string axis_value_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string cell_label(const SweepSpec& spec, const SweepCell& cell, std::string_view skip_axis) {
  std::string label;
  for (size_t a = 0; a < spec.axes.size(); ++a) {
    if (spec.axes[a].name == skip_axis) continue;
    label += fmt::format("{}{}={}", label.empty() ? "" : " ", spec.axes[a].name, axis_value_text(cell.values[a]));
  }
  return label.empty() ? "(base)" : label;
}

std::optional<scenarios::LeaseScenarioOptions> lease_options_of(const SweepSpec& spec, const nlohmann::json& parameters) {
  // The derivation a run makes (preset, parameters, what the preset draws
  // last), without the final validation: invalid cells are described too.
  std::optional<scenarios::LeaseScenarioOptions> options =
      scenarios::lease_preset(spec.scenario, spec.first_seed, spec.duration);
  if (!options) return std::nullopt;
  if (!scenarios::apply_parameters(parameters, *options).empty()) return std::nullopt;
  if (options->heal_at && *options->heal_at > options->duration) options->heal_at.reset();
  scenarios::finish_preset(spec.scenario, spec.first_seed, parameters, *options);
  return options;
}

namespace {

// The derived axes: `pause` adds one stop-the-world pause of worker 0 at
// pause_at (0s: none); `ratio` sets lease = ratio x heartbeat, the heartbeat
// being the cell's (or the preset's).
void apply_derived_axis(const SweepSpec& spec, const SweepAxis& axis, const nlohmann::json& value,
                        nlohmann::json& parameters) {
  if (axis.name == "pause") {
    const Duration length = *parse_duration(value.get<std::string>());
    if (length.is_zero()) return;
    if (!parameters.contains("pauses") || !parameters["pauses"].is_array()) parameters["pauses"] = nlohmann::json::array();
    parameters["pauses"].push_back(
        {{"worker", 0}, {"at", format_duration(spec.pause_at)}, {"length", format_duration(length)}});
    return;
  }
  LP_ASSERT(axis.name == "ratio");
  Duration heartbeat = scenarios::lease_preset(spec.scenario, spec.first_seed, spec.duration)->lease.heartbeat_interval;
  if (parameters.contains("heartbeat") && parameters["heartbeat"].is_string()) {
    heartbeat = parse_duration(parameters["heartbeat"].get<std::string>()).value_or(heartbeat);
  }
  const double lease_ns = std::round(static_cast<double>(heartbeat.ns()) * value.get<double>());
  parameters["lease"] = format_duration(Duration::from_ns(static_cast<int64_t>(lease_ns)));
}

}  // namespace

std::vector<SweepCell> expand_cells(const SweepSpec& spec) {
  const uint64_t count = cell_count(spec.axes);
  std::vector<SweepCell> cells;
  cells.reserve(count);
  for (uint64_t index = 0; index < count; ++index) {
    SweepCell cell;
    cell.index = index;
    cell.values.resize(spec.axes.size());
    uint64_t rest = index;
    for (size_t a = spec.axes.size(); a-- > 0;) {  // the last axis varies fastest
      cell.values[a] = spec.axes[a].values[rest % spec.axes[a].values.size()];
      rest /= spec.axes[a].values.size();
    }
    cell.parameters = spec.base;
    for (size_t a = 0; a < spec.axes.size(); ++a) {
      if (spec.axes[a].name != "pause" && spec.axes[a].name != "ratio") cell.parameters[spec.axes[a].name] = cell.values[a];
    }
    for (size_t a = 0; a < spec.axes.size(); ++a) {
      if (spec.axes[a].name == "pause") apply_derived_axis(spec, spec.axes[a], cell.values[a], cell.parameters);
    }
    for (size_t a = 0; a < spec.axes.size(); ++a) {  // after the heartbeat axis, whatever the order
      if (spec.axes[a].name == "ratio") apply_derived_axis(spec, spec.axes[a], cell.values[a], cell.parameters);
    }
    cell.invalid = validate_cell(spec, cell.parameters);
    cells.push_back(std::move(cell));
  }
  return cells;
}

Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  auto number = [&](std::string_view part, uint64_t& out) {
    auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), out);
    return !part.empty() && error == std::errc{} && end == part.data() + part.size();
  };
  Shard shard;
  const std::string_view index = slash == std::string::npos ? std::string_view{} : std::string_view{text}.substr(0, slash);
  if (slash == std::string::npos || !number(std::string_view{text}.substr(slash + 1), shard.count) ||
      (index != kShardIndexFromEnvironment && !number(index, shard.index))) {
    fail(fmt::format("--shard: '{}' is not i/n (e.g. 2/3: the second of three shards; i may be '{}': "
                     "$JOB_COMPLETION_INDEX + 1, as a Kubernetes Indexed Job numbers its pods from 0)",
                     text, kShardIndexFromEnvironment));
  }
  if (index == kShardIndexFromEnvironment) {
    const char* value = std::getenv("JOB_COMPLETION_INDEX");
    uint64_t from_zero = 0;
    if (value == nullptr || !number(value, from_zero) || from_zero >= kShardsMax) {
      fail(fmt::format("--shard: '{}' takes the index from JOB_COMPLETION_INDEX, which is {}", text,
                       value == nullptr ? std::string{"not set"} : fmt::format("'{}', not a number 0..n-1", value)));
    }
    shard.index = from_zero + 1;
  }
  if (shard.count == 0 || shard.count > kShardsMax) {
    fail(fmt::format("--shard: '{}': the count n must be 1..{}", text, kShardsMax));
  }
  if (shard.index < 1 || shard.index > shard.count) {
    fail(fmt::format("--shard: '{}': the index i must be between 1 and n ({})", text, shard.count));
  }
  return shard;
}

bool in_shard(const Shard& shard, size_t cells, size_t cell, uint64_t seed_offset) {
  const uint64_t pair = seed_offset * cells + cell;
  return pair % shard.count == shard.index - 1;
}

}  // namespace leaseproof::report
