#include "sim/engine.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace meshsim::sim {

Engine::HandlerId Engine::add_handler(EventHandler& handler) {
  handlers_.push_back(&handler);
  return static_cast<HandlerId>(handlers_.size() - 1);
}

void Engine::schedule(Tick at, HandlerId handler, std::uint64_t payload, std::uint8_t priority) {
  MESHSIM_ASSERT(at >= now_, "event scheduled in the past");
  MESHSIM_ASSERT(handler < handlers_.size(), "unknown event handler");
  MESHSIM_ASSERT(sequence_ < (std::uint64_t{1} << 56), "event sequence overflow");
  heap_.push_back(Event{at, (std::uint64_t{priority} << 56) | sequence_++, payload, handler});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

void Engine::run() {
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Event e = heap_.back();
    heap_.pop_back();
    MESHSIM_ASSERT(e.time >= now_, "time went backwards");
    now_ = e.time;
    ++executed_;
    handlers_[e.handler]->handle_event(e.payload, now_);
  }
}

}  // namespace meshsim::sim
