#include "core/resume/session.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "core/lease/requests.hpp"

namespace leaseproof::resume {
namespace {

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// ClientRequestToken: unique per connection, lease epoch and batch end (a
// token reused with other parameters is an IdempotentParameterMismatch), at
// most 36 characters.
std::string request_token(std::string_view connection, int64_t lease_epoch, Position through) {
  std::string token = fmt::format(FMT_COMPILE("{:016x}-{}-{}-{}"), fnv1a(connection), lease_epoch, through.epoch,
                                  through.seq);
  if (token.size() > 36) token.resize(36);
  return token;
}

void ask_old_item_on_failure(dynamo::Request& request) {
  if (auto* transact = std::get_if<dynamo::TransactWriteItemsRequest>(&request)) {
    for (dynamo::TransactWriteItem& item : transact->transact_items) {
      if (auto* update = std::get_if<dynamo::TransactUpdate>(&item)) {
        update->condition.return_values_on_condition_check_failure =
            dynamo::ReturnValuesOnConditionCheckFailure::all_old;
      }
    }
  } else if (auto* update = std::get_if<dynamo::UpdateItemRequest>(&request)) {
    update->write.return_values_on_condition_check_failure = dynamo::ReturnValuesOnConditionCheckFailure::all_old;
  }
}

bool is_error(const dynamo::Result<dynamo::Response>& reply, std::string_view type) {
  return !reply.ok() && reply.error().type == type;
}

}  // namespace

StreamSession::StreamSession(const SessionConfig& config, const lease::LeaseConfig& lease, std::string connection,
                             std::string worker, int64_t lease_epoch, Position recorded, RandomSource& random)
    : config_(config),
      lease_(lease),
      connection_(std::move(connection)),
      worker_(std::move(worker)),
      lease_epoch_(lease_epoch),
      client_(config.client, connection_, recorded, random) {}

void StreamSession::start(Instant now, SessionActions& out) {
  ClientActions actions;
  client_.start(now, actions);
  translate(actions, now, out);
}

void StreamSession::on_frame(const HubFrame& frame, Instant now, SessionActions& out) {
  ClientActions actions;
  client_.on_frame(frame, now, actions);
  translate(actions, now, out);
}

void StreamSession::on_closed(uint16_t code, Instant now, SessionActions& out) {
  ClientActions actions;
  client_.on_closed(code, now, actions);
  translate(actions, now, out);
}

void StreamSession::on_timer(Instant now, SessionActions& out) {
  ClientActions actions;
  client_.on_timer(now, actions);
  translate(actions, now, out);
}

void StreamSession::translate(ClientActions& actions, Instant now, SessionActions& out) {
  for (ClientAction& action : actions) {
    if (auto* record = std::get_if<Record>(&action)) {
      if (fenced_) continue;
      // A retried batch carries on where its last attempt stopped.
      if (!writing_ || writing_->record.batch != record->batch) writing_ = Writing{std::move(*record), 0, 0, false, std::nullopt, 0};
      send_next(now, out);
      continue;
    }
    std::visit([&](auto& other) {
      using T = std::decay_t<decltype(other)>;
      if constexpr (!std::is_same_v<T, Record>) out.emplace_back(std::move(other));
    }, action);
  }
}

void StreamSession::send_next(Instant, SessionActions& out) {
  Writing& writing = *writing_;
  const Record& record = writing.record;
  writing.token = next_token_++;
  if (config_.mode == RecordMode::transact) {
    dynamo::Request request = record_transaction(lease_, config_.sink, connection_, worker_, lease_epoch_,
                                                 record.messages, record.previous, record.through,
                                                 request_token(connection_, lease_epoch_, record.through));
    ask_old_item_on_failure(request);
    auto& call = std::get<SinkCall>(out.emplace_back(std::in_place_type<SinkCall>, writing.token, "record",
                                                      std::move(request)));  // built in place
    call.first = position_of(record.messages.front());
    call.last = position_of(record.messages.back());
    return;
  }
  // Skip what an earlier owner already put; read the sink first in an epoch
  // not seen yet.
  while (writing.next_put < record.messages.size()) {
    const Message& next = record.messages[writing.next_put];
    const auto floor = sink_floor_.find(next.epoch);
    if (floor == sink_floor_.end()) {
      writing.probing = next.epoch;
      out.emplace_back(std::in_place_type<SinkCall>, writing.token, "probe",
                       last_record_query(config_.sink, connection_, next.epoch));
      return;
    }
    if (next.seq > floor->second) break;
    out.push_back(ClientMark{"resume.put_below_sink_floor"});
    ++writing.next_put;
  }
  if (writing.next_put < record.messages.size() && config_.mode == RecordMode::packed) {
    const std::span<const Message> rest = std::span<const Message>{record.messages}.subspan(writing.next_put);
    writing.putting = pack_length(connection_, worker_, lease_epoch_, rest, config_.pack_bytes);
    const std::span<const Message> pack = rest.first(writing.putting);
    auto& call = std::get<SinkCall>(out.emplace_back(std::in_place_type<SinkCall>, writing.token, "record",
                                                      record_pack(config_.sink, connection_, worker_, lease_epoch_, pack)));
    call.first = position_of(pack.front());
    call.last = position_of(pack.back());
    return;
  }
  if (writing.next_put < record.messages.size()) {
    const Message& put = record.messages[writing.next_put];
    writing.putting = 1;
    auto& call = std::get<SinkCall>(out.emplace_back(std::in_place_type<SinkCall>, writing.token, "record",
                                                      record_put(config_.sink, connection_, worker_, lease_epoch_, put)));
    call.first = call.last = position_of(put);
    return;
  }
  writing.checkpointing = true;
  dynamo::Request request =
      checkpoint_position(lease_, connection_, worker_, lease_epoch_, record.previous, record.through);
  ask_old_item_on_failure(request);
  auto& call = std::get<SinkCall>(
      out.emplace_back(std::in_place_type<SinkCall>, writing.token, "checkpoint", std::move(request)));
  call.first = position_of(record.messages.front());
  call.last = position_of(record.messages.back());
}

void StreamSession::on_sink_reply(uint64_t token, const dynamo::Result<dynamo::Response>* reply, Instant now,
                                  SessionActions& out) {
  if (fenced_ || !writing_ || writing_->token != token) return;  // answer to a superseded call
  Writing& writing = *writing_;
  writing.token = 0;
  if (writing.probing) {
    const auto* query = reply != nullptr && reply->ok() ? std::get_if<dynamo::QueryResponse>(&reply->value()) : nullptr;
    if (query != nullptr) {
      sink_floor_[*writing.probing] = last_record_seq(*query);
      writing.probing.reset();
      return send_next(now, out);
    }
    writing.probing.reset();  // asked again after the backoff
    out.push_back(ClientMark{"resume.probe_retried"});
    ClientActions actions;
    client_.on_record_failed(writing.record.batch, now, actions);
    return translate(actions, now, out);
  }
  const bool put_step = config_.mode != RecordMode::transact && !writing.checkpointing;
  if (reply != nullptr && reply->ok()) {
    if (!put_step) return finish(now, out);
    writing.next_put += writing.putting;
    return send_next(now, out);
  }
  if (reply != nullptr && put_step && is_error(*reply, dynamo::error_type::conditional_check_failed)) {
    if (config_.mode == RecordMode::put) {
      out.push_back(ClientMark{"resume.put_already_recorded"});  // an earlier attempt applied
      ++writing.next_put;
      return send_next(now, out);
    }
    // A pack with this first seq exists: this pack's lost answer, or an
    // earlier owner's pack that landed after this session read the sink.
    // Whatever it covers is recorded; the rest is packed again after it.
    const uint64_t epoch = writing.record.messages[writing.next_put].epoch;
    const std::optional<dynamo::Item>& existing = reply->error().item;
    const std::optional<int64_t> last = existing ? record_last_seq(*existing) : std::nullopt;
    if (last) {
      out.push_back(ClientMark{"resume.pack_already_recorded"});
      int64_t& floor = sink_floor_[epoch];
      floor = std::max(floor, *last);
    } else {
      sink_floor_.erase(epoch);  // read the sink again
    }
    return send_next(now, out);
  }
  if (reply != nullptr && !put_step && is_error(*reply, dynamo::error_type::conditional_check_failed)) {
    return already_recorded(reply->error().item) ? finish(now, out) : fence(out);
  }
  if (reply != nullptr && is_error(*reply, dynamo::error_type::transaction_canceled)) {
    const auto& reasons = reply->error().cancellation_reasons;
    const dynamo::CancellationReason* lease_reason = reasons.empty() ? nullptr : &reasons.back();
    if (lease_reason != nullptr && lease_reason->code == "ConditionalCheckFailed") {
      return already_recorded(lease_reason->item) ? finish(now, out) : fence(out);
    }
    for (const dynamo::CancellationReason& reason : reasons) {
      // A record exists that the checkpoint does not cover: only another
      // writer can have put it, so this stream is not ours to record.
      if (reason.code == "ConditionalCheckFailed") return fence(out);
    }
  }
  // Lost, throttled, conflicting or failed: the same step again after the
  // client's backoff (every write is idempotent).
  out.push_back(ClientMark{reply == nullptr ? "resume.record_ambiguous" : "resume.record_retried"});
  ClientActions actions;
  client_.on_record_failed(writing.record.batch, now, actions);
  translate(actions, now, out);
}

void StreamSession::finish(Instant now, SessionActions& out) {
  const Record& record = writing_->record;
  out.push_back(Recorded{record.previous, record.through, static_cast<uint32_t>(record.messages.size())});
  const uint64_t batch = record.batch;
  writing_.reset();
  ClientActions actions;
  client_.on_recorded(batch, now, actions);
  translate(actions, now, out);
}

bool StreamSession::already_recorded(const std::optional<dynamo::Item>& lease_item) const {
  return checkpoint_applied(lease_item, worker_, lease_epoch_, writing_->record.through);
}

void StreamSession::fence(SessionActions& out) {
  fenced_ = true;
  writing_.reset();
  out.push_back(ClientMark{"resume.record_fenced"});
  out.push_back(Fenced{});
}

}  // namespace leaseproof::resume
