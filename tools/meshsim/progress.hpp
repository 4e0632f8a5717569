#pragma once
// A progress line on stderr for long runs and sweeps: the simulated time reached,
// engine events per second and an estimate of the time left. Only when stderr is
// a terminal and not --quiet; it never writes to a file or pipe, so outputs stay
// deterministic. The line is erased when the work is done.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/tick.hpp"

namespace meshsim::cli {

class Progress {
 public:
  explicit Progress(bool quiet);
  ~Progress();  // erases the line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool enabled() const { return enabled_; }
  // Sweeps: `done` of `total` points finished (of this process's share).
  void set_points(std::size_t done, std::size_t total);
  // The hook for driver::SimulateOptions::progress (empty when disabled).
  std::function<void(Tick, std::uint64_t, double)> hook();
  void clear();

 private:
  void update(Tick now, std::uint64_t events, double done);
  bool enabled_ = false;
  bool shown_ = false;
  std::size_t points_done_ = 0, points_total_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
  std::uint64_t events_before_ = 0;  // events of the finished points
  std::uint64_t events_now_ = 0;
  Tick now_;
};

}  // namespace meshsim::cli
