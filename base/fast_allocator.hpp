#pragma once
// The small-object allocator that replaces the global operator new and delete
// of the executables linking leaseproof::fast_allocator (base/fast_allocator.cpp).

namespace leaseproof::fast_allocator {

// Whether `pointer` was handed out from the allocator's free lists rather than
// by malloc (blocks of up to 512 bytes, while address space lasts).
bool owns(const void* pointer);

}  // namespace leaseproof::fast_allocator
