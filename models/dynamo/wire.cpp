#include "models/dynamo/wire.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/json_depth.hpp"
#include "core/dynamo/codec.hpp"

namespace leaseproof::models {

namespace {

std::string_view next_line(std::string_view& text) {
  const size_t end = text.find('\n');
  std::string_view line = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

}  // namespace

ReplayParse parse_replay(std::string_view text) {
  ReplayParse parse;
  size_t number = 0;
  auto fail = [&](std::string what) {
    parse.requests.clear();
    parse.error = fmt::format("line {}: {}", number, what);
    return parse;
  };
  while (!text.empty()) {
    const std::string_view line = next_line(text);
    ++number;
    if (blank(line) || line.front() == '#') continue;
    bool too_deep = false;
    nlohmann::json json = parse_json_bounded(line, too_deep);
    if (too_deep) return fail(fmt::format("nested more than {} levels deep", kJsonLevelsMax));
    if (json.is_discarded()) return fail("not valid JSON");
    if (!json.is_object()) return fail("expected a JSON object with \"target\" and \"body\"");
    for (const auto& [key, value] : json.items()) {
      if (key != "target" && key != "body") return fail(fmt::format("unknown field \"{}\"; allowed: target, body", key));
    }
    if (!json.contains("target") || !json["target"].is_string()) {
      return fail("\"target\" must be a string such as \"DynamoDB_20120810.UpdateItem\"");
    }
    if (!json.contains("body") || !json["body"].is_object()) return fail("\"body\" must be a JSON object");
    const std::string target = json["target"].get<std::string>();
    if (!dynamo::operation_from_target(target).ok()) {
      return fail(fmt::format("\"target\": unknown operation \"{}\"; expected DynamoDB_20120810.<GetItem|PutItem|"
                              "UpdateItem|DeleteItem|Query|BatchWriteItem|TransactWriteItems|CreateTable>",
                              target));
    }
    parse.requests.push_back(ReplayRequest{number, target, std::move(json["body"])});
  }
  return parse;
}

std::string format_replay_line(const ReplayRequest& request) {
  nlohmann::json line = nlohmann::json::object();
  line["target"] = request.target;
  line["body"] = request.body;
  return dynamo::dump_json(line);
}

std::string WireResponse::error_type() const {
  if (!is_error() || !body.contains("__type") || !body["__type"].is_string()) return {};
  return dynamo::short_error_type(body["__type"].get<std::string>());
}

WireResponse apply_wire(DynamoStore& store, std::string_view target, const nlohmann::json& body, Instant now) {
  auto to_wire = [](const dynamo::DynamoError& error) {
    const int status = error.type == dynamo::error_type::internal_server_error ? 500 : 400;
    return WireResponse{status, dynamo::encode(error)};
  };
  dynamo::Result<dynamo::Request> request = dynamo::decode_request(target, body);
  if (!request.ok()) return to_wire(request.error());
  dynamo::Result<dynamo::Response> response = store.apply(*request, now);
  if (!response.ok()) return to_wire(response.error());
  return WireResponse{200, dynamo::encode(*response)};
}

}  // namespace leaseproof::models

namespace leaseproof::models {

namespace {

nlohmann::json comparable_table(const nlohmann::json& description) {
  nlohmann::json out = nlohmann::json::object();
  for (const char* key : {"TableName", "KeySchema"}) {
    if (description.contains(key)) out[key] = description[key];
  }
  if (description.contains("AttributeDefinitions")) {
    std::vector<nlohmann::json> definitions(description["AttributeDefinitions"].begin(),
                                            description["AttributeDefinitions"].end());
    std::sort(definitions.begin(), definitions.end(),
              [](const auto& a, const auto& b) { return a.value("AttributeName", "") < b.value("AttributeName", ""); });
    out["AttributeDefinitions"] = definitions;
  }
  if (description.contains("GlobalSecondaryIndexes")) {
    std::vector<nlohmann::json> indexes;
    for (const auto& index : description["GlobalSecondaryIndexes"]) {
      nlohmann::json shape = nlohmann::json::object();
      for (const char* key : {"IndexName", "KeySchema", "Projection"}) {
        if (index.contains(key)) shape[key] = index[key];
      }
      indexes.push_back(std::move(shape));
    }
    std::sort(indexes.begin(), indexes.end(),
              [](const auto& a, const auto& b) { return a.value("IndexName", "") < b.value("IndexName", ""); });
    out["GlobalSecondaryIndexes"] = indexes;
  }
  return out;
}

}  // namespace

nlohmann::json comparable_response(std::string_view target, int http_status, const nlohmann::json& body) {
  nlohmann::json out = nlohmann::json::object();
  if (http_status != 200) {
    out["status"] = http_status / 100 * 100;  // 4xx vs 5xx
    out["__type"] = body.contains("__type") && body["__type"].is_string()
                        ? dynamo::short_error_type(body["__type"].get<std::string>())
                        : std::string{};
    // DynamoDB spells the key "message"; some servers send "Message".
    if (body.contains("message")) out["message"] = body["message"];
    if (body.contains("Message")) out["message"] = body["Message"];
    // Parsers word the detail of a syntax error their own way ("token: ...,
    // near: ..." in DynamoDB, a PEG parser's expectation list in dynalite):
    // agree on the kind of error, not on that detail.
    if (out.contains("message") && out["message"].is_string()) {
      const std::string message = out["message"].get<std::string>();
      const size_t syntax = message.find("Syntax error;");
      if (message.starts_with("Invalid ") && syntax != std::string::npos) {
        out["message"] = message.substr(0, syntax + std::string_view{"Syntax error;"}.size());
      }
      // "1 validation error detected: Value '<the request's value, as that
      // server serialises it>' at 'x' ...": the value is left out.
      constexpr std::string_view kValue = "validation error detected: Value '";
      if (const size_t start = message.find(kValue); start != std::string::npos) {
        const size_t end = message.find("' at '", start);
        if (end != std::string::npos) {
          out["message"] = message.substr(0, start) + "validation error detected: Value at '" + message.substr(end + 6);
        }
      }
    }
    for (const char* key : {"Item", "CancellationReasons"}) {
      if (body.contains(key)) out[key] = body[key];
    }
    return out;
  }
  out["status"] = 200;
  if (target.ends_with(".CreateTable")) {
    out["TableDescription"] = comparable_table(body.value("TableDescription", nlohmann::json::object()));
    return out;
  }
  for (const auto& [key, value] : body.items()) {
    if (key == "ConsumedCapacity") continue;
    // DynamoDB omits Attributes when ReturnValues selects nothing (UPDATED_OLD
    // of attributes the item did not have); dynalite sends an empty map.
    if (key == "Attributes" && value.is_object() && value.empty()) continue;
    out[key] = value;
  }
  return out;
}

std::string dynalite_gap(std::string_view target, const nlohmann::json& body) {
  if (target.ends_with(".TransactWriteItems")) return "TransactWriteItems (not implemented by dynalite)";
  if (body.contains("ReturnValuesOnConditionCheckFailure")) {
    return "ReturnValuesOnConditionCheckFailure (ignored by dynalite)";
  }
  return {};
}

}  // namespace leaseproof::models
