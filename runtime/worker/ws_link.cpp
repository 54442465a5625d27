#include "runtime/worker/ws_link.hpp"

#include <deque>
#include <type_traits>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url.hpp>
#include <fmt/format.h>

#include "runtime/clock.hpp"
#include "runtime/hub/resume_wire.hpp"

namespace leaseproof::runtime {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

std::variant<WsUrl, std::string> parse_ws_url(std::string_view text) {
  const auto url = boost::urls::parse_uri(text);
  if (!url || (url->scheme() != "ws" && url->scheme() != "wss") || url->host().empty() || url->has_userinfo() ||
      (url->has_port() && url->port_number() == 0)) {
    return fmt::format("'{}' is not ws://HOST[:PORT]/PATH or wss://HOST[:PORT]/PATH", text);
  }
  WsUrl out;
  out.tls = url->scheme() == "wss";
  out.host = std::string{url->host_address()};
  out.port = url->has_port() ? url->port_number() : (out.tls ? 443 : 80);
  out.path = url->encoded_path().empty() ? "/" : std::string{url->encoded_path()};
  out.query = std::string{url->encoded_query()};
  return out;
}

void WsUrl::add_param(std::string_view name, std::string_view value) {
  boost::urls::url url;
  url.set_encoded_query(query);
  url.params().append({name, value});
  query = std::string{url.encoded_query()};
}

class WsLink::Impl {
 public:
  virtual ~Impl() = default;
  virtual void start(Duration connect_timeout) = 0;
  virtual void send(std::string text) = 0;
  virtual void close(uint16_t code) = 0;
  virtual void drop() = 0;
  virtual bool open() const = 0;
};

// NextLayer: beast::tcp_stream (ws://) or beast::ssl_stream<beast::tcp_stream> (wss://).
template <typename NextLayer>
class WsLink::LinkImpl final : public WsLink::Impl, public std::enable_shared_from_this<LinkImpl<NextLayer>> {
 public:
  static constexpr bool kTls = !std::is_same_v<NextLayer, beast::tcp_stream>;

  template <typename... Layer>
  LinkImpl(asio::io_context& io, const WsUrl& url, std::string first, Handlers handlers, Layer&... layer)
      : resolver_(io), ws_(io, layer...), url_(url), first_(std::move(first)), handlers_(std::move(handlers)) {}

  void start(Duration connect_timeout) override {
    beast::get_lowest_layer(ws_).expires_after(to_chrono(connect_timeout));
    resolver_.async_resolve(url_.host, std::to_string(url_.port),
                            [self = this->shared_from_this()](beast::error_code error, tcp::resolver::results_type found) {
      if (self->done_) return;
      if (error) return self->failed(fmt::format("resolve {}: {}", self->url_.host, error.message()));
      beast::get_lowest_layer(self->ws_).async_connect(found, [self](beast::error_code error2, const tcp::endpoint&) {
        if (self->done_) return;
        if (error2) return self->failed(fmt::format("connect {}: {}", self->authority(), error2.message()));
        beast::error_code ignored;
        beast::get_lowest_layer(self->ws_).socket().set_option(tcp::no_delay(true), ignored);
        self->secure();
      });
    });
  }

  void send(std::string text) override {
    if (!open_ || done_) return;
    outbox_.push_back(std::move(text));
    write();
  }

  void close(uint16_t code) override {
    if (done_) return;
    done_ = true;
    if (open_ && !writing_) {
      ws_.async_close(websocket::close_reason{code},
                      [self = this->shared_from_this()](beast::error_code) { self->shut(); });
    } else {
      shut();
    }
  }

  void drop() override {
    if (done_) return;
    done_ = true;
    shut();
  }

  bool open() const override { return open_ && !done_; }

  // Fails without connecting, from the io_context (never inline).
  void fail_later(std::string why) {
    asio::post(resolver_.get_executor(), [self = this->shared_from_this(), why = std::move(why)] {
      if (!self->done_) self->failed(why);
    });
  }

 private:
  std::string authority() const {
    return url_.host.find(':') == std::string::npos ? fmt::format("{}:{}", url_.host, url_.port)
                                                    : fmt::format("[{}]:{}", url_.host, url_.port);
  }

  // wss://: the TLS handshake, the host name checked; ws://: nothing to do.
  void secure() {
    if constexpr (kTls) {
      std::string problem;
      if (!prepare_tls_connection(ws_.next_layer().native_handle(), url_.host, problem)) return failed(problem);
      ws_.next_layer().async_handshake(asio::ssl::stream_base::client,
                                       [self = this->shared_from_this()](beast::error_code error) {
        if (self->done_) return;
        if (error) {
          return self->failed(fmt::format("TLS with wss://{}: {}", self->authority(),
                                          describe_tls_failure(error, self->ws_.next_layer().native_handle())));
        }
        self->handshake();
      });
    } else {
      handshake();
    }
  }

  void handshake() {
    ws_.async_handshake(authority(), url_.target(), [self = this->shared_from_this()](beast::error_code error) {
      if (self->done_) return;
      if (error) return self->failed(fmt::format("WebSocket handshake with {}: {}", self->authority(), error.message()));
      beast::get_lowest_layer(self->ws_).expires_never();
      websocket::stream_base::timeout timeout{};
      timeout.handshake_timeout = std::chrono::seconds(2);  // bounds the close handshake
      timeout.idle_timeout = websocket::stream_base::none();  // the core decides liveness
      timeout.keep_alive_pings = false;
      self->ws_.set_option(timeout);
      self->ws_.read_message_max(kPayloadBytesMax + 4096);
      self->ws_.text(true);
      self->open_ = true;
      self->send(std::move(self->first_));
      self->read();
    });
  }

  void read() {
    ws_.async_read(in_, [self = this->shared_from_this()](beast::error_code error, std::size_t) {
      if (self->done_) return;
      if (error) {
        uint16_t code = 1006;
        if (error == websocket::error::closed) code = self->ws_.reason().code != 0 ? self->ws_.reason().code : 1005;
        return self->ended(code);
      }
      const auto data = self->in_.cdata();
      const std::string text{static_cast<const char*>(data.data()), data.size()};
      self->in_.consume(self->in_.size());
      self->handlers_.on_text(text);
      if (!self->done_) self->read();
    });
  }

  void write() {
    if (writing_ || outbox_.empty()) return;
    writing_ = true;
    ws_.async_write(asio::buffer(outbox_.front()),
                    [self = this->shared_from_this()](beast::error_code error, std::size_t) {
      self->writing_ = false;
      self->outbox_.pop_front();
      if (self->done_) return;
      if (error) return self->ended(1006);
      self->write();
    });
  }

  void failed(std::string_view why) {
    if (handlers_.on_failed) handlers_.on_failed(why);
    ended(1006);
  }

  void ended(uint16_t code) {
    done_ = true;
    shut();
    auto on_closed = std::move(handlers_.on_closed);
    handlers_ = {};
    if (on_closed) on_closed(code);
  }

  void shut() {
    beast::error_code ignored;
    resolver_.cancel();
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  tcp::resolver resolver_;
  websocket::stream<NextLayer> ws_;
  WsUrl url_;
  std::string first_;
  Handlers handlers_;
  beast::flat_buffer in_;
  std::deque<std::string> outbox_;
  bool open_ = false;
  bool writing_ = false;
  bool done_ = false;
};

WsLink::WsLink(asio::io_context& io, const WsUrl& url, std::string first, Duration connect_timeout, Handlers handlers,
               TlsContextPtr tls) {
  if (url.tls) {
    std::string problem = "wss:// needs a TLS context";
    if (tls == nullptr) {
      auto made = make_tls_client_context({});
      if (auto* context = std::get_if<TlsContextPtr>(&made)) tls = std::move(*context);
      if (auto* error = std::get_if<std::string>(&made)) problem = *error;
    }
    if (tls == nullptr) {  // no trust store: the link fails, on the io_context like any failure
      auto link = std::make_shared<LinkImpl<beast::tcp_stream>>(io, url, std::move(first), std::move(handlers));
      link->fail_later(std::move(problem));
      impl_ = std::move(link);
      return;
    }
    impl_ = std::make_shared<LinkImpl<beast::ssl_stream<beast::tcp_stream>>>(io, url, std::move(first),
                                                                             std::move(handlers), *tls);
  } else {
    impl_ = std::make_shared<LinkImpl<beast::tcp_stream>>(io, url, std::move(first), std::move(handlers));
  }
  impl_->start(connect_timeout);
}
WsLink::~WsLink() { impl_->drop(); }
void WsLink::send(std::string text) { impl_->send(std::move(text)); }
void WsLink::close(uint16_t code) { impl_->close(code); }
void WsLink::drop() { impl_->drop(); }
bool WsLink::open() const { return impl_->open(); }

}  // namespace leaseproof::runtime
