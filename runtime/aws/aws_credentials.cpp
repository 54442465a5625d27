#include "runtime/aws/aws_credentials.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

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
#include <nlohmann/json.hpp>

#include "base/assert.hpp"
#include "runtime/clock.hpp"
#include "runtime/os_random.hpp"

extern char** environ;  // POSIX: the process environment

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr std::string_view default_region = "us-east-1";
constexpr std::size_t token_file_bytes_max = 16 * 1024;
constexpr std::size_t response_header_bytes_max = 16 * 1024;
constexpr int response_json_levels_max = 8;  // the answer is one flat object
constexpr std::size_t excerpt_bytes_max = 200;

// ---------------------------------------------------------------------------
// Small text helpers.

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return lower;
}

// The start of a body on one line, for error messages.
std::string excerpt(std::string_view body) {
  std::string start;
  for (const char c : body.substr(0, excerpt_bytes_max)) {
    if (!is_space(c)) start += c;
    else if (!start.empty() && start.back() != ' ') start += ' ';
  }
  if (body.size() > excerpt_bytes_max) start += "...";
  return start.empty() ? "(empty body)" : "'" + start + "'";
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (const auto& part : parts) {
    if (!joined.empty()) joined += separator;
    joined += part;
  }
  return joined;
}

std::string env_value(const Environment& env, std::string_view name) {
  const auto it = env.find(name);
  return it == env.end() ? std::string{} : it->second;
}

Environment environment_of(const CredentialsChainOptions& options) {
  return options.environment ? *options.environment : process_environment();
}

int64_t wall_now(const CredentialsChainOptions& options) {
  return options.wall_clock_ns ? options.wall_clock_ns() : wall_now_ns();
}

// ---------------------------------------------------------------------------
// Files.

struct FileText {
  enum class Status { ok, missing, failed };
  Status status = Status::missing;
  std::string text;     // when ok
  std::string problem;  // when failed
};

FileText read_small_file(const std::string& path, std::size_t bytes_max) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return {FileText::Status::missing, {}, {}};
  if (!std::filesystem::is_regular_file(status)) return {FileText::Status::failed, {}, "not a regular file"};
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return {FileText::Status::failed, {}, ec.message()};
  if (size > bytes_max) {
    return {FileText::Status::failed, {}, fmt::format("larger than {} bytes", bytes_max)};
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return {FileText::Status::failed, {}, "cannot be read"};
  return {FileText::Status::ok, text.str(), {}};
}

// ---------------------------------------------------------------------------
// Shared config and credentials files (INI).

using ProfileKeys = std::map<std::string, std::string>;
using Profiles = std::map<std::string, ProfileKeys>;

// The profile a section header names; nullopt for sections that hold no
// profile ([sso-session x], [services x], or a bare [x] in the config file).
std::optional<std::string> section_profile(std::string_view inside, bool config_file) {
  inside = trim(inside);
  if (inside.empty()) return std::nullopt;
  if (!config_file || inside == "default") return std::string(inside);
  constexpr std::string_view prefix = "profile";
  if (inside.size() > prefix.size() && inside.starts_with(prefix) && is_space(inside[prefix.size()])) {
    const auto name = trim(inside.substr(prefix.size()));
    if (!name.empty()) return std::string(name);
  }
  return std::nullopt;
}

// A '#' or ';' after whitespace starts a comment.
std::string_view strip_inline_comment(std::string_view text) {
  for (std::size_t i = 1; i < text.size(); ++i) {
    if ((text[i] == '#' || text[i] == ';') && is_space(text[i - 1])) return text.substr(0, i);
  }
  return text;
}

// Lines are "[section]", "key = value", comments ('#' or ';' first) or
// blank. An indented line after a property continues it (a sub-property such
// as "s3 =\n  max_concurrent_requests = 10") and is skipped. Keys are
// case-insensitive; a later value for the same profile and key wins.
Profiles parse_profiles(std::string_view text, bool config_file) {
  Profiles profiles;
  // A UTF-8 byte order mark (editors on Windows write one) is not part of the
  // first line: left there, "[default]" would not start with '['.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  ProfileKeys* section = nullptr;  // null outside a profile section
  bool after_property = false;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const std::string_view trimmed = trim(line);
    if (trimmed.empty() || trimmed.front() == '#' || trimmed.front() == ';') continue;
    if (is_space(line.front()) && after_property) continue;
    after_property = false;
    if (trimmed.front() == '[') {
      const auto close = trimmed.find(']');
      const auto name = close == std::string_view::npos ? std::nullopt
                                                         : section_profile(trimmed.substr(1, close - 1), config_file);
      section = name ? &profiles[*name] : nullptr;
      continue;
    }
    const auto equals = trimmed.find('=');
    if (equals == std::string_view::npos || section == nullptr) continue;
    const auto key = lowercase(trim(trimmed.substr(0, equals)));
    if (key.empty()) continue;
    (*section)[key] = std::string(trim(strip_inline_comment(trimmed.substr(equals + 1))));
    after_property = true;
  }
  return profiles;
}

struct SharedFile {
  std::string path;  // empty when neither its variable nor HOME is set
  bool exists = false;
  std::string problem;  // the file exists but cannot be used
  Profiles profiles;

  std::string describe(std::string_view variable, std::string_view under_home) const {
    if (path.empty()) return fmt::format("~/{} (neither {} nor HOME is set)", under_home, variable);
    return exists ? path : path + " (no such file)";
  }
};

std::string shared_file_path(const Environment& env, std::string_view variable, std::string_view under_home) {
  const std::string home = env_value(env, "HOME");
  std::string path = env_value(env, variable);
  if (path.empty()) return home.empty() ? std::string{} : home + "/" + std::string(under_home);
  if (path.starts_with("~/") && !home.empty()) return home + path.substr(1);
  return path;
}

constexpr std::string_view credentials_variable = "AWS_SHARED_CREDENTIALS_FILE";
constexpr std::string_view credentials_under_home = ".aws/credentials";
constexpr std::string_view config_variable = "AWS_CONFIG_FILE";
constexpr std::string_view config_under_home = ".aws/config";

SharedFile load_shared_file(const Environment& env, bool config_file, const CredentialsChainOptions& options) {
  SharedFile file;
  file.path = config_file ? shared_file_path(env, config_variable, config_under_home)
                          : shared_file_path(env, credentials_variable, credentials_under_home);
  if (file.path.empty()) return file;
  FileText read = read_small_file(file.path, options.profile_file_bytes_max);
  file.exists = read.status != FileText::Status::missing;
  if (read.status == FileText::Status::failed) file.problem = std::move(read.problem);
  if (read.status == FileText::Status::ok) file.profiles = parse_profiles(read.text, config_file);
  return file;
}

struct ProfileChoice {
  std::string name;
  bool named = false;  // by the option or AWS_PROFILE: then it must exist
};

ProfileChoice choose_profile(const Environment& env, const CredentialsChainOptions& options) {
  if (!options.profile.empty()) return {options.profile, true};
  std::string from_env = env_value(env, "AWS_PROFILE");
  if (!from_env.empty()) return {std::move(from_env), true};
  return {"default", false};
}

// ---------------------------------------------------------------------------
// The sources. Each finds credentials, finds nothing (saying where it looked,
// for the final error), or fails.

struct NotFound {
  std::string tried;
};
using SourceOutcome = std::variant<ResolvedCredentials, NotFound, CredentialsError>;

SourceOutcome from_environment(const Environment& env) {
  const std::string key_id = env_value(env, "AWS_ACCESS_KEY_ID");
  const std::string secret = env_value(env, "AWS_SECRET_ACCESS_KEY");
  if (key_id.empty() && secret.empty()) return NotFound{"environment (AWS_ACCESS_KEY_ID not set)"};
  if (secret.empty()) {
    return CredentialsError{"environment: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"};
  }
  if (key_id.empty()) {
    return CredentialsError{"environment: AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"};
  }
  return ResolvedCredentials{
      .credentials = {.access_key_id = key_id,
                      .secret_access_key = secret,
                      .session_token = env_value(env, "AWS_SESSION_TOKEN")},
      .origin = CredentialsOrigin::environment,
      .description = "environment",
      .expiration_wall_ns = std::nullopt,
  };
}

SourceOutcome from_profile(const Environment& env, const CredentialsChainOptions& options) {
  const ProfileChoice choice = choose_profile(env, options);
  const SharedFile credentials_file = load_shared_file(env, false, options);
  const SharedFile config_file = load_shared_file(env, true, options);
  bool profile_exists = false;
  // The credentials file first: for the same profile it wins. Key, secret and
  // token come from one file, never mixed.
  for (const SharedFile* file : {&credentials_file, &config_file}) {
    if (!file->problem.empty()) {
      return CredentialsError{fmt::format("shared file {}: {}", file->path, file->problem)};
    }
    const auto profile = file->profiles.find(choice.name);
    if (profile == file->profiles.end()) continue;
    profile_exists = true;
    const auto& keys = profile->second;
    const auto value = [&keys](const char* key) {
      const auto it = keys.find(key);
      return it == keys.end() ? std::string{} : it->second;
    };
    if (value("aws_access_key_id").empty()) continue;
    if (value("aws_secret_access_key").empty()) {
      return CredentialsError{fmt::format("profile '{}' in {} has aws_access_key_id but no aws_secret_access_key",
                                          choice.name, file->path)};
    }
    return ResolvedCredentials{
        .credentials = {.access_key_id = value("aws_access_key_id"),
                        .secret_access_key = value("aws_secret_access_key"),
                        .session_token = value("aws_session_token")},
        .origin = CredentialsOrigin::profile,
        .description = fmt::format("profile '{}' in {}", choice.name, file->path),
        .expiration_wall_ns = std::nullopt,
    };
  }
  const std::string files = fmt::format("{} or {}", credentials_file.describe(credentials_variable, credentials_under_home),
                                        config_file.describe(config_variable, config_under_home));
  if (!profile_exists && choice.named) {
    return CredentialsError{fmt::format("profile '{}' not found in {}", choice.name, files)};
  }
  if (!profile_exists) return NotFound{fmt::format("profile '{}' (not in {})", choice.name, files)};
  // A profile whose credentials come from a source leaseproof does not have
  // would give AWS SDKs other credentials than the next source here does.
  for (const SharedFile* file : {&credentials_file, &config_file}) {
    const auto profile = file->profiles.find(choice.name);
    if (profile == file->profiles.end()) continue;
    for (const char* key : {"role_arn", "credential_process", "sso_session", "sso_start_url", "web_identity_token_file"}) {
      if (profile->second.contains(key)) {
        return CredentialsError{fmt::format(
            "profile '{}' in {} takes its credentials from {}, which leaseproof does not support (supported: "
            "aws_access_key_id and aws_secret_access_key in the profile, the environment, the container endpoint)",
            choice.name, file->path, key)};
      }
    }
  }
  return NotFound{fmt::format(
      "profile '{}' (no aws_access_key_id in {}; role_arn, sso_* and credential_process are not supported)",
      choice.name, files)};
}

// ---------------------------------------------------------------------------
// One HTTP request of a source (container, instance metadata, STS).

struct HttpRequest {
  std::string url;        // for messages
  std::string host;       // for the resolver, IPv6 without brackets
  std::string port;
  std::string authority;  // the Host header
  std::string target;     // path and query
  bool tls = false;       // https://
  http::verb method = http::verb::get;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Host, Accept, User-Agent
  std::string body;       // sent with `content_type` when not empty
  std::string content_type;
  std::string authorization;  // empty: no Authorization header
  // AWS_CONTAINER_CREDENTIALS_FULL_URI may name any host: every address it
  // resolves to must be loopback or an ECS/EKS credentials address.
  bool check_addresses = false;
};
using ContainerRequest = HttpRequest;

// Returns the request, or an error message. https:// only when `https_allowed`.
std::variant<HttpRequest, std::string> parse_http_url(const std::string& url, bool https_allowed = false) {
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

// The token file wins over the token variable (EKS Pod Identity sets the file,
// and rotates its contents: it is read again for every request).
std::variant<std::string, CredentialsError> container_authorization(const Environment& env) {
  std::string token;
  const std::string token_file = env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  if (!token_file.empty()) {
    FileText read = read_small_file(token_file, token_file_bytes_max);
    if (read.status != FileText::Status::ok) {
      return CredentialsError{fmt::format("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {}: {}", token_file,
                                          read.status == FileText::Status::missing ? "no such file" : read.problem)};
    }
    token = std::string(trim(read.text));
  } else {
    token = env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN");
  }
  const bool has_control = std::any_of(token.begin(), token.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (has_control) {
    return CredentialsError{fmt::format("the container authorization token (from {}) contains control characters",
                                        token_file.empty() ? "AWS_CONTAINER_AUTHORIZATION_TOKEN" : token_file)};
  }
  return token;
}

std::variant<ContainerRequest, NotFound, CredentialsError> container_request(const Environment& env,
                                                                            const CredentialsChainOptions& options) {
  const std::string relative = env_value(env, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const std::string full = env_value(env, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (relative.empty() && full.empty()) {
    return NotFound{"container (neither AWS_CONTAINER_CREDENTIALS_RELATIVE_URI nor AWS_CONTAINER_CREDENTIALS_FULL_URI set)"};
  }
  if (!relative.empty() && !relative.starts_with('/')) {
    return CredentialsError{fmt::format("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI '{}' does not start with '/'", relative)};
  }
  auto parsed = relative.empty() ? parse_http_url(full) : parse_http_url("http://" + options.container_host + relative);
  if (auto* problem = std::get_if<std::string>(&parsed)) {
    return CredentialsError{fmt::format("{}: {}",
                                        relative.empty() ? "AWS_CONTAINER_CREDENTIALS_FULL_URI"
                                                         : "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                        *problem)};
  }
  auto request = std::get<ContainerRequest>(std::move(parsed));
  request.check_addresses = relative.empty();
  auto authorization = container_authorization(env);
  if (auto* error = std::get_if<CredentialsError>(&authorization)) return *error;
  request.authorization = std::get<std::string>(std::move(authorization));
  return request;
}

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

// ---------------------------------------------------------------------------
// The container endpoint's answer, and instance metadata's (the same fields).

SourceOutcome parse_credentials_json(std::string_view what, const std::string& url, CredentialsOrigin origin,
                                     int http_status, const std::string& body) {
  const auto error = [&what, &url](std::string problem) {
    return CredentialsError{fmt::format("{} from {}: {}", what, url, problem)};
  };
  if (http_status != 200) return error(fmt::format("HTTP {}: {}", http_status, excerpt(body)));
  bool too_deep = false;
  auto within_depth = [&too_deep](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                       event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= response_json_levels_max) {
      too_deep = true;
      return false;
    }
    return true;
  };
  const auto json = nlohmann::json::parse(body, within_depth, /*allow_exceptions=*/false);
  if (too_deep) return error(fmt::format("answer nested more than {} levels deep", response_json_levels_max));
  if (json.is_discarded()) return error("answer is not JSON: " + excerpt(body));
  if (!json.is_object()) return error("answer is not a JSON object: " + excerpt(body));
  std::map<std::string, std::string> fields;
  for (const char* name : {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}) {
    const auto it = json.find(name);
    if (it == json.end()) return error(fmt::format("answer has no {}", name));
    if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
      return error(fmt::format("{} is not a non-empty string", name));
    }
    fields[name] = it->get<std::string>();
  }
  const auto expiration = parse_iso8601_ns(fields["Expiration"]);
  if (!expiration) return error(fmt::format("Expiration {} is not an ISO 8601 time", excerpt(fields["Expiration"])));
  return ResolvedCredentials{
      .credentials = {.access_key_id = fields["AccessKeyId"],
                      .secret_access_key = fields["SecretAccessKey"],
                      .session_token = fields["Token"]},
      .origin = origin,
      .description = fmt::format("{} {}", origin == CredentialsOrigin::container ? "container" : "instance metadata",
                                 url),
      .expiration_wall_ns = *expiration,
  };
}

SourceOutcome parse_container_answer(const HttpRequest& request, int http_status, const std::string& body) {
  return parse_credentials_json("container credentials", request.url, CredentialsOrigin::container, http_status, body);
}

// ---------------------------------------------------------------------------
// One HTTP exchange, plain or TLS, bounded in time and size. The handler runs
// exactly once, from a completion handler (never inline from start), unless
// cancel() comes first. Failures are messages; the caller says whose.

struct HttpAnswer {
  int status = 0;
  std::string body;
};
using HttpOutcome = std::variant<HttpAnswer, std::string>;

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

// ---------------------------------------------------------------------------
// The sources that ask a server. Each runs one or more HttpFetch in turn and
// ends in a SourceOutcome; cancel() stops it without its handler running.

class SourceFetch {
 public:
  using Handler = std::function<void(SourceOutcome)>;
  virtual ~SourceFetch() = default;
  virtual void start() = 0;
  virtual void cancel() = 0;
};

class SourceFetchBase : public SourceFetch {
 public:
  SourceFetchBase(asio::io_context& io, const CredentialsChainOptions& options, Handler handler)
      : io_(io), tls_(options.tls_context), response_bytes_max_(options.container_response_bytes_max),
        handler_(std::move(handler)) {}

  void cancel() override {
    handler_ = nullptr;
    if (step_) std::exchange(step_, nullptr)->cancel();
  }

 protected:
  template <typename Next>
  void fetch(HttpRequest request, Duration timeout, Next next) {
    step_ = std::make_shared<HttpFetch>(io_, std::move(request), timeout, response_bytes_max_, tls_,
                                        [this, next = std::move(next)](HttpOutcome outcome) { next(std::move(outcome)); });
    step_->start();
  }

  void finish(SourceOutcome outcome) {
    step_.reset();
    if (handler_) std::exchange(handler_, nullptr)(std::move(outcome));
  }

 private:
  asio::io_context& io_;
  TlsContextPtr tls_;
  std::size_t response_bytes_max_;
  Handler handler_;
  std::shared_ptr<HttpFetch> step_;
};

class ContainerSource final : public SourceFetchBase {
 public:
  ContainerSource(asio::io_context& io, HttpRequest request, const CredentialsChainOptions& options, Handler handler)
      : SourceFetchBase(io, options, std::move(handler)), request_(std::move(request)),
        timeout_(options.container_timeout) {}

  void start() override {
    fetch(request_, timeout_, [this](HttpOutcome outcome) {
      if (auto* problem = std::get_if<std::string>(&outcome)) {
        return finish(CredentialsError{fmt::format("container credentials from {}: {}", request_.url, *problem)});
      }
      const auto& answer = std::get<HttpAnswer>(outcome);
      finish(parse_container_answer(request_, answer.status, answer.body));
    });
  }

 private:
  HttpRequest request_;
  Duration timeout_;
};

// ---------------------------------------------------------------------------
// Web identity: STS AssumeRoleWithWebIdentity with the token in
// AWS_WEB_IDENTITY_TOKEN_FILE (EKS writes and rotates it), unsigned.

std::string form_encode(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

// The text of the first <tag>...</tag> after `from` in an STS answer (its
// values hold no markup; entities are decoded for the five XML ones).
std::optional<std::string> xml_text(std::string_view xml, std::string_view tag, std::size_t from = 0) {
  const std::string open = fmt::format("<{}>", tag);
  const std::string close = fmt::format("</{}>", tag);
  const auto start = xml.find(open, from);
  if (start == std::string_view::npos) return std::nullopt;
  const auto end = xml.find(close, start + open.size());
  if (end == std::string_view::npos) return std::nullopt;
  std::string text(xml.substr(start + open.size(), end - start - open.size()));
  for (const auto& [entity, character] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}}) {
    for (auto at = text.find(entity); at != std::string::npos; at = text.find(entity, at + character.size())) {
      text.replace(at, entity.size(), character);
    }
  }
  return std::string(trim(text));
}

SourceOutcome parse_sts_answer(const std::string& url, const std::string& role_arn, int http_status,
                               const std::string& body) {
  const auto error = [&](std::string what) {
    return CredentialsError{fmt::format("web identity: AssumeRoleWithWebIdentity {} at {}: {}", role_arn, url, what)};
  };
  if (http_status != 200) {
    const auto code = xml_text(body, "Code");
    const auto message = xml_text(body, "Message");
    return error(fmt::format("HTTP {} {}: {}", http_status, code.value_or("(no error code)"),
                             message ? excerpt(*message) : excerpt(body)));
  }
  const auto credentials_at = body.find("<Credentials>");
  if (credentials_at == std::string::npos) return error("the answer has no <Credentials>: " + excerpt(body));
  std::map<std::string, std::string> fields;
  for (const char* name : {"AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration"}) {
    auto value = xml_text(body, name, credentials_at);
    if (!value || value->empty()) return error(fmt::format("the answer's <Credentials> has no {}", name));
    fields[name] = std::move(*value);
  }
  const auto expiration = parse_iso8601_ns(fields["Expiration"]);
  if (!expiration) return error(fmt::format("Expiration {} is not an ISO 8601 time", excerpt(fields["Expiration"])));
  return ResolvedCredentials{
      .credentials = {.access_key_id = fields["AccessKeyId"],
                      .secret_access_key = fields["SecretAccessKey"],
                      .session_token = fields["SessionToken"]},
      .origin = CredentialsOrigin::web_identity,
      .description = fmt::format("web identity {} through {}", role_arn, url),
      .expiration_wall_ns = *expiration,
  };
}

struct WebIdentityCall {
  HttpRequest request;
  std::string role_arn;  // for messages
};

std::variant<WebIdentityCall, NotFound, CredentialsError> web_identity_request(const Environment& env,
                                                                             const CredentialsChainOptions& options) {
  const std::string token_file = env_value(env, "AWS_WEB_IDENTITY_TOKEN_FILE");
  const std::string role_arn = env_value(env, "AWS_ROLE_ARN");
  if (token_file.empty() && role_arn.empty()) {
    return NotFound{"web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN not set)"};
  }
  if (role_arn.empty()) return CredentialsError{"web identity: AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not"};
  if (token_file.empty()) return CredentialsError{"web identity: AWS_ROLE_ARN is set but AWS_WEB_IDENTITY_TOKEN_FILE is not"};
  FileText read = read_small_file(token_file, token_file_bytes_max);
  if (read.status != FileText::Status::ok) {
    return CredentialsError{fmt::format("web identity: AWS_WEB_IDENTITY_TOKEN_FILE {}: {}", token_file,
                                        read.status == FileText::Status::missing ? "no such file" : read.problem)};
  }
  const std::string token(trim(read.text));
  if (token.empty()) return CredentialsError{fmt::format("web identity: the token file {} is empty", token_file)};
  std::string session = env_value(env, "AWS_ROLE_SESSION_NAME");
  if (session.empty()) session = fmt::format("leaseproof-{}", wall_now(options) / 1'000'000);
  const std::string region = resolve_region(options);
  auto endpoint = resolve_service_endpoint("sts", "", region, env);
  if (auto* problem = std::get_if<std::string>(&endpoint)) return CredentialsError{"web identity: STS: " + *problem};
  auto parsed = parse_http_url(std::get<ServiceEndpoint>(endpoint).url, /*https_allowed=*/true);
  if (auto* problem = std::get_if<std::string>(&parsed)) return CredentialsError{"web identity: STS endpoint " + *problem};
  HttpRequest request = std::get<HttpRequest>(std::move(parsed));
  request.method = http::verb::post;
  request.content_type = "application/x-www-form-urlencoded; charset=utf-8";
  request.body = fmt::format("Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn={}&RoleSessionName={}"
                             "&WebIdentityToken={}",
                             form_encode(role_arn), form_encode(session), form_encode(token));
  return WebIdentityCall{std::move(request), role_arn};
}

class WebIdentitySource final : public SourceFetchBase {
 public:
  WebIdentitySource(asio::io_context& io, WebIdentityCall call, const CredentialsChainOptions& options, Handler handler)
      : SourceFetchBase(io, options, std::move(handler)), request_(std::move(call.request)),
        role_arn_(std::move(call.role_arn)), timeout_(options.sts_timeout) {}

  void start() override {
    fetch(request_, timeout_, [this](HttpOutcome outcome) {
      if (auto* problem = std::get_if<std::string>(&outcome)) {
        return finish(CredentialsError{fmt::format("web identity: AssumeRoleWithWebIdentity {} at {}: {}", role_arn_,
                                                   request_.url, *problem)});
      }
      const auto& answer = std::get<HttpAnswer>(outcome);
      finish(parse_sts_answer(request_.url, role_arn_, answer.status, answer.body));
    });
  }

 private:
  HttpRequest request_;
  std::string role_arn_;
  Duration timeout_;
};

// ---------------------------------------------------------------------------
// EC2 instance metadata, IMDSv2: PUT a session token, GET the role's name,
// GET its credentials (the container answer's fields).

bool file_starts_with(const std::string& path, std::string_view prefix) {
  FileText read = read_small_file(path, 4096);
  return read.status == FileText::Status::ok && trim(read.text).starts_with(prefix);
}

std::variant<HttpRequest, NotFound, CredentialsError> instance_metadata_base(const Environment& env,
                                                                            const CredentialsChainOptions& options) {
  if (lowercase(env_value(env, "AWS_EC2_METADATA_DISABLED")) == "true") {
    return NotFound{"instance metadata (AWS_EC2_METADATA_DISABLED=true)"};
  }
  std::string endpoint = env_value(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (endpoint.empty()) {
    if (!file_starts_with(options.dmi_sys_vendor_path, "Amazon EC2") &&
        !file_starts_with(options.hypervisor_uuid_path, "ec2")) {
      return NotFound{fmt::format("instance metadata (not an EC2 machine: {} and {} say otherwise; "
                                  "AWS_EC2_METADATA_SERVICE_ENDPOINT asks it anyway)",
                                  options.dmi_sys_vendor_path, options.hypervisor_uuid_path)};
    }
    endpoint = lowercase(env_value(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE")) == "ipv6" ? "http://[fd00:ec2::254]"
                                                                                            : "http://169.254.169.254";
  }
  while (endpoint.ends_with('/')) endpoint.pop_back();
  auto parsed = parse_http_url(endpoint + "/latest/api/token");
  if (auto* problem = std::get_if<std::string>(&parsed)) {
    return CredentialsError{"instance metadata: AWS_EC2_METADATA_SERVICE_ENDPOINT " + *problem};
  }
  return std::get<HttpRequest>(std::move(parsed));
}

Duration instance_metadata_timeout(const Environment& env, const CredentialsChainOptions& options) {
  const std::string text = env_value(env, "AWS_METADATA_SERVICE_TIMEOUT");
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || value < 1 || value > 60) {
    return options.instance_metadata_timeout;
  }
  return Duration::from_s(value);
}

class InstanceMetadataSource final : public SourceFetchBase {
 public:
  InstanceMetadataSource(asio::io_context& io, HttpRequest token_request, Duration timeout,
                         const CredentialsChainOptions& options, Handler handler)
      : SourceFetchBase(io, options, std::move(handler)), base_(std::move(token_request)), timeout_(timeout) {}

  void start() override {
    HttpRequest token = base_;
    token.method = http::verb::put;
    token.headers.emplace_back("X-aws-ec2-metadata-token-ttl-seconds", "21600");
    fetch(std::move(token), timeout_, [this](HttpOutcome outcome) {
      if (auto* problem = std::get_if<std::string>(&outcome)) {
        // Nothing answers: not on EC2 after all, or metadata is off for this host.
        return finish(NotFound{fmt::format("instance metadata at {} ({})", base_.url, *problem)});
      }
      const auto& answer = std::get<HttpAnswer>(outcome);
      if (answer.status != 200 || trim(answer.body).empty()) {
        return fail(base_.url, fmt::format("HTTP {} for the IMDSv2 session token: {}", answer.status,
                                           excerpt(answer.body)));
      }
      token_ = std::string(trim(answer.body));
      ask_role();
    });
  }

 private:
  HttpRequest metadata_get(std::string_view path) const {
    HttpRequest request = base_;
    request.target = std::string(path);
    request.url = fmt::format("http://{}{}", base_.authority, path);
    request.headers.emplace_back("X-aws-ec2-metadata-token", token_);
    return request;
  }

  void ask_role() {
    HttpRequest request = metadata_get(kRolesPath);
    std::string url = request.url;
    fetch(std::move(request), timeout_, [this, url](HttpOutcome outcome) {
      if (auto* problem = std::get_if<std::string>(&outcome)) return fail(url, *problem);
      const auto& answer = std::get<HttpAnswer>(outcome);
      if (answer.status == 404) return finish(NotFound{fmt::format("instance metadata at {} (no IAM role attached)", url)});
      const std::string_view listed = trim(answer.body);
      const std::string role(trim(listed.substr(0, listed.find('\n'))));
      if (answer.status != 200 || role.empty() || role.find('/') != std::string::npos) {
        return fail(url, fmt::format("HTTP {} without a role name: {}", answer.status, excerpt(answer.body)));
      }
      ask_credentials(role);
    });
  }

  void ask_credentials(const std::string& role) {
    HttpRequest request = metadata_get(fmt::format("{}{}", kRolesPath, role));
    std::string url = request.url;
    fetch(std::move(request), timeout_, [this, url](HttpOutcome outcome) {
      if (auto* problem = std::get_if<std::string>(&outcome)) return fail(url, *problem);
      const auto& answer = std::get<HttpAnswer>(outcome);
      finish(parse_credentials_json("instance metadata credentials", url, CredentialsOrigin::instance_metadata,
                                    answer.status, answer.body));
    });
  }

  void fail(const std::string& url, const std::string& what) {
    finish(CredentialsError{fmt::format("instance metadata credentials from {}: {}", url, what)});
  }

  static constexpr std::string_view kRolesPath = "/latest/meta-data/iam/security-credentials/";
  HttpRequest base_;
  Duration timeout_;
  std::string token_;
};

// ---------------------------------------------------------------------------
// The chain.

using ResultHandler = std::function<void(CredentialsResult)>;

// Credentials whose Expiration has passed would be refused by every request:
// an error, so that a caller keeps what it had and retries with its backoff
// (a refresh delay computed from a past Expiration would poll at once).
CredentialsResult unexpired(CredentialsResult result, int64_t now_wall_ns) {
  if (!result.ok() || !result.value().expiration_wall_ns || *result.value().expiration_wall_ns > now_wall_ns) {
    return result;
  }
  return CredentialsError{fmt::format("{} handed out credentials that expired {} ago", result.value().description,
                                      format_duration(Duration::from_ns(now_wall_ns -
                                                                        *result.value().expiration_wall_ns)))};
}

// Runs the sources in order (environment, web identity, shared files,
// container, instance metadata); `done` runs exactly once, never inline, and
// is never given expired credentials, unless cancel() comes first.
class ChainRun : public std::enable_shared_from_this<ChainRun> {
 public:
  ChainRun(asio::io_context& io, CredentialsChainOptions options, ResultHandler done)
      : io_(io), options_(std::move(options)), env_(environment_of(options_)), done_(std::move(done)) {}

  void start() { step(0); }

  void cancel() {
    done_ = nullptr;
    if (source_) source_->cancel();
  }

 private:
  void step(int index) {
    SourceOutcome outcome = NotFound{};
    switch (index) {
      case 0: outcome = from_environment(env_); break;
      case 1: outcome = start_source<WebIdentitySource>(index, web_identity_request(env_, options_)); break;
      case 2: outcome = from_profile(env_, options_); break;
      case 3: outcome = start_source<ContainerSource>(index, container_request(env_, options_)); break;
      case 4: outcome = start_instance_metadata(index); break;
      default:
        return finish(CredentialsError{"no AWS credentials found; tried " + join(tried_, "; ")});
    }
    if (!source_) on_outcome(index, std::move(outcome));
  }

  // Starts an asking source, or hands back what stopped it before it asked.
  template <typename Source, typename Call>
  SourceOutcome start_source(int index, std::variant<Call, NotFound, CredentialsError> call) {
    if (auto* not_found = std::get_if<NotFound>(&call)) return *not_found;
    if (auto* error = std::get_if<CredentialsError>(&call)) return *error;
    launch(std::make_unique<Source>(io_, std::get<Call>(std::move(call)), options_, handler_for(index)));
    return NotFound{};
  }

  SourceOutcome start_instance_metadata(int index) {
    auto request = instance_metadata_base(env_, options_);
    if (auto* not_found = std::get_if<NotFound>(&request)) return *not_found;
    if (auto* error = std::get_if<CredentialsError>(&request)) return *error;
    launch(std::make_unique<InstanceMetadataSource>(io_, std::get<HttpRequest>(std::move(request)),
                                                    instance_metadata_timeout(env_, options_), options_,
                                                    handler_for(index)));
    return NotFound{};
  }

  void launch(std::unique_ptr<SourceFetch> source) {
    source_ = std::move(source);
    source_->start();
  }

  // The source is deep in its own call chain when it answers: go on from the
  // io_context, once it has returned, and only then let it go.
  SourceFetch::Handler handler_for(int index) {
    return [weak = weak_from_this(), index](SourceOutcome outcome) {
      auto self = weak.lock();
      if (!self) return;
      asio::post(self->io_, [self, index, outcome = std::move(outcome)]() mutable {
        self->source_.reset();
        if (self->done_) self->on_outcome(index, std::move(outcome));
      });
    };
  }

  void on_outcome(int index, SourceOutcome outcome) {
    if (auto* found = std::get_if<ResolvedCredentials>(&outcome)) return finish(std::move(*found));
    if (auto* error = std::get_if<CredentialsError>(&outcome)) return finish(std::move(*error));
    tried_.push_back(std::get<NotFound>(outcome).tried);
    step(index + 1);
  }

  void finish(CredentialsResult result) {
    if (!done_) return;
    asio::post(io_, [done = std::exchange(done_, nullptr), result = unexpired(std::move(result), wall_now(options_))]()
                   mutable { done(std::move(result)); });
  }

  asio::io_context& io_;
  const CredentialsChainOptions options_;
  const Environment env_;
  ResultHandler done_;
  std::unique_ptr<SourceFetch> source_;
  std::vector<std::string> tried_;
};

std::shared_ptr<ChainRun> run_chain(asio::io_context& io, const CredentialsChainOptions& options, ResultHandler done) {
  auto run = std::make_shared<ChainRun>(io, options, std::move(done));
  run->start();
  return run;
}


DynamoCredentials no_credentials() {
  return DynamoCredentials{.access_key_id = "", .secret_access_key = "", .session_token = ""};
}

}  // namespace

// ---------------------------------------------------------------------------

Environment process_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

std::string_view to_string(CredentialsOrigin origin) {
  switch (origin) {
    case CredentialsOrigin::environment: return "environment";
    case CredentialsOrigin::web_identity: return "web_identity";
    case CredentialsOrigin::profile: return "profile";
    case CredentialsOrigin::container: return "container";
    case CredentialsOrigin::instance_metadata: return "instance_metadata";
  }
  LP_UNREACHABLE("CredentialsOrigin {}", static_cast<int>(origin));
}

const ResolvedCredentials& CredentialsResult::value() const {
  LP_ASSERT(ok());
  return std::get<ResolvedCredentials>(value_);
}

const CredentialsError& CredentialsResult::error() const {
  LP_ASSERT(!ok());
  return std::get<CredentialsError>(value_);
}

CredentialsResult resolve_credentials_blocking(const CredentialsChainOptions& options) {
  asio::io_context io;
  std::optional<CredentialsResult> result;
  const auto fetch = run_chain(io, options, [&result](CredentialsResult outcome) { result.emplace(std::move(outcome)); });
  io.run();  // ends when the fetch has finished: its timer bounds it
  LP_ASSERT(result.has_value());
  return *result;
}

std::string resolve_region(const CredentialsChainOptions& options) {
  const Environment env = environment_of(options);
  for (const char* variable : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    std::string region = env_value(env, variable);
    if (!region.empty()) return region;
  }
  const SharedFile config_file = load_shared_file(env, true, options);
  const auto profile = config_file.profiles.find(choose_profile(env, options).name);
  if (profile != config_file.profiles.end()) {
    const auto region = profile->second.find("region");
    if (region != profile->second.end() && !region->second.empty()) return region->second;
  }
  return std::string(default_region);
}

std::variant<ServiceEndpoint, std::string> resolve_service_endpoint(std::string_view service,
                                                                    std::string_view explicit_url,
                                                                    std::string_view region,
                                                                    const Environment& environment) {
  if (!explicit_url.empty()) return ServiceEndpoint{std::string(explicit_url), "--endpoint"};
  std::string service_variable = "AWS_ENDPOINT_URL_";
  for (const char c : service) service_variable += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& variable : {service_variable, std::string("AWS_ENDPOINT_URL")}) {
    std::string url = env_value(environment, variable);
    if (!url.empty()) return ServiceEndpoint{std::move(url), variable};
  }
  const bool region_shaped = !region.empty() && region.size() <= 64 &&
                             region.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string_view::npos &&
                             region.front() != '-' && region.back() != '-';
  if (!region_shaped) {
    return fmt::format("region '{}' is not a region's name (lowercase letters, digits and '-', e.g. eu-west-1)",
                       region);
  }
  const std::string_view suffix = region.starts_with("cn-") ? "amazonaws.com.cn" : "amazonaws.com";
  return ServiceEndpoint{fmt::format("https://{}.{}.{}", service, region, suffix), fmt::format("region {}", region)};
}

std::optional<int64_t> parse_iso8601_ns(std::string_view text) {
  // "YYYY-MM-DDTHH:MM:SS", then ".fraction", then "Z" or "+HH:MM" / "-HH:MM".
  std::size_t at = 0;
  const auto number = [&text, &at](std::size_t digits) -> std::optional<int> {
    if (at + digits > text.size()) return std::nullopt;
    int value = 0;
    for (std::size_t i = 0; i < digits; ++i) {
      const char c = text[at + i];
      if (c < '0' || c > '9') return std::nullopt;
      value = value * 10 + (c - '0');
    }
    at += digits;
    return value;
  };
  const auto literal = [&text, &at](char expected) {
    if (at >= text.size() || text[at] != expected) return false;
    ++at;
    return true;
  };
  const auto year = number(4);
  if (!year || !literal('-')) return std::nullopt;
  const auto month = number(2);
  if (!month || !literal('-')) return std::nullopt;
  const auto day = number(2);
  if (!day || !literal('T')) return std::nullopt;
  const auto hour = number(2);
  if (!hour || !literal(':')) return std::nullopt;
  const auto minute = number(2);
  if (!minute || !literal(':')) return std::nullopt;
  const auto second = number(2);
  if (!second || *hour > 23 || *minute > 59 || *second > 59) return std::nullopt;
  int64_t fraction_ns = 0;
  if (literal('.')) {
    int64_t scale = 100'000'000;
    const std::size_t first = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      fraction_ns += (text[at] - '0') * scale;  // digits past nanoseconds count as 0
      scale /= 10;
      ++at;
    }
    if (at == first) return std::nullopt;
  }
  int64_t offset_s = 0;
  if (!literal('Z')) {
    if (at >= text.size() || (text[at] != '+' && text[at] != '-')) return std::nullopt;
    const int sign = text[at] == '-' ? -1 : 1;
    ++at;
    const auto offset_hours = number(2);
    if (!offset_hours || !literal(':')) return std::nullopt;
    const auto offset_minutes = number(2);
    if (!offset_minutes || *offset_hours > 23 || *offset_minutes > 59) return std::nullopt;
    offset_s = sign * (int64_t{*offset_hours} * 3600 + int64_t{*offset_minutes} * 60);
  }
  if (at != text.size()) return std::nullopt;
  // int64 nanoseconds since 1970 end in 2262.
  if (*year < 1970 || *year > 2261) return std::nullopt;
  const std::chrono::year_month_day date{std::chrono::year{*year}, std::chrono::month{static_cast<unsigned>(*month)},
                                         std::chrono::day{static_cast<unsigned>(*day)}};
  if (!date.ok()) return std::nullopt;
  const int64_t days = std::chrono::sys_days{date}.time_since_epoch().count();
  const int64_t seconds = days * 86'400 + int64_t{*hour} * 3600 + int64_t{*minute} * 60 + *second - offset_s;
  return seconds * 1'000'000'000 + fraction_ns;
}

Duration credentials_refresh_delay(int64_t expiration_wall_ns, int64_t now_wall_ns,
                                   const CredentialsChainOptions& options) {
  const Duration remaining = Duration::from_ns(expiration_wall_ns - now_wall_ns);
  const Duration delay = remaining >= options.refresh_margin * 2 ? remaining - options.refresh_margin : remaining / 2;
  return std::max(delay, options.refresh_delay_min);
}

// ---------------------------------------------------------------------------

class CredentialsChain::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, CredentialsChainOptions options)
      : io_(io), options_(std::move(options)), timer_(io), random_(options_.jitter_seed),
        shared_(std::make_shared<Shared>()) {
    LP_ASSERT_GT(options_.retry_delay_initial, Duration::zero());
    LP_ASSERT_LE(options_.retry_delay_initial, options_.retry_delay_max);
    LP_ASSERT_GT(options_.refresh_delay_min, Duration::zero());
  }

  void start(std::function<void(const CredentialsResult&)> on_resolved) {
    LP_ASSERT(!started_);
    started_ = true;
    fetch_ = run_chain(io_, options_, [self = shared_from_this(), on_resolved = std::move(on_resolved)](
                                          CredentialsResult result) {
      self->fetch_.reset();
      if (self->stopped_) return;
      self->on_result(result, /*first=*/true);
      if (on_resolved) on_resolved(result);
    });
  }

  void stop() {
    stopped_ = true;
    timer_.cancel();
    if (fetch_) std::exchange(fetch_, nullptr)->cancel();
  }

  CredentialsSource source() const {
    return [shared = shared_] {
      const std::lock_guard lock(shared->mutex);
      return shared->current ? shared->current->credentials : no_credentials();
    };
  }

  std::optional<ResolvedCredentials> current() const {
    const std::lock_guard lock(shared_->mutex);
    return shared_->current;
  }

  Stats stats() const {
    const std::lock_guard lock(shared_->mutex);
    return shared_->stats;
  }

 private:
  struct Shared {
    mutable std::mutex mutex;
    std::optional<ResolvedCredentials> current;
    Stats stats;
  };

  // After a failed first run nothing is scheduled: the caller decides.
  void on_result(const CredentialsResult& result, bool first) {
    if (result.ok()) {
      {
        const std::lock_guard lock(shared_->mutex);
        shared_->current = result.value();
        if (!first) ++shared_->stats.refreshes_succeeded;
        shared_->stats.last_refresh_error.clear();
      }
      failures_in_row_ = 0;
      if (const auto expiration = result.value().expiration_wall_ns) {
        schedule_refresh(credentials_refresh_delay(*expiration, wall_now(options_), options_));
      }
      return;
    }
    if (first) return;
    {
      const std::lock_guard lock(shared_->mutex);
      ++shared_->stats.refreshes_failed;
      shared_->stats.last_refresh_error = result.error().detail;
    }
    schedule_refresh(retry_delay());
  }

  void on_refreshed(const CredentialsResult& result) {
    on_result(result, /*first=*/false);
    if (options_.on_refresh) options_.on_refresh(result);
  }

  // Uniform in [d/2, d], d = retry_delay_initial doubled per failure in a row,
  // at most retry_delay_max.
  Duration retry_delay() {
    Duration delay = options_.retry_delay_initial;
    for (uint64_t i = 0; i < failures_in_row_ && delay < options_.retry_delay_max; ++i) delay = delay * 2;
    delay = std::min(delay, options_.retry_delay_max);
    ++failures_in_row_;
    const Duration half = delay / 2;
    return half + Duration::from_ns(static_cast<int64_t>(random_.below(static_cast<uint64_t>(half.ns()) + 1)));
  }

  void schedule_refresh(Duration delay) {
    timer_.expires_after(to_chrono(delay));
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->stopped_) return;
      self->fetch_ = run_chain(self->io_, self->options_, [self](CredentialsResult result) {
        self->fetch_.reset();
        if (!self->stopped_) self->on_refreshed(result);
      });
    });
  }

  asio::io_context& io_;
  const CredentialsChainOptions options_;
  asio::steady_timer timer_;
  OsRandom random_;
  std::shared_ptr<Shared> shared_;  // outlives the chain in the sources handed out
  std::shared_ptr<ChainRun> fetch_;
  uint64_t failures_in_row_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

CredentialsChain::CredentialsChain(asio::io_context& io, CredentialsChainOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

CredentialsChain::~CredentialsChain() { impl_->stop(); }

void CredentialsChain::start(std::function<void(const CredentialsResult&)> on_resolved) {
  impl_->start(std::move(on_resolved));
}

CredentialsSource CredentialsChain::source() const { return impl_->source(); }

std::optional<ResolvedCredentials> CredentialsChain::current() const { return impl_->current(); }

CredentialsChain::Stats CredentialsChain::stats() const { return impl_->stats(); }

}  // namespace leaseproof::runtime
