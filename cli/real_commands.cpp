// `leaseproof hub`, `subscribe` and `relay`: the runtime/ adapters as
// processes. Each runs one io_context on the main thread until SIGINT or
// SIGTERM (or, for `subscribe`, --duration / --until-seq), then stops cleanly.
#include "cli/real_commands.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/url/parse.hpp>
#include <fmt/format.h>

#include "cli/cli_common.hpp"
#include "cli/process_common.hpp"
#include "cli/runtime_commands.hpp"
#include "runtime/clock.hpp"
#include "runtime/hub/hub_server.hpp"
#include "runtime/hub/relay.hpp"
#include "runtime/hub/subscriber.hpp"

namespace leaseproof::cli {
namespace {

namespace asio = boost::asio;

}  // namespace

CLI::App* add_hub_command(CLI::App& app, HubArgs& args) {
  CLI::App* hub = app.add_subcommand("hub", std::string{runtime_command_description("hub")});
  hub->add_option("--listen", args.listen, "Address to listen on; port 0 lets the system pick")
      ->capture_default_str()
      ->type_name("ADDR:PORT");
  hub->add_option("--port-file", args.port_file, "Write the bound port to FILE once listening")->type_name("FILE");
  hub->add_option("--epoch", args.epoch, "The hub's epoch (default: the wall clock in ms, never repeated by a restart)")
      ->type_name("N");
  hub->add_option("--ping-interval", args.ping_interval, "Ping each subscriber this often")->capture_default_str();
  hub->add_option("--pong-timeout", args.pong_timeout, "Close a subscriber (1006) whose pong is this late")
      ->capture_default_str();
  hub->add_option("--write-deadline", args.write_deadline, "Close a subscriber whose data stays unconsumed this long")
      ->capture_default_str();
  hub->add_option("--subscribe-timeout", args.subscribe_timeout,
                  "Close a WebSocket (1008) that has not subscribed this long after its upgrade")
      ->capture_default_str();
  hub->add_option("--queue-bytes", args.queue_bytes, "Per-subscriber queue bound; a frame past it closes with 1013")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 32));
  hub->add_option("--ring-messages", args.ring_messages, "Messages kept per channel for resume")
      ->capture_default_str()
      ->check(CLI::Range(1u, 10'000'000u));
  hub->add_option("--ring-bytes", args.ring_bytes, "Payload bytes kept per channel for resume")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 34));
  hub->add_option("--replay-max", args.replay_max,
                  "A resume replaying more than this resets (over_limit); default: 5000 or --ring-messages if fewer")
      ->check(CLI::Range(1u, 10'000'000u));
  hub->add_option("--publish", args.publish, "Built-in generator, repeatable: CHANNEL:RATE:SIZE (messages/s, bytes)")
      ->type_name("CHANNEL:RATE:SIZE");
  hub->add_option("--shutdown-code", args.shutdown_code, "Close code on SIGTERM/SIGINT: 1001 going away, 1012 restart")
      ->capture_default_str()
      ->check(CLI::IsMember({1001, 1012}));
  hub->add_flag("--admin", args.admin, "Serve POST /admin/close-all?code=1012 (labs: a close wave without a restart)");
  hub->add_option("--connections-max", args.connections_max, "Connections beyond this are closed at once")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}));
  hub->add_option("--redis", args.redis,
                  "Share channels, rings and the epoch with other hubs through this Redis (default: this process only)")
      ->type_name("ADDR:PORT");
  hub->add_option("--redis-prefix", args.redis_prefix, "Prefix of the shared store's keys")->capture_default_str();
  hub->add_option("--sessions", args.sessions,
                  "Append one JSON line per ended WebSocket session to FILE: worker, lease epoch, first/last frame "
                  "times on the monotonic clock (labs judge ownership from it)")
      ->type_name("FILE");
  hub->add_option("--tls-cert", args.tls_cert,
                  "Serve TLS only (wss://, https:// for /metrics and /publish) with this PEM certificate chain; "
                  "needs --tls-key")
      ->type_name("FILE");
  hub->add_option("--tls-key", args.tls_key, "The PEM private key of --tls-cert")->type_name("FILE");
  hub->add_option("--threads", args.threads,
                  "Shards of the hub, one per thread, 1..64 (default: the machine's cores; 1 with --redis)")
      ->type_name("N")
      ->check(CLI::Range(1u, 64u));
  return hub;
}

int hub_command(const HubArgs& args) {
  runtime::HubServerOptions options;
  std::tie(options.host, options.port) = parse_address(args.listen, "--listen");
  options.epoch = args.epoch;
  options.hub.ping_interval = duration_flag(args.ping_interval, "--ping-interval", false);
  options.hub.pong_timeout = duration_flag(args.pong_timeout, "--pong-timeout", false);
  options.hub.write_deadline = duration_flag(args.write_deadline, "--write-deadline", false);
  options.hub.subscriber_queue_bytes_max = args.queue_bytes;
  options.subscribe_timeout = duration_flag(args.subscribe_timeout, "--subscribe-timeout", false);
  options.hub.ring_messages_max = args.ring_messages;
  options.hub.ring_bytes_max = args.ring_bytes;
  options.hub.replay_messages_max = args.replay_max != 0 ? args.replay_max : std::min(5'000u, args.ring_messages);
  options.admin = args.admin;
  options.connections_max = args.connections_max;
  options.sessions_path = args.sessions;
  if (std::string e = options.hub.validate(); !e.empty()) throw UsageError{e};
  for (const std::string& text : args.publish) {
    auto parsed = runtime::parse_generator(text);
    if (auto* error = std::get_if<std::string>(&parsed)) throw UsageError{"--publish: " + *error};
    options.generators.push_back(std::get<runtime::HubGenerator>(parsed));
  }
  if (!args.redis.empty()) {
    std::tie(options.shared.host, options.shared.port) = parse_address(args.redis, "--redis");
    if (options.shared.port == 0) throw UsageError{"--redis: port 0 is not a Redis to connect to"};
    if (args.redis_prefix.empty() || args.redis_prefix.find_first_of(" {}") != std::string::npos) {
      throw UsageError{fmt::format("--redis-prefix: '{}' must be non-empty, without spaces or braces", args.redis_prefix)};
    }
    options.shared.prefix = args.redis_prefix;
  }
  if (args.threads == 0) {
    options.threads = options.shared.port != 0 ? 1 : std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
  } else if (args.threads > 1 && options.shared.port != 0) {
    throw UsageError{"--threads: more than 1 with --redis is not supported (one thread follows the shared log); run "
                     "more hub processes instead"};
  } else {
    options.threads = args.threads;
  }
  if (!args.port_file.empty()) check_output_file("--port-file", args.port_file);
  if (!args.sessions.empty()) check_output_file("--sessions", args.sessions);
  if (args.tls_cert.empty() != args.tls_key.empty()) {
    throw UsageError{args.tls_cert.empty() ? "--tls-key: needs --tls-cert (the certificate it is the key of)"
                                           : "--tls-cert: needs --tls-key (the certificate's private key)"};
  }
  if (!args.tls_cert.empty()) {
    auto made = runtime::make_tls_server_context(args.tls_cert, args.tls_key);
    if (auto* error = std::get_if<std::string>(&made)) throw UsageError{*error};
    options.tls = std::get<runtime::TlsContextPtr>(made);
  }

  asio::io_context io;
  std::unique_ptr<runtime::HubServer> server;
  try {
    server = std::make_unique<runtime::HubServer>(io, options, print_line);
  } catch (const std::invalid_argument& e) {
    throw UsageError{e.what()};
  } catch (const std::system_error& e) {
    fmt::print(stderr, "leaseproof hub: error: {}\n", e.what());
    return kExitFailed;
  }
  write_port_file(args.port_file, server->port());
  print_line(fmt::format("hub: listening on {}:{}{}, epoch {}, ping {} / pong timeout {}, queue {} B, {} thread{}",
                         options.host, server->port(), options.tls ? " (TLS: wss://, https://)" : "",
                         server->epoch() != 0 ? std::to_string(server->epoch()) : "from the shared store",
                         options.hub.ping_interval, options.hub.pong_timeout, options.hub.subscriber_queue_bytes_max,
                         options.threads, options.threads == 1 ? "" : "s"));
  server->start();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    print_line(fmt::format("hub: signal {}: closing with {}", signal, args.shutdown_code));
    server->shutdown(static_cast<uint16_t>(args.shutdown_code), [&] { io.stop(); });
  });
  io.run();
  const auto& c = server->counters();
  print_line(fmt::format("hub: stopped: {} published, {} data frames written, {} subscribes, {} disconnects",
                         c.published, c.data_frames_written, c.subscribes, c.disconnects));
  return server->failed() ? kExitFailed : 0;
}

CLI::App* add_subscribe_command(CLI::App& app, SubscribeArgs& args) {
  CLI::App* sub = app.add_subcommand("subscribe", std::string{runtime_command_description("subscribe")});
  sub->add_option("URL", args.url, "The hub, e.g. ws://127.0.0.1:8080/ or wss://127.0.0.1:8443/")->required();
  sub->add_option("--channel", args.channel, "Channel to subscribe to")->required();
  sub->add_option("--count", args.count, "Clients in this process (a sink file takes one)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 20'000u));
  sub->add_option("--sink", args.sink,
                  "Record into FILE ('<epoch> <seq>' lines, fdatasync per batch) and resume after its last line "
                  "(default: in memory)")
      ->type_name("FILE");
  sub->add_flag("--no-read", args.no_read, "Subscribe once, then never read (a stuck consumer, for labs)");
  sub->add_flag("--no-jitter", args.no_jitter, "Reconnect after exactly the backoff ceiling (the baseline to compare)");
  sub->add_option("--reconnect-base", args.reconnect_base, "Backoff base")->capture_default_str();
  sub->add_option("--restart-base", args.restart_base, "Backoff base after 1012 (default: --reconnect-base)");
  sub->add_option("--reconnect-cap", args.reconnect_cap, "Backoff ceiling")->capture_default_str();
  sub->add_option("--record-linger", args.record_linger, "How long a partial batch waits for more messages")
      ->capture_default_str();
  sub->add_option("--record-batch", args.record_batch, "Messages per sink write")
      ->capture_default_str()
      ->check(CLI::Range(1u, 99u));
  sub->add_option("--hub-silence", args.hub_silence, "No frame for this long: the hub is dead, reconnect")
      ->capture_default_str();
  sub->add_option("--duration", args.duration, "Stop after this long (default: until a signal or --until-seq)");
  sub->add_option("--until-seq", args.until_seq, "Stop once every client recorded this sequence number")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 53));
  sub->add_option("--stats-interval", args.stats_interval, "Print a JSON stats line this often");
  sub->add_option("--seed", args.seed, "Seed of the reconnect jitter (default: from the OS)");
  sub->add_option("--summary", args.summary_path, "Write the summary as JSON to FILE at exit")->type_name("FILE");
  sub->add_option("--ca-file", args.ca_file,
                  "wss://: trust the CAs in this PEM file instead of the system's store")
      ->type_name("FILE");
  sub->add_flag("--bug-cursor-on-receive", args.bug_cursor_on_receive,
                "Deliberately broken: advance the cursor on receipt, not after recording (labs show it loses "
                "messages)");
  return sub;
}

int subscribe_command(const SubscribeArgs& args) {
  runtime::SubscriberOptions options;
  const auto url = boost::urls::parse_uri(args.url);
  if (!url || (url->scheme() != "ws" && url->scheme() != "wss") || !url->has_port()) {
    throw UsageError{fmt::format("URL: '{}' is not ws://ADDRESS:PORT/PATH or wss://ADDRESS:PORT/PATH", args.url)};
  }
  if (url->scheme() == "wss") {
    auto made = runtime::make_tls_client_context({.ca_file = args.ca_file});
    if (auto* error = std::get_if<std::string>(&made)) throw UsageError{"--ca-file: " + *error};
    options.tls = std::get<runtime::TlsContextPtr>(made);
  } else if (!args.ca_file.empty()) {
    throw UsageError{"--ca-file: only for a wss:// URL"};
  }
  std::tie(options.host, options.port) =
      parse_address(fmt::format("{}:{}", std::string{url->host()}, std::string{url->port()}), "URL");
  options.path = url->encoded_path().empty() ? "/" : std::string{url->encoded_path()};
  options.channel = args.channel;
  options.count = args.count;
  options.sink_path = args.sink;
  options.read = !args.no_read;
  options.seed = args.seed;
  options.until_seq = args.until_seq;
  auto& client = options.client;
  client.jitter = !args.no_jitter;
  client.reconnect_base = duration_flag(args.reconnect_base, "--reconnect-base", false);
  client.reconnect_cap = duration_flag(args.reconnect_cap, "--reconnect-cap", false);
  if (!args.restart_base.empty()) {
    client.reconnect_base_by_code[resume::close_code::service_restart] =
        duration_flag(args.restart_base, "--restart-base", false);
  }
  client.record_linger = duration_flag(args.record_linger, "--record-linger", true);
  client.record_batch_max = args.record_batch;
  client.hub_silence_timeout = duration_flag(args.hub_silence, "--hub-silence", false);
  client.bug_cursor_on_receive = args.bug_cursor_on_receive;
  if (!args.stats_interval.empty()) options.stats_interval = duration_flag(args.stats_interval, "--stats-interval", false);
  if (!args.summary_path.empty()) check_output_file("--summary", args.summary_path);
  std::optional<Duration> duration;
  if (!args.duration.empty()) duration = duration_flag(args.duration, "--duration", false);

  asio::io_context io;
  std::unique_ptr<runtime::SubscriberPool> pool;
  try {
    pool = std::make_unique<runtime::SubscriberPool>(io, options, print_line);
  } catch (const std::invalid_argument& e) {
    throw UsageError{e.what()};
  } catch (const std::system_error& e) {
    fmt::print(stderr, "leaseproof subscribe: error: {}\n", e.what());
    return kExitFailed;
  }
  bool stopping = false;
  auto stop = [&](std::string_view why) {
    if (stopping) return;
    stopping = true;
    print_line(fmt::format("subscribe: stopping ({})", why));
    pool->stop([&] { io.stop(); });
  };
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (!ec) stop(fmt::format("signal {}", signal));
  });
  asio::steady_timer deadline(io);
  if (duration) {
    deadline.expires_after(runtime::to_chrono(*duration));
    deadline.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) stop("--duration reached");
    });
  }
  pool->on_finished([&] { stop(args.until_seq > 0 ? "every cursor reached --until-seq or gave up" : "every client gave up"); });
  print_line(fmt::format("subscribe: {} client(s) of channel {} at {}", options.count, options.channel, args.url));
  pool->start();
  io.run();
  const runtime::SubscriberSummary summary = pool->summary();
  print_line(runtime::summary_text(summary));
  if (!args.summary_path.empty()) {
    std::ofstream out(args.summary_path, std::ios::trunc);
    out << runtime::summary_json(summary) << "\n";
    if (!out) {
      fmt::print(stderr, "leaseproof subscribe: error: cannot write {}\n", args.summary_path);
      return kExitFailed;
    }
  }
  return summary.sink_error.empty() ? 0 : kExitFailed;
}

CLI::App* add_relay_command(CLI::App& app, RelayArgs& args) {
  CLI::App* relay = app.add_subcommand("relay", std::string{runtime_command_description("relay")});
  relay->add_option("--listen", args.listen, "Address to listen on; port 0 lets the system pick")
      ->capture_default_str()
      ->type_name("ADDR:PORT");
  relay->add_option("--to", args.to,
                    "Where to relay to, repeatable: each connection goes to the first that accepts it, in order")
      ->required()
      ->type_name("ADDR:PORT");
  relay->add_option("--idle", args.idle, "Cut a connection with no byte either way for this long")->capture_default_str();
  relay->add_option("--port-file", args.port_file, "Write the bound port to FILE once listening")->type_name("FILE");
  return relay;
}

int relay_command(const RelayArgs& args) {
  runtime::RelayOptions options;
  std::tie(options.listen_host, options.listen_port) = parse_address(args.listen, "--listen");
  if (args.to.empty()) throw UsageError{"--to: at least one ADDR:PORT to relay to"};
  for (const std::string& to : args.to) {
    options.targets.push_back(parse_address(to, "--to"));
    if (options.targets.back().second == 0) {
      throw UsageError{fmt::format("--to: '{}': port 0 is not a place to relay to", to)};
    }
  }
  options.idle = duration_flag(args.idle, "--idle", false);
  if (!args.port_file.empty()) check_output_file("--port-file", args.port_file);
  asio::io_context io;
  std::unique_ptr<runtime::Relay> relay;
  try {
    relay = std::make_unique<runtime::Relay>(io, options, print_line);
  } catch (const std::system_error& e) {
    fmt::print(stderr, "leaseproof relay: error: {}\n", e.what());
    return kExitFailed;
  }
  write_port_file(args.port_file, relay->port());
  std::string targets;  // "A then B": the order each connection tries them in
  for (const auto& [host, port] : options.targets) {
    targets += fmt::format("{}{}:{}", targets.empty() ? "" : " then ", host, port);
  }
  print_line(fmt::format("relay: listening on {}:{}, relaying to {}, idle cut-off {}", options.listen_host,
                         relay->port(), targets, options.idle));
  relay->start();
  asio::signal_set cut(io, SIGUSR1);
  std::function<void()> wait_cut = [&] {
    cut.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      relay->cut_all("SIGUSR1");
      wait_cut();
    });
  };
  wait_cut();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    relay->stop();
    io.stop();
  });
  io.run();
  const auto& c = relay->counters();
  print_line(fmt::format("relay: stopped: {} accepted, {} idle cuts, {} forced cuts, {} connect failures, {} failovers",
                         c.accepted, c.idle_cuts, c.forced_cuts, c.connect_failed, c.failovers));
  return 0;
}

}  // namespace leaseproof::cli
