#include "replay/hardware.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <optional>

#include "base/error.hpp"
#include "base/text_file.hpp"
#include "calibrate/fit.hpp"
#include "driver/costs.hpp"
#include "driver/simulate.hpp"
#include "topology/gpu_preset.hpp"
#include "workloads/json_cursor.hpp"

namespace meshsim::replay {

namespace cu = kernels::cuda;
using workloads::Cursor;
using workloads::Json;

Spread spread_of(std::vector<double> samples) {
  Spread s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  s.median_s = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.min_s = samples.front();
  s.max_s = samples.back();
  return s;
}

Spread spread_of(const cu::Timing& t) {
  Spread s = spread_of(t.samples);
  s.gated = t.gated;
  return s;
}

calibrate::HardwareInfo hardware_info(const cu::Probe& probe, int gpus_used) {
  calibrate::HardwareInfo h;
  h.device = probe.device.empty() ? "unknown" : probe.device;
  h.gpus = std::max(gpus_used, 1);
  h.sms = probe.sms;
  h.cuda_runtime = probe.cuda_runtime;
  h.nccl = probe.nccl;
  if (const char* a = std::getenv("NCCL_ALGO")) h.nccl_algo = a;
  if (const char* p = std::getenv("NCCL_PROTO")) h.nccl_proto = p;
  return h;
}

// ------------------------------------------------------------------ files

namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

void put_spread(Json& j, const Spread& s) {
  j["median_s"] = s.median_s;
  j["min_s"] = s.min_s;
  j["max_s"] = s.max_s;
  if (!s.gated) j["ungated"] = true;
}

Spread get_spread(const Cursor& c) {
  Spread s;
  s.median_s = c.at("median_s").as_positive_double(1e6);
  s.min_s = c.at("min_s").as_positive_double(1e6);
  s.max_s = c.at("max_s").as_positive_double(1e6);
  if (!(s.min_s <= s.median_s && s.median_s <= s.max_s))
    c.fail("expected min_s <= median_s <= max_s");
  if (auto u = c.find("ungated")) s.gated = !u->as_bool();
  return s;
}

Json hardware_json(const calibrate::HardwareInfo& h) {
  Json j;
  j["device"] = h.device;
  j["gpus"] = h.gpus;
  if (h.sms > 0) j["sms"] = h.sms;
  j["cuda_runtime"] = h.cuda_runtime;
  j["nccl"] = h.nccl;
  j["nccl_algo"] = h.nccl_algo;
  j["nccl_proto"] = h.nccl_proto;
  return j;
}

// What NCCL reported choosing, when it did: "nccl_algorithm" and "nccl_protocol".
void put_nccl(Json& e, const NcclChoice& c) {
  if (c.algorithm.empty()) return;
  e["nccl_algorithm"] = c.algorithm;
  e["nccl_protocol"] = c.protocol;
}

NcclChoice get_nccl(const Cursor& e) {
  NcclChoice c;
  const auto a = e.find("nccl_algorithm"), p = e.find("nccl_protocol");
  if (a.has_value() != p.has_value()) e.fail("expected both nccl_algorithm and nccl_protocol, or neither");
  if (!a) return c;
  c.algorithm = a->as_string();
  c.protocol = p->as_string();
  if (c.algorithm.empty()) a->fail("expected NCCL's algorithm name");
  if (c.protocol.empty()) p->fail("expected NCCL's protocol name");
  return c;
}

OpKind collective_kind(const Cursor& c) {
  const std::optional<OpKind> k = parse_kind(c.as_string());
  if (!k) c.fail(fmt::format("unknown op kind '{}'", c.as_string()));
  return *k;
}

}  // namespace

std::string format_measurements(const Measurements& m) {
  Json j;
  j["meshsim_measurements"] = 1;
  j["kind"] = m.suite ? "suite" : "replay";
  if (!m.suite) j["workload"] = m.workload;
  j["hardware"] = hardware_json(m.hardware);
  j["warmups"] = m.repeat.warmups;
  j["repetitions"] = m.repeat.repetitions;
  j["cold_l2"] = m.repeat.cold_l2;
  if (!m.suite) {
    Json& ops = j["ops"] = Json::array();
    for (const OpMeasurement& o : m.ops) {
      Json e;
      e["op"] = o.op;
      e["name"] = o.name;
      e["kind"] = kind_name(o.kind);
      e["ranks"] = o.ranks;
      e["ranks_replayed"] = o.ranks_replayed;
      if (o.time) put_spread(e, *o.time);
      put_nccl(e, o.nccl);
      if (!o.skipped.empty()) e["skipped"] = o.skipped;
      ops.push_back(e);
    }
  } else {
    Json& g = j["gemm"] = Json::array();
    for (const GemmMeasurement& p : m.gemm) {
      Json e;
      e["dtype"] = p.dtype;
      e["m"] = p.m;
      e["n"] = p.n;
      e["k"] = p.k;
      e["set"] = p.holdout ? "holdout" : "fit";
      put_spread(e, p.time);
      g.push_back(e);
    }
    Json& c = j["copy"] = Json::array();
    for (const CopyMeasurement& p : m.copy) {
      Json e;
      e["bytes"] = p.bytes;
      put_spread(e, p.time);
      c.push_back(e);
    }
    Json& col = j["collectives"] = Json::array();
    for (const CollectiveMeasurement& p : m.collectives) {
      Json e;
      e["kind"] = kind_name(p.kind);
      e["ranks"] = p.ranks;
      e["bytes"] = p.bytes;
      put_spread(e, p.time);
      put_nccl(e, p.nccl);
      col.push_back(e);
    }
  }
  j["skipped"] = m.skipped;
  return j.dump(2) + "\n";
}

Measurements parse_measurements(std::string_view text, std::string_view file_name) {
  Measurements m;
  m.file = std::string(file_name);
  const Json root = workloads::parse_json(text, m.file);
  const Cursor top(root, "", m.file);
  const Cursor kind = top.at("kind");
  const std::string k = kind.as_string();
  if (k != "suite" && k != "replay") kind.fail(fmt::format("unknown measurements kind '{}' (expected suite or replay)", k));
  m.suite = k == "suite";
  if (m.suite)
    top.only_keys({"meshsim_measurements", "kind", "hardware", "warmups", "repetitions", "cold_l2", "gemm", "copy",
                   "collectives", "skipped"});
  else
    top.only_keys({"meshsim_measurements", "kind", "workload", "hardware", "warmups", "repetitions", "cold_l2", "ops",
                   "skipped"});
  if (top.at("meshsim_measurements").as_int() != 1)
    top.at("meshsim_measurements").fail("unsupported measurements version (this meshsim reads version 1)");
  {
    const Cursor h = top.at("hardware");
    h.only_keys({"device", "gpus", "sms", "cuda_runtime", "nccl", "nccl_algo", "nccl_proto"});
    m.hardware.device = h.at("device").as_string();
    if (auto sms = h.find("sms")) m.hardware.sms = static_cast<int>(sms->as_int_in(1, 1 << 16));
    m.hardware.gpus = static_cast<int>(h.at("gpus").as_int_in(1, 1 << 20));
    m.hardware.cuda_runtime = h.at("cuda_runtime").as_string();
    m.hardware.nccl = h.at("nccl").as_string();
    m.hardware.nccl_algo = h.at("nccl_algo").as_string();
    m.hardware.nccl_proto = h.at("nccl_proto").as_string();
  }
  m.repeat.warmups = static_cast<int>(top.at("warmups").as_int_in(0, 1 << 20));
  m.repeat.repetitions = static_cast<int>(top.at("repetitions").as_int_in(1, 1 << 20));
  // Absent in files from before the L2 flush: those were timed with warm caches.
  m.repeat.cold_l2 = top.find("cold_l2") ? top.at("cold_l2").as_bool() : false;
  for (const Cursor& s : top.at("skipped").elements()) m.skipped.push_back(s.as_string());
  if (!m.suite) {
    m.workload = top.at("workload").as_string();
    for (const Cursor& e : top.at("ops").elements()) {
      e.only_keys({"op", "name", "kind", "ranks", "ranks_replayed", "median_s", "min_s", "max_s", "ungated",
                   "nccl_algorithm", "nccl_protocol", "skipped"});
      OpMeasurement o;
      o.op = static_cast<std::uint32_t>(e.at("op").as_int_in(0, 1 << 30));
      o.name = e.at("name").as_string();
      o.kind = collective_kind(e.at("kind"));
      o.ranks = static_cast<std::uint32_t>(e.at("ranks").as_int_in(0, 1 << 30));
      o.ranks_replayed = static_cast<std::uint32_t>(e.at("ranks_replayed").as_int_in(0, 1 << 30));
      if (e.has("median_s"))
        o.time = get_spread(e);
      else if (e.has("ungated"))
        e.at("ungated").fail("expected only with a time (median_s)");
      if (auto s = e.find("skipped")) o.skipped = s->as_string();
      o.nccl = get_nccl(e);
      m.ops.push_back(o);
    }
    return m;
  }
  for (const Cursor& e : top.at("gemm").elements()) {
    e.only_keys({"dtype", "m", "n", "k", "set", "median_s", "min_s", "max_s", "ungated"});
    GemmMeasurement g;
    g.dtype = e.at("dtype").as_string();
    g.m = e.at("m").as_positive_u64(1u << 30);
    g.n = e.at("n").as_positive_u64(1u << 30);
    g.k = e.at("k").as_positive_u64(1u << 30);
    const std::string set = e.at("set").as_string();
    if (set != "fit" && set != "holdout") e.at("set").fail(fmt::format("expected fit or holdout, got '{}'", set));
    g.holdout = set == "holdout";
    g.time = get_spread(e);
    m.gemm.push_back(g);
  }
  for (const Cursor& e : top.at("copy").elements()) {
    e.only_keys({"bytes", "median_s", "min_s", "max_s", "ungated"});
    m.copy.push_back({e.at("bytes").as_positive_u64(), get_spread(e)});
  }
  for (const Cursor& e : top.at("collectives").elements()) {
    e.only_keys({"kind", "ranks", "bytes", "median_s", "min_s", "max_s", "ungated", "nccl_algorithm", "nccl_protocol"});
    CollectiveMeasurement c;
    c.kind = collective_kind(e.at("kind"));
    if (!is_collective(c.kind)) e.at("kind").fail("expected a collective");
    c.ranks = static_cast<int>(e.at("ranks").as_int_in(2, 1 << 20));
    c.bytes = e.at("bytes").as_positive_u64();
    c.time = get_spread(e);
    c.nccl = get_nccl(e);
    m.collectives.push_back(c);
  }
  return m;
}

Measurements load_measurements(const std::string& path) {
  return parse_measurements(read_text_file(path, "measurements file"), path);
}

// ------------------------------------------------------------------ replay

Measurements replay(const workloads::Workload& w, const Plan& plan, const cu::Probe& probe, const cu::Repeat& repeat,
                    NcclTuningLog* nccl_log) {
  const int gpus = std::min<int>(probe.gpus, static_cast<int>(plan.ranks));
  std::optional<cu::Session> session;
  if (gpus > 0) session.emplace(gpus);
  return replay_on(w, plan, probe, repeat, session ? &*session : nullptr, gpus, nccl_log);
}

Measurements replay_on(const workloads::Workload& w, const Plan& plan, const cu::Probe& probe,
                       const cu::Repeat& repeat, cu::Session* session, int gpus, NcclTuningLog* nccl_log) {
  Measurements m;
  m.workload = w.file;
  m.repeat = repeat;
  gpus = std::min<int>(gpus, static_cast<int>(plan.ranks));
  m.hardware = hardware_info(probe, gpus);
  std::string stopped_at;  // after a DeviceFatal: the op that ended the replay
  for (const OpStep& s : device_steps(w, plan, gpus)) {
    OpMeasurement o = measurement_of(w, s);
    if (!stopped_at.empty() && !s.calls.empty()) {
      o.ranks_replayed = 0;
      o.skipped = fmt::format("everything: not run after the GPU failure at {}", stopped_at);
    } else if (!s.calls.empty()) {
      try {
        if (nccl_log) nccl_log->next();  // past anything logged before this op
        o.time = spread_of(session->time(s.calls, repeat));
        if (nccl_log)
          if (auto c = nccl_log->next()) o.nccl = *c;
      } catch (const cu::DeviceFatal& e) {
        // The session is over (its communicators aborted): the ops measured so
        // far are kept, the rest are named as not run.
        o.ranks_replayed = 0;
        o.skipped = fmt::format("everything: a GPU failure ended the replay here: {}", e.what());
        stopped_at = fmt::format("op {} {}", o.op, o.name);
        m.stopped = true;
      } catch (const Error& e) {
        // A GEMM cuBLAS refuses or an op too large for the GPU: said and skipped;
        // the next op runs on a clean slate (buffers are freed on unwinding).
        o.ranks_replayed = 0;
        o.skipped = fmt::format("everything: {}", e.what());
      }
    }
    if (!o.skipped.empty()) m.skipped.push_back(fmt::format("op {} {}: {}", o.op, o.name, o.skipped));
    m.ops.push_back(o);
  }
  return m;
}

OpMeasurement measurement_of(const workloads::Workload& w, const OpStep& step) {
  OpMeasurement o;
  o.op = step.op;
  o.name = w.ops[step.op].name;
  o.kind = w.ops[step.op].kind;
  o.ranks = step.ranks;
  o.ranks_replayed = step.ranks_replayed;
  o.skipped = step.skipped;
  return o;
}

std::string format_replay(const workloads::Workload& w, const Measurements& m, int ranks,
                          const kernels::cuda::Repeat& repeat) {
  std::string out = fmt::format("replayed {} on {} x {}{} ({} warm-ups, {} repetitions, {} L2; median [min, max] in us)\n",
                                w.file, m.hardware.gpus, m.hardware.device,
                                ranks > 1 ? fmt::format(", one per MPI rank ({} ranks)", ranks) : "", repeat.warmups,
                                repeat.repetitions, repeat.cold_l2 ? "cold" : "warm");
  for (const OpMeasurement& op : m.ops) {
    out += fmt::format("  op {} {} ({}): ", op.op, op.name, kind_name(op.kind));
    if (op.time)
      out += fmt::format("{:.3f} [{:.3f}, {:.3f}] on {} of {} ranks", op.time->median_s * 1e6, op.time->min_s * 1e6,
                         op.time->max_s * 1e6, op.ranks_replayed, op.ranks);
    else
      out += "not replayed";
    if (!op.nccl.algorithm.empty()) out += fmt::format(" (NCCL: {} {})", op.nccl.algorithm, op.nccl.protocol);
    if (op.time && !op.time->gated) out += " (ungated: the host's launch time included)";
    out += "\n";
  }
  for (const std::string& s : m.skipped) out += "skipped: " + s + "\n";
  return out;
}

std::string format_replay_trace(const workloads::Workload& w, const Measurements& m) {
  const topology::Torus torus = w.make_torus();
  const std::uint32_t ranks = std::min<std::uint32_t>(static_cast<std::uint32_t>(m.hardware.gpus), torus.num_chips());
  Json events = Json::array();
  auto meta = [&](std::uint32_t pid, std::optional<int> tid, const char* name, Json args) {
    Json e;
    e["ph"] = "M";
    e["pid"] = pid;
    if (tid) e["tid"] = *tid;
    e["name"] = name;
    e["args"] = std::move(args);
    events.push_back(std::move(e));
  };
  for (std::uint32_t c = 0; c < ranks; ++c) {
    meta(c + 1, std::nullopt, "process_name", Json{{"name", "chip " + torus.chip_name(c)}});
    meta(c + 1, std::nullopt, "process_sort_index", Json{{"sort_index", c}});
    meta(c + 1, 1, "thread_name", Json{{"name", "ops"}});
  }
  // The ops back to back at their median times, on every chip with a GPU (a
  // collective whose groups did not fit is not in the file: it has no time).
  double t_us = 0;
  for (const OpMeasurement& o : m.ops) {
    if (!o.time) continue;
    for (std::uint32_t c = 0; c < ranks; ++c) {
      Json e;
      e["ph"] = "X";
      e["pid"] = c + 1;
      e["tid"] = 1;
      e["ts"] = t_us;
      e["dur"] = o.time->median_s * 1e6;
      e["name"] = o.name;
      e["cat"] = kind_name(o.kind);
      e["args"] = Json{{"median_s", o.time->median_s}, {"min_s", o.time->min_s}, {"max_s", o.time->max_s},
                       {"ranks_replayed", o.ranks_replayed}, {"ranks", o.ranks}};
      events.push_back(std::move(e));
    }
    t_us += o.time->median_s * 1e6;
  }
  meta(0, std::nullopt, "process_name", Json{{"name", "meshsim replay"}});
  Json root;
  root["displayTimeUnit"] = "ns";
  root["traceEvents"] = std::move(events);
  return root.dump() + "\n";
}

// ------------------------------------------------------------------ suite

namespace {

// NCCL's base latency of what it reported running, in seconds: the part of a
// measured time that the simulation adds whatever the link terms (0 when NCCL
// did not report, or ran an algorithm meshsim does not simulate). NVLS's and
// NVLS_TREE's are 0: what the simulation pays at their entry
// (driver::nvls_fixed_cost, driver::nvls_tree_fixed_cost) is NCCL's latency
// less their hops' latencies, which are the fitted term.
double base_latency_s(const NcclChoice& c) {
  const std::string algorithm = lower(c.algorithm);
  const std::optional<collectives::gpu::Protocol> p = collectives::gpu::parse_protocol(lower(c.protocol));
  if (!p) return 0;
  for (collectives::gpu::Algorithm a : {collectives::gpu::Algorithm::Ring, collectives::gpu::Algorithm::Tree})
    if (algorithm == collectives::gpu::algorithm_name(a)) return driver::nccl_base_latency(a, *p).seconds();
  return 0;
}

std::vector<std::uint64_t> geometric(std::uint64_t from, std::uint64_t to, std::uint64_t factor) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t x = from; x <= to; x *= factor) v.push_back(x);
  return v;
}

}  // namespace

Measurements run_suite(const cu::Probe& probe, const cu::Repeat& repeat, const SuiteOptions& options,
                       std::vector<std::string>& log, NcclTuningLog* nccl_log) {
  Measurements m;
  m.suite = true;
  m.repeat = repeat;
  m.hardware = hardware_info(probe, probe.gpus);
  cu::Session session(std::max(probe.gpus, 1));
  // Before returning: how many points were timed after a gate gave up.
  auto note_ungated = [&] {
    auto ungated = [](const auto& points) {
      return std::count_if(points.begin(), points.end(), [](const auto& p) { return !p.time.gated; });
    };
    const auto n = ungated(m.gemm) + ungated(m.copy) + ungated(m.collectives);
    if (n > 0)
      log.push_back(fmt::format("{} points without the gate (it gave up): their times include the host's launch time",
                                n));
  };
  // One point of the suite. A point the GPU refuses (a shape cuBLAS has no kernel
  // for, say) is skipped and named; after a failure that ends the session
  // (DeviceFatal) nothing more is measured, and what was measured is kept.
  std::string stopped;
  auto measure = [&](const std::string& what, const std::vector<cu::DeviceCall>& calls) -> std::optional<Spread> {
    if (!stopped.empty()) return std::nullopt;
    try {
      return spread_of(session.time(calls, repeat));
    } catch (const cu::DeviceFatal& e) {
      stopped = e.what();
      m.skipped.push_back(fmt::format("{} and everything after it: {}", what, e.what()));
      m.stopped = true;
    } catch (const Error& e) {
      m.skipped.push_back(fmt::format("{}: {}", what, e.what()));
    }
    return std::nullopt;
  };
  // GEMMs: the fit's shapes, then shapes off them that the fit never sees (held out).
  // The fit's: a grid of powers of two, and squares of partial waves. The powers of two
  // fill whole waves of 128x128 output tiles on 132 SMs (31.03 waves of 4096 tiles, 7.76
  // of 1024, 1.94 of 256; nearly so on 108 or 148), where the wave term of the fit
  // (kernels/calibrated_matmul.hpp) is the smooth term times about 1.03: the fit could
  // not tell the two apart. Squares of 9 to 45 tiles a side, at a K where compute
  // dominates, fill the last wave to every degree on any SM count.
  struct Shape {
    std::uint64_t m, n, k;
  };
  std::vector<Shape> fit_shapes;
  const std::vector<std::uint64_t> grid =
      options.quick ? std::vector<std::uint64_t>{256, 2048, 8192} : std::vector<std::uint64_t>{128, 512, 2048, 4096, 8192};
  for (std::uint64_t mm : grid)
    for (std::uint64_t nn : grid)
      for (std::uint64_t kk : grid) fit_shapes.push_back({mm, nn, kk});
  if (!options.quick)
    for (std::uint64_t kk : {std::uint64_t{2048}, std::uint64_t{8192}})
      for (std::uint64_t tiles = 9; tiles <= 45; tiles += 4) fit_shapes.push_back({128 * tiles, 128 * tiles, kk});
  const std::vector<Shape> holdout = {
      {3072, 3072, 3072}, {1536, 6144, 1536}, {6144, 1536, 3072}, {768, 12288, 768},  {12288, 768, 1536},
      {64, 6144, 6144},   {6144, 6144, 96},   {2560, 2560, 10240}, {384, 384, 24576}, {5120, 3584, 1792}};
  for (const std::string& dtype : options.dtypes) {
    auto measure_all = [&](const std::vector<Shape>& shapes, bool held_out) {
      std::size_t done = 0;
      for (const Shape& s : shapes) {
        cu::DeviceCall c;
        c.kind = cu::CallKind::Gemm;
        c.dtype = dtype;
        c.m = s.m, c.n = s.n, c.k = s.k;
        const char* set = held_out ? " (held out)" : "";
        if (auto t = measure(fmt::format("{} GEMM M={} N={} K={}{}", dtype, s.m, s.n, s.k, set), {c})) {
          m.gemm.push_back({dtype, s.m, s.n, s.k, held_out, *t});
          ++done;
        }
      }
      return done;
    };
    const std::size_t done = measure_all(fit_shapes, false);
    const std::size_t held = measure_all(holdout, true);
    log.push_back(fmt::format("{} GEMMs: {} grid shapes, {} held out", dtype, done, held));
  }
  for (std::uint64_t bytes : geometric(4096, std::uint64_t{1} << 30, 4)) {
    cu::DeviceCall c;
    c.kind = cu::CallKind::Copy;
    c.send_bytes = bytes;
    if (auto t = measure(fmt::format("HBM copy of {} bytes", bytes), {c})) m.copy.push_back({bytes, *t});
  }
  log.push_back(fmt::format("HBM copies: {} sizes, 4 KiB to 1 GiB", m.copy.size()));
  if (probe.gpus < 2) {
    m.skipped.push_back(fmt::format("collective sweeps: {} GPU visible, they need at least 2", probe.gpus));
    note_ungated();
    return m;
  }
  std::vector<int> devices;
  for (int d = 0; d < probe.gpus; ++d) devices.push_back(d);
  const auto n = static_cast<std::uint64_t>(probe.gpus);
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::AllToAll}) {
    for (std::uint64_t bytes : geometric(1024, options.max_collective_bytes, 4)) {
      const std::uint64_t v = bytes / (n * n * 4) * (n * n * 4);  // divisible into pieces of whole bf16 pairs
      if (v == 0) continue;
      std::vector<cu::DeviceCall> calls;
      for (int d : devices) {
        cu::DeviceCall c;
        c.device = d;
        c.dtype = "bf16";
        c.comm_devices = devices;
        c.comm_rank = d;
        switch (kind) {
          case OpKind::AllGather: c.kind = cu::CallKind::AllGather; c.send_bytes = v / n; c.recv_bytes = v; break;
          case OpKind::ReduceScatter: c.kind = cu::CallKind::ReduceScatter; c.send_bytes = v; c.recv_bytes = v / n; break;
          case OpKind::AllReduce: c.kind = cu::CallKind::AllReduce; c.send_bytes = c.recv_bytes = v; break;
          default: c.kind = cu::CallKind::SendRecv; c.send_bytes = c.recv_bytes = v / n; c.peer_bytes = v / (n * n); break;
        }
        calls.push_back(c);
      }
      if (nccl_log) nccl_log->next();  // past anything logged before this point
      if (auto t = measure(fmt::format("{} of {} bytes over {} GPUs", kind_name(kind), v, probe.gpus), calls)) {
        m.collectives.push_back({kind, probe.gpus, v, *t, {}});
        if (nccl_log)
          if (auto c = nccl_log->next()) m.collectives.back().nccl = *c;
      }
    }
  }
  log.push_back(fmt::format("collectives: {} points over {} GPUs", m.collectives.size(), probe.gpus));
  note_ungated();
  return m;
}

calibrate::Calibration fit_suite(const Measurements& m, std::vector<std::string>& not_fitted) {
  calibrate::Calibration cal;
  cal.file = m.file;
  cal.hardware = m.hardware;
  // Each fit on its own: one that the points cannot determine (a dtype whose
  // GEMMs were mostly refused, say) is named and left out; the others stand.
  auto fit = [&](const std::string& what, const auto& f) {
    try {
      f();
    } catch (const Error& e) {
      not_fitted.push_back(fmt::format("{}: {}", what, e.what()));
    }
  };
  std::vector<std::string> dtypes;
  for (const GemmMeasurement& g : m.gemm)
    if (std::find(dtypes.begin(), dtypes.end(), g.dtype) == dtypes.end()) dtypes.push_back(g.dtype);
  for (const std::string& dtype : dtypes)
    fit(dtype + " GEMMs", [&] {
      std::vector<calibrate::MatmulPoint> points;
      for (const GemmMeasurement& g : m.gemm)
        if (g.dtype == dtype && !g.holdout)
          points.push_back({g.m, g.k, g.n, dtype == "fp32" ? 4u : dtype == "int8" || dtype == "fp8" ? 1u : 2u,
                            g.time.median_s});
      cal.matmul.push_back(calibrate::fit_matmul(dtype, points, m.hardware.sms));
    });
  if (!m.copy.empty())
    fit("HBM copies", [&] {
      std::vector<calibrate::CopyPoint> points;
      for (const CopyMeasurement& c : m.copy) points.push_back({c.bytes, c.time.median_s});
      cal.hbm = calibrate::fit_hbm(points);
    });
  if (!m.collectives.empty()) {
    std::vector<calibrate::CollectivePoint> points;
    // One node's GPUs: the NVLink level (a multi-node suite is not written yet).
    for (const CollectiveMeasurement& c : m.collectives)
      points.push_back({c.kind, calibrate::Level::Nvlink, c.ranks, c.bytes, c.time.median_s, base_latency_s(c.nccl)});
    fit("NVLink link", [&] { cal.links.push_back(calibrate::fit_link(calibrate::Level::Nvlink, points)); });
    for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::AllToAll}) {
      bool any = false;
      for (const CollectiveMeasurement& c : m.collectives) any = any || c.kind == kind;
      if (any)
        fit(std::string(kind_name(kind)), [&] {
          cal.collectives.push_back(
              calibrate::fit_collective(kind, calibrate::Level::Nvlink, m.collectives.front().ranks, points));
        });
    }
  }
  return cal;
}

// ------------------------------------------------------------------ compare

std::string preset_for_device(const std::string& device) {
  for (const char* chip : {"A100", "H100", "H200", "B200"})
    if (device.find(chip) != std::string::npos) return lower(chip) + "-dgx";
  return "";
}

namespace {

double peak_of(const topology::ChipSpec& chip, const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") return chip.bf16_flops_per_s;
  if (dtype == "int8") return chip.int8_ops_per_s;
  if (dtype == "fp8") return chip.fp8_flops_per_s;
  return chip.fp32_flops_per_s;
}

// " RING/LL128": what NCCL chose, in a comparison row.
std::string nccl_label(const NcclChoice& c) {
  return c.algorithm.empty() ? "" : fmt::format(" {}/{}", c.algorithm, c.protocol);
}

std::string cell(double s) { return s > 0 ? fmt::format("{:>12.3f}", s * 1e6) : fmt::format("{:>12}", "-"); }
std::string pct(double p, bool have) { return have ? fmt::format("{:>+9.1f}%", p) : fmt::format("{:>10}", "-"); }

struct Row {
  std::string label, set;
  double measured = 0, before = 0, after = 0;
  bool ungated = false;  // timed without the gate: host launch time included
};

std::string table(const std::vector<Row>& rows, bool have_after) {
  std::string out = fmt::format("{:<44} {:>7} {:>12} {:>12} {:>10} {:>12} {:>10}\n", "what", "set", "measured us",
                                "before us", "error", "after us", "error");
  std::vector<double> before_err, after_err, holdout_before, holdout_after;
  std::size_t ungated = 0;
  for (const Row& r : rows) {
    const double eb = calibrate::error_percent(r.before, r.measured);
    const double ea = have_after ? calibrate::error_percent(r.after, r.measured) : 0;
    out += fmt::format("{:<44} {:>7} {} {} {} {} {}\n", r.label + (r.ungated ? " (ungated)" : ""), r.set,
                       cell(r.measured), cell(r.before), pct(eb, r.before > 0), cell(have_after ? r.after : 0),
                       pct(ea, have_after));
    ungated += r.ungated ? 1 : 0;
    if (r.before > 0) (r.set == "holdout" ? holdout_before : before_err).push_back(eb);
    if (have_after) (r.set == "holdout" ? holdout_after : after_err).push_back(ea);
  }
  auto line = [&](const char* what, const std::vector<double>& b, const std::vector<double>& a) {
    if (b.empty() && a.empty()) return;
    out += fmt::format("median absolute error, {} ({} rows): before {:.1f}%", what, std::max(b.size(), a.size()),
                       calibrate::median_abs(b));
    if (have_after) out += fmt::format(", after {:.1f}%", calibrate::median_abs(a));
    out += "\n";
  };
  line("fitted/replayed", before_err, after_err);
  line("held out", holdout_before, holdout_after);
  if (ungated > 0)
    out += fmt::format("ungated: {} rows were timed after a gate gave up: their times include the host's launch time\n",
                       ungated);
  return out;
}

}  // namespace

std::string format_comparison(const Measurements& m, const calibrate::Calibration* cal, const std::string& preset) {
  std::string out = fmt::format("{}: {} measured on {} x {} (CUDA {}, NCCL {}, {} L2)\n", m.file,
                                m.suite ? "calibration suite" : "replay of " + m.workload, m.hardware.gpus,
                                m.hardware.device, m.hardware.cuda_runtime.empty() ? "-" : m.hardware.cuda_runtime,
                                m.hardware.nccl.empty() ? "-" : m.hardware.nccl, m.repeat.cold_l2 ? "cold" : "warm");
  if (cal) out += fmt::format("calibration: {} (from {})\n", cal->file, cal->hardware.device);
  std::vector<Row> rows;
  if (!m.suite) {
    workloads::Workload w = workloads::load_workload(m.workload);
    const driver::RunResult before = driver::simulate(w);
    std::optional<driver::RunResult> after;
    if (cal) {
      calibrate::apply_calibration(w, *cal);
      after = driver::simulate(w);
    }
    for (const OpMeasurement& o : m.ops) {
      if (!o.time) continue;
      if (o.op >= before.ops.size() || before.ops[o.op].name != o.name)
        throw InputError(m.file, fmt::format("/ops/{}", &o - m.ops.data()),
                         fmt::format("op {} '{}' is not op {} of {}", o.op, o.name, o.op, m.workload));
      Row r;
      // What NCCL ran (when it said), and what meshsim runs: ring/ll128.
      const driver::OpResult& sim = before.ops[o.op];
      r.label = fmt::format("op {} {} ({}, {}/{} ranks){}{}", o.op, o.name, kind_name(o.kind), o.ranks_replayed,
                            o.ranks, nccl_label(o.nccl),
                            sim.protocol.empty() ? "" : fmt::format(" meshsim {}/{}", sim.algorithm, sim.protocol));
      r.set = "replay";
      r.measured = o.time->median_s;
      r.ungated = !o.time->gated;
      r.before = before.ops[o.op].time().seconds();
      if (after) r.after = after->ops[o.op].time().seconds();
      rows.push_back(r);
    }
    out += table(rows, cal != nullptr);
    for (const std::string& s : m.skipped) out += "skipped: " + s + "\n";
    return out;
  }
  const std::string name = preset.empty() ? preset_for_device(m.hardware.device) : preset;
  const topology::GpuPreset* p = topology::find_gpu_preset(name);
  if (!p)
    throw Error(fmt::format("no GPU preset for '{}' to compare with; give --hardware ({})", m.hardware.device,
                            topology::gpu_preset_names()));
  out += fmt::format("before: the {} preset (peak rates, HBM {:.3g} B/s, NVLink {:.3g} B/s, {:.3g} s per step)\n",
                     p->name, p->chip.hbm_bandwidth_bytes_per_s, static_cast<double>(p->nvlink.bandwidth_bytes_per_s),
                     2 * p->nvlink.latency.seconds());
  for (const GemmMeasurement& g : m.gemm) {
    Row r;
    r.label = fmt::format("gemm {} M={} N={} K={}", g.dtype, g.m, g.n, g.k);
    r.set = g.holdout ? "holdout" : "fit";
    r.measured = g.time.median_s;
    r.ungated = !g.time.gated;
    const calibrate::MatmulPoint pt{g.m, g.k, g.n, g.dtype == "fp32" ? 4u : g.dtype == "int8" || g.dtype == "fp8" ? 1u : 2u, 0};
    const double flops = calibrate::matmul_flops(pt), bytes = calibrate::matmul_hbm_bytes(pt);
    const double peak = peak_of(p->chip, g.dtype);
    if (peak > 0) r.before = std::max(flops / peak, bytes / p->chip.hbm_bandwidth_bytes_per_s);
    if (cal)
      if (const calibrate::MatmulFit* f = cal->matmul_for(g.dtype)) {
        const double hbm = cal->hbm ? cal->hbm->bandwidth_bytes_per_s : p->chip.hbm_bandwidth_bytes_per_s;
        r.after = std::max(f->time_s(g.m, g.k, g.n, pt.element_bytes), bytes / hbm);
      }
    rows.push_back(r);
  }
  for (const CopyMeasurement& c : m.copy) {
    Row r;
    r.label = fmt::format("hbm copy {} B", c.bytes);
    r.set = "fit";
    r.measured = c.time.median_s;
    r.ungated = !c.time.gated;
    r.before = 2.0 * static_cast<double>(c.bytes) / p->chip.hbm_bandwidth_bytes_per_s;
    if (cal && cal->hbm) r.after = cal->hbm->latency_s + 2.0 * static_cast<double>(c.bytes) / cal->hbm->bandwidth_bytes_per_s;
    rows.push_back(r);
  }
  for (const CollectiveMeasurement& c : m.collectives) {
    Row r;
    r.label = fmt::format("{} {} GPUs {} B{}", kind_name(c.kind), c.ranks, c.bytes, nccl_label(c.nccl));
    r.set = "fit";
    r.measured = c.time.median_s;
    r.ungated = !c.time.gated;
    const calibrate::RingTerms t = calibrate::ring_terms(c.kind, c.ranks, c.bytes);
    r.before = t.steps * 2 * p->nvlink.latency.seconds() + t.wire_bytes / static_cast<double>(p->nvlink.bandwidth_bytes_per_s);
    if (cal)
      if (const calibrate::LinkFit* f = cal->link_for(calibrate::Level::Nvlink))
        r.after = t.steps * f->step_latency_s + t.wire_bytes / f->bandwidth_bytes_per_s;
    rows.push_back(r);
  }
  out += table(rows, cal != nullptr);
  for (const std::string& s : m.skipped) out += "skipped: " + s + "\n";
  return out;
}

}  // namespace meshsim::replay
