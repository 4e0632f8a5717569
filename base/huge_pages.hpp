#pragma once
// An allocator for the large arrays the engine walks at random (task tables,
// edges, per-task state): blocks of 2 MiB and more are aligned to 2 MiB and
// marked for transparent huge pages, which removes most TLB misses; a freed one
// is kept, and the next large requests that fit take its pages front first
// (huge_pages.cpp: they are already faulted in). Smaller blocks come from the
// ordinary heap. Contents and behaviour are unchanged.
#include <cstddef>
#include <new>
#include <vector>

namespace meshsim {

void* allocate_large(std::size_t bytes);
void deallocate_large(void* p, std::size_t bytes) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_large(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { deallocate_large(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using BigVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace meshsim
