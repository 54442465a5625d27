#include "cli/registry_command.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cli/cli_common.hpp"
#include "base/temporary_file.hpp"
#include "cli/dynamo_command.hpp"

namespace leaseproof::cli {

CLI::App* add_registry_command(CLI::App& app, RegistryScaleArgs& args) {
  CLI::App* registry = app.add_subcommand("registry", "The connection registry of a serverless WebSocket service (seed 003)");
  registry->require_subcommand(1);
  CLI::App* scale = registry->add_subcommand(
      "scale",
      "Seed 003's verification, in the simulated DynamoDB: a broadcast's member query for rooms of varied size "
      "beside a Scan, items read against table size, and a big room's partition write rate with 1 and 8 shards; "
      "prints Markdown tables");
  scenarios::RegistryScaleOptions& o = args.options;
  scale->add_option("--seed", o.seed, "Seed of the filler rooms, user ids and latency draws")->capture_default_str();
  scale->add_option("--memberships", o.memberships, "Memberships in the table of the room-size comparison")
      ->capture_default_str();
  scale->add_option("--room-sizes", o.room_sizes, "Rooms measured (the first is also the chart's room)")
      ->delimiter(',')
      ->capture_default_str();
  scale->add_option("--table-sizes", o.table_sizes, "Table sizes of the items-read chart")
      ->delimiter(',')
      ->capture_default_str();
  scale->add_option("--shards", o.shard_counts, "Partition keys per room to compare (the last is the chart's)")
      ->delimiter(',')
      ->capture_default_str();
  scale->add_option("--hot-room", o.hot_room_members, "Members of the room whose joins are measured")
      ->capture_default_str();
  scale->add_option("--joins-per-s", o.joins_per_s, "Rate at which the hot room's members join")->capture_default_str();
  scale->add_option("--page-items", o.query_page_items_max, "Limit of each member query page")->capture_default_str();
  scale->add_option("--json", args.json, "Also write the figures as JSON to this file")->type_name("FILE");
  return scale;
}

int registry_scale_command(const RegistryScaleArgs& args) {
  if (const std::string error = args.options.validate(); !error.empty()) throw UsageError{"registry scale: " + error};
  if (!args.json.empty()) check_output_file("--json", args.json);
  const auto start = std::chrono::steady_clock::now();
  const scenarios::RegistryScaleReport report =
      scenarios::measure_registry_scale(args.options, [&](const std::string& line) {
        fmt::print(stderr, "registry scale: {} ({:.1f} s)\n", line, seconds_since(start));
      });
  fmt::print("{}", report.markdown());
  if (!args.json.empty()) {
    const std::string temporary = unique_temporary_path(args.json);
    const RemoveOnInterrupt cleanup(temporary);
    {
      std::ofstream out(temporary);
      out << report.to_json().dump(2) << '\n';
      if (!out) throw UsageError{fmt::format("--json: cannot write {}", temporary)};
    }
    if (std::string error = rename_into_place(temporary, args.json); !error.empty()) {
      fmt::print(stderr, "leaseproof: error: --json: {}\n", error);
      return kExitFailed;
    }
  }
  fmt::print(stderr, "registry scale: done in {:.1f} s\n", seconds_since(start));
  return 0;
}

}  // namespace leaseproof::cli
