// trace_check: validates a Chrome JSON trace by the rules Perfetto's importer
// applies (../shared/notes/perfetto.md), and, given the run's --json output,
// that the trace agrees with the simulation.
//
//   trace_check TRACE.json [RUN.json]
//
// Rules: a {"traceEvents": [...]} object; every event has "ph" and "pid"; X/i/s/f/C
// events have a numeric "ts" (microseconds) and X a numeric "dur" >= 0; tids >= 1
// on thread events; X slices on one (pid, tid) nest or are disjoint; every flow
// start "s" has exactly one finish "f" with the same (id, cat, name); M events use
// only process_name, thread_name (args.name) and process_sort_index,
// thread_sort_index (args.sort_index); counter args are numbers.
// Agreement: per link, the bytes of its hop slices equal what the engine moved
// (RUN.json's busiest_links, written with --links covering every link), and the
// last slice ends at the run's total time.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using Json = nlohmann::json;

namespace {
int failures = 0;
void fail(const std::string& m) {
  if (++failures <= 20) std::fprintf(stderr, "trace_check: %s\n", m.c_str());
}
std::int64_t ps(double us) { return std::llround(us * 1e6); }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: trace_check TRACE.json [RUN.json]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  Json trace;
  try {
    trace = Json::parse(in);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_check: %s: not JSON: %s\n", argv[1], e.what());
    return 1;
  }
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    std::fprintf(stderr, "trace_check: expected {\"traceEvents\": [...]}\n");
    return 1;
  }
  std::map<std::pair<long, long>, std::vector<std::pair<std::int64_t, std::int64_t>>> slices;
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int, int>> flows;
  std::map<long, std::string> process_names;
  std::map<std::pair<long, long>, std::string> thread_names;
  std::map<std::string, std::uint64_t> hop_bytes;  // "chip-name|track" -> bytes
  std::vector<std::tuple<long, long, std::uint64_t>> hops;
  std::int64_t last_end = 0;
  const std::set<std::string> metadata = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"};
  std::size_t n = 0;
  for (const Json& e : trace["traceEvents"]) {
    ++n;
    const std::string where = "event " + std::to_string(n);
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string() || !e.contains("pid") || !e["pid"].is_number_integer()) {
      fail(where + ": needs a string ph and an integer pid");
      continue;
    }
    const std::string ph = e["ph"];
    const long pid = e["pid"];
    if (ph == "M") {
      const std::string name = e.value("name", "");
      if (!metadata.count(name)) fail(where + ": metadata '" + name + "' is ignored by Perfetto");
      if ((name == "process_name" || name == "thread_name") && !e["args"].value("name", Json()).is_string())
        fail(where + ": " + name + " needs args.name");
      if (name.find("sort_index") != std::string::npos && !e["args"].value("sort_index", Json()).is_number_integer())
        fail(where + ": " + name + " needs an integer args.sort_index");
      if (name == "process_name") process_names[pid] = e["args"]["name"];
      if (name == "thread_name") thread_names[{pid, e.value("tid", 0L)}] = e["args"]["name"];
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number()) {
      fail(where + ": needs a numeric ts (microseconds)");
      continue;
    }
    const std::int64_t t = ps(e["ts"].get<double>());
    if (ph == "C") {
      for (const auto& [k, v] : e["args"].items())
        if (!v.is_number()) fail(where + ": counter value " + k + " is not a number");
      continue;
    }
    const long tid = e.value("tid", 0L);
    if (tid < 1) fail(where + ": tid must be >= 1 (0 or missing is replaced by the pid)");
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        fail(where + ": X needs a numeric dur >= 0");
        continue;
      }
      const std::int64_t end = t + ps(e["dur"].get<double>());
      slices[{pid, tid}].emplace_back(t, end);
      last_end = std::max(last_end, end);
      if (e.value("cat", "") == "hop") hops.emplace_back(pid, tid, e["args"]["bytes"].get<std::uint64_t>());
    } else if (ph == "s" || ph == "f") {
      if (!e.contains("id")) fail(where + ": flow without id");
      const auto key = std::make_tuple(e["id"].dump(), e.value("cat", ""), e.value("name", ""));
      (ph == "s" ? flows[key].first : flows[key].second)++;
      if (ph == "f" && e.value("bp", "") != "e") fail(where + ": flow finish should bind to its enclosing slice (bp e)");
    } else if (ph != "i") {
      fail(where + ": unexpected phase '" + ph + "'");
    }
  }
  for (auto& [track, list] : slices) {
    std::sort(list.begin(), list.end(), [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<std::int64_t> open;
    for (const auto& [b, e] : list) {
      while (!open.empty() && open.back() <= b) open.pop_back();
      if (!open.empty() && e > open.back())
        fail("slices overlap without nesting on pid " + std::to_string(track.first) + " tid " + std::to_string(track.second));
      open.push_back(e);
    }
  }
  for (const auto& [key, count] : flows)
    if (count.first != 1 || count.second != 1) fail("flow " + std::get<0>(key) + " has unmatched start/finish");
  for (const auto& [pid, tid, bytes] : hops) {
    std::string chip = process_names[pid], track = thread_names[{pid, tid}];
    if (chip.rfind("chip ", 0) == 0) chip = chip.substr(5);
    if (track.rfind("link ", 0) == 0) track = track.substr(5);
    track = track.substr(0, track.find(' '));
    hop_bytes[chip + track] += bytes;
  }
  if (argc > 2) {
    std::ifstream rin(argv[2]);
    const Json run = Json::parse(rin);
    if (ps(static_cast<double>(run["total_ps"].get<std::int64_t>()) * 1e-6) != last_end)
      fail("the last slice ends at " + std::to_string(last_end) + " ps, the run at " + run["total_ps"].dump());
    std::map<std::string, std::uint64_t> engine;
    for (const Json& l : run.value("busiest_links", Json::array())) engine[l["link"]] = l["bytes"];
    if (engine != hop_bytes) fail("per-link bytes in hop slices differ from the engine's");
  }
  if (failures) {
    std::fprintf(stderr, "trace_check: %d problem(s) in %s\n", failures, argv[1]);
    return 1;
  }
  std::printf("trace_check: %s: %zu events valid\n", argv[1], n);
  return 0;
}
