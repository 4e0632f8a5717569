// trace_check: validates a Chrome JSON trace by the rules Perfetto's importer
// applies (../shared/notes/perfetto.md), and, given the run's --json output,
// that the trace agrees with the simulation.
//
//   trace_check TRACE.json [RUN.json] [--proto DECODED.txt]
//
// With --proto, DECODED.txt is the same run's protobuf trace decoded by
// `protoc --decode=perfetto.protos.Trace traces/perfetto_trace.proto`: it must hold
// the same slices (chip, track, start in ns, name), instants, flows and counter
// samples as the JSON trace.
// Rules: a {"traceEvents": [...]} object; every event has "ph" and "pid"; X/i/s/f/C
// events have a numeric "ts" (microseconds) and X a numeric "dur" >= 0; tids >= 1
// on thread events; X slices on one (pid, tid) nest or are disjoint; every flow
// start "s" has exactly one finish "f" with the same (id, cat, name); M events use
// only process_name, thread_name (args.name) and process_sort_index,
// thread_sort_index (args.sort_index); counter args are numbers.
// Every hop slice names two different ends (args src, dst: chips or switches).
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

// What both formats must agree on.
struct Summary {
  std::multiset<std::tuple<long, std::string, std::int64_t, std::string>> slices, instants;
  std::size_t flow_starts = 0, flow_ends = 0, counter_samples = 0;
};

std::string unquote(const std::string& s) {
  const auto a = s.find('"'), b = s.rfind('"');
  return a == std::string::npos || b <= a ? s : s.substr(a + 1, b - a - 1);
}

// Reads protoc's text format of a meshsim protobuf trace.
Summary read_proto_text(const std::string& path) {
  std::ifstream in(path);
  struct Track {
    long pid = 0;
    std::string name;
    std::uint64_t parent = 0;
  };
  std::map<std::uint64_t, Track> tracks;
  std::map<std::uint64_t, std::string> names;
  struct Event {
    std::string type;
    std::uint64_t track = 0, iid = 0, timestamp = 0;
    std::size_t flows = 0, ends = 0;
  };
  std::vector<Event> events;
  std::string line, section, sub;
  Track track;
  std::uint64_t uuid = 0, iid = 0, timestamp = 0;
  Event ev;
  int depth = 0;
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    const std::string t = line.substr(first);
    auto value = [&t] { return t.substr(t.find(':') + 2); };
    if (t.back() == '{') {
      ++depth;
      const std::string what = t.substr(0, t.find(' '));
      if (depth == 1) timestamp = 0;
      if (what == "track_descriptor") track = Track{}, uuid = 0;
      if (what == "track_event") ev = Event{}, ev.timestamp = timestamp;
      if (depth == 2) section = what;
      if (depth == 3) sub = what;
      continue;
    }
    if (t == "}") {
      if (depth == 2 && section == "track_descriptor") tracks[uuid] = track;
      if (depth == 2 && section == "track_event") events.push_back(ev);
      --depth;
      continue;
    }
    const std::string key = t.substr(0, t.find(':'));
    if (depth == 1 && key == "timestamp") timestamp = std::stoull(value());
    if (section == "track_descriptor") {
      if (key == "uuid") uuid = std::stoull(value());
      if (key == "name") track.name = unquote(value());
      if (key == "process_name") track.name = unquote(value());
      if (key == "pid") track.pid = std::stol(value());
      if (key == "parent_uuid") track.parent = std::stoull(value());
    } else if (section == "interned_data" && sub == "event_names") {
      if (key == "iid") iid = std::stoull(value());
      if (key == "name") names[iid] = unquote(value());
    } else if (section == "track_event") {
      if (key == "type") ev.type = value();
      if (key == "track_uuid") ev.track = std::stoull(value());
      if (key == "name_iid") ev.iid = std::stoull(value());
      if (key == "flow_ids") ++ev.flows;
      if (key == "terminating_flow_ids") ++ev.ends;
    }
  }
  Summary s;
  for (const Event& e : events) {
    const Track& tr = tracks[e.track];
    const long pid = tracks[tr.parent].pid;
    const auto key = std::make_tuple(pid, tr.name, static_cast<std::int64_t>(e.timestamp), names[e.iid]);
    if (e.type == "TYPE_SLICE_BEGIN") s.slices.insert(key);
    if (e.type == "TYPE_INSTANT") s.instants.insert(key);
    if (e.type == "TYPE_COUNTER") ++s.counter_samples;
    s.flow_starts += e.flows;
    s.flow_ends += e.ends;
  }
  return s;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: trace_check TRACE.json [RUN.json] [--proto DECODED.txt]\n");
    return 2;
  }
  std::string proto_path;
  if (argc >= 4 && std::string(argv[argc - 2]) == "--proto") {
    proto_path = argv[argc - 1];
    argc -= 2;
  }
  Summary json_summary;
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
  std::vector<std::tuple<long, long, std::int64_t, std::string>> slice_keys, instant_keys;
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
      for (const auto& [k, v] : e["args"].items()) {
        if (!v.is_number()) fail(where + ": counter value " + k + " is not a number");
        ++json_summary.counter_samples;
      }
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
      slice_keys.emplace_back(pid, tid, (t + 500) / 1000, e.value("name", ""));
      last_end = std::max(last_end, end);
      if (e.value("cat", "") == "hop") {
        hops.emplace_back(pid, tid, e["args"]["bytes"].get<std::uint64_t>());
        const std::string src = e["args"].value("src", ""), dst = e["args"].value("dst", "");
        if (src.empty() || dst.empty() || src == dst)
          fail(where + ": a hop needs two different ends, got src '" + src + "' dst '" + dst + "'");
      }
    } else if (ph == "s" || ph == "f") {
      if (!e.contains("id")) fail(where + ": flow without id");
      const auto key = std::make_tuple(e["id"].dump(), e.value("cat", ""), e.value("name", ""));
      (ph == "s" ? flows[key].first : flows[key].second)++;
      (ph == "s" ? json_summary.flow_starts : json_summary.flow_ends)++;
      if (ph == "f" && e.value("bp", "") != "e") fail(where + ": flow finish should bind to its enclosing slice (bp e)");
    } else if (ph == "i") {
      instant_keys.emplace_back(pid, tid, (t + 500) / 1000, e.value("name", ""));
    } else {
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
    if (const auto lane = track.find(" #"); lane != std::string::npos) track = track.substr(0, lane);
    // Torus links are named "(0,1)+x", fabric links "n0.g1 nvlink up".
    hop_bytes[chip + (track[0] == '+' || track[0] == '-' ? "" : " ") + track] += bytes;
  }
  if (argc > 2) {
    std::ifstream rin(argv[2]);
    const Json run = Json::parse(rin);
    if (ps(static_cast<double>(run["total_ps"].get<std::int64_t>()) * 1e-6) != last_end)
      fail("the last slice ends at " + std::to_string(last_end) + " ps, the run at " + run["total_ps"].dump());
    std::map<std::string, std::uint64_t> engine;
    // Switch-to-switch cables (a fabric's spine) belong to no chip and are not traced.
    for (const Json& l : run.value("busiest_links", Json::array()))
      if (l["link"].get<std::string>().find("spine") == std::string::npos) engine[l["link"]] = l["bytes"];
    if (engine != hop_bytes) fail("per-link bytes in hop slices differ from the engine's");
  }
  if (!proto_path.empty()) {
    for (const auto& [pid, tid, at, name] : slice_keys) json_summary.slices.insert({pid, thread_names[{pid, tid}], at, name});
    for (const auto& [pid, tid, at, name] : instant_keys)
      json_summary.instants.insert({pid, thread_names[{pid, tid}], at, name});
    const Summary proto = read_proto_text(proto_path);
    if (proto.slices != json_summary.slices)
      fail("protobuf slices differ from JSON (" + std::to_string(proto.slices.size()) + " vs " +
           std::to_string(json_summary.slices.size()) + ")");
    if (proto.instants != json_summary.instants) fail("protobuf instants differ from JSON");
    if (proto.flow_starts != json_summary.flow_starts || proto.flow_ends != json_summary.flow_ends)
      fail("protobuf flows differ from JSON");
    if (proto.counter_samples != json_summary.counter_samples) fail("protobuf counter samples differ from JSON");
  }
  if (failures) {
    std::fprintf(stderr, "trace_check: %d problem(s) in %s\n", failures, argv[1]);
    return 1;
  }
  std::printf("trace_check: %s: %zu events valid\n", argv[1], n);
  return 0;
}
