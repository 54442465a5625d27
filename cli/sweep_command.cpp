// `leaseproof sweep` and `leaseproof report merge`: the CLI around
// report/sweep. Wall-clock figures (progress, seeds per second, the time a
// sweep took) go to the terminal only, never into the report files, whose
// bytes depend on the spec and the seeds alone.
#include "cli/sweep_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "reports/sweep.hpp"
#include "reports/sweep_report.hpp"

#include "cli/cli_common.hpp"
#include "cli/gate_command.hpp"

namespace leaseproof::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kPlainProgressEvery_s = 5;
constexpr int kBarWidth = 24;

// The spec file, with --seeds applied before it is checked.
report::SweepSpec load_spec(const SweepArgs& args) {
  nlohmann::json json = read_json_file(args.spec_path, "--spec");
  if (!args.seeds.empty()) {
    uint64_t seeds = 0;
    const auto [end, error] = std::from_chars(args.seeds.data(), args.seeds.data() + args.seeds.size(), seeds);
    if (error != std::errc{} || end != args.seeds.data() + args.seeds.size()) {
      throw UsageError{fmt::format("--seeds: '{}' is not a number of seeds", args.seeds)};
    }
    if (seeds == 0) throw UsageError{"--seeds: 0: a cell needs at least 1 seed"};
    if (json.is_object()) json["seeds"] = seeds;
  }
  return report::parse_sweep_spec(json);
}

std::string eta_text(double seconds) {
  if (seconds < 0 || seconds > 1e7) return "?";
  return format_duration(Duration::from_s(static_cast<int64_t>(seconds + 0.5)));
}

// On a terminal, one line redrawn in place; elsewhere (CI logs) a plain line
// every few seconds.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(fileno(stdout)) != 0), start_(Clock::now()) {}

  void operator()(const report::SweepProgress& p) {
    const double elapsed = seconds_since(start_);
    const double rate = elapsed > 0 ? static_cast<double>(p.runs_done) / elapsed : 0;
    const double eta = rate > 0 ? static_cast<double>(p.runs_total - p.runs_done) / rate : -1;
    const bool done = p.runs_done == p.runs_total;
    if (tty_) {
      const int filled = p.runs_total == 0 ? kBarWidth : static_cast<int>(kBarWidth * p.runs_done / p.runs_total);
      fmt::print("\r[{}{}] cells {}/{}  runs {}/{}  {:.1f} seeds/s  ETA {}   ", std::string(filled, '#'),
                 std::string(kBarWidth - filled, '-'), p.cells_done, p.cells_total, p.runs_done, p.runs_total, rate,
                 eta_text(eta));
      if (done) fmt::print("\n");
    } else if (done || elapsed - last_plain_ >= kPlainProgressEvery_s) {
      last_plain_ = elapsed;
      fmt::print("progress: cells {}/{}, runs {}/{}, {:.1f} seeds/s, ETA {}\n", p.cells_done, p.cells_total, p.runs_done,
                 p.runs_total, rate, eta_text(eta));
    }
    std::fflush(stdout);
  }

 private:
  bool tty_;
  Clock::time_point start_;
  double last_plain_ = 0;
};

void print_findings(const report::SweepSummary& summary) {
  fmt::print("recommendation: {}\n", summary.recommendation);
  for (const report::UnsafeValue& u : summary.unsafe) {
    fmt::print("smallest unsafe {} [{}]: {} (largest tried {}; analytic margin {})\n", u.axis, u.others,
               u.minimal_text(), u.largest_tried, u.analytic);
  }
}

void print_files(const std::string& out, const std::map<std::string, std::string>& files) {
  std::string names;
  for (const auto& [name, content] : files) names += fmt::format("{}{}", names.empty() ? "" : ", ", (fs::path{out} / name).string());
  fmt::print("reports: {}\n", names);
}

int write_or_fail(const std::string& out, const std::map<std::string, std::string>& files) {
  try {
    report::write_report_files(out, files);
  } catch (const std::runtime_error& error) {
    fmt::print(stderr, "leaseproof: error: {}\n", error.what());
    return kExitFailed;
  }
  print_files(out, files);
  return 0;
}

uint64_t runs_of(const report::SweepData& data) {
  uint64_t runs = 0;
  for (const auto& cell : data.records) runs += cell.size();
  return runs;
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args) {
  CLI::App* sweep = app.add_subcommand(
      "sweep", "Run a grid of scenario parameters x seeds; write JSON, CSV, Markdown and HTML reports (docs/reports.md)");
  sweep->add_option("--spec", args.spec_path, "The sweep spec (JSON), e.g. sweeps/heartbeat-lease-skew.json")
      ->required()
      ->type_name("FILE");
  sweep->add_option("--out", args.out, "Directory for the reports (created)")->required()->type_name("DIR");
  sweep->add_option("--seeds", args.seeds, "Seeds per cell (overrides the spec's)")->type_name("N");
  sweep->add_option("--jobs", args.jobs, "Threads (default: one per core)")->check(CLI::Range(1u, 256u))->type_name("N");
  sweep->add_option("--shard", args.shard, "Run shard i of n (1-based) and write its raw sweep.json only; "
                                           "combine shards with 'report merge'")
      ->type_name("i/n");
  return sweep;
}

CLI::App* add_report_merge_command(CLI::App& app, MergeArgs& args) {
  CLI::App* report = app.add_subcommand("report", "Work with sweep reports");
  report->require_subcommand(1);
  CLI::App* merge = report->add_subcommand(
      "merge", "Combine the shards of a sweep (each a directory with its sweep.json) into the full reports, or the "
               "shards of a gate (each with its gate.json) into one gate.json and its verdict");
  merge->add_option("--out", args.out, "Directory for the merged reports or gate.json (created)")->required()->type_name("DIR");
  merge->add_option("SHARD_DIR", args.shards, "The shards' --out directories, all of them")->required();
  return merge;
}

int sweep_command(const SweepArgs& args) {
  report::SweepSpec spec;
  std::optional<report::Shard> shard;
  try {
    spec = load_spec(args);
    if (!args.shard.empty()) shard = report::parse_shard(args.shard);
  } catch (const report::SweepInputError& error) {
    throw UsageError{error.what()};
  }
  // A grid with no valid cell measures nothing: no report would say why.
  const std::vector<report::SweepCell> grid = report::expand_cells(spec);
  if (std::none_of(grid.begin(), grid.end(), [](const report::SweepCell& cell) { return cell.valid(); })) {
    const std::string values = report::cell_label(spec, grid.front());
    throw UsageError{fmt::format("{}: every cell of the grid is invalid, so the sweep would measure nothing; the "
                                 "first ({}): {}",
                                 args.spec_path, values, grid.front().invalid)};
  }
  check_output_directory("--out", args.out);
  const unsigned jobs = std::max(1u, args.jobs != 0 ? args.jobs : std::thread::hardware_concurrency());
  uint64_t cells = 1;
  for (const report::SweepAxis& axis : spec.axes) cells *= axis.values.size();
  fmt::print("leaseproof sweep: {}: scenario {}, {} cells x {} seeds, {} per run, {} threads{}\n", args.spec_path,
             spec.scenario, cells, spec.seeds, format_duration(spec.duration), jobs,
             shard ? fmt::format(", shard {}/{}", shard->index, shard->count) : "");
  std::fflush(stdout);
  const auto start = Clock::now();
  ProgressPrinter progress;
  report::SweepData data;
  try {
    data = report::run_sweep(spec, shard, jobs, std::ref(progress));
  } catch (const report::SweepInputError& error) {
    throw UsageError{error.what()};
  }
  const double run_seconds = seconds_since(start);
  const uint64_t runs = runs_of(data);
  uint64_t invalid = 0;
  for (const report::SweepCell& cell : data.cells) invalid += cell.valid() ? 0 : 1;
  fmt::print("sweep: {} cells ({} invalid), {} runs in {:.1f} s wall on {} threads ({:.1f} seeds/s)\n", data.cells.size(),
             invalid, runs, run_seconds, jobs, static_cast<double>(runs) / std::max(run_seconds, 1e-9));
  if (shard) {
    fmt::print("shard {}/{}: raw records only; combine every shard with: leaseproof report merge --out DIR SHARD_DIR...\n",
               shard->index, shard->count);
    const int status = write_or_fail(args.out, report::render_reports(data));
    // A full report in this folder described another run: its files would
    // sit beside this shard's sweep.json as if they were its own.
    for (const char* name : {"sweep.csv", "sweep.md", "sweep.html"}) {
      const std::filesystem::path stale = std::filesystem::path{args.out} / name;
      std::error_code ignored;
      if (status == 0 && std::filesystem::remove(stale, ignored)) {
        fmt::print("removed {}: a full report of an earlier run, not this shard's\n", stale.string());
      }
    }
    return status;
  }
  const report::SweepSummary summary = report::summarize(data);
  print_findings(summary);
  const auto files = report::render_reports(data, summary);
  fmt::print("reports rendered in {:.1f} s (the HTML timeline reruns one seed)\n", seconds_since(start) - run_seconds);
  return write_or_fail(args.out, files);
}

int report_merge_command(const MergeArgs& args) {
  // Shards of a gate (gate --shard --out) or of a sweep (sweep --shard --out).
  const size_t gates = static_cast<size_t>(std::count_if(args.shards.begin(), args.shards.end(), is_gate_shard));
  if (gates == args.shards.size()) return merge_gate_shards(args.shards, args.out);
  if (gates > 0) throw UsageError{"report merge: shards of a gate (gate.json) and of a sweep (sweep.json) mixed"};
  std::vector<report::ShardDocument> documents;
  for (const std::string& directory : args.shards) {
    if (!fs::is_directory(directory)) {
      throw UsageError{fmt::format("report merge: shard directory '{}' does not exist", directory)};
    }
    const fs::path file = fs::path{directory} / "sweep.json";
    if (!fs::exists(file)) {
      throw UsageError{fmt::format("report merge: '{}' is missing (is '{}' a sweep --shard output?)", file.string(), directory)};
    }
    if (fs::exists(args.out) && fs::equivalent(args.out, directory)) {
      throw UsageError{fmt::format("--out: '{}' is one of the shards; merge into another directory", args.out)};
    }
    documents.push_back({directory, read_json_file(file.string(), "report merge")});
  }
  check_output_directory("--out", args.out);
  report::SweepData data;
  try {
    data = report::merge_shards(documents);
  } catch (const report::SweepInputError& error) {
    throw UsageError{error.what()};
  }
  fmt::print("report merge: {} shards, {} cells, {} runs\n", documents.size(), data.cells.size(), runs_of(data));
  const report::SweepSummary summary = report::summarize(data);
  print_findings(summary);
  return write_or_fail(args.out, report::render_reports(data, summary));
}

}  // namespace leaseproof::cli
