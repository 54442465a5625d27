// `leaseproof worker` and `leaseproof control` (worker_commands.hpp).
#include "cli/worker_commands.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/cli_common.hpp"
#include "cli/process_common.hpp"
#include "cli/runtime_commands.hpp"
#include "base/lex_compare.hpp"
#include "core/lease/config.hpp"
#include "core/dynamo/codec.hpp"
#include "core/lease/requests.hpp"
#include "core/registry/requests.hpp"
#include "core/resume/recording.hpp"
#include "runtime/aws/aws_credentials.hpp"
#include "runtime/clock.hpp"
#include "runtime/aws/dynamo_http_client.hpp"
#include "runtime/aws/sqs_client.hpp"
#include "runtime/worker/status_server.hpp"
#include "runtime/worker/worker.hpp"

namespace leaseproof::cli {
namespace {

namespace asio = boost::asio;

// Where a request goes and how it is trusted and signed, as AWS SDKs decide
// (docs/credentials.md): the region, the credentials' profile, the CAs.
void add_aws_flags(CLI::App* command, EndpointArgs& args) {
  command->add_option("--region", args.region,
                      "AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1)")
      ->type_name("REGION");
  command->add_option("--profile", args.profile,
                      "Credentials profile (default: AWS_PROFILE, else 'default'); docs/credentials.md")
      ->type_name("NAME");
  command->add_option("--ca-file", args.ca_file,
                      "PEM file of the CAs to trust for https:// endpoints (default: AWS_CA_BUNDLE, else the "
                      "system's store)")
      ->type_name("FILE");
}

void add_endpoint_flags(CLI::App* command, EndpointArgs& args) {
  command->add_option("--endpoint", args.endpoint,
                      "DynamoDB endpoint, http:// or https:// (default: AWS_ENDPOINT_URL_DYNAMODB, "
                      "AWS_ENDPOINT_URL, else https://dynamodb.REGION.amazonaws.com)")
      ->type_name("URL");
  add_aws_flags(command, args);
  command->add_option("--table", args.table, "Lease table")->capture_default_str();
  command->add_option("--sink-table", args.sink_table, "Table the streams record into")->capture_default_str();
}

bool is_aws_host(std::string_view url) {
  const auto scheme = url.find("://");
  std::string_view host = scheme == std::string_view::npos ? url : url.substr(scheme + 3);
  host = host.substr(0, host.find_first_of(":/"));
  // The dual-stack hosts too (AWS_USE_DUALSTACK_ENDPOINT).
  for (const std::string_view suffix : {".amazonaws.com", ".amazonaws.com.cn", ".api.aws", ".api.amazonwebservices.com.cn"}) {
    if (host.ends_with(suffix)) return true;
  }
  return false;
}

// The verifying TLS context every https:// client of the process shares: the
// CAs of --ca-file, else of AWS_CA_BUNDLE, else the system's store.
runtime::TlsContextPtr tls_context(const EndpointArgs& args) {
  const runtime::Environment environment = runtime::process_environment();
  const auto bundle = environment.find("AWS_CA_BUNDLE");
  const std::string ca_file =
      runtime::resolve_ca_file(args.ca_file, bundle == environment.end() ? std::string_view{} : bundle->second);
  auto made = runtime::make_tls_client_context({.ca_file = ca_file});
  if (auto* error = std::get_if<std::string>(&made)) {
    throw UsageError{fmt::format("{}: {}", args.ca_file.empty() ? "AWS_CA_BUNDLE" : "--ca-file", *error)};
  }
  return std::get<runtime::TlsContextPtr>(made);
}

// Credentials and region found as AWS SDKs find them (environment, profile
// files, the ECS container endpoint: docs/credentials.md). None found at all:
// the local placeholder, which dynalite and fauxqs accept (they check the
// signature's shape only), but never for an AWS host, which would refuse
// every request, nor when a profile was named (--profile, AWS_PROFILE): its
// user asked for real credentials. A source set up but broken is an error.
runtime::ResolvedCredentials resolve_credentials(const EndpointArgs& args, const std::string& region,
                                                 std::string_view endpoint_url) {
  runtime::CredentialsChainOptions chain;
  chain.profile = args.profile;
  chain.region = region;                  // STS's, for web identity
  chain.tls_context = tls_context(args);  // STS, for web identity
  const runtime::CredentialsResult found = runtime::resolve_credentials_blocking(chain);
  if (found.ok()) {
    fmt::print(stderr, "leaseproof: credentials from {}, region {}\n", found.value().description, region);
    return found.value();
  }
  const runtime::Environment environment = runtime::process_environment();
  const auto aws_profile = environment.find("AWS_PROFILE");
  const bool profile_named = !args.profile.empty() || (aws_profile != environment.end() && !aws_profile->second.empty());
  if (found.error().detail.starts_with("no AWS credentials found") && !profile_named && !is_aws_host(endpoint_url)) {
    runtime::ResolvedCredentials placeholder;
    placeholder.description = "the local placeholder (none found)";
    return placeholder;
  }
  throw UsageError{fmt::format("credentials: {}", found.error().detail)};
}

// --region, else as AWS SDKs find it: the endpoint and the signature's scope use it.
std::string resolve_region_flag(const EndpointArgs& args) {
  runtime::CredentialsChainOptions chain;
  chain.profile = args.profile;
  return args.region.empty() ? runtime::resolve_region(chain) : args.region;
}

// The endpoint of `service` ("dynamodb", "sqs"), or a usage error naming
// where the URL came from.
std::string service_endpoint(std::string_view service, std::string_view flag_name, const std::string& flag,
                             const std::string& region, const std::string& profile) {
  runtime::CredentialsChainOptions chain;
  chain.profile = profile;
  auto resolved = runtime::resolve_service_endpoint(service, flag, region, runtime::process_environment(),
                                                    runtime::endpoint_profile(chain));
  if (auto* error = std::get_if<std::string>(&resolved)) {
    // A region of the wrong shape came from --region or its defaults; the
    // rest names its own variable or profile key.
    throw UsageError{fmt::format("{}: {}", error->starts_with("region '") ? "--region" : fmt::format("{} endpoint", service),
                                 *error)};
  }
  const auto& endpoint = std::get<runtime::ServiceEndpoint>(resolved);
  const std::string_view origin = endpoint.origin == "--endpoint" ? flag_name : std::string_view(endpoint.origin);
  if (!endpoint.url.starts_with("http://") && !endpoint.url.starts_with("https://")) {
    throw UsageError{fmt::format("{}: '{}' is not an http:// or https:// URL", origin, endpoint.url)};
  }
  fmt::print(stderr, "leaseproof: {} endpoint {} (from {})\n", service, endpoint.url, origin);
  return endpoint.url;
}

runtime::DynamoHttpClientOptions client_options(const EndpointArgs& args,
                                                runtime::ResolvedCredentials* resolved = nullptr) {
  runtime::DynamoHttpClientOptions options;
  options.region = resolve_region_flag(args);
  options.endpoint_url = service_endpoint("dynamodb", "--endpoint", args.endpoint, options.region, args.profile);
  options.tls_context = tls_context(args);
  runtime::ResolvedCredentials found = resolve_credentials(args, options.region, options.endpoint_url);
  options.credentials = found.credentials;
  if (resolved != nullptr) *resolved = std::move(found);
  return options;
}

// `control create-queue`: the FIFO release queue; prints its URL.
int create_queue_command(const SqsArgs& args, const EndpointArgs& aws) {
  runtime::SqsClientOptions options;
  options.region = resolve_region_flag(aws);
  options.endpoint_url = service_endpoint("sqs", "--sqs-endpoint", args.sqs_endpoint, options.region, aws.profile);
  options.tls_context = tls_context(aws);
  if (!args.queue.ends_with(".fifo") || args.queue.size() <= 5) {
    throw UsageError{fmt::format("--queue: '{}' is not a FIFO queue's name (NAME.fifo)", args.queue)};
  }
  runtime::SqsCreateQueueRequest request;
  request.name = args.queue;
  request.visibility_timeout = parse_positive_duration(args.visibility, "--visibility");
  if (!(request.visibility_timeout % Duration::from_s(1)).is_zero() ||
      request.visibility_timeout > runtime::kSqsVisibilityTimeoutMax) {
    throw UsageError{fmt::format("--visibility: '{}' must be whole seconds, at most 12h", args.visibility)};
  }
  options.credentials = resolve_credentials(aws, options.region, options.endpoint_url).credentials;
  runtime::BlockingSqsClient client(options);
  const runtime::SqsResult<std::string> url = client.create_queue(request);
  if (!url.ok()) {
    fmt::print(stderr, "leaseproof control: CreateQueue {} failed: {}\n", args.queue, url.error().describe());
    return kExitFailed;
  }
  print_line(url.value());
  return 0;
}

// "c0..c99" -> c0, c1, ..., c99; "c7" -> c7.
std::vector<std::string> parse_connections(const std::string& text) {
  const auto dots = text.find("..");
  if (dots == std::string::npos) {
    if (text.empty()) throw UsageError{"--connections: must not be empty"};
    return {text};
  }
  auto split = [&](std::string_view part) -> std::pair<std::string, uint64_t> {
    size_t digits = part.size();
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(part[digits - 1]))) --digits;
    if (digits == part.size() || part.size() - digits > 6) {
      throw UsageError{fmt::format("--connections: '{}' is not PREFIXa..PREFIXb, e.g. c0..c99", text)};
    }
    return {std::string{part.substr(0, digits)}, std::stoull(std::string{part.substr(digits)})};
  };
  const auto [prefix_a, a] = split(std::string_view{text}.substr(0, dots));
  const auto [prefix_b, b] = split(std::string_view{text}.substr(dots + 2));
  if (prefix_a != prefix_b || a > b || b - a >= 100'000) {
    throw UsageError{fmt::format("--connections: '{}': same prefix, first <= last, at most 100000", text)};
  }
  std::vector<std::string> out;
  for (uint64_t i = a; i <= b; ++i) out.push_back(fmt::format("{}{}", prefix_a, i));
  return out;
}

lease::LeaseConfig lease_config(const EndpointArgs& args) {
  lease::LeaseConfig config;
  config.table.name = args.table;
  return config;
}

// One request, answered or failed with a message; "" when it succeeded.
std::string call(runtime::BlockingDynamoHttpClient& client, const dynamo::Request& request, bool exists_ok) {
  const dynamo::Operation operation = dynamo::operation_of(request);
  const runtime::DynamoHttpResult result = client.call(std::string{dynamo::operation_name(operation)}, dynamo::encode(request));
  if (!result.ok()) return fmt::format("{}: {}", runtime::to_string(result.error().kind), result.error().detail);
  if (result.response().is_success()) return {};
  const std::string type = result.response().error_type();
  if (exists_ok && type == "ResourceInUseException") return {};
  return fmt::format("{} ({})", type, result.response().body.dump());
}

bool condition_failed(const std::string& error) { return error.starts_with("ConditionalCheckFailedException"); }

// Names, the first 20 of them, for one line.
std::string some_of(const std::vector<std::string>& names) {
  constexpr size_t kShown = 20;
  const std::vector<std::string> shown(names.begin(), names.begin() + std::min(names.size(), kShown));
  return fmt::format("{}{}", fmt::join(shown, " "), names.size() > kShown ? fmt::format(" (+{} more)", names.size() - kShown) : "");
}

// `control start` and `control stop` over a list of connections, each
// attempted whatever happened to the others. Start creates a connection, or
// starts a STOPPED one again, and reports one already STARTED without
// failing; stop stops one that exists. Every failure is named on stderr;
// exit 1 when there was one.
int start_or_stop(runtime::BlockingDynamoHttpClient& client, const lease::LeaseConfig& config, bool start,
                  const std::vector<std::string>& connections, const std::string& url) {
  size_t created = 0, restarted = 0, stopped = 0;
  std::vector<std::string> already, failed;
  for (const std::string& connection : connections) {
    std::string error = call(client,
                             start ? lease::create_connection_request(config, connection, url)
                                   : lease::stop_connection_request(config, connection),
                             false);
    if (error.empty()) {
      ++(start ? created : stopped);
      continue;
    }
    if (start && condition_failed(error)) {  // it exists: STOPPED is started again, STARTED is left
      error = call(client, lease::restart_connection_request(config, connection, url), false);
      if (error.empty()) {
        ++restarted;
        continue;
      }
      if (condition_failed(error)) {
        already.push_back(connection);
        continue;
      }
    } else if (condition_failed(error)) {
      error = "no such connection";
    }
    fmt::print(stderr, "leaseproof control: {} {}: {}\n", start ? "start" : "stop", connection, error);
    failed.push_back(connection);
  }
  if (start) {
    print_line(fmt::format("control: start {} connection(s): created {}, started again {} (were STOPPED), already "
                           "started {}{}",
                           connections.size(), created, restarted, already.size(),
                           already.empty() ? "" : fmt::format(" ({})", some_of(already))));
  } else {
    print_line(fmt::format("control: stopped {} of {} connection(s)", stopped, connections.size()));
  }
  if (failed.empty()) return 0;
  fmt::print(stderr, "leaseproof control: {} failed for {} of {} connection(s): {}\n", start ? "start" : "stop",
             failed.size(), connections.size(), some_of(failed));
  return kExitFailed;
}

// The registry's rows carry `expiresAt` (epoch seconds): DynamoDB's TTL
// deletes them once past it (seed 003's cleanup of lost $disconnects). An
// endpoint without UpdateTimeToLive (dynalite) is told, not fatal: the
// registry's reads filter expired rows anyway, only the deletes are missing.
int enable_registry_ttl(runtime::BlockingDynamoHttpClient& client, const std::string& table) {
  const nlohmann::json request{{"TableName", table},
                               {"TimeToLiveSpecification", {{"AttributeName", "expiresAt"}, {"Enabled", true}}}};
  const runtime::DynamoHttpResult result = client.call("UpdateTimeToLive", request);
  if (!result.ok()) {
    fmt::print(stderr, "leaseproof control: UpdateTimeToLive {}: {}: {}\n", table,
               runtime::to_string(result.error().kind), result.error().detail);
    return kExitFailed;
  }
  const runtime::DynamoHttpResponse& response = result.response();
  const std::string message = response.body.value("message", response.body.value("Message", std::string{}));
  if (response.is_success() || (response.error_type() == "ValidationException" &&
                                message.find("already enabled") != std::string::npos)) {
    print_line(fmt::format("control: TTL on {}.expiresAt enabled", table));
    return 0;
  }
  if (response.error_type() == "UnknownOperationException") {
    print_line(fmt::format("control: TTL on {}.expiresAt not enabled: the endpoint has no UpdateTimeToLive "
                           "(dynalite has none); expired rows stay until deleted, the registry's reads skip them",
                           table));
    return 0;
  }
  fmt::print(stderr, "leaseproof control: UpdateTimeToLive {}: {} ({})\n", table, response.error_type(),
             response.body.dump());
  return kExitFailed;
}

// `control owners`: every lease item, read with a consistent Scan, page by
// page (a Scan's answer has a Query's shape: Items, Count, LastEvaluatedKey).
int owners_command(runtime::BlockingDynamoHttpClient& client, const lease::LeaseConfig& config, bool json) {
  std::vector<lease::LeaseView> leases;
  std::map<std::string, lease::LivenessView, std::less<>> workers;  // liveness items, by worker
  nlohmann::json request{{"TableName", config.table.name}, {"ConsistentRead", true}};
  constexpr size_t pages_max = 10'000;  // 1 MB pages: far beyond any table this is for
  for (size_t page = 0;; ++page) {
    if (page == pages_max) {
      fmt::print(stderr, "leaseproof control: owners: more than {} pages; stopped\n", pages_max);
      return kExitFailed;
    }
    const runtime::DynamoHttpResult result = client.call("Scan", request);
    if (!result.ok()) {
      fmt::print(stderr, "leaseproof control: Scan {}: {}: {}\n", config.table.name,
                 runtime::to_string(result.error().kind), result.error().detail);
      return kExitFailed;
    }
    if (!result.response().is_success()) {
      fmt::print(stderr, "leaseproof control: Scan {}: {} ({})\n", config.table.name, result.response().error_type(),
                 result.response().body.dump());
      return kExitFailed;
    }
    const dynamo::Result<dynamo::Response> decoded =
        dynamo::decode_response(dynamo::Operation::query, result.response().body);
    if (!decoded.ok()) {
      fmt::print(stderr, "leaseproof control: Scan {}: an answer that is not a Scan's: {}\n", config.table.name,
                 decoded.error().message);
      return kExitFailed;
    }
    const auto& answer = std::get<dynamo::QueryResponse>(decoded.value());
    for (const dynamo::Item& item : answer.items.value_or(std::vector<dynamo::Item>{})) {
      if (auto view = lease::parse_lease(item)) {
        leases.push_back(std::move(*view));
      } else if (auto worker = lease::parse_liveness(item)) {
        workers.emplace(worker->worker, std::move(*worker));
      }
    }
    if (!answer.last_evaluated_key) break;
    request["ExclusiveStartKey"] = result.response().body["LastEvaluatedKey"];
  }
  // The liveness algorithm's leases live by their owner's liveness item: a
  // lease's expiry is the item's while it is the incarnation the lease names.
  // A lease whose owner has no such item is the core algorithm's (its
  // owner_incarnation names a process, not an item's incarnation).
  for (lease::LeaseView& v : leases) {
    const auto found = workers.find(v.owner);
    if (v.owner_incarnation == 0 || found == workers.end()) continue;
    const bool current = found != workers.end() && found->second.live && found->second.incarnation == v.owner_incarnation;
    v.expires_at_ms = current ? found->second.expires_at_ms : 0;
  }
  std::sort(leases.begin(), leases.end(), [](const auto& a, const auto& b) { return LexLess{}(a.connection, b.connection); });
  const int64_t now_ms = runtime::wall_now_ns() / 1'000'000;
  std::map<std::string, size_t> by_owner;
  size_t started = 0, held = 0;
  if (!json) {
    print_line(fmt::format("{:<24} {:<8} {:<16} {:>6} {:>10} {:>8} {}", "connection", "state", "owner", "epoch",
                           "expires_in", "counter", "checkpoint"));
  }
  for (const lease::LeaseView& v : leases) {
    const bool live = !v.owner.empty() && v.expires_at_ms > now_ms;
    started += v.desired_state == "STARTED";
    if (live) {
      ++held;
      ++by_owner[v.owner];
    }
    const std::string expires = v.owner.empty() ? "-" : fmt::format("{:.1f}s", (v.expires_at_ms - now_ms) / 1e3);
    if (json) {
      print_line(nlohmann::json{{"connection", v.connection}, {"desired_state", v.desired_state}, {"owner", v.owner},
                                {"owner_incarnation", v.owner_incarnation}, {"lease_epoch", v.epoch},
                                {"expires_at_ms", v.expires_at_ms},
                                {"expires_in_ms", v.owner.empty() ? 0 : v.expires_at_ms - now_ms},
                                {"lease_counter", v.counter}, {"stream_epoch", v.stream_epoch},
                                {"last_seq", v.last_seq}, {"ws_url", v.ws_url}}
                     .dump());
    } else {
      print_line(fmt::format("{:<24} {:<8} {:<16} {:>6} {:>10} {:>8} {}:{}", v.connection, v.desired_state,
                             v.owner.empty() ? "-" : v.owner, v.epoch, expires, v.counter, v.stream_epoch, v.last_seq));
    }
  }
  if (!json) {
    std::string owners;
    for (const auto& [owner, count] : by_owner) owners += fmt::format("{}{} {}", owners.empty() ? "" : ", ", owner, count);
    print_line(fmt::format("control: {} connections, {} STARTED, {} held by a lease not yet expired by this machine's "
                           "wall clock{}{}",
                           leases.size(), started, held, owners.empty() ? "" : ": ", owners));
  }
  return 0;
}

// The worker's options from the flags, then from the endpoint and
// credentials (which may ask the network); the credentials found go to
// `credentials`.
runtime::WorkerOptions worker_options(const WorkerArgs& args, runtime::ResolvedCredentials& credentials) {
  runtime::WorkerOptions options;
  options.host.worker_id = args.worker_id;
  options.hub_override = args.hub;
  options.host.seed = args.seed;
  lease::LeaseConfig& lease = options.host.lease;
  lease = lease_config(args.endpoint);
  lease.algorithm = lease::parse_algorithm(args.algorithm).value_or(lease::Algorithm::core);
  lease.expiry_mode = args.expiry == "counter" ? lease::ExpiryMode::counter : lease::ExpiryMode::wall;
  lease.lease_duration = parse_positive_duration(args.lease, "--lease");
  lease.heartbeat_interval = parse_positive_duration(args.heartbeat, "--heartbeat");
  lease.safety_margin = parse_positive_duration(args.margin, "--margin");
  lease.request_timeout = parse_positive_duration(args.request_timeout, "--request-timeout");
  lease.reconcile_interval = parse_positive_duration(args.reconcile, "--reconcile");
  // The jitter (5 s by default) may not exceed the interval itself.
  lease.reconcile_jitter_max = std::min(lease.reconcile_jitter_max, lease.reconcile_interval);
  lease.capacity = args.capacity;
  options.session.mode = args.record_mode == "transact" ? resume::RecordMode::transact
                         : args.record_mode == "packed" ? resume::RecordMode::packed
                                                        : resume::RecordMode::put;
  options.session.pack_bytes = args.pack_bytes;
  options.session.client.record_batch_max = args.record_batch;
  const std::optional<Duration> linger = parse_duration(args.record_linger);
  if (!linger || linger->is_negative() || *linger > Duration::from_s(30)) {
    throw UsageError{fmt::format("--record-linger: '{}' is not a duration from 0s to 30s", args.record_linger)};
  }
  options.session.client.record_linger = *linger;
  options.session.sink.name = args.endpoint.sink_table;
  options.host.drain_timeout = parse_positive_duration(args.drain_timeout, "--drain-timeout");
  if (std::string e = lease.validate(); !e.empty()) throw UsageError{e};
  // Flags first, then the endpoint and credentials (which may ask the network).
  options.host.dynamo = client_options(args.endpoint, &credentials);
  const SqsArgs& sqs = args.sqs;
  if (!sqs.sqs_endpoint.empty() && sqs.release_queue.empty()) {
    throw UsageError{"--sqs-endpoint: goes with --release-queue"};
  }
  if (!sqs.release_queue.empty()) {
    options.host.sqs_endpoint =
        service_endpoint("sqs", "--sqs-endpoint", sqs.sqs_endpoint, options.host.dynamo.region, args.endpoint.profile);
    options.host.release_queue = sqs.release_queue;
  }

  return options;
}

// Credentials that expire (the container endpoint's) are refreshed on the
// worker's io_context; until the chain's first answer, the ones found at
// start. Null when they do not expire.
std::unique_ptr<runtime::CredentialsChain> refresh_credentials(asio::io_context& io, const WorkerArgs& args,
                                                               const runtime::ResolvedCredentials& credentials,
                                                               runtime::WorkerOptions& options) {
  if (!credentials.expiration_wall_ns) return nullptr;
  runtime::CredentialsChainOptions chain_options;
  chain_options.profile = args.endpoint.profile;
  chain_options.tls_context = options.host.dynamo.tls_context;
  // Every failed refresh is a log line (the old credentials stay in use
  // until they expire), and so is the success that ends a run of failures.
  chain_options.on_refresh = [worker_id = args.worker_id, failing = false](
                                 const runtime::CredentialsResult& result) mutable {
    if (result.ok() && !failing) return;
    nlohmann::json line{{"event", "credentials.refresh"}, {"worker", worker_id}, {"ok", result.ok()}};
    if (!result.ok()) line["error"] = result.error().detail;
    failing = !result.ok();
    print_line(line.dump());
  };
  auto chain = std::make_unique<runtime::CredentialsChain>(io, chain_options);
  chain->start([](const runtime::CredentialsResult& result) {
    if (!result.ok()) fmt::print(stderr, "leaseproof worker: credentials refresh: {}\n", result.error().detail);
  });
  options.host.credentials_stats = [stats = chain.get()] { return stats->stats(); };
  options.host.dynamo.credentials_source = [source = chain->source(), initial = credentials.credentials] {
    runtime::DynamoCredentials current = source();
    return current.access_key_id.empty() ? initial : current;
  };
  return chain;
}

}  // namespace

CLI::App* add_worker_command(CLI::App& app, WorkerArgs& args) {
  CLI::App* worker = app.add_subcommand("worker", std::string{runtime_command_description("worker")});
  add_endpoint_flags(worker, args.endpoint);
  worker->add_option("--worker-id", args.worker_id, "This worker's id (unique in the fleet)")->required();
  worker->add_option("--hub", args.hub, "Stream from this hub (ws:// or wss://HOST[:PORT]/) instead of each lease item's ws_url");
  worker->add_option("--lease", args.lease, "Lease duration")->capture_default_str();
  worker->add_option("--heartbeat", args.heartbeat, "Renew interval")->capture_default_str();
  worker->add_option("--margin", args.margin, "Safety margin (wall mode tolerates 2 x margin of skew)")
      ->capture_default_str();
  worker->add_option("--request-timeout", args.request_timeout, "DynamoDB request timeout")->capture_default_str();
  worker->add_option("--reconcile", args.reconcile, "Reconcile interval")->capture_default_str();
  worker->add_option("--expiry", args.expiry, "Expiry judged by: wall or counter")
      ->capture_default_str()
      ->check(CLI::IsMember({"wall", "counter"}));
  worker->add_option("--algorithm", args.algorithm,
                     "core (a renew per lease), liveness (one heartbeat item per worker) or seed (the articles', "
                     "to show it break)")
      ->capture_default_str()
      ->check(CLI::IsMember({"core", "liveness", "seed"}));
  worker->add_option("--capacity", args.capacity, "Connections this worker may own")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100'000u));
  worker->add_option("--record-mode", args.record_mode,
                     "put (works on dynalite), transact, or packed (consecutive messages in one sink item)")
      ->capture_default_str()
      ->check(CLI::IsMember({"put", "transact", "packed"}));
  worker->add_option("--pack-bytes", args.pack_bytes, "packed: a pack item's size limit, in bytes")
      ->capture_default_str()
      ->check(CLI::Range(resume::kPackBytesMin, resume::kPackBytesMax));
  worker->add_option("--record-batch", args.record_batch, "Messages recorded (and checkpointed) together at most")
      ->capture_default_str()
      ->check(CLI::Range(1u, 99u));
  worker->add_option("--record-linger", args.record_linger,
                     "How long a partial batch waits for more messages (0s..30s; packed: about the time a pack "
                     "takes to fill)")
      ->capture_default_str();
  worker->add_option("--seed", args.seed, "Seed of the jitter (default: from the OS)");
  worker->add_option("--drain-timeout", args.drain_timeout, "SIGTERM: drain at most this long")->capture_default_str();
  worker->add_option("--http", args.http, "Serve GET /healthz and /metrics here (port 0: the system picks)")
      ->type_name("ADDR:PORT");
  worker->add_option("--port-file", args.port_file, "With --http: write the bound port to FILE")->type_name("FILE");
  worker->add_option("--sqs-endpoint", args.sqs.sqs_endpoint,
                     "SQS endpoint of --release-queue, http:// or https:// (default: AWS_ENDPOINT_URL_SQS, "
                     "AWS_ENDPOINT_URL, else https://sqs.REGION.amazonaws.com)")
      ->type_name("URL");
  worker->add_option("--release-queue", args.sqs.release_queue,
                     "FIFO queue (NAME.fifo, made by 'control create-queue') that release notices go through "
                     "(none: reconcile only)")
      ->type_name("NAME");
  return worker;
}

int worker_command(const WorkerArgs& args) {
  runtime::ResolvedCredentials credentials;
  runtime::WorkerOptions options = worker_options(args, credentials);
  asio::io_context io;
  const std::unique_ptr<runtime::CredentialsChain> chain = refresh_credentials(io, args, credentials, options);
  std::unique_ptr<runtime::Worker> worker;
  try {
    worker = std::make_unique<runtime::Worker>(io, options, print_line);
  } catch (const std::invalid_argument& e) {
    throw UsageError{e.what()};
  }
  std::unique_ptr<runtime::StatusServer> status;
  if (!args.http.empty()) {
    const auto [host, port] = parse_address(args.http, "--http");
    try {
      status = std::make_unique<runtime::StatusServer>(
          io, host, port,
          // /healthz: alive (also while draining: a liveness probe must not
          // kill a drain); /readyz: ready to hold leases (LeaseHost::readiness).
          runtime::StatusServer::Routes{[] { return true; }, [&] { return worker->readiness(); },
                                        [&] { return worker->metrics_text(); }});
    } catch (const std::system_error& e) {
      throw UsageError{fmt::format("--http: {}", e.what())};
    }
    write_port_file(args.port_file, status->port());
  } else if (!args.port_file.empty()) {
    throw UsageError{"--port-file: goes with --http"};
  }
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    worker->drain([&] { io.stop(); });
  });
  worker->start();
  io.run();
  const runtime::LeaseHostCounters& h = worker->host_counters();
  const runtime::WorkerCounters& c = worker->counters();
  print_line(fmt::format(R"({{"event":"worker.stop","worker":"{}","sessions_opened":{},"records":{},"fenced":{},"dynamo_calls":{},"dynamo_transport_errors":{}}})",
                         args.worker_id, h.gained, c.records, c.fenced, h.dynamo_calls, h.dynamo_transport_errors));
  return 0;
}

ControlCommands add_control_command(CLI::App& app, ControlArgs& args) {
  CLI::App* control = app.add_subcommand("control", std::string{runtime_command_description("control")});
  control->require_subcommand(1);
  ControlCommands commands;
  commands.create_tables = control->add_subcommand(
      "create-tables", "Create the lease table (with its GSIs) and the sink table; existing ones are kept");
  commands.create_tables
      ->add_option("--registry-table", args.registry_table,
                   "Also create the connection registry's table (seed 003: GSIs byConnection and byUser; "
                   "docs/registry.md) by this name")
      ->type_name("NAME")
      ->check([](const std::string& name) {
        return name.size() >= 3 && name.size() <= 255 &&
                       name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
                           std::string::npos
                   ? std::string{}
                   : std::string{"a DynamoDB table name: 3 to 255 of a-z A-Z 0-9 _ . -"};
      });
  commands.start = control->add_subcommand("start", "Start connections (desired_state STARTED): workers acquire them");
  commands.stop = control->add_subcommand("stop", "Stop connections: their owners release them");
  CLI::App* create_queue = control->add_subcommand(
      "create-queue", "Create the FIFO queue release notices go through (an existing one is kept); print its URL");
  create_queue->add_option("--sqs-endpoint", args.sqs.sqs_endpoint,
                            "SQS endpoint, http:// or https:// (default: AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL, "
                            "else https://sqs.REGION.amazonaws.com)")
      ->type_name("URL");
  add_aws_flags(create_queue, args.endpoint);
  create_queue->add_option("--queue", args.sqs.queue, "The queue's name; a FIFO queue's ends in .fifo")
      ->required()
      ->type_name("NAME.fifo");
  create_queue->add_option("--visibility", args.sqs.visibility, "The queue's default visibility timeout")
      ->capture_default_str();
  commands.create_queue = create_queue;
  commands.owners = control->add_subcommand(
      "owners", "List every connection: desired state, owner, lease epoch, expiry, stream checkpoint (a consistent Scan)");
  commands.owners->add_flag("--json", args.json, "One JSON object per connection instead of a table");
  for (CLI::App* sub : {commands.create_tables, commands.start, commands.stop, commands.owners}) {
    add_endpoint_flags(sub, args.endpoint);
    sub->add_option("--algorithm", args.algorithm,
                    "The workers' algorithm: core or liveness (the same table and GSI), or seed (the articles' "
                    "GSI and item shape)")
        ->capture_default_str()
        ->check(CLI::IsMember({"core", "liveness", "seed"}));
  }
  for (CLI::App* sub : {commands.start, commands.stop}) {
    sub->add_option("--connections", args.connections, "One id, or a range such as c0..c99")->required();
  }
  commands.start->add_option("--url", args.url, "The upstream each connection streams from")
      ->required()
      ->type_name("ws[s]://HOST[:PORT]/");
  return commands;
}

int control_command(const ControlCommands& commands, const ControlArgs& args) {
  if (commands.create_queue->parsed()) return create_queue_command(args.sqs, args.endpoint);
  runtime::BlockingDynamoHttpClient client(client_options(args.endpoint));
  lease::LeaseConfig config = lease_config(args.endpoint);
  config.algorithm = lease::parse_algorithm(args.algorithm).value_or(lease::Algorithm::core);
  if (commands.owners->parsed()) return owners_command(client, config, args.json);
  if (commands.create_tables->parsed()) {
    resume::SinkTable sink;
    sink.name = args.endpoint.sink_table;
    std::vector<dynamo::Request> requests{lease::create_table_request(config), resume::create_sink_table_request(sink)};
    std::vector<std::string> tables{config.table.name, sink.name};
    if (!args.registry_table.empty()) {
      registry::RegistryConfig registry_config;
      registry_config.table.name = args.registry_table;
      requests.push_back(registry::create_table_request(registry_config));
      tables.push_back(args.registry_table);
    }
    for (const dynamo::Request& request : requests) {
      const std::string error = call(client, request, /*exists_ok=*/true);
      if (!error.empty()) {
        fmt::print(stderr, "leaseproof control: CreateTable failed: {}\n", error);
        return kExitFailed;
      }
    }
    for (const std::string& table : tables) {
      if (!runtime::wait_until_table_active(client, table, Duration::from_s(20))) {
        fmt::print(stderr, "leaseproof control: table {} did not become ACTIVE within 20 s\n", table);
        return kExitFailed;
      }
    }
    print_line(fmt::format("control: tables {} are active", fmt::join(tables, ", ")));
    return args.registry_table.empty() ? 0 : enable_registry_ttl(client, args.registry_table);
  }
  return start_or_stop(client, config, commands.start->parsed(), parse_connections(args.connections), args.url);
}

}  // namespace leaseproof::cli
