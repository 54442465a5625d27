// Rings shared through Redis (redis_ring.hpp): a pipelined RESP connection on
// Asio with hiredis' formatter and reader, and the store built on it.
#include "runtime/hub/redis_ring.hpp"

#include <hiredis/hiredis.h>

#include <array>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "base/assert.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

RedisValue convert(const redisReply* reply) {
  RedisValue value;
  switch (reply->type) {
    case REDIS_REPLY_INTEGER:
      value.kind = RedisValue::Kind::integer;
      value.integer = reply->integer;
      break;
    case REDIS_REPLY_STRING:
      value.kind = RedisValue::Kind::string;
      value.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_STATUS:
      value.kind = RedisValue::Kind::status;
      value.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_ERROR:
      value.kind = RedisValue::Kind::error;
      value.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_ARRAY:
      value.kind = RedisValue::Kind::array;
      value.elements.reserve(reply->elements);
      for (size_t i = 0; i < reply->elements; ++i) value.elements.push_back(convert(reply->element[i]));
      break;
    default:
      value.kind = RedisValue::Kind::nil;
      break;
  }
  return value;
}

std::string describe(const RedisValue& value) {
  switch (value.kind) {
    case RedisValue::Kind::nil: return "nil";
    case RedisValue::Kind::integer: return std::to_string(value.integer);
    case RedisValue::Kind::string:
    case RedisValue::Kind::status: return fmt::format("'{}'", value.text.substr(0, 60));
    case RedisValue::Kind::error: return "error " + value.text;
    case RedisValue::Kind::array: return fmt::format("an array of {}", value.elements.size());
  }
  return "?";
}

// The Lua script of a publish: one order and one numbering for every hub.
constexpr const char* kPublishScript =
    "local seq = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)\n"
    "redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'c', ARGV[1], 's', seq, 'p', ARGV[2])\n"
    "return seq\n";

// A log entry from XRANGE / XREAD: [id, [c, channel, s, seq, p, payload]].
bool parse_entry(const RedisValue& value, std::string& id, LogEntry& entry) {
  if (value.kind != RedisValue::Kind::array || value.elements.size() != 2) return false;
  const RedisValue& fields = value.elements[1];
  if (value.elements[0].kind != RedisValue::Kind::string || fields.kind != RedisValue::Kind::array) return false;
  id = value.elements[0].text;
  bool channel = false, seq = false, payload = false;
  for (size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    const std::string& name = fields.elements[i].text;
    const std::string& text = fields.elements[i + 1].text;
    if (name == "c") {
      entry.channel = text;
      channel = true;
    } else if (name == "s") {
      try {
        entry.seq = std::stoll(text);
        seq = entry.seq >= 1;
      } catch (const std::exception&) {
        return false;
      }
    } else if (name == "p") {
      entry.payload = text;
      payload = true;
    }
  }
  return channel && seq && payload;
}

}  // namespace

class RedisConnection::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, std::string host, uint16_t port, Failure on_failure)
      : socket_(io), host_(std::move(host)), port_(port), on_failure_(std::move(on_failure)), reader_(redisReaderCreate()) {
    LP_ASSERT(reader_ != nullptr);
  }
  ~Impl() { redisReaderFree(reader_); }

  void connect(std::function<void()> ready) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(host_, ec);
    if (ec) return fail(fmt::format("redis: '{}' is not an IP address", host_));
    socket_.async_connect(tcp::endpoint{address, port_}, [self = shared_from_this(), ready = std::move(ready)](
                                                              boost::system::error_code error) {
      if (error) return self->fail(fmt::format("redis {}:{}: connect: {}", self->host_, self->port_, error.message()));
      self->connected_ = true;
      self->read();
      self->flush();
      ready();
    });
  }

  void command(const std::vector<std::string>& argv, Reply reply) {
    std::vector<const char*> pointers;
    std::vector<size_t> lengths;
    for (const std::string& arg : argv) {
      pointers.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    char* formatted = nullptr;
    const int length = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), pointers.data(), lengths.data());
    LP_ASSERT(length > 0);
    pending_.append(formatted, static_cast<size_t>(length));
    redisFreeCommand(formatted);
    replies_.push_back(std::move(reply));
    flush();
  }

 private:
  void flush() {
    if (!connected_ || writing_ || pending_.empty() || failed_) return;
    writing_ = true;
    in_flight_ = std::move(pending_);
    pending_.clear();
    asio::async_write(socket_, asio::buffer(in_flight_), [self = shared_from_this()](boost::system::error_code error, size_t) {
      self->writing_ = false;
      if (error) return self->fail(fmt::format("redis: write: {}", error.message()));
      self->flush();
    });
  }

  void read() {
    socket_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](boost::system::error_code error, size_t n) {
      if (error) return self->fail(fmt::format("redis: connection lost: {}", error.message()));
      if (redisReaderFeed(self->reader_, self->buffer_.data(), n) != REDIS_OK) {
        return self->fail("redis: the reply could not be parsed");
      }
      for (;;) {
        void* raw = nullptr;
        if (redisReaderGetReply(self->reader_, &raw) != REDIS_OK) return self->fail("redis: the reply could not be parsed");
        if (raw == nullptr) break;
        const RedisValue value = convert(static_cast<redisReply*>(raw));
        freeReplyObject(raw);
        if (self->replies_.empty()) return self->fail("redis: a reply to no command");
        Reply reply = std::move(self->replies_.front());
        self->replies_.pop_front();
        reply(value);
        if (self->failed_) return;
      }
      self->read();
    });
  }

  void fail(std::string why) {
    if (failed_) return;
    failed_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
    on_failure_(why);
  }

  tcp::socket socket_;
  std::string host_;
  uint16_t port_;
  Failure on_failure_;
  redisReader* reader_;
  std::array<char, 64 * 1024> buffer_{};
  std::string pending_;
  std::string in_flight_;
  std::deque<Reply> replies_;
  bool connected_ = false;
  bool writing_ = false;
  bool failed_ = false;
};

RedisConnection::RedisConnection(asio::io_context& io, std::string host, uint16_t port, Failure on_failure)
    : impl_(std::make_shared<Impl>(io, std::move(host), port, std::move(on_failure))) {}
RedisConnection::~RedisConnection() = default;
void RedisConnection::connect(std::function<void()> ready) { impl_->connect(std::move(ready)); }
void RedisConnection::command(const std::vector<std::string>& argv, Reply reply) {
  impl_->command(argv, std::move(reply));
}

resume::RingState rings_from_snapshot(const SharedRingSnapshot& snapshot) {
  resume::RingState rings;
  rings.epoch = snapshot.epoch;
  std::map<std::string, std::vector<const LogEntry*>> by_channel;
  for (const LogEntry& entry : snapshot.log) by_channel[entry.channel].push_back(&entry);
  for (const auto& [channel, top] : snapshot.tops) {
    if (top < 0) continue;
    resume::ChannelRing& ring = rings.channels[channel];
    ring.top = top;
    const auto it = by_channel.find(channel);
    if (it == by_channel.end()) continue;
    // The newest entries, walking back from the top while they run on.
    const auto& entries = it->second;
    size_t first = entries.size();
    int64_t want = top;
    while (first > 0 && entries[first - 1]->seq == want) {
      --first;
      --want;
    }
    for (size_t i = first; i < entries.size(); ++i) {
      const auto bytes = static_cast<uint32_t>(entries[i]->payload.size());
      ring.messages.push_back(resume::Message{snapshot.epoch, entries[i]->seq, bytes});
      ring.bytes += bytes;
    }
  }
  return rings;
}

RedisRingStore::RedisRingStore(asio::io_context& io, SharedRingOptions options, RedisConnection::Failure on_failure)
    : options_(std::move(options)),
      on_failure_(std::move(on_failure)),
      writer_(io, options_.host, options_.port, on_failure_),
      reader_(io, options_.host, options_.port, on_failure_) {}

void RedisRingStore::open(uint64_t proposed, std::function<void(SharedRingSnapshot)> ready) {
  const std::string& p = options_.prefix;
  writer_.connect([this, proposed, p, ready = std::move(ready)]() mutable {
    auto expect_ok = [this](const char* what) {
      return [this, what](const RedisValue& v) {
        if (v.kind == RedisValue::Kind::error) on_failure_(fmt::format("redis: {}: {}", what, v.text));
      };
    };
    writer_.command({"SET", p + ":epoch", std::to_string(proposed), "NX"}, [](const RedisValue&) {});
    writer_.command({"MULTI"}, expect_ok("MULTI"));
    writer_.command({"GET", p + ":epoch"}, expect_ok("GET"));
    writer_.command({"HGETALL", p + ":tops"}, expect_ok("HGETALL"));
    writer_.command({"XRANGE", p + ":log", "-", "+"}, expect_ok("XRANGE"));
    writer_.command({"EXEC"}, [this, ready = std::move(ready)](const RedisValue& v) {
      if (v.kind != RedisValue::Kind::array || v.elements.size() != 3) {
        return on_failure_(fmt::format("redis: the snapshot (MULTI/EXEC) answered {}", describe(v)));
      }
      SharedRingSnapshot snapshot;
      try {
        snapshot.epoch = std::stoull(v.elements[0].text);
      } catch (const std::exception&) {
        return on_failure_(fmt::format("redis: {}:epoch holds {}, not an epoch", options_.prefix, describe(v.elements[0])));
      }
      if (snapshot.epoch == 0) return on_failure_(fmt::format("redis: {}:epoch is 0", options_.prefix));
      const auto& tops = v.elements[1].elements;
      for (size_t i = 0; i + 1 < tops.size(); i += 2) {
        try {
          snapshot.tops[tops[i].text] = std::stoll(tops[i + 1].text);
        } catch (const std::exception&) {
          return on_failure_(fmt::format("redis: {}:tops[{}] is not a number", options_.prefix, tops[i].text));
        }
      }
      for (const RedisValue& raw : v.elements[2].elements) {
        LogEntry entry;
        if (!parse_entry(raw, last_id_, entry)) return on_failure_("redis: a log entry is not {c, s, p}");
        snapshot.log.push_back(std::move(entry));
      }
      ready(std::move(snapshot));
    });
  });
}

void RedisRingStore::follow(std::function<void(LogEntry)> on_entry) {
  on_entry_ = std::move(on_entry);
  reader_.connect([this] { read_more(); });
}

void RedisRingStore::read_more() {
  reader_.command({"XREAD", "COUNT", "1000", "BLOCK", "1000", "STREAMS", options_.prefix + ":log", last_id_},
                  [this](const RedisValue& v) {
    if (v.kind == RedisValue::Kind::error) return on_failure_("redis: XREAD: " + v.text);
    if (v.kind == RedisValue::Kind::array) {
      // [[stream, [entry, ...]]]
      for (const RedisValue& stream : v.elements) {
        if (stream.elements.size() != 2) return on_failure_("redis: XREAD answered an unexpected shape");
        for (const RedisValue& raw : stream.elements[1].elements) {
          LogEntry entry;
          if (!parse_entry(raw, last_id_, entry)) return on_failure_("redis: a log entry is not {c, s, p}");
          on_entry_(std::move(entry));
        }
      }
    }
    read_more();  // nil: BLOCK timed out with nothing new
  });
}

void RedisRingStore::publish(std::string_view channel, std::string_view payload, std::function<void(int64_t)> done) {
  writer_.command({"EVAL", kPublishScript, "2", options_.prefix + ":tops", options_.prefix + ":log", std::string{channel},
                   std::string{payload}, std::to_string(options_.log_max)},
                  [this, done = std::move(done)](const RedisValue& v) {
    if (v.kind != RedisValue::Kind::integer) return on_failure_("redis: publish answered " + describe(v));
    done(v.integer);
  });
}

}  // namespace leaseproof::runtime
