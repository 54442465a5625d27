// The DynamoDB HTTP client against a fake server on 127.0.0.1 that sends
// anything (raw socket writes): a table of broken answers, then rapidcheck's
// random and mutated bytes. Every outcome is a value: an answer with a
// sensible status, or a TransportError of the expected kind; never a crash or
// an exception, and the next request on the same client gets its own answer.
// RC_PARAMS="reproduce=..." replays a failure; max_success changes the count
// (100 by default; each case takes about a millisecond).

#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <ostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/aws/dynamo_http_client.hpp"

namespace leaseproof::runtime {

// gtest prints kinds by name (found by argument-dependent lookup).
void PrintTo(TransportErrorKind kind, std::ostream* out);
void PrintTo(TransportErrorKind kind, std::ostream* out) { *out << to_string(kind); }

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr auto request_timeout = 300ms;
constexpr std::size_t response_body_bytes_max = 256 * 1024;
// Every wait in this file ends by then; a request ends by its own timeout
// well before.
constexpr auto call_bound = 3s;
constexpr std::size_t request_head_bytes_max = 64 * 1024;

// ---------------------------------------------------------------------------
// What the fake server does with one request.

struct Write {
  std::string bytes;
  milliseconds delay_before{0};
};

enum class Then {
  close,         // FIN after the last write
  keep_serving,  // read the next request on the same connection
  hold,          // send nothing more; wait for the client to close
  reset,         // RST (SO_LINGER 0) after the last write
};

struct Answer {
  std::vector<Write> writes;
  Then then = Then::close;
};

Answer closing(std::string bytes) { return Answer{{Write{std::move(bytes)}}, Then::close}; }
Answer keeping(std::string bytes) { return Answer{{Write{std::move(bytes)}}, Then::keep_serving}; }
Answer holding(std::string bytes) { return Answer{{Write{std::move(bytes)}}, Then::hold}; }
Answer resetting(std::string bytes) { return Answer{{Write{std::move(bytes)}}, Then::reset}; }

Answer trickling(std::string_view bytes, milliseconds per_byte) {
  Answer answer{{}, Then::close};
  for (const char c : bytes) answer.writes.push_back(Write{std::string(1, c), per_byte});
  return answer;
}

// A whole HTTP/1.1 answer with DynamoDB's content type and a right length.
std::string http(std::string_view status, std::string_view body, std::string_view extra_headers = "") {
  return fmt::format("HTTP/1.1 {}\r\nContent-Type: application/x-amz-json-1.0\r\n{}Content-Length: {}\r\n\r\n{}",
                     status, extra_headers, body.size(), body);
}

// What a good server answers: a GetItem success that echoes the request's Key,
// so the client can tell its own answer from one meant for another request.
Answer echo(const std::string& request_body) {
  const json request = json::parse(request_body, nullptr, /*allow_exceptions=*/false);
  json item = json::object();
  if (request.is_object() && request.contains("Key")) item = request["Key"];
  return keeping(http("200 OK", json{{"Item", item}}.dump()));
}

// Answers each request with the next scripted answer, then with `fallback`.
// Runs on whichever thread runs its io_context.
class FakeServer {
 public:
  explicit FakeServer(asio::io_context& io, std::function<Answer(const std::string&)> fallback = echo)
      : acceptor_(io, {asio::ip::make_address("127.0.0.1"), 0}), fallback_(std::move(fallback)) {
    asio::co_spawn(io, accept_loop(), asio::detached);
  }

  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", acceptor_.local_endpoint().port()); }
  void script(std::vector<Answer> answers) {
    for (auto& answer : answers) script_.push_back(std::move(answer));
  }
  bool script_done() const { return script_.empty(); }
  int requests_received() const { return requests_received_; }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    std::string buffer;
    for (;;) {
      const std::optional<std::string> body = co_await read_request(socket, buffer);
      if (!body) co_return;
      ++requests_received_;
      Answer answer = next_answer(*body);
      for (const Write& write : answer.writes) {
        if (write.delay_before > 0ms) {
          asio::steady_timer timer(socket.get_executor(), write.delay_before);
          co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        auto [ec, written] = co_await asio::async_write(socket, asio::buffer(write.bytes),
                                                        asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;
      }
      boost::system::error_code ignored;
      switch (answer.then) {
        case Then::keep_serving: continue;
        case Then::close: socket.shutdown(tcp::socket::shutdown_both, ignored); break;
        case Then::hold: {
          std::string sink;  // until the client closes or times out
          co_await asio::async_read(socket, asio::dynamic_buffer(sink, request_head_bytes_max),
                                    asio::as_tuple(asio::use_awaitable));
          break;
        }
        case Then::reset: socket.set_option(asio::socket_base::linger(true, 0), ignored); break;
      }
      socket.close(ignored);
      co_return;
    }
  }

  // The body of the next request, or nullopt when the client went away.
  static asio::awaitable<std::optional<std::string>> read_request(tcp::socket& socket, std::string& buffer) {
    auto [ec, head_bytes] = co_await asio::async_read_until(
        socket, asio::dynamic_buffer(buffer, request_head_bytes_max), "\r\n\r\n", asio::as_tuple(asio::use_awaitable));
    if (ec) co_return std::nullopt;
    std::string head = buffer.substr(0, head_bytes);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::size_t length = 0;
    if (const std::size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
      length = std::stoul(head.substr(at + 17));
    }
    if (buffer.size() < head_bytes + length) {
      auto [body_ec, body_bytes] =
          co_await asio::async_read(socket, asio::dynamic_buffer(buffer, request_head_bytes_max),
                                    asio::transfer_exactly(head_bytes + length - buffer.size()),
                                    asio::as_tuple(asio::use_awaitable));
      if (body_ec) co_return std::nullopt;
    }
    std::string body = buffer.substr(head_bytes, length);
    buffer.erase(0, head_bytes + length);
    co_return body;
  }

  Answer next_answer(const std::string& request_body) {
    if (script_.empty()) return fallback_(request_body);
    Answer answer = std::move(script_.front());
    script_.erase(script_.begin());
    return answer;
  }

  tcp::acceptor acceptor_;
  std::function<Answer(const std::string&)> fallback_;
  std::vector<Answer> script_;
  int requests_received_ = 0;
};

// ---------------------------------------------------------------------------
// The client on the same io_context as the server: one thread, no races.

DynamoHttpClientOptions client_options(const std::string& endpoint) {
  DynamoHttpClientOptions options;
  options.endpoint_url = endpoint;
  options.request_timeout = Duration::from_ms(std::chrono::milliseconds(request_timeout).count());
  options.response_body_bytes_max = response_body_bytes_max;
  return options;
}

json get_item(const std::string& marker) {
  return json{{"TableName", "t"}, {"Key", {{"pk", {{"S", marker}}}}}};
}

std::string describe(const DynamoHttpResult& result) {
  if (!result.ok()) return fmt::format("{}: {}", to_string(result.error().kind), result.error().detail);
  return fmt::format("HTTP {} {}", result.response().http_status, result.response().body.dump().substr(0, 120));
}

struct Outcome {
  std::optional<DynamoHttpResult> result;  // nullopt: no result within call_bound, or an exception
  std::string exception;                   // what() of anything thrown out of the io_context
  Clock::duration elapsed{};
};

class Harness {
 public:
  Harness() : server_(io_), client_(io_, client_options(server_.endpoint())) {}

  FakeServer& server() { return server_; }
  DynamoHttpClient& client() { return client_; }

  // Lets the server's delayed writes happen while the client is idle.
  void idle(milliseconds duration) { io_.run_for(duration); }

  Outcome call(const std::string& marker) {
    // Shared with the handler, which may outlive this call if the bound is hit.
    auto slot = std::make_shared<std::optional<DynamoHttpResult>>();
    Outcome outcome;
    const auto start = Clock::now();
    const auto give_up = start + call_bound;
    try {
      client_.async_call("GetItem", get_item(marker), [slot](DynamoHttpResult result) { slot->emplace(std::move(result)); });
      while (!slot->has_value() && Clock::now() < give_up) {
        if (io_.run_one_until(give_up) == 0) break;
      }
    } catch (const std::exception& thrown) {
      outcome.exception = thrown.what();
    } catch (...) {
      outcome.exception = "an exception not derived from std::exception";
    }
    outcome.elapsed = Clock::now() - start;
    outcome.result = std::move(*slot);
    return outcome;
  }

 private:
  asio::io_context io_;  // declared first: outlives the sockets of both ends
  FakeServer server_;
  DynamoHttpClient client_;
};

// "" when a good request got its own answer.
std::string good_answer_problem(const Outcome& outcome, const std::string& marker) {
  if (!outcome.exception.empty()) return "exception: " + outcome.exception;
  if (!outcome.result) return "no result within the bound";
  const DynamoHttpResult& result = *outcome.result;
  if (!result.ok() || result.response().http_status != 200) return describe(result);
  const json& body = result.response().body;
  const json expected = json{{"Item", get_item(marker)["Key"]}};
  if (body != expected) return fmt::format("an answer meant for another request: {}", body.dump());
  return {};
}

// ---------------------------------------------------------------------------
// The table.

struct Expected {
  std::optional<int> http_status;            // the answer is a value with this status
  std::optional<TransportErrorKind> error;   // or this transport error
};

Expected answer_with(int http_status) { return Expected{http_status, std::nullopt}; }
Expected error_of(TransportErrorKind kind) { return Expected{std::nullopt, kind}; }

struct Case {
  std::string name;
  std::vector<Answer> answers;  // the server's answers to the requests this case causes
  Expected expected;
  milliseconds pause_after{0};  // before the next good request
};

std::string nested_arrays(std::size_t levels) {
  return "{\"a\":" + std::string(levels, '[') + std::string(levels, ']') + "}";
}

std::string repeated(std::string_view text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += text;
  return out;
}

std::vector<Case> cases() {
  using enum TransportErrorKind;
  const std::string ok_body = R"({"Item":{"pk":{"S":"x"}}})";
  const std::string validation = R"({"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":"m"})";
  const std::string chunked_head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
  const std::string huge(response_body_bytes_max + 1, ' ');
  std::string huge_chunks;
  for (std::size_t sent = 0; sent <= response_body_bytes_max; sent += 4096) {
    huge_chunks += "1000\r\n" + std::string(4096, ' ') + "\r\n";
  }
  return {
      {"200 with a DynamoDB body", {keeping(http("200 OK", ok_body))}, answer_with(200)},
      {"400 with __type", {keeping(http("400 Bad Request", validation))}, answer_with(400)},
      {"400 without __type", {keeping(http("400 Bad Request", R"({"message":"m"})"))}, error_of(bad_response)},
      {"500 with __type",
       {keeping(http("500 Internal Server Error", R"({"__type":"com.amazon.coral.service#InternalFailure"})"))},
       answer_with(500)},
      {"500 with an HTML page", {closing(http("500 Internal Server Error", "<html>oops</html>"))}, error_of(bad_response)},
      {"503 with __type (throttled)",
       {keeping(http("503 Service Unavailable",
                     R"({"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow"})"))},
       answer_with(503)},
      {"503 with an empty body", {closing(http("503 Service Unavailable", ""))}, error_of(bad_response)},
      {"302 redirect", {closing(http("302 Found", "", "Location: http://elsewhere/\r\n"))}, error_of(bad_response)},
      {"204 No Content", {keeping(http("204 No Content", ""))}, error_of(bad_response)},
      {"101 Switching Protocols", {closing("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n")},
       error_of(bad_response)},
      {"100 Continue, then the answer",
       {keeping("HTTP/1.1 100 Continue\r\n\r\n" + http("200 OK", ok_body))}, answer_with(200)},
      {"100 Continue, then junk", {closing("HTTP/1.1 100 Continue\r\n\r\nwhat is this\r\n\r\n")},
       error_of(bad_response)},
      {"100 Continue, then close", {closing("HTTP/1.1 100 Continue\r\n\r\n")}, error_of(connection_lost)},
      {"100 Continue six times", {closing(repeated("HTTP/1.1 100 Continue\r\n\r\n", 6))}, error_of(bad_response)},
      {"no Content-Type", {keeping(fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}", ok_body.size(), ok_body))},
       answer_with(200)},
      {"Content-Type text/html",
       {keeping(fmt::format("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{}",
                            ok_body.size(), ok_body))},
       answer_with(200)},
      {"Content-Length larger than the body, then close",
       {closing("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + ok_body)}, error_of(connection_lost)},
      {"Content-Length smaller than the body (junk after)",
       {keeping("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}trailing junk")}, answer_with(200)},
      {"Content-Length smaller than the body (a stale answer after)",
       {keeping("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}" + http("200 OK", R"({"Item":{"pk":{"S":"stale"}}})"))},
       answer_with(200)},
      {"Content-Length smaller than the body (the rest arrives later)",
       {Answer{{Write{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"}, Write{"late junk", 20ms}}, Then::keep_serving}},
       answer_with(200), 100ms},
      {"Content-Length smaller, cutting the JSON", {keeping("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + ok_body)},
       error_of(bad_response)},
      {"Content-Length not a number", {closing("HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\n{}")},
       error_of(bad_response)},
      {"two different Content-Lengths",
       {closing("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{} ")}, error_of(bad_response)},
      {"chunked, well formed", {keeping(chunked_head + "2\r\n{}\r\n0\r\n\r\n")}, answer_with(200)},
      {"chunked, chunk size not hex", {closing(chunked_head + "zz\r\n{}\r\n0\r\n\r\n")}, error_of(bad_response)},
      {"chunked, chunk longer than its data, then close", {closing(chunked_head + "10\r\n{}")},
       error_of(connection_lost)},
      {"chunked, over response_body_bytes_max", {closing(chunked_head + huge_chunks + "0\r\n\r\n")},
       error_of(bad_response)},
      {"empty body, Content-Length 0", {keeping("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")}, answer_with(200)},
      {"empty body, no length, close", {closing("HTTP/1.1 200 OK\r\n\r\n")}, answer_with(200)},
      {"HTTP/1.0, body until close", {closing("HTTP/1.0 200 OK\r\n\r\n" + ok_body)}, answer_with(200)},
      {"truncated JSON", {keeping(http("200 OK", R"({"Item":{"pk":{"S")"))}, error_of(bad_response)},
      {"JSON array", {keeping(http("200 OK", "[]"))}, error_of(bad_response)},
      {"JSON string", {keeping(http("200 OK", R"("ok")"))}, error_of(bad_response)},
      {"JSON number", {keeping(http("200 OK", "42"))}, error_of(bad_response)},
      {"JSON null", {keeping(http("200 OK", "null"))}, error_of(bad_response)},
      {"400 with a JSON array", {keeping(http("400 Bad Request", "[1]"))}, error_of(bad_response)},
      {"JSON nested 100,000 levels", {keeping(http("200 OK", nested_arrays(100'000)))}, error_of(bad_response)},
      {"body over response_body_bytes_max", {closing(http("200 OK", huge))}, error_of(bad_response)},
      {"header block over 8 KiB",
       {closing(http("200 OK", "{}", "X-Padding: " + std::string(20'000, 'p') + "\r\n"))}, error_of(bad_response)},
      {"slow trickle, one byte per 50 ms", {trickling(http("200 OK", ok_body), 50ms)}, error_of(timeout)},
      {"headers, then silence", {holding("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{")}, error_of(timeout)},
      {"silence", {holding("")}, error_of(timeout)},
      {"close mid-status-line", {closing("HTTP/1.1 2")}, error_of(connection_lost)},
      {"close mid-headers", {closing("HTTP/1.1 200 OK\r\nContent-Ty")}, error_of(connection_lost)},
      {"close mid-body", {closing("HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n{\"Item\":")},
       error_of(connection_lost)},
      {"reset mid-body", {resetting("HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n{\"Item\":")},
       error_of(connection_lost)},
      // On a reused connection the client retries once on a fresh one (the
      // server may have closed it while idle); the second close is reported.
      {"close before any byte (twice)", {closing(""), closing("")}, error_of(connection_lost)},
      {"garbage: an SSH banner", {closing("SSH-2.0-OpenSSH_9.2\r\n")}, error_of(bad_response)},
      {"garbage: binary", {closing(std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\x00\xff", 13))},
       error_of(bad_response)},
      {"garbage: status 999", {keeping(http("999 Whatever", "{}"))}, error_of(bad_response)},
  };
}

std::string show(const Expected& expected) {
  return expected.http_status ? fmt::format("HTTP {}", *expected.http_status)
                              : std::string(to_string(*expected.error));
}

TEST(DynamoResponseFuzz, EveryBrokenAnswerIsAValueAndTheNextRequestStillWorks) {
  Harness harness;
  // A first good answer, so that the first case, like every other, meets a
  // client with a keep-alive connection open.
  ASSERT_EQ(good_answer_problem(harness.call("warm-up"), "warm-up"), "");
  int case_number = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    ++case_number;
    const int received_before = harness.server().requests_received();
    harness.server().script(c.answers);
    const Outcome outcome = harness.call(fmt::format("bad-{}", case_number));
    const auto elapsed_ms = std::chrono::duration_cast<milliseconds>(outcome.elapsed).count();
    ASSERT_EQ(outcome.exception, "");
    ASSERT_TRUE(outcome.result.has_value()) << "no result within " << call_bound.count() << " s";
    const DynamoHttpResult& result = *outcome.result;
    std::printf("%-58s -> %-16s %5lld ms  %s\n", c.name.c_str(), show(c.expected).c_str(),
                static_cast<long long>(elapsed_ms), describe(result).substr(0, 110).c_str());
    if (c.expected.http_status) {
      EXPECT_TRUE(result.ok()) << describe(result);
      if (result.ok()) {
        EXPECT_EQ(result.response().http_status, *c.expected.http_status);
        EXPECT_TRUE(result.response().body.is_object()) << describe(result);
      }
    } else {
      EXPECT_FALSE(result.ok()) << describe(result);
      if (!result.ok()) {
        EXPECT_EQ(result.error().kind, *c.expected.error) << describe(result);
      }
    }
    EXPECT_TRUE(harness.server().script_done()) << "the case's answers were not all asked for";
    EXPECT_EQ(harness.server().requests_received() - received_before, static_cast<int>(c.answers.size()));
    EXPECT_EQ(harness.client().requests_pending(), 0u);
    EXPECT_LT(outcome.elapsed, request_timeout + 500ms) << "the request deadline bounds every outcome";
    if (!c.expected.http_status && *c.expected.error == TransportErrorKind::timeout) {
      EXPECT_GE(outcome.elapsed, request_timeout);
    }
    harness.idle(c.pause_after);
    const std::string marker = fmt::format("good-{}", case_number);
    EXPECT_EQ(good_answer_problem(harness.call(marker), marker), "") << "the request after the broken answer";
  }
}

// ---------------------------------------------------------------------------
// An http:// endpoint whose port speaks TLS (a TLS proxy, DynamoDB's 443): the
// server closes on the plaintext request (FIN, or RST when the request lies
// unread in its socket), or sends a TLS alert first. The
// error keeps its kind and names the endpoint and https://; a server that
// sent part of an HTTP answer before dying gets no such hint.

struct TlsPortCase {
  std::string name;
  Answer answer;
  TransportErrorKind kind;
  bool hint;
};

TEST(DynamoResponseFuzz, APlaintextRequestToATlsPortNamesTheEndpointAndHttps) {
  using enum TransportErrorKind;
  const std::string tls_alert("\x15\x03\x03\x00\x02\x02\x32", 7);  // fatal decode_error, TLS 1.2
  const std::vector<TlsPortCase> tls_port_cases = {
      {"close before any byte", closing(""), connection_lost, true},
      {"reset before any byte", resetting(""), connection_lost, true},
      {"a TLS alert record, then close", closing(tls_alert), connection_lost, true},
      {"a TLS alert record, then reset", resetting(tls_alert), connection_lost, true},
      {"a TLS handshake record, then close", closing(std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11)),
       bad_response, true},
      {"close mid-status-line", closing("HTTP/1.1 2"), connection_lost, false},
      {"reset mid-status-line", resetting("HTTP/1.1 2"), connection_lost, false},
      {"close mid-headers", closing("HTTP/1.1 200 OK\r\nContent-Ty"), connection_lost, false},
      // Unparsed bytes 15 03 after a whole header block: what comes after the
      // head of an HTTP answer is no TLS record.
      {"close mid-body, a chunk size 15 03",
       closing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + tls_alert), connection_lost, false},
      {"100 Continue, then close", closing("HTTP/1.1 100 Continue\r\n\r\n"), connection_lost, false},
  };
  for (const TlsPortCase& c : tls_port_cases) {
    SCOPED_TRACE(c.name);
    Harness harness;  // a fresh connection: the first request of a new client
    const std::string endpoint = harness.server().endpoint();
    harness.server().script({c.answer});
    const Outcome outcome = harness.call("to-a-tls-port");
    ASSERT_EQ(outcome.exception, "");
    ASSERT_TRUE(outcome.result.has_value());
    ASSERT_FALSE(outcome.result->ok()) << describe(*outcome.result);
    const TransportError& error = outcome.result->error();
    std::printf("%-40s -> %s\n", c.name.c_str(), describe(*outcome.result).c_str());
    EXPECT_EQ(error.kind, c.kind) << error.detail;
    if (c.hint) {
      EXPECT_NE(error.detail.find(endpoint), std::string::npos) << error.detail;
      EXPECT_NE(error.detail.find("if that port speaks TLS, use https://"), std::string::npos) << error.detail;
    } else {
      EXPECT_EQ(error.detail.find("https://"), std::string::npos) << error.detail;
      EXPECT_EQ(error.detail.find("TLS"), std::string::npos) << error.detail;
    }
  }
}

// ---------------------------------------------------------------------------
// wait_until_table_active reads DescribeTable answers of any shape: it threw
// nlohmann::json::type_error on {} (`dynamo replay --endpoint` terminated).

class ServerThread {
 public:
  explicit ServerThread(std::string describe_table_body)
      : server_(io_, [body = std::move(describe_table_body)](const std::string&) { return keeping(http("200 OK", body)); }),
        thread_([this] { io_.run(); }) {}
  ~ServerThread() {
    io_.stop();
    thread_.join();
  }
  std::string endpoint() const { return server_.endpoint(); }

 private:
  asio::io_context io_;
  FakeServer server_;
  std::thread thread_;
};

TEST(DynamoResponseFuzz, WaitUntilTableActiveReadsAnyShapeOfDescribeTable) {
  const std::vector<std::string> never_active = {
      "{}",
      R"({"Table":5})",
      R"({"Table":null})",
      R"({"Table":[]})",
      R"({"Table":{}})",
      R"({"Table":{"TableStatus":5}})",
      R"({"Table":{"TableStatus":"CREATING"}})",
      R"({"Table":{"TableStatus":"ACTIVE","GlobalSecondaryIndexes":{"IndexStatus":"ACTIVE"}}})",
      R"({"Table":{"TableStatus":"ACTIVE","GlobalSecondaryIndexes":[5]}})",
      R"({"Table":{"TableStatus":"ACTIVE","GlobalSecondaryIndexes":[{"IndexStatus":null}]}})",
      R"({"Table":{"TableStatus":"ACTIVE","GlobalSecondaryIndexes":[{"IndexStatus":"ACTIVE"},{}]}})",
  };
  for (const std::string& body : never_active) {
    SCOPED_TRACE(body);
    ServerThread server(body);
    BlockingDynamoHttpClient client(client_options(server.endpoint()));
    bool active = true;
    EXPECT_NO_THROW(active = wait_until_table_active(client, "t", Duration::from_ms(60)));
    EXPECT_FALSE(active);
  }
  for (const char* body : {R"({"Table":{"TableStatus":"ACTIVE"}})",
                                 R"({"Table":{"TableStatus":"ACTIVE","GlobalSecondaryIndexes":null}})",
                                 R"({"Table":{"TableStatus":"ACTIVE","GlobalSecondaryIndexes":[{"IndexStatus":"ACTIVE"}]}})"}) {
    SCOPED_TRACE(body);
    ServerThread server(body);
    BlockingDynamoHttpClient client(client_options(server.endpoint()));
    EXPECT_TRUE(wait_until_table_active(client, "t", Duration::from_s(2)));
  }
}

// ---------------------------------------------------------------------------
// Random answers.

// Answers whose end the client can tell without the connection closing.
const std::vector<std::string>& framed_answers() {
  static const std::vector<std::string> answers = {
      http("200 OK", R"({"Item":{"pk":{"S":"x"},"n":{"N":"1"}}})"),
      http("400 Bad Request", R"({"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"})"),
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "HTTP/1.1 100 Continue\r\n\r\n" + http("200 OK", "{}"),
  };
  return answers;
}

const std::vector<std::string>& valid_answers() {
  static const std::vector<std::string> answers = [] {
    std::vector<std::string> all = framed_answers();
    all.push_back("HTTP/1.0 200 OK\r\n\r\n{}");  // ends when the connection closes
    return all;
  }();
  return answers;
}

rc::Gen<std::string> any_bytes() { return rc::gen::container<std::string>(rc::gen::arbitrary<char>()); }

// A valid answer after a few random cuts, overwrites, insertions and deletions.
rc::Gen<std::string> mutated_answer() {
  return rc::gen::exec([] {
    std::string bytes = *rc::gen::elementOf(valid_answers());
    const int mutations = *rc::gen::inRange(1, 4);
    for (int i = 0; i < mutations; ++i) {
      const auto at = *rc::gen::inRange<std::size_t>(0, bytes.size() + 1);
      switch (*rc::gen::inRange(0, 4)) {
        case 0: bytes.resize(at); break;
        case 1:
          if (at < bytes.size()) bytes[at] = *rc::gen::arbitrary<char>();
          break;
        case 2: bytes.insert(at, *any_bytes()); break;
        default: bytes.erase(at, *rc::gen::inRange<std::size_t>(0, 8)); break;
      }
    }
    return bytes;
  });
}

rc::Gen<std::string> any_answer() {
  return rc::gen::oneOf(any_bytes(), mutated_answer(),
                        rc::gen::map(any_bytes(), [](std::string tail) { return "HTTP/1.1 200 OK\r\n" + tail; }));
}

RC_GTEST_PROP(DynamoResponseFuzz, AnyBytesAsTheAnswerGiveAValueAndTheNextRequestWorks, ()) {
  const std::string bytes = *any_answer();
  // Half the time the broken answer comes on a reused keep-alive connection.
  const bool reuse = *rc::gen::arbitrary<bool>();
  Harness harness;
  if (reuse) RC_ASSERT(good_answer_problem(harness.call("before"), "before") == "");
  harness.server().script({closing(bytes)});
  const Outcome outcome = harness.call("random");
  RC_ASSERT(outcome.exception == "");
  RC_ASSERT(outcome.result.has_value());
  const DynamoHttpResult& result = *outcome.result;
  if (result.ok()) {
    const int status = result.response().http_status;
    RC_TAG(fmt::format("HTTP {}", status));
    RC_ASSERT(status >= 100 && status <= 999);
    RC_ASSERT(!(status >= 100 && status < 200 && status != 101));  // interim answers are skipped
    RC_ASSERT(result.response().body.is_object());
    RC_ASSERT(status == 200 || !result.response().error_type().empty());
  } else {
    RC_TAG(std::string(to_string(result.error().kind)));
    // The server closes after its bytes: no request waits for its deadline.
    RC_ASSERT(result.error().kind == TransportErrorKind::bad_response ||
              result.error().kind == TransportErrorKind::connection_lost);
  }
  RC_ASSERT(outcome.elapsed < request_timeout);
  RC_ASSERT(good_answer_problem(harness.call("after"), "after") == "");
}

// A complete answer followed by anything, on a connection the server keeps
// open: the extra bytes answer nothing the client sent, and must never be
// taken for the answer to the next request.
RC_GTEST_PROP(DynamoResponseFuzz, BytesAfterACompleteAnswerNeverAnswerTheNextRequest, ()) {
  const std::string answer = *rc::gen::elementOf(framed_answers());
  // Random bytes, or a whole second answer: the most convincing stale one.
  const std::string tail = *rc::gen::oneOf(any_bytes(), rc::gen::elementOf(framed_answers()));
  RC_PRE(!tail.empty());
  Harness harness;
  RC_ASSERT(good_answer_problem(harness.call("before"), "before") == "");
  harness.server().script({keeping(answer + tail)});
  const Outcome outcome = harness.call("first");
  RC_ASSERT(outcome.exception == "");
  RC_ASSERT(outcome.result.has_value());
  RC_ASSERT(outcome.result->ok());
  RC_ASSERT(outcome.elapsed < request_timeout);
  RC_ASSERT(good_answer_problem(harness.call("after"), "after") == "");
}

}  // namespace
}  // namespace leaseproof::runtime
