#pragma once
// Text helpers shared by the lease checkers (private to src/properties).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <leaseproof/base/ids.hpp>
#include <leaseproof/base/time.hpp>
#include <leaseproof/properties/lease_checkers.hpp>

namespace leaseproof::properties::text {

// Words separated by single or repeated spaces.
std::vector<std::string_view> split_words(std::string_view text);
std::optional<uint64_t> parse_u64(std::string_view text);

std::string node_name(const NodeNamer& names, NodeId node);
// "worker-3#2": node name, then incarnation.
std::string worker_name(const NodeNamer& names, WorkerIdentity worker);

// A wall reading as its offset from the simulation's wall epoch, with the
// clock's error against true time at the reading: "+1m5s (clock +15s)".
std::string wall_reading(Instant wall, Instant read_at);

bool is_dynamodb_operation(std::string_view label);

}  // namespace leaseproof::properties::text
