#pragma once
// The seeded scheduler's event queue: virtual true time in nanoseconds, events
// ordered by (time, insertion sequence), so equal times run in the order they
// were scheduled (FoundationDB's TaskQueue rule). Nothing else decides order:
// no pointer values, no hash order.

#include <cstdint>
#include <functional>
#include <vector>

#include <leaseproof/base/time.hpp>

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
  using Callback = std::function<void()>;

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
  struct HeapEntry {
    int64_t time_ns;
    uint64_t sequence;
    uint32_t slot;
  };
  struct Slot {
    Callback callback;
    uint64_t sequence = 0;
    bool armed = false;
  };
  static bool later(const HeapEntry& a, const HeapEntry& b) {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.sequence > b.sequence;
  }
  void discard_cancelled_top();
  HeapEntry pop();

  Instant now_ = Instant::zero();
  uint64_t next_sequence_ = 1;
  size_t pending_ = 0;
  std::vector<HeapEntry> heap_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  Counters counters_;
};

}  // namespace leaseproof::sim
