#include "sim/trace.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <ostream>
#include <thread>

#include <fmt/format.h>

#include "base/assert.hpp"
#include "base/bytes.hpp"

namespace leaseproof::sim {

std::string_view to_string(EventKind kind) {
  switch (kind) {
    case EventKind::send: return "send";
    case EventKind::deliver: return "deliver";
    case EventKind::drop: return "drop";
    case EventKind::timer: return "timer";
    case EventKind::crash: return "crash";
    case EventKind::restart: return "restart";
    case EventKind::pause: return "pause";
    case EventKind::resume: return "resume";
    case EventKind::sigterm: return "sigterm";
    case EventKind::exit: return "exit";
    case EventKind::clock_step: return "clock_step";
    case EventKind::fault: return "fault";
    case EventKind::timeout: return "timeout";
    case EventKind::partition_start: return "partition_start";
    case EventKind::partition_end: return "partition_end";
    case EventKind::clog_start: return "clog_start";
    case EventKind::clog_end: return "clog_end";
    case EventKind::note: return "note";
    case EventKind::start: return "start";
    case EventKind::queued: return "queued";
  }
  LP_UNREACHABLE("event kind {}", static_cast<int>(kind));
}

void TraceHash::add_string(std::string_view text) {
  add_word(text.size());
  // Little-endian packing of 8 bytes a word, the last word zero-padded,
  // independent of the host.
  for_each_le_word(text, [this](uint64_t word) { add_word(word); });
}

void TraceHash::add_event(const TraceEvent& event) {
  add_word(static_cast<uint64_t>(event.kind));
  add_word(static_cast<uint64_t>(event.true_time.ns()));
  add_word(event.node.value);
  add_word(static_cast<uint64_t>(event.wall.ns()));
  add_word(static_cast<uint64_t>(event.monotonic.ns()));
  add_word(event.peer.value);
  add_word(event.id);
  add_word(static_cast<uint64_t>(event.value));
  add_string(event.label);
  add_string(event.detail);
}

// ---- checkers in the background ------------------------------------------

namespace {

// The events' encoding between the two threads: the bytes the simulation's
// core writes are bytes the checkers' core must fetch (and later give back),
// so each event travels as about 25 bytes instead of its 100-byte struct.
// Times are deltas: true time from the last event, each node's wall and
// monotonic readings as their offset from true time, from that node's last
// offset. Labels, a few dozen distinct texts, travel once and then by
// number. Both ends keep the same state, so a chunk is read in order.
struct CodecState {
  Instant last_true;
  std::vector<int64_t> wall_offset;  // by NodeId.value + 1 (0: no node)
  std::vector<int64_t> monotonic_offset;
  std::vector<std::string> labels;

  void ensure_node(size_t slot) {
    if (slot >= wall_offset.size()) {
      wall_offset.resize(slot + 1, 0);
      monotonic_offset.resize(slot + 1, 0);
    }
  }
};

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

uint8_t* put_varint(uint8_t* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<uint8_t>(v);
  return out;
}

uint64_t get_varint(const uint8_t*& in) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const uint8_t byte = *in++;
    v |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return v;
  }
}

constexpr uint8_t kTask = 0;            // a header's kind bits: a posted task, not an event
constexpr uint8_t kKindBits = 0x1F;
constexpr uint8_t kHasLabel = 0x20;
constexpr uint8_t kLabelByNumber = 0x40;
constexpr uint8_t kHasDetail = 0x80;
constexpr size_t kFixedMax = 1 + 8 * 10;  // a header and eight varints at most
constexpr size_t kLabelsMax = 256;       // labels beyond travel as text every time

}  // namespace

// The events, encoded, in chunks: the simulation's thread fills one while
// the checkers' thread works through the ones before it. At most kChunksMax
// chunks exist: a simulation that runs ahead of its checkers waits for one.
class CheckerThread {
 public:
  static constexpr size_t kChunkBytes = 96 * 1024;  // handed over once this full
  static constexpr size_t kChunksMax = 8;

  explicit CheckerThread(Trace& trace) : trace_(trace), filling_(take_free()), thread_([this] { work(); }) {}
  ~CheckerThread() { finish(); }

  void push(const TraceEvent& event) {
    Chunk& chunk = *filling_;
    uint8_t* out = room(chunk, kFixedMax + 2 * 10 + event.label.size() + event.detail.size());
    uint8_t* header = out++;
    uint8_t flags = static_cast<uint8_t>(event.kind);
    out = put_varint(out, zigzag(event.true_time.ns() - encoder_.last_true.ns()));
    encoder_.last_true = event.true_time;
    const uint32_t node_slot = event.node.value + 1;  // kNoNode wraps to 0
    encoder_.ensure_node(node_slot);
    out = put_varint(out, node_slot);
    const int64_t wall_offset = event.wall.ns() - event.true_time.ns();
    const int64_t monotonic_offset = event.monotonic.ns() - event.true_time.ns();
    out = put_varint(out, zigzag(wall_offset - encoder_.wall_offset[node_slot]));
    out = put_varint(out, zigzag(monotonic_offset - encoder_.monotonic_offset[node_slot]));
    encoder_.wall_offset[node_slot] = wall_offset;
    encoder_.monotonic_offset[node_slot] = monotonic_offset;
    out = put_varint(out, event.peer.value + 1);
    out = put_varint(out, event.id);
    out = put_varint(out, zigzag(event.value));
    if (!event.label.empty()) {
      flags |= kHasLabel;
      const uint32_t number = label_number(event.label);
      if (number != kNewLabel) {
        flags |= kLabelByNumber;
        out = put_varint(out, number);
      } else {
        if (encoder_.labels.size() < kLabelsMax) encoder_.labels.emplace_back(event.label);
        out = put_varint(out, event.label.size());
        std::memcpy(out, event.label.data(), event.label.size());
        out += event.label.size();
      }
    }
    if (!event.detail.empty()) {
      flags |= kHasDetail;
      out = put_varint(out, event.detail.size());
      std::memcpy(out, event.detail.data(), event.detail.size());
      out += event.detail.size();
    }
    *header = flags;
    filled(chunk, out);
  }

  void post(Trace::Task task) {
    Chunk& chunk = *filling_;
    uint8_t* out = room(chunk, 1);
    *out++ = kTask;
    chunk.tasks.push_back(std::move(task));
    filled(chunk, out);
  }

  // Waits for the checkers to have seen everything pushed.
  void finish() {
    if (!thread_.joinable()) return;
    hand_over();
    {
      const std::lock_guard lock{mutex_};
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

 private:
  static constexpr uint32_t kNewLabel = UINT32_MAX;
  struct Chunk {
    std::vector<uint8_t> bytes;  // sized to its capacity; `used` of them written
    size_t used = 0;
    std::vector<Trace::Task> tasks;
  };

  uint8_t* room(Chunk& chunk, size_t bytes) {
    if (chunk.used + bytes > chunk.bytes.size()) chunk.bytes.resize(std::max(chunk.bytes.size() * 2, chunk.used + bytes));
    return chunk.bytes.data() + chunk.used;
  }

  void filled(Chunk& chunk, const uint8_t* end) {
    chunk.used = static_cast<size_t>(end - chunk.bytes.data());
    if (chunk.used >= kChunkBytes) hand_over();
  }

  // The label's number if it travelled before. A small cache by address
  // finds the usual (literal) labels without comparing more than once.
  uint32_t label_number(std::string_view label) {
    const size_t slot = (reinterpret_cast<uintptr_t>(label.data()) >> 3) % kLabelCache;
    LabelCacheEntry& cached = label_cache_[slot];
    if (cached.data == label.data() && cached.size == label.size() &&
        std::string_view{encoder_.labels[cached.number]} == label) {
      return cached.number;
    }
    for (uint32_t number = 0; number < encoder_.labels.size(); ++number) {
      if (encoder_.labels[number] == label) {
        cached = {label.data(), label.size(), number};
        return number;
      }
    }
    if (encoder_.labels.size() < kLabelsMax) {
      cached = {label.data(), label.size(), static_cast<uint32_t>(encoder_.labels.size())};
    }
    return kNewLabel;
  }

  std::unique_ptr<Chunk> take_free() {
    std::unique_lock lock{mutex_};
    if (free_.empty() && chunks_ < kChunksMax) {
      ++chunks_;
      auto chunk = std::make_unique<Chunk>();
      chunk->bytes.resize(kChunkBytes + 4096);
      return chunk;
    }
    changed_.wait(lock, [this] { return !free_.empty(); });
    std::unique_ptr<Chunk> chunk = std::move(free_.back());
    free_.pop_back();
    return chunk;
  }

  void hand_over() {
    if (filling_->used == 0) return;
    {
      const std::lock_guard lock{mutex_};
      full_.push_back(std::move(filling_));
    }
    changed_.notify_all();
    filling_ = take_free();
  }

  void work() {
    for (;;) {
      std::unique_ptr<Chunk> chunk;
      {
        std::unique_lock lock{mutex_};
        changed_.wait(lock, [this] { return !full_.empty() || stopping_; });
        if (full_.empty()) return;  // stopping, and everything seen
        chunk = std::move(full_.front());
        full_.pop_front();
      }
      check(*chunk);
      {
        const std::lock_guard lock{mutex_};
        free_.push_back(std::move(chunk));
      }
      changed_.notify_all();
    }
  }

  // Decodes the chunk (reading it only: a line written here would have to
  // travel back when the simulation fills the chunk again).
  void check(Chunk& chunk) {
    const uint8_t* in = chunk.bytes.data();
    const uint8_t* const end = in + chunk.used;
    size_t task = 0;
    while (in < end) {
      const uint8_t flags = *in++;
      if ((flags & kKindBits) == kTask) {
        chunk.tasks[task++]();
        continue;
      }
      TraceEvent event;
      event.kind = static_cast<EventKind>(flags & kKindBits);
      event.true_time = Instant::from_ns(decoder_.last_true.ns() + unzigzag(get_varint(in)));
      decoder_.last_true = event.true_time;
      const auto node_slot = static_cast<uint32_t>(get_varint(in));
      decoder_.ensure_node(node_slot);
      event.node = NodeId{node_slot - 1};
      decoder_.wall_offset[node_slot] += unzigzag(get_varint(in));
      decoder_.monotonic_offset[node_slot] += unzigzag(get_varint(in));
      event.wall = Instant::from_ns(event.true_time.ns() + decoder_.wall_offset[node_slot]);
      event.monotonic = Instant::from_ns(event.true_time.ns() + decoder_.monotonic_offset[node_slot]);
      event.peer = NodeId{static_cast<uint32_t>(get_varint(in)) - 1};
      event.id = get_varint(in);
      event.value = unzigzag(get_varint(in));
      if ((flags & kHasLabel) != 0) {
        if ((flags & kLabelByNumber) != 0) {
          event.label = decoder_.labels[get_varint(in)];
        } else {
          const size_t size = get_varint(in);
          event.label = std::string_view{reinterpret_cast<const char*>(in), size};
          if (decoder_.labels.size() < kLabelsMax) decoder_.labels.emplace_back(event.label);
          in += size;
        }
      }
      if ((flags & kHasDetail) != 0) {
        const size_t size = get_varint(in);
        event.detail = std::string_view{reinterpret_cast<const char*>(in), size};
        in += size;
      }
      trace_.check(event);
    }
    LP_ASSERT_MSG(task == chunk.tasks.size(), "{} tasks posted, {} run", chunk.tasks.size(), task);
    chunk.used = 0;
    chunk.tasks.clear();
  }

  static constexpr size_t kLabelCache = 256;
  struct LabelCacheEntry {
    const char* data = nullptr;
    size_t size = 0;
    uint32_t number = 0;
  };

  // Each thread's own state on cache lines of its own: a line both write
  // would travel between the cores at every event.
  Trace& trace_;
  alignas(64) CodecState encoder_;  // the simulation's thread's
  LabelCacheEntry label_cache_[kLabelCache];
  alignas(64) CodecState decoder_;  // the checkers' thread's
  alignas(64) std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Chunk>> full_;   // oldest first
  std::vector<std::unique_ptr<Chunk>> free_;
  size_t chunks_ = 0;
  bool stopping_ = false;
  alignas(64) std::unique_ptr<Chunk> filling_;  // the simulation's thread's only
  std::thread thread_;              // last: starts once the rest is built
};

Trace::Trace() = default;
Trace::~Trace() = default;  // a running checkers' thread finishes first

void Trace::start_background() {
  LP_ASSERT_MSG(thread_ == nullptr, "the checkers already run in the background");
  LP_ASSERT_MSG(jsonl_ == nullptr && !keep_digests_ && !keep_lines_,
                "JSON lines, digests and kept lines are written at the event");
  thread_ = std::make_unique<CheckerThread>(*this);
}

void Trace::finish_background() {
  if (thread_ == nullptr) return;
  thread_->finish();
  thread_.reset();
}

uint64_t Trace::hash() const {
  LP_ASSERT_MSG(thread_ == nullptr, "the trace hash is read while the checkers run in the background");
  return hash_.value();
}

void Trace::post(Task task) {
  if (thread_ != nullptr) {
    thread_->post(std::move(task));
  } else {
    task();
  }
}

void Trace::set_node_name(NodeId node, std::string name) {
  LP_ASSERT(node.valid());
  if (node_names_.size() <= node.value) node_names_.resize(node.value + 1);
  node_names_[node.value] = name;
  post([this, node, name = std::move(name)]() mutable {
    if (checker_names_.size() <= node.value) checker_names_.resize(node.value + 1);
    checker_names_[node.value] = std::move(name);
  });
}

std::string_view Trace::node_name(NodeId node) const {
  if (!node.valid() || node.value >= node_names_.size()) return {};
  return node_names_[node.value];
}

std::string_view Trace::checker_node_name(NodeId node) const {
  if (!node.valid() || node.value >= checker_names_.size()) return {};
  return checker_names_[node.value];
}

void Trace::record(const TraceEvent& event) {
  const uint64_t index = count_++;
  ++kind_counts_[static_cast<size_t>(event.kind)];
  if (thread_ != nullptr) {
    thread_->push(event);
  } else {
    check(event);
    if (keep_digests_) digests_.push_back(hash_.value());
    if (jsonl_ != nullptr || keep_lines_) {
      std::string line = to_json_line(index, event);
      if (jsonl_ != nullptr) *jsonl_ << line << '\n';
      if (keep_lines_) lines_.push_back(std::move(line));
    }
  }
  for (const Observer& observer : observers_) observer(event);
}

void Trace::check(const TraceEvent& event) {
  hash_.add_event(event);
  for (const Observer& checker : checkers_) checker(event);
}

void append_json_string(std::string& out, std::string_view text) {
  out.push_back('"');
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<uint8_t>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

std::string Trace::to_json_line(uint64_t index, const TraceEvent& event) const {
  std::string out = fmt::format(R"({{"i":{},"t_ns":{},"ev":"{}","node":)", index, event.true_time.ns(),
                                to_string(event.kind));
  if (event.node.valid()) {
    append_json_string(out, node_name(event.node));
    out += fmt::format(R"(,"wall_ns":{},"mono_ns":{})", event.wall.ns(), event.monotonic.ns());
  } else {
    out += "null";
  }
  if (event.peer.valid()) {
    out += R"(,"peer":)";
    append_json_string(out, node_name(event.peer));
  }
  if (event.id != 0) out += fmt::format(R"(,"id":{})", event.id);
  if (event.value != 0) out += fmt::format(R"(,"value":{})", event.value);
  if (!event.label.empty()) {
    out += R"(,"label":)";
    append_json_string(out, event.label);
  }
  if (!event.detail.empty()) {
    out += R"(,"detail":)";
    append_json_string(out, event.detail);
  }
  out.push_back('}');
  return out;
}

std::string format_hash(uint64_t hash) { return fmt::format("0x{:016x}", hash); }

}  // namespace leaseproof::sim
