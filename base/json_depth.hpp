#pragma once
// One nesting limit for every JSON text leaseproof reads: configurations,
// parameters, regressions, sweep specs, request corpora, worker logs, hub
// session records, the hub's wire frames and the answers of the servers it
// calls. nlohmann::json builds, copies, compares and destroys a value with
// one recursive call per level: 300,000 levels of `{"a":` overflowed the
// stack of `run --config` (exit 139). A parse given json_depth_guard stops
// building the value at the limit, so nothing deeper is ever held.

#include <string_view>

#include <nlohmann/json.hpp>

namespace leaseproof {

// Deeper than any JSON this project writes or reads (a DynamoDB item nests at
// most 32 levels, two JSON levels each on the wire, inside a few levels of
// request), and far below what overflows a stack.
inline constexpr int kJsonLevelsMax = 128;

// True for a parse event that opens an object or array deeper than
// levels_max (the top level is depth 0).
inline bool opens_too_deep(int depth, nlohmann::json::parse_event_t event, int levels_max = kJsonLevelsMax) {
  const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                     event == nlohmann::json::parse_event_t::array_start;
  return opens && depth >= levels_max;
}

// Parses `text` without exceptions. The result is discarded when the text is
// not JSON or nests deeper than levels_max; `too_deep` says which.
inline nlohmann::json parse_json_bounded(std::string_view text, bool& too_deep, int levels_max = kJsonLevelsMax) {
  too_deep = false;
  nlohmann::json json = nlohmann::json::parse(
      text.begin(), text.end(),
      [&too_deep, levels_max](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
        if (opens_too_deep(depth, event, levels_max)) too_deep = true;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep) json = nlohmann::json(nlohmann::json::value_t::discarded);
  return json;
}

}  // namespace leaseproof
