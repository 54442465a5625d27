#pragma once
// A WebSocket over plain TCP or over TLS, chosen at run time: the hub with or
// without --tls-cert, a subscriber of a ws:// or a wss:// URL. Code that
// drives one writes each operation once, inside visit(), and the compiler
// instantiates it for both streams.
//
// (runtime/worker/ws_link.cpp, whose whole class is a template on the stream, needs
// none of this.)

#include <utility>
#include <variant>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

namespace leaseproof::runtime {

using TcpStream = boost::beast::tcp_stream;

// Beast's TLS stream with a teardown of its own (found by argument-dependent
// lookup, below). Beast's tears a WebSocket down with a TLS shutdown and
// reports that shutdown's error in place of the read's own: a peer that
// closes its socket after the close frame without a TLS close_notify (many
// do) turns the hub's "invalid UTF-8, closed 1007" into "stream truncated",
// and a subscriber's "the hub closed with 1012" into a dropped connection.
class TlsStream : public boost::beast::ssl_stream<boost::beast::tcp_stream> {
 public:
  using boost::beast::ssl_stream<boost::beast::tcp_stream>::ssl_stream;
};

// The teardown of a WebSocket over TlsStream: close_notify, then the socket
// closed, and success whatever the peer did: the WebSocket is over either
// way, and its close code is what the caller reports.
template <typename Handler>
void async_teardown(boost::beast::role_type, TlsStream& stream, Handler&& handler) {
  auto executor = boost::asio::get_associated_executor(handler, stream.get_executor());
  stream.async_shutdown(boost::asio::bind_executor(
      executor, [&stream, handler = std::forward<Handler>(handler)](boost::beast::error_code) mutable {
        boost::beast::error_code ignored;
        boost::beast::get_lowest_layer(stream).socket().close(ignored);
        std::move(handler)(boost::beast::error_code{});
      }));
}
inline void teardown(boost::beast::role_type, TlsStream& stream, boost::beast::error_code& ec) {
  boost::beast::error_code ignored;
  stream.shutdown(ignored);
  boost::beast::get_lowest_layer(stream).socket().close(ignored);
  ec = {};
}
using PlainWebSocket = boost::beast::websocket::stream<TcpStream>;
using TlsWebSocket = boost::beast::websocket::stream<TlsStream>;

class AnyWebSocket {
 public:
  // A server's side, from an accepted connection (TLS already handshaken).
  explicit AnyWebSocket(TcpStream stream) : ws_(std::in_place_type<PlainWebSocket>, std::move(stream)) {}
  explicit AnyWebSocket(TlsStream stream) : ws_(std::in_place_type<TlsWebSocket>, std::move(stream)) {}
  // A client's side, not yet connected: over TLS when `tls` is not null.
  AnyWebSocket(boost::asio::io_context& io, boost::asio::ssl::context* tls)
      : ws_(make(io, tls)) {}

  // Calls `operation` with the WebSocket stream, whichever it is.
  template <typename Operation>
  decltype(auto) visit(Operation&& operation) {
    return std::visit(std::forward<Operation>(operation), ws_);
  }

  // The TCP stream underneath (timeouts, connect, close).
  TcpStream& tcp() {
    return std::visit([](auto& ws) -> TcpStream& { return boost::beast::get_lowest_layer(ws); }, ws_);
  }
  TcpStream::executor_type get_executor() { return tcp().get_executor(); }
  // The TLS WebSocket (its next_layer() does the TLS handshake), null over
  // plain TCP.
  TlsWebSocket* tls() { return std::get_if<TlsWebSocket>(&ws_); }
  // Its OpenSSL connection (SSL*), for describe_tls_failure; null over TCP.
  void* native_tls() {
    TlsWebSocket* ws = tls();
    return ws == nullptr ? nullptr : ws->next_layer().native_handle();
  }

 private:
  using Variant = std::variant<PlainWebSocket, TlsWebSocket>;
  // Built in place (a prvalue from either branch): nothing is moved.
  static Variant make(boost::asio::io_context& io, boost::asio::ssl::context* tls) {
    if (tls == nullptr) return Variant{std::in_place_type<PlainWebSocket>, io};
    return Variant{std::in_place_type<TlsWebSocket>, io, *tls};
  }
  Variant ws_;
};

}  // namespace leaseproof::runtime
