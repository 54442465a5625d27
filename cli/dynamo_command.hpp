#pragma once

#include <string>

namespace leaseproof::cli {

// Bad input: printed as "leaseproof: error: <message>", exit status 2.
struct UsageError {
  std::string message;
};

struct DynamoReplayArgs {
  std::string file;
  std::string endpoint;  // send to this endpoint instead of the model
  std::string compare;   // send to both and compare
};

int dynamo_replay_command(const DynamoReplayArgs& args);

}  // namespace leaseproof::cli
