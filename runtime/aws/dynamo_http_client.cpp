#include "runtime/aws/dynamo_http_client.hpp"

#include <chrono>
#include <thread>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <chrono>
#include <ctime>
#include <deque>
#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/url/parse.hpp>
#include <fmt/format.h>

#include "base/assert.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;


// ---------------------------------------------------------------------------
// SHA-256 (FIPS 180-4) and HMAC (RFC 2104). Byte-at-a-time is plenty fast for
// request bodies of a few kilobytes.

// First 32 bits of the fractional parts of the square roots of the first 8
// primes (initial hash) and of the cube roots of the first 64 primes (rounds).
constexpr std::array<uint32_t, 8> sha256_initial = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};
constexpr std::array<uint32_t, 64> sha256_round_constants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  void update(std::string_view data) {
    for (char c : data) {
      push_byte(static_cast<uint8_t>(c));
    }
    message_bytes_ += data.size();
  }

  Sha256Digest finish() {
    const uint64_t message_bits = message_bytes_ * 8;
    push_byte(0x80);
    while (block_bytes_ != 56) {
      push_byte(0);
    }
    for (int shift = 56; shift >= 0; shift -= 8) {
      push_byte(static_cast<uint8_t>(message_bits >> shift));
    }
    LP_ASSERT_EQ(block_bytes_, size_t{0});
    Sha256Digest digest{};
    for (size_t i = 0; i < state_.size(); ++i) {
      for (size_t b = 0; b < 4; ++b) {
        digest[4 * i + b] = static_cast<uint8_t>(state_[i] >> (24 - 8 * b));
      }
    }
    return digest;
  }

 private:
  void push_byte(uint8_t byte) {
    block_[block_bytes_++] = byte;
    if (block_bytes_ == block_.size()) {
      compress();
      block_bytes_ = 0;
    }
  }

  void compress() {
    std::array<uint32_t, 64> w{};
    for (size_t i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block_[4 * i]} << 24) | (uint32_t{block_[4 * i + 1]} << 16) |
             (uint32_t{block_[4 * i + 2]} << 8) | uint32_t{block_[4 * i + 3]};
    }
    for (size_t i = 16; i < 64; ++i) {
      const uint32_t s0 = std::rotr(w[i - 15], 7) ^ std::rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = std::rotr(w[i - 2], 17) ^ std::rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    auto v = state_;  // a..h
    for (size_t i = 0; i < 64; ++i) {
      const uint32_t sum1 = std::rotr(v[4], 6) ^ std::rotr(v[4], 11) ^ std::rotr(v[4], 25);
      const uint32_t choose = (v[4] & v[5]) ^ (~v[4] & v[6]);
      const uint32_t t1 = v[7] + sum1 + choose + sha256_round_constants[i] + w[i];
      const uint32_t sum0 = std::rotr(v[0], 2) ^ std::rotr(v[0], 13) ^ std::rotr(v[0], 22);
      const uint32_t majority = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
      std::rotate(v.rbegin(), v.rbegin() + 1, v.rend());  // h=g, g=f, ..., b=a
      v[4] += t1;                                          // e = d + t1
      v[0] = t1 + sum0 + majority;
    }
    for (size_t i = 0; i < state_.size(); ++i) {
      state_[i] += v[i];
    }
  }

  std::array<uint32_t, 8> state_ = sha256_initial;
  std::array<uint8_t, 64> block_{};
  size_t block_bytes_ = 0;
  uint64_t message_bytes_ = 0;
};

Sha256Digest sha256(std::string_view data) {
  Sha256 hash;
  hash.update(data);
  return hash.finish();
}

std::string_view as_chars(const Sha256Digest& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto byte = static_cast<uint8_t>(c);
    hex.push_back(digits[byte >> 4]);
    hex.push_back(digits[byte & 0x0f]);
  }
  return hex;
}

Sha256Digest hmac_sha256(std::string_view key, std::string_view message) {
  constexpr size_t block_size = 64;
  std::string key_block(key);
  if (key_block.size() > block_size) {
    key_block = std::string(as_chars(sha256(key_block)));
  }
  key_block.resize(block_size, '\0');
  std::string inner_pad(block_size, '\0');
  std::string outer_pad(block_size, '\0');
  for (size_t i = 0; i < block_size; ++i) {
    inner_pad[i] = static_cast<char>(key_block[i] ^ 0x36);
    outer_pad[i] = static_cast<char>(key_block[i] ^ 0x5c);
  }
  Sha256 inner;
  inner.update(inner_pad);
  inner.update(message);
  const Sha256Digest inner_digest = inner.finish();
  Sha256 outer;
  outer.update(outer_pad);
  outer.update(as_chars(inner_digest));
  return outer.finish();
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// SigV4 canonical header value: trimmed, inner runs of spaces collapsed.
std::string canonical_header_value(std::string_view value) {
  std::string out;
  bool pending_space = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) {
      out.push_back(' ');
      pending_space = false;
    }
    out.push_back(c);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Endpoint and request helpers.

struct Endpoint {
  std::string host;       // for the resolver, IPv6 without brackets
  std::string port;       // "80" (http) or "443" (https) when the URL has none
  std::string authority;  // the Host header, as written in the URL
  bool tls = false;       // https://
};

// Returns the endpoint, or an error message.
std::variant<Endpoint, std::string> parse_endpoint(std::string_view url) {
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed) {
    return fmt::format("'{}' is not a URL: {}", url, parsed.error().message());
  }
  const auto& view = *parsed;
  const bool tls = view.scheme_id() == boost::urls::scheme::https;
  if (view.scheme_id() != boost::urls::scheme::http && !tls) {
    return fmt::format("'{}': expected an http:// or https:// URL", url);
  }
  if (view.host_address().empty() || view.has_userinfo()) {
    return fmt::format("'{}': expected http[s]://host[:port]", url);
  }
  if (!view.encoded_path().empty() && view.encoded_path() != "/") {
    return fmt::format("'{}': a path is not supported", url);
  }
  return Endpoint{
      .host = std::string(view.host_address()),
      .port = view.has_port() ? std::string(view.port()) : std::string(tls ? "443" : "80"),
      .authority = std::string(view.encoded_authority()),
      .tls = tls,
  };
}

// The operation name becomes part of a header: letters and digits only.
bool is_valid_operation(std::string_view operation) {
  return !operation.empty() && std::all_of(operation.begin(), operation.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
  });
}

// ISO 8601 basic format in UTC, as SigV4 wants: "20150830T123600Z".
std::string current_amz_date() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  const size_t length = std::strftime(text.data(), text.size(), "%Y%m%dT%H%M%SZ", &utc);
  LP_ASSERT_EQ(length, size_t{16});
  return std::string(text.data(), length);
}

// DynamoDB nests documents at most 32 levels deep, two JSON levels each on the
// wire ({"M": {...}}), inside a few levels of response. A deeper answer is not
// DynamoDB's, and every consumer of nlohmann::json (copy, dump, compare)
// recurses once per level: 100,000 levels overflow the stack.
constexpr int response_json_levels_max = 128;

// RFC 9110 15.2: a client must accept 1xx answers it did not ask for (we never
// send Expect: 100-continue) and go on waiting for the final one. Bounded so
// that a server sending only 1xx cannot hold a request beyond this count.
constexpr int interim_responses_max = 4;

bool is_interim(int http_status) { return http_status >= 100 && http_status < 200 && http_status != 101; }

// A TLS server that gets a plaintext request closes, or sends an alert record
// first (15 03 0N ...). Any TLS record begins with its type (0x14 to 0x17)
// and the major version 0x03; an HTTP answer begins with "HTTP/".
bool starts_like_tls_record(std::string_view bytes) {
  return bytes.size() >= 2 && bytes[0] >= '\x14' && bytes[0] <= '\x17' && bytes[1] == '\x03';
}

constexpr std::string_view tls_port_hint = "(if that port speaks TLS, use https://)";

struct ParsedBody {
  nlohmann::json json;  // discarded when the body is not JSON
  bool too_deep = false;
};

// Never throws. Containers beyond the depth bound are dropped while parsing,
// so a hostile body never builds a deep tree.
ParsedBody parse_body(std::string_view body) {
  ParsedBody parsed;
  if (body.empty()) {
    parsed.json = nlohmann::json::object();
    return parsed;
  }
  // `depth` counts the containers around the value; the top level is 0.
  auto within_depth = [&parsed](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                       event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= response_json_levels_max) {
      parsed.too_deep = true;
      return false;
    }
    return true;
  };
  parsed.json = nlohmann::json::parse(body, within_depth, /*allow_exceptions=*/false);
  return parsed;
}

// Why an HTTP answer is not DynamoDB's ("" when it is): DynamoDB answers with
// a JSON object, and every error it sends names its type in "__type". A
// proxy's or another server's page (a 404, an HTML error, an empty 502) is
// not an answer to the request: reported with its status and the start of
// its body, never taken for an empty success.
std::string not_dynamodb(const DynamoHttpResponse& response, std::string_view body, bool too_deep) {
  constexpr size_t excerpt_bytes_max = 200;
  std::string start;  // the body's first bytes on one line: runs of whitespace as one space
  for (const char c : body.substr(0, excerpt_bytes_max)) {
    const bool space = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    if (!space) start += c;
    else if (!start.empty() && start.back() != ' ') start += ' ';
  }
  const std::string excerpt = body.empty() ? std::string{"an empty body"}
                                           : fmt::format("'{}'{}", start, body.size() > excerpt_bytes_max ? "..." : "");
  if (too_deep) {
    return fmt::format("not a DynamoDB answer: HTTP {} with JSON nested more than {} levels deep: {}",
                       response.http_status, response_json_levels_max, excerpt);
  }
  if (response.body.is_discarded()) {
    return fmt::format("not a DynamoDB answer: HTTP {} with a body that is not JSON: {}", response.http_status, excerpt);
  }
  if (!response.body.is_object()) {
    return fmt::format("not a DynamoDB answer: HTTP {} with a JSON body that is not an object: {}",
                       response.http_status, excerpt);
  }
  if (response.http_status != 200 && response.error_type().empty()) {
    return fmt::format("not a DynamoDB answer: HTTP {} without an error type (\"__type\"): {}", response.http_status,
                       excerpt);
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------
// Public value types.

std::string DynamoHttpResponse::error_type() const {
  const auto it = body.find("__type");
  if (it == body.end() || !it->is_string()) {
    return {};
  }
  const auto& type = it->get_ref<const std::string&>();
  const size_t hash = type.rfind('#');
  return hash == std::string::npos ? type : type.substr(hash + 1);
}

std::string_view to_string(TransportErrorKind kind) {
  switch (kind) {
    case TransportErrorKind::invalid_endpoint: return "invalid_endpoint";
    case TransportErrorKind::invalid_request: return "invalid_request";
    case TransportErrorKind::resolve_failed: return "resolve_failed";
    case TransportErrorKind::connect_failed: return "connect_failed";
    case TransportErrorKind::tls_failed: return "tls_failed";
    case TransportErrorKind::timeout: return "timeout";
    case TransportErrorKind::connection_lost: return "connection_lost";
    case TransportErrorKind::bad_response: return "bad_response";
    case TransportErrorKind::queue_full: return "queue_full";
    case TransportErrorKind::client_closed: return "client_closed";
  }
  LP_UNREACHABLE("TransportErrorKind {}", static_cast<int>(kind));
}

const DynamoHttpResponse& DynamoHttpResult::response() const {
  LP_ASSERT_MSG(ok(), "no response: {} ({})", to_string(error().kind), error().detail);
  return std::get<DynamoHttpResponse>(value_);
}

const TransportError& DynamoHttpResult::error() const {
  LP_ASSERT(!ok());
  return std::get<TransportError>(value_);
}

std::string sha256_hex(std::string_view data) { return to_hex(as_chars(sha256(data))); }

std::string sigv4_authorization(const SigV4Request& request, const DynamoCredentials& credentials) {
  LP_ASSERT_EQ(request.amz_date.size(), size_t{16});
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& [name, value] : request.headers) {
    headers.emplace_back(lowercase(name), canonical_header_value(value));
  }
  // A repeated name is one header whose values are joined by commas in the
  // order given, never sorted (AWS's suite: get-header-value-order), hence a
  // stable sort on the name alone.
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& left, const auto& right) { return left.first < right.first; });
  std::string canonical_headers;
  std::string signed_headers;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const std::string& name = headers[i].first;
    if (i > 0 && headers[i - 1].first == name) {
      canonical_headers.back() = ',';  // the previous value's '\n'
      canonical_headers += headers[i].second + "\n";
      continue;
    }
    canonical_headers += fmt::format("{}:{}\n", name, headers[i].second);
    signed_headers += (signed_headers.empty() ? "" : ";") + name;
  }
  const std::string canonical_request =
      fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method, request.canonical_uri, request.canonical_query,
                  canonical_headers, signed_headers, sha256_hex(request.payload));
  const std::string_view date = request.amz_date.substr(0, 8);
  const std::string scope = fmt::format("{}/{}/{}/aws4_request", date, request.region, request.service);
  const std::string string_to_sign = fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", request.amz_date, scope,
                                                 sha256_hex(canonical_request));
  Sha256Digest key = hmac_sha256("AWS4" + credentials.secret_access_key, date);
  key = hmac_sha256(as_chars(key), request.region);
  key = hmac_sha256(as_chars(key), request.service);
  key = hmac_sha256(as_chars(key), "aws4_request");
  const std::string signature = to_hex(as_chars(hmac_sha256(as_chars(key), string_to_sign)));
  return fmt::format("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}",
                     credentials.access_key_id, scope, signed_headers, signature);
}

// ---------------------------------------------------------------------------
// The connection state machine. One request is active at a time; it moves
// through resolve -> connect (only without a usable connection) -> write ->
// read, with exactly one asynchronous operation outstanding, and ends in
// finish(), which hands the result over and starts the next queued request.

class DynamoHttpClient::Impl : public std::enable_shared_from_this<DynamoHttpClient::Impl> {
 public:
  Impl(asio::io_context& io, DynamoHttpClientOptions options)
      : io_(io), options_(std::move(options)), resolver_(io), plain_(io), timer_(io) {
    auto parsed = parse_endpoint(options_.endpoint_url);
    if (auto* endpoint = std::get_if<Endpoint>(&parsed)) {
      endpoint_ = std::move(*endpoint);
    } else {
      endpoint_error_ = std::get<std::string>(parsed);
    }
    if (endpoint_ && endpoint_->tls && options_.tls_context == nullptr) {
      auto context = make_tls_client_context({});
      if (auto* made = std::get_if<TlsContextPtr>(&context)) {
        options_.tls_context = std::move(*made);
      } else {
        endpoint_error_ = fmt::format("'{}': {}", options_.endpoint_url, std::get<std::string>(context));
        endpoint_.reset();
      }
    }
  }

  void submit(std::string operation, nlohmann::json request, DynamoHttpHandler handler) {
    LP_ASSERT(handler != nullptr);
    if (auto error = check_submission(operation)) {
      post_result(std::move(handler), std::move(*error));
      return;
    }
    std::string payload;
    try {
      payload = request.dump();
    } catch (const nlohmann::json::exception& encode_error) {  // invalid UTF-8 in a string
      post_result(std::move(handler),
                  TransportError{TransportErrorKind::invalid_request, encode_error.what()});
      return;
    }
    queue_.push_back(PendingRequest{std::move(operation), std::move(payload), std::move(handler)});
    start_next();
  }

  // The owning DynamoHttpClient is gone: fail everything, keep nothing open.
  void close() {
    closed_ = true;
    resolver_.cancel();
    timer_.cancel();
    close_connection();
    for (auto& pending : queue_) {
      post_result(std::move(pending.handler), TransportError{TransportErrorKind::client_closed, "client destroyed"});
    }
    queue_.clear();
  }

  std::size_t requests_pending() const { return queue_.size() + (active_ ? 1 : 0); }
  std::uint64_t connections_opened() const { return connections_opened_; }

 private:
  struct PendingRequest {
    std::string operation;
    std::string payload;
    DynamoHttpHandler handler;
  };
  enum class Phase { resolve, connect, handshake, write, read };

  std::optional<TransportError> check_submission(std::string_view operation) const {
    if (closed_) {
      return TransportError{TransportErrorKind::client_closed, "client destroyed"};
    }
    if (!endpoint_) {
      return TransportError{TransportErrorKind::invalid_endpoint, endpoint_error_};
    }
    if (!is_valid_operation(operation)) {
      return TransportError{TransportErrorKind::invalid_request, fmt::format("bad operation name '{}'", operation)};
    }
    if (queue_.size() >= options_.requests_queued_max) {
      return TransportError{TransportErrorKind::queue_full,
                            fmt::format("{} requests already queued", options_.requests_queued_max)};
    }
    return std::nullopt;
  }

  void post_result(DynamoHttpHandler handler, DynamoHttpResult result) {
    asio::post(io_, [handler = std::move(handler), result = std::move(result)]() mutable {
      handler(std::move(result));
    });
  }

  void start_next() {
    if (active_ || queue_.empty()) {
      return;
    }
    active_ = std::move(queue_.front());
    queue_.pop_front();
    timed_out_ = false;
    retried_ = false;
    prepare_request(*active_);
    arm_timer();
    begin_exchange();
  }

  void prepare_request(const PendingRequest& pending) {
    const std::string amz_date = current_amz_date();
    const AwsJsonProtocol& protocol = options_.protocol;
    const std::string target = fmt::format("{}{}", protocol.target_prefix, pending.operation);
    const DynamoCredentials credentials =
        options_.credentials_source ? options_.credentials_source() : options_.credentials;
    const std::string& token = credentials.session_token;
    SigV4Request signing{
        .method = "POST",
        .canonical_uri = "/",
        .canonical_query = "",
        .headers = {{"content-type", protocol.content_type},
                    {"host", endpoint_->authority},
                    {"x-amz-date", amz_date},
                    {"x-amz-target", target}},
        .payload = pending.payload,
        .amz_date = amz_date,
        .region = options_.region,
        .service = protocol.service,
    };
    if (!token.empty()) {
      signing.headers.emplace_back("x-amz-security-token", token);
    }
    request_ = {};
    request_.method(http::verb::post);
    request_.target("/");
    request_.version(11);
    request_.set(http::field::host, endpoint_->authority);
    request_.set(http::field::content_type, protocol.content_type);
    request_.set("X-Amz-Target", target);
    request_.set("X-Amz-Date", amz_date);
    if (!token.empty()) {
      request_.set("X-Amz-Security-Token", token);
    }
    request_.set(http::field::authorization, sigv4_authorization(signing, credentials));
    request_.keep_alive(true);
    request_.body() = pending.payload;
    request_.prepare_payload();
  }

  // One deadline for the whole request. On expiry it cancels whatever is
  // outstanding; that operation's handler then reports the timeout.
  void arm_timer() {
    timer_.expires_after(std::chrono::nanoseconds(options_.request_timeout.ns()));
    timer_.async_wait([self = shared_from_this(), generation = generation_](error_code ec) {
      if (ec || generation != self->generation_ || !self->active_) {
        return;  // cancelled, or a request that already finished
      }
      self->timed_out_ = true;
      self->resolver_.cancel();
      self->close_connection();
    });
  }

  void begin_exchange() {
    interim_responses_ = 0;
    const auto idle = std::chrono::steady_clock::now() - last_used_;
    if (connected_ && idle <= std::chrono::nanoseconds(options_.connection_idle_max.ns()) && !has_unread_bytes()) {
      LP_ASSERT_EQ(buffer_.size(), size_t{0});  // on_read closes a connection that left bytes over
      reused_connection_ = true;
      write();
      return;
    }
    close_connection();
    reused_connection_ = false;
    if (endpoint_->tls) {
      tls_.emplace(io_, *options_.tls_context);  // a fresh SSL object per connection
    }
    resolver_.async_resolve(endpoint_->host, endpoint_->port,
                            [self = shared_from_this()](error_code ec, tcp::resolver::results_type results) {
                              self->on_resolved(ec, results);
                            });
  }

  void on_resolved(error_code ec, const tcp::resolver::results_type& results) {
    if (ec) {
      fail(Phase::resolve, ec);
      return;
    }
    tcp_stream().async_connect(results, [self = shared_from_this()](error_code connect_ec, const tcp::endpoint&) {
      self->on_connected(connect_ec);
    });
  }

  void on_connected(error_code ec) {
    if (ec) {
      fail(Phase::connect, ec);
      return;
    }
    ++connections_opened_;
    error_code ignored;
    // Small request/response pairs: never let Nagle hold a segment back.
    tcp_stream().socket().set_option(tcp::no_delay(true), ignored);
    if (!tls_) {
      connected_ = true;
      write();
      return;
    }
    std::string problem;
    if (!prepare_tls_connection(tls_->native_handle(), endpoint_->host, problem)) {
      close_connection();
      finish(TransportError{TransportErrorKind::tls_failed, fmt::format("TLS with {}: {}", options_.endpoint_url, problem)});
      return;
    }
    tls_->async_handshake(asio::ssl::stream_base::client, [self = shared_from_this()](error_code handshake_ec) {
      if (handshake_ec) {
        self->fail(Phase::handshake, handshake_ec);
        return;
      }
      self->connected_ = true;
      self->write();
    });
  }


  beast::tcp_stream& tcp_stream() { return tls_ ? tls_->next_layer() : plain_; }

  void write() {
    with_stream(plain_, tls_, [this](auto& stream) {
      http::async_write(stream, request_, [self = shared_from_this()](error_code ec, std::size_t) {
        self->on_written(ec);
      });
    });
  }

  void on_written(error_code ec) {
    if (ec) {
      fail(Phase::write, ec);
      return;
    }
    read_response();
  }

  void read_response() {
    parser_.emplace();
    parser_->body_limit(options_.response_body_bytes_max);
    with_stream(plain_, tls_, [this](auto& stream) {
      http::async_read(stream, buffer_, *parser_, [self = shared_from_this()](error_code read_ec, std::size_t) {
        self->on_read(read_ec);
      });
    });
  }

  void on_read(error_code ec) {
    if (ec) {
      fail(Phase::read, ec);
      return;
    }
    const auto& message = parser_->get();
    const int http_status = static_cast<int>(message.result_int());
    if (is_interim(http_status)) {
      on_interim(http_status);
      return;
    }
    DynamoHttpResponse response{.http_status = http_status, .body = {}};
    const std::string& body = message.body();
    ParsedBody parsed = parse_body(body);
    response.body = std::move(parsed.json);
    last_used_ = std::chrono::steady_clock::now();
    // Bytes after the end of the message answer nothing we sent (a server whose
    // Content-Length was too small): the next request would be paired with them.
    if (!message.keep_alive() || buffer_.size() > 0) {
      close_connection();
    }
    if (std::string problem = not_dynamodb(response, body, parsed.too_deep); !problem.empty()) {
      close_connection();
      finish(TransportError{TransportErrorKind::bad_response, std::move(problem)});
      return;
    }
    finish(std::move(response));
  }

  void on_interim(int http_status) {
    ++interim_responses_;
    if (interim_responses_ > interim_responses_max) {
      close_connection();
      finish(TransportError{TransportErrorKind::bad_response,
                            fmt::format("more than {} interim answers (HTTP {}) without a final one",
                                        interim_responses_max, http_status)});
      return;
    }
    read_response();  // the final answer may already be in buffer_
  }

  // Unread bytes on an idle keep-alive connection answer nothing we sent.
  bool has_unread_bytes() {
    error_code ec;
    const std::size_t bytes = tcp_stream().socket().available(ec);
    return ec || bytes > 0;
  }

  // A server may close an idle keep-alive connection just as we reuse it; the
  // request then fails on write, or on read before any byte of a reply. It was
  // not processed, so one retry on a fresh connection is safe and hides the
  // race. Any other failure is reported: its outcome is unknown.
  bool is_stale_connection(Phase phase, error_code ec) const {
    if (!reused_connection_ || retried_ || timed_out_ || closed_) {
      return false;
    }
    if (phase == Phase::read && (interim_responses_ > 0 || (parser_ && parser_->got_some()))) {
      return false;  // the server answered something: it got the request
    }
    return (phase == Phase::write || phase == Phase::read) &&
           (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
            ec == asio::error::broken_pipe);
  }

  void fail(Phase phase, error_code ec) {
    if (is_stale_connection(phase, ec)) {
      close_connection();
      retried_ = true;
      begin_exchange();
      return;
    }
    TransportError error = describe_failure(phase, ec);  // before close_connection() clears buffer_
    close_connection();
    finish(std::move(error));
  }

  TransportError describe_failure(Phase phase, error_code ec) {  // not const: reads the TLS verdict
    if (closed_) {
      return TransportError{TransportErrorKind::client_closed, "client destroyed"};
    }
    if (timed_out_) {
      return TransportError{TransportErrorKind::timeout,
                            fmt::format("no answer within {}", format_duration(options_.request_timeout))};
    }
    switch (phase) {
      case Phase::resolve:
        return TransportError{TransportErrorKind::resolve_failed,
                              fmt::format("resolve {}: {}", endpoint_->host, ec.message())};
      case Phase::connect:
        return TransportError{TransportErrorKind::connect_failed,
                              fmt::format("connect {}: {}", endpoint_->authority, ec.message())};
      case Phase::handshake:
        return TransportError{TransportErrorKind::tls_failed,
                              fmt::format("TLS with {}: {}", options_.endpoint_url,
                                          describe_tls_failure(ec, tls_ ? tls_->native_handle() : nullptr))};
      case Phase::write: return TransportError{TransportErrorKind::connection_lost, "write: " + ec.message()};
      case Phase::read: {
        const std::string hint = tls_port_suspicion(ec);
        // Closed before the answer was complete (mid-headers, mid-body, a
        // Content-Length larger than what came): lost, not malformed.
        if (ec == http::error::partial_message) {
          return TransportError{TransportErrorKind::connection_lost, "read: " + ec.message() + hint};
        }
        if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
            ec != http::error::end_of_stream) {
          return TransportError{TransportErrorKind::bad_response, "read: " + ec.message() + hint};
        }
        return TransportError{TransportErrorKind::connection_lost, "read: " + ec.message() + hint};
      }
    }
    LP_UNREACHABLE("phase {}", static_cast<int>(phase));
  }

  // The words a failed read gets when the endpoint may be a TLS port given as
  // http:// ("" when not): the connection ended before any byte of an answer,
  // or what came begins like a TLS record. Only on a fresh plaintext
  // connection with no answer yet; a server that sent some HTTP (an interim
  // answer, part of a status line) and then died is no TLS port. Beast's
  // end_of_stream means that no byte of the answer arrived; the parser consumes
  // nothing of an unfinished or invalid status line, so buffer_ still holds
  // the first bytes the server sent. A reset counts too: a TLS server that
  // closes with our request still unread in its socket makes the kernel send
  // RST rather than FIN (what Python's ssl module does on a plaintext request).
  std::string tls_port_suspicion(error_code ec) const {
    if (tls_ || reused_connection_ || interim_responses_ > 0 || (parser_ && parser_->is_header_done())) {
      return {};
    }
    const bool nothing_received = buffer_.size() == 0 && !(parser_ && parser_->got_some());
    if (ec == http::error::end_of_stream || (ec == asio::error::connection_reset && nothing_received)) {
      return fmt::format(" from {} before any HTTP answer {}", options_.endpoint_url, tls_port_hint);
    }
    const auto first = static_cast<const char*>(buffer_.data().data());
    const std::string_view received(first, buffer_.size());
    if (!starts_like_tls_record(received)) {
      return {};
    }
    return fmt::format(" from {}: the answer begins like a TLS record ({:02x} {:02x}), not like HTTP {}",
                       options_.endpoint_url, static_cast<unsigned char>(received[0]),
                       static_cast<unsigned char>(received[1]), tls_port_hint);
  }

  void finish(DynamoHttpResult result) {
    LP_ASSERT(active_.has_value());
    timer_.cancel();
    ++generation_;  // a timer handler already queued must not touch the next request
    DynamoHttpHandler handler = std::move(active_->handler);
    active_.reset();
    parser_.reset();
    handler(std::move(result));  // may call submit() again, or destroy the client
    start_next();
  }

  void close_connection() {
    error_code ignored;
    tcp_stream().socket().close(ignored);  // no TLS close_notify: a request/response client owes none
    connected_ = false;
    buffer_.clear();
  }

  asio::io_context& io_;
  DynamoHttpClientOptions options_;
  std::optional<Endpoint> endpoint_;
  std::string endpoint_error_;
  tcp::resolver resolver_;
  beast::tcp_stream plain_;                                  // http://
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;  // https://: a new one per connection
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::deque<PendingRequest> queue_;
  std::optional<PendingRequest> active_;
  bool connected_ = false;
  bool reused_connection_ = false;
  bool retried_ = false;
  bool timed_out_ = false;
  bool closed_ = false;
  int interim_responses_ = 0;  // 1xx answers read for the current attempt
  std::uint64_t generation_ = 0;
  std::uint64_t connections_opened_ = 0;
  std::chrono::steady_clock::time_point last_used_{};
};

// ---------------------------------------------------------------------------

DynamoHttpClient::DynamoHttpClient(boost::asio::io_context& io, DynamoHttpClientOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

DynamoHttpClient::~DynamoHttpClient() { impl_->close(); }

void DynamoHttpClient::async_call(std::string operation, nlohmann::json request, DynamoHttpHandler handler) {
  impl_->submit(std::move(operation), std::move(request), std::move(handler));
}

std::size_t DynamoHttpClient::requests_pending() const { return impl_->requests_pending(); }

std::uint64_t DynamoHttpClient::connections_opened() const { return impl_->connections_opened(); }

BlockingDynamoHttpClient::BlockingDynamoHttpClient(DynamoHttpClientOptions options)
    : io_(std::make_unique<boost::asio::io_context>()),
      client_(std::make_unique<DynamoHttpClient>(*io_, std::move(options))) {}

BlockingDynamoHttpClient::~BlockingDynamoHttpClient() = default;

DynamoHttpResult BlockingDynamoHttpClient::call(std::string operation, nlohmann::json request) {
  std::optional<DynamoHttpResult> result;
  client_->async_call(std::move(operation), std::move(request),
                      [&result](DynamoHttpResult outcome) { result.emplace(std::move(outcome)); });
  io_->restart();
  // The request's own deadline bounds this loop: its timer keeps the
  // io_context busy until the handler has run.
  while (!result && io_->run_one() > 0) {
  }
  LP_ASSERT_MSG(result.has_value(), "io_context ran out of work before the request finished");
  return std::move(*result);
}

std::uint64_t BlockingDynamoHttpClient::connections_opened() const { return client_->connections_opened(); }


namespace {

// `member` of `object` is the string "ACTIVE". Reads nothing it has not
// checked: a DescribeTable answer comes from a server, whatever its shape.
bool is_active(const nlohmann::json& object, std::string_view member) {
  if (!object.is_object()) return false;
  const auto found = object.find(member);
  return found != object.end() && found->is_string() && found->get_ref<const std::string&>() == "ACTIVE";
}

// A DescribeTable answer of any shape; anything but the documented one
// ({"Table": {"TableStatus": ..., "GlobalSecondaryIndexes": [...]}}) is "not yet".
bool table_and_indexes_active(const nlohmann::json& body) {
  if (!body.is_object()) return false;
  const auto table = body.find("Table");
  if (table == body.end() || !is_active(*table, "TableStatus")) return false;
  const auto indexes = table->find("GlobalSecondaryIndexes");
  if (indexes == table->end() || indexes->is_null()) return true;
  if (!indexes->is_array()) return false;
  return std::all_of(indexes->begin(), indexes->end(),
                     [](const nlohmann::json& index) { return is_active(index, "IndexStatus"); });
}

}  // namespace

bool wait_until_table_active(BlockingDynamoHttpClient& client, const std::string& table, Duration timeout) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout.ns());
  for (;;) {
    const DynamoHttpResult result = client.call("DescribeTable", nlohmann::json{{"TableName", table}});
    if (result.ok() && result.response().http_status == 200 && table_and_indexes_active(result.response().body)) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace leaseproof::runtime
