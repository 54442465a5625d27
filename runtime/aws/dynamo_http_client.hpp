#pragma once
// A DynamoDB JSON-protocol client over HTTP/1.1 (Boost.Beast), plain or TLS
// (https://: runtime/aws/tls.hpp), for the real runtime and for replaying request
// sequences against dynalite.
//
// Requests and responses are DynamoDB wire JSON (nlohmann::json); operations
// are plain names ("PutItem", "Query"). Typed requests live in core/dynamo and
// are encoded to this JSON by their own codec: this layer knows no operation.
//
// Outcomes are values: an HTTP answer of any status (a 400 carrying
// ConditionalCheckFailedException is a normal answer) is a DynamoHttpResponse;
// a failure to get an answer at all (refused, timed out, connection lost,
// unparseable reply) is a TransportError. No exception crosses this API.
// A timeout or a lost connection is ambiguous: the request may have been
// applied. The caller (core/) decides what that means.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "base/time.hpp"
#include "runtime/aws/tls.hpp"

namespace leaseproof::runtime {

// Defaults suit dynalite, which checks the Authorization header's shape only.
struct DynamoCredentials {
  std::string access_key_id = "leaseproof";
  std::string secret_access_key = "leaseproof";
  std::string session_token;  // sent as X-Amz-Security-Token when not empty
};

// Asked before every request when set (instead of `credentials`): a chain
// that refreshes (runtime/aws/aws_credentials.hpp) hands out its current value.
using CredentialsSource = std::function<DynamoCredentials()>;

// The AWS JSON protocol this client speaks. DynamoDB's by default; SQS's JSON
// protocol differs only in these three (runtime/aws/sqs_client.hpp).
struct AwsJsonProtocol {
  std::string service = "dynamodb";               // SigV4 scope
  std::string target_prefix = "DynamoDB_20120810.";  // X-Amz-Target = prefix + operation
  std::string content_type = "application/x-amz-json-1.0";
};

struct DynamoHttpClientOptions {
  std::string endpoint_url;  // "http://127.0.0.1:8000" or "https://dynamodb.eu-west-1.amazonaws.com"
  // For https:// endpoints: the verifying client context (make_tls_client_context),
  // shared by a process's clients; null: one trusting the system store.
  TlsContextPtr tls_context;
  std::string region = "us-east-1";
  DynamoCredentials credentials;
  CredentialsSource credentials_source;  // when set, asked per request instead of `credentials`
  AwsJsonProtocol protocol;
  // Covers everything one request needs: resolve, connect, write, read.
  Duration request_timeout = Duration::from_s(5);
  // An idle keep-alive connection older than this is replaced before use
  // instead of risking a request on a socket the server is closing (node's
  // HTTP server, hence dynalite, drops idle connections after 5 s).
  Duration connection_idle_max = Duration::from_s(4);
  std::size_t response_body_bytes_max = 16 * 1024 * 1024;
  std::size_t requests_queued_max = 1024;
};

struct DynamoHttpResponse {
  int http_status = 0;
  nlohmann::json body;  // empty object when the reply had no body

  bool is_success() const { return http_status == 200; }
  // The short error name of a DynamoDB error reply, e.g.
  // "ConditionalCheckFailedException" from "com.amazonaws.dynamodb.v20120810#
  // ConditionalCheckFailedException"; empty when the body has no __type.
  std::string error_type() const;
};

enum class TransportErrorKind {
  invalid_endpoint,  // the endpoint URL could not be used
  invalid_request,   // bad operation name, or JSON that cannot be encoded (invalid UTF-8)
  resolve_failed,
  connect_failed,    // e.g. connection refused
  tls_failed,        // the TLS handshake failed: an untrusted or expired certificate, another host's, no TLS at all
  timeout,           // request_timeout elapsed: outcome unknown
  connection_lost,   // write or read failed: outcome unknown
  bad_response,      // not HTTP, body too large, or not DynamoDB's answer (a JSON object; an error with "__type")
  queue_full,        // requests_queued_max requests already waiting
  client_closed,     // the client was destroyed before the request finished
};

std::string_view to_string(TransportErrorKind kind);

struct TransportError {
  TransportErrorKind kind = TransportErrorKind::connection_lost;
  std::string detail;  // human-readable, for logs
};

class DynamoHttpResult {
 public:
  DynamoHttpResult(DynamoHttpResponse response) : value_(std::move(response)) {}  // NOLINT: implicit by design
  DynamoHttpResult(TransportError error) : value_(std::move(error)) {}           // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<DynamoHttpResponse>(value_); }
  const DynamoHttpResponse& response() const;  // asserts ok()
  const TransportError& error() const;         // asserts !ok()

 private:
  std::variant<DynamoHttpResponse, TransportError> value_;
};

using DynamoHttpHandler = std::function<void(DynamoHttpResult)>;

// Asynchronous client bound to one io_context. Not thread-safe: call it from
// the thread that runs the io_context. Requests run one at a time over one
// keep-alive connection, in call order; a broken connection is replaced on the
// next request. Every handler runs exactly once, on the io_context, never
// inline from async_call.
class DynamoHttpClient {
 public:
  DynamoHttpClient(boost::asio::io_context& io, DynamoHttpClientOptions options);
  // Closes the connection. Handlers of unfinished requests still run on the
  // io_context, with TransportErrorKind::client_closed.
  ~DynamoHttpClient();
  DynamoHttpClient(const DynamoHttpClient&) = delete;
  DynamoHttpClient& operator=(const DynamoHttpClient&) = delete;

  void async_call(std::string operation, nlohmann::json request, DynamoHttpHandler handler);

  std::size_t requests_pending() const;     // queued plus in flight
  std::uint64_t connections_opened() const;  // shows keep-alive reuse to tests

 private:
  class Impl;
  // Shared with in-flight completion handlers, so that destroying the client
  // while a request runs is safe.
  std::shared_ptr<Impl> impl_;
};

// Blocking convenience for tests and CLI tools: owns an io_context and runs it
// until the one request finishes.
class BlockingDynamoHttpClient {
 public:
  explicit BlockingDynamoHttpClient(DynamoHttpClientOptions options);
  ~BlockingDynamoHttpClient();
  BlockingDynamoHttpClient(const BlockingDynamoHttpClient&) = delete;
  BlockingDynamoHttpClient& operator=(const BlockingDynamoHttpClient&) = delete;

  DynamoHttpResult call(std::string operation, nlohmann::json request);
  std::uint64_t connections_opened() const;

 private:
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<DynamoHttpClient> client_;
};

// Polls DescribeTable until the table and all its GSIs are ACTIVE (a server
// may answer CreateTable before the table takes writes, as DynamoDB and dynalite
// do). False if that did not happen within `timeout`.
bool wait_until_table_active(BlockingDynamoHttpClient& client, const std::string& table, Duration timeout);

// AWS Signature Version 4, exposed as pure functions so a known-answer test
// can check them. Implemented here (SHA-256 and HMAC from FIPS 180-4 / RFC
// 2104) to avoid a crypto dependency for one header.
struct SigV4Request {
  std::string_view method;           // "POST"
  std::string_view canonical_uri;    // "/", already URI-encoded
  std::string_view canonical_query;  // "" or sorted, encoded "a=1&b=2"
  // Headers to sign; any order and case, values are trimmed.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string_view payload;
  std::string_view amz_date;  // "20150830T123600Z"
  std::string_view region;
  std::string_view service;  // "dynamodb"
};

std::string sha256_hex(std::string_view data);
// "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..."
std::string sigv4_authorization(const SigV4Request& request, const DynamoCredentials& credentials);

}  // namespace leaseproof::runtime
