// One HTTP exchange of a credential source, plain or TLS, bounded in time
// and size (HttpFetch), and the base of the sources that ask a server
// (credentials_internal.hpp says what the chain's files share).
#include <algorithm>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>
#include <fmt/format.h>

#include "runtime/clock.hpp"
#include "runtime/aws/credentials_internal.hpp"

namespace leaseproof::runtime::credentials_internal {

namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using boost::system::error_code;

std::variant<HttpRequest, std::string> parse_http_url(const std::string& url, bool https_allowed) {
  const auto parsed = boost::urls::parse_uri(url);
  if (!parsed) return fmt::format("'{}' is not a URL: {}", url, parsed.error().message());
  const auto& view = *parsed;
  const bool tls = view.scheme_id() == boost::urls::scheme::https;
  if (tls && !https_allowed) {
    return fmt::format("'{}': https is not supported here (plain http to the addresses AWS serves it on)", url);
  }
  if (view.scheme_id() != boost::urls::scheme::http && !tls) {
    return fmt::format("'{}': expected an http{}:// URL", url, https_allowed ? "[s]" : "");
  }
  if (view.host_address().empty() || view.has_userinfo()) return fmt::format("'{}': expected http://host[:port]/path", url);
  std::string target = view.encoded_path().empty() ? std::string("/") : std::string(view.encoded_path());
  if (view.has_query()) target += "?" + std::string(view.encoded_query());
  HttpRequest request;
  request.url = url;
  request.host = std::string(view.host_address());
  request.port = view.has_port() ? std::string(view.port()) : std::string(tls ? "443" : "80");
  request.authority = std::string(view.encoded_authority());
  request.target = std::move(target);
  request.tls = tls;
  return request;
}

namespace {

// Loopback, the ECS task metadata address, or the EKS Pod Identity addresses.
bool is_allowed_container_address(const asio::ip::address& address) {
  if (address.is_loopback()) return true;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return is_allowed_container_address(asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()));
  }
  error_code ignored;
  return address == asio::ip::make_address("169.254.170.2", ignored) ||
         address == asio::ip::make_address("169.254.170.23", ignored) ||
         address == asio::ip::make_address("fd00:ec2::23", ignored);
}

}  // namespace

// ---------------------------------------------------------------------------
// One HTTP exchange, plain or TLS, bounded in time and size. The handler runs
// exactly once, from a completion handler (never inline from start), unless
// cancel() comes first. Failures are messages; the caller says whose.

class HttpFetch : public std::enable_shared_from_this<HttpFetch> {
 public:
  using Handler = std::function<void(HttpOutcome)>;

  HttpFetch(asio::io_context& io, HttpRequest request, Duration timeout, std::size_t response_bytes_max,
            const TlsContextPtr& tls, Handler handler)
      : resolver_(io), plain_(io), timer_(io), request_(std::move(request)), timeout_(timeout),
        response_bytes_max_(response_bytes_max), handler_(std::move(handler)) {
    if (request_.tls) {
      if (tls) {
        tls_.emplace(io, *tls);
      } else if (auto made = make_tls_client_context({}); std::holds_alternative<TlsContextPtr>(made)) {
        tls_.emplace(io, *std::get<TlsContextPtr>(made));
      }
    }
  }

  void start() {
    if (request_.tls && !tls_) {
      asio::post(resolver_.get_executor(), [self = shared_from_this()] { self->fail("no TLS context (the system's store)"); });
      return;
    }
    timer_.expires_after(to_chrono(timeout_));
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->fail(fmt::format("no answer within {}", self->timeout_));
    });
    resolver_.async_resolve(request_.host, request_.port,
                            [self = shared_from_this()](error_code ec, const tcp::resolver::results_type& results) {
                              self->on_resolved(ec, results);
                            });
  }

  // The handler will not run.
  void cancel() {
    handler_ = nullptr;
    fail("cancelled");
  }

 private:
  tcp::socket& socket() { return tls_ ? tls_->next_layer() : plain_; }

  void on_resolved(error_code ec, const tcp::resolver::results_type& results) {
    if (done_) return;
    if (ec) return fail(fmt::format("cannot resolve '{}': {}", request_.host, ec.message()));
    if (request_.check_addresses) {
      for (const auto& entry : results) {
        if (!is_allowed_container_address(entry.endpoint().address())) {
          return fail(fmt::format(
              "AWS_CONTAINER_CREDENTIALS_FULL_URI host '{}' is {}, neither loopback nor an ECS/EKS credentials address "
              "(plain http is allowed to those only)",
              request_.host, entry.endpoint().address().to_string()));
        }
      }
    }
    asio::async_connect(socket(), results, [self = shared_from_this()](error_code connect_ec, const tcp::endpoint&) {
      self->on_connected(connect_ec);
    });
  }

  void on_connected(error_code ec) {
    if (done_) return;
    if (ec) return fail("cannot connect: " + ec.message());
    if (!tls_) return send();
    std::string problem;
    if (!prepare_tls_connection(tls_->native_handle(), request_.host, problem)) return fail(problem);
    tls_->async_handshake(asio::ssl::stream_base::client, [self = shared_from_this()](error_code handshake_ec) {
      if (self->done_) return;
      if (handshake_ec) {
        return self->fail("TLS: " + describe_tls_failure(handshake_ec, self->tls_->native_handle()));
      }
      self->send();
    });
  }

  void send() {
    http_request_.method(request_.method);
    http_request_.target(request_.target);
    http_request_.version(11);
    http_request_.set(http::field::host, request_.authority);
    http_request_.set(http::field::accept, "application/json");
    http_request_.set(http::field::user_agent, "leaseproof");
    if (!request_.authorization.empty()) http_request_.set(http::field::authorization, request_.authorization);
    for (const auto& [name, value] : request_.headers) http_request_.set(name, value);
    if (!request_.body.empty()) http_request_.set(http::field::content_type, request_.content_type);
    http_request_.body() = request_.body;
    http_request_.keep_alive(false);
    http_request_.prepare_payload();
    with_stream(plain_, tls_, [this](auto& stream) {
      http::async_write(stream, http_request_, [self = shared_from_this()](error_code write_ec, std::size_t) {
        self->on_written(write_ec);
      });
    });
  }

  void on_written(error_code ec) {
    if (done_) return;
    if (ec) return fail("cannot send the request: " + ec.message());
    parser_.header_limit(static_cast<std::uint32_t>(response_header_bytes_max));
    parser_.body_limit(response_bytes_max_);
    with_stream(plain_, tls_, [this](auto& stream) {
      http::async_read(stream, buffer_, parser_, [self = shared_from_this()](error_code read_ec, std::size_t) {
        self->on_read(read_ec);
      });
    });
  }

  void on_read(error_code ec) {
    if (done_) return;
    if (ec == http::error::body_limit) {
      return fail(fmt::format("answer larger than {} bytes", response_bytes_max_));
    }
    // A TLS server may close without close_notify after a Connection: close answer.
    if (ec && !(ec == asio::ssl::error::stream_truncated && parser_.is_done())) {
      return fail("no complete HTTP answer: " + ec.message());
    }
    const auto& message = parser_.get();
    finish(HttpAnswer{static_cast<int>(message.result_int()), message.body()});
  }

  void fail(std::string what) { finish(std::move(what)); }

  void finish(HttpOutcome outcome) {
    if (done_) return;
    done_ = true;
    error_code ignored;
    timer_.cancel();
    resolver_.cancel();
    socket().close(ignored);
    if (handler_) std::exchange(handler_, nullptr)(std::move(outcome));
  }

  tcp::resolver resolver_;
  tcp::socket plain_;
  std::optional<asio::ssl::stream<tcp::socket>> tls_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> http_request_;
  http::response_parser<http::string_body> parser_;
  HttpRequest request_;
  Duration timeout_;
  std::size_t response_bytes_max_;
  Handler handler_;
  bool done_ = false;
};

void SourceFetchBase::cancel() {
  handler_ = nullptr;
  if (step_) std::exchange(step_, nullptr)->cancel();
}

void SourceFetchBase::fetch(HttpRequest request, Duration timeout, std::function<void(HttpOutcome)> next) {
  step_ = std::make_shared<HttpFetch>(io_, std::move(request), timeout, response_bytes_max_, tls_,
                                      [next = std::move(next)](HttpOutcome outcome) { next(std::move(outcome)); });
  step_->start();
}

void SourceFetchBase::finish(SourceOutcome outcome) {
  step_.reset();
  if (handler_) std::exchange(handler_, nullptr)(std::move(outcome));
}

}  // namespace leaseproof::runtime::credentials_internal
