#include "traces/link_stats.hpp"

#include <algorithm>
#include <numeric>

#include "base/error.hpp"

namespace meshsim::traces {

LinkStats::LinkStats(std::span<const sim::Resource> resources) : resources_(resources), loads_(resources.size()) {}

void LinkStats::on_task(sim::TaskId, const sim::Task& task, const sim::TaskTiming& timing) {
  if (task.kind() != sim::TaskKind::Transfer) return;
  ResourceLoad& l = loads_[task.resource];
  if (timing.start < l.last_end) {
    l.overlapped = true;
    capacity_ok_ = false;
  }
  // bytes <= bandwidth * (end - start), in exact integer arithmetic.
  const unsigned __int128 carried = static_cast<unsigned __int128>(task.amount) * 1'000'000'000'000u;
  const unsigned __int128 capacity = static_cast<unsigned __int128>(resources_[task.resource].bandwidth_bytes_per_s) *
                                     static_cast<std::uint64_t>((timing.end - timing.start).ps());
  if (carried > capacity) capacity_ok_ = false;
  l.bytes += task.amount;
  ++l.transfers;
  l.busy += timing.end - timing.start;
  l.last_end = max(l.last_end, timing.end);
  total_bytes_ += task.amount;
  ++total_transfers_;
}

std::unique_ptr<sim::ExecutionObserver> LinkStats::split() const { return std::make_unique<LinkStats>(resources_); }

void LinkStats::merge(const sim::ExecutionObserver& part) {
  const auto& other = dynamic_cast<const LinkStats&>(part);
  for (std::size_t k = 0; k < loads_.size(); ++k) {
    const ResourceLoad& o = other.loads_[k];
    if (o.transfers == 0 && !o.overlapped) continue;
    MESHSIM_ASSERT(loads_[k].transfers == 0, "a resource observed in both parts of a split run");
    loads_[k] = o;
  }
  total_bytes_ += other.total_bytes_;
  total_transfers_ += other.total_transfers_;
  capacity_ok_ = capacity_ok_ && other.capacity_ok_;
}

void LinkStats::place(const LinkStats& part, std::span<const std::uint32_t> at) {
  for (std::size_t k = 0; k < at.size(); ++k) {
    loads_[at[k]] = part.loads_[k];
    total_bytes_ += part.loads_[k].bytes;
    total_transfers_ += part.loads_[k].transfers;
  }
  capacity_ok_ = capacity_ok_ && part.capacity_ok_;
}

void LinkStats::copy_load(std::uint32_t from, std::uint32_t to) {
  loads_[to] = loads_[from];
  total_bytes_ += loads_[from].bytes;
  total_transfers_ += loads_[from].transfers;
}

std::vector<std::uint32_t> LinkStats::busiest(std::size_t n) const {
  std::vector<std::uint32_t> ids(loads_.size());
  std::iota(ids.begin(), ids.end(), 0u);
  std::stable_sort(ids.begin(), ids.end(), [&](std::uint32_t a, std::uint32_t b) { return loads_[a].bytes > loads_[b].bytes; });
  ids.erase(std::remove_if(ids.begin(), ids.end(), [&](std::uint32_t id) { return loads_[id].transfers == 0; }),
            ids.end());
  if (ids.size() > n) ids.resize(n);
  return ids;
}

}  // namespace meshsim::traces
