#pragma once
// Which Perfetto process and track each thing goes to, with the metadata that
// names them written on first use. Private to reports/.
//
//   pid 1        "network": drops, partitions and clogs per directed link,
//                message rates, and world events (autoscaler, deploy)
//   pid 21000    "checkers": the "violations" track, at the top
//   pid node+2   one process per node, named after it; its main track
//                ("events", tid = pid) holds instants, other tracks are
//                named ("state", "errors", "sessions") or one per connection
//
// tid = pid * 100000 + a local index: connections "c<N>" get 1000 + N, so
// they sort in numeric order; tids stay unique across processes and below
// 2^31 (Perfetto's importer mishandles larger ones).

#include <cstdint>
#include "base/ids.hpp"
#include "sim/trace.hpp"
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reports/trace_event_writer.hpp"

namespace leaseproof::report {

class Tracks {
 public:
  explicit Tracks(TraceEventWriter& writer) : writer_(&writer) {}
  void set_trace(const sim::Trace* trace) { trace_ = trace; }

  Track node_main(NodeId node);
  Track node_named(NodeId node, std::string_view name);
  Track node_connection(NodeId node, std::string_view connection);
  Track network_main();
  Track network_named(std::string_view name);
  Track checkers_named(std::string_view name);

  std::string node_name(NodeId node) const;
  uint64_t count() const { return count_; }

 private:
  struct Process {
    bool named = false;
    std::map<std::string, int64_t, std::less<>> tids;  // by track name
    int64_t next_named = 1;
    int64_t next_overflow = 0;
  };

  Process& process(int64_t pid, std::string_view name, int64_t sort_index);
  Track node_track(NodeId node, std::string_view name, bool is_connection);
  Track track(int64_t pid, Process& process, std::string_view name, bool is_connection);
  static int64_t new_local(Process& process, std::string_view name, bool is_connection);

  TraceEventWriter* writer_;
  const sim::Trace* trace_ = nullptr;
  std::map<int64_t, Process> processes_;
  // Main tracks by node index, and the network's: asked for at every event
  // that counts, so looked up once.
  std::vector<std::optional<Track>> main_by_node_;
  std::optional<Track> network_main_;
  uint64_t count_ = 0;
};

}  // namespace leaseproof::report
