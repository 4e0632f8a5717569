// The Chrome JSON trace-event format, written the way Perfetto's importer reads
// it (../shared/notes/perfetto.md): ts/dur in microseconds (6 decimals keep the
// engine's picoseconds), tids >= 1, slices on one (pid, tid) strictly nested or
// disjoint (overlapping ones are spread over lanes), flows v1 with numeric ids,
// counters with numeric args, and only the four metadata names Perfetto uses.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "traces/trace.hpp"

namespace meshsim::traces {

namespace {

constexpr int kOpsTid = 1;         // ops lanes: 1..9
constexpr int kComputeTid = 10;
constexpr int kStepsTid = 20;      // steps lanes: 20..29
constexpr int kLinkTid = 100;      // link track d, lane l: 100 + 10 d + l
constexpr int kMaxLanes = 9;
constexpr int kCounterBins = 64;

std::string ts(Tick t) {
  const std::int64_t ps = t.ps();
  return fmt::format("{}.{:06}", ps / 1'000'000, ps % 1'000'000);
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Greedy interval lanes: the first lane whose last slice has ended.
class Lanes {
 public:
  int place(Tick start, Tick end) {
    for (std::size_t i = 0; i < ends_.size(); ++i)
      if (ends_[i] <= start) {
        ends_[i] = end;
        return static_cast<int>(i);
      }
    ends_.push_back(end);
    return static_cast<int>(ends_.size() - 1);
  }
  int count() const { return static_cast<int>(ends_.size()); }

 private:
  std::vector<Tick> ends_;
};

class Writer {
 public:
  Writer(const TraceRecorder& r, Tick makespan, std::FILE* out)
      : r_(r), l_(r.layout()), p_(r.program()), makespan_(makespan), out_(out) {}

  TraceStats run() {
    buf_ += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
    metadata_processes();
    ops();
    compute();
    if (r_.options().detail != Detail::Ops) steps();
    if (r_.options().detail == Detail::Hops) hops();
    counters();
    thread_names();
    buf_ += "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"meshsim\"}}\n]}\n";
    flush(true);
    return stats_;
  }

 private:
  bool room() {
    if (stats_.events >= r_.options().max_events) {
      stats_.truncated = true;
      return false;
    }
    return true;
  }
  void event(const std::string& json) {
    buf_ += json;
    buf_ += ",\n";
    ++stats_.events;
    flush(false);
  }
  void flush(bool force) {
    if (!force && buf_.size() < (1u << 20)) return;
    std::fwrite(buf_.data(), 1, buf_.size(), out_);
    buf_.clear();
  }
  void thread(std::uint32_t chip, int tid, const std::string& name) { threads_[{chip, tid}] = name; }

  void metadata_processes() {
    for (std::uint32_t c = 0; c < l_.chips; ++c) {
      if (!r_.keeps_chip(c)) continue;
      event(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":{}}}}})", c + 1,
                        quoted("chip " + l_.chip_names[c])));
      event(fmt::format(R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})", c + 1, c));
    }
  }

  void thread_names() {
    for (const auto& [key, name] : threads_) {
      const auto [chip, tid] = key;
      buf_ += fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}},)", chip + 1,
                          tid, quoted(name));
      buf_ += "\n";
      buf_ += fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_sort_index","args":{{"sort_index":{}}}}},)",
                          chip + 1, tid, tid);
      buf_ += "\n";
      stats_.events += 2;
    }
  }

  // One slice per op per chip, from when the chip entered it to when it left.
  void ops() {
    const std::size_t n = l_.op_names.size();
    std::vector<Lanes> lanes(l_.chips);
    struct Slice {
      Tick start, end;
      std::size_t op;
      std::uint32_t chip;
    };
    std::vector<Slice> slices;
    for (std::size_t o = 0; o < n; ++o)
      for (std::uint32_t c = 0; c < l_.chips; ++c) {
        const Tick a = r_.entered(o, c), b = r_.left(o, c);
        if (a == kMaxTick || b == kMaxTick || !r_.keeps_chip(c) || !r_.in_window(a, b)) continue;
        slices.push_back({a, b, o, c});
      }
    std::stable_sort(slices.begin(), slices.end(), [](const Slice& x, const Slice& y) {
      return std::tie(x.chip, x.start) < std::tie(y.chip, y.start);
    });
    for (const Slice& s : slices) {
      const int lane = std::min(lanes[s.chip].place(s.start, s.end), kMaxLanes - 1);
      const int tid = kOpsTid + lane;
      op_tid_[{s.op, s.chip}] = tid;
      thread(s.chip, tid, lane == 0 ? "ops" : fmt::format("ops #{}", lane + 1));
      if (!room()) return;
      event(fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"op","args":{{"kind":{}}}}})",
                        s.chip + 1, tid, ts(s.start), ts(s.end - s.start), quoted(l_.op_names[s.op]),
                        quoted(l_.op_kinds[s.op])));
    }
  }

  void compute() {
    for (const TaskRecord& t : r_.tasks()) {
      const sim::Task& task = p_.task(t.id);
      if (task.kind() != sim::TaskKind::Compute) continue;
      const std::uint32_t chip = l_.resource_chip[task.resource];
      thread(chip, kComputeTid, "compute");
      if (!room()) return;
      event(fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"compute"}})", chip + 1,
                        kComputeTid, ts(t.start), ts(t.end - t.start), quoted(l_.op_names[task.op()])));
    }
  }

  // One slice per (chip, op, step): the span of the chip's outgoing transfers of
  // that step, and an instant where it begins.
  void steps() {
    struct Span {
      Tick start = kMaxTick, end;
      std::uint64_t bytes = 0, transfers = 0;
    };
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint16_t>, Span> spans;
    for (const TaskRecord& t : r_.tasks()) {
      const sim::Task& task = p_.task(t.id);
      if (task.kind() != sim::TaskKind::Transfer) continue;
      Span& s = spans[{l_.resource_chip[task.resource], task.op(), p_.step(t.id)}];
      s.start = min(s.start, t.start);
      s.end = max(s.end, t.end);
      s.bytes += task.amount;
      ++s.transfers;
    }
    std::vector<Lanes> lanes(l_.chips);
    for (const auto& [key, s] : spans) {
      const auto [chip, op, step] = key;
      const int lane = std::min(lanes[chip].place(s.start, s.end), kMaxLanes - 1);
      const int tid = kStepsTid + lane;
      thread(chip, tid, lane == 0 ? "steps" : fmt::format("steps #{}", lane + 1));
      if (!room()) return;
      const std::string name = fmt::format("{} step {}", l_.op_names[op], step);
      event(fmt::format(
          R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"step","args":{{"op":{},"step":{},"bytes":{},"transfers":{}}}}})",
          chip + 1, tid, ts(s.start), ts(s.end - s.start), quoted(name), quoted(l_.op_names[op]), step, s.bytes,
          s.transfers));
      event(fmt::format(R"({{"ph":"i","s":"t","pid":{},"tid":{},"ts":{},"name":{},"cat":"step"}})", chip + 1, tid,
                        ts(s.start), quoted(name + " begins")));
    }
  }

  int link_tid(std::uint32_t resource, int lane) const { return kLinkTid + 10 * l_.resource_track[resource] + lane; }

  void hops() {
    // Lanes per link (transfers on one link never overlap; lanes only guard).
    std::map<std::uint32_t, Lanes> lanes;
    std::map<sim::TaskId, std::size_t> index;
    std::vector<int> tids(r_.tasks().size(), 0);
    for (std::size_t i = 0; i < r_.tasks().size(); ++i) {
      const TaskRecord& t = r_.tasks()[i];
      const sim::Task& task = p_.task(t.id);
      if (task.kind() != sim::TaskKind::Transfer) continue;
      index[t.id] = i;
      const int lane = std::min(lanes[task.resource].place(t.start, t.end), kMaxLanes);
      tids[i] = link_tid(task.resource, lane);
      const std::uint32_t chip = l_.resource_chip[task.resource];
      const std::string& track = l_.track_names[static_cast<std::size_t>(l_.resource_track[task.resource])];
      thread(chip, tids[i], lane == 0 ? "link " + track : fmt::format("link {} #{}", track, lane + 1));
      if (!room()) return;
      event(fmt::format(
          R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"hop","args":{{"op":{},"kind":{},"step":{},"bytes":{},"src":{},"dst":{},"arrival_us":{}}}}})",
          chip + 1, tids[i], ts(t.start), ts(t.end - t.start),
          quoted(fmt::format("{} step {}", l_.op_names[task.op()], p_.step(t.id))), quoted(l_.op_names[task.op()]),
          quoted(l_.op_kinds[task.op()]), p_.step(t.id), task.amount, quoted(l_.chip_names[chip]),
          quoted(l_.chip_names[l_.resource_peer[task.resource]]), ts(t.arrival)));
    }
    // Flow arrows: along forwarding chains (stream edges), and from the last hop
    // into the op slice of the chip that receives it.
    std::uint64_t flow = 1;
    for (std::size_t i = 0; i < r_.tasks().size(); ++i) {
      const TaskRecord& t = r_.tasks()[i];
      const sim::Task& task = p_.task(t.id);
      if (task.kind() != sim::TaskKind::Transfer) continue;
      const std::uint32_t chip = l_.resource_chip[task.resource];
      for (std::uint32_t e : p_.successors(t.id)) {
        const sim::TaskId succ = e >> 1;
        std::uint32_t to_chip = 0;
        int to_tid = 0;
        Tick at;
        if (e & 1u) {
          const auto it = index.find(succ);
          if (it == index.end()) continue;
          to_chip = l_.resource_chip[p_.task(succ).resource];
          to_tid = tids[it->second];
          at = r_.tasks()[it->second].start;
        } else {
          const sim::OpId op = task.op();
          const sim::TaskId exit_begin = l_.op_entry_begin[op] + l_.chips;
          if (succ < exit_begin || succ >= exit_begin + l_.chips) continue;
          to_chip = succ - exit_begin;
          const auto tid = op_tid_.find({op, to_chip});
          if (tid == op_tid_.end()) continue;
          if (t.arrival < r_.entered(op, to_chip) || t.arrival > r_.left(op, to_chip)) continue;
          to_tid = tid->second;
          at = t.arrival;
        }
        if (!room()) return;
        event(fmt::format(R"({{"ph":"s","id":{},"pid":{},"tid":{},"ts":{},"name":"data","cat":"flow"}})", flow,
                          chip + 1, tids[i], ts(t.start)));
        event(fmt::format(R"({{"ph":"f","bp":"e","id":{},"pid":{},"tid":{},"ts":{},"name":"data","cat":"flow"}})", flow,
                          to_chip + 1, to_tid, ts(at)));
        ++flow;
      }
    }
  }

  // Link utilisation per chip: the busy fraction of each outgoing link in equal
  // time bins, as one counter track per chip with a series per direction.
  void counters() {
    if (makespan_ <= kZeroTick) return;
    const std::int64_t bin = std::max<std::int64_t>(1, (makespan_.ps() + kCounterBins - 1) / kCounterBins);
    std::map<std::pair<std::uint32_t, int>, std::vector<std::int64_t>> busy;  // (chip, track) -> ps per bin
    for (const TaskRecord& t : r_.tasks()) {
      const sim::Task& task = p_.task(t.id);
      if (task.kind() != sim::TaskKind::Transfer) continue;
      auto& bins = busy[{l_.resource_chip[task.resource], l_.resource_track[task.resource]}];
      bins.resize(kCounterBins + 1, 0);
      for (std::int64_t a = t.start.ps(); a < t.end.ps();) {
        const std::int64_t b = a / bin;
        const std::int64_t until = std::min(t.end.ps(), (b + 1) * bin);
        bins[static_cast<std::size_t>(b)] += until - a;
        a = until;
      }
    }
    std::map<std::uint32_t, std::vector<int>> tracks;
    for (const auto& [key, bins] : busy) tracks[key.first].push_back(key.second);
    for (const auto& [chip, list] : tracks) {
      for (int b = 0; b <= kCounterBins; ++b) {
        std::string args;
        for (int track : list) {
          const double f = b == kCounterBins ? 0.0
                                             : static_cast<double>(busy[{chip, track}][static_cast<std::size_t>(b)]) /
                                                   static_cast<double>(bin);
          args += fmt::format("{}{}:{:.4f}", args.empty() ? "" : ",", quoted(l_.track_names[static_cast<std::size_t>(track)]), f);
        }
        if (!room()) return;
        event(fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":"link busy fraction","args":{{{}}}}})", chip + 1,
                          ts(Tick::from_ps(b * bin)), args));
      }
    }
  }

  const TraceRecorder& r_;
  const TraceLayout& l_;
  const sim::Program& p_;
  Tick makespan_;
  std::FILE* out_;
  std::string buf_;
  TraceStats stats_;
  std::map<std::pair<std::uint32_t, int>, std::string> threads_;
  std::map<std::pair<std::size_t, std::uint32_t>, int> op_tid_;
};

}  // namespace

TraceStats write_chrome_json(const TraceRecorder& recorder, Tick makespan, std::FILE* out) {
  return Writer(recorder, makespan, out).run();
}

}  // namespace meshsim::traces
