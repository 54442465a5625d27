#pragma once
// The worker's side of the resume protocol for one channel (one connection it
// owns). Sans-IO, like the hub: entry points take the worker's monotonic clock
// and append actions; randomness (reconnect jitter) comes from the injected
// generator.
//
// The cursor is the last message processed AND recorded (the sink write
// confirmed), never the last received: a resume after a crash or a reconnect
// starts after the cursor, and messages at or below it (or already handed to
// the recorder in this session) are dropped as duplicates. One Record batch is
// in flight at a time, so the sink sees messages in order.
//
// Reconnect only after 1001, 1006, 1011, 1012 and 1013, never after 1002 or
// 1008 (GiveUp), with full jitter: uniform in [0, min(cap, base * 2^attempt)].
// See docs/resume-core.md.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/random.hpp"
#include "base/time.hpp"
#include "core/resume/protocol.hpp"

namespace leaseproof::resume {

struct ClientConfig {
  Duration reconnect_base = Duration::from_ms(500);
  Duration reconnect_cap = Duration::from_s(30);
  // Per close code bases, e.g. a longer one after 1013 (try again later).
  std::map<uint16_t, Duration> reconnect_base_by_code;
  // false: sleep exactly min(cap, base * 2^attempt) (the no-jitter baseline
  // that reports compare against; never what production should run).
  bool jitter = true;
  uint32_t record_batch_max = 25;
  // How long a partial batch may wait for more messages: with nothing in
  // flight, fewer than record_batch_max buffered messages are sent once the
  // oldest of them has waited this long (a full batch goes at once). Zero
  // sends at once. A longer linger means fewer, larger sink writes (cost: one
  // transaction per batch, not per message) and a cursor up to this much
  // behind what was processed, i.e. that much more replay after a takeover.
  Duration record_linger = Duration::zero();
  // A record write that failed (throttled, lost, conflicting) is sent again
  // after an exponential backoff with full jitter, as AWS advises for
  // throttling: uniform in [0, min(cap, base * 2^(failures - 1))], failures of
  // this batch so far (jitter false: the ceiling itself). A fixed short delay
  // turns a throttled table into a retry storm that only deepens it.
  Duration record_retry_base = Duration::from_ms(200);
  Duration record_retry_cap = Duration::from_s(5);
  // Tell the hub what was consumed (a Pong with ping 0) once this much was
  // read since the last Pong.
  uint64_t window_update_bytes = 64ull << 10;
  // No frame at all (pings included) for this long: the hub is dead; close
  // the connection (1006) and reconnect.
  Duration hub_silence_timeout = Duration::from_s(10);
  // Deliberately broken variant for checker tests: the cursor is the last
  // message received, and unrecorded messages are forgotten on reconnect.
  bool bug_cursor_on_receive = false;

  // "" when valid, else names the field and what is allowed.
  std::string validate() const;
};

// Client actions.
struct Connect {
  Subscribe subscribe;  // open a connection to the hub and send this
};
struct SendPong {
  Pong pong;
};
// Record these messages (in order) in the sink, then call on_recorded(batch)
// or on_record_failed(batch). `previous` is the cursor before the batch and
// `through` the cursor after it (the last message of the batch).
struct Record {
  uint64_t batch = 0;
  std::vector<Message> messages;
  Position previous;
  Position through;
};
// Close the current connection with this code (the client saw a dead hub).
// The client has already handled it as on_closed(code) (and may have emitted
// the next Connect in the same call): do not report on_closed for it.
struct CloseConnection {
  uint16_t code = close_code::abnormal;
  const char* reason = "";
};
// A Reset arrived: the gap it names is lost on purpose (for the trace).
struct ResetSeen {
  Reset reset;
};
// Never reconnect: the hub refused the request itself (1002, 1008, ...).
struct GiveUp {
  uint16_t code = 0;
};
struct ClientMark {
  const char* name;
};
using ClientAction = std::variant<Connect, SendPong, Record, CloseConnection, ResetSeen, GiveUp, ClientMark>;
using ClientActions = std::vector<ClientAction>;

class ResumeClient {
 public:
  // `recorded`: the last position recorded in the sink (the lease item's
  // checkpoint); the first Connect resumes after it.
  ResumeClient(ClientConfig config, std::string channel, Position recorded, RandomSource& random);

  void start(Instant now, ClientActions& out);
  void on_frame(const HubFrame& frame, Instant now, ClientActions& out);
  // The connection closed (by either side, or dropped: 1006).
  void on_closed(uint16_t code, Instant now, ClientActions& out);
  void on_recorded(uint64_t batch, Instant now, ClientActions& out);
  // The write failed or its outcome is unknown: send the same batch again
  // after the backoff (the sink write is idempotent).
  void on_record_failed(uint64_t batch, Instant now, ClientActions& out);
  void on_timer(Instant now, ClientActions& out);
  Instant next_deadline() const;

  const std::string& channel() const { return channel_; }
  Position cursor() const { return cursor_; }   // processed and recorded
  bool connected() const { return connected_; }
  bool given_up() const { return given_up_; }
  uint32_t reconnect_attempt() const { return attempt_; }
  // The delay the next reconnect after `code` would draw from (its cap).
  Duration backoff_ceiling(uint16_t code) const;
  // The delay the next record retry would draw from (its cap).
  Duration record_retry_ceiling() const;

 private:
  void connect(Instant now, ClientActions& out);
  void maybe_record(Instant now, ClientActions& out);
  // When the buffered partial batch is due (linger); max when none waits.
  Instant linger_due() const;

  ClientConfig config_;
  std::string channel_;
  RandomSource& random_;
  Position cursor_;         // recorded
  Position handed_;         // last message handed to the recorder or buffered
  Position batched_;        // `through` of the last batch formed (the next batch's `previous`)
  std::deque<Message> buffer_;  // received, not yet in a batch
  std::deque<Instant> arrived_;  // when each message of buffer_ was received (same order)
  std::optional<Record> in_flight_;
  Instant retry_at_ = Instant::max();  // resend in_flight_ at
  uint64_t next_batch_ = 1;
  bool connected_ = false;
  bool given_up_ = false;
  uint32_t attempt_ = 0;
  Instant reconnect_at_ = Instant::max();
  Instant last_frame_;  // set by every Connect and every frame; read only while connected
  uint64_t consumed_since_pong_ = 0;
  uint32_t record_failures_ = 0;  // of the batch in flight
};

}  // namespace leaseproof::resume
