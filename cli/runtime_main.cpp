// leaseproof-runtime: the commands that run on real sockets (hub, subscribe,
// relay, worker, control, dynamo), reached as `leaseproof <command>`, which
// execs this binary (cli/runtime_commands.hpp). Exit status: 0 success, 1 a
// failure at run time, 2 bad input (an unknown flag, a malformed value).
#include <string>

#include <CLI/CLI.hpp>

#include "cli/cli_common.hpp"
#include "cli/dynamo_command.hpp"
#include "cli/real_commands.hpp"
#include "cli/runtime_commands.hpp"
#include "cli/worker_commands.hpp"

using namespace leaseproof::cli;

int main(int argc, char** argv) {
  // Named as the user calls it: every message and usage line says "leaseproof".
  CLI::App app{"leaseproof (leaseproof-runtime): the commands that run on real sockets; 'leaseproof --help' lists "
               "every command",
               "leaseproof"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "leaseproof 0.1.0");

  HubArgs hub_args;
  CLI::App* hub = add_hub_command(app, hub_args);
  SubscribeArgs subscribe_args;
  CLI::App* subscribe = add_subscribe_command(app, subscribe_args);
  RelayArgs relay_args;
  CLI::App* relay = add_relay_command(app, relay_args);
  WorkerArgs worker_args;
  CLI::App* worker = add_worker_command(app, worker_args);
  ControlArgs control_args;
  const ControlCommands control = add_control_command(app, control_args);

  DynamoReplayArgs replay_args;
  CLI::App* dynamo = app.add_subcommand("dynamo", std::string{runtime_command_description("dynamo")});
  dynamo->require_subcommand(1);
  CLI::App* replay = dynamo->add_subcommand(
      "replay", "Apply a JSON-lines file of DynamoDB requests to a fresh simulated table (faults off) and print "
                "one JSON line per response");
  replay->add_option("FILE", replay_args.file, "Requests, one {\"target\": ..., \"body\": ...} per line")->required();
  replay->add_option("--endpoint", replay_args.endpoint, "Send to this DynamoDB-compatible endpoint instead")
      ->type_name("URL");
  replay->add_option("--compare", replay_args.compare,
                     "Send to the model and to this endpoint; print the answers that differ")
      ->type_name("URL");

  return parse_and_run(app, argc, argv, [&] {
    if (replay->parsed()) return dynamo_replay_command(replay_args);
    if (hub->parsed()) return hub_command(hub_args);
    if (subscribe->parsed()) return subscribe_command(subscribe_args);
    if (relay->parsed()) return relay_command(relay_args);
    if (worker->parsed()) return worker_command(worker_args);
    if (control.create_tables->parsed() || control.start->parsed() || control.stop->parsed() ||
        control.create_queue->parsed() || control.owners->parsed()) {
      return control_command(control, control_args);
    }
    return kExitUsage;
  });
}
