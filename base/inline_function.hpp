#pragma once
// InlineFunction<R(Args...), Capacity>: a move-only std::function that keeps
// any callable of up to Capacity bytes inside itself. The simulator schedules
// millions of small closures a run (a timer id and a pointer, an envelope);
// std::function stores anything above 16 bytes on the heap, so each of them
// cost an allocation and a free. A larger callable still works: it is then
// kept on the heap, behind one pointer that lives in the buffer.

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "base/assert.hpp"

namespace leaseproof {

template <typename Signature, std::size_t Capacity = 48>
class InlineFunction;

template <typename R, typename... Args, std::size_t Capacity>
class InlineFunction<R(Args...), Capacity> {
  static_assert(Capacity >= sizeof(void*));

 public:
  InlineFunction() = default;
  InlineFunction(std::nullptr_t) {}  // NOLINT: implicit, like std::function

  template <typename F>
    requires(!std::is_same_v<std::decay_t<F>, InlineFunction> && std::is_invocable_r_v<R, std::decay_t<F>&, Args...>)
  InlineFunction(F&& f) {  // NOLINT: implicit, like std::function
    using T = std::decay_t<F>;
    if constexpr (requires { f == nullptr; }) {
      if (f == nullptr) return;  // an empty std::function or a null function pointer
    }
    if constexpr (fits<T>) {
      ::new (static_cast<void*>(storage_)) T(std::forward<F>(f));
      ops_ = &inline_ops<T>;
    } else {
      ::new (static_cast<void*>(storage_)) T*(new T(std::forward<F>(f)));
      ops_ = &heap_ops<T>;
    }
  }

  InlineFunction(InlineFunction&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) {
      ops_->move(storage_, other.storage_);
      other.ops_ = nullptr;
    }
  }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      reset();
      if (other.ops_ != nullptr) {
        other.ops_->move(storage_, other.storage_);
        ops_ = other.ops_;
        other.ops_ = nullptr;
      }
    }
    return *this;
  }
  InlineFunction& operator=(std::nullptr_t) {
    reset();
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  friend bool operator==(const InlineFunction& f, std::nullptr_t) { return f.ops_ == nullptr; }

  R operator()(Args... args) {
    LP_ASSERT_MSG(ops_ != nullptr, "call of an empty InlineFunction");
    return ops_->invoke(storage_, std::forward<Args>(args)...);
  }

 private:
  struct Ops {
    R (*invoke)(void* storage, Args&&... args);
    void (*move)(void* to, void* from);  // move-constructs at `to`, destroys `from`
    void (*destroy)(void* storage);
  };

  template <typename T>
  static constexpr bool fits = sizeof(T) <= Capacity && alignof(T) <= alignof(std::max_align_t) &&
                               std::is_nothrow_move_constructible_v<T>;

  template <typename T>
  static constexpr Ops inline_ops{
      [](void* s, Args&&... args) -> R { return (*static_cast<T*>(s))(std::forward<Args>(args)...); },
      [](void* to, void* from) {
        ::new (to) T(std::move(*static_cast<T*>(from)));
        static_cast<T*>(from)->~T();
      },
      [](void* s) { static_cast<T*>(s)->~T(); },
  };

  template <typename T>
  static constexpr Ops heap_ops{
      [](void* s, Args&&... args) -> R { return (**static_cast<T**>(s))(std::forward<Args>(args)...); },
      [](void* to, void* from) { ::new (to) T*(*static_cast<T**>(from)); },
      [](void* s) { delete *static_cast<T**>(s); },
  };

  void reset() {
    if (ops_ != nullptr) {
      ops_->destroy(storage_);
      ops_ = nullptr;
    }
  }

  alignas(std::max_align_t) unsigned char storage_[Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace leaseproof
