#pragma once
// The connection registry's properties (seed 003), decided from the trace of
// the registry scenario alone: the gateway's notes say what is true (which
// connections live, gw.connect / gw.gone; what each post answered, gw.post),
// the handler's what the registry did and answered (registry.joined,
// registry.remove / removed, registry.broadcast / broadcast_end,
// registry.presence). docs/registry.md states each property and its bound.
//
//   delivery    a broadcast reaches every connection that was a live member
//               of its room for the whole broadcast (its join completed
//               before the broadcast began, less the read window of an
//               eventually consistent Query, and it was connected from then
//               to the broadcast's end). A member the answer left out is a
//               violation, with the cause; a post the gateway throttled past
//               every attempt is a miss the gateway caused, counted apart.
//               A broadcast that failed (its member query reported an
//               error) while a network partition was open or after one began
//               during it is the partition's: counted apart (the registry
//               scenarios partition only the handler from DynamoDB).
//               A connection that asked to leave a room (gw.leave) is a
//               member of it no more from its ask on.
//   membership  a connection that asked to join a room (gw.join) and stayed
//               connected is a member (registry.joined) within `join_bound`:
//               the client's attempts, each answered or timed out.
//   lost membership  no request deletes a row of a live connection (the
//               registry deletes a connection's rows only once it is gone:
//               its $disconnect, or a 410 from a post to it), or the row of
//               a room the connection asked to leave, by that leave; the
//               handler notes each row a request deletes (registry.delete).
//   staleness   no answer (a broadcast's posts, a presence answer) counts a
//               row past its TTL (its join + ttl, within `ttl_slack`), and no
//               broadcast that began after a removal of a connection reported
//               success (a $disconnect's, or a 410's prune; plus the read
//               window) posts to it again,
//               unless its row was written too late for that removal to see
//               (its join completed after the removal began, less the GSI's
//               largest lag); and no broadcast that began after a leave
//               reported success (plus the read window) posts to the
//               connection in that room.
//
// Besides the verdicts it measures, for the sweep reports: how long after a
// connection died an answer still counted it (staleness, per dead
// connection for broadcasts and per offline stretch of a user for presence),
// and the connection-seconds the gateway served.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/time.hpp"
#include "sim/trace.hpp"

namespace leaseproof::properties {

struct RegistryBounds {
  Duration ttl;
  Duration ttl_slack = Duration::from_s(2);  // expiresAt is whole seconds; clocks are read at send
  Duration gsi_lag_max;
  // How long after a write an eventually consistent read may still miss it
  // (a member's join, a removal's deletes).
  Duration read_window;
  Duration join_bound;
};

class RegistryChecker {
 public:
  explicit RegistryChecker(RegistryBounds bounds) : bounds_(bounds) {}
  void observe(const sim::TraceEvent& event);
  // Judges the joins still waiting at the end of the run.
  void finish(Instant end);

  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t violations_unlisted() const { return unlisted_; }
  // Figures for the summary and the coverage counters.
  struct Figures {
    uint64_t broadcasts = 0;
    uint64_t expected_deliveries = 0;
    uint64_t delivered = 0;
    uint64_t misses_not_in_answer = 0;
    uint64_t misses_gateway = 0;      // throttled or failed past every attempt
    uint64_t ghost_posts = 0;         // posts to dead connections (410), within the bounds
    uint64_t presence_answers = 0;
    uint64_t presence_online_ghosts = 0;  // online from rows of dead connections, within the bounds
    uint64_t presence_online_joining = 0;  // online from a row whose join was still in flight
    uint64_t leaves_asked = 0;
    uint64_t leaves_ok = 0;
    uint64_t leaves_failed = 0;
    uint64_t leave_deletes = 0;             // rows of live connections a leave deleted, as asked
    uint64_t removals_ok = 0;
    uint64_t removals_failed = 0;
    uint64_t joins_asked = 0;
    uint64_t join_retries = 0;
    uint64_t row_deletes = 0;               // delete requests sent, per row (retries included)
    uint64_t broadcasts_failed_in_cut = 0;  // failed while DynamoDB was cut off
    uint64_t misses_in_cut = 0;             // their live members not posted to
    uint64_t connections = 0;
    double connection_s = 0;  // summed over connections, up to the end of the run (after finish)
  };
  // Staleness samples in milliseconds, complete after finish: per connection
  // that died, how long after its death the last broadcast posted to it (0:
  // none did); per stretch in which a user had no live connection, how long
  // after its start the last presence answer still said online (0: none).
  struct Staleness {
    std::vector<double> broadcast_ms;
    std::vector<double> presence_ms;
  };
  const Staleness& staleness() const { return staleness_; }
  const Figures& figures() const { return figures_; }
  std::string summary() const;

 private:
  struct Connection {
    std::string user;
    bool alive = true;
    Instant connected;
    Instant died;
    Duration counted_dead;  // the longest a broadcast posted to it after its death
    // The earliest removal that reported success: when it began (what it
    // could see) and ended (reads after it plus the read window see it).
    std::optional<std::pair<Instant, Instant>> removed;
  };
  struct Broadcast {
    std::string room;
    Instant began;
    std::vector<std::string> expected;                 // live members at the start
    std::map<std::string, std::string> last_status;    // connection -> last post answer
  };
  // Keeps the first few of each kind, so that one kind cannot hide another.
  void violation(std::string_view kind, std::string text);
  void on_post(const sim::TraceEvent& event);
  void on_broadcast_end(const sim::TraceEvent& event);
  void on_presence(const sim::TraceEvent& event);
  bool expired(const std::string& connection, const std::string& room, Instant at) const;
  void check_joins(Instant now);

  RegistryBounds bounds_;
  std::map<std::string, Connection> connections_;
  std::map<std::pair<std::string, std::string>, Instant> rows_;  // (connection, room) -> join completed
  std::map<std::string, std::set<std::string>> rooms_;           // room -> connections that joined
  std::map<std::string, std::set<std::string>> users_;           // user -> connections
  std::map<int64_t, std::pair<std::string, Instant>> removals_;  // op -> connection, start
  // (connection, room) a client asked to leave: when it asked, and when a
  // leave of it first reported success. A join completing after that
  // success (a retry in flight) makes it a member again: the entry goes.
  struct Leave {
    Instant asked;
    std::optional<Instant> done;
  };
  std::map<std::pair<std::string, std::string>, Leave> left_;
  std::map<int64_t, std::pair<std::string, std::string>> leave_ops_;  // op -> (connection, room)
  std::map<int64_t, Broadcast> broadcasts_;
  // Joins asked and not done: (connection, room) -> first ask; and their
  // deadlines in order (entries whose join is done are skipped).
  std::map<std::pair<std::string, std::string>, Instant> joins_waiting_;
  std::multimap<Instant, std::pair<std::string, std::string>> join_deadlines_;
  // Users without a live connection: since when, and the latest presence
  // answer that said online since then (relative to it).
  std::map<std::string, std::pair<Instant, Duration>> offline_;
  uint32_t open_cuts_ = 0;  // partitions open now
  std::optional<Instant> last_cut_end_;
  Figures figures_;
  Staleness staleness_;
  std::vector<std::string> violations_;
  uint64_t unlisted_ = 0;
  std::map<std::string, uint64_t, std::less<>> listed_by_kind_;
};

}  // namespace leaseproof::properties
