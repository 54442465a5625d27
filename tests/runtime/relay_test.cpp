// The TCP relay (runtime/hub/relay.hpp) between real sockets on 127.0.0.1: echo
// servers (or targets that never read, hang up, refuse or never answer) behind
// it, test clients in front, all on one io_context that the test runs in
// bounded slices. Every wait has a
// deadline, so a broken relay fails a test instead of hanging it.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/hub/relay.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr Duration idle = Duration::from_ms(300);

tcp::endpoint loopback(uint16_t port) { return {asio::ip::make_address("127.0.0.1"), port}; }

// Bytes that show misordering or loss: not one repeated character.
std::string pattern_bytes(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  }
  return bytes;
}

// Sends back whatever it reads, one connection per session.
class EchoSession : public std::enable_shared_from_this<EchoSession> {
 public:
  explicit EchoSession(tcp::socket socket) : socket_(std::move(socket)) {}

  void read() {
    socket_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](error_code ec, std::size_t bytes) {
      if (ec) {
        return;  // the relay closed its side: the session ends with its last handler
      }
      asio::async_write(self->socket_, asio::buffer(self->buffer_.data(), bytes),
                        [self](error_code write_ec, std::size_t) {
                          if (!write_ec) {
                            self->read();
                          }
                        });
    });
  }

 private:
  tcp::socket socket_;
  std::array<char, 4096> buffer_{};
};

// A target server. An echo server answers every byte; a deaf one accepts and
// holds its connections but never reads, so whatever is sent to it piles up
// until the sockets' buffers are full; a hang-up one closes each connection
// as soon as it has accepted it.
class TargetServer {
 public:
  enum class Kind { echo, deaf, hang_up };

  TargetServer(asio::io_context& io, Kind kind)
      : kind_(kind), acceptor_(io, loopback(0)), port_(acceptor_.local_endpoint().port()) {
    accept();
  }
  uint16_t port() const { return port_; }
  std::size_t connections() const { return connections_; }  // accepted so far

  // Closes the listening socket, as a server process that died would: new
  // connections are refused, the ones accepted stay up.
  void stop_listening() {
    error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  void accept() {
    acceptor_.async_accept([this](error_code ec, tcp::socket socket) {
      if (ec) {
        return;
      }
      ++connections_;
      switch (kind_) {
        case Kind::echo: std::make_shared<EchoSession>(std::move(socket))->read(); break;
        case Kind::deaf: deaf_connections_.push_back(std::move(socket)); break;
        case Kind::hang_up: socket.close(ec); break;
      }
      accept();
    });
  }

  Kind kind_;
  tcp::acceptor acceptor_;
  uint16_t port_;
  std::size_t connections_ = 0;
  std::vector<tcp::socket> deaf_connections_;
};

// A port bound but not listening: a connect to it is refused, and the port
// stays ours, so nothing else can start listening there during the test.
class RefusingPort {
 public:
  explicit RefusingPort(asio::io_context& io) : socket_(io) {
    socket_.open(tcp::v4());
    socket_.bind(loopback(0));
  }
  uint16_t port() const { return socket_.local_endpoint().port(); }

 private:
  tcp::socket socket_;
};

// A port that never answers: it listens with a backlog of 0 and never
// accepts, and one connection made here fills its accept queue, so (on Linux)
// the kernel drops every further SYN and a connect neither succeeds nor fails
// until the connector gives up.
class SilentPort {
 public:
  explicit SilentPort(asio::io_context& io) : acceptor_(io), queue_filler_(io) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(loopback(0));
    acceptor_.listen(0);
    queue_filler_.connect(loopback(port()));  // blocking, and answered at once: the queue had room
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  tcp::acceptor acceptor_;
  tcp::socket queue_filler_;
};

// A client in front of the relay: it keeps one read pending all the time and
// records what arrives and how (and when) the connection ended. One send at a
// time: callers wait for it before sending again.
class TestClient : public std::enable_shared_from_this<TestClient> {
 public:
  explicit TestClient(asio::io_context& io) : socket_(io) {}

  void connect(uint16_t port) {
    socket_.async_connect(loopback(port), [self = shared_from_this()](error_code ec) {
      if (ec) {
        self->note_end(ec);
        return;
      }
      self->connected = true;
      self->read();
    });
  }

  void send(std::string bytes) {
    auto data = std::make_shared<std::string>(std::move(bytes));
    asio::async_write(socket_, asio::buffer(*data), [self = shared_from_this(), data](error_code ec, std::size_t) {
      if (ec) {
        self->write_error = ec;
      }
    });
  }

  void close() {
    error_code ignored;
    socket_.close(ignored);
  }

  bool ended() const { return end.has_value(); }
  // The relay closed the connection: a clean end of stream, or a reset when
  // it closed with bytes unread.
  bool saw_close() const {
    return end && (*end == asio::error::eof || *end == asio::error::connection_reset);
  }

  bool connected = false;
  std::string received;
  std::optional<error_code> write_error;
  std::optional<error_code> end;
  Clock::time_point ended_at{};

 private:
  void read() {
    socket_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](error_code ec, std::size_t bytes) {
      if (ec) {
        self->note_end(ec);
        return;
      }
      self->received.append(self->buffer_.data(), bytes);
      self->read();
    });
  }

  void note_end(error_code ec) {
    end = ec;
    ended_at = Clock::now();
  }

  tcp::socket socket_;
  std::array<char, 16 * 1024> buffer_{};
};

class RelayTest : public ::testing::Test {
 protected:
  // Declared in this order so that the relay goes first and the io_context
  // (whose destruction drops any handler still queued) last.
  asio::io_context io;
  std::vector<std::string> log_lines;
  TargetServer echo{io, TargetServer::Kind::echo};
  std::unique_ptr<Relay> relay;

  // Targets on 127.0.0.1, in the order the relay tries them.
  void start_relay(const std::vector<uint16_t>& target_ports, std::size_t connections_max = 100,
                   Duration idle_cut = idle) {
    RelayOptions options;
    for (const uint16_t port : target_ports) {
      options.targets.emplace_back("127.0.0.1", port);
    }
    options.idle = idle_cut;
    options.connections_max = connections_max;
    relay = std::make_unique<Relay>(io, options, [this](std::string_view line) { log_lines.emplace_back(line); });
    relay->start();
  }

  std::shared_ptr<TestClient> connect_client() {
    auto client = std::make_shared<TestClient>(io);
    client->connect(relay->port());
    return client;
  }

  // Runs the io_context until `done()` or the timeout; true if done.
  template <typename Predicate>
  bool run_until(Predicate done, milliseconds timeout = milliseconds(2000)) {
    const auto deadline = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() >= deadline) {
        return false;
      }
      if (io.stopped()) {
        io.restart();
      }
      io.run_one_until(deadline);
    }
    return true;
  }

  void run_for(milliseconds time) {
    run_until([] { return false; }, time);
  }

  // Connects a client and checks one round trip through the relay, which
  // shows the relay's connection to the target is up.
  std::shared_ptr<TestClient> connect_and_echo(const std::string& bytes) {
    auto client = connect_client();
    client->send(bytes);
    EXPECT_TRUE(run_until([&] { return client->received.size() >= bytes.size() || client->ended(); }))
        << "no echo of " << bytes.size() << " bytes";
    EXPECT_EQ(client->received, bytes);
    return client;
  }

  bool logged(const std::string& line) const {
    return std::find(log_lines.begin(), log_lines.end(), line) != log_lines.end();
  }

  bool logged_line_starting(const std::string& prefix, const std::string& suffix = "") const {
    return std::any_of(log_lines.begin(), log_lines.end(), [&](const std::string& line) {
      return line.starts_with(prefix) && line.ends_with(suffix);
    });
  }

  std::string all_log_lines() const { return fmt::format("{}", fmt::join(log_lines, "\n")); }
};

TEST_F(RelayTest, BytesGoThroughBothWaysUnchanged) {
  start_relay({echo.port()});
  // Several times the relay's 16 KiB buffer, so chunks must stay in order.
  const std::string payload = pattern_bytes(200 * 1024 + 13);
  auto client = connect_and_echo(payload);

  EXPECT_FALSE(client->ended());
  EXPECT_EQ(relay->open_connections(), 1u);
  const RelayCounters& counters = relay->counters();
  EXPECT_EQ(counters.accepted, 1u);
  EXPECT_EQ(counters.bytes_up, payload.size());
  EXPECT_EQ(counters.bytes_down, payload.size());
  EXPECT_EQ(counters.idle_cuts + counters.forced_cuts + counters.closed + counters.connect_failed, 0u);
  EXPECT_TRUE(log_lines.empty()) << all_log_lines();  // a connection that works is only counted
}

TEST_F(RelayTest, ABusyConnectionIsNotCut) {
  start_relay({echo.port()});
  auto client = connect_client();
  // A byte every 100 ms for 800 ms: the connection lives well past `idle`
  // (300 ms) but is never silent that long.
  std::string sent;
  for (int i = 0; i < 8; ++i) {
    sent.push_back(static_cast<char>('0' + i));
    client->send(sent.substr(sent.size() - 1));
    run_for(milliseconds(100));
  }
  ASSERT_TRUE(run_until([&] { return client->received.size() >= sent.size() || client->ended(); }));

  EXPECT_EQ(client->received, sent);
  EXPECT_FALSE(client->ended());
  EXPECT_EQ(relay->counters().idle_cuts, 0u);
  EXPECT_EQ(relay->open_connections(), 1u);
}

TEST_F(RelayTest, ASilentConnectionIsCutAfterIdle) {
  start_relay({echo.port()});
  auto client = connect_client();
  // Every byte the relay sees comes after this instant, so its silence
  // cannot have started earlier.
  const Clock::time_point last_send_at = Clock::now();
  client->send("x");
  ASSERT_TRUE(run_until([&] { return client->received == "x"; }));

  ASSERT_TRUE(run_until([&] { return client->ended(); }, milliseconds(3000))) << "never cut";
  const auto cut_after = std::chrono::duration_cast<milliseconds>(client->ended_at - last_send_at);
  EXPECT_GE(cut_after, milliseconds(300));
  EXPECT_LT(cut_after, milliseconds(1500));
  EXPECT_TRUE(client->saw_close()) << client->end->message();
  EXPECT_EQ(relay->counters().idle_cuts, 1u);
  EXPECT_EQ(relay->counters().closed, 0u);
  EXPECT_EQ(relay->open_connections(), 0u);
  EXPECT_TRUE(logged("relay: idle cut connection 1 after 300ms of silence")) << all_log_lines();
}

TEST_F(RelayTest, CutAllClosesEveryConnection) {
  start_relay({echo.port()});
  std::vector<std::shared_ptr<TestClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(connect_and_echo(fmt::format("hello {}", i)));
  }
  ASSERT_EQ(relay->open_connections(), 3u);

  relay->cut_all("test");
  EXPECT_EQ(relay->open_connections(), 0u);  // at once, not on a later handler
  EXPECT_EQ(relay->counters().forced_cuts, 3u);
  EXPECT_TRUE(logged("relay: cut 3 connections (test)")) << all_log_lines();

  ASSERT_TRUE(run_until([&] {
    return std::all_of(clients.begin(), clients.end(), [](const auto& client) { return client->ended(); });
  }));
  for (const auto& client : clients) {
    EXPECT_TRUE(client->saw_close()) << client->end->message();
  }
  EXPECT_EQ(relay->counters().idle_cuts, 0u);
  EXPECT_EQ(relay->counters().closed, 0u);
}

TEST_F(RelayTest, ATargetThatRefusesClosesTheClient) {
  const RefusingPort refusing(io);
  const uint16_t refused_port = refusing.port();
  start_relay({refused_port});

  auto client = connect_client();
  ASSERT_TRUE(run_until([&] { return client->ended(); })) << "client not closed";
  EXPECT_TRUE(client->saw_close()) << client->end->message();
  EXPECT_EQ(relay->counters().connect_failed, 1u);
  EXPECT_EQ(relay->counters().accepted, 1u);
  EXPECT_EQ(relay->open_connections(), 0u);
  EXPECT_TRUE(logged_line_starting(fmt::format("relay: connection 1 could not connect to 127.0.0.1:{}: ", refused_port)))
      << all_log_lines();
  EXPECT_EQ(log_lines.size(), 1u) << all_log_lines();  // one target: nothing to fail over to
}

TEST_F(RelayTest, AClientThatClosesEndsTheRelayedConnection) {
  start_relay({echo.port()});
  auto client = connect_and_echo("bye");
  client->close();
  ASSERT_TRUE(run_until([&] { return relay->counters().closed == 1; })) << "not counted as closed";
  EXPECT_EQ(relay->open_connections(), 0u);
  EXPECT_EQ(relay->counters().idle_cuts + relay->counters().forced_cuts + relay->counters().connect_failed, 0u);
}

TEST_F(RelayTest, ATargetThatClosesClosesTheClient) {
  TargetServer hang_up(io, TargetServer::Kind::hang_up);
  start_relay({hang_up.port()});
  auto client = connect_client();
  ASSERT_TRUE(run_until([&] { return client->ended(); })) << "client not closed";
  EXPECT_TRUE(client->saw_close()) << client->end->message();
  // The target accepted, so the connect succeeded: this is a close, not a
  // connect failure.
  EXPECT_EQ(relay->counters().closed, 1u);
  EXPECT_EQ(relay->counters().connect_failed, 0u);
  EXPECT_EQ(relay->open_connections(), 0u);
}

TEST_F(RelayTest, AListenPortInUseThrowsNamingTheAddress) {
  start_relay({echo.port()});
  RelayOptions options;
  options.listen_port = relay->port();
  options.targets = {{"127.0.0.1", echo.port()}};
  try {
    Relay second(io, options, [](std::string_view) {});
    FAIL() << "a second relay bound port " << relay->port();
  } catch (const std::system_error& error) {
    EXPECT_NE(std::string(error.what()).find(fmt::format("127.0.0.1:{}", relay->port())), std::string::npos)
        << error.what();
  }
}

TEST_F(RelayTest, ConnectionsBeyondTheMaximumAreClosedAtOnce) {
  start_relay({echo.port()}, /*connections_max=*/1);
  auto first = connect_and_echo("first");
  auto second = connect_client();
  ASSERT_TRUE(run_until([&] { return second->ended(); }));
  EXPECT_TRUE(second->saw_close()) << second->end->message();
  EXPECT_EQ(relay->counters().refused, 1u);
  EXPECT_EQ(relay->counters().accepted, 1u);

  // The first connection is untouched.
  first->send("still here");
  ASSERT_TRUE(run_until([&] { return first->received.size() >= std::string("firststill here").size(); }));
  EXPECT_EQ(first->received, "firststill here");
  EXPECT_FALSE(first->ended());
}

// A target that never reads: the relay must stop reading from the client
// once its one buffer is stuck (backpressure, not an unbounded queue), and
// cut_all must be safe with that write and the client's read pending.
TEST_F(RelayTest, ASlowTargetStopsTheRelayReadingAndCutAllIsSafeMidWrite) {
  TargetServer deaf(io, TargetServer::Kind::deaf);
  // A stuck connection moves no bytes, so it is silent: a long idle keeps
  // the idle cut out of this test.
  start_relay({deaf.port()}, 100, Duration::from_s(10));
  auto client = connect_client();
  // Far more than the kernel buffers between client and target can hold.
  const std::size_t sent_bytes = 32 * 1024 * 1024;
  client->send(std::string(sent_bytes, 'z'));

  // Wait until the relay has relayed nothing new for 200 ms.
  uint64_t bytes_up = 0;
  auto unchanged_since = Clock::now();
  const bool stalled = run_until(
      [&] {
        if (relay->counters().bytes_up != bytes_up) {
          bytes_up = relay->counters().bytes_up;
          unchanged_since = Clock::now();
        }
        return bytes_up > 0 && Clock::now() - unchanged_since >= milliseconds(200);
      },
      milliseconds(3000));
  ASSERT_TRUE(stalled) << "bytes_up still moving: " << relay->counters().bytes_up;
  EXPECT_LT(relay->counters().bytes_up, sent_bytes);
  EXPECT_EQ(relay->counters().bytes_down, 0u);
  relay->cut_all("stuck");
  EXPECT_EQ(relay->counters().forced_cuts, 1u);
  ASSERT_TRUE(run_until([&] { return client->ended(); }));
  EXPECT_TRUE(client->saw_close()) << client->end->message();
  run_for(milliseconds(50));  // let the aborted handlers run
  EXPECT_EQ(relay->counters().idle_cuts, 0u);
}

TEST_F(RelayTest, DestroyingTheRelayWithConnectionsOpenIsSafe) {
  start_relay({echo.port()});
  auto client = connect_and_echo("before");
  client->send(pattern_bytes(64 * 1024));  // in flight as the relay goes
  run_for(milliseconds(1));
  const std::size_t lines_before = log_lines.size();
  relay.reset();

  ASSERT_TRUE(run_until([&] { return client->ended(); }));
  EXPECT_TRUE(client->saw_close()) << client->end->message();
  run_for(milliseconds(50));  // pending relay handlers run after their relay is gone
  EXPECT_EQ(log_lines.size(), lines_before) << "logged after destruction: " << all_log_lines();
}

// ---- several targets: primary first, then fail over -----------------------

TEST_F(RelayTest, WithTwoTargetsUpEveryConnectionGoesToTheFirst) {
  TargetServer second(io, TargetServer::Kind::echo);
  start_relay({echo.port(), second.port()});
  std::vector<std::shared_ptr<TestClient>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(connect_and_echo(fmt::format("hello {}", i)));
  }

  EXPECT_EQ(echo.connections(), 5u);  // not round-robin
  EXPECT_EQ(second.connections(), 0u);
  EXPECT_EQ(relay->counters().failovers, 0u);
  EXPECT_EQ(relay->counters().connect_failed, 0u);
  EXPECT_EQ(relay->open_connections(), 5u);
  EXPECT_TRUE(log_lines.empty()) << all_log_lines();
}

TEST_F(RelayTest, AFirstTargetThatRefusesFailsOverToTheSecondLosingNoBytes) {
  const RefusingPort down(io);
  start_relay({down.port(), echo.port()});
  // Sent at once, while the relay is still trying the first target: none of
  // it may be lost on the way to the second.
  const std::string payload = pattern_bytes(64 * 1024 + 7);
  auto client = connect_and_echo(payload);

  EXPECT_FALSE(client->ended());
  EXPECT_EQ(echo.connections(), 1u);
  const RelayCounters& counters = relay->counters();
  EXPECT_EQ(counters.failovers, 1u);
  EXPECT_EQ(counters.connect_failed, 0u);
  EXPECT_EQ(counters.accepted, 1u);
  EXPECT_EQ(counters.bytes_up, payload.size());
  EXPECT_EQ(counters.bytes_down, payload.size());
  EXPECT_TRUE(logged_line_starting(fmt::format("relay: connection 1: target 127.0.0.1:{} failed (", down.port()),
                                   fmt::format("); trying 127.0.0.1:{}", echo.port())))
      << all_log_lines();
  EXPECT_EQ(log_lines.size(), 1u) << all_log_lines();
}

TEST_F(RelayTest, WhenEveryTargetRefusesTheClientSeesEndOfStream) {
  const RefusingPort first(io);
  const RefusingPort second(io);
  start_relay({first.port(), second.port()});
  auto client = connect_client();
  ASSERT_TRUE(run_until([&] { return client->ended(); })) << "client not closed";

  EXPECT_EQ(*client->end, asio::error::eof) << client->end->message();
  const RelayCounters& counters = relay->counters();
  EXPECT_EQ(counters.connect_failed, 1u);
  EXPECT_EQ(counters.failovers, 0u);
  EXPECT_EQ(counters.accepted, 1u);
  EXPECT_EQ(relay->open_connections(), 0u);
  EXPECT_TRUE(logged_line_starting(fmt::format("relay: connection 1: target 127.0.0.1:{} failed (", first.port()),
                                   fmt::format("); trying 127.0.0.1:{}", second.port())))
      << all_log_lines();
  EXPECT_TRUE(logged_line_starting(fmt::format("relay: connection 1 could not connect to 127.0.0.1:{}: ", second.port()),
                                   " (all 2 targets failed)"))
      << all_log_lines();
}

TEST_F(RelayTest, AFirstTargetThatStopsListeningSendsTheNextConnectionToTheSecond) {
  TargetServer second(io, TargetServer::Kind::echo);
  start_relay({echo.port(), second.port()});
  auto before = connect_and_echo("before");
  ASSERT_EQ(echo.connections(), 1u);

  echo.stop_listening();
  auto after = connect_and_echo("after");
  EXPECT_EQ(echo.connections(), 1u);
  EXPECT_EQ(second.connections(), 1u);
  EXPECT_EQ(relay->counters().failovers, 1u);
  EXPECT_EQ(relay->counters().connect_failed, 0u);
  EXPECT_TRUE(logged_line_starting(fmt::format("relay: connection 2: target 127.0.0.1:{} failed (", echo.port()),
                                   fmt::format("); trying 127.0.0.1:{}", second.port())))
      << all_log_lines();

  // The connection made before is still relayed to the first target.
  before->send(" still");
  ASSERT_TRUE(run_until([&] { return before->received.size() >= std::string("before still").size(); }));
  EXPECT_EQ(before->received, "before still");
  EXPECT_FALSE(before->ended());
  EXPECT_FALSE(after->ended());
  EXPECT_EQ(relay->open_connections(), 2u);
}

TEST_F(RelayTest, AFirstTargetThatNeverAnswersIsSkippedAfterIdle) {
  const SilentPort silent(io);
  start_relay({silent.port(), echo.port()});
  const Clock::time_point started_at = Clock::now();
  auto client = connect_and_echo("late");
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - started_at);

  EXPECT_GE(took, milliseconds(300));  // the whole connect timeout went to the first target
  EXPECT_FALSE(client->ended());
  EXPECT_EQ(echo.connections(), 1u);
  EXPECT_EQ(relay->counters().failovers, 1u);
  EXPECT_EQ(relay->counters().connect_failed, 0u);
  EXPECT_TRUE(logged(fmt::format("relay: connection 1: target 127.0.0.1:{} failed (no answer within 300ms); trying "
                                 "127.0.0.1:{}",
                                 silent.port(), echo.port())))
      << all_log_lines();
}

TEST_F(RelayTest, ASingleTargetThatNeverAnswersFailsTheConnectAfterIdle) {
  const SilentPort silent(io);
  start_relay({silent.port()});
  auto client = connect_client();
  ASSERT_TRUE(run_until([&] { return client->ended(); })) << "client not closed";

  EXPECT_EQ(*client->end, asio::error::eof) << client->end->message();
  EXPECT_EQ(relay->counters().connect_failed, 1u);
  EXPECT_EQ(relay->counters().failovers, 0u);
  EXPECT_EQ(relay->open_connections(), 0u);
  EXPECT_TRUE(
      logged(fmt::format("relay: connection 1 could not connect to 127.0.0.1:{}: no answer within 300ms", silent.port())))
      << all_log_lines();
}

}  // namespace
}  // namespace leaseproof::runtime
