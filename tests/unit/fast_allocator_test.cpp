// The small-object allocator that replaces operator new and delete in the
// simulation executables (base/fast_allocator.cpp). This test executable
// links it, so every allocation here, gtest's included, goes through it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/fast_allocator.hpp"
#include "sim/prng.hpp"

namespace leaseproof {
namespace {

using fast_allocator::owns;

// Each test uses its own size classes where reuse is asserted, so blocks that
// gtest or an earlier test freed cannot be the ones handed out.

TEST(FastAllocator, SmallBlocksComeFromTheFreeListsAlignedAndWritable) {
  for (std::size_t size : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{200},
                           std::size_t{512}}) {
    void* block = ::operator new(size);
    EXPECT_TRUE(owns(block)) << size;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block) % __STDCPP_DEFAULT_NEW_ALIGNMENT__, 0u) << size;
    std::memset(block, 0xAB, size);
    ::operator delete(block);
  }
}

TEST(FastAllocator, LargeBlocksGoToMalloc) {
  void* block = ::operator new(513);
  EXPECT_FALSE(owns(block));
  std::memset(block, 0xCD, 513);
  ::operator delete(block);
  auto big = std::make_unique<char[]>(1 << 20);
  EXPECT_FALSE(owns(big.get()));
}

TEST(FastAllocator, AFreedBlockIsTheNextOneOfItsClassAndOnlyOfItsClass) {
  void* a = ::operator new(100);  // class of 97..112 bytes
  void* b = ::operator new(120);  // class of 113..128 bytes
  const auto a_address = reinterpret_cast<std::uintptr_t>(a);
  const auto b_address = reinterpret_cast<std::uintptr_t>(b);
  ::operator delete(a);
  ::operator delete(b, 120);
  void* b_again = ::operator new(128);  // same class as 120, after a sized delete
  void* a_again = ::operator new(97);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b_again), b_address);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a_again), a_address);
  ::operator delete(a_again);
  ::operator delete(b_again);
}

TEST(FastAllocator, ZeroBytesGiveDistinctBlocks) {
  void* a = ::operator new(0);
  void* b = ::operator new(0);
  EXPECT_NE(a, b);
  EXPECT_TRUE(owns(a));
  ::operator delete(a);
  ::operator delete(b);
}

TEST(FastAllocator, ArrayNothrowAndAlignedFormsWork) {
  auto* array = new int[30];  // 120 bytes
  EXPECT_TRUE(owns(array));
  std::fill(array, array + 30, 7);
  delete[] array;
  auto* nothrow = new (std::nothrow) std::string(40, 'x');
  ASSERT_NE(nothrow, nullptr);
  EXPECT_EQ(*nothrow, std::string(40, 'x'));
  delete nothrow;
  struct alignas(64) Wide {
    char bytes[64];
  };
  auto* wide = new Wide{};  // the default aligned form, through aligned_alloc
  EXPECT_FALSE(owns(wide));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(wide) % 64, 0u);
  delete wide;
}

TEST(FastAllocator, ABlockFreedOnAnotherThreadJoinsThatThreadsList) {
  void* block = ::operator new(300);  // class of 289..304 bytes
  const auto address = reinterpret_cast<std::uintptr_t>(block);
  std::uintptr_t again = 0;
  std::thread other{[&] {
    ::operator delete(block);
    void* next = ::operator new(290);
    again = reinterpret_cast<std::uintptr_t>(next);
    ::operator delete(next);
  }};
  other.join();
  EXPECT_EQ(again, address);
}

TEST(FastAllocator, AnExitingThreadHandsItsBlocksToTheNextThreadThatNeedsThem) {
  constexpr std::size_t kSize = 496;  // the class of 481..496 bytes, used by nothing else here
  std::set<std::uintptr_t> freed;
  std::thread first{[&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) blocks.push_back(::operator new(kSize));
    for (void* block : blocks) freed.insert(reinterpret_cast<std::uintptr_t>(block));
    for (void* block : blocks) ::operator delete(block);
  }};
  first.join();
  std::uintptr_t reused = 0;
  std::thread second{[&] {
    void* block = ::operator new(kSize);
    reused = reinterpret_cast<std::uintptr_t>(block);
    ::operator delete(block);
  }};
  second.join();
  EXPECT_TRUE(freed.contains(reused));
}

// Random allocations and frees of every size: each live block keeps the
// pattern written into it, so no two live blocks overlap and no free list
// hands out a block still in use.
TEST(FastAllocator, LiveBlocksNeverOverlapUnderRandomUse) {
  sim::Prng prng{20261130};
  struct Live {
    unsigned char* bytes;
    std::size_t size;
    unsigned char pattern;
  };
  std::vector<Live> live;
  uint64_t checked = 0;
  for (int step = 0; step < 200'000; ++step) {
    if (live.empty() || prng.below(100) < 55) {
      const std::size_t size = prng.below(600);
      auto* bytes = static_cast<unsigned char*>(::operator new(size));
      const auto pattern = static_cast<unsigned char>(prng.below(256));
      std::memset(bytes, pattern, size);
      live.push_back({bytes, size, pattern});
    } else {
      const std::size_t at = prng.below(live.size());
      const Live block = live[at];
      for (std::size_t i = 0; i < block.size; ++i) ASSERT_EQ(block.bytes[i], block.pattern) << "step " << step;
      ++checked;
      live[at] = live.back();
      live.pop_back();
      ::operator delete(block.bytes, block.size);
    }
  }
  for (const Live& block : live) ::operator delete(block.bytes);
  EXPECT_GT(checked, 50'000u);  // the check ran
}

}  // namespace
}  // namespace leaseproof
