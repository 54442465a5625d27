#include "base/json_input.hpp"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "base/json_depth.hpp"

namespace leaseproof {

nlohmann::json parse_json_strict(const std::string& text, std::string_view source) {
  std::vector<std::set<std::string, std::less<>>> keys;  // one set per open object
  std::string duplicate;
  bool too_deep = false;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (opens_too_deep(depth, event)) too_deep = true;
    if (too_deep) return false;  // nothing deeper is built
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::parse_error& error) {
    std::string_view what = error.what();  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    if (const size_t at = what.find("] "); at != std::string_view::npos) what.remove_prefix(at + 2);
    throw JsonInputError{fmt::format("{}: not valid JSON: {}", source, what)};
  }
  if (too_deep) {
    throw JsonInputError{fmt::format("{}: nested more than {} levels deep, the most any JSON input may nest", source,
                                     kJsonLevelsMax)};
  }
  if (!duplicate.empty()) {
    throw JsonInputError{fmt::format("{}: the key \"{}\" appears twice in one object", source, duplicate)};
  }
  return json;
}

}  // namespace leaseproof
