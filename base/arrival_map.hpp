#pragma once
// A map from strings to values whose entries are forgotten in their order of
// arrival: the simulated DynamoDB's idempotency tokens (kept ten minutes, and
// a streaming fleet sets hundreds of thousands of them), looked up once per
// transaction and almost never found.
//
// put() sets a key's value and queues its arrival (arrivals come in time
// order, or wait behind later ones); forget_while() takes arrivals from the
// front while they are due, and an arrival forgets its key if it is the
// arrival of the key's latest put. find() sees a key until then.
//
// Why not std::unordered_map: a lookup there loads a bucket, then the node it
// points to, then (when the hash code is kept) the end of that node; each a
// cache miss in a table of this size, and forgetting a key finds it again.
// Here a lookup probes an array of (hash, entry) pairs, usually one cache
// line, and compares a key's text only when the full 64-bit hashes agree; an
// arrival names its entry, so forgetting needs no lookup by text. Entries
// live in one vector and are reused (with their strings' buffers) once
// forgotten, so a steady state allocates nothing. Nothing is ever walked in
// hash order: what a caller observes does not depend on the hash.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/assert.hpp"
#include "base/lex_compare.hpp"
#include "base/time.hpp"

namespace leaseproof {

template <typename Value>
class ArrivalMap {
 public:
  struct Entry {
    std::string key;
    Value value{};
    Instant at;  // the latest arrival
    uint64_t hash = 0;
    uint64_t put = 0;  // the number of the latest put: only its arrival forgets the key
    bool live = false;
  };

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // The entry of `key`, or null.
  const Entry* find(std::string_view key) const {
    if (size_ == 0) return nullptr;
    const uint64_t hash = hash_text(key);
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.entry == kEmpty) return nullptr;
      if (slot.hash == hash && entries_[slot.entry].key == key) return &entries_[slot.entry];
    }
  }

  // Sets `key` to `value`, arriving at `at`. Arrivals are forgotten in the
  // order they were put (a queue): one put with an earlier time than the one
  // before waits behind it.
  void put(std::string_view key, Value value, Instant at) {
    if ((size_ + 1) * kLoadDenominator > slots_.size() * kLoadNumerator) grow();
    const uint64_t hash = hash_text(key);
    std::size_t i = hash & mask_;
    for (;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.entry == kEmpty) break;
      if (slot.hash == hash && entries_[slot.entry].key == key) {
        Entry& entry = entries_[slot.entry];
        entry.value = std::move(value);
        entry.at = at;
        entry.put = ++puts_;
        arrivals_.push_back(Arrival{at, slot.entry, entry.put});
        return;
      }
    }
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      LP_ASSERT(entries_.size() < kEmpty);
      index = static_cast<uint32_t>(entries_.size());
      entries_.emplace_back();
    }
    Entry& entry = entries_[index];
    entry.key.assign(key);  // a reused entry's buffer, when it is large enough
    entry.value = std::move(value);
    entry.at = at;
    entry.hash = hash;
    entry.put = ++puts_;
    entry.live = true;
    slots_[i] = Slot{hash, index};
    ++size_;
    arrivals_.push_back(Arrival{at, index, entry.put});
  }

  // Takes arrivals from the front while `due(arrival time)` holds: a key goes
  // with the arrival of its latest put (an earlier one does nothing).
  template <typename Due>
  void forget_while(Due due) {
    while (!arrivals_.empty() && due(arrivals_.front().at)) {
      const Arrival arrival = arrivals_.front();
      arrivals_.pop_front();
      Entry& entry = entries_[arrival.entry];
      // Superseded by a later put of the key, or left by a key since
      // forgotten (whose entry may hold another key now): nothing to do.
      if (!entry.live || entry.put != arrival.put) continue;
      erase_slot_of(arrival.entry);
      entry.live = false;
      free_.push_back(arrival.entry);
      --size_;
    }
  }

 private:
  static constexpr uint32_t kEmpty = std::numeric_limits<uint32_t>::max();
  // Linear probing stays short up to a load of about 0.7.
  static constexpr std::size_t kLoadNumerator = 7;
  static constexpr std::size_t kLoadDenominator = 10;
  struct Slot {
    uint64_t hash = 0;
    uint32_t entry = kEmpty;
  };
  struct Arrival {
    Instant at;
    uint32_t entry;
    uint64_t put;  // which put: numbers are never reused
  };

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.entry == kEmpty) continue;
      std::size_t i = slot.hash & mask_;
      while (slots_[i].entry != kEmpty) i = (i + 1) & mask_;
      slots_[i] = slot;
    }
  }

  // Removes the entry's slot and closes the gap (backward-shift deletion): a
  // later slot of the same probe run moves up unless its home position lies
  // after the gap (cyclically), where a lookup would stop before reaching it.
  void erase_slot_of(uint32_t index) {
    std::size_t gap = entries_[index].hash & mask_;
    while (slots_[gap].entry != index) gap = (gap + 1) & mask_;
    for (std::size_t next = (gap + 1) & mask_; slots_[next].entry != kEmpty; next = (next + 1) & mask_) {
      const std::size_t home = slots_[next].hash & mask_;
      // Distances from home, modulo the table: the slot may move into the gap
      // when the gap is no farther from its home than the slot is.
      if (((gap - home) & mask_) < ((next - home) & mask_)) {
        slots_[gap] = slots_[next];
        gap = next;
      }
    }
    slots_[gap] = Slot{};
  }

  std::vector<Slot> slots_;  // a power of two in size, or empty
  std::size_t mask_ = 0;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;  // entries forgotten, for reuse
  std::deque<Arrival> arrivals_;
  uint64_t puts_ = 0;
  std::size_t size_ = 0;
};

}  // namespace leaseproof
