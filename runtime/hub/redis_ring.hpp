#pragma once
// Channels and rings shared by several hubs through Redis (seed 004,
// "Scaling"): a subscriber whose hub dies resumes on another with the same
// epoch and the same sequence numbers, so nothing is lost and no reset is
// needed.
//
// Keys (under a prefix, "leaseproof" by default):
//   <p>:epoch  the epoch every hub sharing the store uses; set once, by the
//              first hub to open it (SET NX), never changed after
//   <p>:tops   hash: channel -> last sequence number published
//   <p>:log    one capped stream of every publish, in order: fields c
//              (channel), s (seq), p (payload); capped near `log_max` entries
//
// A publish is one Lua script (HINCRBY the channel's top, XADD the entry),
// so every hub sees one order and one numbering. No hub publishes into its
// own core directly: each follows the log (XREAD BLOCK) and publishes every
// entry, its own included, in log order. A hub that opens the store reads
// a consistent snapshot (MULTI: epoch, tops, the whole log) to rebuild its
// rings, then follows the log from the snapshot's last entry.
//
// The connection is asynchronous on the hub's io_context: commands are
// formatted and replies parsed with hiredis (redisFormatCommandArgv,
// redisReader); the socket is Asio's. Any Redis error or lost connection is
// fatal to the hub (on_failure): a supervisor restarts it, and it reloads.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "core/resume/hub.hpp"

namespace leaseproof::runtime {

struct RedisValue {
  enum class Kind { nil, integer, string, status, error, array };
  Kind kind = Kind::nil;
  long long integer = 0;
  std::string text;  // string, status, error
  std::vector<RedisValue> elements;
};

// One pipelined connection: replies come back in command order.
class RedisConnection {
 public:
  using Reply = std::function<void(const RedisValue&)>;
  using Failure = std::function<void(const std::string&)>;
  RedisConnection(boost::asio::io_context& io, std::string host, uint16_t port, Failure on_failure);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  void connect(std::function<void()> ready);
  // An error reply reaches `reply` as Kind::error; I/O failures reach on_failure.
  void command(const std::vector<std::string>& argv, Reply reply);

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

struct LogEntry {
  std::string channel;
  int64_t seq = 0;
  std::string payload;
};

struct SharedRingOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  std::string prefix = "leaseproof";
  uint64_t log_max = 200'000;  // entries kept in the log (approximately: MAXLEN ~)
};

// What a hub opening the store starts from.
struct SharedRingSnapshot {
  uint64_t epoch = 0;
  std::map<std::string, int64_t> tops;
  std::vector<LogEntry> log;  // oldest first
};

// The core's rings rebuilt from a snapshot: per channel its top, and the
// log's entries of that channel that run without a hole up to the top (the
// core then keeps what its bounds allow). Entries of a channel that do not
// reach its top, or channels the log names and the tops do not, are left out.
resume::RingState rings_from_snapshot(const SharedRingSnapshot& snapshot);

class RedisRingStore {
 public:
  RedisRingStore(boost::asio::io_context& io, SharedRingOptions options, RedisConnection::Failure on_failure);

  // Sets the store's epoch to `proposed` unless one is set, then reads the
  // snapshot.
  void open(uint64_t proposed, std::function<void(SharedRingSnapshot)> ready);
  // Follows the log after the snapshot: `on_entry` for every later entry,
  // in order.
  void follow(std::function<void(LogEntry)> on_entry);
  // Appends to the log; `done` gets the sequence number it was given.
  void publish(std::string_view channel, std::string_view payload, std::function<void(int64_t)> done);

 private:
  void read_more();

  SharedRingOptions options_;
  RedisConnection::Failure on_failure_;
  RedisConnection writer_;
  RedisConnection reader_;  // blocks in XREAD
  std::string last_id_ = "0-0";
  std::function<void(LogEntry)> on_entry_;
};

}  // namespace leaseproof::runtime
