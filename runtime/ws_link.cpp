#include "runtime/ws_link.hpp"

#include <deque>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url.hpp>
#include <fmt/format.h>

#include "runtime/clock.hpp"
#include "runtime/resume_wire.hpp"

namespace leaseproof::runtime {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

std::variant<WsUrl, std::string> parse_ws_url(std::string_view text) {
  const auto url = boost::urls::parse_uri(text);
  if (!url || url->scheme() != "ws" || !url->has_port() || url->port_number() == 0) {
    return fmt::format("'{}' is not ws://HOST:PORT/PATH (wss is not supported)", text);
  }
  WsUrl out;
  out.host = std::string{url->host()};
  if (out.host == "localhost") out.host = "127.0.0.1";
  boost::system::error_code ec;
  asio::ip::make_address(out.host, ec);
  if (ec) return fmt::format("'{}': host '{}' is not an IP address (or localhost)", text, out.host);
  out.port = url->port_number();
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

class WsLink::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, const WsUrl& url, std::string first, Handlers handlers)
      : ws_(io), url_(url), first_(std::move(first)), handlers_(std::move(handlers)) {}

  void start(Duration connect_timeout) {
    boost::system::error_code ec;
    const tcp::endpoint endpoint{asio::ip::make_address(url_.host, ec), url_.port};
    auto& layer = beast::get_lowest_layer(ws_);
    layer.expires_after(to_chrono(connect_timeout));
    layer.async_connect(endpoint, [self = shared_from_this()](beast::error_code error) {
      if (self->done_) return;
      if (error) return self->ended(1006);
      beast::error_code ignored;
      beast::get_lowest_layer(self->ws_).socket().set_option(tcp::no_delay(true), ignored);
      self->ws_.async_handshake(fmt::format("{}:{}", self->url_.host, self->url_.port), self->url_.target(),
                                [self](beast::error_code error2) {
        if (self->done_) return;
        if (error2) return self->ended(1006);
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
    });
  }

  void send(std::string text) {
    if (!open_ || done_) return;
    outbox_.push_back(std::move(text));
    write();
  }

  void close(uint16_t code) {
    if (done_) return;
    done_ = true;
    if (open_ && !writing_) {
      ws_.async_close(websocket::close_reason{code}, [self = shared_from_this()](beast::error_code) { self->shut(); });
    } else {
      shut();
    }
  }

  void drop() {
    if (done_) return;
    done_ = true;
    shut();
  }

  bool open() const { return open_ && !done_; }

 private:
  void read() {
    ws_.async_read(in_, [self = shared_from_this()](beast::error_code error, std::size_t) {
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
    ws_.async_write(asio::buffer(outbox_.front()), [self = shared_from_this()](beast::error_code error, std::size_t) {
      self->writing_ = false;
      self->outbox_.pop_front();
      if (self->done_) return;
      if (error) return self->ended(1006);
      self->write();
    });
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
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  websocket::stream<beast::tcp_stream> ws_;
  WsUrl url_;
  std::string first_;
  Handlers handlers_;
  beast::flat_buffer in_;
  std::deque<std::string> outbox_;
  bool open_ = false;
  bool writing_ = false;
  bool done_ = false;
};

WsLink::WsLink(asio::io_context& io, const WsUrl& url, std::string first, Duration connect_timeout, Handlers handlers)
    : impl_(std::make_shared<Impl>(io, url, std::move(first), std::move(handlers))) {
  impl_->start(connect_timeout);
}
WsLink::~WsLink() { impl_->drop(); }
void WsLink::send(std::string text) { impl_->send(std::move(text)); }
void WsLink::close(uint16_t code) { impl_->close(code); }
void WsLink::drop() { impl_->drop(); }
bool WsLink::open() const { return impl_->open(); }

}  // namespace leaseproof::runtime
