#include "reports/trace_event_writer.hpp"

#include <fmt/format.h>

#include "base/assert.hpp"
#include "sim/trace.hpp"
#include <ostream>

namespace leaseproof::report {


void Args::key(std::string_view name) {
  if (!body_.empty()) body_.push_back(',');
  append_json_string(body_, name);
  body_.push_back(':');
}

Args& Args::add(std::string_view name, std::string_view value) {
  key(name);
  append_json_string(body_, value);
  return *this;
}

Args& Args::add(std::string_view name, int64_t value) {
  key(name);
  body_ += fmt::format("{}", value);
  return *this;
}

Args& Args::add(std::string_view name, uint64_t value) {
  key(name);
  body_ += fmt::format("{}", value);
  return *this;
}

std::string format_microseconds(int64_t ns) {
  LP_ASSERT_GE(ns, int64_t{0});
  return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
}

TraceEventWriter::TraceEventWriter(std::ostream& out) : out_(&out) { *out_ << R"({"traceEvents":[)"; }

void TraceEventWriter::write(std::string_view head, Track track, Instant at, std::string_view tail) {
  LP_ASSERT(!closed_);
  // One event a line: the file stays greppable and diffable.
  *out_ << (events_ == 0 ? "\n" : ",\n") << '{' << head << R"(,"ts":)" << format_microseconds(at.ns()) << R"(,"pid":)"
        << track.pid << R"(,"tid":)" << track.tid << tail << '}';
  ++events_;
}

void TraceEventWriter::metadata(Track track, std::string_view name, const Args& args) {
  std::string head = R"("name":)";
  append_json_string(head, name);
  head += R"(,"ph":"M")";
  write(head, track, Instant::zero(), R"(,"args":)" + args.json());
}

void TraceEventWriter::process_name(int64_t pid, std::string_view name, int64_t sort_index) {
  metadata({pid, pid}, "process_name", Args{}.add("name", name));
  metadata({pid, pid}, "process_sort_index", Args{}.add("sort_index", sort_index));
}

void TraceEventWriter::thread_name(Track track, std::string_view name, int64_t sort_index) {
  metadata(track, "thread_name", Args{}.add("name", name));
  metadata(track, "thread_sort_index", Args{}.add("sort_index", sort_index));
}

void TraceEventWriter::complete(Track track, std::string_view category, std::string_view name, Instant start,
                                Instant end, const Args& args) {
  LP_ASSERT_GE(end, start);
  std::string head = R"("name":)";
  append_json_string(head, name);
  head += R"(,"cat":)";
  append_json_string(head, category);
  head += R"(,"ph":"X")";
  std::string tail = R"(,"dur":)" + format_microseconds((end - start).ns());
  if (!args.empty()) tail += R"(,"args":)" + args.json();
  write(head, track, start, tail);
}

void TraceEventWriter::flow_point(Track track, std::string_view category, std::string_view name, Instant at,
                                  const Args& args, uint64_t flow_id, bool flow_out) {
  std::string head = R"("name":)";
  append_json_string(head, name);
  head += R"(,"cat":)";
  append_json_string(head, category);
  head += R"(,"ph":"X")";
  std::string tail = fmt::format(R"(,"dur":0,"bind_id":{},"{}":true)", flow_id, flow_out ? "flow_out" : "flow_in");
  if (!args.empty()) tail += R"(,"args":)" + args.json();
  write(head, track, at, tail);
}

void TraceEventWriter::instant(Track track, std::string_view category, std::string_view name, Instant at,
                               const Args& args) {
  std::string head = R"("name":)";
  append_json_string(head, name);
  head += R"(,"cat":)";
  append_json_string(head, category);
  head += R"(,"ph":"i","s":"t")";
  write(head, track, at, args.empty() ? std::string{} : R"(,"args":)" + args.json());
}

void TraceEventWriter::counter(Track track, std::string_view name, Instant at, const Args& series) {
  std::string head = R"("name":)";
  append_json_string(head, name);
  head += R"(,"ph":"C")";
  write(head, track, at, R"(,"args":)" + series.json());
}

void TraceEventWriter::close(const Args& other_data) {
  LP_ASSERT(!closed_);
  *out_ << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" << other_data.json() << "}\n";
  closed_ = true;
}

}  // namespace leaseproof::report
