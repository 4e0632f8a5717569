#include "sim/engine.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace meshsim::sim {

Engine::HandlerId Engine::add_handler(EventHandler& handler) {
  handlers_.push_back(&handler);
  return static_cast<HandlerId>(handlers_.size() - 1);
}

int Engine::bucket_of(std::int64_t time, std::int64_t last) {
  const auto diff = static_cast<std::uint64_t>(time ^ last);
  return diff == 0 ? 0 : 64 - __builtin_clzll(diff);
}

void Engine::schedule(Tick at, HandlerId handler, std::uint64_t payload, std::uint8_t priority) {
  MESHSIM_ASSERT(at >= now_, "event scheduled in the past");
  MESHSIM_ASSERT(handler < handlers_.size(), "unknown event handler");
  MESHSIM_ASSERT(sequence_ < (std::uint64_t{1} << 56), "event sequence overflow");
  const Event e{at, (std::uint64_t{priority} << 56) | sequence_++, payload, handler};
  std::vector<Event>& bucket = buckets_[bucket_of(at.ps(), last_)];
  // Every bucket stays sorted by order (see refill), so equal times pop in
  // (priority, sequence) order without sorting. A new sequence number is the
  // largest yet, so appending keeps the order unless priorities differ.
  if (!bucket.empty() && bucket.back().order > e.order) {
    auto it = std::upper_bound(bucket.begin() + static_cast<std::ptrdiff_t>(&bucket == &buckets_[0] ? head_ : 0),
                               bucket.end(), e, [](const Event& x, const Event& y) { return x.order < y.order; });
    bucket.insert(it, e);
  } else {
    bucket.push_back(e);
  }
  ++size_;
}

int Engine::lowest_bucket(std::int64_t& least) const {
  int i = 1;
  while (buckets_[i].empty()) ++i;
  least = buckets_[i].front().time.ps();
  for (const Event& e : buckets_[i]) least = std::min(least, e.time.ps());
  return i;
}

void Engine::refill() {
  std::int64_t least = 0;
  const int i = lowest_bucket(least);
  refill(i, least);
}

void Engine::refill(int i, std::int64_t least) {
  buckets_[0].clear();
  head_ = 0;
  std::vector<Event>& from = buckets_[i];
  last_ = least;
  // Buckets below `from` are empty, so moving its events in their (sorted)
  // order keeps every bucket sorted by order.
  for (const Event& e : from) buckets_[bucket_of(e.time.ps(), last_)].push_back(e);
  from.clear();
}

void Engine::on_progress(std::uint64_t every, std::function<void(Tick)> report) {
  progress_every_ = every;
  progress_ = std::move(report);
  next_progress_ = every > 0 && progress_ ? executed_ + every : UINT64_MAX;
}

void Engine::step() {
  if (head_ == buckets_[0].size()) refill();
  const Event e = buckets_[0][head_++];
  // Events at one time mostly touch unrelated state: hint the next three, so
  // that their cache misses overlap this one's work.
  if (head_ + 1 < buckets_[0].size()) {
    if (head_ + 2 < buckets_[0].size()) {
      const Event& last = buckets_[0][head_ + 2];
      handlers_[last.handler]->upcoming(last.payload, 3);
    }
    const Event& later = buckets_[0][head_ + 1];
    handlers_[later.handler]->upcoming(later.payload, 2);
    const Event& next = buckets_[0][head_];
    handlers_[next.handler]->upcoming(next.payload, 1);
  }
  --size_;
  MESHSIM_ASSERT(e.time >= now_, "time went backwards");
  now_ = e.time;
  ++executed_;
  handlers_[e.handler]->handle_event(e.payload, now_);
  if (executed_ == next_progress_) {
    next_progress_ += progress_every_;
    progress_(now_);
  }
}

void Engine::run() {
  while (size_ > 0) step();
  buckets_[0].clear();
  head_ = 0;
}

Tick Engine::next_time() const {
  if (size_ == 0) return kNoEvent;
  if (head_ < buckets_[0].size()) return buckets_[0][head_].time;
  // As refill() would find it, without moving anything: events scheduled
  // before the next pop must still be placed against the last time popped.
  std::int64_t least = 0;
  lowest_bucket(least);
  return Tick::from_ps(least);
}

void Engine::run_until(Tick end) {
  while (size_ > 0) {
    if (head_ == buckets_[0].size()) {
      // Refilled only for an event before `end` (see next_time), with the
      // least time found once.
      std::int64_t least = 0;
      const int i = lowest_bucket(least);
      if (least >= end.ps()) return;
      refill(i, least);
    } else if (buckets_[0][head_].time >= end) {
      return;
    }
    step();
  }
}

}  // namespace meshsim::sim
