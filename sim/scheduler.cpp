#include "sim/scheduler.hpp"

#include <algorithm>

#include "base/assert.hpp"

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
    LP_ASSERT_LE(slot_index, kSlotMask);
    slots_.emplace_back();
  }
  const uint64_t sequence = next_sequence_++;
  LP_ASSERT_LE(sequence, kSequenceMax);
  Slot& slot = slots_[slot_index];
  LP_ASSERT(!slot.armed);
  slot.callback = std::move(callback);
  slot.sequence = sequence;
  slot.armed = true;
  push(HeapEntry{when.ns(), (sequence << kSlotBits) | slot_index});
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

void Scheduler::push(HeapEntry entry) {
  size_t hole = heap_.size();
  heap_.push_back(entry);
  while (hole > 0) {
    const size_t parent = (hole - 1) / kArity;
    if (!earlier(entry, heap_[parent])) break;
    heap_[hole] = heap_[parent];
    hole = parent;
  }
  heap_[hole] = entry;
}

Scheduler::HeapEntry Scheduler::pop() {
  LP_ASSERT(!heap_.empty());
  const HeapEntry top = heap_.front();
  const HeapEntry last = heap_.back();
  heap_.pop_back();
  const size_t size = heap_.size();
  if (size == 0) return top;
  size_t hole = 0;
  for (;;) {
    const size_t first_child = hole * kArity + 1;
    size_t best;
    if (first_child + kArity <= size) {
      // Four children, the common case: a tournament of three comparisons
      // (keys are unique, so the earliest is the same whichever way found).
      const HeapEntry* child = &heap_[first_child];
      const size_t left = earlier(child[1], child[0]) ? 1 : 0;
      const size_t right = earlier(child[3], child[2]) ? 3 : 2;
      best = first_child + (earlier(child[right], child[left]) ? right : left);
    } else {
      if (first_child >= size) break;
      best = first_child;
      for (size_t child = first_child + 1; child < size; ++child) {
        if (earlier(heap_[child], heap_[best])) best = child;
      }
    }
    if (!earlier(heap_[best], last)) break;
    heap_[hole] = heap_[best];
    hole = best;
  }
  heap_[hole] = last;
  return top;
}

void Scheduler::discard_cancelled_top() {
  while (!heap_.empty()) {
    const HeapEntry& top = heap_.front();
    const Slot& slot = slots_[top.slot()];
    if (slot.armed && slot.sequence == top.order >> kSlotBits) return;
    free_slots_.push_back(pop().slot());
  }
}

Instant Scheduler::next_event_time() {
  discard_cancelled_top();
  return heap_.empty() ? Instant::max() : Instant::from_ns(heap_.front().time_ns);
}

bool Scheduler::step() { return step_until(Instant::max()); }

bool Scheduler::step_until(Instant deadline) {
  discard_cancelled_top();
  if (heap_.empty() || heap_.front().time_ns > deadline.ns()) return false;
  const HeapEntry entry = pop();
  Slot& slot = slots_[entry.slot()];
  LP_ASSERT_GE(entry.time_ns, now_.ns());
  now_ = Instant::from_ns(entry.time_ns);
  Callback callback = std::move(slot.callback);
  slot.callback = nullptr;
  slot.armed = false;
  free_slots_.push_back(entry.slot());
  --pending_;
  ++counters_.executed;
  callback();
  return true;
}

uint64_t Scheduler::run_until(Instant deadline) {
  LP_ASSERT_GE(deadline, now_);
  uint64_t ran = 0;
  while (step_until(deadline)) ++ran;
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
