#pragma once
// One subscriber's WebSocket in the hub process (hub_shard.hpp says what the
// hub's files share).
#include <boost/url/parse.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/hub/hub_shard.hpp"

namespace leaseproof::runtime {

// One subscriber's WebSocket: a read loop, and a writer draining its outbox
// one frame at a time.
//
// Why the outbox stays bounded: the core counts a Data frame as queued from
// the moment it hands it here, and frees it when a pong reports it consumed.
// A pong is credited at most the Data bytes this session has written to the
// socket and not yet credited (take_credit), so what waits in the outbox is
// never more than the core's queue, which is bounded (1013 past it). A peer
// that stops reading and claims it consumed everything still fills the
// core's queue. The hard bound is checked anyway: Data in the outbox above
// the core's bound, or more control frames than a live peer could leave
// unread, closes with 1013 ("outbox full").
class HubServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  // Pings go out every ping interval until the pong timeout; a Reset once.
  static constexpr std::size_t kControlFramesMax = 64;

  // Stream: TcpStream, or TlsStream with its handshake done.
  template <typename Stream>
  Session(std::weak_ptr<Impl> server, asio::io_context& io, resume::SubscriberId id, Stream stream, Slot* slot,
          uint64_t data_bytes_max)
      : server_(std::move(server)),
        id_(id),
        ws_(io, std::move(stream)),
        close_timer_(io),
        subscribe_timer_(io),
        slot_(slot),
        data_bytes_max_(data_bytes_max) {}

  resume::SubscriberId id() const { return id_; }
  const std::string& channel() const { return channel_; }
  bool subscribed() const { return subscribed_; }
  void set_subscribed(std::string channel) {
    subscribed_ = true;
    channel_ = std::move(channel);
    subscribe_timer_.cancel();
  }
  bool closing() const { return closing_; }
  bool in_core() const { return subscribed_ && !core_closed_; }
  void mark_core_closed() { core_closed_ = true; }
  std::size_t outbox_bytes() const { return outbox_bytes_; }
  // Of `claimed` consumed bytes, what the peer can have read: at most the
  // Data written to the socket and not yet credited.
  uint64_t take_credit(uint64_t claimed) {
    const uint64_t granted = std::min(claimed, data_written_ - data_credited_);
    data_credited_ += granted;
    return granted;
  }
  // A frame from the subscriber reached the core (subscribe or pong).
  void note_frame_in(Instant at) {
    if (frames_in_ == 0) first_in_ = at;
    last_in_ = at;
    ++frames_in_;
  }
  // One JSON line for the hub's session records.
  std::string record(Instant ended) const {
    auto ms = [](Instant at) { return static_cast<double>(at.ns()) / 1e6; };
    nlohmann::json line{{"session", id_},       {"channel", channel_},   {"worker", worker_},
                        {"lease_epoch", lease_epoch_}, {"opened_ms", ms(opened_)}, {"frames_in", frames_in_},
                        {"data_out", data_out_}, {"ended_ms", ms(ended)}};
    if (frames_in_ > 0) {
      line["first_in_ms"] = ms(first_in_);
      line["last_in_ms"] = ms(last_in_);
    }
    if (data_out_ > 0) {
      line["first_data_ms"] = ms(first_data_);
      line["last_data_ms"] = ms(last_data_);
    }
    line["closed_by"] = closing_ ? "hub" : "peer";
    if (closing_) line["close_code"] = close_code_;
    if (!process_.empty()) line["process"] = process_;
    return line.dump();
  }

  void accept(http::request<http::string_body> request, std::size_t frame_max, Duration close_timeout,
              Duration subscribe_timeout) {
    opened_ = monotonic_now();
    const std::string_view target{request.target().data(), request.target().size()};
    if (const auto url = boost::urls::parse_origin_form(target)) {
      for (const auto& param : url->params()) {
        if (param.key == "worker") worker_ = param.value.substr(0, 128);
        if (param.key == "process") process_ = param.value.substr(0, 32);
        if (param.key == "lease_epoch") {
          int64_t epoch = 0;
          const auto [end, ec] = std::from_chars(param.value.data(), param.value.data() + param.value.size(), epoch);
          if (ec == std::errc{} && end == param.value.data() + param.value.size()) lease_epoch_ = epoch;
        }
      }
    }
    websocket::stream_base::timeout timeout{};
    timeout.handshake_timeout = to_chrono(close_timeout);  // also bounds the close handshake
    timeout.idle_timeout = websocket::stream_base::none();  // the core's pings decide liveness
    timeout.keep_alive_pings = false;
    close_timeout_ = close_timeout;
    ws_.visit([&](auto& ws) {
      ws.set_option(timeout);
      ws.read_message_max(frame_max);
      ws.text(true);
      ws.async_accept(request, [self = shared_from_this(), subscribe_timeout](beast::error_code ec) {
        self->accepted(ec, subscribe_timeout);
      });
    });
  }

  // The upgrade's answer went out (or failed): read, and wait for the subscribe.
  void accepted(beast::error_code ec, Duration subscribe_timeout) {
    handshake_done_ = true;
    if (ec) return gone(true);
    // Closed while the handshake was finishing (a shutdown posted from
    // another thread can run before the accept's completion): the close
    // frame goes out now that the stream is a server's (before, Beast would
    // frame it as a client's, masked).
    if (closing_) return send_close();
    read();
    if (subscribed_) return;
    subscribe_timer_.expires_after(to_chrono(subscribe_timeout));
    subscribe_timer_.async_wait([self = shared_from_this(), subscribe_timeout](beast::error_code waited) {
      if (waited || self->subscribed_ || self->closing_) return;
      if (auto server = self->server_.lock()) {
        ++server->counters_.subscribe_timeouts;
        ++server->counters_.closes_by_code[resume::close_code::policy_violation];
        server->log_(fmt::format("hub: closing connection {} with 1008: no subscribe within {}", self->id_,
                                 subscribe_timeout));
      }
      self->close(resume::close_code::policy_violation, fmt::format("no subscribe within {}", subscribe_timeout));
    });
  }

  // Queues a frame for the socket. `credit` is a Data frame's share of the
  // core's queue (resume::frame_bytes), 0 for control frames. False when the
  // outbox is past its hard bound: nothing was queued and the caller closes.
  // `fanout`: this Data frame goes out as part of its message's publish (the
  // fan-out histogram times its write), not a replay.
  [[nodiscard]] bool send(Frame frame, uint32_t credit, bool is_data, bool fanout = false) {
    if (closing_) return true;
    if (is_data ? outbox_data_ + credit > data_bytes_max_ : outbox_control_ + 1 > kControlFramesMax) return false;
    if (is_data) {
      outbox_data_ += credit;
    } else {
      ++outbox_control_;
    }
    outbox_bytes_ += frame->size();
    outbox_.push_back({std::move(frame), credit, is_data, fanout});
    write();
    return true;
  }

  // Closes with `code`: what is not yet written is dropped (the core has
  // forgotten this subscriber already). A write in flight finishes first, or
  // the socket is closed without a close frame after close_timeout.
  void close(uint16_t code, std::string reason) {
    if (closing_) return;
    closing_ = true;
    close_code_ = code;
    close_reason_ = std::move(reason);
    abandon_fanouts();
    outbox_.clear();
    outbox_bytes_ = outbox_data_ = outbox_control_ = 0;
    subscribe_timer_.cancel();
    if (code == resume::close_code::abnormal) {
      // 1006 is what a peer sees when no close frame comes (RFC 6455 7.4.1
      // forbids sending it): a dead peer's connection is dropped. The read in
      // flight fails and ends the session.
      ws_.close_socket();
      return;
    }
    close_timer_.expires_after(to_chrono(close_timeout_));
    close_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->ws_.close_socket();  // the handlers in flight fail and end the session
    });
    if (!writing_ && handshake_done_) send_close();  // else accepted() sends it
  }

 private:
  void read() {
    ws_.visit([this](auto& ws) {
      ws.async_read(in_, [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
    });
  }

  // Called from the read's handler, which holds this session alive.
  void on_read(beast::error_code ec) {
    if (ec) {
      // Beast has failed the connection itself with a close frame: 1009
      // for a message over read_message_max, 1007 for a text message that
      // is not UTF-8. Both are the peer's protocol errors.
      const uint16_t code = ec == websocket::error::message_too_big     ? resume::close_code::message_too_big
                            : ec == websocket::error::bad_frame_payload ? resume::close_code::invalid_payload
                                                                        : 0;
      if (code != 0 && !closing_) {
        if (auto server = server_.lock()) server->on_failed_by_beast(*this, code, ec.message());
        return gone(false);
      }
      return gone(!closing_);
    }
    if (!closing_) {
      auto server = server_.lock();
      if (!server) return;
      const auto data = in_.cdata();
      const bool is_text = ws_.visit([](auto& ws) { return ws.got_text(); });
      server->on_client_text(*this, std::string_view{static_cast<const char*>(data.data()), data.size()}, is_text);
    }
    in_.consume(in_.size());
    read();
  }

  void write() {
    if (writing_ || outbox_.empty() || closing_) return;
    writing_ = true;
    ws_.visit([this](auto& ws) {
      ws.async_write(asio::buffer(*outbox_.front().frame),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_written(ec); });
    });
  }

  // Called from the write's handler, which holds this session alive.
  void on_written(beast::error_code ec) {
    writing_ = false;
    if (ec) return gone(!closing_);
    if (closing_) return send_close();
    const Outgoing& written = outbox_.front();
    if (written.is_data) {
      const Instant now = monotonic_now();
      if (auto server = server_.lock()) {
        ++server->counters_.data_frames_written;
        if (written.fanout) server->fanout_done(written.frame.get(), now, true);
      }
      if (data_out_++ == 0) first_data_ = now;
      last_data_ = now;
      data_written_ += written.credit;
      outbox_data_ -= written.credit;
    } else {
      --outbox_control_;
    }
    outbox_bytes_ -= written.frame->size();
    outbox_.pop_front();
    write();
  }

  void send_close() {
    if (close_sent_) return;
    close_sent_ = true;
    websocket::close_reason reason{close_code_};
    reason.reason = close_reason_.substr(0, 120);
    ws_.visit([&](auto& ws) {
      ws.async_close(reason, [self = shared_from_this()](beast::error_code) { self->gone(false); });
    });
  }

  // The connection is over (an error, the peer's close, or ours finished).
  void gone(bool by_peer) {
    if (gone_) return;
    gone_ = true;
    close_timer_.cancel();
    subscribe_timer_.cancel();
    ws_.close_socket();
    abandon_fanouts();
    if (auto server = server_.lock()) server->on_session_gone(*this, by_peer);
  }

  // Frames of publishes still being fanned out that this subscriber will
  // never write: its fan-out ends without it.
  void abandon_fanouts() {
    auto server = server_.lock();
    if (!server) return;
    for (Outgoing& outgoing : outbox_) {
      if (outgoing.fanout) server->fanout_done(outgoing.frame.get(), Instant{}, false);
      outgoing.fanout = false;
    }
  }

  struct Outgoing {
    Frame frame;
    uint32_t credit = 0;  // a Data frame's share of the core's queue
    bool is_data = false;
    bool fanout = false;  // timed by the fan-out histogram (see send)
  };
  std::weak_ptr<Impl> server_;
  resume::SubscriberId id_;
  HubWebSocket ws_;
  beast::flat_buffer in_;
  asio::steady_timer close_timer_;
  asio::steady_timer subscribe_timer_;
  std::unique_ptr<Slot> slot_;
  uint64_t data_bytes_max_;  // the core's queue bound
  Duration close_timeout_ = Duration::from_s(2);
  std::string channel_;
  std::deque<Outgoing> outbox_;
  std::size_t outbox_bytes_ = 0;  // encoded, for /metrics
  uint64_t outbox_data_ = 0;      // credit of the Data frames in the outbox
  std::size_t outbox_control_ = 0;
  uint64_t data_written_ = 0;     // credit of the Data frames written to the socket
  uint64_t data_credited_ = 0;    // of that, what pongs have credited to the core
  bool subscribed_ = false;
  bool core_closed_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool close_sent_ = false;
  bool handshake_done_ = false;  // the upgrade's answer is out (accepted() ran)
  bool gone_ = false;
  uint16_t close_code_ = resume::close_code::normal;
  std::string close_reason_;
  // For the session record.
  std::string worker_;       // ?worker= of the upgrade request
  std::string process_;      // ?process=: which process of that worker id (its leases' owner_incarnation)
  int64_t lease_epoch_ = 0;  // ?lease_epoch=
  Instant opened_, first_in_, last_in_, first_data_, last_data_;
  uint64_t frames_in_ = 0;
  uint64_t data_out_ = 0;
};

}  // namespace leaseproof::runtime
