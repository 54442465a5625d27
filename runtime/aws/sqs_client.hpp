#pragma once
// An Amazon SQS client (JSON protocol, AmazonSQS.*) over DynamoHttpClient,
// for the workers' release notices: a FIFO queue, one message group per
// connection (models/sqs.hpp is the simulated service it stands beside).
//
// Outcomes are values, as with the DynamoDB client: a typed answer, or an
// SqsError that says whether an answer came at all (transport), came as an
// SQS error (service, with its short __type such as "QueueDoesNotExist"), or
// came but was not the shape this operation answers with (malformed). No
// exception crosses this API. A transport timeout or lost connection is
// ambiguous: the request may have been applied.
//
// Every call goes to the configured endpoint; the queue is named by the
// QueueUrl in the request body, exactly as CreateQueue/GetQueueUrl returned
// it (fauxqs answers http://sqs.REGION.localhost:PORT/..., a host that need
// not resolve: it is a name, not an address to dial).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "base/assert.hpp"
#include "base/time.hpp"
#include "runtime/aws/dynamo_http_client.hpp"

namespace leaseproof::runtime {

// SQS's bounds for the values this client sends.
constexpr uint32_t kSqsReceiveMessagesMax = 10;
constexpr Duration kSqsWaitTimeMax = Duration::from_s(20);
constexpr Duration kSqsVisibilityTimeoutMax = Duration::from_h(12);
constexpr std::size_t kSqsIdCharsMax = 128;  // MessageGroupId, MessageDeduplicationId

struct SqsClientOptions {
  std::string endpoint_url;  // "http://127.0.0.1:9324" or "https://sqs.eu-west-1.amazonaws.com"
  TlsContextPtr tls_context;  // for https://, as DynamoHttpClientOptions::tls_context
  std::string region = "us-east-1";
  DynamoCredentials credentials;
  CredentialsSource credentials_source;  // when set, asked per request instead of `credentials`
  // Every call but a receive's long poll; a receive gets this plus its wait.
  Duration request_timeout = Duration::from_s(5);
  // The longest WaitTimeSeconds a receive may ask for (a receive's HTTP
  // timeout is request_timeout + this).
  Duration receive_wait_max = kSqsWaitTimeMax;
};

enum class SqsErrorKind : uint8_t {
  invalid_request,  // refused before sending: a value out of SQS's range
  transport,        // no answer (see transport_kind); timeout and lost connection are ambiguous
  service,          // an SQS error answer: `type` is its short name
  malformed,        // an answer, but not this operation's shape
};
std::string_view to_string(SqsErrorKind kind);

struct SqsError {
  SqsErrorKind kind = SqsErrorKind::transport;
  TransportErrorKind transport_kind = TransportErrorKind::connection_lost;  // kind == transport only
  std::string type;    // kind == service: "QueueDoesNotExist", "InvalidParameterValue", ...
  int http_status = 0;  // kind == service or malformed
  std::string detail;   // human-readable, for logs

  std::string describe() const;
};

template <typename Value>
class SqsResult {
 public:
  SqsResult(Value value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  SqsResult(SqsError error) : value_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<Value>(value_); }
  const Value& value() const {
    LP_ASSERT_MSG(ok(), "SqsResult::value() of an error: {}", std::get<SqsError>(value_).describe());
    return std::get<Value>(value_);
  }
  const SqsError& error() const {
    LP_ASSERT_MSG(!ok(), "SqsResult::error() of a value");
    return std::get<SqsError>(value_);
  }

 private:
  std::variant<Value, SqsError> value_;
};

struct SqsCreateQueueRequest {
  std::string name;  // a FIFO queue's name ends in ".fifo"
  bool fifo = true;
  bool content_based_deduplication = false;
  Duration visibility_timeout = Duration::from_s(30);
};

struct SqsSendRequest {
  std::string group_id;
  std::string deduplication_id;  // empty: none sent (the queue must then deduplicate by content)
  std::string body;
};
struct SqsSent {
  std::string message_id;
  std::string sequence_number;  // FIFO queues only; a duplicate gets the original's
};

struct SqsReceiveRequest {
  uint32_t messages_max = 1;                  // 1..10
  Duration visibility_timeout = Duration::from_s(30);
  Duration wait_time = Duration::zero();      // 0: short poll; else a long poll of whole seconds
};
struct SqsMessage {
  std::string message_id;
  std::string receipt_handle;
  std::string body;
  std::string group_id;          // FIFO: MessageGroupId
  std::string deduplication_id;  // FIFO: MessageDeduplicationId
  uint32_t receive_count = 0;    // ApproximateReceiveCount; 0 when not answered
};

struct SqsDone {};  // DeleteMessage and ChangeMessageVisibility answer nothing

using SqsQueueUrlHandler = std::function<void(SqsResult<std::string>)>;
using SqsSendHandler = std::function<void(SqsResult<SqsSent>)>;
using SqsReceiveHandler = std::function<void(SqsResult<std::vector<SqsMessage>>)>;
using SqsDoneHandler = std::function<void(SqsResult<SqsDone>)>;

// Asynchronous, on one io_context, not thread-safe (as DynamoHttpClient).
// Receives run over their own connection so that a long poll never holds up
// a send, a delete or a visibility change. Every handler runs exactly once,
// on the io_context, never inline.
class SqsClient {
 public:
  SqsClient(boost::asio::io_context& io, SqsClientOptions options);
  ~SqsClient();
  SqsClient(const SqsClient&) = delete;
  SqsClient& operator=(const SqsClient&) = delete;

  void create_queue(const SqsCreateQueueRequest& request, SqsQueueUrlHandler handler);
  void get_queue_url(std::string_view name, SqsQueueUrlHandler handler);
  void send_message(std::string_view queue_url, const SqsSendRequest& request, SqsSendHandler handler);
  void receive_message(std::string_view queue_url, const SqsReceiveRequest& request, SqsReceiveHandler handler);
  void delete_message(std::string_view queue_url, std::string_view receipt_handle, SqsDoneHandler handler);
  // Zero makes the message receivable at once: how a consumer hands it back.
  void change_message_visibility(std::string_view queue_url, std::string_view receipt_handle,
                                 Duration visibility_timeout, SqsDoneHandler handler);

  std::size_t requests_pending() const;

 private:
  template <typename Value, typename Decode>
  void call(DynamoHttpClient& client, std::string operation, nlohmann::json request, Decode decode,
            std::function<void(SqsResult<Value>)> handler);
  template <typename Value>
  void refuse(std::string detail, std::function<void(SqsResult<Value>)> handler);

  boost::asio::io_context& io_;
  SqsClientOptions options_;
  std::unique_ptr<DynamoHttpClient> calls_;
  std::unique_ptr<DynamoHttpClient> receives_;
};

// Blocking convenience for the CLI and tests: owns an io_context and runs it
// until the one request finishes.
class BlockingSqsClient {
 public:
  explicit BlockingSqsClient(SqsClientOptions options);
  ~BlockingSqsClient();
  BlockingSqsClient(const BlockingSqsClient&) = delete;
  BlockingSqsClient& operator=(const BlockingSqsClient&) = delete;

  SqsResult<std::string> create_queue(const SqsCreateQueueRequest& request);
  SqsResult<std::string> get_queue_url(std::string_view name);
  SqsResult<SqsSent> send_message(std::string_view queue_url, const SqsSendRequest& request);
  SqsResult<std::vector<SqsMessage>> receive_message(std::string_view queue_url, const SqsReceiveRequest& request);
  SqsResult<SqsDone> delete_message(std::string_view queue_url, std::string_view receipt_handle);
  SqsResult<SqsDone> change_message_visibility(std::string_view queue_url, std::string_view receipt_handle,
                                               Duration visibility_timeout);

 private:
  template <typename Value, typename Start>
  SqsResult<Value> run(Start start);

  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<SqsClient> client_;
};

}  // namespace leaseproof::runtime
