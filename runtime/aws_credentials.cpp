#include "runtime/aws_credentials.hpp"

#include <algorithm>
#include <cctype>
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
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/assert.hpp"
#include "runtime/clock.hpp"

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
// The container source's request.

struct ContainerRequest {
  std::string url;        // for messages
  std::string host;       // for the resolver, IPv6 without brackets
  std::string port;
  std::string authority;  // the Host header
  std::string target;     // path and query
  std::string authorization;  // empty: no Authorization header
  // AWS_CONTAINER_CREDENTIALS_FULL_URI may name any host: every address it
  // resolves to must be loopback or an ECS/EKS credentials address.
  bool check_addresses = false;
};

// Returns the request, or an error message.
std::variant<ContainerRequest, std::string> parse_http_url(const std::string& url) {
  const auto parsed = boost::urls::parse_uri(url);
  if (!parsed) return fmt::format("'{}' is not a URL: {}", url, parsed.error().message());
  const auto& view = *parsed;
  if (view.scheme_id() == boost::urls::scheme::https) {
    return fmt::format("'{}': https is not supported (this client speaks plain http only)", url);
  }
  if (view.scheme_id() != boost::urls::scheme::http) return fmt::format("'{}': expected an http:// URL", url);
  if (view.host_address().empty() || view.has_userinfo()) return fmt::format("'{}': expected http://host[:port]/path", url);
  std::string target = view.encoded_path().empty() ? std::string("/") : std::string(view.encoded_path());
  if (view.has_query()) target += "?" + std::string(view.encoded_query());
  return ContainerRequest{
      .url = url,
      .host = std::string(view.host_address()),
      .port = view.has_port() ? std::string(view.port()) : std::string("80"),
      .authority = std::string(view.encoded_authority()),
      .target = std::move(target),
      .authorization = {},
      .check_addresses = false,
  };
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
// The container source's answer.

SourceOutcome parse_container_answer(const ContainerRequest& request, int http_status, const std::string& body) {
  const auto error = [&request](std::string what) {
    return CredentialsError{fmt::format("container credentials from {}: {}", request.url, what)};
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
      .origin = CredentialsOrigin::container,
      .description = "container " + request.url,
      .expiration_wall_ns = *expiration,
  };
}

// ---------------------------------------------------------------------------
// One GET to the container endpoint. The handler runs exactly once, from a
// completion handler (never inline from start), unless cancel() comes first.

class ContainerFetch : public std::enable_shared_from_this<ContainerFetch> {
 public:
  using Handler = std::function<void(SourceOutcome)>;

  ContainerFetch(asio::io_context& io, ContainerRequest request, const CredentialsChainOptions& options,
                 Handler handler)
      : resolver_(io), socket_(io), timer_(io), request_(std::move(request)),
        timeout_(options.container_timeout), response_bytes_max_(options.container_response_bytes_max),
        handler_(std::move(handler)) {}

  void start() {
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
    finish(CredentialsError{"cancelled"});
  }

 private:
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
    asio::async_connect(socket_, results, [self = shared_from_this()](error_code connect_ec, const tcp::endpoint&) {
      self->on_connected(connect_ec);
    });
  }

  void on_connected(error_code ec) {
    if (done_) return;
    if (ec) return fail("cannot connect: " + ec.message());
    http_request_.method(http::verb::get);
    http_request_.target(request_.target);
    http_request_.version(11);
    http_request_.set(http::field::host, request_.authority);
    http_request_.set(http::field::accept, "application/json");
    http_request_.set(http::field::user_agent, "leaseproof");
    if (!request_.authorization.empty()) http_request_.set(http::field::authorization, request_.authorization);
    http_request_.keep_alive(false);
    http::async_write(socket_, http_request_, [self = shared_from_this()](error_code write_ec, std::size_t) {
      self->on_written(write_ec);
    });
  }

  void on_written(error_code ec) {
    if (done_) return;
    if (ec) return fail("cannot send the request: " + ec.message());
    parser_.header_limit(static_cast<std::uint32_t>(response_header_bytes_max));
    parser_.body_limit(response_bytes_max_);
    http::async_read(socket_, buffer_, parser_, [self = shared_from_this()](error_code read_ec, std::size_t) {
      self->on_read(read_ec);
    });
  }

  void on_read(error_code ec) {
    if (done_) return;
    if (ec == http::error::body_limit) {
      return fail(fmt::format("answer larger than {} bytes", response_bytes_max_));
    }
    if (ec) return fail("no complete HTTP answer: " + ec.message());
    const auto& message = parser_.get();
    finish(parse_container_answer(request_, static_cast<int>(message.result_int()), message.body()));
  }

  void fail(std::string what) {
    finish(CredentialsError{fmt::format("container credentials from {}: {}", request_.url, what)});
  }

  void finish(SourceOutcome outcome) {
    if (done_) return;
    done_ = true;
    error_code ignored;
    timer_.cancel();
    resolver_.cancel();
    socket_.close(ignored);
    if (handler_) std::exchange(handler_, nullptr)(std::move(outcome));
  }

  tcp::resolver resolver_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> http_request_;
  http::response_parser<http::string_body> parser_;
  ContainerRequest request_;
  Duration timeout_;
  std::size_t response_bytes_max_;
  Handler handler_;
  bool done_ = false;
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

// Runs the sources in order; `done` runs exactly once, never inline, and is
// never given expired credentials. Returns the container fetch in flight (to
// cancel), or null when none was needed.
std::shared_ptr<ContainerFetch> run_chain(asio::io_context& io, const CredentialsChainOptions& options,
                                          ResultHandler checked_done) {
  ResultHandler done = [checked_done = std::move(checked_done), options](CredentialsResult result) {
    checked_done(unexpired(std::move(result), wall_now(options)));
  };
  const Environment env = environment_of(options);
  std::vector<std::string> tried;
  const auto post_result = [&io, &done](CredentialsResult result) {
    asio::post(io, [done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
  };
  SourceOutcome outcome = from_environment(env);
  if (std::holds_alternative<NotFound>(outcome)) {
    tried.push_back(std::get<NotFound>(outcome).tried);
    outcome = from_profile(env, options);
  }
  if (auto* found = std::get_if<ResolvedCredentials>(&outcome)) {
    post_result(std::move(*found));
    return nullptr;
  }
  if (auto* error = std::get_if<CredentialsError>(&outcome)) {
    post_result(std::move(*error));
    return nullptr;
  }
  tried.push_back(std::get<NotFound>(outcome).tried);
  auto request = container_request(env, options);
  if (auto* not_found = std::get_if<NotFound>(&request)) {
    tried.push_back(not_found->tried);
    post_result(CredentialsError{"no AWS credentials found; tried " + join(tried, "; ")});
    return nullptr;
  }
  if (auto* error = std::get_if<CredentialsError>(&request)) {
    post_result(std::move(*error));
    return nullptr;
  }
  auto fetch = std::make_shared<ContainerFetch>(io, std::get<ContainerRequest>(std::move(request)), options,
                                                [done = std::move(done)](SourceOutcome fetched) {
                                                  if (auto* found = std::get_if<ResolvedCredentials>(&fetched)) {
                                                    done(std::move(*found));
                                                  } else {
                                                    done(std::get<CredentialsError>(std::move(fetched)));
                                                  }
                                                });
  fetch->start();
  return fetch;
}

class OsRandom {
 public:
  explicit OsRandom(uint64_t seed) : engine_(seed != 0 ? seed : std::random_device{}()) {}
  uint64_t below(uint64_t bound) {
    LP_ASSERT_GT(bound, 0u);
    return std::uniform_int_distribution<uint64_t>{0, bound - 1}(engine_);
  }

 private:
  std::mt19937_64 engine_;
};

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
    case CredentialsOrigin::profile: return "profile";
    case CredentialsOrigin::container: return "container";
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
  std::shared_ptr<ContainerFetch> fetch_;
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
