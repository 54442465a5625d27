#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <sstream>
#include <string>

#include <leaseproof/sim/trace.hpp>

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

}  // namespace
}  // namespace leaseproof::sim
