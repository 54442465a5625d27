// The worker's side of the resume protocol: dedup, batching into the sink,
// flow control, liveness of the hub, and reconnect with full jitter.
//
// Choices the header leaves open (docs/resume-core.md repeats them):
//   - A connection counts as connected from the moment Connect is emitted, not
//     from its first frame: the hub-silence deadline then also covers a
//     connection that opens but never delivers anything.
//   - Reconnect resumes after the cursor (recorded), never after what was
//     received. Buffered, unbatched messages are dropped (the hub replays
//     them); the batch in flight is kept and retried until it is recorded,
//     which is what makes it safe to drop its replayed messages as
//     duplicates. The hub is thus asked for exactly what the sink has
//     confirmed, so a Reset names a gap relative to the sink.
//   - A hole without a Reset (same epoch, or a new epoch) is the hub breaking
//     the protocol. The client marks it and records what arrived: dropping
//     would stall the channel forever, and the exactly-once checker then sees
//     the hole it must report.
#include "core/resume/client.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "base/backoff.hpp"

namespace leaseproof::resume {
namespace {

Position later_of(Position a, Position b) { return before(a, b) ? b : a; }

const char* reset_mark(ResetKind kind) {
  switch (kind) {
    case ResetKind::evicted: return "client.reset_evicted";
    case ResetKind::epoch_changed: return "client.reset_epoch_changed";
    case ResetKind::ahead_of_top: return "client.reset_ahead_of_top";
    case ResetKind::over_limit: return "client.reset_over_limit";
  }
  LP_UNREACHABLE("reset kind {}", static_cast<int>(kind));
}

// Does `next` follow `last` with nothing lost in between?
bool follows(Position last, Position next) {
  if (next.epoch == last.epoch) return next.seq == last.seq + 1;
  // Epoch 0 is "nothing yet": the first message of the first epoch seen loses nothing.
  return last.epoch == 0 && last.seq == 0 && next.seq == 1;
}

// A cursor that lags further than this is replay a takeover pays for and a
// hub ring must hold, and it must stay well inside the checkers' quiet end
// (a minute with nothing published) to be recorded before the run ends.
constexpr Duration kRecordLingerMax = Duration::from_s(30);

}  // namespace

std::string ClientConfig::validate() const {
  auto positive = [](Duration d) { return d > Duration::zero(); };
  if (!positive(reconnect_base)) return fmt::format("resume.reconnect_base ({}) must be positive", reconnect_base);
  if (reconnect_cap < reconnect_base) {
    return fmt::format("resume.reconnect_cap ({}) must be at least resume.reconnect_base ({})", reconnect_cap,
                       reconnect_base);
  }
  for (const auto& [code, base] : reconnect_base_by_code) {
    if (!positive(base) || base > reconnect_cap) {
      return fmt::format("resume.reconnect_base_by_code[{}] ({}) must be positive and at most resume.reconnect_cap ({})",
                         code, base, reconnect_cap);
    }
  }
  if (!positive(record_retry_base)) {
    return fmt::format("resume.record_retry_base ({}) must be positive", record_retry_base);
  }
  if (record_retry_cap < record_retry_base) {
    return fmt::format("resume.record_retry_cap ({}) must be at least resume.record_retry_base ({})",
                       record_retry_cap, record_retry_base);
  }
  // TransactWriteItems takes at most 100 items, and one of them is the lease item.
  if (record_batch_max < 1 || record_batch_max > 99) {
    return fmt::format("resume.record_batch_max ({}) must be 1..99", record_batch_max);
  }
  if (record_linger.is_negative() || record_linger > kRecordLingerMax) {
    return fmt::format("resume.record_linger ({}) must be 0..{}", record_linger, kRecordLingerMax);
  }
  if (window_update_bytes == 0) return "resume.window_update_bytes must be positive";
  if (!positive(hub_silence_timeout)) {
    return fmt::format("resume.hub_silence_timeout ({}) must be positive", hub_silence_timeout);
  }
  return {};
}

ResumeClient::ResumeClient(ClientConfig config, std::string channel, Position recorded, RandomSource& random)
    : config_(std::move(config)),
      channel_(std::move(channel)),
      random_(random),
      cursor_(recorded),
      handed_(recorded),
      batched_(recorded) {
  LP_ASSERT_MSG(config_.validate().empty(), "invalid resume client config: {}", config_.validate());
  LP_ASSERT(!channel_.empty());
}

void ResumeClient::start(Instant now, ClientActions& out) {
  LP_ASSERT(!connected_);
  LP_ASSERT(!given_up_);
  LP_ASSERT(reconnect_at_ == Instant::max());
  connect(now, out);
}

void ResumeClient::connect(Instant now, ClientActions& out) {
  // Whatever was received but not batched is replayed by the hub after the
  // cursor. The batch in flight stays: it is retried until recorded, so its
  // messages count as handed and their replay is dropped as duplicates. The
  // broken variant instead resumes after the last received (its cursor),
  // losing the buffer for good.
  buffer_.clear();
  arrived_.clear();
  handed_ = cursor_;
  if (in_flight_) handed_ = later_of(handed_, in_flight_->through);
  connected_ = true;
  reconnect_at_ = Instant::max();
  last_frame_ = now;
  consumed_since_pong_ = 0;  // a new connection starts with an empty hub queue
  out.push_back(Connect{Subscribe{channel_, cursor_}});
}

void ResumeClient::on_frame(const HubFrame& frame, Instant now, ClientActions& out) {
  if (!connected_) {
    // A frame of a connection already closed (or given up): its session is over.
    out.push_back(ClientMark{"client.frame_while_closed"});
    return;
  }
  last_frame_ = now;
  if (const auto* ping = std::get_if<Ping>(&frame)) {
    out.push_back(SendPong{Pong{ping->id, consumed_since_pong_}});
    consumed_since_pong_ = 0;
    return;
  }
  if (const auto* reset = std::get_if<Reset>(&frame)) {
    out.push_back(ResetSeen{*reset});
    out.push_back(ClientMark{reset_mark(reset->kind)});
    // The gap is lost on purpose and never recorded: the next batch's
    // `previous` stays the real cursor. A resume position below what was
    // already handed (ahead_of_top) must not bring those numbers back, or the
    // sink would see them twice.
    handed_ = later_of(later_of(handed_, cursor_), reset->resume);
    if (config_.bug_cursor_on_receive) cursor_ = later_of(cursor_, reset->resume);
    return;
  }
  const Message& message = std::get<Data>(frame).message;
  // Every Data frame read leaves the hub's queue, duplicates included.
  consumed_since_pong_ += frame_bytes(frame);
  if (consumed_since_pong_ >= config_.window_update_bytes) {
    out.push_back(SendPong{Pong{0, consumed_since_pong_}});
    consumed_since_pong_ = 0;
  }
  const Position position = position_of(message);
  const Position floor = later_of(cursor_, handed_);
  if (!before(floor, position)) {
    out.push_back(ClientMark{"client.duplicate_dropped"});
    return;
  }
  if (!follows(floor, position)) out.push_back(ClientMark{"client.gap_without_reset"});
  buffer_.push_back(message);
  arrived_.push_back(now);
  handed_ = position;
  if (config_.bug_cursor_on_receive) cursor_ = position;
  maybe_record(now, out);
}

Instant ResumeClient::linger_due() const {
  if (in_flight_ || buffer_.empty()) return Instant::max();
  if (buffer_.size() >= config_.record_batch_max) return arrived_.front();
  return arrived_.front() + config_.record_linger;
}

void ResumeClient::maybe_record(Instant now, ClientActions& out) {
  if (linger_due() > now) return;  // nothing to send, one in flight, or a partial batch still lingering
  // With nothing in flight, the last batch formed was recorded: it is the cursor.
  if (!config_.bug_cursor_on_receive) LP_ASSERT(batched_ == cursor_);
  Record record;
  record.batch = next_batch_++;
  record.previous = batched_;
  const size_t count = std::min<size_t>(buffer_.size(), config_.record_batch_max);
  record.messages.assign(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(count));
  buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(count));
  arrived_.erase(arrived_.begin(), arrived_.begin() + static_cast<std::ptrdiff_t>(count));
  record.through = position_of(record.messages.back());
  LP_ASSERT(before(record.previous, position_of(record.messages.front())));
  batched_ = record.through;
  in_flight_ = record;
  retry_at_ = Instant::max();
  out.push_back(std::move(record));
}

void ResumeClient::on_recorded(uint64_t batch, Instant now, ClientActions& out) {
  if (!in_flight_ || in_flight_->batch != batch) {
    // A second answer for a batch already settled (the first try and a retry both applied).
    out.push_back(ClientMark{"client.stale_record_reply"});
    return;
  }
  // The broken variant's cursor already ran ahead on receive.
  cursor_ = config_.bug_cursor_on_receive ? later_of(cursor_, in_flight_->through) : in_flight_->through;
  in_flight_.reset();
  retry_at_ = Instant::max();
  record_failures_ = 0;
  attempt_ = 0;  // a session that made progress is healthy
  maybe_record(now, out);
}

void ResumeClient::on_record_failed(uint64_t batch, Instant now, ClientActions& out) {
  if (!in_flight_ || in_flight_->batch != batch) {
    out.push_back(ClientMark{"client.stale_record_reply"});
    return;
  }
  if (retry_at_ != Instant::max()) return;  // a retry is already scheduled
  out.push_back(ClientMark{"client.record_retry"});
  const Duration ceiling = record_retry_ceiling();
  if (record_failures_ < 64) ++record_failures_;  // past any cap: counting further changes nothing
  retry_at_ = now + (config_.jitter ? full_jitter(random_, ceiling) : ceiling);
}

Duration ResumeClient::record_retry_ceiling() const {
  return leaseproof::backoff_ceiling(config_.record_retry_base, record_failures_, config_.record_retry_cap);
}

Duration ResumeClient::backoff_ceiling(uint16_t code) const {
  const auto it = config_.reconnect_base_by_code.find(code);
  const Duration base = it != config_.reconnect_base_by_code.end() ? it->second : config_.reconnect_base;
  return leaseproof::backoff_ceiling(base, attempt_, config_.reconnect_cap);
}

void ResumeClient::on_closed(uint16_t code, Instant now, ClientActions& out) {
  if (!connected_) {
    // The client closed it itself (hub silence) or gave up: already handled.
    out.push_back(ClientMark{"client.close_while_closed"});
    return;
  }
  connected_ = false;
  if (!reconnect_allowed(code)) {
    out.push_back(ClientMark{"client.give_up"});
    out.push_back(GiveUp{code});
    given_up_ = true;
    return;
  }
  const Duration ceiling = backoff_ceiling(code);
  const Duration delay = config_.jitter ? full_jitter(random_, ceiling) : ceiling;
  LP_ASSERT_LE(delay, ceiling);
  if (attempt_ < 64) ++attempt_;  // 2^64 is past any cap: counting further changes nothing
  reconnect_at_ = now + delay;
}

void ResumeClient::on_timer(Instant now, ClientActions& out) {
  if (in_flight_ && retry_at_ <= now) {
    retry_at_ = Instant::max();
    out.push_back(*in_flight_);  // same batch id and contents: the sink write is idempotent
  }
  if (linger_due() <= now) {
    out.push_back(ClientMark{"client.linger_flush"});  // a partial batch waited its linger out
    maybe_record(now, out);
  }
  if (connected_ && last_frame_ + config_.hub_silence_timeout <= now) {
    out.push_back(ClientMark{"client.hub_silent"});
    out.push_back(CloseConnection{close_code::abnormal, "hub silent"});
    on_closed(close_code::abnormal, now, out);
  }
  if (!connected_ && !given_up_ && reconnect_at_ <= now) connect(now, out);
}

Instant ResumeClient::next_deadline() const {
  Instant deadline = in_flight_ ? retry_at_ : linger_due();
  if (connected_) deadline = std::min(deadline, last_frame_ + config_.hub_silence_timeout);
  if (!connected_ && !given_up_) deadline = std::min(deadline, reconnect_at_);
  return deadline;
}

}  // namespace leaseproof::resume
