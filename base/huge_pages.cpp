#include "base/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace meshsim {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t rounded_size(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

// Large blocks are mapped (mmap) in whole huge pages, so that any run of huge
// pages of one can be unmapped or handed out on its own. Freed blocks are kept
// for the next large allocations. A simulation frees the builder's edge list
// just before the executor allocates its per-task arrays, and a sweep runs one
// simulation after another: handing freed pages back reuses pages the process
// has already faulted in (a fault of a 2 MiB page costs a zeroing and a trap; a
// run of 300 MB spent a third of its time there). A request takes the front of
// the smallest kept block it fits and the rest stays kept, so one freed block
// serves several smaller arrays; on a miss every kept block is unmapped first,
// so the process never holds more than its peak so far.
class BlockCache {
 public:
  void* take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t best = blocks_.size();
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].bytes >= bytes && (best == blocks_.size() || blocks_[i].bytes < blocks_[best].bytes)) best = i;
    if (best < blocks_.size()) {
      Block& b = blocks_[best];
      void* p = b.p;
      if (b.bytes == bytes) {
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
      } else {
        b.p = static_cast<char*>(b.p) + bytes;
        b.bytes -= bytes;
      }
      return p;
    }
    for (const Block& b : blocks_) munmap(b.p, b.bytes);
    blocks_.clear();
    return nullptr;
  }
  void give(void* p, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      blocks_.push_back({p, bytes});
    } catch (...) {
      munmap(p, bytes);
    }
  }

 private:
  struct Block {
    void* p;
    std::size_t bytes;  // whole huge pages
  };
  std::mutex mutex_;
  std::vector<Block> blocks_;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: frees may come from static destructors
  return *c;
}

// `rounded` bytes (whole huge pages) at an address aligned to a huge page: map
// one huge page more and unmap the ends.
void* map_aligned(std::size_t rounded) {
  const std::size_t span = rounded + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t tail = start + span - (aligned + rounded);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing but speed
#endif
  return p;
}

}  // namespace

void* allocate_large(std::size_t bytes) {
  if (bytes < kHugePage) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const std::size_t rounded = rounded_size(bytes);
  if (void* p = cache().take(rounded)) return p;
  return map_aligned(rounded);
}

void deallocate_large(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kHugePage) {
    std::free(p);
    return;
  }
  cache().give(p, rounded_size(bytes));
}

}  // namespace meshsim
