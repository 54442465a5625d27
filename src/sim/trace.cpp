#include <leaseproof/sim/trace.hpp>

#include <bit>
#include <cstring>
#include <ostream>

#include <fmt/format.h>

#include <leaseproof/base/assert.hpp>

namespace leaseproof::sim {

namespace {

uint64_t load_le64(const unsigned char* bytes) {
  if constexpr (std::endian::native == std::endian::little) {
    uint64_t word;
    std::memcpy(&word, bytes, sizeof word);
    return word;
  } else {
    uint64_t word = 0;
    for (int i = 7; i >= 0; --i) word = (word << 8) | bytes[i];
    return word;
  }
}

// The last 1..7 bytes of a string as a zero-padded little-endian word: what
// load_le64 gives for them copied into eight zero bytes, without a call into
// memcpy for every label and detail of every event.
uint64_t load_le_tail(const unsigned char* bytes, size_t count) {
  if constexpr (std::endian::native == std::endian::little) {
    if (count >= 4) {  // two overlapping 4-byte loads; the overlap holds the same bytes
      uint32_t low;
      uint32_t high;
      std::memcpy(&low, bytes, 4);
      std::memcpy(&high, bytes + count - 4, 4);
      return uint64_t{low} | (uint64_t{high} << (8 * (count - 4)));
    }
    const size_t middle = count / 2;  // 1..3 bytes: first, middle and last
    return uint64_t{bytes[0]} | (uint64_t{bytes[middle]} << (8 * middle)) |
           (uint64_t{bytes[count - 1]} << (8 * (count - 1)));
  } else {
    unsigned char tail[8] = {};
    std::memcpy(tail, bytes, count);
    return load_le64(tail);
  }
}

}  // namespace

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
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t at = 0;
  for (; at + 8 <= size; at += 8) add_word(load_le64(bytes + at));
  if (at < size) add_word(load_le_tail(bytes + at, size - at));
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

void Trace::set_node_name(NodeId node, std::string name) {
  LP_ASSERT(node.valid());
  if (node_names_.size() <= node.value) node_names_.resize(node.value + 1);
  node_names_[node.value] = std::move(name);
}

std::string_view Trace::node_name(NodeId node) const {
  if (!node.valid() || node.value >= node_names_.size()) return {};
  return node_names_[node.value];
}

void Trace::record(const TraceEvent& event) {
  hash_.add_event(event);
  const uint64_t index = count_++;
  ++kind_counts_[static_cast<size_t>(event.kind)];
  if (keep_digests_) digests_.push_back(hash_.value());
  if (jsonl_ != nullptr || keep_lines_) {
    std::string line = to_json_line(index, event);
    if (jsonl_ != nullptr) *jsonl_ << line << '\n';
    if (keep_lines_) lines_.push_back(std::move(line));
  }
  for (const Observer& observer : observers_) observer(event);
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
