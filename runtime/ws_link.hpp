#pragma once
// One outbound WebSocket connection of a resume client (a worker's stream):
// connect, send the subscribe, then text frames both ways until it closes.
// Single-threaded on the caller's io_context. The handlers run on it, never
// inline from a call; none runs after drop() or close().

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include <boost/asio/io_context.hpp>

#include "base/time.hpp"

namespace leaseproof::runtime {

// "ws://HOST:PORT/PATH?QUERY" with an IP address (or localhost) and a port;
// an error names what is wrong.
struct WsUrl {
  std::string host;
  uint16_t port = 0;
  std::string path = "/";
  std::string query;  // encoded, without '?'; may be empty

  std::string target() const { return query.empty() ? path : path + "?" + query; }
  // Appends name=value (value percent-encoded) to the query.
  void add_param(std::string_view name, std::string_view value);
};
std::variant<WsUrl, std::string> parse_ws_url(std::string_view text);

class WsLink {
 public:
  struct Handlers {
    std::function<void(std::string_view)> on_text;
    // The connection ended: the peer's close code, or 1006 when it dropped or
    // never opened. Called once.
    std::function<void(uint16_t)> on_closed;
  };
  // Starts connecting; `first` is sent as soon as the handshake is done.
  WsLink(boost::asio::io_context& io, const WsUrl& url, std::string first, Duration connect_timeout, Handlers handlers);
  ~WsLink();  // drops the connection
  WsLink(const WsLink&) = delete;
  WsLink& operator=(const WsLink&) = delete;

  void send(std::string text);       // dropped silently before the handshake is done or after the end
  void close(uint16_t code);         // a close handshake, then the socket closes; no handler runs after
  void drop();                       // the socket closes now; no handler runs after
  bool open() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace leaseproof::runtime
