// The credential sources that ask a server: web identity (STS
// AssumeRoleWithWebIdentity), the container endpoint (ECS, EKS Pod Identity)
// and EC2 instance metadata (IMDSv2); credentials_internal.hpp says what the
// chain's files share.
#include <algorithm>
#include <charconv>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/aws/credentials_internal.hpp"

namespace leaseproof::runtime::credentials_internal {
namespace {

// ---------------------------------------------------------------------------
// One HTTP request of a source (container, instance metadata, STS).

// Returns the request, or an error message. https:// only when `https_allowed`.

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

std::variant<HttpRequest, NotFound, CredentialsError> container_request(const Environment& env,
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
  auto request = std::get<HttpRequest>(std::move(parsed));
  request.check_addresses = relative.empty();
  auto authorization = container_authorization(env);
  if (auto* error = std::get_if<CredentialsError>(&authorization)) return *error;
  request.authorization = std::get<std::string>(std::move(authorization));
  return request;
}

// Loopback, the ECS task metadata address, or the EKS Pod Identity addresses.

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
// The sources that ask a server. Each runs one or more HttpFetch in turn and
// ends in a SourceOutcome; cancel() stops it without its handler running.

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
  std::string where;     // "https://sts.eu-west-1.amazonaws.com (from region eu-west-1)": for messages and logs
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
  const std::string region = options.region.empty() ? resolve_region(options) : options.region;
  auto endpoint = resolve_service_endpoint("sts", "", region, env, endpoint_profile(options));
  if (auto* problem = std::get_if<std::string>(&endpoint)) return CredentialsError{"web identity: STS: " + *problem};
  const ServiceEndpoint& sts = std::get<ServiceEndpoint>(endpoint);
  auto parsed = parse_http_url(sts.url, /*https_allowed=*/true);
  if (auto* problem = std::get_if<std::string>(&parsed)) return CredentialsError{"web identity: STS endpoint " + *problem};
  HttpRequest request = std::get<HttpRequest>(std::move(parsed));
  request.method = http::verb::post;
  request.content_type = "application/x-www-form-urlencoded; charset=utf-8";
  request.body = fmt::format("Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn={}&RoleSessionName={}"
                             "&WebIdentityToken={}",
                             form_encode(role_arn), form_encode(session), form_encode(token));
  return WebIdentityCall{std::move(request), role_arn, fmt::format("{} (from {})", sts.url, sts.origin)};
}

class WebIdentitySource final : public SourceFetchBase {
 public:
  WebIdentitySource(asio::io_context& io, WebIdentityCall call, const CredentialsChainOptions& options, Handler handler)
      : SourceFetchBase(io, options, std::move(handler)), request_(std::move(call.request)),
        role_arn_(std::move(call.role_arn)), where_(std::move(call.where)), timeout_(options.sts_timeout) {}

  void start() override {
    fetch(request_, timeout_, [this](HttpOutcome outcome) {
      if (auto* problem = std::get_if<std::string>(&outcome)) {
        return finish(CredentialsError{fmt::format("web identity: AssumeRoleWithWebIdentity {} at {}: {}", role_arn_,
                                                   where_, *problem)});
      }
      const auto& answer = std::get<HttpAnswer>(outcome);
      finish(parse_sts_answer(where_, role_arn_, answer.status, answer.body));
    });
  }

 private:
  HttpRequest request_;
  std::string role_arn_;
  std::string where_;
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

}  // namespace

SourceMade make_web_identity_source(asio::io_context& io, const Environment& env,
                                    const CredentialsChainOptions& options, SourceFetch::Handler handler) {
  auto call = web_identity_request(env, options);
  if (auto* not_found = std::get_if<NotFound>(&call)) return *not_found;
  if (auto* error = std::get_if<CredentialsError>(&call)) return *error;
  return std::make_unique<WebIdentitySource>(io, std::get<WebIdentityCall>(std::move(call)), options, std::move(handler));
}

SourceMade make_container_source(asio::io_context& io, const Environment& env, const CredentialsChainOptions& options,
                                 SourceFetch::Handler handler) {
  auto request = container_request(env, options);
  if (auto* not_found = std::get_if<NotFound>(&request)) return *not_found;
  if (auto* error = std::get_if<CredentialsError>(&request)) return *error;
  return std::make_unique<ContainerSource>(io, std::get<HttpRequest>(std::move(request)), options, std::move(handler));
}

SourceMade make_instance_metadata_source(asio::io_context& io, const Environment& env,
                                         const CredentialsChainOptions& options, SourceFetch::Handler handler) {
  auto request = instance_metadata_base(env, options);
  if (auto* not_found = std::get_if<NotFound>(&request)) return *not_found;
  if (auto* error = std::get_if<CredentialsError>(&request)) return *error;
  return std::make_unique<InstanceMetadataSource>(io, std::get<HttpRequest>(std::move(request)),
                                                  instance_metadata_timeout(env, options), options, std::move(handler));
}

}  // namespace leaseproof::runtime::credentials_internal
