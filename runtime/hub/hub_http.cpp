// The hub's HTTP side: shard 0 accepts each connection for a shard, and an
// HttpConnection serves /metrics, /healthz, /publish and /admin, or hands its
// stream to a Session on an upgrade (hub_shard.hpp says what the hub's files
// share).
#include <boost/url/parse.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/hub/hub_session.hpp"
#include "runtime/hub/hub_shard.hpp"

namespace leaseproof::runtime {

// One HTTP connection (over TLS when the hub has a certificate): reads
// requests until it sees an upgrade (then hands its stream to a Session) or
// the peer stops.
class HubServer::Impl::HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(std::weak_ptr<Impl> server, tcp::socket socket, std::unique_ptr<Slot> slot, asio::ssl::context* tls)
      : server_(std::move(server)), stream_(make_stream(std::move(socket), tls)), slot_(std::move(slot)) {}

  // TLS first when there is a certificate, bounded by `handshake_timeout`;
  // then the requests.
  void start(Duration handshake_timeout) {
    auto* tls = std::get_if<TlsStream>(&stream_);
    if (tls == nullptr) return read();
    beast::get_lowest_layer(*tls).expires_after(to_chrono(handshake_timeout));
    tls->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
      if (!ec) return self->read();
      if (auto server = self->server_.lock()) server->on_tls_failure(ec, self->peer());
    });
  }

  void read() {
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(kPayloadBytesMax);
    tcp_stream().expires_after(std::chrono::seconds(30));
    std::visit([this](auto& stream) {
      http::async_read(stream, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec) {
          if (ec == http::error::body_limit || ec == http::error::header_limit) {
            return self->reply(http::status::payload_too_large,
                               fmt::format(R"({{"error":"request larger than {} bytes"}})", kPayloadBytesMax), false);
          }
          return;  // the peer went away or sent garbage: drop the connection
        }
        self->on_request();
      });
    }, stream_);
  }

 private:
  using Stream = std::variant<TcpStream, TlsStream>;
  static Stream make_stream(tcp::socket socket, asio::ssl::context* tls) {
    if (tls == nullptr) return Stream{std::in_place_type<TcpStream>, std::move(socket)};
    return Stream{std::in_place_type<TlsStream>, std::move(socket), *tls};
  }
  TcpStream& tcp_stream() {
    return std::visit([](auto& stream) -> TcpStream& { return beast::get_lowest_layer(stream); }, stream_);
  }
  std::string peer() {
    beast::error_code ec;
    const tcp::endpoint endpoint = tcp_stream().socket().remote_endpoint(ec);
    return ec ? std::string{"a peer"} : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
  }

  void on_request() {
    auto server = server_.lock();
    if (!server) return;
    ++server->counters_.http_requests;
    http::request<http::string_body> request = parser_->release();
    if (websocket::is_upgrade(request)) {
      if (server->shutting_down_) return;
      const resume::SubscriberId id = server->next_id_;
      server->next_id_ += server->fleet_.size();
      auto session = std::visit(
          [&](auto& stream) {
            return std::make_shared<Session>(server_, server->io_, id, std::move(stream), slot_.release(),
                                             server->options_.hub.subscriber_queue_bytes_max);
          },
          stream_);
      server->sessions_.emplace(id, session);
      session->accept(std::move(request), server->options_.client_frame_bytes_max, server->options_.close_timeout,
                      server->options_.subscribe_timeout);
      return;
    }
    const bool keep_alive = request.keep_alive();
    const std::string_view target{request.target().data(), request.target().size()};
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/metrics" && request.method() == http::verb::get) {
      Fleet& fleet = server->fleet_;
      fleet.each_shard<ShardStats>(
          server->io_, [](Impl& shard) { return shard.stats(); },
          [self = shared_from_this(), &fleet, keep_alive](std::vector<ShardStats> shards) {
            self->reply(http::status::ok, fleet.metrics_text(shards), keep_alive, "text/plain; version=0.0.4");
          });
      return;
    }
    if (path == "/healthz" && request.method() == http::verb::get) {
      return reply(http::status::ok, "ok\n", keep_alive, "text/plain");
    }
    if (path == "/admin/close-all" && server->options_.admin && request.method() == http::verb::post) {
      const auto at = target.find("code=");
      const auto code = at == std::string_view::npos ? std::nullopt : parse_number(target.substr(at + 5));
      if (!code || (*code != 1001 && *code != 1012)) {
        return reply(http::status::bad_request, R"({"error":"code: expected 1001 or 1012"})", keep_alive);
      }
      server->fleet_.each_shard<std::size_t>(
          server->io_, [code = static_cast<uint16_t>(*code)](Impl& shard) { return shard.close_all(code); },
          [self = shared_from_this(), keep_alive](std::vector<std::size_t> closed) {
            std::size_t total = 0;
            for (const std::size_t n : closed) total += n;
            self->reply(http::status::ok, fmt::format(R"({{"closed":{}}})", total), keep_alive);
          });
      return;
    }
    if (path == "/publish") {
      if (request.method() != http::verb::post) {
        return reply(http::status::method_not_allowed, R"({"error":"POST /publish?channel=C"})", keep_alive);
      }
      return publish(*server, target, request.body(), keep_alive);
    }
    reply(http::status::not_found, R"({"error":"not found; try /metrics, /healthz, POST /publish?channel=C"})",
          keep_alive);
  }

  void publish(Impl& server, std::string_view target, const std::string& body, bool keep_alive) {
    auto bad = [&](std::string why) {
      reply(http::status::bad_request, nlohmann::json{{"error", std::move(why)}}.dump(), keep_alive);
    };
    const auto url = boost::urls::parse_origin_form(target);
    if (!url) return bad("the request target is not a valid URL path and query");
    std::optional<std::string> channel;
    std::optional<uint64_t> count, size;
    for (const auto& param : url->params()) {
      auto whole = [&](uint64_t max) -> std::optional<uint64_t> {
        const auto number = parse_number(param.value);
        if (!number || *number < 0 || *number > static_cast<double>(max) || *number != static_cast<uint64_t>(*number)) {
          return std::nullopt;
        }
        return static_cast<uint64_t>(*number);
      };
      if (param.key == "channel") {
        channel = param.value;
      } else if (param.key == "count") {
        if (!(count = whole(100'000)) || *count == 0) return bad("count: expected a whole number in 1..100000");
      } else if (param.key == "size") {
        if (!(size = whole(kPayloadBytesMax))) return bad(fmt::format("size: expected a whole number in 0..{}", kPayloadBytesMax));
      } else {
        return bad(fmt::format("{}: unknown parameter; allowed: channel, count, size", std::string{param.key}));
      }
    }
    if (!channel) return bad("channel: missing (POST /publish?channel=C)");
    if (count.has_value() != size.has_value()) return bad("count and size go together (synthetic messages)");
    if (count && !body.empty()) return bad("a synthetic publish (count, size) takes no body");
    if (server.shutting_down_) return reply(http::status::service_unavailable, R"({"error":"shutting down"})", false);
    if (!server.hub_) return reply(http::status::service_unavailable, R"({"error":"not serving yet"})", false);
    // Reply once the last message has its number (at once without a shared
    // store; after the store's answers with one, which come in order).
    struct Progress {
      uint64_t left = 0;
      int64_t first = 0, last = 0;
    };
    auto progress = std::make_shared<Progress>(Progress{count.value_or(1)});
    const uint64_t epoch = server.hub_->epoch();
    auto on_seq = [self = shared_from_this(), progress, channel = *channel, epoch, keep_alive](int64_t seq) {
      if (progress->first == 0) progress->first = seq;
      progress->last = seq;
      if (--progress->left > 0) return;
      self->reply(http::status::ok,
                  nlohmann::json{{"channel", channel}, {"epoch", epoch}, {"first_seq", progress->first},
                                 {"last_seq", progress->last}}
                      .dump(),
                  keep_alive);
    };
    std::string error;
    const uint64_t n = progress->left;
    for (uint64_t i = 0; i < n; ++i) {
      const std::string payload = count ? synthetic_payload(static_cast<uint32_t>(*size), wall_now_ns()) : body;
      if (!server.fleet_.publish(*channel, payload, &error, on_seq)) return bad(error);  // the first one: nothing went out
    }
  }

  void reply(http::status status, std::string body, bool keep_alive,
             const char* content_type = "application/json") {
    auto response = std::make_shared<http::response<http::string_body>>(status, 11);
    response->set(http::field::content_type, content_type);
    response->set(http::field::server, "leaseproof-hub");
    response->keep_alive(keep_alive);
    response->body() = std::move(body);
    response->prepare_payload();
    std::visit([&](auto& stream) {
      http::async_write(stream, *response, [self = shared_from_this(), response](beast::error_code ec, std::size_t) {
        if (ec || !response->keep_alive()) return self->finish();
        self->read();
      });
    }, stream_);
  }

  // The last answer is out: TLS says goodbye (close_notify, bounded by the
  // read's 30 s expiry), then the sending side of the socket closes.
  void finish() {
    auto shut = [self = shared_from_this()] {
      beast::error_code ignored;
      self->tcp_stream().socket().shutdown(tcp::socket::shutdown_send, ignored);
    };
    if (auto* tls = std::get_if<TlsStream>(&stream_)) {
      return tls->async_shutdown([shut](beast::error_code) { shut(); });
    }
    shut();
  }

  std::weak_ptr<Impl> server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<Slot> slot_;
};

// Shard 0's: each connection goes to the shards in turn, its socket made on
// that shard's io_context and handed over through its queue.
void HubServer::Impl::accept() {
  const std::size_t k = next_shard_++ % fleet_.size();
  acceptor_.async_accept(fleet_.io(k), [self = shared_from_this(), k](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
    if (!ec) {
      if (k == 0) {
        self->on_accepted(std::move(socket));
      } else {
        asio::post(self->fleet_.io(k), [shard = self->fleet_.shard_ptr(k), socket = std::move(socket)]() mutable {
          shard->on_accepted(std::move(socket));
        });
      }
    }
    self->accept();
  });
}

void HubServer::Impl::on_accepted(tcp::socket socket) {
  ++counters_.accepted;
  if (*fleet_.open() >= options_.connections_max || shutting_down_) {
    ++counters_.refused;
    return;  // the socket closes as it goes out of scope
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto connection = std::make_shared<HttpConnection>(weak_from_this(), std::move(socket), std::make_unique<Slot>(fleet_.open()),
                                                     options_.tls.get());
  connection->start(options_.subscribe_timeout);
}

}  // namespace leaseproof::runtime
