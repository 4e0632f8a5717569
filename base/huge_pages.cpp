#include "base/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace meshsim {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t rounded_size(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

// Large blocks freed and kept for the next large allocation. A simulation frees
// the builder's edge list just before the executor allocates its state, and a
// sweep runs one simulation after another: handing a freed block back reuses
// pages the process has already faulted in (a fault of a 2 MiB page costs a
// zeroing and a trap; a run of 300 MB spent a third of its time there). A block
// is reused for a request of at least half its size; on a miss every kept block
// is released first, so the process never holds more than its peak so far.
class BlockCache {
 public:
  void* take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t best = blocks_.size();
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].bytes >= bytes && blocks_[i].bytes / 2 <= bytes &&
          (best == blocks_.size() || blocks_[i].bytes < blocks_[best].bytes))
        best = i;
    if (best < blocks_.size()) {
      void* p = blocks_[best].p;
      blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
      return p;
    }
    for (const Block& b : blocks_) std::free(b.p);
    blocks_.clear();
    return nullptr;
  }
  void give(void* p, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      blocks_.push_back({p, bytes});
    } catch (...) {
      std::free(p);
    }
  }

 private:
  struct Block {
    void* p;
    std::size_t bytes;  // rounded to huge pages
  };
  std::mutex mutex_;
  std::vector<Block> blocks_;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: frees may come from static destructors
  return *c;
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
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing but speed
#endif
  return p;
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
