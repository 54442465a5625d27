// The worker's streams: one core StreamSession (core/resume/session.hpp) per
// open lease session, its WebSocket to the hub, and its sink writes to
// DynamoDB. The trace events written here are in docs/trace-format.md.
#include "models/worker.hpp"

#include <iterator>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "models/dynamo/node.hpp"

namespace leaseproof::models {
namespace {

constexpr uint32_t kControlBytes = 16;

sim::Message close_frame(ws::ConnectionId socket, uint16_t code) {
  return sim::Message{ws::kClose, kControlBytes, std::make_shared<ws::Close>(socket, code)};
}

}  // namespace

void WorkerProcess::open_stream(const lease::OpenSession& open) {
  const StreamEnvironment& environment = *environment_.stream;
  LP_ASSERT_MSG(!streams_.contains(open.connection), "stream {} opened twice", open.connection);
  const auto entry = streams_.try_emplace(open.connection).first;
  Stream& stream = entry->second;
  stream.connection = &entry->first;
  stream.id = stream_id(open.connection);
  stream_by_id_[stream.id] = &stream;
  const resume::Position recorded{static_cast<uint64_t>(std::max<int64_t>(0, open.stream_epoch)), open.last_seq};
  stream.session = std::make_unique<resume::StreamSession>(environment.session, environment_.config, open.connection,
                                                           worker_id_, open.epoch, recorded, *random_);
  stream.generation = ++stream_generation_;
  run_stream(open.connection, stream,
             [&](resume::SessionActions& out) { stream.session->start(context_->monotonic(), out); });
}

void WorkerProcess::close_stream(const std::string& connection) {
  const auto found = streams_.find(connection);
  if (found == streams_.end()) return;
  if (found->second.socket != 0) {
    context_->send(environment_.stream->via, close_frame(found->second.socket, resume::close_code::normal));
    stream_by_socket_.erase(found->second.socket);
  }
  stream_by_id_[found->second.id] = nullptr;
  streams_.erase(found);
  schedule_streams();
}

uint32_t WorkerProcess::stream_id(const std::string& connection) {
  if (const auto found = stream_ids_.find(connection); found != stream_ids_.end()) return found->second;
  const auto id = static_cast<uint32_t>(stream_names_.size());
  const std::string& name = stream_names_.emplace_back(connection);
  stream_ids_.emplace(name, id);
  stream_by_id_.push_back(nullptr);
  return id;
}

void WorkerProcess::on_stream_message(const sim::Envelope& envelope) {
  expire_leases();
  const bool is_close = envelope.message.type == ws::kClose;
  const ws::ConnectionId socket =
      is_close ? envelope.message.as<ws::Close>().connection : envelope.message.as<ws::Frame>().connection;
  const auto found = stream_by_socket_.find(socket);
  if (found == stream_by_socket_.end()) return;  // a socket this worker already left
  Stream& stream = *found->second;
  const std::string& connection = *stream.connection;
  const Instant now = context_->monotonic();
  if (is_close) {
    stream_by_socket_.erase(found);
    stream.socket = 0;
    const uint16_t code = envelope.message.as<ws::Close>().code;
    run_stream(connection, stream, [&](resume::SessionActions& out) { stream.session->on_closed(code, now, out); });
    return;
  }
  const auto& frame = envelope.message.as<ws::Frame>();
  if (frame.index != ++stream.received) {
    // The network lost a frame: a broken TCP stream, never a hole.
    context_->send(environment_.stream->via, close_frame(socket, resume::close_code::abnormal));
    stream_by_socket_.erase(found);
    stream.socket = 0;
    context_->note("mark", "stream.broken");
    run_stream(connection, stream, [&](resume::SessionActions& out) {
      stream.session->on_closed(resume::close_code::abnormal, now, out);
    });
    return;
  }
  run_stream(connection, stream,
             [&](resume::SessionActions& out) { stream.session->on_frame(frame.frame, now, out); });
}

// `stream` is streams_'s entry for `connection`: a step and its actions
// neither open nor close streams, so it stays valid throughout.
template <typename Step>
void WorkerProcess::run_stream(const std::string& connection, Stream& stream, Step step) {
  resume::SessionActions actions;
  step(actions);
  apply_stream(connection, stream, actions);
  queue_stream_wakeup(stream, stream.session->next_deadline());
  schedule_streams();
}

// Invariant: every stream with a deadline has a wakeup queued at or before it.
// An entry that surfaces before its stream's deadline is moved to it, so the
// streams run in (deadline, name) order, as if every change had re-queued.
void WorkerProcess::queue_stream_wakeup(Stream& stream, Instant at) {
  if (at >= stream.queued_at) return;  // also when `at` is Instant::max()
  const std::string& name = stream_names_[stream.id];
  stream_wakeups_.push(StreamWakeup{at, lex_prefix(name), &name, stream.id});
  stream.queued_at = at;
}

void WorkerProcess::apply_stream(const std::string& connection, Stream& stream, resume::SessionActions& actions) {
  sim::NodeContext& context = *context_;
  const NodeId via = environment_.stream->via;
  for (resume::SessionAction& action : actions) {
    if (auto* connect = std::get_if<resume::Connect>(&action)) {
      if (stream.socket != 0) stream_by_socket_.erase(stream.socket);
      stream.socket = ws::make_connection_id(context.id(), context.incarnation(), next_socket_++);
      stream.received = 0;
      stream.sent = 0;
      stream_by_socket_[stream.socket] = &stream;
      context.send(via, sim::Message{ws::kOpen, kControlBytes,
                                     std::make_shared<ws::Open>(stream.socket, connect->subscribe, process_id_)});
    } else if (auto* pong = std::get_if<resume::SendPong>(&action)) {
      if (stream.socket == 0) continue;
      context.send(via, sim::Message{ws::kPong, kControlBytes,
                                     std::make_shared<ws::PongFrame>(stream.socket, ++stream.sent, pong->pong)});
    } else if (auto* close = std::get_if<resume::CloseConnection>(&action)) {
      if (stream.socket == 0) continue;
      context.send(via, close_frame(stream.socket, close->code));
      stream_by_socket_.erase(stream.socket);
      stream.socket = 0;
    } else if (auto* call = std::get_if<resume::SinkCall>(&action)) {
      // Put and packed modes' record puts are not fenced (by design, docs/resume-core.md):
      // the stale-write rule judges the fenced writes only.
      const std::string_view kind{call->kind};
      const bool put = !resume::record_writes_fenced(environment_.stream->session.mode) && kind == "record";
      fmt::memory_buffer detail;  // on the stack: a note per call, no allocation
      fmt::format_to(std::back_inserter(detail), FMT_COMPILE("{} {} {}"), put ? "record_put" : kind == "probe" ? "read" : kind,
                     connection, stream.session->lease_epoch());
      // What a record or checkpoint writes: "<epoch>:<seq>..<epoch>:<seq>".
      if (call->last.seq != 0) {
        fmt::format_to(std::back_inserter(detail), FMT_COMPILE(" {}:{}..{}:{}"), call->first.epoch, call->first.seq,
                       call->last.epoch, call->last.seq);
      }
      const uint64_t token = call->token;
      const uint64_t generation = stream.generation;
      const uint64_t message = call_dynamo(
          context, environment_.dynamo, std::move(call->request), environment_.config.request_timeout,
          [this, connection, generation, token](const dynamo::Result<dynamo::Response>* result) {
            expire_leases();
            const auto found = streams_.find(connection);
            if (found == streams_.end() || found->second.generation != generation) return;
            run_stream(connection, found->second, [&](resume::SessionActions& out) {
              found->second.session->on_sink_reply(token, result, context_->monotonic(), out);
            });
          });
      context.note("lease.request", std::string_view{detail.data(), detail.size()}, static_cast<int64_t>(message));
    } else if (auto* recorded = std::get_if<resume::Recorded>(&action)) {
      fmt::memory_buffer detail;
      fmt::format_to(std::back_inserter(detail), FMT_COMPILE("{} {} {}"), connection, recorded->through.epoch,
                     recorded->through.seq);
      context.note("resume.recorded", std::string_view{detail.data(), detail.size()}, recorded->messages);
    } else if (auto* reset = std::get_if<resume::ResetSeen>(&action)) {
      const resume::Reset& r = reset->reset;
      context.note("resume.reset", fmt::format("{} {} {} {} {} {}", connection, resume::to_string(r.kind), r.after.epoch,
                                               r.after.seq, r.resume.epoch, r.resume.seq));
    } else if (auto* give_up = std::get_if<resume::GiveUp>(&action)) {
      context.note("resume.give_up", connection, give_up->code);
    } else if (auto* mark = std::get_if<resume::ClientMark>(&action)) {
      context.note("mark", mark->name);
    }
  }
}

void WorkerProcess::schedule_streams() {
  // Drop entries of streams that are gone, and move entries that surface
  // before their stream's deadline to it (wakeups are re-armed lazily).
  while (!stream_wakeups_.empty()) {
    Stream* stream = stream_by_id_[stream_wakeups_.top().id];
    if (stream == nullptr) {
      pop_stream_wakeup(nullptr);
      continue;
    }
    const Instant due = stream->session->next_deadline();
    if (due == stream_wakeups_.top().at) break;
    pop_stream_wakeup(stream);
    queue_stream_wakeup(*stream, due);  // later than the entry's time: the top is the earliest entry
  }
  const Instant next = stream_wakeups_.empty() ? Instant::max() : stream_wakeups_.top().at;
  if (next == stream_timer_at_) return;
  context_->cancel_timer(stream_timer_);
  stream_timer_at_ = next;
  if (next == Instant::max()) return;
  stream_timer_ = context_->set_timer(std::max(Duration::zero(), next - context_->monotonic()), "stream.timer", [this] {
    stream_timer_at_ = Instant::max();
    on_stream_timer();
  });
}

void WorkerProcess::on_stream_timer() {
  expire_leases();
  const Instant now = context_->monotonic();
  while (!stream_wakeups_.empty() && stream_wakeups_.top().at <= now) {
    const Instant at = stream_wakeups_.top().at;
    Stream* stream = stream_by_id_[stream_wakeups_.top().id];
    pop_stream_wakeup(stream);
    if (stream == nullptr) continue;
    const Instant due = stream->session->next_deadline();
    if (due != at) {
      queue_stream_wakeup(*stream, due);  // runs at its own time and place in the order
      continue;
    }
    run_stream(*stream->connection, *stream,
               [&](resume::SessionActions& out) { stream->session->on_timer(now, out); });
  }
  schedule_streams();
}

void WorkerProcess::pop_stream_wakeup(Stream* stream) {
  if (stream != nullptr && stream->queued_at == stream_wakeups_.top().at) stream->queued_at = Instant::max();
  stream_wakeups_.pop();
}

}  // namespace leaseproof::models
