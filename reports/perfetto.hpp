#pragma once
// A run as a Chrome / Perfetto trace (Trace Event Format JSON), for a person
// to look at in https://ui.perfetto.dev. The writer observes sim::Trace, so
// the run and its trace hash are the same with or without it. Layout (one
// process per node, lease ownership as slices on one track per connection,
// faults as instants, DynamoDB and the network as counters): docs/perfetto.md.

#include <cstdint>
#include <fstream>
#include <iosfwd>
#include "base/time.hpp"
#include "sim/trace.hpp"
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace leaseproof::report {

struct PerfettoFigures {
  uint64_t events = 0;  // trace events written, metadata included
  uint64_t slices = 0;  // complete slices ("X")
  uint64_t lease_slices = 0;
  uint64_t instants = 0;
  uint64_t counter_samples = 0;
  uint64_t violations = 0;  // instants on the "violations" track
  uint64_t flows = 0;       // request -> reply flows drawn
  uint64_t flows_not_written = 0;  // chosen but beyond kFlowsMax
  uint64_t tracks = 0;
  std::map<std::string, uint64_t> suppressed_instants;  // by category, beyond the per-category bound
};

class PerfettoWriter {
 public:
  // Instant events of one category (drops, DynamoDB errors, one note label...)
  // beyond this many are counted, not written: the counters still show them,
  // and the file stays small enough to load.
  static constexpr uint64_t kInstantsPerCategoryMax = 10'000;
  // Request -> reply flows (docs/perfetto.md says which requests get one):
  // at most this many a run, earliest first; and at most kTripsKeptMax
  // answered requests are held until finish() chooses among them.
  static constexpr uint64_t kFlowsMax = 10'000;
  static constexpr uint64_t kTripsKeptMax = 500'000;

  explicit PerfettoWriter(std::ostream& out);
  ~PerfettoWriter();
  PerfettoWriter(const PerfettoWriter&) = delete;
  PerfettoWriter& operator=(const PerfettoWriter&) = delete;

  // Observes every later event of `trace`; node names are read from it while
  // events arrive. The writer must outlive the run; the trace need not
  // outlive the writer's finish().
  void attach(sim::Trace& trace);
  void observe(const sim::TraceEvent& event);
  // Ends every slice still open at `end` (the run's end), writes the last
  // counter samples, the run's `violations` (the checkers' texts) on the
  // "violations" track and the request -> reply flows, and ends the
  // document; `metadata` goes to its otherData.
  void finish(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata = {},
              const std::vector<std::string>& violations = {});

  const PerfettoFigures& figures() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A Perfetto file written to FILE.tmp and renamed to FILE only by commit(),
// so a file under the requested name is always whole. Destroyed without a
// commit, it removes FILE.tmp.
class PerfettoFile {
 public:
  // nullptr, with `error` naming the file, when FILE.tmp cannot be created.
  static std::unique_ptr<PerfettoFile> create(const std::string& path, std::string& error);
  ~PerfettoFile();
  PerfettoFile(const PerfettoFile&) = delete;
  PerfettoFile& operator=(const PerfettoFile&) = delete;

  void attach(sim::Trace& trace) { writer_->attach(trace); }
  // Finishes the document, closes and renames it. Empty on success, else the
  // error (FILE.tmp is removed and nothing is left under FILE's name).
  std::string commit(Instant end, const std::vector<std::pair<std::string, std::string>>& metadata = {},
                     const std::vector<std::string>& violations = {});
  const PerfettoFigures& figures() const { return writer_->figures(); }
  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return temporary_; }  // written until commit() renames it

 private:
  explicit PerfettoFile(std::string path);

  std::string path_;
  std::string temporary_;
  std::ofstream out_;
  std::unique_ptr<PerfettoWriter> writer_;
  bool committed_ = false;
};

}  // namespace leaseproof::report
