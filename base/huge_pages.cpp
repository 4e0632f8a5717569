#include "base/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace meshsim {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
}

void* allocate_large(std::size_t bytes) {
  if (bytes < kHugePage) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing but speed
#endif
  return p;
}

void deallocate_large(void* p, std::size_t) noexcept { std::free(p); }

}  // namespace meshsim
