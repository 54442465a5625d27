#pragma once
// Inside the credential chain (aws_credentials.hpp): what its source files
// share and no one else includes. The files:
//   aws_profiles.cpp        text and environment helpers, the shared config
//                           and credentials files, and the two sources that
//                           ask no server (environment, profile)
//   credential_http.cpp     one HTTP exchange of a source, bounded in time
//                           and size (HttpFetch), and the base of the sources
//                           that ask a server
//   credential_sources.cpp  the sources that ask a server: web identity
//                           (STS), container, EC2 instance metadata
//   aws_credentials.cpp     the chain that runs them in order, its refreshes,
//                           and the region and endpoint resolution

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/verb.hpp>
#include <fmt/format.h>

#include "base/time.hpp"
#include "runtime/aws/aws_credentials.hpp"

namespace leaseproof::runtime::credentials_internal {

namespace asio = boost::asio;
namespace http = boost::beast::http;

constexpr std::string_view default_region = "us-east-1";
constexpr std::size_t token_file_bytes_max = 16 * 1024;
constexpr std::size_t response_header_bytes_max = 16 * 1024;
constexpr int response_json_levels_max = 8;  // the answer is one flat object
constexpr std::size_t excerpt_bytes_max = 200;

// Small text helpers.
bool is_space(char c);
std::string_view trim(std::string_view text);
std::string lowercase(std::string_view text);
// The start of a body on one line, for error messages.
std::string excerpt(std::string_view body);
std::string join(const std::vector<std::string>& parts, std::string_view separator);
std::string env_value(const Environment& env, std::string_view name);
Environment environment_of(const CredentialsChainOptions& options);
int64_t wall_now(const CredentialsChainOptions& options);

// Files.
struct FileText {
  enum class Status { ok, missing, failed };
  Status status = Status::missing;
  std::string text;     // when ok
  std::string problem;  // when failed
};
FileText read_small_file(const std::string& path, std::size_t bytes_max);

// Shared config and credentials files (INI).
using ProfileKeys = std::map<std::string, std::string>;
using Profiles = std::map<std::string, ProfileKeys>;

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

SharedFile load_shared_file(const Environment& env, bool config_file, const CredentialsChainOptions& options);

struct ProfileChoice {
  std::string name;
  bool named = false;  // by the option or AWS_PROFILE: then it must exist
};

ProfileChoice choose_profile(const Environment& env, const CredentialsChainOptions& options);

// The sources. Each finds credentials, finds nothing (saying where it looked,
// for the final error), or fails.
struct NotFound {
  std::string tried;
};
using SourceOutcome = std::variant<ResolvedCredentials, NotFound, CredentialsError>;

SourceOutcome from_environment(const Environment& env);
SourceOutcome from_profile(const Environment& env, const CredentialsChainOptions& options);

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

// Returns the request, or an error message. https:// only when `https_allowed`.
std::variant<HttpRequest, std::string> parse_http_url(const std::string& url, bool https_allowed = false);

// One HTTP exchange, plain or TLS, bounded in time and size (credential_http.cpp).
struct HttpAnswer {
  int status = 0;
  std::string body;
};
using HttpOutcome = std::variant<HttpAnswer, std::string>;
class HttpFetch;

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

  void cancel() override;

 protected:
  void fetch(HttpRequest request, Duration timeout, std::function<void(HttpOutcome)> next);
  void finish(SourceOutcome outcome);

 private:
  asio::io_context& io_;
  TlsContextPtr tls_;
  std::size_t response_bytes_max_;
  Handler handler_;
  std::shared_ptr<HttpFetch> step_;
};

// The sources that ask a server, made ready to start; or what stopped them
// before they asked (their variables not set, or set wrong).
using SourceMade = std::variant<std::unique_ptr<SourceFetch>, NotFound, CredentialsError>;
SourceMade make_web_identity_source(asio::io_context& io, const Environment& env,
                                    const CredentialsChainOptions& options, SourceFetch::Handler handler);
SourceMade make_container_source(asio::io_context& io, const Environment& env, const CredentialsChainOptions& options,
                                 SourceFetch::Handler handler);
SourceMade make_instance_metadata_source(asio::io_context& io, const Environment& env,
                                         const CredentialsChainOptions& options, SourceFetch::Handler handler);

}  // namespace leaseproof::runtime::credentials_internal
