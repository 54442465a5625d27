// parse_lease reads a lease item in one pass over its attributes. It must
// answer exactly as looking each attribute up by name does: a missing or
// mistyped attribute reads as empty text or 0, a number that is not a plain
// 64-bit integer reads as 0, and an item without a "CONN#" key is no lease.

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "core/dynamo/attribute_value.hpp"
#include "core/lease/requests.hpp"

namespace leaseproof::lease {
namespace {

using dynamo::AttributeType;
using dynamo::AttributeValue;
using dynamo::Item;

// The lookups by name that parse_lease replaced.
std::string text_of(const Item& item, const char* name) {
  const auto it = item.find(name);
  return it != item.end() && it->second.is(AttributeType::s) ? it->second.text() : std::string{};
}

int64_t integer_of(const Item& item, const char* name) {
  const auto it = item.find(name);
  if (it == item.end() || !it->second.is(AttributeType::n)) return 0;
  const std::string& text = it->second.text();
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc{} && end == text.data() + text.size() ? value : 0;
}

std::optional<LeaseView> reference_parse(const Item& item) {
  const std::string key = text_of(item, "pk");
  if (!key.starts_with("CONN#")) return std::nullopt;
  LeaseView view;
  view.connection = key.substr(5);
  view.desired_state = text_of(item, "desired_state");
  view.owner = text_of(item, "lease_owner");
  view.epoch = integer_of(item, "lease_epoch");
  view.expires_at_ms = integer_of(item, "lease_expires_at_ms");
  view.counter = integer_of(item, "lease_counter");
  view.last_seq = integer_of(item, "last_seq");
  view.stream_epoch = integer_of(item, "stream_epoch");
  view.ws_url = text_of(item, "ws_url");
  return view;
}

// Every name parse_lease reads, names next to them in the order, and one
// that shares a length with several of them.
const std::vector<std::string> kNames = {"pk",           "desired_state", "lease_owner",  "lease_epoch",
                                         "lease_expires_at_ms", "lease_counter", "last_seq", "stream_epoch",
                                         "ws_url",       "reconcile_shard", "lease_ownerX", "pj",
                                         "lease_epocH",  "a"};

rc::Gen<AttributeValue> gen_value() {
  return rc::gen::weightedOneOf<AttributeValue>(
      {{2, rc::gen::map(rc::gen::element<std::string>("CONN#c1", "CONN#", "ROOM#1", "STARTED", "", "worker-1#2",
                                                      "wss://hub/x", "17"),
                        [](std::string text) { return AttributeValue::string(std::move(text)); })},
       {2, rc::gen::map(rc::gen::arbitrary<int64_t>(), [](int64_t n) { return AttributeValue::number(n); })},
       // Numbers that are not plain 64-bit integers: each reads as 0.
       {3, rc::gen::map(rc::gen::element<std::string>("1.5", "1e3", "99999999999999999999", "-0", "0.0"),
                        [](std::string text) { return AttributeValue::number(std::move(text)); })},
       {1, rc::gen::map(rc::gen::arbitrary<bool>(), [](bool b) { return AttributeValue::boolean(b); })},
       {1, rc::gen::just(AttributeValue::null())}});
}

bool same(const std::optional<LeaseView>& a, const std::optional<LeaseView>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->connection == b->connection && a->desired_state == b->desired_state && a->owner == b->owner &&
         a->epoch == b->epoch && a->expires_at_ms == b->expires_at_ms && a->counter == b->counter &&
         a->last_seq == b->last_seq && a->stream_epoch == b->stream_epoch && a->ws_url == b->ws_url;
}

RC_GTEST_PROP(LeaseParse, AnswersAsLookupsByNameDo, ()) {
  Item item;
  // Usually a lease key, so that the other attributes matter.
  if (*rc::gen::inRange(0, 10) < 8) {
    item.emplace("pk", AttributeValue::string("CONN#" + *rc::gen::element<std::string>("c1", "", "c-42")));
  }
  const int attributes = *rc::gen::inRange(0, 12);
  for (int i = 0; i < attributes; ++i) item.insert_or_assign(*rc::gen::elementOf(kNames), *gen_value());
  const std::optional<LeaseView> expected = reference_parse(item);
  const std::optional<LeaseView> parsed = parse_lease(item);
  RC_ASSERT(same(parsed, expected));
  RC_TAG(expected.has_value() ? "lease" : "no lease");
}

TEST(LeaseParse, ReadsEveryFieldOfALeaseItem) {
  const Item item{{"pk", AttributeValue::string("CONN#c7")},
                  {"desired_state", AttributeValue::string("STARTED")},
                  {"lease_owner", AttributeValue::string("worker-2#1")},
                  {"lease_epoch", AttributeValue::number(3)},
                  {"lease_expires_at_ms", AttributeValue::number(1'767'225'620'000)},
                  {"lease_counter", AttributeValue::number(41)},
                  {"last_seq", AttributeValue::number(9)},
                  {"stream_epoch", AttributeValue::number(2)},
                  {"ws_url", AttributeValue::string("wss://hub/c7")},
                  {"reconcile_shard", AttributeValue::string("STARTED#3")}};
  const std::optional<LeaseView> lease = parse_lease(item);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->connection, "c7");
  EXPECT_EQ(lease->desired_state, "STARTED");
  EXPECT_EQ(lease->owner, "worker-2#1");
  EXPECT_EQ(lease->epoch, 3);
  EXPECT_EQ(lease->expires_at_ms, 1'767'225'620'000);
  EXPECT_EQ(lease->counter, 41);
  EXPECT_EQ(lease->last_seq, 9);
  EXPECT_EQ(lease->stream_epoch, 2);
  EXPECT_EQ(lease->ws_url, "wss://hub/c7");
}

}  // namespace
}  // namespace leaseproof::lease
