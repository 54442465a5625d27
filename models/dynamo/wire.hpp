#pragma once
// The simulated store spoken to in DynamoDB's wire format, and the replay file
// format shared by `leaseproof dynamo replay` and the differential test.
//
// A replay file is JSON lines, one request a line:
//   {"target": "DynamoDB_20120810.UpdateItem", "body": { ...request as sent... }}
// Blank lines and lines starting with '#' are ignored. Answers are written one
// JSON line per request: the body DynamoDB returns, or {"__type", "message"}
// (plus "Item" / "CancellationReasons" where DynamoDB sends them) on error.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/time.hpp"
#include "models/dynamo/store.hpp"

namespace leaseproof::models {

struct ReplayRequest {
  size_t line = 0;  // 1-based line number in the file
  std::string target;
  nlohmann::json body;
};

struct ReplayParse {
  std::vector<ReplayRequest> requests;
  std::string error;  // non-empty: "line N: what is wrong"; requests is then empty
};

// Parses a whole replay file. Every line must be an object with a string
// "target" naming a DynamoDB_20120810 operation and an object "body".
ReplayParse parse_replay(std::string_view text);
std::string format_replay_line(const ReplayRequest& request);

struct WireResponse {
  int http_status = 200;
  nlohmann::json body;
  bool is_error() const { return http_status != 200; }
  std::string error_type() const;  // short __type, empty on success
};

// Decodes, applies at `now` (Unix-epoch ns on the store's clock) and encodes,
// exactly as an HTTP endpoint would answer. Decoding errors are answered like
// DynamoDB's (ValidationException / SerializationException / UnknownOperation).
WireResponse apply_wire(DynamoStore& store, std::string_view target, const nlohmann::json& body, Instant now);

// A response reduced to what two DynamoDB implementations must agree on:
// status class, error type and message (and the old item / cancellation
// reasons), or the body without ConsumedCapacity; for CreateTable only the
// table's name, key schema, attribute definitions and GSI shapes (ARNs,
// timestamps and statuses legitimately differ).
nlohmann::json comparable_response(std::string_view target, int http_status, const nlohmann::json& body);

// Why a request cannot be compared with dynalite (a feature it does not
// implement), or empty when it can. See docs/dynamo-fidelity.md.
std::string dynalite_gap(std::string_view target, const nlohmann::json& body);

}  // namespace leaseproof::models
