// The SQS client against a real fauxqs (label `real`): the FIFO semantics the
// workers' release notices rely on, and the failures that must be values.
// CTest starts a private fauxqs (fixture `fauxqs`, tests/runtime/CMakeLists.txt)
// and names its state dir in LEASEPROOF_FAUXQS_STATE_DIR; by hand:
//   scripts/fauxqs.sh install && export LEASEPROOF_FAUXQS_ENDPOINT=$(scripts/fauxqs.sh start)

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/aws/sqs_client.hpp"
#include "canned_server.hpp"

namespace leaseproof::runtime {
namespace {

using SteadyClock = std::chrono::steady_clock;

// LEASEPROOF_FAUXQS_ENDPOINT, or the port a fauxqs.sh state dir recorded.
std::string fauxqs_endpoint() {
  if (const char* endpoint = std::getenv("LEASEPROOF_FAUXQS_ENDPOINT"); endpoint != nullptr && *endpoint != '\0') {
    return endpoint;
  }
  const char* state_dir = std::getenv("LEASEPROOF_FAUXQS_STATE_DIR");
  if (state_dir == nullptr || *state_dir == '\0') return {};
  std::ifstream port_file(std::string{state_dir} + "/port");
  std::string port;
  if (!(port_file >> port)) return {};
  return "http://127.0.0.1:" + port;
}

template <typename Value>
std::string describe(const SqsResult<Value>& result) {
  return result.ok() ? std::string{"ok"} : result.error().describe();
}

unsigned short closed_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

class FauxqsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = fauxqs_endpoint();
    if (endpoint_.empty()) {
      GTEST_FAIL() << "No fauxqs: set LEASEPROOF_FAUXQS_ENDPOINT (scripts/fauxqs.sh install && export "
                      "LEASEPROOF_FAUXQS_ENDPOINT=$(scripts/fauxqs.sh start)) or run through ctest, whose fixture "
                      "starts one.";
    }
    options_.endpoint_url = endpoint_;
    client_ = std::make_unique<BlockingSqsClient>(options_);
    // Unique per test and process, so reruns against one server never collide.
    name_ = fmt::format("{}-{}.fifo", ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    const SqsResult<std::string> url = client_->create_queue({name_, true, false, Duration::from_s(30)});
    ASSERT_TRUE(url.ok()) << describe(url);
    url_ = url.value();
  }

  SqsSent send(const std::string& group, const std::string& deduplication_id, const std::string& body) {
    const SqsResult<SqsSent> sent = client_->send_message(url_, {group, deduplication_id, body});
    EXPECT_TRUE(sent.ok()) << describe(sent);
    return sent.ok() ? sent.value() : SqsSent{};
  }

  std::vector<SqsMessage> receive(uint32_t max, Duration visibility = Duration::from_s(30),
                                  Duration wait = Duration::zero()) {
    const auto received = client_->receive_message(url_, {max, visibility, wait});
    EXPECT_TRUE(received.ok()) << describe(received);
    return received.ok() ? received.value() : std::vector<SqsMessage>{};
  }

  std::string endpoint_;
  SqsClientOptions options_;
  std::unique_ptr<BlockingSqsClient> client_;
  std::string name_;
  std::string url_;
};

TEST_F(FauxqsTest, CreateQueueIsIdempotentAndGetQueueUrlNamesTheSameQueue) {
  const SqsResult<std::string> again = client_->create_queue({name_, true, false, Duration::from_s(30)});
  ASSERT_TRUE(again.ok()) << describe(again);
  EXPECT_EQ(again.value(), url_);
  const SqsResult<std::string> looked_up = client_->get_queue_url(name_);
  ASSERT_TRUE(looked_up.ok()) << describe(looked_up);
  EXPECT_EQ(looked_up.value(), url_);
  EXPECT_NE(url_.find(name_), std::string::npos) << url_;
  // Another visibility timeout for the same name is refused, as by SQS.
  const SqsResult<std::string> different = client_->create_queue({name_, true, false, Duration::from_s(20)});
  ASSERT_FALSE(different.ok());
  EXPECT_EQ(different.error().kind, SqsErrorKind::service);
  EXPECT_EQ(different.error().type, "QueueNameExists") << different.error().describe();
}

TEST_F(FauxqsTest, SendReceiveDeleteRoundTrip) {
  const SqsSent sent = send("c1", "c1@w1#1", "c1");
  EXPECT_FALSE(sent.message_id.empty());
  EXPECT_FALSE(sent.sequence_number.empty());
  const std::vector<SqsMessage> got = receive(10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "c1");
  EXPECT_EQ(got[0].group_id, "c1");
  EXPECT_EQ(got[0].deduplication_id, "c1@w1#1");
  EXPECT_EQ(got[0].receive_count, 1u);
  EXPECT_EQ(got[0].message_id, sent.message_id);
  const SqsResult<SqsDone> deleted = client_->delete_message(url_, got[0].receipt_handle);
  ASSERT_TRUE(deleted.ok()) << describe(deleted);
  EXPECT_TRUE(receive(10).empty());
}

TEST_F(FauxqsTest, AGroupsNextMessageIsHeldWhileOneIsInFlight) {
  send("c1", "c1-first", "first");
  send("c1", "c1-second", "second");
  send("c2", "c2-only", "other group");
  const std::vector<SqsMessage> first = receive(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].body, "first");
  // c1 is locked while "first" is in flight; c2 is not.
  const std::vector<SqsMessage> next = receive(10);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].body, "other group");
  EXPECT_TRUE(receive(10).empty());
  ASSERT_TRUE(client_->delete_message(url_, first[0].receipt_handle).ok());
  const std::vector<SqsMessage> after = receive(10);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].body, "second");
}

TEST_F(FauxqsTest, ADuplicateDeduplicationIdIsDroppedWithinTheWindow) {
  const SqsSent original = send("c1", "c1@w1#7", "c1");
  const SqsSent duplicate = send("c1", "c1@w1#7", "c1");
  EXPECT_EQ(duplicate.message_id, original.message_id);
  EXPECT_EQ(duplicate.sequence_number, original.sequence_number);
  const std::vector<SqsMessage> got = receive(10);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(client_->delete_message(url_, got[0].receipt_handle).ok());
  // Still within the window after the delete: dropped again.
  send("c1", "c1@w1#7", "c1");
  EXPECT_TRUE(receive(10).empty());
  // Another id (the next release) is a new message.
  send("c1", "c1@w1#8", "c1");
  EXPECT_EQ(receive(10).size(), 1u);
}

TEST_F(FauxqsTest, ChangeMessageVisibilityZeroHandsAMessageBack) {
  send("c1", "c1-a", "c1");
  const std::vector<SqsMessage> got = receive(10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(receive(10).empty()) << "in flight for 30 s";
  const SqsResult<SqsDone> back = client_->change_message_visibility(url_, got[0].receipt_handle, Duration::zero());
  ASSERT_TRUE(back.ok()) << describe(back);
  const std::vector<SqsMessage> again = receive(10);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].body, "c1");
  EXPECT_EQ(again[0].receive_count, 2u);
  EXPECT_NE(again[0].receipt_handle, got[0].receipt_handle);
}

TEST_F(FauxqsTest, ALongPollWaitsOnAnEmptyQueueAndReturnsWhenAMessageArrives) {
  const auto empty_started = SteadyClock::now();
  EXPECT_TRUE(receive(1, Duration::from_s(30), Duration::from_s(1)).empty());
  const auto empty_waited = SteadyClock::now() - empty_started;
  EXPECT_GE(empty_waited, std::chrono::milliseconds(900)) << "a long poll of 1 s answered at once";

  // One io_context: a receive that waits up to 5 s, and a send 300 ms later.
  boost::asio::io_context io;
  SqsClient client(io, options_);
  std::optional<SqsResult<std::vector<SqsMessage>>> received;
  SteadyClock::time_point received_at;
  const auto started = SteadyClock::now();
  client.receive_message(url_, {1, Duration::from_s(30), Duration::from_s(5)},
                         [&](SqsResult<std::vector<SqsMessage>> result) {
                           received.emplace(std::move(result));
                           received_at = SteadyClock::now();
                         });
  boost::asio::steady_timer later(io, std::chrono::milliseconds(300));
  std::optional<SqsResult<SqsSent>> sent;
  later.async_wait([&](boost::system::error_code) {
    client.send_message(url_, {"c9", "c9-late", "c9"}, [&](SqsResult<SqsSent> result) { sent.emplace(std::move(result)); });
  });
  io.run();
  ASSERT_TRUE(sent && sent->ok()) << (sent ? describe(*sent) : "no answer");
  ASSERT_TRUE(received && received->ok()) << (received ? describe(*received) : "no answer");
  ASSERT_EQ(received->value().size(), 1u);
  EXPECT_EQ(received->value()[0].body, "c9");
  const auto waited = received_at - started;
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_LT(waited, std::chrono::milliseconds(2500)) << "the long poll did not return on arrival";
}

TEST_F(FauxqsTest, ServiceErrorsAreValuesWithTheirType) {
  const SqsResult<std::string> missing = client_->get_queue_url(fmt::format("missing-{}.fifo", getpid()));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, SqsErrorKind::service);
  EXPECT_EQ(missing.error().type, "QueueDoesNotExist") << missing.error().describe();
  EXPECT_EQ(missing.error().http_status, 400);
  // A FIFO send without a deduplication id, on a queue without content-based deduplication.
  const SqsResult<SqsSent> no_id = client_->send_message(url_, {"c1", "", "c1"});
  ASSERT_FALSE(no_id.ok());
  EXPECT_EQ(no_id.error().kind, SqsErrorKind::service);
  EXPECT_EQ(no_id.error().type, "InvalidParameterValue") << no_id.error().describe();
}

TEST_F(FauxqsTest, OutOfRangeRequestsAreRefusedBeforeSending) {
  const auto too_many = client_->receive_message(url_, {11, Duration::from_s(30), Duration::zero()});
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().kind, SqsErrorKind::invalid_request);
  const auto fraction = client_->receive_message(url_, {1, Duration::from_ms(1500), Duration::zero()});
  ASSERT_FALSE(fraction.ok());
  EXPECT_EQ(fraction.error().kind, SqsErrorKind::invalid_request);
  const auto not_fifo = client_->create_queue({"plain", true, false, Duration::from_s(30)});
  ASSERT_FALSE(not_fifo.ok());
  EXPECT_EQ(not_fifo.error().kind, SqsErrorKind::invalid_request);
  const auto long_id = client_->send_message(url_, {std::string(129, 'g'), "d", "b"});
  ASSERT_FALSE(long_id.ok());
  EXPECT_EQ(long_id.error().kind, SqsErrorKind::invalid_request);
}

TEST(SqsClientTransport, ARefusedConnectionIsATransportErrorValue) {
  SqsClientOptions options;
  options.endpoint_url = fmt::format("http://127.0.0.1:{}", closed_port());
  options.request_timeout = Duration::from_s(2);
  BlockingSqsClient client(options);
  const auto started = SteadyClock::now();
  const SqsResult<std::string> result = client.get_queue_url("any.fifo");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, SqsErrorKind::transport);
  EXPECT_EQ(result.error().transport_kind, TransportErrorKind::connect_failed) << result.error().describe();
  EXPECT_LT(SteadyClock::now() - started, std::chrono::seconds(3));
}

using test::CannedServer;

std::string http(std::string_view status, std::string_view body) {
  return fmt::format("HTTP/1.1 {}\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\n\r\n{}", status,
                     body.size(), body);
}

SqsResult<std::vector<SqsMessage>> receive_canned(const std::string& answer) {
  CannedServer server(answer);
  SqsClientOptions options;
  options.endpoint_url = server.endpoint();
  options.request_timeout = Duration::from_s(3);
  BlockingSqsClient client(options);
  return client.receive_message("http://sqs.us-east-1.localhost:1/000000000000/q.fifo",
                                {1, Duration::from_s(30), Duration::zero()});
}

TEST(SqsClientTransport, AnAnswerThatIsNotSqssIsAnErrorValue) {
  // Not an AWS JSON answer at all: the HTTP client's bad_response.
  for (const std::string& answer : {http("200 OK", "<html>hello</html>"), http("502 Bad Gateway", "oops"),
                                    http("500 Internal Server Error", R"({"error":"boom"})")}) {
    const auto result = receive_canned(answer);
    ASSERT_FALSE(result.ok()) << answer;
    EXPECT_EQ(result.error().kind, SqsErrorKind::transport) << result.error().describe();
    EXPECT_EQ(result.error().transport_kind, TransportErrorKind::bad_response) << result.error().describe();
  }
  // JSON objects, but not ReceiveMessage's shape.
  for (const char* body : {R"({"Messages":"none"})", R"({"Messages":[{"Body":"c1"}]})",
                                  R"({"Messages":[{"ReceiptHandle":"h","Body":7}]})",
                                  R"({"Messages":[{"ReceiptHandle":"h","Body":"c","Attributes":{"ApproximateReceiveCount":"x"}}]})"}) {
    const auto result = receive_canned(http("200 OK", body));
    ASSERT_FALSE(result.ok()) << body;
    EXPECT_EQ(result.error().kind, SqsErrorKind::malformed) << body << ": " << result.error().describe();
  }
  // SQS's own error is a service error, whatever its status.
  const auto error = receive_canned(http("400 Bad Request", R"({"__type":"com.amazonaws.sqs#OverLimit","message":"m"})"));
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.error().kind, SqsErrorKind::service);
  EXPECT_EQ(error.error().type, "OverLimit");
  EXPECT_EQ(error.error().detail, "m");
  // And an empty answer is an empty receive.
  const auto empty = receive_canned(http("200 OK", "{}"));
  ASSERT_TRUE(empty.ok()) << describe(empty);
  EXPECT_TRUE(empty.value().empty());
}

// An http:// endpoint whose port speaks TLS: the server closes on the
// plaintext request, or sends a TLS alert first. The transport error names
// the endpoint and https://; a server that died mid-answer gets no such hint.
TEST(SqsClientTransport, APlaintextRequestToATlsPortNamesTheEndpointAndHttps) {
  // One GetQueueUrl against a server that answers `answer` and closes: its
  // error, and the server's endpoint.
  const auto failure_for = [](const std::string& answer) {
    CannedServer server(answer);
    SqsClientOptions options;
    options.endpoint_url = server.endpoint();
    options.request_timeout = Duration::from_s(3);
    BlockingSqsClient client(options);
    const SqsResult<std::string> result = client.get_queue_url("any.fifo");
    EXPECT_FALSE(result.ok());
    return std::pair{result.ok() ? SqsError{} : result.error(), server.endpoint()};
  };
  const std::string tls_alert("\x15\x03\x03\x00\x02\x02\x32", 7);
  for (const std::string& answer : {std::string{}, tls_alert}) {
    const auto [error, endpoint] = failure_for(answer);
    const std::string text = error.describe();
    EXPECT_EQ(error.kind, SqsErrorKind::transport) << text;
    EXPECT_EQ(error.transport_kind, TransportErrorKind::connection_lost) << text;
    EXPECT_NE(text.find(endpoint), std::string::npos) << text;
    EXPECT_NE(text.find("if that port speaks TLS, use https://"), std::string::npos) << text;
  }
  const auto [error, endpoint] = failure_for("HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n{\"QueueUrl\":");
  const std::string text = error.describe();
  EXPECT_EQ(error.transport_kind, TransportErrorKind::connection_lost) << text;
  EXPECT_EQ(text.find("https://"), std::string::npos) << text;
  EXPECT_EQ(text.find("TLS"), std::string::npos) << text;
}

}  // namespace
}  // namespace leaseproof::runtime
