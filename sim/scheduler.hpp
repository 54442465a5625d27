#pragma once
// The seeded scheduler's event queue: virtual true time in nanoseconds, events
// ordered by (time, insertion sequence), so equal times run in the order they
// were scheduled (FoundationDB's TaskQueue rule). Nothing else decides order:
// no pointer values, no hash order.

#include <cstdint>
#include <vector>

#include "base/inline_function.hpp"
#include "base/time.hpp"

namespace leaseproof::sim {

// Identifies one scheduled event. A default TimerId names nothing; cancelling
// it, or an event that already ran, is a harmless no-op that returns false.
struct TimerId {
  uint32_t slot = UINT32_MAX;
  uint64_t sequence = 0;
  bool valid() const { return slot != UINT32_MAX; }
};

class Scheduler {
 public:
  // Events carry small closures; InlineFunction keeps them off the heap.
  using Callback = InlineFunction<void()>;

  struct Counters {
    uint64_t scheduled = 0;
    uint64_t executed = 0;
    uint64_t cancelled = 0;
  };

  Instant now() const { return now_; }

  // Schedules `callback` at `when` (not before now).
  TimerId at(Instant when, Callback callback);
  TimerId after(Duration delay, Callback callback) { return at(now_ + delay, std::move(callback)); }
  bool cancel(TimerId id);

  // Runs the next event, advancing now to its time. False if nothing is pending.
  bool step();
  // The same when the next event is due at or before `deadline`; false (and
  // nothing runs) otherwise. One look at the queue instead of two.
  bool step_until(Instant deadline);
  // Runs every event due at or before `deadline`, then sets now = deadline.
  // Returns the number of events run.
  uint64_t run_until(Instant deadline);
  // Runs until nothing is pending or `steps_max` events ran.
  uint64_t run_until_idle(uint64_t steps_max);
  // Runs at most `steps` events.
  uint64_t run_steps(uint64_t steps);

  bool idle() const { return pending_ == 0; }
  size_t pending() const { return pending_; }
  // Time of the next live event; Instant::max() when idle.
  Instant next_event_time();
  const Counters& counters() const { return counters_; }

 private:
  // 16 bytes, so a node's four children fill one 64-byte cache line. The
  // sequence sits above the slot in `order`, so comparing `order` compares
  // sequences (they are unique); the slot never decides.
  struct HeapEntry {
    int64_t time_ns;
    uint64_t order;  // sequence << kSlotBits | slot
    uint32_t slot() const { return static_cast<uint32_t>(order & kSlotMask); }
  };
  static constexpr int kSlotBits = 24;  // up to 16.7 million pending events
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
  static constexpr uint64_t kSequenceMax = (uint64_t{1} << (64 - kSlotBits)) - 1;  // 1.1e12 events a run
  struct Slot {
    Callback callback;
    uint64_t sequence = 0;
    bool armed = false;
  };
  static bool earlier(const HeapEntry& a, const HeapEntry& b) {
    return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.order < b.order;
  }
  // A 4-ary min-heap on (time, sequence): half the depth of a binary heap, and
  // a node's four children share a cache line or two.
  static constexpr size_t kArity = 4;
  void push(HeapEntry entry);
  HeapEntry pop();
  void discard_cancelled_top();

  Instant now_ = Instant::zero();
  uint64_t next_sequence_ = 1;
  size_t pending_ = 0;
  std::vector<HeapEntry> heap_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  Counters counters_;
};

}  // namespace leaseproof::sim
