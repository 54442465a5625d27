#pragma once
// `leaseproof worker` (the lease and resume cores in a real process) and
// `leaseproof control` (tables and connections in the same endpoint).

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace leaseproof::cli {

// What both commands say about the endpoint and the tables.
struct EndpointArgs {
  std::string endpoint;  // --endpoint; empty: AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, else the region's
  std::string region;    // --region; empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1
  std::string ca_file;   // --ca-file; empty: AWS_CA_BUNDLE, else the system's trust store
  std::string table = "connections";
  std::string sink_table = "records";
  std::string profile;  // --profile: the credentials' profile (docs/credentials.md)
};

// Release notices: `worker --sqs-endpoint --release-queue`, `control create-queue`.
struct SqsArgs {
  std::string sqs_endpoint;   // worker and create-queue; empty: AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL, the region's
  std::string release_queue;  // worker
  std::string queue;          // create-queue
  std::string visibility = "30s";
};

struct WorkerArgs {
  EndpointArgs endpoint;
  std::string worker_id;
  std::string hub;
  std::string lease = "20s";
  std::string heartbeat = "5s";
  std::string margin = "2s";
  std::string request_timeout = "2s";
  std::string reconcile = "60s";
  std::string expiry = "wall";
  std::string algorithm = "core";
  uint32_t capacity = 700;
  std::string record_mode = "put";
  uint32_t pack_bytes = 8 * 1024;
  uint32_t record_batch = 25;
  std::string record_linger = "0s";
  uint64_t seed = 0;
  std::string drain_timeout = "10s";
  std::string http;  // ADDR:PORT of /healthz and /metrics ("" none)
  std::string port_file;
  SqsArgs sqs;
};

struct ControlArgs {
  EndpointArgs endpoint;
  std::string connections;  // "c0..c99" or "c7"
  std::string url;          // ws_url of started connections
  std::string algorithm = "core";  // the table's index and the items' shape follow it
  SqsArgs sqs;                     // create-queue
  bool json = false;               // owners: one JSON object per connection
  std::string registry_table;      // create-tables: also the connection registry's (seed 003), by this name
};

struct ControlCommands {
  CLI::App* create_tables = nullptr;
  CLI::App* start = nullptr;
  CLI::App* stop = nullptr;
  CLI::App* create_queue = nullptr;
  CLI::App* owners = nullptr;
};

CLI::App* add_worker_command(CLI::App& app, WorkerArgs& args);
ControlCommands add_control_command(CLI::App& app, ControlArgs& args);
int worker_command(const WorkerArgs& args);
int control_command(const ControlCommands& commands, const ControlArgs& args);

}  // namespace leaseproof::cli
