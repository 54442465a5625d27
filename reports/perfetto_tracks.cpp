#include "reports/perfetto_tracks.hpp"

#include <fmt/format.h>

#include <charconv>
#include "base/assert.hpp"
#include <optional>

namespace leaseproof::report {

namespace {

constexpr int64_t kNetworkPid = 1;
constexpr int64_t kTidsPerProcess = 100'000;
constexpr int64_t kNamedLocalMax = 999;          // "state", "errors", link tracks...
constexpr int64_t kConnectionLocalBase = 1'000;  // "c<N>" -> 1000 + N
constexpr int64_t kOverflowLocal = 91'000;       // anything else, in order of first use
constexpr int64_t kPidMax = 21'000;              // keeps every tid below 2^31
constexpr int64_t kCheckersPid = kPidMax;        // above every node's
constexpr std::string_view kMainTrack = "events";
constexpr std::string_view kNetworkMainTrack = "world events";

// Shared services first, then the control plane, then workers and the rest.
int64_t kind_rank(std::string_view name) {
  if (name == "dynamodb") return 1;
  if (name == "upstream" || name == "hub" || name.starts_with("relay")) return 2;
  if (name == "control" || name == "sqs") return 4;
  if (name.starts_with("worker")) return 5;
  return 6;
}

std::optional<int64_t> connection_number(std::string_view connection) {
  if (connection.size() < 2 || connection[0] != 'c') return std::nullopt;
  int64_t number = 0;
  const char* end = connection.data() + connection.size();
  const auto [ptr, error] = std::from_chars(connection.data() + 1, end, number);
  if (error != std::errc{} || ptr != end || number < 0) return std::nullopt;
  return number;
}

}  // namespace

std::string Tracks::node_name(NodeId node) const {
  const std::string_view name = trace_ != nullptr ? trace_->node_name(node) : std::string_view{};
  return name.empty() ? fmt::format("node {}", node) : std::string{name};
}

Tracks::Process& Tracks::process(int64_t pid, std::string_view name, int64_t sort_index) {
  LP_ASSERT_LE(pid, kPidMax);
  Process& found = processes_[pid];
  if (!found.named) {
    found.named = true;
    writer_->process_name(pid, name, sort_index);
  }
  return found;
}

// The local index a new track gets: connections named c<N> by number (so
// they sort numerically), other tracks in order of first use.
int64_t Tracks::new_local(Process& process, std::string_view name, bool is_connection) {
  if (is_connection) {
    const std::optional<int64_t> number = connection_number(name);
    if (number && *number < kOverflowLocal - kConnectionLocalBase) return kConnectionLocalBase + *number;
  } else if (process.next_named <= kNamedLocalMax) {
    return process.next_named++;
  }
  LP_ASSERT_LT(kOverflowLocal + process.next_overflow, kTidsPerProcess);
  return kOverflowLocal + process.next_overflow++;
}

Track Tracks::track(int64_t pid, Process& process, std::string_view name, bool is_connection) {
  const auto found = process.tids.find(name);
  if (found != process.tids.end()) return {pid, found->second};
  const bool main = process.tids.empty() && name == kMainTrack;
  const int64_t local = main ? 0 : new_local(process, name, is_connection);
  const int64_t tid = main ? pid : pid * kTidsPerProcess + local;
  process.tids.emplace(std::string{name}, tid);
  writer_->thread_name({pid, tid}, name, local);
  ++count_;
  return {pid, tid};
}

Track Tracks::node_main(NodeId node) {
  LP_ASSERT(node.valid());
  if (main_by_node_.size() <= node.value) main_by_node_.resize(node.value + 1);
  std::optional<Track>& main = main_by_node_[node.value];
  if (!main) main = node_track(node, kMainTrack, false);
  return *main;
}
Track Tracks::node_named(NodeId node, std::string_view name) { return node_track(node, name, false); }
Track Tracks::node_connection(NodeId node, std::string_view connection) { return node_track(node, connection, true); }

Track Tracks::node_track(NodeId node, std::string_view name, bool is_connection) {
  LP_ASSERT(node.valid());
  const int64_t pid = static_cast<int64_t>(node.value) + 2;
  LP_ASSERT_LT(pid, kCheckersPid);
  const std::string process_name = node_name(node);
  Process& owner = process(pid, process_name, kind_rank(process_name) * kTidsPerProcess + node.value);
  // The main track comes first, so that its tid is the pid (Perfetto's main thread).
  if (name != kMainTrack) track(pid, owner, kMainTrack, false);
  return track(pid, owner, name, is_connection);
}

Track Tracks::network_main() {
  if (!network_main_) network_main_ = network_named(kNetworkMainTrack);
  return *network_main_;
}

Track Tracks::network_named(std::string_view name) {
  Process& network = process(kNetworkPid, "network", 3 * kTidsPerProcess);
  track(kNetworkPid, network, kNetworkMainTrack, false);
  return track(kNetworkPid, network, name, false);
}

Track Tracks::checkers_named(std::string_view name) {
  Process& checkers = process(kCheckersPid, "checkers", 0);  // sort index 0: above the network and the nodes
  return track(kCheckersPid, checkers, name, false);
}

}  // namespace leaseproof::report
