#include "traces/trace.hpp"

namespace meshsim::traces {

TraceRecorder::TraceRecorder(const sim::Program& program, const TraceLayout& layout, const TraceOptions& options)
    : program_(program), layout_(layout), options_(options) {
  chip_kept_.assign(layout_.chips, options_.chips.empty() ? 1 : 0);
  for (std::uint32_t c : options_.chips)
    if (c < layout_.chips) chip_kept_[c] = 1;
  std::size_t ports = 0;
  for (const sim::OpChips& op : layout_.op_ports) {
    port_base_.push_back(ports);
    ports += op.count();
  }
  entry_.assign(ports, kMaxTick);
  exit_.assign(ports, kMaxTick);
}

Tick TraceRecorder::entered(std::size_t op, std::uint32_t chip) const {
  const auto at = layout_.op_ports[op].position(chip);
  return at ? entry_[port_base_[op] + *at] : kMaxTick;
}

Tick TraceRecorder::left(std::size_t op, std::uint32_t chip) const {
  const auto at = layout_.op_ports[op].position(chip);
  return at ? exit_[port_base_[op] + *at] : kMaxTick;
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
  const sim::OpChips& ports = layout_.op_ports[op];
  if (!ports.is_port(id)) return;  // an op's internal barrier
  const std::uint32_t offset = id - ports.entry_begin;
  if (offset < ports.count())
    entry_[port_base_[op] + offset] = at;
  else
    exit_[port_base_[op] + offset - ports.count()] = at;
}

}  // namespace meshsim::traces
