#include "cli/runtime_commands.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "base/assert.hpp"

namespace leaseproof::cli {
namespace {

constexpr RuntimeCommand kCommands[] = {
    {"hub", "Run the upstream hub: WebSocket subscribers with resume, /publish, /metrics (docs/runtime.md)"},
    {"subscribe", "Run reconnecting subscribers of one channel; record every sequence number once (docs/runtime.md)"},
    {"relay", "Run a TCP relay that cuts connections silent longer than --idle (a load balancer); SIGUSR1 cuts all"},
    {"worker", "Run a worker: hold leases in a DynamoDB endpoint, stream from the hub, record each message once"},
    {"control", "Tables and connections in a DynamoDB endpoint, for real workers"},
    {"dynamo", "The simulated DynamoDB: replay requests to it, to a real endpoint, or to both and compare"},
};

constexpr std::string_view kRuntimeBinary = "leaseproof-runtime";

}  // namespace

std::span<const RuntimeCommand> runtime_commands() { return kCommands; }

std::string_view runtime_command_description(std::string_view name) {
  const auto it = std::find_if(std::begin(kCommands), std::end(kCommands),
                               [name](const RuntimeCommand& c) { return c.name == name; });
  LP_ASSERT_MSG(it != std::end(kCommands), "'{}' is not a runtime command", name);
  return it->description;
}

int forward_runtime_command(int argc, char** argv) {
  if (argc < 2) return -1;
  const std::string_view command = argv[1];
  const bool runtime = std::any_of(std::begin(kCommands), std::end(kCommands),
                                   [command](const RuntimeCommand& c) { return c.name == command; });
  if (!runtime) return -1;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    fmt::print(stderr, "leaseproof: error: '{}' runs in {}, and this binary cannot find its own path: {}\n", command,
               kRuntimeBinary, error.message());
    return 2;
  }
  const std::string binary = (self.parent_path() / kRuntimeBinary).string();
  ::execv(binary.c_str(), argv);  // returns only on failure
  const int why = errno;
  fmt::print(stderr,
             "leaseproof: error: '{}' runs in {}, which cannot be started from {}: {}\n"
             "(scripts/main.sh builds the simulator alone; build the runtime too with 'scripts/build.sh release' "
             "or '--target leaseproof-runtime')\n",
             command, kRuntimeBinary, binary, std::strerror(why));
  return 2;
}

}  // namespace leaseproof::cli
