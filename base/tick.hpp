#pragma once
// Simulated time: a strong integer type counting picoseconds.
//
// int64 picoseconds reach 9.2e6 s (106 days) of simulated time. Inputs that could
// go beyond kMaxTick are refused when the workload is lowered, so arithmetic on
// Ticks inside the engine never overflows.
#include <compare>
#include <cstdint>
#include <string>

namespace meshsim {

class Tick {
 public:
  constexpr Tick() = default;
  static constexpr Tick from_ps(std::int64_t ps) { return Tick(ps); }
  constexpr std::int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double microseconds() const { return static_cast<double>(ps_) * 1e-6; }

  constexpr auto operator<=>(const Tick&) const = default;
  constexpr Tick operator+(Tick o) const { return Tick(ps_ + o.ps_); }
  constexpr Tick operator-(Tick o) const { return Tick(ps_ - o.ps_); }
  constexpr Tick& operator+=(Tick o) {
    ps_ += o.ps_;
    return *this;
  }

 private:
  constexpr explicit Tick(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

constexpr Tick kZeroTick = Tick::from_ps(0);
// Largest simulated time meshsim accepts: 2^62 ps (~4.6e6 s), half the range of
// int64 so that sums of two in-range times cannot overflow.
constexpr Tick kMaxTick = Tick::from_ps(std::int64_t{1} << 62);

constexpr Tick max(Tick a, Tick b) { return a < b ? b : a; }
constexpr Tick min(Tick a, Tick b) { return a < b ? a : b; }

// Time to push `bytes` through a link of `bandwidth_bytes_per_s` (bytes per second,
// 1e9 not 2^30), rounded up to whole picoseconds. Exact integer arithmetic.
// Saturates at kMaxTick (callers validate sizes before simulating).
Tick serialization_time(std::uint64_t bytes, std::uint64_t bandwidth_bytes_per_s);

// Converts seconds (from user input) to ticks, rounding to the nearest picosecond.
// Precondition: 0 <= seconds <= kMaxTick in seconds.
Tick tick_from_seconds(double seconds);

// "1234.567890" microseconds with picosecond precision, for tables.
std::string format_us(Tick t);

}  // namespace meshsim
