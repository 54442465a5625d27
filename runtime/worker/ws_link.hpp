#pragma once
// One outbound WebSocket connection of a resume client (a worker's stream):
// resolve, connect, TLS for wss:// (runtime/aws/tls.hpp: the host name checked
// against the certificate), send the subscribe, then text frames both ways
// until it closes. Single-threaded on the caller's io_context. The handlers
// run on it, never inline from a call; none runs after drop() or close().

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include <boost/asio/io_context.hpp>

#include "base/time.hpp"
#include "runtime/aws/tls.hpp"

namespace leaseproof::runtime {

// "ws://HOST[:PORT]/PATH?QUERY" or "wss://...": HOST a name or an address,
// PORT 80 (ws) or 443 (wss) when absent; an error names what is wrong.
struct WsUrl {
  bool tls = false;  // wss://
  std::string host;  // as written, IPv6 without brackets; "localhost" kept (the certificate names it)
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
    // Optional: why a connection never opened (resolve, connect, TLS or
    // WebSocket handshake), just before on_closed(1006).
    std::function<void(std::string_view)> on_failed;
  };
  // Starts connecting; `first` is sent as soon as the handshake is done. A
  // wss:// URL needs `tls` (make_tls_client_context); null: one trusting the
  // system store.
  WsLink(boost::asio::io_context& io, const WsUrl& url, std::string first, Duration connect_timeout, Handlers handlers,
         TlsContextPtr tls = nullptr);
  ~WsLink();  // drops the connection
  WsLink(const WsLink&) = delete;
  WsLink& operator=(const WsLink&) = delete;

  void send(std::string text);       // dropped silently before the handshake is done or after the end
  void close(uint16_t code);         // a close handshake, then the socket closes; no handler runs after
  void drop();                       // the socket closes now; no handler runs after
  bool open() const;

 private:
  class Impl;  // plain or TLS, behind one interface
  template <typename NextLayer>
  class LinkImpl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace leaseproof::runtime
