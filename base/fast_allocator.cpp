// A small-object allocator for the simulator's executables, after
// FoundationDB's FastAllocator: the global operator new and delete of an
// executable that links this file (the leaseproof CLI and the benchmarks, see
// base/CMakeLists.txt) take blocks of up to 512 bytes from per-thread free
// lists, one per 16-byte size class, instead of from malloc.
//
// Why: a simulated run allocates about two blocks per trace event (requests,
// items, envelopes, strings) and frees them soon after; glibc's malloc spent
// about 10% of a swarm run's instructions on that (docs/benchmarks.md, tenth
// session). A free-list pop or push costs a few instructions, takes no lock
// and touches no shared cache line.
//
// How:
// - The blocks live in one region of address space reserved at the first
//   allocation (64 GiB, PROT_NONE: nothing is committed until used; less
//   where that much cannot be had, as under valgrind) and made
//   usable 64 KiB chunk by chunk. Each chunk serves one size class, recorded
//   in a table indexed by chunk, so a delete finds a block's class from its
//   address: no header, and a pointer outside the region goes to free().
// - A block freed on another thread than the one that allocated it joins the
//   freeing thread's list (memory migrates; nothing is shared).
// - A thread that exits hands its lists to a shared pool, which threads draw
//   from before carving new chunks (the shrinker starts threads per round).
// - Memory is never returned to the system: the free lists keep a run's
//   peak, which the next seed on the same thread reuses.
// - Larger blocks, and everything once the region cannot be had or is used
//   up, go to malloc.
//
// Behaviour does not depend on it: no result of a run depends on pointer
// values (DESIGN.md, determinism), and scripts/compare-builds.sh compares
// trace hashes across builds. Sanitizer builds do not link it.

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>

#include "base/fast_allocator.hpp"

namespace leaseproof::fast_allocator {
namespace {

constexpr std::size_t kGranule = 16;  // the default new alignment
constexpr std::size_t kSmallMax = 512;
constexpr std::size_t kClasses = kSmallMax / kGranule;
constexpr std::size_t kChunkShift = 16;
constexpr std::size_t kChunkBytes = std::size_t{1} << kChunkShift;  // 64 KiB
constexpr std::size_t kRegionMax = std::size_t{1} << 36;            // 64 GiB of address space
constexpr std::size_t kRegionMin = std::size_t{1} << 30;            // 1 GiB
constexpr std::size_t kChunks = kRegionMax >> kChunkShift;          // 1 Mi chunks at most

struct Block {
  Block* next;
};

// Trivially destructible and constant-initialized: reaching it costs one
// thread-pointer-relative address, with no initialization guard.
struct ThreadCache {
  Block* free[kClasses];
  char* bump[kClasses];        // the uncarved rest of the class's current chunk
  std::size_t left[kClasses];  // bytes left at bump
  bool registered;             // hands its lists to the pool at thread exit
};
constinit thread_local ThreadCache t_cache{};

constinit std::atomic<char*> g_base{nullptr};
constinit std::atomic<std::size_t> g_region_bytes{0};  // set before g_base
constinit std::atomic<bool> g_unavailable{false};
constinit std::atomic<std::size_t> g_next_chunk{0};
constinit uint8_t g_chunk_class[kChunks]{};  // written before the chunk's first block is handed out
constinit std::mutex g_pool_mutex;
constinit std::atomic<Block*> g_pool[kClasses]{};  // blocks of exited threads; changed under the mutex

std::size_t class_of(std::size_t size) { return size == 0 ? 0 : (size - 1) / kGranule; }
std::size_t class_bytes(std::size_t size_class) { return (size_class + 1) * kGranule; }

char* region() {
  char* base = g_base.load(std::memory_order_acquire);
  if (base != nullptr || g_unavailable.load(std::memory_order_relaxed)) return base;
  static std::once_flag once;
  std::call_once(once, [] {
    for (std::size_t bytes = kRegionMax; bytes >= kRegionMin; bytes /= 2) {
      void* reserved = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (reserved == MAP_FAILED) continue;
      g_region_bytes.store(bytes, std::memory_order_relaxed);
      g_base.store(static_cast<char*>(reserved), std::memory_order_release);
      return;
    }
    g_unavailable.store(true, std::memory_order_relaxed);
  });
  return g_base.load(std::memory_order_acquire);
}

void give_to_pool() {
  ThreadCache& cache = t_cache;
  const std::lock_guard lock{g_pool_mutex};
  for (std::size_t c = 0; c < kClasses; ++c) {
    Block* head = cache.free[c];
    if (head == nullptr) continue;
    Block* pooled = g_pool[c].load(std::memory_order_relaxed);
    if (pooled != nullptr) {
      // Only then is the list's tail needed: a process's last thread (often
      // its only one) exits with millions of free blocks and an empty pool.
      Block* tail = head;
      while (tail->next != nullptr) tail = tail->next;
      tail->next = pooled;
    }
    g_pool[c].store(head, std::memory_order_relaxed);
    cache.free[c] = nullptr;
  }
}

struct ExitHandOver {
  ~ExitHandOver() { give_to_pool(); }
};

void register_thread() {
  static thread_local ExitHandOver hand_over;
  (void)hand_over;
  t_cache.registered = true;
}

// Refills the class's free list from the pool, or its bump range from a new
// chunk. False when neither can be had (the caller falls back to malloc).
bool refill(std::size_t size_class) {
  ThreadCache& cache = t_cache;
  // Without a region no block was ever handed out: nothing is pooled either.
  char* base = region();
  if (base == nullptr) return false;
  if (!cache.registered) register_thread();
  if (g_pool[size_class].load(std::memory_order_relaxed) != nullptr) {  // looked at without the lock
    const std::lock_guard lock{g_pool_mutex};
    if (Block* pooled = g_pool[size_class].exchange(nullptr, std::memory_order_relaxed)) {
      cache.free[size_class] = pooled;
      return true;
    }
  }
  const std::size_t chunk = g_next_chunk.fetch_add(1, std::memory_order_relaxed);
  if (chunk >= (g_region_bytes.load(std::memory_order_relaxed) >> kChunkShift)) return false;
  char* start = base + (chunk << kChunkShift);
  if (mprotect(start, kChunkBytes, PROT_READ | PROT_WRITE) != 0) return false;
  g_chunk_class[chunk] = static_cast<uint8_t>(size_class);
  cache.bump[size_class] = start;
  cache.left[size_class] = kChunkBytes;
  return true;
}

void* allocate_small(std::size_t size_class) {
  ThreadCache& cache = t_cache;
  for (;;) {
    if (Block* block = cache.free[size_class]) {
      cache.free[size_class] = block->next;
      return block;
    }
    const std::size_t bytes = class_bytes(size_class);
    if (cache.left[size_class] >= bytes) {
      char* block = cache.bump[size_class];
      cache.bump[size_class] += bytes;
      cache.left[size_class] -= bytes;
      return block;
    }
    if (!refill(size_class)) return nullptr;
  }
}

void* allocate(std::size_t size) {
  if (size <= kSmallMax) {
    if (void* block = allocate_small(class_of(size))) return block;
  }
  void* block = std::malloc(size == 0 ? 1 : size);
  if (block == nullptr) throw std::bad_alloc{};
  return block;
}

void deallocate(void* pointer) noexcept {
  const char* base = g_base.load(std::memory_order_relaxed);
  const auto offset = reinterpret_cast<std::uintptr_t>(pointer) - reinterpret_cast<std::uintptr_t>(base);
  if (base == nullptr || offset >= g_region_bytes.load(std::memory_order_relaxed)) {
    std::free(pointer);
    return;
  }
  const std::size_t size_class = g_chunk_class[offset >> kChunkShift];
  Block* block = static_cast<Block*>(pointer);
  block->next = t_cache.free[size_class];
  t_cache.free[size_class] = block;
}

}  // namespace

// For tests: whether `pointer` came from the free lists (not from malloc).
bool owns(const void* pointer) {
  const char* base = g_base.load(std::memory_order_acquire);
  const auto offset = reinterpret_cast<std::uintptr_t>(pointer) - reinterpret_cast<std::uintptr_t>(base);
  return base != nullptr && offset < g_region_bytes.load(std::memory_order_relaxed);
}

}  // namespace leaseproof::fast_allocator

// The replaceable global allocation functions ([new.delete]). The nothrow and
// aligned forms keep their defaults, which call these (nothrow) or use
// aligned_alloc and free (aligned): both stay consistent.
void* operator new(std::size_t size) { return leaseproof::fast_allocator::allocate(size); }
void* operator new[](std::size_t size) { return leaseproof::fast_allocator::allocate(size); }
void operator delete(void* pointer) noexcept { leaseproof::fast_allocator::deallocate(pointer); }
void operator delete[](void* pointer) noexcept { leaseproof::fast_allocator::deallocate(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { leaseproof::fast_allocator::deallocate(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { leaseproof::fast_allocator::deallocate(pointer); }
