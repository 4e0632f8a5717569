#include "base/tick.hpp"

#include <cmath>
#include <cstdio>

#include "base/error.hpp"

namespace meshsim {

Tick serialization_time(std::uint64_t bytes, std::uint64_t bandwidth_bytes_per_s) {
  MESHSIM_ASSERT(bandwidth_bytes_per_s > 0, "link bandwidth must be positive");
  constexpr std::uint64_t kPsPerS = 1'000'000'000'000u;
  if (bytes <= ~std::uint64_t{0} / kPsPerS) {  // fast path: no 128-bit division
    const std::uint64_t numerator = bytes * kPsPerS;
    return Tick::from_ps(static_cast<std::int64_t>((numerator + bandwidth_bytes_per_s - 1) / bandwidth_bytes_per_s));
  }
  using U128 = unsigned __int128;
  const U128 numerator = static_cast<U128>(bytes) * 1'000'000'000'000u;
  const U128 ps = (numerator + bandwidth_bytes_per_s - 1) / bandwidth_bytes_per_s;
  const U128 cap = static_cast<U128>(kMaxTick.ps());
  return Tick::from_ps(static_cast<std::int64_t>(ps > cap ? cap : ps));
}

Tick tick_from_seconds(double seconds) {
  MESHSIM_ASSERT(std::isfinite(seconds) && seconds >= 0.0 && seconds <= kMaxTick.seconds(),
                 "time out of range");
  return Tick::from_ps(std::llround(seconds * 1e12));
}

std::string format_us(Tick t) {
  const std::int64_t ps = t.ps();
  const std::int64_t whole = ps / 1'000'000;
  const std::int64_t frac = (ps < 0 ? -ps : ps) % 1'000'000;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%lld.%06lld", (ps < 0 && whole == 0) ? "-" : "",
                static_cast<long long>(whole), static_cast<long long>(frac));
  return buf;
}

}  // namespace meshsim
