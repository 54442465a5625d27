#include "base/inline_function.hpp"

#include <array>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace leaseproof {
namespace {

TEST(InlineFunction, CallsSmallAndLargeCallables) {
  int calls = 0;
  InlineFunction<int(int)> small = [&calls](int x) { return ++calls + x; };
  EXPECT_EQ(small(10), 11);
  std::array<int, 64> big{};  // 256 bytes: kept on the heap
  big[63] = 5;
  InlineFunction<int(int)> large = [big, &calls](int x) { return ++calls + x + big[63]; };
  EXPECT_EQ(large(10), 17);
  EXPECT_EQ(calls, 2);
}

TEST(InlineFunction, MovesOwnershipAndDestroysExactlyOnce) {
  auto counter = std::make_shared<int>(0);
  {
    InlineFunction<void()> a = [counter] { ++*counter; };
    EXPECT_EQ(counter.use_count(), 2);
    InlineFunction<void()> b = std::move(a);
    EXPECT_FALSE(a);  // NOLINT: testing the moved-from state
    EXPECT_TRUE(b);
    EXPECT_EQ(counter.use_count(), 2);
    b();
    InlineFunction<void()> c;
    c = std::move(b);
    c();
    std::array<char, 200> pad{};
    InlineFunction<void()> heap = [counter, pad] { *counter += 10 + pad[0]; };
    InlineFunction<void()> moved = std::move(heap);
    moved();
    EXPECT_EQ(counter.use_count(), 3);
    c = nullptr;
    EXPECT_EQ(counter.use_count(), 2);
  }
  EXPECT_EQ(*counter, 12);
  EXPECT_EQ(counter.use_count(), 1);
}

TEST(InlineFunction, AnEmptyStdFunctionStaysEmpty) {
  std::function<void()> empty;
  InlineFunction<void()> f = empty;
  EXPECT_TRUE(f == nullptr);
  std::function<void()> full = [] {};
  InlineFunction<void()> g = full;
  EXPECT_FALSE(g == nullptr);
}

TEST(InlineFunction, HoldsMoveOnlyCallables) {
  auto owned = std::make_unique<std::string>("kept");
  InlineFunction<std::string()> f = [owned = std::move(owned)] { return *owned; };
  InlineFunction<std::string()> g = std::move(f);
  EXPECT_EQ(g(), "kept");
}

}  // namespace
}  // namespace leaseproof
