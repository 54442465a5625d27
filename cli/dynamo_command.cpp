// `leaseproof dynamo replay FILE [--endpoint URL | --compare URL]`: applies a
// replay file (docs/dynamo-fidelity.md) to a fresh simulated table with faults
// off, or sends it to a real endpoint, or both, comparing the answers.
//
// Whatever an endpoint sends, the command does not crash: a request that gets
// no usable answer (no answer at all, one that is not DynamoDB's, or a success
// that the core's codec cannot decode as the answer to that operation) is
// reported on stderr as "leaseproof: line N (TARGET): no usable answer from
// the endpoint: ...", and the replay stops there with exit status 1: the
// endpoint's state is unknown from then on, so later answers would mislead.

#include "cli/dynamo_command.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "core/dynamo/codec.hpp"
#include "models/dynamo/wire.hpp"
#include "runtime/aws/dynamo_http_client.hpp"
#include "sim/clock.hpp"

namespace leaseproof::cli {
namespace {

constexpr int kExitFailed = 1;

// The model's clock during a replay: the simulation's wall epoch, one
// millisecond further for each request (TTL and throttling are off anyway).
Instant replay_time(size_t index) { return sim::kWallEpoch + Duration::from_ms(static_cast<int64_t>(index)); }

void report_unusable(const models::ReplayRequest& request, std::string_view why) {
  fmt::print(stderr, "leaseproof: line {} ({}): no usable answer from the endpoint: {}\n", request.line, request.target,
             why);
}

// Why a success from the endpoint is not the answer to `operation` ("" when it
// is), decided by the core's decoder before anything here or in models/ reads
// the body's members. An error answer needs no check: the runtime refuses one
// without a string "__type", and dynamo::decode_error accepts any other.
std::string not_an_answer_to(dynamo::Operation operation, const runtime::DynamoHttpResponse& response) {
  if (response.http_status != 200) return {};
  const dynamo::Result<dynamo::Response> decoded = dynamo::decode_response(operation, response.body);
  if (decoded.ok()) return {};
  constexpr size_t excerpt_bytes_max = 200;
  const std::string body = dynamo::dump_json(response.body);
  return fmt::format("HTTP 200 that is not a {} response ({}: {}): {}{}", dynamo::operation_name(operation),
                     decoded.error().type, decoded.error().message, body.substr(0, excerpt_bytes_max),
                     body.size() > excerpt_bytes_max ? "..." : "");
}

// The request's TableName when it is a string ("" otherwise: the file is
// user input, and a server may answer 200 to anything).
std::string table_name(const nlohmann::json& body) {
  const auto found = body.find("TableName");
  return found != body.end() && found->is_string() ? found->get<std::string>() : std::string{};
}

std::optional<models::WireResponse> from_endpoint(runtime::BlockingDynamoHttpClient& client,
                                                  const models::ReplayRequest& request) {
  const dynamo::Result<dynamo::Operation> operation = dynamo::operation_from_target(request.target);
  LP_ASSERT_MSG(operation.ok(), "parse_replay admits known targets only: '{}'", request.target);
  runtime::DynamoHttpResult result = client.call(std::string(dynamo::operation_name(*operation)), request.body);
  if (!result.ok()) {
    report_unusable(request, fmt::format("{} ({})", runtime::to_string(result.error().kind), result.error().detail));
    return std::nullopt;
  }
  if (std::string problem = not_an_answer_to(*operation, result.response()); !problem.empty()) {
    report_unusable(request, problem);
    return std::nullopt;
  }
  // Like any client of DynamoDB: wait for a new table before using it.
  if (*operation == dynamo::Operation::create_table && result.response().http_status == 200 &&
      !runtime::wait_until_table_active(client, table_name(request.body), Duration::from_s(10))) {
    report_unusable(request, "the table never became ACTIVE (DescribeTable for 10 s)");
    return std::nullopt;
  }
  return models::WireResponse{result.response().http_status, result.response().body};
}

runtime::DynamoHttpClientOptions endpoint_options(const std::string& url) {
  runtime::DynamoHttpClientOptions options;
  options.endpoint_url = url;
  return options;
}

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) throw UsageError{fmt::format("FILE: cannot read '{}'", path)};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int compare(const std::vector<models::ReplayRequest>& requests, const std::string& endpoint) {
  models::DynamoStore store{models::DynamoStoreOptions::faults_off(), 1};
  runtime::BlockingDynamoHttpClient client{endpoint_options(endpoint)};
  uint64_t equal = 0;
  uint64_t differ = 0;
  std::map<std::string, uint64_t> skipped;
  for (size_t i = 0; i < requests.size(); ++i) {
    const models::ReplayRequest& request = requests[i];
    const models::WireResponse model = models::apply_wire(store, request.target, request.body, replay_time(i));
    const std::optional<models::WireResponse> real = from_endpoint(client, request);
    if (!real) return kExitFailed;
    if (std::string gap = models::dynalite_gap(request.target, request.body); !gap.empty()) {
      ++skipped[gap];
      continue;
    }
    const nlohmann::json a = models::comparable_response(request.target, model.http_status, model.body);
    const nlohmann::json b = models::comparable_response(request.target, real->http_status, real->body);
    if (a == b) {
      ++equal;
      continue;
    }
    ++differ;
    fmt::print("line {} ({}): differs\n  model:    {}\n  endpoint: {}\n", request.line, request.target,
               dynamo::dump_json(a), dynamo::dump_json(b));
  }
  std::string skips;
  for (const auto& [reason, count] : skipped) skips += fmt::format("; skipped {}: {}", count, reason);
  fmt::print("compared {} requests: {} equal, {} differ{}\n", equal + differ, equal, differ, skips);
  return differ == 0 ? 0 : kExitFailed;
}

}  // namespace

int dynamo_replay_command(const DynamoReplayArgs& args) {
  if (!args.endpoint.empty() && !args.compare.empty()) {
    throw UsageError{"--endpoint and --compare: give one or the other"};
  }
  for (const std::string* url : {&args.endpoint, &args.compare}) {
    if (!url->empty() && !url->starts_with("http://") && !url->starts_with("https://")) {
      throw UsageError{fmt::format("'{}' is not an endpoint; expected http[s]://HOST[:PORT]", *url)};
    }
  }
  std::error_code not_there;
  if (std::filesystem::is_directory(args.file, not_there)) {
    throw UsageError{fmt::format("FILE: '{}' is a directory; give a JSON-lines file of requests", args.file)};
  }
  const models::ReplayParse parse = models::parse_replay(read_file(args.file));
  if (!parse.error.empty()) throw UsageError{fmt::format("{}: {}", args.file, parse.error)};
  if (!args.compare.empty()) return compare(parse.requests, args.compare);
  if (!args.endpoint.empty()) {
    runtime::BlockingDynamoHttpClient client{endpoint_options(args.endpoint)};
    for (const models::ReplayRequest& request : parse.requests) {
      const std::optional<models::WireResponse> response = from_endpoint(client, request);
      if (!response) return kExitFailed;
      fmt::print("{}\n", dynamo::dump_json(response->body));
    }
    return 0;
  }
  models::DynamoStore store{models::DynamoStoreOptions::faults_off(), 1};
  for (size_t i = 0; i < parse.requests.size(); ++i) {
    const models::ReplayRequest& request = parse.requests[i];
    fmt::print("{}\n", dynamo::dump_json(models::apply_wire(store, request.target, request.body, replay_time(i)).body));
  }
  return 0;
}

}  // namespace leaseproof::cli
