#include <leaseproof/sim/scheduler.hpp>

#include <algorithm>

#include <leaseproof/base/assert.hpp>

namespace leaseproof::sim {

TimerId Scheduler::at(Instant when, Callback callback) {
  LP_ASSERT_GE(when, now_);
  LP_ASSERT(callback != nullptr);
  uint32_t slot_index;
  if (!free_slots_.empty()) {
    slot_index = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot_index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  const uint64_t sequence = next_sequence_++;
  Slot& slot = slots_[slot_index];
  LP_ASSERT(!slot.armed);
  slot.callback = std::move(callback);
  slot.sequence = sequence;
  slot.armed = true;
  heap_.push_back(HeapEntry{when.ns(), sequence, slot_index});
  std::push_heap(heap_.begin(), heap_.end(), later);
  ++pending_;
  ++counters_.scheduled;
  return TimerId{slot_index, sequence};
}

bool Scheduler::cancel(TimerId id) {
  if (!id.valid() || id.slot >= slots_.size()) return false;
  Slot& slot = slots_[id.slot];
  if (!slot.armed || slot.sequence != id.sequence) return false;
  // The heap entry stays and is skipped when it surfaces; the slot is only
  // reused after that, so a stale entry can never match a new sequence.
  slot.armed = false;
  slot.callback = nullptr;
  --pending_;
  ++counters_.cancelled;
  return true;
}

Scheduler::HeapEntry Scheduler::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  HeapEntry entry = heap_.back();
  heap_.pop_back();
  return entry;
}

void Scheduler::discard_cancelled_top() {
  while (!heap_.empty()) {
    const HeapEntry& top = heap_.front();
    const Slot& slot = slots_[top.slot];
    if (slot.armed && slot.sequence == top.sequence) return;
    free_slots_.push_back(pop().slot);
  }
}

Instant Scheduler::next_event_time() {
  discard_cancelled_top();
  return heap_.empty() ? Instant::max() : Instant::from_ns(heap_.front().time_ns);
}

bool Scheduler::step() {
  discard_cancelled_top();
  if (heap_.empty()) return false;
  const HeapEntry entry = pop();
  Slot& slot = slots_[entry.slot];
  LP_ASSERT_GE(entry.time_ns, now_.ns());
  now_ = Instant::from_ns(entry.time_ns);
  Callback callback = std::move(slot.callback);
  slot.callback = nullptr;
  slot.armed = false;
  free_slots_.push_back(entry.slot);
  --pending_;
  ++counters_.executed;
  callback();
  return true;
}

uint64_t Scheduler::run_until(Instant deadline) {
  LP_ASSERT_GE(deadline, now_);
  uint64_t ran = 0;
  while (next_event_time() <= deadline) {
    step();
    ++ran;
  }
  now_ = deadline;
  return ran;
}

uint64_t Scheduler::run_until_idle(uint64_t steps_max) {
  uint64_t ran = 0;
  while (ran < steps_max && step()) ++ran;
  return ran;
}

uint64_t Scheduler::run_steps(uint64_t steps) { return run_until_idle(steps); }

}  // namespace leaseproof::sim
