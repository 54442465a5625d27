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
//
// Sink item (table `records` by default):
//   pk   "<connection>#<hub epoch>"   S  (hash)
//   seq  message sequence number      N  (range)
//   bytes, lease_epoch, recorded_by
// Lease item: `stream_epoch` and `last_seq` hold the checkpoint (Position).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dynamo/types.hpp"
#include "core/lease/config.hpp"
#include "core/resume/protocol.hpp"

namespace leaseproof::resume {

enum class RecordMode : uint8_t { transact, put };
std::string_view to_string(RecordMode mode);

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
// ...then the fenced checkpoint of the batch.
dynamo::Request checkpoint_position(const lease::LeaseConfig& lease, std::string_view connection,
                                    std::string_view worker, int64_t lease_epoch, Position previous,
                                    Position through);

// Put mode: the highest seq recorded in the sink for (connection, hub
// epoch), read before recording in that epoch: a previous owner's puts may
// be ahead of its checkpoint (the checkpoint write was lost), and the sink,
// not the checkpoint, is the truth. A strongly consistent Query, newest
// first, one item.
dynamo::Request last_record_query(const SinkTable& sink, std::string_view connection, uint64_t hub_epoch);
// The seq of last_record_query's answer (0 when the epoch has no record).
int64_t last_record_seq(const dynamo::QueryResponse& response);

// The checkpoint as read from a lease item (Position{} if never recorded).
Position checkpoint_of(const dynamo::Item& lease_item);
// Whether a refused write's lease item (ALL_OLD) shows the lease still
// `worker`'s at `lease_epoch` with a checkpoint at or past `through`: an
// earlier attempt applied and its answer was lost. Anything else (no item,
// another owner or epoch) means the lease is gone.
bool checkpoint_applied(const std::optional<dynamo::Item>& lease_item, std::string_view worker, int64_t lease_epoch,
                        Position through);

}  // namespace leaseproof::resume
