#pragma once
// A queue of wakeups that behaves exactly like a std::set ordered by `Less`
// which is only ever drained from its least element: push() inserts (an entry
// equal to one already queued adds nothing), top() is the least entry, pop()
// removes it. It is kept as a binary heap in one vector: pushes of entries due
// later than most (the common case) do not move, and nothing is allocated per
// entry. Equal entries may sit in the heap more than once; pop() removes every
// copy of the least one, so what is observed through top() and pop() is the
// set's sequence, entry for entry. `Less` must be a strict weak ordering.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace leaseproof {

template <typename T, typename Less>
class WakeupQueue {
 public:
  bool empty() const noexcept { return heap_.empty(); }
  // Entries held, counting copies of equal ones: at least the set's size.
  std::size_t size() const noexcept { return heap_.size(); }
  const T& top() const noexcept { return heap_.front(); }

  void push(const T& value) {
    heap_.push_back(value);
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  // Removes the least entry and every copy of it.
  void pop() {
    const T least = heap_.front();
    do {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      heap_.pop_back();
    } while (!heap_.empty() && !Less{}(least, heap_.front()));
  }

  void clear() noexcept { heap_.clear(); }

  // Every held entry (copies included), in no particular order.
  auto begin() const noexcept { return heap_.begin(); }
  auto end() const noexcept { return heap_.end(); }

 private:
  // std::*_heap keep the greatest first; the least must come first here.
  struct Later {
    bool operator()(const T& a, const T& b) const { return Less{}(b, a); }
  };
  std::vector<T> heap_;
};

}  // namespace leaseproof
