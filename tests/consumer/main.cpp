// An outside program driving the installed lease core: one worker's
// LeaseManager is told a connection was released, sends an acquire, is given
// the reply DynamoDB would send (canned, in the wire's JSON) and opens the
// session. Prints every action; exits 1 unless the session opened with the
// reply's epoch.
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include <leaseproof/core/dynamo/codec.hpp>
#include <leaseproof/core/lease/manager.hpp>

namespace {

using namespace leaseproof;

class CountingRandom final : public RandomSource {
 public:
  uint64_t below(uint64_t bound) override { return next_++ % bound; }

 private:
  uint64_t next_ = 0;
};

// Prints the actions and returns the epoch of the last session opened (0: none).
int64_t print(const lease::Actions& actions, uint64_t& last_token) {
  int64_t opened_epoch = 0;
  for (const lease::Action& action : actions) {
    std::visit(
        [&](const auto& a) {
          using A = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<A, lease::DynamoCall>) {
            last_token = a.token;
            std::printf("call %s %s: %s %s\n", std::string(lease::to_string(a.kind)).c_str(), a.connection.c_str(),
                        std::string(dynamo::operation_name(dynamo::operation_of(a.request))).c_str(),
                        dynamo::encode(a.request).dump().c_str());
          } else if constexpr (std::is_same_v<A, lease::OpenSession>) {
            opened_epoch = a.epoch;
            std::printf("open %s epoch %lld url %s\n", a.connection.c_str(), static_cast<long long>(a.epoch),
                        a.ws_url.c_str());
          } else if constexpr (std::is_same_v<A, lease::CloseSession>) {
            std::printf("close %s\n", a.connection.c_str());
          } else if constexpr (std::is_same_v<A, lease::Mark>) {
            std::printf("mark %s\n", a.name);
          } else {
            std::printf("other action\n");
          }
        },
        action);
  }
  return opened_epoch;
}

}  // namespace

int main() {
  CountingRandom random;
  FaultHook faults;
  lease::LeaseConfig config;
  if (const std::string problem = config.validate(); !problem.empty()) {
    std::printf("invalid config: %s\n", problem.c_str());
    return 1;
  }
  lease::LeaseManager manager(config, "worker-a", random, faults);
  lease::Clock now{Instant::from_ns(1'700'000'000'000'000'000), Instant::from_ns(1'000'000'000)};
  lease::Actions actions;
  uint64_t token = 0;
  manager.start(now, actions);
  print(actions, token);
  actions.clear();

  if (!manager.on_released("conn-1", now, actions)) {
    std::printf("the manager refused the release notice\n");
    return 1;
  }
  print(actions, token);
  actions.clear();

  // What DynamoDB answers an applied acquire (UpdateItem, ReturnValues ALL_NEW).
  const auto reply_json = nlohmann::json::parse(R"({"Attributes": {
      "pk": {"S": "CONN#conn-1"}, "desired_state": {"S": "STARTED"},
      "lease_owner": {"S": "worker-a"}, "lease_epoch": {"N": "7"},
      "lease_expires_at_ms": {"N": "1700000020000"}, "ws_url": {"S": "wss://upstream.example/conn-1"},
      "last_seq": {"N": "41"}, "stream_epoch": {"N": "3"}}})");
  dynamo::Result<dynamo::UpdateItemResponse> decoded = dynamo::decode<dynamo::UpdateItemResponse>(reply_json);
  if (!decoded.ok()) {
    std::printf("the canned reply does not decode\n");
    return 1;
  }
  const dynamo::Result<dynamo::Response> reply{dynamo::Response{std::move(decoded).value()}};
  now.monotonic = now.monotonic + Duration::from_ms(15);
  now.wall = now.wall + Duration::from_ms(15);
  manager.on_reply(token, &reply, now, actions);
  const int64_t epoch = print(actions, token);
  std::printf("owns conn-1: %s, active connections %u, next deadline in %lld ms\n",
              manager.owns("conn-1") ? "yes" : "no", manager.active_connections(),
              static_cast<long long>((manager.next_deadline() - now.monotonic).ms()));
  return epoch == 7 && manager.owns("conn-1") ? 0 : 1;
}
