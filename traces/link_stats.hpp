#pragma once
// An execution observer that totals, per resource, the bytes carried, the time
// busy and the number of transfers; it also checks that no link direction ever
// carries more than bandwidth x elapsed time and that its busy intervals never
// overlap. The engine does not know it exists.
#include <cstdint>
#include <span>
#include <vector>

#include "sim/executor.hpp"

namespace meshsim::traces {

struct ResourceLoad {
  std::uint64_t bytes = 0;
  std::uint64_t transfers = 0;
  Tick busy;        // sum of (end - start) of its tasks
  Tick last_end;    // end of the last task it served
  bool overlapped = false;  // two tasks were served at once (must never happen)
};

class LinkStats final : public sim::ExecutionObserver {
 public:
  explicit LinkStats(std::span<const sim::Resource> resources);
  void on_task(sim::TaskId id, const sim::Task& task, const sim::TaskTiming& timing) override;
  std::unique_ptr<sim::ExecutionObserver> split() const override;
  // `part` saw other resources' tasks (a split run's other part).
  void merge(const sim::ExecutionObserver& part) override;

  const std::vector<ResourceLoad>& loads() const { return loads_; }
  // Resource `to` carried exactly what `from` carried (an identical independent
  // component, sim/reduce.hpp, that was not simulated itself): its load and totals.
  void copy_load(std::uint32_t from, std::uint32_t to);
  // What `part` observed, on resources numbered apart (its resource k is this
  // one's at[k]): loads, totals and the capacity check.
  void place(const LinkStats& part, std::span<const std::uint32_t> at);
  std::uint64_t total_bytes() const { return total_bytes_; }
  std::uint64_t total_transfers() const { return total_transfers_; }
  // True when every resource carried at most bandwidth x elapsed within each task
  // and no two tasks overlapped on one resource.
  bool capacity_respected() const { return capacity_ok_; }
  // Resource ids by bytes carried, most first, ties by id.
  std::vector<std::uint32_t> busiest(std::size_t n) const;

 private:
  std::span<const sim::Resource> resources_;
  std::vector<ResourceLoad> loads_;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t total_transfers_ = 0;
  bool capacity_ok_ = true;
};

}  // namespace meshsim::traces
