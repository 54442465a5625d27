// An application embedding leaseproof's runtime (docs/embedding.md walks
// through this file): it holds connections through DynamoDB leases with a
// LeaseHost on its own io_context, and for every connection it gains records
// three messages and checkpoints them, fenced by the lease epoch. It prints
// one line per connection gained, recorded and stopped, and drains on SIGTERM
// or SIGINT.
//
//   embedded ENDPOINT WORKER_ID
//
// ENDPOINT is a DynamoDB endpoint (http://127.0.0.1:PORT for dynalite) with
// the tables `leaseproof control create-tables` makes; the credentials come
// from the environment (any keys for dynalite).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <leaseproof/runtime/worker/lease_host.hpp>

namespace {

using namespace leaseproof;

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string position(resume::Position p) { return std::to_string(p.epoch) + "." + std::to_string(p.seq); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: embedded ENDPOINT WORKER_ID\n");
    return 2;
  }
  const char* key = std::getenv("AWS_ACCESS_KEY_ID");
  const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  if (key == nullptr || secret == nullptr) {
    std::fprintf(stderr, "embedded: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set\n");
    return 2;
  }

  runtime::LeaseHostOptions options;
  options.worker_id = argv[2];
  options.dynamo.endpoint_url = argv[1];
  options.dynamo.credentials = runtime::DynamoCredentials{key, secret, ""};
  options.lease.lease_duration = Duration::from_s(6);
  options.lease.heartbeat_interval = Duration::from_s(2);
  options.lease.safety_margin = Duration::from_s(1);
  options.lease.reconcile_interval = Duration::from_s(2);
  options.lease.reconcile_jitter_max = Duration::from_s(1);

  boost::asio::io_context io;
  std::vector<runtime::OwnedConnectionPtr> acting;  // what this application acts on now

  runtime::LeaseHostCallbacks callbacks;
  callbacks.gained = [&](const runtime::OwnedConnectionPtr& owned) {
    say("gained " + owned->connection() + " epoch " + std::to_string(owned->epoch()) + " after " +
        position(owned->checkpoint()));
    acting.push_back(owned);
    // Three messages after the checkpoint, in hub epoch 1: recorded in the
    // sink, then the checkpoint advanced, both as this lease epoch's owner.
    const resume::Position from = owned->checkpoint();
    std::vector<resume::Message> messages;
    for (int64_t i = 1; i <= 3; ++i) messages.push_back(resume::Message{1, (from.epoch == 1 ? from.seq : 0) + i, 64});
    owned->record(messages, [owned](runtime::WriteOutcome outcome) {
      say("recorded " + owned->connection() + " through " + position(owned->checkpoint()) + ": " +
          std::string(runtime::to_string(outcome)));
    });
  };
  callbacks.stopped = [&](const runtime::OwnedConnectionPtr& owned, runtime::StopReason reason) {
    say("stopped " + owned->connection() + " epoch " + std::to_string(owned->epoch()) + ": " +
        std::string(runtime::to_string(reason)));
    std::erase(acting, owned);
    // Too late to write: the handle refuses without sending.
    owned->checkpoint(resume::Position{1, 1'000'000}, [owned](runtime::WriteOutcome outcome) {
      say("checkpoint after the stop of " + owned->connection() + ": " + std::string(runtime::to_string(outcome)));
    });
  };

  runtime::LeaseHost host(io, options, callbacks);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    say("draining");
    host.drain([&] { io.stop(); });
  });
  host.start();
  io.run();
  const runtime::LeaseHostCounters& counters = host.counters();
  say("done: gained " + std::to_string(counters.gained) + ", stopped " + std::to_string(counters.stopped) +
      ", acting on " + std::to_string(acting.size()));
  return acting.empty() ? 0 : 1;
}
