#pragma once
// One owned stream: the resume client of one connection plus the fenced
// recording of what it processes. Sans-IO like the rest of core/: the caller
// opens it when the lease manager opens a session (OpenSession carries the
// checkpoint to resume after), feeds it hub frames, connection closes and
// sink replies, and drops it when the lease manager closes the session.
//
// Recording (recording.hpp): one batch in flight; transact mode sends one
// TransactWriteItems per batch, put mode one conditional put per message and
// then the fenced checkpoint, packed mode one conditional put per pack of
// consecutive messages and then the checkpoint. Put and packed modes first
// read the sink's last record of
// each hub epoch it records in: an earlier owner's puts may have got ahead of
// its checkpoint, and recording below them would break the order. A refused write that still shows the lease as
// ours with a checkpoint at or past the batch counts as recorded (an earlier
// attempt applied and its reply was lost); any other refusal means the lease
// is gone, and the session stops recording (the lease manager closes it when
// its renew fails or its deadline passes).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/dynamo/error.hpp"
#include "core/dynamo/types.hpp"
#include "core/lease/config.hpp"
#include "core/resume/client.hpp"
#include "core/resume/recording.hpp"

namespace leaseproof::resume {

struct SessionConfig {
  ClientConfig client;
  RecordMode mode = RecordMode::transact;
  SinkTable sink;
  // Packed mode: a pack item's size limit, kPackBytesMin..kPackBytesMax.
  // 8 KiB holds 31 messages of 256 B (8 WCU).
  uint32_t pack_bytes = 8 * 1024;
};

// A DynamoDB call for the sink; pass its answer (nullptr on timeout) to
// on_sink_reply(token, ...).
struct SinkCall {
  uint64_t token = 0;
  const char* kind = "";  // "record" (transaction or put), "checkpoint", or "probe" (put mode's read of the sink)
  dynamo::Request request;
  // The messages the call writes or checkpoints, first and last (inclusive);
  // zero for a probe. Hosts trace them with the call.
  Position first;
  Position last;
};
// A batch is durably recorded: messages (previous, through] of this session.
struct Recorded {
  Position previous;
  Position through;
  uint32_t messages = 0;
};
// The sink refused a write for good: the lease is no longer ours.
struct Fenced {};

using SessionAction =
    std::variant<Connect, SendPong, CloseConnection, ResetSeen, GiveUp, ClientMark, SinkCall, Recorded, Fenced>;
using SessionActions = std::vector<SessionAction>;

class StreamSession {
 public:
  StreamSession(const SessionConfig& config, const lease::LeaseConfig& lease, std::string connection,
                std::string worker, int64_t lease_epoch, Position recorded, RandomSource& random);

  void start(Instant now, SessionActions& out);
  void on_frame(const HubFrame& frame, Instant now, SessionActions& out);
  void on_closed(uint16_t code, Instant now, SessionActions& out);
  void on_sink_reply(uint64_t token, const dynamo::Result<dynamo::Response>* reply, Instant now,
                     SessionActions& out);
  void on_timer(Instant now, SessionActions& out);
  Instant next_deadline() const { return client_.next_deadline(); }

  const ResumeClient& client() const { return client_; }
  const std::string& connection() const { return connection_; }
  int64_t lease_epoch() const { return lease_epoch_; }
  bool fenced() const { return fenced_; }

 private:
  struct Writing {
    Record record;
    size_t next_put = 0;      // put and packed modes: messages[next_put] is the next to put
    size_t putting = 0;       // how many messages the put in flight writes (packed: the pack's length)
    bool checkpointing = false;
    std::optional<uint64_t> probing;  // put mode: the epoch whose last record is being read
    uint64_t token = 0;       // the call in flight (0: none)
  };

  void translate(ClientActions& actions, Instant now, SessionActions& out);
  void send_next(Instant now, SessionActions& out);
  void finish(Instant now, SessionActions& out);
  // A refused write: counts as recorded if the lease item (ALL_OLD) shows the
  // lease ours with a checkpoint at or past the batch.
  bool already_recorded(const std::optional<dynamo::Item>& lease_item) const;
  void fence(SessionActions& out);

  const SessionConfig& config_;
  const lease::LeaseConfig& lease_;
  std::string connection_;
  std::string worker_;
  int64_t lease_epoch_;
  ResumeClient client_;
  std::optional<Writing> writing_;
  uint64_t next_token_ = 1;
  bool fenced_ = false;
  // Put and packed modes: per hub epoch, the highest seq the sink held when
  // first read (or a refused pack showed); puts at or below it are skipped
  // (already recorded by an earlier owner).
  std::map<uint64_t, int64_t> sink_floor_;
};

}  // namespace leaseproof::resume
