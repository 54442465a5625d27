#pragma once
// The commands that run on real sockets (hub, subscribe, relay, worker,
// control, dynamo) live in a second binary, leaseproof-runtime, beside
// `leaseproof`: the simulator's binary links none of the runtime's TLS, AWS
// and Beast code, so building it (scripts/main.sh) compiles about half of
// what the whole tree does. `leaseproof <runtime command> ...` execs
// leaseproof-runtime with the same arguments (same process id, same
// environment), so every script and lab calls `leaseproof` for everything.

#include <span>
#include <string_view>

namespace leaseproof::cli {

struct RuntimeCommand {
  std::string_view name;
  std::string_view description;  // one line, for both binaries' --help
};

// Every command leaseproof-runtime serves, in the order --help lists them.
std::span<const RuntimeCommand> runtime_commands();

// The description of the runtime command `name` (it must be one).
std::string_view runtime_command_description(std::string_view name);

// When argv[1] names a runtime command: execs leaseproof-runtime, found
// beside this binary, with argv unchanged, and returns only when that
// fails: after printing why, with the exit status to end with (2). Returns
// -1 when argv[1] is no runtime command.
int forward_runtime_command(int argc, char** argv);

}  // namespace leaseproof::cli
