// runtime/worker/status_server.hpp on 127.0.0.1: /healthz, /readyz and /metrics from their
// callbacks, 404 and 405 otherwise. Every wait is bounded.
#include <chrono>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include "runtime/worker/status_server.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Sends `request` and returns everything the server wrote before closing.
std::string exchange(asio::io_context& io, uint16_t port, const std::string& request) {
  tcp::socket socket(io);
  std::string answer;
  bool connected = false, done = false;
  socket.async_connect(tcp::endpoint{asio::ip::make_address("127.0.0.1"), port}, [&](boost::system::error_code ec) {
    connected = !ec;
    if (!connected) {
      done = true;
      return;
    }
    asio::async_write(socket, asio::buffer(request), [&](boost::system::error_code, std::size_t) {
      asio::async_read(socket, asio::dynamic_buffer(answer), [&](boost::system::error_code, std::size_t) { done = true; });
    });
  });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done && std::chrono::steady_clock::now() < give_up) {
    io.run_for(std::chrono::milliseconds(10));
    if (io.stopped()) io.restart();
  }
  EXPECT_TRUE(done) << "no answer within 5 s";
  return answer;
}

TEST(StatusServer, AnswersHealthReadinessAndMetricsFromItsCallbacks) {
  asio::io_context io;
  bool healthy = true;
  std::string not_ready = "no answer from DynamoDB yet";
  int metrics_calls = 0;
  StatusServer server(io, "127.0.0.1", 0,
                      StatusServer::Routes{[&] { return healthy; }, [&] { return not_ready; },
                                           [&] {
                                             ++metrics_calls;
                                             return std::string{"leaseproof_worker_active_connections 3\n"};
                                           }});
  ASSERT_NE(server.port(), 0);
  std::string answer = exchange(io, server.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\r\n\r\nok\n"), std::string::npos) << answer;
  healthy = false;
  answer = exchange(io, server.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 503"), std::string::npos) << answer;
  // Readiness says why not, and is independent of liveness.
  answer = exchange(io, server.port(), "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 503"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\r\n\r\nnot ready: no answer from DynamoDB yet\n"), std::string::npos) << answer;
  not_ready.clear();
  answer = exchange(io, server.port(), "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\r\n\r\nready\n"), std::string::npos) << answer;
  answer = exchange(io, server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(answer.find("leaseproof_worker_active_connections 3"), std::string::npos) << answer;
  EXPECT_EQ(metrics_calls, 1);
  EXPECT_NE(exchange(io, server.port(), "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").find("HTTP/1.1 404"), std::string::npos);
  // Without a readiness callback /readyz is not served.
  StatusServer plain(io, "127.0.0.1", 0, StatusServer::Routes{});
  EXPECT_NE(exchange(io, plain.port(), "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n").find("HTTP/1.1 404"),
            std::string::npos);
  EXPECT_NE(exchange(io, server.port(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").find("HTTP/1.1 405"),
            std::string::npos);
  // Garbage gets no answer and does not stop the server.
  EXPECT_EQ(exchange(io, server.port(), "\x16\x03\x01 not http\r\n\r\n"), "");
  EXPECT_NE(exchange(io, server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").find("200"), std::string::npos);
}

TEST(StatusServer, APortInUseIsAnErrorNamingTheAddress) {
  asio::io_context io;
  StatusServer first(io, "127.0.0.1", 0, {});
  try {
    StatusServer second(io, "127.0.0.1", first.port(), {});
    FAIL() << "a second server bound the same port";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string{e.what()}.find("127.0.0.1:"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace leaseproof::runtime
