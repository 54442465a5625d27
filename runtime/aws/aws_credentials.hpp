#pragma once
// AWS credentials and region found the way AWS SDKs find them, for the
// DynamoDB client's CredentialsSource (runtime/aws/dynamo_http_client.hpp).
//
// The chain, first match wins (docs/credentials.md says which AWS documents
// this follows):
//   1. environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN;
//   1b. web identity: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN to STS
//      AssumeRoleWithWebIdentity (EKS with IAM roles for service accounts);
//   2. shared files: the profile (explicit option, else AWS_PROFILE, else
//      "default") in AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), then in
//      AWS_CONFIG_FILE (~/.aws/config, sections "[profile NAME]");
//   3. container: GET http://169.254.170.2 + AWS_CONTAINER_CREDENTIALS_RELATIVE_URI,
//      else AWS_CONTAINER_CREDENTIALS_FULL_URI (plain http to loopback or the
//      ECS/EKS link-local addresses only), with an Authorization header from
//      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or AWS_CONTAINER_AUTHORIZATION_TOKEN;
//   4. EC2 instance metadata, IMDSv2: a session token, then the role's
//      credentials (on EC2 machines, or AWS_EC2_METADATA_SERVICE_ENDPOINT).
// A source that is configured but broken (a key id without its secret, an
// explicitly named profile that does not exist, a container endpoint that
// fails) is an error; the chain does not fall through past it. Nothing found
// is an error listing what was tried. Not implemented: assume-role from a
// profile, SSO, credential_process, IMDSv1.
//
// Every outcome is a value; no exception crosses this API.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <boost/asio/io_context.hpp>

#include "base/time.hpp"
#include "runtime/aws/dynamo_http_client.hpp"

namespace leaseproof::runtime {

// Variables by name. An empty value counts as unset, as in AWS SDKs.
using Environment = std::map<std::string, std::string, std::less<>>;

// A copy of this process's environment (environ).
Environment process_environment();

class CredentialsResult;

struct CredentialsChainOptions {
  // Where every AWS_* variable and HOME (for ~/.aws/...) are read; nullopt
  // reads the process environment each time the chain runs.
  std::optional<Environment> environment;
  // Takes precedence over AWS_PROFILE; empty: AWS_PROFILE, else "default".
  // Given (--profile), it also replaces the environment's credentials and
  // web identity, as an explicit profile does in botocore; AWS_PROFILE does
  // not.
  std::string profile;
  // The region of the process (--region): web identity asks STS there.
  // Empty: resolve_region().
  std::string region;
  // The host[:port] that AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is appended to.
  // Changed by tests only.
  std::string container_host = "169.254.170.2";
  // Covers the whole GET: resolve, connect, write, read.
  Duration container_timeout = Duration::from_s(2);
  // Bounds the body of every answer a source reads (container, instance
  // metadata, STS).
  std::size_t container_response_bytes_max = 64 * 1024;
  // EC2 instance metadata (IMDSv2): each of its three requests is bounded by
  // this (AWS_METADATA_SERVICE_TIMEOUT in seconds overrides it, as in the
  // SDKs). It is asked only on a machine that says it is EC2 (the files
  // below) or when AWS_EC2_METADATA_SERVICE_ENDPOINT names an endpoint:
  // elsewhere a request to 169.254.169.254 would only wait for the timeout.
  Duration instance_metadata_timeout = Duration::from_s(1);
  std::string dmi_sys_vendor_path = "/sys/class/dmi/id/sys_vendor";  // "Amazon EC2" on Nitro
  std::string hypervisor_uuid_path = "/sys/hypervisor/uuid";          // "ec2..." on Xen
  // STS AssumeRoleWithWebIdentity (AWS_WEB_IDENTITY_TOKEN_FILE and
  // AWS_ROLE_ARN, as on EKS with IRSA): the POST is bounded by this.
  Duration sts_timeout = Duration::from_s(5);
  // Verifies https:// answers (STS); null: the system's store.
  TlsContextPtr tls_context;
  std::size_t profile_file_bytes_max = 1024 * 1024;
  // Wall clock (ns since 1970, UTC) that credential Expiration is compared with.
  std::function<int64_t()> wall_clock_ns;  // empty: std::chrono::system_clock
  // Refresh this long before Expiration, or at half the time left when less
  // than twice this is left; never sooner than refresh_delay_min.
  Duration refresh_margin = Duration::from_min(5);
  Duration refresh_delay_min = Duration::from_ms(100);
  // A failed refresh is retried after a delay drawn uniformly from
  // [d/2, d], d doubling from retry_delay_initial up to retry_delay_max.
  // Retries go on until one succeeds; the old credentials stay in use.
  Duration retry_delay_initial = Duration::from_s(1);
  Duration retry_delay_max = Duration::from_s(60);
  uint64_t jitter_seed = 0;  // 0: seeded from std::random_device
  // Each refresh's outcome, on the io_context (the first resolution's goes to
  // start()'s handler): a process logs failed refreshes with it.
  std::function<void(const CredentialsResult&)> on_refresh;
};

enum class CredentialsOrigin { environment, web_identity, profile, container, instance_metadata };
std::string_view to_string(CredentialsOrigin origin);

struct ResolvedCredentials {
  DynamoCredentials credentials;
  CredentialsOrigin origin = CredentialsOrigin::environment;
  // Where exactly, for logs, never a secret: "environment",
  // "profile 'dev' in /home/u/.aws/credentials", "container http://127.0.0.1:9/creds".
  std::string description;
  std::optional<int64_t> expiration_wall_ns;  // only container credentials expire
};

struct CredentialsError {
  std::string detail;  // names the variable, file, profile or answer that was wrong
};

class CredentialsResult {
 public:
  CredentialsResult(ResolvedCredentials value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  CredentialsResult(CredentialsError error) : value_(std::move(error)) {}     // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<ResolvedCredentials>(value_); }
  const ResolvedCredentials& value() const;  // asserts ok()
  const CredentialsError& error() const;     // asserts !ok()

 private:
  std::variant<ResolvedCredentials, CredentialsError> value_;
};

// For CLI tools: runs the chain once on an io_context of its own.
CredentialsResult resolve_credentials_blocking(const CredentialsChainOptions& options);

// AWS_REGION, else AWS_DEFAULT_REGION, else `region` of the profile in the
// config file, else "us-east-1". Unreadable files count as absent.
std::string resolve_region(const CredentialsChainOptions& options);

// What the chosen profile of the config file says about endpoints: the keys
// endpoint_url, use_fips_endpoint, use_dualstack_endpoint,
// ignore_configured_endpoint_urls and services (botocore reads the same).
struct EndpointProfile {
  std::string name;  // for messages: "profile 'dev' in /home/u/.aws/config"
  std::map<std::string, std::string, std::less<>> keys;
};
// An unreadable config file counts as absent (resolve_region does the same).
EndpointProfile endpoint_profile(const CredentialsChainOptions& options);

// Where an AWS service's requests go, as botocore resolves it: `explicit_url`
// when given (a --endpoint flag); else, unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS
// (or the profile's ignore_configured_endpoint_urls) is true,
// AWS_ENDPOINT_URL_<SERVICE> (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_STS), AWS_ENDPOINT_URL, the profile's endpoint_url; else
// the regional endpoint https://<service>.<region>.amazonaws.com
// (.amazonaws.com.cn in the cn- regions), with -fips after the service when
// AWS_USE_FIPS_ENDPOINT (or use_fips_endpoint) is true and under api.aws
// (api.amazonwebservices.com.cn) when AWS_USE_DUALSTACK_ENDPOINT (or
// use_dualstack_endpoint) is. A configured URL turns both off, as in
// botocore. `origin` says which, for logs.
struct ServiceEndpoint {
  std::string url;
  std::string origin;  // "--endpoint", "AWS_ENDPOINT_URL_SQS", "region eu-west-1", ...
};
// `service` is the endpoint prefix ("dynamodb", "sqs", "sts"). An error names
// the setting: a region that is not a region's shape (lowercase letters,
// digits, '-'), a true/false setting with another value, a profile's
// `services` (service sections are not read: refused rather than ignored),
// FIPS in a GovCloud region for a service other than DynamoDB.
std::variant<ServiceEndpoint, std::string> resolve_service_endpoint(std::string_view service,
                                                                    std::string_view explicit_url,
                                                                    std::string_view region,
                                                                    const Environment& environment,
                                                                    const EndpointProfile& profile = {});

// For long-running processes: resolves on the io_context, then keeps
// credentials that carry an Expiration fresh. Not thread-safe except source(),
// whose functions may be called from any thread.
class CredentialsChain {
 public:
  CredentialsChain(boost::asio::io_context& io, CredentialsChainOptions options);
  // Stops refreshing; sources already handed out keep the last value.
  ~CredentialsChain();
  CredentialsChain(const CredentialsChain&) = delete;
  CredentialsChain& operator=(const CredentialsChain&) = delete;

  // Runs the chain once (at most once per object); `on_resolved` runs exactly
  // once on the io_context, never inline, with the first outcome. After a
  // success, refreshes are scheduled whenever the credentials expire.
  void start(std::function<void(const CredentialsResult&)> on_resolved);

  // Hands out the current credentials: a copy under a mutex, no I/O. Before
  // the first success it hands out empty credentials.
  CredentialsSource source() const;
  std::optional<ResolvedCredentials> current() const;

  struct Stats {
    uint64_t refreshes_succeeded = 0;
    uint64_t refreshes_failed = 0;
    std::string last_refresh_error;  // empty when the last refresh succeeded
  };
  Stats stats() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;  // shared with pending handlers
};

// Exposed for tests. Both are pure.
//
// "2016-02-25T06:03:31Z", with optional fractional seconds and a "Z",
// "+HH:MM" or "-HH:MM" offset, as ns since 1970 UTC; nullopt otherwise.
std::optional<int64_t> parse_iso8601_ns(std::string_view text);
// How long to wait before refreshing credentials that expire at
// `expiration_wall_ns` (see CredentialsChainOptions::refresh_margin).
Duration credentials_refresh_delay(int64_t expiration_wall_ns, int64_t now_wall_ns,
                                   const CredentialsChainOptions& options);

}  // namespace leaseproof::runtime
