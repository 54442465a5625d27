#pragma once
// The connection registry's operations (seed 003), sans-IO: join, leave, the
// members of a room, the removal of a connection's rows, presence, and
// broadcast (members, a post to each, pruning on 410 Gone). Every entry point
// takes the node's clock readings and appends the actions the caller carries
// out: DynamoDB calls, posts to connections (API Gateway's
// PostToConnection), and one Done per operation. The caller calls on_timer()
// at next_deadline() (retries wait a full-jitter backoff).
//
// Failures are values: a DynamoDB error or a lost reply is retried while the
// operation has attempts left, then reported in Done::error; a throttled or
// failed post is retried the same way, then counted as failed.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/random.hpp"
#include "base/time.hpp"
#include "core/dynamo/error.hpp"
#include "core/dynamo/types.hpp"
#include "core/registry/config.hpp"
#include "core/registry/requests.hpp"

namespace leaseproof::registry {

using Clock = ClockReading;
// Chosen by the caller, unique among its operations in flight; values at or
// above kInternalOperations are the client's own (a broadcast's prunes).
using OperationId = uint64_t;
inline constexpr OperationId kInternalOperations = OperationId{1} << 63;

// What API Gateway answered a PostToConnection: 200, 410 Gone, 429 (throttled),
// anything else or no answer in time.
enum class PostStatus : uint8_t { ok, gone, throttled, failed };

struct DynamoCall {
  uint64_t token = 0;  // pass back to on_reply
  OperationId operation = 0;
  dynamo::Request request;
};
struct PostToConnection {
  uint64_t token = 0;  // pass back to on_post_result
  OperationId operation = 0;
  std::string connection;
  std::string payload;
};

struct JoinDone {};
struct LeaveDone {};
struct MembersDone {
  std::vector<Member> members;  // in shard order, then sort key order
};
struct RemoveDone {
  uint32_t rows_found = 0;
  uint32_t rows_deleted = 0;
  // Rows whose delete DynamoDB left unprocessed and that were not deleted:
  // after every attempt (core), or at once (seed: UnprocessedItems dropped).
  uint32_t rows_left = 0;
};
struct PresenceDone {
  bool online = false;
};
struct BroadcastDone {
  uint32_t members = 0;
  uint32_t delivered = 0;
  uint32_t gone = 0;    // answered 410: their rows were pruned (see rows_*)
  uint32_t failed = 0;  // throttled or failed after every attempt
  uint32_t rows_pruned = 0;
  uint32_t rows_left = 0;       // rows of gone connections still there
  uint32_t prune_failures = 0;  // prunes that ended with an error
};
using Outcome = std::variant<JoinDone, LeaveDone, MembersDone, RemoveDone, PresenceDone, BroadcastDone>;

struct Done {
  OperationId operation = 0;
  std::string error;  // "" on success; else why it failed (the outcome holds what was done)
  Outcome outcome;
  uint32_t requests = 0;  // DynamoDB requests sent, retries included
  // Capacity DynamoDB reported as consumed (every request asks for TOTAL).
  double read_units = 0;
  double write_units = 0;
};
// A rare path was taken (coverage marks: tests assert they were hit).
struct Mark {
  const char* name;
};

using Action = std::variant<DynamoCall, PostToConnection, Done, Mark>;
using Actions = std::vector<Action>;

class RegistryClient {
 public:
  // `config` must be valid (config.validate() empty).
  RegistryClient(RegistryConfig config, RandomSource& random);

  void join(OperationId id, std::string_view room, std::string_view connection, std::string_view user, Clock now,
            Actions& out);
  void leave(OperationId id, std::string_view room, std::string_view connection, Clock now, Actions& out);
  void members(OperationId id, std::string_view room, Clock now, Actions& out);
  // Every membership of the connection ($disconnect, or a 410 in a broadcast).
  void remove_connection(OperationId id, std::string_view connection, Clock now, Actions& out);
  void presence(OperationId id, std::string_view user, Clock now, Actions& out);
  void broadcast(OperationId id, std::string_view room, std::string_view payload, Clock now, Actions& out);

  // The answer to a DynamoCall, or nullptr when it timed out.
  void on_reply(uint64_t token, const dynamo::Result<dynamo::Response>* reply, Clock now, Actions& out);
  void on_post_result(uint64_t token, PostStatus status, Clock now, Actions& out);
  void on_timer(Clock now, Actions& out);
  // Monotonic time of the next on_timer() call needed; Instant::max() if none.
  Instant next_deadline() const;

  size_t operations_in_flight() const { return operations_.size(); }
  const RegistryConfig& config() const { return config_; }

 private:
  enum class Kind : uint8_t { join, leave, members, remove, presence, broadcast };
  enum class Purpose : uint8_t { write, members_page, rooms_page, delete_batch, presence_page };
  struct Call {
    OperationId operation = 0;
    Purpose purpose = Purpose::write;
    uint32_t shard = 0;
    uint32_t attempt = 0;  // 0 for the first; the backoff grows with it
    dynamo::Request request;
    // Attempts in a row that got nothing done (an error, no answer). A call
    // is given up after attempts_max of them; a batch whose items partly
    // went through starts counting again, so that a throttled partition
    // that takes a few deletes at a time still gets the whole batch through.
    uint32_t stalled = 0;
  };
  struct PostCall {
    OperationId operation = 0;
    size_t member = 0;
    uint32_t attempt = 0;
  };
  struct Operation {
    Kind kind = Kind::join;
    std::optional<OperationId> parent;  // a broadcast's prune
    std::string subject;                // room, connection or user
    std::string payload;
    uint32_t waiting = 0;  // DynamoDB calls in flight or waiting to be retried
    uint32_t pages = 0;
    Done done;
    std::vector<Member> members;
    // remove: the keys found, deleted in batches one at a time from next_key
    std::vector<dynamo::Item> keys;
    size_t next_key = 0;
    RemoveDone removed;
    // broadcast
    size_t next_post = 0;
    uint32_t posts_waiting = 0;  // in flight or waiting to be retried
    uint32_t prunes_waiting = 0;
    BroadcastDone broadcast;
  };

  Operation& begin(OperationId id, Kind kind, std::string_view subject);
  void send(OperationId id, Operation& op, Call call, Actions& out);
  void retry_later(Call call, Clock now, Actions& out);
  void on_page(OperationId id, Operation& op, const Call& call, const dynamo::QueryResponse& page, Clock now,
               Actions& out);
  void on_batch(OperationId id, Operation& op, Call call, const dynamo::BatchWriteItemResponse& reply, Clock now,
                Actions& out);
  void next_batch(OperationId id, Operation& op, Actions& out);
  void pump_posts(OperationId id, Operation& op, Actions& out);
  void post(OperationId id, Operation& op, PostCall call, Actions& out);
  void finish_if_done(OperationId id, Clock now, Actions& out);

  RegistryConfig config_;
  RandomSource& random_;
  std::map<OperationId, Operation> operations_;
  std::map<uint64_t, Call> calls_;  // by token
  std::map<uint64_t, PostCall> posts_;
  // Retries by (due monotonic time, order scheduled): a total order.
  std::map<std::pair<Instant, uint64_t>, std::variant<Call, PostCall>> retries_;
  uint64_t next_token_ = 1;
  uint64_t retries_scheduled_ = 0;
  OperationId next_internal_ = kInternalOperations;
};

}  // namespace leaseproof::registry
