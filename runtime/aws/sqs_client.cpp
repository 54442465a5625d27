// The SQS JSON-protocol client (sqs_client.hpp): requests built and answers
// checked here, HTTP and signing done by DynamoHttpClient with SQS's protocol.
#include "runtime/aws/sqs_client.hpp"

#include <charconv>
#include <optional>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

DynamoHttpClientOptions http_options(const SqsClientOptions& options, Duration timeout) {
  DynamoHttpClientOptions http;
  http.endpoint_url = options.endpoint_url;
  http.tls_context = options.tls_context;
  http.region = options.region;
  http.credentials = options.credentials;
  http.credentials_source = options.credentials_source;
  http.protocol.service = "sqs";
  http.protocol.target_prefix = "AmazonSQS.";
  http.protocol.content_type = "application/x-amz-json-1.0";
  http.request_timeout = timeout;
  return http;
}

SqsError malformed(const DynamoHttpResponse& response, std::string_view what) {
  return SqsError{SqsErrorKind::malformed, TransportErrorKind::bad_response, {}, response.http_status,
                  fmt::format("{}: {}", what, response.body.dump().substr(0, 300))};
}

// A whole number of seconds in [0, max], or nullopt.
std::optional<int64_t> whole_seconds(Duration value, Duration max) {
  if (value.is_negative() || value > max || !(value % Duration::from_s(1)).is_zero()) return std::nullopt;
  return value.s();
}

const std::string* string_member(const json& object, const char* name) {
  const auto it = object.find(name);
  return it != object.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

std::optional<SqsMessage> decode_message(const json& entry) {
  if (!entry.is_object()) return std::nullopt;
  const std::string* receipt = string_member(entry, "ReceiptHandle");
  const std::string* body = string_member(entry, "Body");
  if (receipt == nullptr || receipt->empty() || body == nullptr) return std::nullopt;
  SqsMessage message;
  message.receipt_handle = *receipt;
  message.body = *body;
  if (const std::string* id = string_member(entry, "MessageId")) message.message_id = *id;
  const auto attributes = entry.find("Attributes");
  if (attributes != entry.end()) {
    if (!attributes->is_object()) return std::nullopt;
    if (const std::string* group = string_member(*attributes, "MessageGroupId")) message.group_id = *group;
    if (const std::string* id = string_member(*attributes, "MessageDeduplicationId")) message.deduplication_id = *id;
    if (const std::string* count = string_member(*attributes, "ApproximateReceiveCount")) {
      const auto [end, ec] = std::from_chars(count->data(), count->data() + count->size(), message.receive_count);
      if (ec != std::errc{} || end != count->data() + count->size()) return std::nullopt;
    }
  }
  return message;
}

SqsResult<std::string> decode_queue_url(const DynamoHttpResponse& response) {
  const std::string* url = string_member(response.body, "QueueUrl");
  if (url == nullptr || url->empty()) return malformed(response, "no QueueUrl");
  return *url;
}

SqsResult<SqsSent> decode_sent(const DynamoHttpResponse& response) {
  const std::string* id = string_member(response.body, "MessageId");
  if (id == nullptr || id->empty()) return malformed(response, "no MessageId");
  SqsSent sent{*id, {}};
  if (const std::string* sequence = string_member(response.body, "SequenceNumber")) sent.sequence_number = *sequence;
  return sent;
}

// An empty queue answers {} (no "Messages"), as SQS does.
SqsResult<std::vector<SqsMessage>> decode_received(const DynamoHttpResponse& response) {
  std::vector<SqsMessage> messages;
  const auto list = response.body.find("Messages");
  if (list == response.body.end()) return messages;
  if (!list->is_array()) return malformed(response, "Messages is not an array");
  for (const json& entry : *list) {
    std::optional<SqsMessage> message = decode_message(entry);
    if (!message) return malformed(response, "a message without ReceiptHandle or Body");
    messages.push_back(std::move(*message));
  }
  return messages;
}

SqsResult<SqsDone> decode_done(const DynamoHttpResponse&) { return SqsDone{}; }

}  // namespace

std::string_view to_string(SqsErrorKind kind) {
  switch (kind) {
    case SqsErrorKind::invalid_request: return "invalid_request";
    case SqsErrorKind::transport: return "transport";
    case SqsErrorKind::service: return "service";
    case SqsErrorKind::malformed: return "malformed";
  }
  return "unknown";
}

std::string SqsError::describe() const {
  switch (kind) {
    case SqsErrorKind::transport: return fmt::format("transport {}: {}", to_string(transport_kind), detail);
    case SqsErrorKind::service: return fmt::format("HTTP {} {}: {}", http_status, type, detail);
    case SqsErrorKind::malformed: return fmt::format("malformed answer (HTTP {}): {}", http_status, detail);
    case SqsErrorKind::invalid_request: return fmt::format("invalid request: {}", detail);
  }
  return detail;
}

SqsClient::SqsClient(asio::io_context& io, SqsClientOptions options) : io_(io), options_(std::move(options)) {
  LP_ASSERT(!options_.request_timeout.is_negative() && !options_.request_timeout.is_zero());
  LP_ASSERT(!options_.receive_wait_max.is_negative() && options_.receive_wait_max <= kSqsWaitTimeMax);
  calls_ = std::make_unique<DynamoHttpClient>(io, http_options(options_, options_.request_timeout));
  receives_ = std::make_unique<DynamoHttpClient>(
      io, http_options(options_, options_.request_timeout + options_.receive_wait_max));
}

SqsClient::~SqsClient() = default;

std::size_t SqsClient::requests_pending() const { return calls_->requests_pending() + receives_->requests_pending(); }

template <typename Value>
void SqsClient::refuse(std::string detail, std::function<void(SqsResult<Value>)> handler) {
  SqsError error{SqsErrorKind::invalid_request, TransportErrorKind::invalid_request, {}, 0, std::move(detail)};
  asio::post(io_, [handler = std::move(handler), error = std::move(error)]() mutable { handler(std::move(error)); });
}

template <typename Value, typename Decode>
void SqsClient::call(DynamoHttpClient& client, std::string operation, json request, Decode decode,
                     std::function<void(SqsResult<Value>)> handler) {
  client.async_call(std::move(operation), std::move(request),
                    [decode, handler = std::move(handler)](DynamoHttpResult result) {
    if (!result.ok()) {
      return handler(SqsError{SqsErrorKind::transport, result.error().kind, {}, 0, result.error().detail});
    }
    const DynamoHttpResponse& response = result.response();
    if (!response.is_success()) {
      const std::string type = response.error_type();
      if (type.empty()) return handler(malformed(response, "an error without __type"));
      const std::string* message = string_member(response.body, "message");
      if (message == nullptr) message = string_member(response.body, "Message");
      return handler(SqsError{SqsErrorKind::service, TransportErrorKind::bad_response, type, response.http_status,
                              message != nullptr ? *message : std::string{}});
    }
    handler(decode(response));
  });
}

void SqsClient::create_queue(const SqsCreateQueueRequest& request, SqsQueueUrlHandler handler) {
  const auto visibility = whole_seconds(request.visibility_timeout, kSqsVisibilityTimeoutMax);
  if (!visibility) return refuse<std::string>("visibility_timeout: whole seconds, 0..12h", std::move(handler));
  if (request.fifo && !request.name.ends_with(".fifo")) {
    return refuse<std::string>(fmt::format("queue name '{}': a FIFO queue's name ends in .fifo", request.name),
                               std::move(handler));
  }
  json attributes = {{"VisibilityTimeout", std::to_string(*visibility)}};
  if (request.fifo) {
    attributes["FifoQueue"] = "true";
    attributes["ContentBasedDeduplication"] = request.content_based_deduplication ? "true" : "false";
  }
  call<std::string>(*calls_, "CreateQueue", {{"QueueName", request.name}, {"Attributes", attributes}},
                    decode_queue_url, std::move(handler));
}

void SqsClient::get_queue_url(std::string_view name, SqsQueueUrlHandler handler) {
  call<std::string>(*calls_, "GetQueueUrl", {{"QueueName", name}}, decode_queue_url, std::move(handler));
}

void SqsClient::send_message(std::string_view queue_url, const SqsSendRequest& request, SqsSendHandler handler) {
  if (request.group_id.size() > kSqsIdCharsMax || request.deduplication_id.size() > kSqsIdCharsMax) {
    return refuse<SqsSent>(fmt::format("group and deduplication ids: at most {} characters", kSqsIdCharsMax),
                           std::move(handler));
  }
  json body = {{"QueueUrl", queue_url}, {"MessageBody", request.body}};
  if (!request.group_id.empty()) body["MessageGroupId"] = request.group_id;
  if (!request.deduplication_id.empty()) body["MessageDeduplicationId"] = request.deduplication_id;
  call<SqsSent>(*calls_, "SendMessage", std::move(body), decode_sent, std::move(handler));
}

void SqsClient::receive_message(std::string_view queue_url, const SqsReceiveRequest& request,
                                SqsReceiveHandler handler) {
  const auto visibility = whole_seconds(request.visibility_timeout, kSqsVisibilityTimeoutMax);
  const auto wait = whole_seconds(request.wait_time, options_.receive_wait_max);
  if (request.messages_max < 1 || request.messages_max > kSqsReceiveMessagesMax || !visibility || !wait) {
    return refuse<std::vector<SqsMessage>>(
        fmt::format("messages_max 1..{}, visibility_timeout whole seconds 0..12h, wait_time whole seconds 0..{} s",
                    kSqsReceiveMessagesMax, options_.receive_wait_max.s()),
        std::move(handler));
  }
  json body = {{"QueueUrl", queue_url},
               {"MaxNumberOfMessages", request.messages_max},
               {"VisibilityTimeout", *visibility},
               {"WaitTimeSeconds", *wait},
               {"MessageSystemAttributeNames", {"All"}},
               {"AttributeNames", {"All"}}};  // the older name of the same field
  call<std::vector<SqsMessage>>(*receives_, "ReceiveMessage", std::move(body), decode_received, std::move(handler));
}

void SqsClient::delete_message(std::string_view queue_url, std::string_view receipt_handle, SqsDoneHandler handler) {
  call<SqsDone>(*calls_, "DeleteMessage", {{"QueueUrl", queue_url}, {"ReceiptHandle", receipt_handle}}, decode_done,
                std::move(handler));
}

void SqsClient::change_message_visibility(std::string_view queue_url, std::string_view receipt_handle,
                                          Duration visibility_timeout, SqsDoneHandler handler) {
  const auto visibility = whole_seconds(visibility_timeout, kSqsVisibilityTimeoutMax);
  if (!visibility) return refuse<SqsDone>("visibility_timeout: whole seconds, 0..12h", std::move(handler));
  call<SqsDone>(*calls_, "ChangeMessageVisibility",
                {{"QueueUrl", queue_url}, {"ReceiptHandle", receipt_handle}, {"VisibilityTimeout", *visibility}},
                decode_done, std::move(handler));
}

BlockingSqsClient::BlockingSqsClient(SqsClientOptions options)
    : io_(std::make_unique<asio::io_context>()), client_(std::make_unique<SqsClient>(*io_, std::move(options))) {}

BlockingSqsClient::~BlockingSqsClient() = default;

template <typename Value, typename Start>
SqsResult<Value> BlockingSqsClient::run(Start start) {
  std::optional<SqsResult<Value>> result;
  start([&result](SqsResult<Value> outcome) { result.emplace(std::move(outcome)); });
  io_->restart();
  // The request's own deadline bounds this loop (as BlockingDynamoHttpClient's).
  while (!result && io_->run_one() > 0) {
  }
  LP_ASSERT_MSG(result.has_value(), "io_context ran out of work before the SQS request finished");
  return std::move(*result);
}

SqsResult<std::string> BlockingSqsClient::create_queue(const SqsCreateQueueRequest& request) {
  return run<std::string>([&](SqsQueueUrlHandler done) { client_->create_queue(request, std::move(done)); });
}

SqsResult<std::string> BlockingSqsClient::get_queue_url(std::string_view name) {
  return run<std::string>([&](SqsQueueUrlHandler done) { client_->get_queue_url(name, std::move(done)); });
}

SqsResult<SqsSent> BlockingSqsClient::send_message(std::string_view queue_url, const SqsSendRequest& request) {
  return run<SqsSent>([&](SqsSendHandler done) { client_->send_message(queue_url, request, std::move(done)); });
}

SqsResult<std::vector<SqsMessage>> BlockingSqsClient::receive_message(std::string_view queue_url,
                                                                      const SqsReceiveRequest& request) {
  return run<std::vector<SqsMessage>>(
      [&](SqsReceiveHandler done) { client_->receive_message(queue_url, request, std::move(done)); });
}

SqsResult<SqsDone> BlockingSqsClient::delete_message(std::string_view queue_url, std::string_view receipt_handle) {
  return run<SqsDone>(
      [&](SqsDoneHandler done) { client_->delete_message(queue_url, receipt_handle, std::move(done)); });
}

SqsResult<SqsDone> BlockingSqsClient::change_message_visibility(std::string_view queue_url,
                                                               std::string_view receipt_handle,
                                                               Duration visibility_timeout) {
  return run<SqsDone>([&](SqsDoneHandler done) {
    client_->change_message_visibility(queue_url, receipt_handle, visibility_timeout, std::move(done));
  });
}

}  // namespace leaseproof::runtime
