#pragma once
// The real-process commands (docs/runtime.md): `hub`, `subscribe` and
// `relay` run the resume core on loopback sockets with real time.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace leaseproof::cli {

struct HubArgs {
  std::string listen = "127.0.0.1:0";
  std::string port_file;
  uint64_t epoch = 0;
  std::string ping_interval = "2s";
  std::string pong_timeout = "4s";
  std::string write_deadline = "10s";
  std::string subscribe_timeout = "10s";
  uint64_t queue_bytes = 1ull << 20;
  uint32_t ring_messages = 10'000;
  uint64_t ring_bytes = 16ull << 20;
  uint32_t replay_max = 0;  // 0: min(5000, ring_messages)
  std::vector<std::string> publish;
  int shutdown_code = 1001;
  bool admin = false;
  size_t connections_max = 20'000;
  std::string redis;  // HOST:PORT of a store shared with other hubs
  std::string redis_prefix = "leaseproof";
  std::string sessions;  // --sessions FILE
  std::string tls_cert;  // --tls-cert FILE: serve wss:// and https:// with it
  std::string tls_key;
  unsigned threads = 0;  // 0: the machine's cores (1 with --redis)
};

struct SubscribeArgs {
  std::string url;
  std::string channel;
  uint32_t count = 1;
  std::string sink;
  bool no_read = false;
  bool no_jitter = false;
  std::string reconnect_base = "500ms";
  std::string restart_base;  // after 1012
  std::string reconnect_cap = "30s";
  std::string record_linger = "0s";
  uint32_t record_batch = 25;
  std::string hub_silence = "10s";
  std::string duration;
  int64_t until_seq = 0;
  std::string stats_interval;
  uint64_t seed = 0;
  std::string summary_path;
  bool bug_cursor_on_receive = false;
  std::string ca_file;  // wss://: trust these CAs instead of the system's store
};

struct RelayArgs {
  std::string listen = "127.0.0.1:0";
  std::vector<std::string> to;  // tried in order for each connection: primary first, then fail over
  std::string idle = "2.5s";
  std::string port_file;
};

CLI::App* add_hub_command(CLI::App& app, HubArgs& args);
CLI::App* add_subscribe_command(CLI::App& app, SubscribeArgs& args);
CLI::App* add_relay_command(CLI::App& app, RelayArgs& args);
int hub_command(const HubArgs& args);
int subscribe_command(const SubscribeArgs& args);
int relay_command(const RelayArgs& args);

}  // namespace leaseproof::cli
