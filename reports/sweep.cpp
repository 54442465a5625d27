// Running a sweep (all of it, or one shard) on several threads, its raw
// records as JSON, and merging the raw records of shards.
#include "reports/sweep.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "scenarios/scenario.hpp"
#include "sim/trace.hpp"

namespace leaseproof::report {

namespace {

constexpr const char* kGenerator = "leaseproof 0.1.0";
constexpr auto kProgressInterval = std::chrono::milliseconds(200);

[[noreturn]] void fail(std::string message) { throw SweepInputError{std::move(message)}; }

SeedRecord record_of(const scenarios::RunResult& result) {
  nlohmann::json violations = nlohmann::json::object();
  for (const std::string& violation : result.violations) {
    const std::string kind = scenarios::violation_kind(violation);
    violations[kind] = violations.value(kind, uint64_t{0}) + 1;
  }
  SeedRecord record = {{"seed", result.seed},
                       {"trace_hash", sim::format_hash(result.trace_hash)},
                       {"violations", violations},
                       {"metrics", result.metrics}};
  if (!result.passed()) record["reproduce"] = scenarios::reproduce_command(result);
  return record;
}

// One (cell, seed) pair to run and where its record goes.
struct Job {
  size_t cell = 0;
  uint64_t seed = 0;
  size_t slot = 0;  // index in the cell's records (seed order)
};

// The pairs of the shard, cell by cell (so cells complete one after another
// and "cells done" means something), each cell's seeds in order.
std::vector<Job> jobs_of(const SweepSpec& spec, const std::vector<SweepCell>& cells, std::optional<Shard> shard,
                         std::vector<std::vector<SeedRecord>>& records) {
  std::vector<Job> jobs;
  records.assign(cells.size(), {});
  for (const SweepCell& cell : cells) {
    if (!cell.valid()) continue;
    for (uint64_t offset = 0; offset < spec.seeds; ++offset) {
      if (shard && !in_shard(*shard, cells.size(), cell.index, offset)) continue;
      jobs.push_back(Job{cell.index, spec.first_seed + offset, records[cell.index].size()});
      records[cell.index].emplace_back();
    }
  }
  return jobs;
}

void check_timeline_cell(const SweepSpec& spec, const std::vector<SweepCell>& cells) {
  if (!spec.timeline) return;
  const SweepCell& cell = cells.at(spec.timeline->cell);
  if (!cell.valid()) {
    fail(fmt::format("spec timeline.cell: cell {} is invalid ({}), so it has no run to draw", cell.index, cell.invalid));
  }
}

// Shared by the worker threads and the thread that reports progress.
struct RunState {
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> runs_done{0};
  std::atomic<uint64_t> cells_done{0};
  std::vector<std::atomic<uint64_t>> cell_remaining;
  std::mutex mutex;
  std::condition_variable finished;
  unsigned threads_running = 0;

  explicit RunState(size_t cells) : cell_remaining(cells) {}
};

void work(const SweepSpec& spec, const std::vector<SweepCell>& cells, const std::vector<Job>& jobs,
          std::vector<std::vector<SeedRecord>>& records, RunState& state) {
  const scenarios::Scenario& scenario = spec.find_scenario();
  for (uint64_t i = state.next++; i < jobs.size(); i = state.next++) {
    const Job& job = jobs[i];
    scenarios::RunConfig config;
    config.seed = job.seed;
    config.duration = spec.duration;
    config.parameters = cells[job.cell].parameters;
    records[job.cell][job.slot] = record_of(scenario.run(config));
    ++state.runs_done;
    if (--state.cell_remaining[job.cell] == 0) ++state.cells_done;
  }
  std::lock_guard lock{state.mutex};
  --state.threads_running;
  state.finished.notify_all();
}

}  // namespace

SweepData run_sweep(const SweepSpec& spec, std::optional<Shard> shard, unsigned jobs_max,
                    const std::function<void(const SweepProgress&)>& on_progress) {
  SweepData data{spec, expand_cells(spec), {}, shard};
  check_timeline_cell(spec, data.cells);
  const std::vector<Job> jobs = jobs_of(spec, data.cells, shard, data.records);
  RunState state{data.cells.size()};
  for (const SweepCell& cell : data.cells) {
    state.cell_remaining[cell.index] = data.records[cell.index].size();
    if (data.records[cell.index].empty()) ++state.cells_done;
  }
  const unsigned threads = static_cast<unsigned>(std::min<uint64_t>(std::max(1u, jobs_max), std::max<size_t>(1, jobs.size())));
  state.threads_running = threads;
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&] { work(spec, data.cells, jobs, data.records, state); });
  }
  auto progress = [&] {
    if (on_progress) on_progress(SweepProgress{state.runs_done, jobs.size(), state.cells_done, data.cells.size()});
  };
  {
    std::unique_lock lock{state.mutex};
    while (!state.finished.wait_for(lock, kProgressInterval, [&] { return state.threads_running == 0; })) {
      lock.unlock();
      progress();
      lock.lock();
    }
  }
  for (std::thread& worker : workers) worker.join();
  progress();
  return data;
}

nlohmann::json raw_json(const SweepData& data) {
  nlohmann::json cells = nlohmann::json::array();
  for (const SweepCell& cell : data.cells) {
    nlohmann::json axes = nlohmann::json::object();
    for (size_t a = 0; a < data.spec.axes.size(); ++a) axes[data.spec.axes[a].name] = cell.values[a];
    nlohmann::json json = {{"index", cell.index}, {"axes", axes}, {"parameters", cell.parameters}};
    if (!cell.valid()) json["invalid"] = cell.invalid;
    json["seeds"] = data.records[cell.index];
    cells.push_back(std::move(json));
  }
  nlohmann::json json = {
      {"schema_version", kSweepSchemaVersion}, {"generator", kGenerator}, {"spec", data.spec.to_json()}, {"cells", cells}};
  if (data.shard) json["shard"] = {{"index", data.shard->index}, {"count", data.shard->count}};
  return json;
}

namespace {

struct ParsedShard {
  std::string origin;
  Shard shard;
  const nlohmann::json* document = nullptr;
};

Shard shard_of(const ShardDocument& input) {
  const nlohmann::json& doc = input.document;
  if (!doc.is_object() || !doc.contains("schema_version")) {
    fail(fmt::format("{}: not a sweep report (no schema_version)", input.origin));
  }
  if (doc["schema_version"] != kSweepSchemaVersion) {
    fail(fmt::format("{}: schema_version {} (this leaseproof reads {})", input.origin, doc["schema_version"].dump(),
                     kSweepSchemaVersion));
  }
  if (!doc.contains("shard")) {
    fail(fmt::format("{}: not a shard (no \"shard\" field): it is a complete report already", input.origin));
  }
  const nlohmann::json& shard = doc["shard"];
  if (!shard.is_object() || !shard.value("index", nlohmann::json{}).is_number_unsigned() ||
      !shard.value("count", nlohmann::json{}).is_number_unsigned()) {
    fail(fmt::format("{}: malformed \"shard\" field {}", input.origin, shard.dump()));
  }
  Shard parsed{shard["index"].get<uint64_t>(), shard["count"].get<uint64_t>()};
  if (parsed.count == 0 || parsed.index < 1 || parsed.index > parsed.count) {
    fail(fmt::format("{}: malformed \"shard\" field {}", input.origin, shard.dump()));
  }
  for (const char* field : {"spec", "cells"}) {
    if (!doc.contains(field)) fail(fmt::format("{}: no \"{}\" field", input.origin, field));
  }
  return parsed;
}

// Same spec and shard count everywhere; every index once.
std::vector<ParsedShard> check_shard_set(const std::vector<ShardDocument>& inputs) {
  if (inputs.empty()) fail("report merge: give the shards' directories");
  std::vector<ParsedShard> shards;
  std::map<uint64_t, std::string> seen;
  for (const ShardDocument& input : inputs) {
    ParsedShard parsed{input.origin, shard_of(input), &input.document};
    const ParsedShard& first = shards.empty() ? parsed : shards.front();
    if (input.document["spec"] != first.document->at("spec")) {
      fail(fmt::format("{}: its spec differs from that of {}: shards of different sweeps", input.origin, first.origin));
    }
    if (parsed.shard.count != first.shard.count) {
      fail(fmt::format("{}: shard {}/{}, but {} is shard {}/{}", input.origin, parsed.shard.index, parsed.shard.count,
                       first.origin, first.shard.index, first.shard.count));
    }
    if (auto [it, inserted] = seen.emplace(parsed.shard.index, input.origin); !inserted) {
      fail(fmt::format("{} and {} are both shard {}/{}", it->second, input.origin, parsed.shard.index, parsed.shard.count));
    }
    shards.push_back(parsed);
  }
  std::string missing;
  for (uint64_t i = 1; i <= shards.front().shard.count; ++i) {
    if (!seen.contains(i)) missing += fmt::format("{}{}/{}", missing.empty() ? "" : ", ", i, shards.front().shard.count);
  }
  if (!missing.empty()) fail(fmt::format("report merge: missing shard(s) {}: the merged report would be incomplete", missing));
  return shards;
}

// A shard's cells must be the spec's cells (same binary, same validation),
// holding exactly the seeds the shard was assigned.
void take_cells(const SweepData& merged, const ParsedShard& shard, std::vector<std::vector<SeedRecord>>& records) {
  const nlohmann::json& cells = shard.document->at("cells");
  if (!cells.is_array() || cells.size() != merged.cells.size()) {
    fail(fmt::format("{}: {} cells where the spec makes {}", shard.origin, cells.is_array() ? cells.size() : 0,
                     merged.cells.size()));
  }
  for (const SweepCell& cell : merged.cells) {
    const nlohmann::json& stored = cells[cell.index];
    if (stored.value("parameters", nlohmann::json{}) != cell.parameters ||
        stored.value("invalid", std::string{}) != cell.invalid || !stored.contains("seeds") ||
        !stored["seeds"].is_array()) {
      fail(fmt::format("{}: cell {} differs from the spec's cell (written by another leaseproof version?)", shard.origin,
                       cell.index));
    }
    std::vector<uint64_t> expected;
    for (uint64_t offset = 0; cell.valid() && offset < merged.spec.seeds; ++offset) {
      if (in_shard(shard.shard, merged.cells.size(), cell.index, offset)) expected.push_back(merged.spec.first_seed + offset);
    }
    std::vector<uint64_t> present;
    for (const nlohmann::json& record : stored["seeds"]) {
      if (!record.is_object() || !record.value("seed", nlohmann::json{}).is_number_unsigned()) {
        fail(fmt::format("{}: cell {} has a malformed seed record", shard.origin, cell.index));
      }
      present.push_back(record["seed"].get<uint64_t>());
      records[cell.index].push_back(record);
    }
    if (present != expected) {
      fail(fmt::format("{}: cell {} holds {} seed records, but shard {}/{} runs {} of it (a truncated or edited shard?)",
                       shard.origin, cell.index, present.size(), shard.shard.index, shard.shard.count, expected.size()));
    }
  }
}

}  // namespace

SweepData merge_shards(const std::vector<ShardDocument>& inputs) {
  const std::vector<ParsedShard> shards = check_shard_set(inputs);
  const nlohmann::json& spec_json = shards.front().document->at("spec");
  SweepSpec spec;
  try {
    spec = parse_sweep_spec(spec_json);
  } catch (const SweepInputError& error) {
    fail(fmt::format("{}: its spec is not valid here: {}", shards.front().origin, error.what()));
  }
  if (spec.to_json() != spec_json) {
    fail(fmt::format("{}: its spec reads differently here (written by another leaseproof version?)", shards.front().origin));
  }
  SweepData merged{spec, expand_cells(spec), {}, std::nullopt};
  merged.records.assign(merged.cells.size(), {});
  for (const ParsedShard& shard : shards) take_cells(merged, shard, merged.records);
  for (std::vector<SeedRecord>& cell : merged.records) {
    std::stable_sort(cell.begin(), cell.end(),
                     [](const SeedRecord& a, const SeedRecord& b) { return a["seed"].get<uint64_t>() < b["seed"].get<uint64_t>(); });
  }
  check_timeline_cell(merged.spec, merged.cells);
  return merged;
}

}  // namespace leaseproof::report
