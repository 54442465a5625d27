#pragma once
// leaseproof registry ...: the connection registry of seed 003.

#include <string>

#include <CLI/CLI.hpp>

#include "scenarios/registry_scale.hpp"

namespace leaseproof::cli {

struct RegistryScaleArgs {
  scenarios::RegistryScaleOptions options;
  std::string json;  // also write the figures as JSON here
};

// Adds `registry` with its `scale` subcommand; returns `scale`.
CLI::App* add_registry_command(CLI::App& app, RegistryScaleArgs& args);
int registry_scale_command(const RegistryScaleArgs& args);

}  // namespace leaseproof::cli
