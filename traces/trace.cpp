#include "traces/trace.hpp"

namespace meshsim::traces {

TraceRecorder::TraceRecorder(const sim::Program& program, const TraceLayout& layout, const TraceOptions& options)
    : program_(program), layout_(layout), options_(options) {
  chip_kept_.assign(layout_.chips, options_.chips.empty() ? 1 : 0);
  for (std::uint32_t c : options_.chips)
    if (c < layout_.chips) chip_kept_[c] = 1;
  entry_.assign(layout_.op_names.size() * layout_.chips, kMaxTick);
  exit_.assign(layout_.op_names.size() * layout_.chips, kMaxTick);
}

bool TraceRecorder::in_window(Tick start, Tick end) const {
  if (end < options_.from) return false;
  return options_.to == kZeroTick || start <= options_.to;
}

void TraceRecorder::on_task(sim::TaskId id, const sim::Task& task, const sim::TaskTiming& timing) {
  const std::uint32_t chip = layout_.resource_chip[task.resource];
  if (chip == kNoChip || !keeps_chip(chip)) return;
  if (!in_window(timing.start, timing.arrival)) return;
  tasks_.push_back({id, timing.start, timing.end, timing.arrival});
}

void TraceRecorder::on_join(sim::TaskId id, const sim::Task& task, Tick at) {
  const sim::OpId op = task.op();
  const sim::TaskId begin = layout_.op_entry_begin[op];
  if (id < begin || id >= begin + 2 * layout_.chips) return;  // an op's internal barrier
  const std::uint32_t offset = id - begin;
  if (offset < layout_.chips)
    entry_[op * layout_.chips + offset] = at;
  else
    exit_[op * layout_.chips + offset - layout_.chips] = at;
}

}  // namespace meshsim::traces
