#include "runtime/worker/status_server.hpp"

#include <chrono>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

}  // namespace

class StatusServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, const std::string& host, uint16_t port, Routes routes)
      : acceptor_(io), routes_(std::move(routes)) {
    boost::system::error_code ec;
    const tcp::endpoint endpoint{asio::ip::make_address(host, ec), port};
    if (ec) throw std::system_error(ec, fmt::format("status address '{}'", host));
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint, ec);
    if (ec) throw std::system_error(ec, fmt::format("listen {}:{}", host, port));
    acceptor_.listen();
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }

  void accept() {
    acceptor_.async_accept([weak = weak_from_this()](beast::error_code ec, tcp::socket socket) {
      auto self = weak.lock();
      if (!self || ec == asio::error::operation_aborted) return;
      if (!ec) self->serve(std::move(socket));
      self->accept();
    });
  }

  void stop() {
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  struct Exchange {
    explicit Exchange(tcp::socket socket) : stream(std::move(socket)) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> parser;
    http::response<http::string_body> response;
  };

  void serve(tcp::socket socket) {
    auto exchange = std::make_shared<Exchange>(std::move(socket));
    exchange->parser.header_limit(8 * 1024);
    exchange->stream.expires_after(std::chrono::seconds(5));
    http::async_read(exchange->stream, exchange->buffer, exchange->parser,
                     [weak = weak_from_this(), exchange](beast::error_code ec, std::size_t) {
      auto self = weak.lock();
      if (ec || !self) return;
      const auto& request = exchange->parser.get();
      const std::string_view target{request.target().data(), request.target().size()};
      auto& response = exchange->response;
      response.version(11);
      response.keep_alive(false);
      response.set(http::field::content_type, "text/plain; version=0.0.4");
      if (request.method() != http::verb::get) {
        response.result(http::status::method_not_allowed);
        response.body() = "GET /healthz, /readyz or /metrics\n";
      } else if (target == "/healthz") {
        const bool healthy = self->routes_.healthy ? self->routes_.healthy() : true;
        response.result(healthy ? http::status::ok : http::status::service_unavailable);
        response.body() = healthy ? "ok\n" : "unhealthy\n";
      } else if (target == "/readyz" && self->routes_.ready) {
        const std::string why = self->routes_.ready();
        response.result(why.empty() ? http::status::ok : http::status::service_unavailable);
        response.body() = why.empty() ? "ready\n" : "not ready: " + why + "\n";
      } else if (target == "/metrics" && self->routes_.metrics) {
        response.result(http::status::ok);
        response.body() = self->routes_.metrics();
      } else {
        response.result(http::status::not_found);
        response.body() = "not found; try /healthz, /readyz or /metrics\n";
      }
      response.prepare_payload();
      http::async_write(exchange->stream, response, [exchange](beast::error_code, std::size_t) {
        beast::error_code ignored;
        exchange->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      });
    });
  }

  tcp::acceptor acceptor_;
  Routes routes_;
};

StatusServer::StatusServer(asio::io_context& io, const std::string& host, uint16_t port, Routes routes)
    : impl_(std::make_shared<Impl>(io, host, port, std::move(routes))) {
  impl_->accept();
}
StatusServer::~StatusServer() { impl_->stop(); }
uint16_t StatusServer::port() const { return impl_->port(); }

}  // namespace leaseproof::runtime
