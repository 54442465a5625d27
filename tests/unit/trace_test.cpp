#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/trace.hpp"

namespace leaseproof::sim {
namespace {

TraceEvent sample_event() {
  TraceEvent e;
  e.kind = EventKind::send;
  e.true_time = Instant::from_ns(1'000);
  e.node = NodeId{1};
  e.wall = Instant::from_ns(5'000);
  e.monotonic = Instant::from_ns(9'000);
  e.peer = NodeId{2};
  e.id = 17;
  e.value = 64;
  e.label = "kernel.request";
  return e;
}

uint64_t hash_of(const TraceEvent& e) {
  TraceHash hash;
  hash.add_event(e);
  return hash.value();
}

TEST(TraceHash, EveryFieldChangesTheHash) {
  const TraceEvent base = sample_event();
  const uint64_t h = hash_of(base);
  auto changed = [&](auto mutate) {
    TraceEvent e = base;
    mutate(e);
    return hash_of(e);
  };
  EXPECT_NE(h, changed([](TraceEvent& e) { e.kind = EventKind::deliver; }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.true_time = Instant::from_ns(1'001); }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.node = NodeId{3}; }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.wall = Instant::from_ns(5'001); }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.monotonic = Instant::from_ns(9'001); }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.peer = kNoNode; }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.id = 18; }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.value = 65; }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.label = "kernel.requesT"; }));
  EXPECT_NE(h, changed([](TraceEvent& e) { e.detail = "x"; }));
}

TEST(TraceHash, StringBoundariesAreEncoded) {
  TraceHash a;
  a.add_string("ab");
  a.add_string("c");
  TraceHash b;
  b.add_string("a");
  b.add_string("bc");
  EXPECT_NE(a.value(), b.value());
}

// The canonical encoding (docs/trace-format.md): the length, then the bytes
// packed little-endian 8 to a word, the last word zero-padded. Written out
// byte by byte here, as the contract states it.
uint64_t reference_string_hash(const std::string& text) {
  TraceHash hash;
  hash.add_word(text.size());
  uint64_t word = 0;
  size_t filled = 0;
  for (char c : text) {
    word |= static_cast<uint64_t>(static_cast<uint8_t>(c)) << (8 * filled);
    if (++filled == 8) {
      hash.add_word(word);
      word = 0;
      filled = 0;
    }
  }
  if (filled != 0) hash.add_word(word);
  return hash.value();
}

RC_GTEST_PROP(TraceHash, StringsFoldAsTheCanonicalEncoding, (const std::string& text)) {
  TraceHash hash;
  hash.add_string(text);
  RC_ASSERT(hash.value() == reference_string_hash(text));
}

TEST(TraceHash, StringsOfEveryTailLengthFoldAsTheCanonicalEncoding) {
  std::string text;
  for (int length = 0; length <= 24; ++length) {
    TraceHash hash;
    hash.add_string(text);
    EXPECT_EQ(hash.value(), reference_string_hash(text)) << "length " << length;
    text.push_back(static_cast<char>(0xF0 + length % 16));
  }
}

TEST(Trace, WritesOneJsonLinePerEventAndKeepsDigests) {
  Trace trace;
  trace.set_node_name(NodeId{1}, "client-0");
  trace.set_node_name(NodeId{2}, "server-\"0\"");
  std::ostringstream out;
  trace.set_jsonl_output(&out);
  trace.keep_digests(true);
  trace.record(sample_event());
  TraceEvent world_event;
  world_event.kind = EventKind::partition_start;
  world_event.true_time = Instant::from_ns(2'000);
  trace.record(world_event);
  EXPECT_EQ(out.str(),
            R"({"i":0,"t_ns":1000,"ev":"send","node":"client-0","wall_ns":5000,"mono_ns":9000,"peer":"server-\"0\"","id":17,"value":64,"label":"kernel.request"})"
            "\n"
            R"({"i":1,"t_ns":2000,"ev":"partition_start","node":null})"
            "\n");
  ASSERT_EQ(trace.digests().size(), 2u);
  EXPECT_EQ(trace.digests().back(), trace.hash());
  EXPECT_EQ(trace.count_of(EventKind::send), 1u);
  EXPECT_EQ(format_hash(0xABCULL), "0x0000000000000abc");
}

// What one checker saw, in order: every field, the text, the posted tasks
// and the node names as the checkers know them.
struct Seen {
  std::vector<std::string> lines;
  void event(const Trace& trace, const TraceEvent& e) {
    lines.push_back(fmt::format("{} {} {} {} {} {} {} {} [{}] [{}] {}", static_cast<int>(e.kind), e.true_time.ns(),
                                e.node.value, e.wall.ns(), e.monotonic.ns(), e.peer.value, e.id, e.value, e.label,
                                e.detail, trace.checker_node_name(e.node)));
  }
};

// Feeds a trace enough events to fill more chunks than the checkers' thread
// keeps (so the simulation's side waits for chunks to come back), with text
// of every length, tasks between events and nodes named on the way.
// Fields take extreme values too (times going back, no node, the largest
// ids), labels come as the same text at new addresses and as more distinct
// texts than travel by number, details of every length up to 5,000 bytes.
void feed(Trace& trace, Seen& seen) {
  std::string detail;
  std::string label;
  for (uint32_t i = 0; i < 50'000; ++i) {
    if (i % 997 == 0) trace.set_node_name(NodeId{1 + i / 997}, fmt::format("node-{}", i));
    if (i % 7 == 3) trace.post([&seen, i] { seen.lines.push_back(fmt::format("task {}", i)); });
    TraceEvent e = sample_event();
    e.kind = static_cast<EventKind>(1 + i % 20);
    e.true_time = Instant::from_ns(i % 1000 == 999 ? int64_t{i} - 500 : int64_t{i} * 1'000'003);
    e.node = i % 11 == 0 ? kNoNode : NodeId{1 + i / 997};
    e.wall = i % 11 == 0 ? Instant::zero() : Instant::from_ns(1'767'225'600'000'000'000 + e.true_time.ns() * (1 + i % 3));
    e.monotonic = Instant::from_ns(i % 13 == 0 ? -int64_t{i} : int64_t{i} * 977);
    e.peer = i % 3 == 0 ? kNoNode : NodeId{i % 17};
    e.id = i % 101 == 0 ? UINT64_MAX - i : i;
    e.value = i % 2 == 0 ? -static_cast<int64_t>(i) * 1'000'000'007 : (i % 89 == 0 ? INT64_MIN : int64_t{i});
    detail.assign(i % 977 == 0 ? 5'000 : i % 61, static_cast<char>('a' + i % 26));
    if (i % 5 == 0) {
      e.label = {};
    } else if (i % 5 == 1) {
      label = fmt::format("label-{}", i % 400);  // a few hundred texts, each at this one address
      e.label = label;
    } else {
      e.label = std::string_view{"lease.request"}.substr(0, i % 14);
    }
    e.detail = detail;
    trace.record(e);
  }
}

TEST(Trace, CheckersInTheBackgroundSeeWhatTheySeeInline) {
  Seen inline_seen;
  Trace inline_trace;
  inline_trace.add_checker([&](const TraceEvent& e) { inline_seen.event(inline_trace, e); });
  feed(inline_trace, inline_seen);

  Seen background_seen;
  uint64_t observed = 0;
  Trace background;
  background.add_checker([&](const TraceEvent& e) { background_seen.event(background, e); });
  background.add_observer([&observed](const TraceEvent&) { ++observed; });  // on this thread, at the event
  background.start_background();
  EXPECT_TRUE(background.background());
  feed(background, background_seen);
  EXPECT_EQ(observed, 50'000u);
  background.finish_background();
  EXPECT_FALSE(background.background());

  ASSERT_EQ(background_seen.lines.size(), inline_seen.lines.size());
  EXPECT_EQ(inline_seen.lines.size(), 50'000u + 7'143u);  // events and tasks (i % 7 == 3)
  for (size_t i = 0; i < inline_seen.lines.size(); ++i) {
    ASSERT_EQ(background_seen.lines[i], inline_seen.lines[i]) << "entry " << i;
  }
  EXPECT_EQ(background.hash(), inline_trace.hash());
  EXPECT_EQ(background.event_count(), inline_trace.event_count());
  EXPECT_EQ(background.count_of(EventKind::send), inline_trace.count_of(EventKind::send));
}

TEST(Trace, ATraceWithItsCheckersStillInTheBackgroundFinishesThemWhenDestroyed) {
  uint64_t checked = 0;
  {
    Trace trace;
    trace.add_checker([&checked](const TraceEvent&) { ++checked; });
    trace.start_background();
    for (int i = 0; i < 10'000; ++i) trace.record(sample_event());
  }
  EXPECT_EQ(checked, 10'000u);
}

}  // namespace
}  // namespace leaseproof::sim
