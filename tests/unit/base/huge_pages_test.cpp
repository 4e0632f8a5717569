#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>

#include "base/huge_pages.hpp"

using namespace meshsim;

TEST_CASE("allocate_large: a freed large block serves the next request of at least half its size", "[base]") {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  void* a = allocate_large(8 * kMiB);
  std::memset(a, 1, 8 * kMiB);
  deallocate_large(a, 8 * kMiB);
  void* b = allocate_large(5 * kMiB);  // fits, and uses more than half: reused
  CHECK(b == a);
  CHECK(reinterpret_cast<std::uintptr_t>(b) % (2 * kMiB) == 0);  // still aligned to a huge page
  deallocate_large(b, 5 * kMiB);
  // The block is kept as the size it was last given back with (6 MiB, rounded):
  // 2 MiB is less than half of it, so the kept blocks are released and a new one
  // is allocated (the system may hand back the same address: not checked).
  void* c = allocate_large(2 * kMiB);
  REQUIRE(c != nullptr);
  std::memset(c, 2, 2 * kMiB);
  deallocate_large(c, 2 * kMiB);
  void* small = allocate_large(1000);  // small blocks come from the heap
  CHECK(small != nullptr);
  deallocate_large(small, 1000);
  BigVector<std::uint64_t> v(3 * kMiB / 8, 7);
  v.assign(4 * kMiB / 8, 9);
  CHECK(v.back() == 9);
}
