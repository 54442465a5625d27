#pragma once
// A server on loopback that answers one request with `answer` (raw HTTP) and
// closes: stands in for whatever may listen where DynamoDB or SQS was
// expected (the clients' tests of answers that are not the service's).

#include <cstddef>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

namespace leaseproof::runtime::test {

class CannedServer {
 public:
  explicit CannedServer(std::string answer)
      : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}), thread_([this, answer = std::move(answer)] {
          boost::system::error_code ec;
          boost::asio::ip::tcp::socket socket(io_);
          acceptor_.accept(socket, ec);
          if (ec) return;
          std::string request;
          // Headers, then the body by its Content-Length (the client sends one).
          boost::asio::read_until(socket, boost::asio::dynamic_buffer(request), "\r\n\r\n", ec);
          const size_t headers_end = request.find("\r\n\r\n") + 4;
          const size_t length_at = request.find("Content-Length: ");
          const size_t length = length_at == std::string::npos ? 0 : std::stoul(request.substr(length_at + 16));
          if (request.size() < headers_end + length) {
            boost::asio::read(socket, boost::asio::dynamic_buffer(request),
                              boost::asio::transfer_exactly(headers_end + length - request.size()), ec);
          }
          boost::asio::write(socket, boost::asio::buffer(answer), ec);
          socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
        }) {}
  ~CannedServer() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    thread_.join();
  }
  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", acceptor_.local_endpoint().port()); }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
};

}  // namespace leaseproof::runtime::test
