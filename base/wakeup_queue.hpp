#pragma once
// A queue of wakeups that behaves exactly like a std::set ordered by `Less`
// which is only ever drained from its least element: push() inserts (an entry
// equal to one already queued adds nothing), top() is the least entry, pop()
// removes it. It is kept as a 4-ary min-heap in one vector (half the depth of
// a binary heap; a node's children are adjacent): pushes of entries due later
// than most (the common case) do not move, and nothing is allocated per
// entry. Equal entries may sit in the heap more than once; pop() removes every
// copy of the least one, so what is observed through top() and pop() is the
// set's sequence, entry for entry. `Less` must be a strict weak ordering.

#include <cstddef>
#include <utility>
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
    std::size_t hole = heap_.size();
    heap_.push_back(value);
    while (hole > 0) {
      const std::size_t parent = (hole - 1) / kArity;
      if (!less(value, heap_[parent])) break;
      heap_[hole] = std::move(heap_[parent]);
      hole = parent;
    }
    heap_[hole] = value;
  }

  // Removes the least entry and every copy of it.
  void pop() {
    // Moved out, not copied: pop_one() fills the root's hole without reading it.
    const T least = std::move(heap_.front());
    do {
      pop_one();
    } while (!heap_.empty() && !less(least, heap_.front()));
  }

  void clear() noexcept { heap_.clear(); }

  // Every held entry (copies included), in no particular order.
  auto begin() const noexcept { return heap_.begin(); }
  auto end() const noexcept { return heap_.end(); }

 private:
  static constexpr std::size_t kArity = 4;
  static bool less(const T& a, const T& b) { return Less{}(a, b); }

  // Moves the last entry into the root's hole and sifts it down.
  void pop_one() {
    T last = std::move(heap_.back());
    heap_.pop_back();
    const std::size_t size = heap_.size();
    if (size == 0) return;
    std::size_t hole = 0;
    for (;;) {
      const std::size_t first = hole * kArity + 1;
      if (first >= size) break;
      const std::size_t end = first + kArity < size ? first + kArity : size;
      std::size_t best = first;
      for (std::size_t child = first + 1; child < end; ++child) {
        if (less(heap_[child], heap_[best])) best = child;
      }
      if (!less(heap_[best], last)) break;
      heap_[hole] = std::move(heap_[best]);
      hole = best;
    }
    heap_[hole] = std::move(last);
  }

  std::vector<T> heap_;
};

}  // namespace leaseproof
