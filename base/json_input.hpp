#pragma once
// JSON given by a person (a flag, a spec, a line of a file), parsed strictly:
// a syntax error names its line and column, a key given twice in one object
// is refused (nlohmann would keep the last silently), and nothing nests
// deeper than kJsonLevelsMax.

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace leaseproof {

// The message starts with the `source` given to parse_json_strict.
struct JsonInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws JsonInputError: "SOURCE: not valid JSON: ...", "SOURCE: nested more
// than N levels deep, ...", "SOURCE: the key "K" appears twice in one object".
nlohmann::json parse_json_strict(const std::string& text, std::string_view source);

}  // namespace leaseproof
