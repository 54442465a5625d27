#pragma once
// A small deterministic world for testing core/registry: one RegistryClient
// driven against a DynamoDB (the simulated store of models/, or a real server
// through a function: tests/real/registry_real_test.cpp) and a stand-in for
// API Gateway's PostToConnection (a set of live connections; a post to any
// other answers 410 Gone). Requests are answered in the order sent, one
// millisecond apart; a lost reply reaches the client as a timeout 100 ms
// later. Nothing runs concurrently, so every run against the store is the
// same.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/random.hpp"
#include "core/registry/client.hpp"
#include "core/registry/requests.hpp"
#include "models/dynamo/store.hpp"
#include "sim/prng.hpp"

namespace leaseproof::registry::test {

// True time zero as a Unix-epoch instant (2023-11-14).
inline constexpr int64_t kEpochMs = 1'700'000'000'000LL;

using PrngSource = sim::PrngRandomSource;

// The connections of a members answer, sorted.
inline std::vector<std::string> member_connections(const Done& done) {
  std::vector<std::string> out;
  for (const Member& member : std::get<MembersDone>(done.outcome).members) out.push_back(member.connection);
  std::sort(out.begin(), out.end());
  return out;
}

class RegistryWorld {
 public:
  // One DynamoDB call at this wall time: the answer, or nullopt when none came.
  using Backend =
      std::function<std::optional<dynamo::Result<dynamo::Response>>(const dynamo::Request& request, Instant wall)>;

  // Against the simulated store (TTL on `expiresAt`), table created.
  RegistryWorld(RegistryConfig config, models::DynamoStoreOptions options, uint64_t seed = 1)
      : store_(std::in_place, std::move(options), seed), random_(seed), client_(std::move(config), random_) {
    store_->set_ttl(client_.config().table.name, "expiresAt");
    backend_ = [this](const dynamo::Request& request, Instant at) -> std::optional<dynamo::Result<dynamo::Response>> {
      return store_->apply(request, at);
    };
    const auto created = backend_(create_table_request(client_.config()), wall());
    EXPECT_TRUE(created && created->ok()) << (created && !created->ok() ? created->error().message : "");
  }
  // Against any DynamoDB; the caller creates the table.
  RegistryWorld(RegistryConfig config, Backend backend, uint64_t seed = 1)
      : random_(seed), client_(std::move(config), random_), backend_(std::move(backend)) {}
  // The client and the backend point into the world.
  RegistryWorld(const RegistryWorld&) = delete;
  RegistryWorld& operator=(const RegistryWorld&) = delete;

  // The store and options of a fresh table that answers like a real one.
  static models::DynamoStoreOptions exact() { return models::DynamoStoreOptions::faults_off(); }

  Instant wall() const { return Instant::from_ms(kEpochMs) + (now_ - Instant{}); }
  Clock clock() const { return Clock{wall(), now_}; }
  void advance(Duration by) {
    now_ = now_ + by;
    if (store_) store_->advance(wall());
  }

  // Runs one operation to its Done.
  template <typename Start>
  Done run(Start&& start) {
    const OperationId id = next_id_++;
    Actions out;
    start(client_, id, clock(), out);
    pending_.insert(pending_.end(), out.begin(), out.end());
    for (int steps = 0; steps < 1'000'000; ++steps) {
      if (auto it = done_.find(id); it != done_.end()) {
        Done done = std::move(it->second);
        done_.erase(it);
        return done;
      }
      if (!step()) break;
    }
    ADD_FAILURE() << "registry operation " << id << " never finished";
    return Done{};
  }

  Done join(const std::string& room, const std::string& connection, const std::string& user) {
    return run([&](RegistryClient& c, OperationId id, Clock now, Actions& out) {
      c.join(id, room, connection, user, now, out);
    });
  }
  Done leave(const std::string& room, const std::string& connection) {
    return run([&](RegistryClient& c, OperationId id, Clock now, Actions& out) { c.leave(id, room, connection, now, out); });
  }
  Done members(const std::string& room) {
    return run([&](RegistryClient& c, OperationId id, Clock now, Actions& out) { c.members(id, room, now, out); });
  }
  Done remove(const std::string& connection) {
    return run(
        [&](RegistryClient& c, OperationId id, Clock now, Actions& out) { c.remove_connection(id, connection, now, out); });
  }
  Done presence(const std::string& user) {
    return run([&](RegistryClient& c, OperationId id, Clock now, Actions& out) { c.presence(id, user, now, out); });
  }
  Done broadcast(const std::string& room, const std::string& payload) {
    return run(
        [&](RegistryClient& c, OperationId id, Clock now, Actions& out) { c.broadcast(id, room, payload, now, out); });
  }

  models::DynamoStore& store() { return *store_; }  // store worlds only
  RegistryClient& client() { return client_; }
  const RegistryConfig& config() const { return client_.config(); }
  std::set<std::string>& live() { return live_; }             // connections API Gateway still has
  std::map<std::string, int>& throttle_posts() { return throttled_; }  // 429s left per connection
  void lose_replies(int count) { replies_to_lose_ = count; }
  int marks(const std::string& name) const {
    auto it = marks_.find(name);
    return it == marks_.end() ? 0 : it->second;
  }
  const std::vector<std::pair<std::string, std::string>>& posts() const { return posts_; }
  // Rows of this connection still in the table (strongly consistent reads).
  size_t rows_of(const std::string& connection, const std::vector<std::string>& rooms) {
    size_t rows = 0;
    for (const std::string& room : rooms) {
      dynamo::GetItemRequest get;
      get.table_name = config().table.name;
      get.key = membership_key(config(), room, connection);
      get.consistent_read = true;
      const auto reply = backend_(get, wall());
      EXPECT_TRUE(reply && reply->ok());
      if (reply && reply->ok() && std::get<dynamo::GetItemResponse>(reply->value()).item) ++rows;
    }
    return rows;
  }

 private:
  // Carries out one action, or the next timer when none is left.
  bool step() {
    if (pending_.empty()) {
      const Instant due = client_.next_deadline();
      if (due == Instant::max()) return false;
      if (due > now_) advance(due - now_);
      Actions out;
      client_.on_timer(clock(), out);
      pending_.insert(pending_.end(), out.begin(), out.end());
      return true;
    }
    Action action = std::move(pending_.front());
    pending_.erase(pending_.begin());
    Actions out;
    if (auto* call = std::get_if<DynamoCall>(&action)) {
      advance(Duration::from_ms(1));
      const auto reply = backend_(call->request, wall());
      if (!reply || replies_to_lose_ > 0) {
        if (reply) --replies_to_lose_;
        advance(Duration::from_ms(100));
        client_.on_reply(call->token, nullptr, clock(), out);
      } else {
        client_.on_reply(call->token, &*reply, clock(), out);
      }
    } else if (auto* post = std::get_if<PostToConnection>(&action)) {
      posts_.emplace_back(post->connection, post->payload);
      PostStatus status = live_.contains(post->connection) ? PostStatus::ok : PostStatus::gone;
      if (auto it = throttled_.find(post->connection); it != throttled_.end() && it->second > 0) {
        --it->second;
        status = PostStatus::throttled;
      }
      client_.on_post_result(post->token, status, clock(), out);
    } else if (auto* done = std::get_if<Done>(&action)) {
      done_.emplace(done->operation, std::move(*done));
    } else if (auto* mark = std::get_if<Mark>(&action)) {
      ++marks_[mark->name];
    }
    pending_.insert(pending_.end(), out.begin(), out.end());
    return true;
  }

  std::optional<models::DynamoStore> store_;
  PrngSource random_;
  RegistryClient client_;
  Backend backend_;
  Instant now_{};
  OperationId next_id_ = 1;
  Actions pending_;
  std::map<OperationId, Done> done_;
  std::set<std::string> live_;
  std::map<std::string, int> throttled_;
  int replies_to_lose_ = 0;
  std::map<std::string, int> marks_;
  std::vector<std::pair<std::string, std::string>> posts_;
};

}  // namespace leaseproof::registry::test
