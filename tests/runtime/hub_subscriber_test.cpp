// The hub and the subscribers of runtime/ together on 127.0.0.1, in one
// io_context run in bounded slices: the core's protocol carried over real
// WebSockets (resume, close waves, the sink file). Every wait has a deadline.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/hub/hub_server.hpp"
#include "runtime/hub/resume_wire.hpp"
#include "runtime/hub/subscriber.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;

// Runs `io` until `done()` or `limit` passes; true when done.
template <typename Done>
bool run_until(asio::io_context& io, Done done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    io.run_for(std::chrono::milliseconds(10));
    if (io.stopped()) io.restart();
  }
  return true;
}

struct Fixture {
  asio::io_context io;
  std::vector<std::string> log;
  std::unique_ptr<HubServer> hub;

  // `concurrency_hint` 1: the test's io_context (shard 0's) is single-threaded
  // as the hub's own shards 1..N-1 are, and Asio keeps what its thread posts
  // to itself in a thread-private queue until the running handler returns.
  explicit Fixture(HubServerOptions options = {}, int concurrency_hint = BOOST_ASIO_CONCURRENCY_HINT_DEFAULT)
      : io(concurrency_hint) {
    if (options.epoch == 0) options.epoch = 1;
    options.admin = true;
    hub = std::make_unique<HubServer>(io, options, [this](std::string_view line) { log.emplace_back(line); });
    hub->start();
  }
  SubscriberOptions subscriber(std::string channel, uint32_t count = 1) {
    SubscriberOptions options;
    options.port = hub->port();
    options.channel = std::move(channel);
    options.count = count;
    options.seed = 7;
    options.client.reconnect_base = Duration::from_ms(50);
    options.client.reconnect_cap = Duration::from_ms(200);
    return options;
  }
  std::unique_ptr<SubscriberPool> pool(SubscriberOptions options) {
    auto p = std::make_unique<SubscriberPool>(io, std::move(options), [this](std::string_view line) { log.emplace_back(line); });
    p->start();
    return p;
  }
};

// One line's value of the hub's /metrics text ("" when absent).
std::string metric_line(const HubServer& hub, const std::string& name) {
  const std::string text = hub.metrics_text();
  const std::size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return "";
  const std::size_t from = at + 2 + name.size();
  return text.substr(from, text.find('\n', from) - from);
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / fmt::format("leaseproof-{}-{}", name, ::getpid())).string();
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(HubAndSubscribers, EveryClientRecordsEveryMessageOnceInOrder) {
  Fixture f;
  auto options = f.subscriber("c1", 3);
  options.until_seq = 50;
  auto pool = f.pool(options);
  bool finished = false;
  pool->on_finished([&] { finished = true; });
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 3; }));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(f.hub->publish("c1", fmt::format("message {}", i + 1)));
  ASSERT_TRUE(run_until(f.io, [&] { return finished; }));
  const SubscriberSummary s = pool->summary();
  EXPECT_EQ(s.received, 150u);
  EXPECT_EQ(s.recorded, 150u);
  EXPECT_EQ(s.first_cursor, (resume::Position{1, 50}));
  EXPECT_TRUE(s.resets_by_kind.empty());  // epoch 1 is the hub's first: a fresh subscriber loses nothing
  EXPECT_EQ(f.hub->counters().data_frames_written, 150u);
  // Each publish's fan-out is timed once, when its last subscriber's frame is written.
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_fanout_seconds_count"), "50");
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_fanout_seconds_bucket{le=\"+Inf\"}"), "50");
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_fanouts_in_progress"), "0");
  // An honest client's pongs never claim more than was written to it.
  EXPECT_EQ(f.hub->counters().pong_credit_clamped, 0u);
  EXPECT_EQ(f.hub->counters().outbox_overflows, 0u);
  EXPECT_EQ(f.hub->counters().protocol_errors, 0u);
}

TEST(HubAndSubscribers, ASinkFileResumesAfterItsLastLineAndCutsATornOne) {
  const std::string sink = temp_path("sink");
  std::filesystem::remove(sink);
  Fixture f;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(f.hub->publish("c2", "x"));
  {
    auto options = f.subscriber("c2");
    options.sink_path = sink;
    options.until_seq = 10;
    auto pool = f.pool(options);
    bool finished = false;
    pool->on_finished([&] { finished = true; });
    ASSERT_TRUE(run_until(f.io, [&] { return finished; }));
    bool stopped = false;
    pool->stop([&] { stopped = true; });
    ASSERT_TRUE(run_until(f.io, [&] { return stopped; }));
  }
  ASSERT_EQ(lines_of(sink).size(), 10u);
  EXPECT_EQ(lines_of(sink).back(), "1 10");
  {
    std::ofstream torn(sink, std::ios::app);
    torn << "1 1";  // a crash mid-append: no newline
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(f.hub->publish("c2", "y"));
  auto options = f.subscriber("c2");
  options.sink_path = sink;
  options.until_seq = 15;
  auto pool = f.pool(options);
  bool finished = false;
  pool->on_finished([&] { finished = true; });
  ASSERT_TRUE(run_until(f.io, [&] { return finished; }));
  const auto lines = lines_of(sink);
  ASSERT_EQ(lines.size(), 15u);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i], fmt::format("1 {}", i + 1));
  EXPECT_EQ(pool->summary().received, 5u);  // resumed after 10: no replay of what was recorded
  std::filesystem::remove(sink);
}

TEST(HubAndSubscribers, ARestartWaveClosesWith1012AndEveryoneResumes) {
  Fixture f;
  auto options = f.subscriber("c3", 20);
  options.client.reconnect_base_by_code[1012] = Duration::from_ms(100);
  auto pool = f.pool(options);
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 20; }));
  ASSERT_TRUE(f.hub->publish("c3", "before"));
  ASSERT_TRUE(run_until(f.io, [&] { return pool->summary().recorded == 20; }));
  // The hub keeps running: every subscriber is closed with 1012 and comes back,
  // resuming after what it recorded (nothing replayed, nothing lost).
  EXPECT_EQ(f.hub->close_all(1012), 20u);
  EXPECT_EQ(f.hub->counters().closes_by_code.at(1012), 20u);
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 40; }));
  ASSERT_TRUE(f.hub->publish("c3", "after"));
  ASSERT_TRUE(run_until(f.io, [&] { return pool->summary().recorded == 40; }));
  const SubscriberSummary s = pool->summary();
  EXPECT_EQ(s.closes_by_code.at(1012), 20u);
  EXPECT_TRUE(s.wave_seen);
  EXPECT_EQ(s.wave_reconnects, 20u);
  EXPECT_EQ(s.received, 40u);  // no replay of "before"
  EXPECT_EQ(s.gave_up, 0u);
  EXPECT_TRUE(s.resets_by_kind.empty());
  // Shutting down closes with 1001 and stops accepting.
  bool closed = false;
  f.hub->shutdown(1001, [&] { closed = true; });
  ASSERT_TRUE(run_until(f.io, [&] { return closed; }));
  EXPECT_EQ(f.hub->counters().closes_by_code.at(1001), 20u);
}

TEST(HubAndSubscribers, AClientThatNeverReadsIsClosedWith1013AtItsQueueBound) {
  HubServerOptions options;
  options.hub.subscriber_queue_bytes_max = 64 * 1024;
  Fixture f(options);
  auto stuck = f.subscriber("bulk");
  stuck.read = false;
  auto pool = f.pool(stuck);
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 1; }));
  const std::string payload(8 * 1024, 'p');
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(f.hub->publish("bulk", payload));
  f.io.run_for(std::chrono::milliseconds(50));
  EXPECT_EQ(f.hub->counters().closes_by_code.count(1013), 0u);  // 7 x (8 KiB + 16) fit in 64 KiB
  ASSERT_TRUE(f.hub->publish("bulk", payload));                  // the 8th does not
  EXPECT_EQ(f.hub->counters().closes_by_code.at(1013), 1u);
}

TEST(HubAndSubscribers, AFanOutDoesNotWaitForSubscribersThatWentAway) {
  Fixture f;
  auto pool = f.pool(f.subscriber("c1", 2));
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 2; }));
  // Published and closed before the hub writes anything: every frame of
  // these three fan-outs waits in an outbox when the close drops them.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.hub->publish("c1", "m"));
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_fanouts_in_progress"), "3");
  EXPECT_EQ(f.hub->close_all(1012), 2u);
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_fanouts_in_progress"), "0");
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_fanout_seconds_count"), "0");  // nothing was written: nothing timed
  // The subscribers come back (1012), and the next publish is timed again.
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 4; }));
  ASSERT_TRUE(f.hub->publish("c1", "again"));
  ASSERT_TRUE(run_until(f.io, [&] { return metric_line(*f.hub, "leaseproof_hub_fanout_seconds_count") == "1"; }));
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_fanouts_in_progress"), "0");
}

TEST(HubAndSubscribers, PublishRefusesBadChannelsAndPayloads) {
  Fixture f;
  std::string error;
  EXPECT_FALSE(f.hub->publish("a b", "x", &error));
  EXPECT_NE(error.find("channel:"), std::string::npos) << error;
  EXPECT_FALSE(f.hub->publish("c", std::string("\xff\xfe", 2), &error));
  EXPECT_EQ(error, "payload: not valid UTF-8 (the wire format carries it as a JSON string)");
  EXPECT_FALSE(f.hub->publish("c", std::string(kPayloadBytesMax + 1, 'x'), &error));
  EXPECT_EQ(f.hub->counters().published, 0u);
}

// Three shards on three threads (the test's io_context is shard 0's): the
// subscribers are spread over all of them, and every one still records every
// message once, in order, whichever thread publishes.
TEST(HubAndSubscribers, ShardsOnThreadsDeliverEveryMessageOnceInOrder) {
  HubServerOptions options;
  options.threads = 3;
  Fixture f(options);
  auto subscribers = f.subscriber("t1", 9);
  subscribers.until_seq = 200;
  auto pool = f.pool(subscribers);
  bool finished = false;
  pool->on_finished([&] { finished = true; });
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 9; }));
  for (int shard = 0; shard < 3; ++shard) {
    EXPECT_EQ(metric_line(*f.hub, fmt::format("leaseproof_hub_shard_subscribers{{shard=\"{}\"}}", shard)), "3");
  }
  // Half from this thread, half from another one, as a second HTTP client would.
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(f.hub->publish("t1", fmt::format("message {}", i + 1)));
  std::thread other([&] {
    for (int i = 100; i < 200; ++i) EXPECT_TRUE(f.hub->publish("t1", fmt::format("message {}", i + 1)));
  });
  other.join();
  ASSERT_TRUE(run_until(f.io, [&] { return finished; }));
  const SubscriberSummary s = pool->summary();
  // Read exactly once each: a repeat, or a gap's resume and replay, would
  // read more frames than the 1,800 recorded.
  EXPECT_EQ(s.received, 1800u);
  EXPECT_EQ(s.recorded, 1800u);
  EXPECT_EQ(s.first_cursor, (resume::Position{1, 200}));
  EXPECT_TRUE(s.resets_by_kind.empty());
  const HubServerCounters c = f.hub->counters();
  EXPECT_EQ(c.data_frames_written, 1800u);
  EXPECT_EQ(c.published, 200u);
  EXPECT_EQ(c.protocol_errors, 0u);
  // A fan-out ends with the last shard's last write: 200 timed, none left.
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_threads"), "3");
  ASSERT_TRUE(run_until(f.io, [&] { return metric_line(*f.hub, "leaseproof_hub_fanout_seconds_count") == "200"; }));
  EXPECT_EQ(metric_line(*f.hub, "leaseproof_hub_fanouts_in_progress"), "0");
  // The close wave and the shutdown reach every shard's subscribers.
  EXPECT_EQ(f.hub->close_all(1012), 9u);
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 18; }));
  bool closed = false;
  f.hub->shutdown(1001, [&] { closed = true; });
  ASSERT_TRUE(run_until(f.io, [&] { return closed; }));
  EXPECT_EQ(f.hub->counters().closes_by_code.at(1001), 9u);
  EXPECT_EQ(f.hub->counters().closes_by_code.at(1012), 9u);
}

// The losing interleaving of two publishers on different shards, forced: a
// publish made on a shard's own thread (as an HTTP connection of that shard
// makes it), then one from another thread before that shard's handler
// returns. A delivery the shard posts to itself waits in Asio's
// thread-private queue until the handler returns, so one posted from the
// other thread meanwhile would run first and hand the shard's core seq 2
// before seq 1 (the hub aborted on LP_ASSERT_EQ(published.seq, seq)).
// Every subscriber, on either shard, records 1 then 2.
TEST(HubAndSubscribers, APublishOnAShardsOwnThreadIsNotOvertakenByOneFromAnotherThread) {
  HubServerOptions options;
  options.threads = 2;
  Fixture f(options, 1);
  auto subscribers = f.subscriber("o", 4);
  subscribers.until_seq = 2;
  auto pool = f.pool(subscribers);
  bool finished = false;
  pool->on_finished([&] { finished = true; });
  ASSERT_TRUE(run_until(f.io, [&] { return f.hub->counters().subscribes == 4; }));
  for (int shard = 0; shard < 2; ++shard) {
    EXPECT_EQ(metric_line(*f.hub, fmt::format("leaseproof_hub_shard_subscribers{{shard=\"{}\"}}", shard)), "2");
  }
  bool published = false;
  asio::post(f.io, [&] {
    EXPECT_TRUE(f.hub->publish("o", "first"));  // seq 1, on shard 0's thread
    std::thread other([&] { EXPECT_TRUE(f.hub->publish("o", "second")); });  // seq 2, while this handler runs
    other.join();
    published = true;
  });
  ASSERT_TRUE(run_until(f.io, [&] { return published && finished; }));
  const SubscriberSummary s = pool->summary();
  EXPECT_EQ(s.received, 8u);
  EXPECT_EQ(s.recorded, 8u);
  EXPECT_EQ(s.first_cursor, (resume::Position{1, 2}));
  EXPECT_TRUE(s.resets_by_kind.empty());
  EXPECT_EQ(f.hub->counters().published, 2u);
  EXPECT_EQ(f.hub->counters().protocol_errors, 0u);
}

TEST(HubAndSubscribers, ThreadsAreCheckedAgainstTheirRangeAndTheSharedStore) {
  asio::io_context io;
  auto make = [&](unsigned threads, uint16_t shared_port) -> std::string {
    HubServerOptions options;
    options.threads = threads;
    options.shared.port = shared_port;
    try {
      HubServer hub(io, options, [](std::string_view) {});
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(make(0, 0), "threads: 0 is not in 1..64");
  EXPECT_EQ(make(65, 0), "threads: 65 is not in 1..64");
  EXPECT_NE(make(2, 6379).find("threads: more than 1 with a shared store"), std::string::npos);
  EXPECT_EQ(make(64, 0), "");
}

TEST(HubAndSubscribers, ParseGeneratorNamesWhatIsWrong) {
  EXPECT_TRUE(std::holds_alternative<HubGenerator>(parse_generator("live:100:256")));
  EXPECT_EQ(std::get<std::string>(parse_generator("live:100")), "'live:100': expected CHANNEL:RATE:SIZE, e.g. live:100:256");
  EXPECT_EQ(std::get<std::string>(parse_generator("live:0:256")),
            "'live:0:256': RATE must be a number of messages per second in (0, 1000000]");
  EXPECT_EQ(std::get<std::string>(parse_generator("live:1:2.5")),
            "'live:1:2.5': SIZE must be a whole number of bytes in 0..1048576");
}

}  // namespace
}  // namespace leaseproof::runtime
