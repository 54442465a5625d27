// Fidelity of the simulated DynamoDB: identical request sequences go to a fresh
// model (faults off) and to a real dynalite server, and the answers must agree
// (status, error type and message, returned attributes, query results, paging).
// Requests using features dynalite lacks are skipped with a named reason and
// counted; docs/dynamo-fidelity.md lists every known difference.
//
//   scripts/dynalite.sh install && export LEASEPROOF_DYNALITE_ENDPOINT=$(scripts/dynalite.sh start)
//   build/release/tests/real/dynamo_differential_test

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <array>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/dynamo/codec.hpp"
#include "models/dynamo/wire.hpp"
#include "runtime/aws/dynamo_http_client.hpp"
#include "sim/clock.hpp"

namespace leaseproof::models {
namespace {

using nlohmann::json;
constexpr const char* kTarget = "DynamoDB_20120810.";

struct Totals {
  uint64_t sequences = 0;
  uint64_t compared = 0;
  std::map<std::string, uint64_t> skipped;
  std::map<std::string, uint64_t> outcomes;  // "ok" or the error type: shows failures were exercised
};
Totals& totals() {
  static Totals t;
  return t;
}

std::string endpoint() {
  const char* value = std::getenv("LEASEPROOF_DYNALITE_ENDPOINT");
  return value == nullptr ? std::string{} : std::string{value};
}

class Differential {
 public:
  explicit Differential(const std::string& url)
      : client_(options(url)) {}
  static runtime::DynamoHttpClientOptions options(const std::string& url) {
    runtime::DynamoHttpClientOptions o;
    o.endpoint_url = url;
    return o;
  }

  // Drops the named tables on the server so a sequence starts from nothing.
  void drop_tables(const std::vector<std::string>& tables) {
    for (const std::string& table : tables) {
      client_.call("DeleteTable", json{{"TableName", table}});
      for (int i = 0; i < 500; ++i) {
        runtime::DynamoHttpResult r = client_.call("DescribeTable", json{{"TableName", table}});
        if (r.ok() && r.response().http_status == 400) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  // Runs one sequence; empty on agreement, else a description of the first
  // difference (the sequence is saved in replay format for `leaseproof
  // dynamo replay --compare`).
  std::string run(std::vector<ReplayRequest> requests, const std::string& label) {
    DynamoStore store{DynamoStoreOptions::faults_off(), 1};
    ++totals().sequences;
    for (size_t i = 0; i < requests.size(); ++i) {
      ReplayRequest& request = requests[i];
      const WireResponse model =
          apply_wire(store, request.target, request.body, sim::kWallEpoch + Duration::from_ms(static_cast<int64_t>(i)));
      if (request.target.ends_with(".Query") && request.body.contains("IndexName") && model.http_status == 200) {
        // Index entries with equal keys come back in an order each server
        // picks (so pages can split them differently): compare whole results.
        ++totals().compared;
        if (std::string failure = compare_index_query(store, request, i); !failure.empty()) {
          return report(requests, i, label, failure, "");
        }
        continue;
      }
      const std::string operation = request.target.substr(request.target.find('.') + 1);
      runtime::DynamoHttpResult real = client_.call(operation, request.body);
      if (!real.ok()) return fmt::format("{}: request {}: endpoint did not answer: {}", label, i, real.error().detail);
      if (request.target.ends_with(".CreateTable") && real.response().http_status == 200 &&
          !runtime::wait_until_table_active(client_, request.body.value("TableName", ""), Duration::from_s(10))) {
        return fmt::format("{}: request {}: the table never became ACTIVE on the endpoint", label, i);
      }
      if (std::string gap = dynalite_gap(request.target, request.body); !gap.empty()) {
        ++totals().skipped[gap];
        continue;
      }
      ++totals().compared;
      ++totals().outcomes[model.is_error() ? model.error_type() : "ok"];
      const json a = comparable_response(request.target, model.http_status, model.body);
      const json b = comparable_response(request.target, real.response().http_status, real.response().body);
      if (a != b) return report(requests, i, label, a, b);
      follow_page(requests, i, model);
    }
    return {};
  }

 private:
  // After a page both sides answered alike, ask both for the next page: the
  // model's LastEvaluatedKey is then also dynalite's.
  static void follow_page(std::vector<ReplayRequest>& requests, size_t index, const WireResponse& response) {
    const ReplayRequest& request = requests[index];
    if (!request.target.ends_with(".Query") || !response.body.contains("LastEvaluatedKey")) return;
    ReplayRequest next = request;
    next.body["ExclusiveStartKey"] = response.body["LastEvaluatedKey"];
    requests.insert(requests.begin() + static_cast<std::ptrdiff_t>(index) + 1, std::move(next));
  }

  // All pages of an index query on one side, each side following its own
  // LastEvaluatedKey: total Count and ScannedCount, and the items sorted.
  template <typename Send>
  static std::optional<json> collect(const ReplayRequest& request, Send send) {
    json body = request.body;
    json items = json::array();
    int64_t count = 0;
    int64_t scanned = 0;
    for (int page = 0; page < 1000; ++page) {
      std::optional<json> answer = send(body);
      if (!answer) return std::nullopt;
      if (!answer->contains("Count")) return answer;  // an error: compare it as it is
      count += (*answer)["Count"].get<int64_t>();
      scanned += answer->value("ScannedCount", int64_t{0});
      for (const json& item : answer->value("Items", json::array())) items.push_back(item);
      if (!answer->contains("LastEvaluatedKey")) break;
      body["ExclusiveStartKey"] = (*answer)["LastEvaluatedKey"];
    }
    std::vector<json> sorted(items.begin(), items.end());
    std::sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) { return a.dump() < b.dump(); });
    return json{{"Count", count}, {"ScannedCount", scanned}, {"Items", sorted}};
  }

  std::string compare_index_query(DynamoStore& store, const ReplayRequest& request, size_t index) {
    int64_t step = 0;
    const auto model = collect(request, [&](const json& body) -> std::optional<json> {
      const Instant at = sim::kWallEpoch + Duration::from_ms(static_cast<int64_t>(index)) + Duration::from_us(++step);
      return apply_wire(store, request.target, body, at).body;
    });
    const auto real = collect(request, [&](const json& body) -> std::optional<json> {
      runtime::DynamoHttpResult r = client_.call("Query", body);
      if (!r.ok()) return std::nullopt;
      return r.response().body;
    });
    if (!real) return "dynalite did not answer";
    if (model == real) return {};
    return fmt::format("all pages:\n  model:    {}\n  dynalite: {}", dynamo::dump_json(*model), dynamo::dump_json(*real));
  }

  std::string report(const std::vector<ReplayRequest>& requests, size_t index, const std::string& label,
                     const std::string& model, const std::string& real) {
    const std::string path = fmt::format("dynamo-differential-{}-{}.jsonl", label, getpid());
    std::ofstream out{path};
    for (size_t i = 0; i <= index; ++i) out << format_replay_line(requests[i]) << '\n';
    return fmt::format("{}: request {} ({}) differs\n  request:  {}\n  {}{}\n  sequence saved to {}", label, index,
                       requests[index].target, dynamo::dump_json(requests[index].body), model, real,
                       std::filesystem::absolute(path).string());
  }

  std::string report(const std::vector<ReplayRequest>& requests, size_t index, const std::string& label,
                     const json& model, const json& real) {
    return report(requests, index, label, fmt::format("model:    {}", dynamo::dump_json(model)),
                  fmt::format("\n  dynalite: {}", dynamo::dump_json(real)));
  }

  runtime::BlockingDynamoHttpClient client_;
};

class DynamoDifferential : public ::testing::Test {
 protected:
  void SetUp() override {
    if (endpoint().empty()) {
      GTEST_FAIL() << "LEASEPROOF_DYNALITE_ENDPOINT is not set. Run\n"
                      "  scripts/dynalite.sh install && export LEASEPROOF_DYNALITE_ENDPOINT=$(scripts/dynalite.sh start)";
    }
  }
  static void TearDownTestSuite() {
    std::string skips;
    for (const auto& [reason, count] : totals().skipped) skips += fmt::format(", {} skipped: {}", count, reason);
    std::string outcomes;
    for (const auto& [outcome, count] : totals().outcomes) outcomes += fmt::format(" {}={}", outcome, count);
    fmt::print("differential: {} sequences, {} requests compared{}\n  outcomes compared:{}\n", totals().sequences,
               totals().compared, skips, outcomes);
  }
};

std::vector<ReplayRequest> load_corpus(const std::string& name) {
  std::ifstream in{std::string{LEASEPROOF_CORPUS_DIR} + "/" + name};
  std::stringstream text;
  text << in.rdbuf();
  ReplayParse parse = parse_replay(text.str());
  EXPECT_EQ(parse.error, "") << name;
  return parse.requests;
}

std::vector<std::string> created_tables(const std::vector<ReplayRequest>& requests) {
  std::vector<std::string> tables;
  for (const ReplayRequest& r : requests) {
    if (r.target.ends_with(".CreateTable")) tables.push_back(r.body.value("TableName", ""));
  }
  return tables;
}

class DynamoDifferentialCorpus : public DynamoDifferential, public ::testing::WithParamInterface<const char*> {};

TEST_P(DynamoDifferentialCorpus, ModelAnswersLikeDynalite) {
  std::vector<ReplayRequest> requests = load_corpus(GetParam());
  ASSERT_GT(requests.size(), 10u);
  Differential differential{endpoint()};
  differential.drop_tables(created_tables(requests));
  const uint64_t compared_before = totals().compared;
  EXPECT_EQ(differential.run(requests, std::string{GetParam()}.substr(0, std::string{GetParam()}.find('.'))), "");
  EXPECT_GT(totals().compared, compared_before);
}

INSTANTIATE_TEST_SUITE_P(Corpus, DynamoDifferentialCorpus,
                         ::testing::Values("leases.jsonl", "registry.jsonl", "registry-core.jsonl", "malformed.jsonl",
                                           "return-values.jsonl", "reserved-words.jsonl"));

// ---- generated sequences ------------------------------------------------------
// Each step is 8 random bytes that choose an operation and its parameters from
// small domains (few keys, few owners, few numbers), so that conditions both
// pass and fail, items collide, and queries page. rapidcheck shrinks a failing
// sequence to fewer and simpler steps.

using Step = std::array<uint8_t, 8>;

json S(const std::string& v) { return json{{"S", v}}; }
json N(const std::string& v) { return json{{"N", v}}; }

const char* pick(uint8_t b, std::initializer_list<const char*> options) {
  return options.begin()[b % options.size()];
}

class SequenceBuilder {
 public:
  explicit SequenceBuilder(std::string prefix) : leases_(prefix + "-leases"), events_(prefix + "-events") {}

  std::vector<ReplayRequest> build(const std::vector<Step>& steps) {
    add("CreateTable", create_leases());
    add("CreateTable", create_events());
    for (const Step& s : steps) add_step(s);
    return std::move(requests_);
  }

 private:
  std::string key(uint8_t b) const { return pick(b, {"CONN#1", "CONN#2", "CONN#3", "CONN#4"}); }
  static std::string owner(uint8_t b) { return pick(b, {"w1", "w2", "w3"}); }
  static std::string number(uint8_t b) {
    return pick(b, {"0", "1", "5", "10", "100", "1767225600000", "-3", "2.5", "1767225620000"});
  }
  void add(const std::string& operation, json body) {
    requests_.push_back(ReplayRequest{requests_.size() + 1, kTarget + operation, std::move(body)});
  }

  json create_leases() const {
    json body = json::parse(R"({"BillingMode":"PAY_PER_REQUEST",
      "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"desired_state","AttributeType":"S"},
                              {"AttributeName":"lease_expires_at_ms","AttributeType":"N"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],
      "GlobalSecondaryIndexes":[{"IndexName":"by_state","Projection":{"ProjectionType":"ALL"},
        "KeySchema":[{"AttributeName":"desired_state","KeyType":"HASH"},{"AttributeName":"lease_expires_at_ms","KeyType":"RANGE"}]}]})");
    body["TableName"] = leases_;
    return body;
  }
  json create_events() const {
    json body = json::parse(R"({"BillingMode":"PAY_PER_REQUEST",
      "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"seq","AttributeType":"N"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"seq","KeyType":"RANGE"}]})");
    body["TableName"] = events_;
    return body;
  }

  void add_step(const Step& s) {
    switch (s[0] % 8) {
      case 0: return put_lease(s);
      case 1:
      case 2: return update_lease(s);
      case 3: return delete_lease(s);
      case 4: return get_lease(s);
      case 5: return query_state(s);
      case 6: return put_event(s);
      case 7: return s[1] % 2 == 0 ? query_events(s) : batch_write(s);
    }
  }

  void put_lease(const Step& s) {
    json item{{"pk", S(key(s[1]))}, {"desired_state", S(pick(s[2], {"STARTED", "STOPPED"}))},
              {"lease_epoch", N(number(s[3] % 4))}, {"last_seq", N(number(s[4]))}};
    if (s[5] % 3 != 0) item["lease_expires_at_ms"] = N(number(s[5]));
    if (s[6] % 2 == 0) item["lease_owner"] = S(owner(s[6]));
    json body{{"TableName", leases_}, {"Item", item}, {"ReturnValues", pick(s[7], {"NONE", "ALL_OLD"})}};
    switch (s[7] % 4) {
      case 1: body["ConditionExpression"] = "attribute_not_exists(pk)"; break;
      case 2: body["ConditionExpression"] = "attribute_exists(pk)"; break;
      case 3:
        body["ConditionExpression"] = "lease_epoch < :n";
        body["ExpressionAttributeValues"] = json{{":n", N(number(s[3]))}};
        break;
    }
    add("PutItem", body);
  }

  void update_lease(const Step& s) {
    json body{{"TableName", leases_}, {"Key", json{{"pk", S(key(s[1]))}}},
              {"ReturnValues", pick(s[7], {"NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"})}};
    json values;
    switch (s[2] % 7) {
      case 0:  // acquire (the core's form)
        body["UpdateExpression"] = "SET lease_owner = :me, lease_expires_at_ms = :exp, lease_epoch = if_not_exists(lease_epoch, :zero) + :one";
        body["ConditionExpression"] = "attribute_not_exists(lease_owner) OR lease_expires_at_ms < :now OR lease_owner = :me";
        values = {{":me", S(owner(s[3]))}, {":exp", N(number(s[4]))}, {":now", N(number(s[5]))}, {":zero", N("0")}, {":one", N("1")}};
        break;
      case 1:  // renew
        body["UpdateExpression"] = "SET lease_expires_at_ms = :exp ADD lease_counter :one";
        body["ConditionExpression"] = "lease_owner = :me AND lease_epoch = :epoch";
        values = {{":me", S(owner(s[3]))}, {":epoch", N(number(s[4] % 4))}, {":exp", N(number(s[5]))}, {":one", N("1")}};
        break;
      case 2:  // release
        body["UpdateExpression"] = "SET lease_expires_at_ms = :zero REMOVE lease_owner";
        body["ConditionExpression"] = "lease_owner = :me";
        values = {{":me", S(owner(s[3]))}, {":zero", N("0")}};
        break;
      case 3:  // checkpoint
        body["UpdateExpression"] = "SET last_seq = :s";
        body["ConditionExpression"] = "attribute_exists(pk) AND last_seq < :s";
        values = {{":s", N(number(s[4]))}};
        break;
      case 4:
        body["UpdateExpression"] = "SET #d = :d";
        body["ExpressionAttributeNames"] = json{{"#d", "desired_state"}};
        values = {{":d", S(pick(s[3], {"STARTED", "STOPPED"}))}};
        break;
      case 5:
        body["UpdateExpression"] = "SET lease_expires_at_ms = lease_expires_at_ms - :n";
        body["ConditionExpression"] = "lease_expires_at_ms BETWEEN :lo AND :hi";
        values = {{":n", N(number(s[3]))}, {":lo", N(number(s[4]))}, {":hi", N(number(s[5]))}};
        break;
      case 6:
        body["UpdateExpression"] = "REMOVE lease_owner, ws_url SET ws_url = :u";
        values = {{":u", S("wss://hub")}};
        break;
    }
    body["ExpressionAttributeValues"] = values;
    add("UpdateItem", body);
  }

  void delete_lease(const Step& s) {
    json body{{"TableName", leases_}, {"Key", json{{"pk", S(key(s[1]))}}}, {"ReturnValues", pick(s[2], {"NONE", "ALL_OLD"})}};
    if (s[3] % 2 == 0) {
      body["ConditionExpression"] = "NOT (lease_owner = :me) OR attribute_not_exists(lease_owner)";
      body["ExpressionAttributeValues"] = json{{":me", S(owner(s[4]))}};
    }
    add("DeleteItem", body);
  }

  void get_lease(const Step& s) {
    json body{{"TableName", leases_}, {"Key", json{{"pk", S(key(s[1]))}}}, {"ConsistentRead", s[2] % 2 == 0}};
    if (s[3] % 2 == 0) body["ProjectionExpression"] = "lease_owner, lease_epoch, pk";
    add("GetItem", body);
  }

  void query_state(const Step& s) {
    json body{{"TableName", leases_}, {"IndexName", "by_state"}, {"ScanIndexForward", s[6] % 2 == 0}};
    json values{{":st", S(pick(s[1], {"STARTED", "STOPPED"}))}};
    switch (s[2] % 4) {
      case 0: body["KeyConditionExpression"] = "desired_state = :st"; break;
      case 1:
        body["KeyConditionExpression"] = "desired_state = :st AND lease_expires_at_ms < :now";
        values[":now"] = N(number(s[3]));
        break;
      case 2:
        body["KeyConditionExpression"] = "desired_state = :st AND lease_expires_at_ms BETWEEN :a AND :b";
        values[":a"] = N(number(s[3]));
        values[":b"] = N(number(s[4]));
        break;
      case 3:
        body["KeyConditionExpression"] = "desired_state = :st AND lease_expires_at_ms >= :a";
        values[":a"] = N(number(s[3]));
        break;
    }
    if (s[5] % 3 == 0) body["Limit"] = 1 + s[5] % 3;
    if (s[7] % 4 == 0) body["Select"] = "COUNT";
    if (s[7] % 4 == 1) {
      body["FilterExpression"] = "attribute_exists(lease_owner)";
    }
    body["ExpressionAttributeValues"] = values;
    add_paged_query(body);
  }

  void put_event(const Step& s) {
    add("PutItem", json{{"TableName", events_},
                        {"Item", json{{"pk", S(key(s[1]))}, {"seq", N(number(s[2]))}, {"data", S(std::string(s[3] % 5, 'x'))}}}});
  }

  void query_events(const Step& s) {
    json body{{"TableName", events_}, {"KeyConditionExpression", "pk = :p AND seq > :n"},
              {"ExpressionAttributeValues", json{{":p", S(key(s[2]))}, {":n", N(number(s[3]))}}},
              {"ScanIndexForward", s[4] % 2 == 0}, {"ConsistentRead", s[6] % 2 == 0}};
    if (s[5] % 2 == 0) body["Limit"] = 1 + s[5] % 2;
    if (s[7] % 3 == 0) body["ProjectionExpression"] = "seq";
    add_paged_query(body);
  }

  void batch_write(const Step& s) {
    json writes = json::array();
    std::set<std::string> seen;
    for (int i = 2; i < 7; ++i) {
      const std::string k = key(s[i]);
      if (!seen.insert(k).second) continue;
      if (s[i] % 2 == 0) {
        writes.push_back(json{{"DeleteRequest", json{{"Key", json{{"pk", S(k)}, {"seq", N(number(s[7]))}}}}}});
      } else {
        writes.push_back(json{{"PutRequest", json{{"Item", json{{"pk", S(k)}, {"seq", N(number(s[7]))}}}}}});
      }
    }
    add("BatchWriteItem", json{{"RequestItems", json{{events_, writes}}}});
  }

  // The runner follows LastEvaluatedKey with further pages (Differential::run).
  void add_paged_query(json body) { add("Query", std::move(body)); }

  std::string leases_;
  std::string events_;
  std::vector<ReplayRequest> requests_;
};

TEST_F(DynamoDifferential, GeneratedSequencesAgree) {
  // 500 sequences unless RC_PARAMS says otherwise.
  setenv("RC_PARAMS", "max_success=500", /*overwrite=*/0);
  Differential differential{endpoint()};
  const uint64_t sequences_before = totals().sequences;
  uint64_t case_number = 0;
  const std::string run_id = fmt::format("g{}", getpid());
  const bool passed = rc::check("model and dynalite agree on generated sequences", [&] {
    const auto steps = *rc::gen::resize(30, rc::gen::container<std::vector<Step>>(rc::gen::arbitrary<Step>()));
    const std::string prefix = fmt::format("{}-{}", run_id, ++case_number);
    const std::string failure = differential.run(SequenceBuilder{prefix}.build(steps), prefix);
    RC_ASSERT(failure == std::string{});
  });
  EXPECT_TRUE(passed);
  EXPECT_GE(totals().sequences - sequences_before, 500u);
  // Not vacuous: the sequences hit refused conditions and invalid requests too.
  EXPECT_GT(totals().outcomes["ConditionalCheckFailedException"], 0u);
  EXPECT_GT(totals().outcomes["ok"], 0u);
}

}  // namespace
}  // namespace leaseproof::models
