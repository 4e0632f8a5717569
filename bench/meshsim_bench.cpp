// meshsim_bench: wall time, throughput and peak memory of whole simulations.
//
//   meshsim_bench [--repeat N] [--traces] [CASE.json ...]   (default: bench/cases/allreduce_v4_16x16x16.json)
//   meshsim_bench --engines [--repeat N] [CASE.json ...]     (default: the 16x16 and 16x16x16 all-reduces)
//   meshsim_bench --parse [--repeat N]                       (workloads of 10k, 100k and 1M ops)
//   meshsim_bench --scale [--repeat N] [CASE.json ...]       (the scale cases, end to end, a process per run;
//                                                            the machine, and CPU time per transfer simulated)
//   meshsim_bench --hlo [--repeat N]                         (a synthetic HLO dump of 100k lines, parsed)
//   meshsim_bench --plans [--repeat N] [SPEC.json]           (a search spec's plans made into workloads, in
//                                                            memory and through JSON)
//   meshsim_bench --help
//
// For each case: parse, expand into the hop-by-hop program, execute on the event
// engine. Prints the median over N repetitions of each stage, transfers/s and
// events/s of the execution, the median of the whole driver call (simulate():
// expansion, exact reductions, results) and the transfers it simulated, and the
// process's peak resident memory. With
// --traces, also writes the trace of each case at every level of detail in both
// formats and prints events, bytes, bytes/event and events/s of writing (the run
// with a trace minus the run without). With --engines, runs each case on the
// native engine and on SimGrid (docs/CROSSCHECK.md) and prints both wall times,
// their ratio, the cost per hop transfer (and per SimGrid flow) and the
// simulated times; SimGrid runs once unless --repeat is given. With --parse,
// times the JSON parse and the whole parse into a typed workload (validation,
// dependencies, lowering) of generated files of N one-line all-reduces, N = 10k,
// 100k and 1M, and prints the time per op, which a linear parser keeps flat.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "driver/costs.hpp"
#include "driver/expand.hpp"
#include "driver/simulate.hpp"
#include "sim/engine.hpp"
#include "sim/executor.hpp"
#include "hlo/hlo.hpp"
#include "search/search_json.hpp"
#include "workloads/json_cursor.hpp"
#include "workloads/workload.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void trace_figures(const std::string& path) {
  const meshsim::workloads::Workload w = meshsim::workloads::load_workload(path);
  const auto t0 = Clock::now();
  meshsim::driver::simulate(w);
  const double plain = seconds_since(t0);
  const std::string dir = std::filesystem::temp_directory_path().string();
  fmt::print("traces          {:<6} {:<9} {:>10} {:>14} {:>12} {:>14}\n", "detail", "format", "events", "bytes",
             "bytes/event", "events/s");
  for (const char* detail : {"ops", "steps", "hops"}) {
    for (const char* ext : {"json", "pftrace"}) {
      meshsim::driver::SimulateOptions o;
      o.trace_path = fmt::format("{}/meshsim_bench_trace.{}", dir, ext);
      o.trace.detail = std::strcmp(detail, "ops") == 0     ? meshsim::traces::Detail::Ops
                       : std::strcmp(detail, "steps") == 0 ? meshsim::traces::Detail::Steps
                                                           : meshsim::traces::Detail::Hops;
      o.trace.max_events = std::size_t{1} << 40;
      const auto t1 = Clock::now();
      const meshsim::driver::RunResult r = meshsim::driver::simulate(w, o);
      const double writing = std::max(1e-9, seconds_since(t1) - plain);
      const auto bytes = std::filesystem::file_size(o.trace_path);
      std::filesystem::remove(o.trace_path);
      fmt::print("                {:<6} {:<9} {:>10} {:>14} {:>12.1f} {:>14.3g}\n", detail, ext, r.trace_events, bytes,
                 static_cast<double>(bytes) / static_cast<double>(r.trace_events),
                 static_cast<double>(r.trace_events) / writing);
    }
  }
  fmt::print("\n");
}

double peak_child_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// Native engine and SimGrid on the same program: wall time end to end (parse to
// results) and per hop transfer.
void engine_figures(const std::string& path, int native_repeat, int simgrid_repeat) {
  const meshsim::workloads::Workload w = meshsim::workloads::load_workload(path);
  meshsim::driver::RunResult native, simgrid;
  std::vector<double> t_native, t_simgrid, t_simgrid_engine;
  for (int r = 0; r < native_repeat; ++r) {
    const auto t0 = Clock::now();
    native = meshsim::driver::simulate(w);
    t_native.push_back(seconds_since(t0));
  }
  meshsim::driver::SimulateOptions o;
  o.engine = meshsim::driver::EngineKind::SimGrid;
  for (int r = 0; r < simgrid_repeat; ++r) {
    const auto t0 = Clock::now();
    simgrid = meshsim::driver::simulate(w, o);
    t_simgrid.push_back(seconds_since(t0));
    t_simgrid_engine.push_back(simgrid.engine_seconds);
  }
  const double n = median(t_native), s = median(t_simgrid);
  const auto transfers = static_cast<double>(native.transfers);
  fmt::print("case            {}\n", path);
  fmt::print("program         {} hop transfers; SimGrid: {} flows, {} hosts, {} routes, {} worker actors\n",
             native.transfers, simgrid.flows, simgrid.hosts, simgrid.routes, simgrid.workers);
  fmt::print("simulated       native {:.3f} us, SimGrid {:.3f} us ({:+.3f} %)\n", native.makespan.microseconds(),
             simgrid.makespan.microseconds(),
             100.0 * (simgrid.makespan.microseconds() / native.makespan.microseconds() - 1));
  fmt::print("wall            native {:.3f} s (median of {}), SimGrid {:.3f} s (median of {}; its process: {:.3f} s)\n",
             n, native_repeat, s, simgrid_repeat, median(t_simgrid_engine));
  fmt::print("ratio           SimGrid / native = {:.1f}x\n", s / n);
  fmt::print("per transfer    native {:.3f} us, SimGrid {:.3f} us ({:.3f} us per flow)\n", 1e6 * n / transfers,
             1e6 * s / transfers, 1e6 * s / static_cast<double>(std::max<std::uint64_t>(simgrid.flows, 1)));
  fmt::print("peak memory     native {:.1f} MB (this process), SimGrid {:.1f} MB (its process)\n\n", peak_rss_mb(),
             peak_child_rss_mb());
}

// A workload of n one-line all-reduces over one axis of 16 v5e chips, as a
// generated trace or program would write it.
std::string many_ops(std::size_t n) {
  std::string text = R"({"hardware": "tpu-v5e", "mesh": {"X": 16}, "ops": [)";
  text += '\n';
  for (std::size_t i = 0; i < n; ++i)
    text += fmt::format(R"({{"name": "op{}", "kind": "all_reduce", "bytes": {}, "axes": ["X"]}}{})", i, 1024 + i % 4096,
                        i + 1 < n ? ",\n" : "\n");
  return text + "]}\n";
}

void parse_figures(int repeat) {
  fmt::print("{:>10} {:>12} {:>16} {:>14} {:>18} {:>12}\n", "ops", "MB", "parse JSON (s)", "us per op", "parse workload (s)",
             "us per op");
  for (std::size_t n : {std::size_t{10'000}, std::size_t{100'000}, std::size_t{1'000'000}}) {
    const std::string text = many_ops(n);
    std::vector<double> t_json, t_workload;
    for (int r = 0; r < repeat; ++r) {
      auto t0 = Clock::now();
      const meshsim::workloads::Json j = meshsim::workloads::parse_json(text, "bench.json");
      t_json.push_back(seconds_since(t0));
      t0 = Clock::now();
      const meshsim::workloads::Workload w = meshsim::workloads::parse_workload(text, "bench.json");
      t_workload.push_back(seconds_since(t0));
      if (w.ops.size() != n || j.at("ops").size() != n) throw meshsim::Error("--parse: the generated workload lost ops");
    }
    const double json = median(t_json), workload = median(t_workload), ops = static_cast<double>(n);
    fmt::print("{:>10} {:>12.1f} {:>16.3f} {:>14.3f} {:>18.3f} {:>12.3f}\n", n, static_cast<double>(text.size()) / 1e6,
               json, 1e6 * json / ops, workload, 1e6 * workload / ops);
  }
  fmt::print("(medians of {}; peak memory {:.1f} MB)\n\n", repeat, peak_rss_mb());
}

// A search's plans made into workloads, every one of them: built in memory
// (search::build_plan, as the search builds them) against written as JSON and
// parsed again (plan_workload, then parse_workload: how the search made them
// before the builder). Both give the same workload (tests/unit/search); this
// times them. A plan the builder refuses costs what its checks cost.
void plan_figures(const std::string& path, int repeat) {
  const meshsim::search::SearchSpec spec = meshsim::search::load_spec(path);
  const std::vector<meshsim::search::Plan> plans = meshsim::search::enumerate_plans(spec);
  std::vector<double> t_built, t_json;
  std::size_t valid = 0, ops = 0;
  for (int r = 0; r < repeat; ++r) {
    valid = ops = 0;
    auto t0 = Clock::now();
    for (const meshsim::search::Plan& plan : plans) try {
        ops += meshsim::search::build_plan(spec, plan).ops.size();
        ++valid;
      } catch (const meshsim::InputError&) {
      }
    t_built.push_back(seconds_since(t0));
    std::size_t json_ops = 0;
    t0 = Clock::now();
    for (const meshsim::search::Plan& plan : plans) try {
        meshsim::workloads::Json doc = meshsim::search::plan_workload(spec, plan);
        doc["training"]["allow_oom"] = true;
        json_ops += meshsim::workloads::parse_workload(doc.dump(), spec.file).ops.size();
      } catch (const meshsim::InputError&) {
      }
    t_json.push_back(seconds_since(t0));
    if (json_ops != ops) throw meshsim::Error("--plans: the two ways gave different workloads");
  }
  const double built = median(t_built), json = median(t_json), n = static_cast<double>(plans.size());
  fmt::print("{}: {} plans, {} valid, {} ops lowered in all\n", path, plans.size(), valid, ops);
  fmt::print("{:>28} {:>12} {:>14}\n", "", "all plans (s)", "us per plan");
  fmt::print("{:>28} {:>12.3f} {:>14.1f}\n", "built in memory", built, 1e6 * built / n);
  fmt::print("{:>28} {:>12.3f} {:>14.1f}\n", "written as JSON and parsed", json, 1e6 * json / n);
  fmt::print("(medians of {}; JSON / memory {:.3f}; the search makes each valid plan twice: to bound it, to simulate it)\n\n",
             repeat, json / built);
}

// A synthetic XLA HLO dump of about `lines` lines in the syntax of a real TPU
// step: fused computations, then an ENTRY of dots, async all-gathers with iota
// groups, all-reduces with explicit groups and long metadata attributes.
std::string synthetic_hlo(std::size_t lines) {
  std::string t = "HloModule jit_step, is_scheduled=true, num_partitions=64\n\n";
  std::size_t n = 2;
  for (std::size_t f = 0; n + 6 < lines / 4; ++f, n += 6)
    t += fmt::format("%fused.{0} (p.{0}: bf16[128,1024]) -> bf16[128,1024] {{\n  %p.{0} = bf16[128,1024]{{1,0}} "
                     "parameter(0)\n  %m.{0} = bf16[128,1024]{{1,0}} multiply(bf16[128,1024]{{1,0}} %p.{0}, "
                     "bf16[128,1024]{{1,0}} %p.{0})\n  ROOT %t.{0} = bf16[128,1024]{{1,0}} tanh(%m.{0})\n}}\n\n",
                     f);
  t += "ENTRY %main (x: bf16[128,1024], w: bf16[1024,1024]) -> bf16[128,1024] {\n";
  t += "  %x = bf16[128,1024]{1,0:T(8,128)(2,1)} parameter(0)\n  %w = bf16[16,1024]{1,0} parameter(1)\n";
  n += 3;
  for (std::size_t i = 0; n + 1 < lines; ++i, n += 4) {
    t += fmt::format("  %ags.{0} = (bf16[16,1024]{{1,0}}, bf16[1024,1024]{{1,0}}) all-gather-start(bf16[16,1024]{{1,0}} "
                     "%w), channel_id={1}, replica_groups=[1,64]<=[4,4,4]T(2,1,0), dimensions={{0}}, "
                     "use_global_device_ids=true, metadata={{op_name=\"jit(step)/layer{0}/all_gather\" "
                     "source_file=\"/src/model.py\" source_line={0}}}\n",
                     i, 2 * i + 1);
    t += fmt::format("  %agd.{0} = bf16[1024,1024]{{1,0}} all-gather-done(%ags.{0})\n", i);
    t += fmt::format("  %dot.{0} = bf16[128,1024]{{1,0}} dot(bf16[128,1024]{{1,0}} %x, bf16[1024,1024]{{1,0}} "
                     "%agd.{0}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, metadata={{op_name=\"dot\"}}\n",
                     i);
    t += fmt::format("  %ar.{0} = bf16[128,1024]{{1,0}} all-reduce(%dot.{0}), channel_id={1}, "
                     "replica_groups={{{{0,1,2,3,4,5,6,7}},{{8,9,10,11,12,13,14,15}}}}, use_global_device_ids=true, "
                     "to_apply=%fused.0\n",
                     i, 2 * i + 2);
  }
  return t + "  ROOT %out = bf16[128,1024]{1,0} copy(%x)\n}\n";
}

void hlo_figures(int repeat) {
  const std::string text = synthetic_hlo(100'000);
  const auto lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  std::vector<double> t;
  std::size_t instructions = 0, groups = 0;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    std::istringstream in(text);
    const meshsim::hlo::Module m = meshsim::hlo::parse_module(in, "synthetic.hlo");
    instructions = 0, groups = 0;
    for (const meshsim::hlo::Computation& c : m.computations)
      for (const meshsim::hlo::Instruction& i : c.instructions) {
        ++instructions;
        if (i.attr("replica_groups")) groups += meshsim::hlo::device_groups(i, m).size();
      }
    t.push_back(seconds_since(t0));
  }
  fmt::print("hlo             {} lines, {:.1f} MB, {} instructions, {} replica groups resolved\n", lines,
             static_cast<double>(text.size()) / 1e6, instructions, groups);
  fmt::print("wall (median of {})  {:.3f} s, {:.2f} us per line; peak memory {:.1f} MB\n\n", repeat, median(t),
             1e6 * median(t) / static_cast<double>(lines), peak_rss_mb());
}

// The scale cases of issue 18, end to end as `meshsim run` does them (parse, size
// check, expand, exact reductions, execute, results), each repetition in a
// child process of its own, so that its wall time includes faulting its memory
// in and its peak resident memory is its own.
const std::vector<std::string> kScaleCases = {
    "bench/cases/allreduce_v4_16x16x16.json",         // 4,096 chips, one group over X,Y,Z
    "bench/cases/allreduce_v5p_pod_16x20x28.json",    // the full v5p pod, 8,960 chips
    "bench/cases/allreduce_x_v4_16x16x16.json",       // 256 identical rings: reduced
    "bench/cases/allreduce_in_node_h100_8192.json",   // 1,024 identical NVLink groups: reduced
    "bench/cases/allreduce_h100_4096.json",           // 4,096 GPUs, one group: NCCL's tree, 33.5 M transfers in full
    "bench/cases/allreduce_h100_8192.json",           // 8,192 GPUs, one group (NCCL's choice: the tree)
    "bench/cases/allreduce_h100_8192_hierarchical.json",  // the same, the hierarchical algorithm named
    "bench/cases/allreduce_rails_h100_8192.json",     // across the 1,024 nodes on each rail: reduced to one rail
    "bench/cases/allreduce_in_node_h100_100k.json",   // 100,000 GPUs on three tiers, in-node: reduced
    "bench/cases/allreduce_h100_16384.json",          // 16,384 GPUs, one group
    "bench/cases/allreduce_dcn_v5p_12pods.json",      // 12 v5p pods (107,520 chips), data parallel over the DCN
    // The issue's training steps. 405B with 128 layers, so that 16 stages
    // divide them; reduced by shifts of the nodes along the data-parallel
    // axis (whole 32-node units of leaves on the SuperPOD layout, whose
    // shifts carry the spine cables with them).
    "bench/cases/training_llama3_405b_h100_16384.json",  // TP8 x PP16 x DP128 on 2,048 DGX H100 nodes
    "bench/cases/training_llama3_405b_h100_16384_superpod.json",  // the same under 32-node leaves (SuperPOD units)
    // Steps that the torus' translations leave unchanged: one chip's tasks run,
    // built op by op (each distinct op's program once, in full). 70B with 16
    // KV heads: the pod's axes are 16, 20 and 28 and a mesh axis is whole torus
    // axes, so tensor parallelism is 16 wide.
    "bench/cases/training_llama3_70b_v5p_pod.json",     // TP16 (x) x FSDP560 (y, z) on the full v5p pod
    "bench/cases/training_llama3_70b_v5p_512.json",     // TP8 (x) x FSDP64 (y, z) on a v5p 8x8x8
    "bench/cases/training_llama3_70b_v5p_12pods.json",  // the pod's plan x DP12 over the DCN: 107,520 chips
    // Pipeline stages along X: the translations along Y and Z keep every stage.
    "bench/cases/training_llama3_70b_v5p_pod_pp16.json",  // PP16 (x) x FSDP560 (y, z) on the full v5p pod
};

struct ChildRun {
  bool ok = false;
  double wall = 0, user = 0, sys = 0, peak_mb = 0;  // the child's user and system CPU time
  double simulated = 0;  // the transfers the child simulated (after exact reductions)
  std::string line;  // what the child reported: its result, or its error
};

ChildRun run_in_child(const std::string& path) {
  std::FILE* out = std::tmpfile();
  if (!out) throw meshsim::Error("--scale: cannot create a temporary file");
  std::fflush(stdout);
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw meshsim::Error("--scale: cannot fork");
  if (pid == 0) {
    int code = 0;
    try {
      const meshsim::workloads::Workload w = meshsim::workloads::load_workload(path);
      const meshsim::driver::RunResult r = meshsim::driver::simulate(w);
      // The count the parent divides by, on a line of its own, then the result.
      std::fprintf(out, "%llu\n", static_cast<unsigned long long>(r.simulated_transfers));
      std::fprintf(out, "%.3f us simulated; %llu transfers, %llu simulated", static_cast<double>(r.makespan.ps()) * 1e-6,
                   static_cast<unsigned long long>(r.transfers), static_cast<unsigned long long>(r.simulated_transfers));
    } catch (const std::exception& e) {
      std::fprintf(out, "refused: %s", e.what());
      code = 1;
    }
    std::fflush(out);
    _exit(code);
  }
  int status = 0;
  rusage u{};
  while (wait4(pid, &status, 0, &u) < 0)
    if (errno != EINTR) throw meshsim::Error("--scale: lost the child process of " + path);
  ChildRun c;
  c.wall = seconds_since(t0);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  c.user = seconds(u.ru_utime);
  c.sys = seconds(u.ru_stime);
  c.peak_mb = static_cast<double>(u.ru_maxrss) / 1024.0;
  c.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::rewind(out);
  char buf[1024];
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, out);
  c.line.assign(buf, n);
  std::fclose(out);
  if (c.ok) {
    const std::size_t eol = c.line.find('\n');
    c.simulated = std::strtod(c.line.c_str(), nullptr);
    c.line.erase(0, eol == std::string::npos ? c.line.size() : eol + 1);
  }
  return c;
}

// The machine the figures are of: its CPU's model and clock as /proc/cpuinfo
// gives them (a virtual machine's figures differ with the host it lands on).
std::string machine() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  std::string model = "unknown CPU", mhz;
  if (f) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) {
      const std::string line(buf);
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
      if (line.rfind("model name", 0) == 0 && model == "unknown CPU") model = value;
      if (line.rfind("cpu MHz", 0) == 0 && mhz.empty()) mhz = value;
    }
    std::fclose(f);
  }
  return fmt::format("{}, {} cores{}", model, std::thread::hardware_concurrency(),
                     mhz.empty() ? "" : ", " + mhz + " MHz");
}

void scale_figures(std::vector<std::string> cases, int repeat) {
  if (cases.empty()) cases = kScaleCases;
  fmt::print("machine: {}\n", machine());
  fmt::print("{:<46} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n", "case (end to end, a process per run)", "wall s",
             "min s", "user s", "sys s", "ns/sim", "peak MB", "result");
  for (const std::string& path : cases) {
    std::vector<double> walls, users, syss, peaks, per_transfer;
    ChildRun last;
    for (int r = 0; r < repeat; ++r) {
      last = run_in_child(path);
      walls.push_back(last.wall);
      users.push_back(last.user);
      syss.push_back(last.sys);
      peaks.push_back(last.peak_mb);
      if (!last.ok) break;  // a refusal is quick and always the same
      if (last.simulated > 0) per_transfer.push_back(1e9 * last.user / last.simulated);
    }
    fmt::print("{:<46} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9} {:>9.1f}  {}\n",
               std::filesystem::path(path).filename().string(), median(walls),
               *std::min_element(walls.begin(), walls.end()), median(users), median(syss),
               per_transfer.empty() ? std::string("-") : fmt::format("{:.0f}", median(per_transfer)), median(peaks),
               last.line);
  }
  fmt::print(
      "(wall: median of {} runs; user, sys: medians of the runs' own user and system CPU time, which time spent "
      "waiting for the machine leaves out (sys is mostly the kernel zeroing fresh pages, which varies from run to run on "
      "a virtual machine); ns/sim: the median of the runs' user CPU time per transfer simulated (after exact "
      "reductions; the whole run's, parse and build included, so small cases pay more), a figure that compares "
      "cases of one machine; peak: median of the runs' own max RSS)\n\n",
      repeat);
}

constexpr const char* kUsage =
    "usage: meshsim_bench [--repeat N] [--traces] [CASE.json ...]\n"
    "       meshsim_bench --engines [--repeat N] [CASE.json ...]\n"
    "       meshsim_bench --parse [--repeat N]\n"
    "       meshsim_bench --scale [--repeat N] [CASE.json ...]\n"
    "       meshsim_bench --hlo [--repeat N]\n"
    "       meshsim_bench --plans [--repeat N] [SPEC.json]\n"
    "Prints figures (medians over N repetitions, default 5): a case's parse, expand and execute times,\n"
    "transfers/s, events/s and peak memory (default case bench/cases/allreduce_v4_16x16x16.json);\n"
    "--traces adds the cost of writing its traces; --engines compares the native engine with SimGrid\n"
    "(default: the 16x16 and 16x16x16 all-reduces); --parse times parsing 10k, 100k and 1M ops;\n"
    "--scale runs the scale cases (4,096 to 107,520 chips; two training steps at 8,960 and 16,384) end to end, a process per run, with exact reductions,\n"
    "and prints the machine and the CPU time per transfer simulated;\n"
    "--hlo parses a synthetic XLA HLO dump of 100k lines and resolves its replica groups;\n"
    "--plans makes every plan of a search spec into its workload, in memory and through JSON\n"
    "(default examples/search/llama3_70b_v5p_16x16x4.json).\n"
    "Run from the project root (the default cases are relative paths).\n";

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  bool traces = false, engines = false, parse = false, scale = false, hlo = false, plans = false, repeat_given = false;
  std::vector<std::string> cases;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      fmt::print("{}", kUsage);
      return 0;
    }
    if (std::strcmp(argv[i], "--repeat") == 0 && (i + 1 >= argc || std::atoi(argv[i + 1]) < 1)) {
      fmt::print(stderr, "meshsim_bench: error: --repeat needs a positive count\n{}", kUsage);
      return 1;
    }
    if (argv[i][0] == '-' && std::strcmp(argv[i], "--traces") != 0 && std::strcmp(argv[i], "--engines") != 0 &&
        std::strcmp(argv[i], "--parse") != 0 && std::strcmp(argv[i], "--scale") != 0 && std::strcmp(argv[i], "--hlo") != 0 &&
        std::strcmp(argv[i], "--plans") != 0 && std::strcmp(argv[i], "--repeat") != 0) {
      fmt::print(stderr, "meshsim_bench: error: unknown option '{}'\n{}", argv[i], kUsage);
      return 1;
    }
    if (std::strcmp(argv[i], "--parse") == 0)
      parse = true;
    else if (std::strcmp(argv[i], "--hlo") == 0)
      hlo = true;
    else if (std::strcmp(argv[i], "--plans") == 0)
      plans = true;
    else if (std::strcmp(argv[i], "--scale") == 0)
      scale = true;
    else if (std::strcmp(argv[i], "--traces") == 0)
      traces = true;
    else if (std::strcmp(argv[i], "--engines") == 0)
      engines = true;
    else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
      repeat = std::max(1, std::atoi(argv[++i])), repeat_given = true;
    else
      cases.emplace_back(argv[i]);
  }
  if (plans) {
    try {
      for (const std::string& path :
           cases.empty() ? std::vector<std::string>{"examples/search/llama3_70b_v5p_16x16x4.json"} : cases)
        plan_figures(path, repeat_given ? repeat : 3);
    } catch (const meshsim::Error& e) {
      fmt::print(stderr, "meshsim_bench: error: {}\n", e.what());
      return 1;
    }
    return 0;
  }
  if (hlo) {
    try {
      hlo_figures(repeat_given ? repeat : 3);
    } catch (const meshsim::Error& e) {
      fmt::print(stderr, "meshsim_bench: error: {}\n", e.what());
      return 1;
    }
    return 0;
  }
  if (scale) {
    try {
      scale_figures(cases, repeat_given ? repeat : 3);
    } catch (const meshsim::Error& e) {
      fmt::print(stderr, "meshsim_bench: error: {}\n", e.what());
      return 1;
    }
    return 0;
  }
  if (parse) {
    try {
      parse_figures(repeat_given ? repeat : 3);
    } catch (const meshsim::Error& e) {
      fmt::print(stderr, "meshsim_bench: error: {}\n", e.what());
      return 1;
    }
    return 0;
  }
  if (engines) {
    if (cases.empty()) cases = {"bench/cases/allreduce_v5e_16x16.json", "bench/cases/allreduce_v4_16x16x16.json"};
    try {
      for (const std::string& path : cases) engine_figures(path, repeat, repeat_given ? repeat : 1);
    } catch (const meshsim::Error& e) {
      fmt::print(stderr, "meshsim_bench: error: {}\n", e.what());
      return 1;
    }
    return 0;
  }
  if (cases.empty()) cases.emplace_back("bench/cases/allreduce_v4_16x16x16.json");

  try {
    for (const std::string& path : cases) {
      std::vector<double> t_parse, t_expand, t_run, t_total, t_simulate;
      std::uint64_t simulated_transfers = 0;
      std::size_t tasks = 0, transfers = 0, edges = 0;
      std::uint64_t events = 0;
      std::int64_t simulated_ps = 0;
      std::size_t program_bytes = 0;
      double first_run_peak_mb = 0;
      for (int r = 0; r < repeat; ++r) {
        const auto t0 = Clock::now();
        const meshsim::workloads::Workload w = meshsim::workloads::load_workload(path);
        t_parse.push_back(seconds_since(t0));
        const auto t1 = Clock::now();
        meshsim::driver::RunContext run(w);  // the system, as expand() made it
        const meshsim::driver::Expanded ex = meshsim::driver::expand(w, run);
        t_expand.push_back(seconds_since(t1));
        const auto t2 = Clock::now();
        meshsim::sim::Engine engine;
        const std::vector<std::uint8_t> op_class = meshsim::driver::op_classes(w, run);  // NCCL's protocols
        meshsim::sim::Executor exec(engine, ex.program, ex.resources);
        if (!op_class.empty()) exec.classify_ops(op_class);
        exec.start();
        engine.run();
        t_run.push_back(seconds_since(t2));
        t_total.push_back(seconds_since(t0));
        tasks = ex.program.num_tasks();
        edges = ex.program.num_edges();
        transfers = 0;
        for (std::uint64_t n : ex.op_transfers) transfers += n;
        events = engine.events_executed();
        simulated_ps = exec.makespan().ps();
        program_bytes = ex.program.memory_bytes();
        if (r == 0) first_run_peak_mb = peak_rss_mb();
        // The same through the driver: expansion, exact reductions, results.
        const auto t3 = Clock::now();
        simulated_transfers = meshsim::driver::simulate(w).simulated_transfers;
        t_simulate.push_back(seconds_since(t3));
      }
      const double run = median(t_run);
      fmt::print("case            {}\n", path);
      fmt::print("simulated time  {:.3f} us\n", static_cast<double>(simulated_ps) * 1e-6);
      fmt::print("program         {} tasks ({} hop transfers), {} edges, {:.1f} MB\n", tasks, transfers, edges,
                 static_cast<double>(program_bytes) / 1e6);
      fmt::print("wall (median of {})  parse {:.3f} s, expand {:.3f} s, execute {:.3f} s, total {:.3f} s\n", repeat,
                 median(t_parse), median(t_expand), run, median(t_total));
      fmt::print("simulate()      {:.3f} s (median of {}: expand, exact reductions, results); {} of the {} transfers "
                 "simulated\n",
                 median(t_simulate), repeat, simulated_transfers, transfers);
      fmt::print("throughput      {:.2f} M transfers/s, {:.2f} M events/s (execute); {:.2f} M transfers/s end to end\n",
                 static_cast<double>(transfers) / run / 1e6, static_cast<double>(events) / run / 1e6,
                 static_cast<double>(transfers) / median(t_total) / 1e6);
      // Later repetitions reuse memory the allocator kept: the first run's peak
      // is the cost of one simulation.
      fmt::print("peak memory     {:.1f} MB (process max RSS after the first run)\n\n", first_run_peak_mb);
      if (traces) trace_figures(path);
    }
  } catch (const meshsim::Error& e) {
    fmt::print(stderr, "meshsim_bench: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
