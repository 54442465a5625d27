#pragma once
// The article's lab (seeds/004), as scenarios: a hub and plain subscribers
// (models::SubscriberPool), no leases. Each checks its own claim:
//
//   stream-slow-subscriber    64 MB published to one subscriber that never
//                             reads: its queue stays within the bound and the
//                             hub closes it with 1013
//   stream-relay-idle         a connection held for 6 s behind a relay that
//                             cuts idle connections after 2.5 s survives
//                             (pings every 2 s)
//   stream-silent-subscriber  a subscriber that never answers pings is cut
//                             within ping interval + pong timeout (6 s)
//   stream-wave               1,000 subscribers closed at once with 1012:
//                             the peak of reconnects per second (full jitter,
//                             or none with {"jitter": false})
//   stream-empty-reconnect    a subscriber whose channel never had a message
//                             reconnects after a hub restart: at most one
//                             epoch_changed reset (losing nothing), no give-up
//
// The lease-backed lab checks (cuts in the middle of publishing, hub
// restarts, crashes while recording) are presets of the lease scenario.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "scenarios/scenario.hpp"

namespace leaseproof::scenarios {

RunResult run_stream_lab(std::string_view name, const RunConfig& config);
// "" when the parameters are valid for this lab scenario.
std::string validate_stream_lab(std::string_view name, const RunConfig& config);

}  // namespace leaseproof::scenarios
