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
#include "runtime/aws/credentials_internal.hpp"

extern char** environ;  // POSIX: the process environment
namespace leaseproof::runtime {
namespace {

using namespace credentials_internal;
namespace beast = boost::beast;

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
      // An explicit profile (--profile) replaces the environment's
      // credentials and web identity, as in botocore.
      case 0:
        outcome = options_.profile.empty()
                      ? from_environment(env_)
                      : SourceOutcome{NotFound{fmt::format("environment (not read: --profile {} given)", options_.profile)}};
        break;
      case 1:
        outcome = options_.profile.empty()
                      ? launch(make_web_identity_source(io_, env_, options_, handler_for(index)))
                      : SourceOutcome{NotFound{fmt::format("web identity (not read: --profile {} given)", options_.profile)}};
        break;
      case 2: outcome = from_profile(env_, options_); break;
      case 3: outcome = launch(make_container_source(io_, env_, options_, handler_for(index))); break;
      case 4: outcome = launch(make_instance_metadata_source(io_, env_, options_, handler_for(index))); break;
      default:
        return finish(CredentialsError{"no AWS credentials found; tried " + join(tried_, "; ")});
    }
    if (!source_) on_outcome(index, std::move(outcome));
  }

  // Starts an asking source, or hands back what stopped it before it asked.
  SourceOutcome launch(SourceMade made) {
    if (auto* not_found = std::get_if<NotFound>(&made)) return *not_found;
    if (auto* error = std::get_if<CredentialsError>(&made)) return *error;
    source_ = std::get<std::unique_ptr<SourceFetch>>(std::move(made));
    source_->start();
    return NotFound{};
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

using namespace credentials_internal;
using boost::system::error_code;

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

EndpointProfile endpoint_profile(const CredentialsChainOptions& options) {
  const Environment env = environment_of(options);
  const SharedFile config_file = load_shared_file(env, true, options);
  const std::string name = choose_profile(env, options).name;
  EndpointProfile out;
  out.name = fmt::format("profile '{}' in {}", name, config_file.path);
  const auto profile = config_file.profiles.find(name);
  if (profile == config_file.profiles.end()) return out;
  for (const char* key : {"endpoint_url", "use_fips_endpoint", "use_dualstack_endpoint",
                          "ignore_configured_endpoint_urls", "services"}) {
    const auto value = profile->second.find(key);
    if (value != profile->second.end() && !value->second.empty()) out.keys.emplace(key, value->second);
  }
  return out;
}

namespace {

std::string endpoint_variable(std::string_view service) {
  std::string variable = "AWS_ENDPOINT_URL_";
  for (const char c : service) variable += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return variable;
}

// A true/false setting: the variable when set, else the profile's key (as
// botocore's config chain reads them). nullopt: neither says; an error names
// the one that is neither true nor false.
std::variant<std::optional<bool>, std::string> boolean_setting(const Environment& environment, const char* variable,
                                                               const EndpointProfile& profile, const char* key) {
  std::string text = env_value(environment, variable);
  std::string origin = variable;
  if (text.empty()) {
    const auto found = profile.keys.find(key);
    if (found == profile.keys.end()) return std::optional<bool>{};
    text = found->second;
    origin = fmt::format("{} of {}", key, profile.name);
  }
  std::string lower;
  for (const char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true") return std::optional<bool>{true};
  if (lower == "false") return std::optional<bool>{false};
  return fmt::format("{}: '{}' is not true or false", origin, text);
}

// A URL the environment or the profile configures for `service`; nullopt: none.
std::variant<std::optional<ServiceEndpoint>, std::string> configured_endpoint(std::string_view service,
                                                                              const Environment& environment,
                                                                              const EndpointProfile& profile) {
  const auto ignore =
      boolean_setting(environment, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", profile, "ignore_configured_endpoint_urls");
  if (const auto* error = std::get_if<std::string>(&ignore)) return *error;
  if (std::get<std::optional<bool>>(ignore).value_or(false)) return std::optional<ServiceEndpoint>{};
  const std::string service_variable = endpoint_variable(service);
  for (const std::string& variable : {service_variable, std::string("AWS_ENDPOINT_URL")}) {
    std::string url = env_value(environment, variable);
    if (!url.empty()) return std::optional<ServiceEndpoint>{ServiceEndpoint{std::move(url), variable}};
  }
  if (const auto services = profile.keys.find("services"); services != profile.keys.end()) {
    return fmt::format("services = {} in {}: service sections ([services {}]) are not read by leaseproof; give the "
                       "endpoint with {} or --endpoint instead",
                       services->second, profile.name, services->second, service_variable);
  }
  if (const auto url = profile.keys.find("endpoint_url"); url != profile.keys.end()) {
    return std::optional<ServiceEndpoint>{ServiceEndpoint{url->second, "endpoint_url of " + profile.name}};
  }
  return std::optional<ServiceEndpoint>{};
}

}  // namespace

std::variant<ServiceEndpoint, std::string> resolve_service_endpoint(std::string_view service,
                                                                    std::string_view explicit_url,
                                                                    std::string_view region,
                                                                    const Environment& environment,
                                                                    const EndpointProfile& profile) {
  if (!explicit_url.empty()) return ServiceEndpoint{std::string(explicit_url), "--endpoint"};
  auto configured = configured_endpoint(service, environment, profile);
  if (auto* error = std::get_if<std::string>(&configured)) return *error;
  if (auto& url = std::get<std::optional<ServiceEndpoint>>(configured)) return std::move(*url);
  const auto fips = boolean_setting(environment, "AWS_USE_FIPS_ENDPOINT", profile, "use_fips_endpoint");
  if (const auto* error = std::get_if<std::string>(&fips)) return *error;
  const auto dualstack = boolean_setting(environment, "AWS_USE_DUALSTACK_ENDPOINT", profile, "use_dualstack_endpoint");
  if (const auto* error = std::get_if<std::string>(&dualstack)) return *error;
  const bool use_fips = std::get<std::optional<bool>>(fips).value_or(false);
  const bool use_dualstack = std::get<std::optional<bool>>(dualstack).value_or(false);
  const bool region_shaped = !region.empty() && region.size() <= 64 &&
                             region.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string_view::npos &&
                             region.front() != '-' && region.back() != '-';
  if (!region_shaped) {
    return fmt::format("region '{}' is not a region's name (lowercase letters, digits and '-', e.g. eu-west-1)",
                       region);
  }
  const bool china = region.starts_with("cn-");
  const std::string_view suffix = use_dualstack ? (china ? "api.amazonwebservices.com.cn" : "api.aws")
                                                : (china ? "amazonaws.com.cn" : "amazonaws.com");
  std::string host{service};
  if (use_fips && region.starts_with("us-gov-")) {
    // GovCloud's DynamoDB endpoints are FIPS endpoints under the plain name
    // (botocore's endpoint rules); other services' are not looked up here.
    if (service != "dynamodb") {
      return fmt::format("AWS_USE_FIPS_ENDPOINT in {}: leaseproof knows GovCloud's FIPS endpoint of dynamodb only; "
                         "give {}'s with --endpoint or {}",
                         region, service, endpoint_variable(service));
    }
  } else if (use_fips) {
    host += "-fips";
  }
  std::string origin = fmt::format("region {}", region);
  if (use_fips) origin += ", FIPS";
  if (use_dualstack) origin += ", dual-stack";
  return ServiceEndpoint{fmt::format("https://{}.{}.{}", host, region, suffix), std::move(origin)};
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
