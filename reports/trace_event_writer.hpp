#pragma once
// The Chrome / Perfetto Trace Event Format at its lowest level: one JSON
// object per line inside {"traceEvents":[...]}, written as they come (the
// format does not need events sorted). Private to reports/; the mapping
// from simulation events to tracks is in perfetto.cpp.

#include <cstdint>
#include <iosfwd>
#include "base/time.hpp"
#include <string>

#include "sim/trace.hpp"
#include <string_view>

namespace leaseproof::report {

// A track: Perfetto draws one row per (pid, tid). tids are unique across
// processes, because Perfetto's importer takes them as system-wide ids.
struct Track {
  int64_t pid = 0;
  int64_t tid = 0;
};

// The arguments of one event (shown in Perfetto's details panel), built as a
// JSON object in place.
class Args {
 public:
  Args& add(std::string_view key, std::string_view value);
  Args& add(std::string_view key, const char* value) { return add(key, std::string_view{value}); }
  Args& add(std::string_view key, int64_t value);
  Args& add(std::string_view key, uint64_t value);
  Args& add(std::string_view key, int value) { return add(key, static_cast<int64_t>(value)); }
  bool empty() const { return body_.empty(); }
  std::string json() const { return "{" + body_ + "}"; }

 private:
  void key(std::string_view name);
  std::string body_;
};

using sim::append_json_string;  // JSON string escaping, shared with the trace's JSON lines

// Microseconds with three decimals: exact for nanosecond instants.
std::string format_microseconds(int64_t ns);

class TraceEventWriter {
 public:
  explicit TraceEventWriter(std::ostream& out);

  void process_name(int64_t pid, std::string_view name, int64_t sort_index);
  void thread_name(Track track, std::string_view name, int64_t sort_index);
  // A complete slice ("X") from `start` to `end`.
  void complete(Track track, std::string_view category, std::string_view name, Instant start, Instant end,
                const Args& args);
  // A slice of no duration that starts (`flow_out`) or ends a flow: the
  // flow v2 form ("bind_id" with "flow_out" or "flow_in"), which Perfetto
  // binds to this slice itself.
  void flow_point(Track track, std::string_view category, std::string_view name, Instant at, const Args& args,
                  uint64_t flow_id, bool flow_out);
  // A thread-scoped instant event ("i", "s":"t").
  void instant(Track track, std::string_view category, std::string_view name, Instant at, const Args& args);
  // A counter sample ("C"): every argument is one series of the counter.
  void counter(Track track, std::string_view name, Instant at, const Args& series);
  // Ends the document; `other_data` becomes its "otherData" object.
  void close(const Args& other_data);

  uint64_t events() const { return events_; }
  bool closed() const { return closed_; }

 private:
  void metadata(Track track, std::string_view name, const Args& args);
  void write(std::string_view head, Track track, Instant at, std::string_view tail);

  std::ostream* out_;
  uint64_t events_ = 0;
  bool closed_ = false;
};

}  // namespace leaseproof::report
