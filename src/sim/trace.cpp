#include <leaseproof/sim/trace.hpp>

#include <ostream>

#include <fmt/format.h>

#include <leaseproof/base/assert.hpp>
#include <leaseproof/base/bytes.hpp>

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
