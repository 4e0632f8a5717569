#include "tools/meshsim/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace meshsim::cli {

Progress::Progress(bool quiet)
    : enabled_(!quiet && isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() { clear(); }

void Progress::clear() {
  if (!shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

void Progress::set_points(std::size_t done, std::size_t total) {
  points_done_ = done;
  points_total_ = total;
  events_before_ += events_now_;
  events_now_ = 0;
  if (enabled_ && done > 0) update(now_, 0, 0.0);
}

std::function<void(Tick, std::uint64_t, double)> Progress::hook() {
  if (!enabled_) return {};
  return [this](Tick now, std::uint64_t events, double done) { update(now, events, done); };
}

void Progress::update(Tick now, std::uint64_t events, double done) {
  events_now_ = events;
  now_ = now;
  const auto t = std::chrono::steady_clock::now();
  if (t - last_ < std::chrono::milliseconds(200)) return;
  last_ = t;
  const double elapsed = std::chrono::duration<double>(t - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(events_before_ + events_now_) / elapsed : 0;
  // The fraction of all the work done: whole points plus the share of this one.
  double fraction = done;
  std::string where;
  if (points_total_ > 0) {
    fraction = (static_cast<double>(points_done_) + done) / static_cast<double>(points_total_);
    where = fmt::format("point {}/{}, ", std::min(points_done_ + 1, points_total_), points_total_);
  }
  std::string left = "?";
  if (fraction > 0.01) left = fmt::format("{:.1f} s", elapsed * (1 - fraction) / fraction);
  std::fprintf(stderr, "\r\033[Kmeshsim: %ssimulated %.3f us, %.3g events/s, %.0f%% done, ~%s left", where.c_str(),
               static_cast<double>(now.ps()) * 1e-6, rate, 100 * fraction, left.c_str());
  std::fflush(stderr);
  shown_ = true;
}

}  // namespace meshsim::cli
