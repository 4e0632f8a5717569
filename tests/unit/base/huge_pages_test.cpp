#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>

#include "base/huge_pages.hpp"

using namespace meshsim;

TEST_CASE("allocate_large: a freed large block serves the next requests that fit, front first", "[base]") {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % (2 * kMiB) == 0; };
  void* a = allocate_large(8 * kMiB);
  REQUIRE(aligned(a));
  std::memset(a, 1, 8 * kMiB);
  deallocate_large(a, 8 * kMiB);
  void* b = allocate_large(5 * kMiB);  // the front 6 MiB (whole huge pages) of the freed block
  CHECK(b == a);
  void* c = allocate_large(2 * kMiB);  // the 2 MiB left of it
  CHECK(c == static_cast<char*>(a) + 6 * kMiB);
  std::memset(b, 2, 5 * kMiB);
  std::memset(c, 3, 2 * kMiB);
  CHECK(static_cast<unsigned char*>(b)[5 * kMiB - 1] == 2);
  CHECK(static_cast<unsigned char*>(c)[0] == 3);
  deallocate_large(c, 2 * kMiB);
  deallocate_large(b, 5 * kMiB);
  // Nothing kept is big enough: the kept pieces are unmapped and a new block is
  // mapped (the system may hand back the same address: not checked).
  void* d = allocate_large(10 * kMiB);
  REQUIRE(d != nullptr);
  CHECK(aligned(d));
  std::memset(d, 4, 10 * kMiB);
  deallocate_large(d, 10 * kMiB);
  void* small = allocate_large(1000);  // small blocks come from the heap
  CHECK(small != nullptr);
  deallocate_large(small, 1000);
  BigVector<std::uint64_t> v(3 * kMiB / 8, 7);
  v.assign(4 * kMiB / 8, 9);
  CHECK(v.back() == 9);
}
