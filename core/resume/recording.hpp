#pragma once
// Recording processed messages into the sink table, fenced by the lease.
// Two modes (docs/resume-core.md names the trade-off):
//
//   transact  one TransactWriteItems per batch: a Put per message
//             (attribute_not_exists) and an Update of the lease item that
//             advances the checkpoint, conditional on owner, lease epoch and
//             the checkpoint being before the batch. All or nothing: records
//             and checkpoint never disagree; a stale owner writes nothing.
//             Costs 2 WCU per item (transactions cost double); dynalite does
//             not implement TransactWriteItems.
//   put       an idempotent conditional Put per message (attribute_not_exists
//             on (connection#epoch, seq)), then a fenced checkpoint Update per
//             batch. Half the cost, works on dynalite; the record writes
//             themselves are not fenced (a retried put is harmless, the
//             checkpoint is fenced), so ordering across a handover relies on
//             the old owner having stopped.
//   packed    put mode with consecutive messages of one hub epoch packed
//             into one sink item of at most `pack_bytes`, keyed by its first
//             seq: a pack costs ceil(size / 1 KB) WCU for all its messages,
//             then one fenced checkpoint per batch. Fenced like put mode. A
//             pack refused because an item with its key exists (an earlier
//             owner's pack, or this one's lost answer) shows that item
//             (ALL_OLD): what it covers is skipped, the rest packed again.
//
// Sink item (table `records` by default):
//   pk        "<connection>#<hub epoch>"   S  (hash)
//   seq       message sequence number      N  (range; a pack's first)
//   bytes, lease_epoch, recorded_by
//   last_seq, messages, payload           packs only: the last seq, how many,
//                                          and a stand-in of the payloads
//                                          (bytes long), so that the item
//                                          costs what real messages cost
// Lease item: `stream_epoch` and `last_seq` hold the checkpoint (Position).

#include <cstdint>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "core/dynamo/types.hpp"
#include "core/lease/config.hpp"
#include "core/resume/protocol.hpp"

namespace leaseproof::resume {

enum class RecordMode : uint8_t { transact, put, packed };
std::string_view to_string(RecordMode mode);
// Whether the record writes themselves are fenced by the lease epoch (only
// in a transaction): put and packed modes rely on the old owner having
// stopped (docs/resume-core.md).
inline bool record_writes_fenced(RecordMode mode) { return mode == RecordMode::transact; }

// The checkpoint's update of the lease item (cost reports count its units).
inline constexpr const char* kCheckpointUpdateExpression = "SET stream_epoch = :se, last_seq = :s";

// Packed mode: a pack item's size limit. DynamoDB's item limit is 400 KB;
// 64 KiB keeps a pack's replay and its write's size modest.
inline constexpr uint32_t kPackBytesMin = 1024;
inline constexpr uint32_t kPackBytesMax = 64 * 1024;

struct SinkTable {
  std::string name = "records";
};

std::string sink_key(std::string_view connection, uint64_t hub_epoch);  // "<connection>#<epoch>"

dynamo::Request create_sink_table_request(const SinkTable& sink);

// Transact mode: the whole batch and the checkpoint in one transaction.
// `token` becomes the ClientRequestToken (a retry with the same token within
// 10 minutes is idempotent).
dynamo::Request record_transaction(const lease::LeaseConfig& lease, const SinkTable& sink,
                                   std::string_view connection, std::string_view worker, int64_t lease_epoch,
                                   const std::vector<Message>& messages, Position previous, Position through,
                                   std::string_view token);
// Put mode: one idempotent put per message...
dynamo::Request record_put(const SinkTable& sink, std::string_view connection, std::string_view worker,
                           int64_t lease_epoch, const Message& message);
// Packed mode: one idempotent put of consecutive messages of one hub epoch
// (attribute_not_exists on (connection#epoch, first seq)); a refusal returns
// the existing item (ALL_OLD).
dynamo::Request record_pack(const SinkTable& sink, std::string_view connection, std::string_view worker,
                            int64_t lease_epoch, std::span<const Message> messages);
// How many of `messages`, from the first, one pack of at most `pack_bytes`
// holds: consecutive, of the first's hub epoch, at least one (a message
// larger than a pack has a pack of its own).
size_t pack_length(std::string_view connection, std::string_view worker, int64_t lease_epoch,
                   std::span<const Message> messages, uint32_t pack_bytes);
// ...then the fenced checkpoint of the batch.
dynamo::Request checkpoint_position(const lease::LeaseConfig& lease, std::string_view connection,
                                    std::string_view worker, int64_t lease_epoch, Position previous,
                                    Position through);

// Put and packed modes: the highest seq recorded in the sink for (connection, hub
// epoch), read before recording in that epoch: a previous owner's puts may
// be ahead of its checkpoint (the checkpoint write was lost), and the sink,
// not the checkpoint, is the truth. A strongly consistent Query, newest
// first, one item.
dynamo::Request last_record_query(const SinkTable& sink, std::string_view connection, uint64_t hub_epoch);
// The last seq of last_record_query's answer (0 when the epoch has no
// record): a pack's last_seq, a single record's seq.
int64_t last_record_seq(const dynamo::QueryResponse& response);
// The last seq a sink item covers (nullopt if it has no seq).
std::optional<int64_t> record_last_seq(const dynamo::Item& record);

// The checkpoint as read from a lease item (Position{} if never recorded).
Position checkpoint_of(const dynamo::Item& lease_item);
// Whether a refused write's lease item (ALL_OLD) shows the lease still
// `worker`'s at `lease_epoch` with a checkpoint at or past `through`: an
// earlier attempt applied and its answer was lost. Anything else (no item,
// another owner or epoch) means the lease is gone.
bool checkpoint_applied(const std::optional<dynamo::Item>& lease_item, std::string_view worker, int64_t lease_epoch,
                        Position through);

}  // namespace leaseproof::resume
