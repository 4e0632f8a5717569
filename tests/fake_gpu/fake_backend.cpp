// A fake GPU behind the CUDA backend's boundary (kernels/cuda/backend_abi.hpp),
// for tests only: `MESHSIM_CUDA_BACKEND=.../libmeshsim_fake_gpu.so meshsim ...`
// runs replay, calibrate and scripts/gpu-check end to end on a machine without
// a GPU. Nothing it returns is a measurement: every time comes from the
// synthetic law below, whose device name says so.
//
// The law is a roofline with wave quantisation, deliberately not the additive
// form the calibration fits (kernels/calibrated_matmul.hpp), so a test of the
// fit also sees a model mismatch:
//   GEMM        4 us + max(waves x 2k.128.128 / (0.75 peak / SMs), HBM bytes / 3.2 TB/s)
//   copy        2 us + 2 bytes / 3.2 TB/s
//   collective  8 us + ring steps x 3 us + bytes through a rank's port / 150 GB/s
// with a deterministic +-1 % jitter per repetition.
//
// Under mpirun (one process per GPU) it makes the same collective calls on the
// tool's Coordinator as the CUDA backend: agreement on failures, a broadcast per
// communicator, the longest time of each repetition.
//
// Environment: MESHSIM_FAKE_GPUS (default 1) GPUs of MESHSIM_FAKE_MEMORY_MB
// (default 141000) each, named MESHSIM_FAKE_DEVICE (default names an H200, so that
// `compare` picks the h200-dgx preset); MESHSIM_FAKE_FAIL_GEMM_ON=d fails every
// GEMM of device d (under mpirun: on that rank alone); MESHSIM_FAKE_FATAL_ON_COLLECTIVE=n
// makes the session's n-th op with collectives fail as a broken NCCL would (fatal:
// the session refuses every later op); MESHSIM_FAKE_GATE_GIVES_UP_ON=n makes the
// gate give up in the session's n-th timed op: it and every later op are timed
// ungated, with 5 us of host launch time per call added to each repetition;
// under mpirun MESHSIM_FAKE_NCCL_INIT_FAILS_ON=r makes rank r fail while NCCL sets
// up its first communicator and that communicator's other members wait for it, as
// in NCCL, until their watchdog (kernels/cuda/watchdog.hpp) ends them (the other
// ranks wait in the agreement that follows).
//
// Like NCCL under NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=TUNING, it empties
// NCCL_DEBUG_FILE when it first logs in a process and appends a
// tuning line per collective launch to it (from the process that
// drives the communicator's rank 0): algorithm NCCL_ALGO (default RING), protocol
// NCCL_PROTO, else LL below 64 KiB per rank, LL128 below 8 MiB, SIMPLE above.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "kernels/cuda/backend_abi.hpp"
#include "kernels/cuda/watchdog.hpp"

namespace meshsim::kernels::cuda {
namespace {

constexpr int kSms = 132;
constexpr double kHbm = 3.2e12, kLink = 150e9, kStep = 3e-6;

long env_int(const char* name, long fallback, long lo, long hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end || x < lo || x > hi) throw std::runtime_error(std::string(name) + ": not an integer in range");
  return x;
}

double peak(const std::string& dtype) {
  if (dtype == "fp32") return 60e12;
  if (dtype == "int8" || dtype == "fp8") return 1600e12;
  return 800e12;
}

std::uint64_t element_bytes(const std::string& dtype) {
  return dtype == "fp32" || dtype == "int32" ? 4 : dtype == "int8" || dtype == "fp8" || dtype == "bytes" ? 1 : 2;
}

double gemm_time(const DeviceCall& c) {
  const std::uint64_t tiles = ((c.m + 127) / 128) * ((c.n + 127) / 128);
  const double waves = std::ceil(static_cast<double>(tiles) / kSms);
  const double compute = waves * 2.0 * static_cast<double>(c.k) * 128 * 128 / (0.75 * peak(c.dtype) / kSms);
  const double e = static_cast<double>(element_bytes(c.dtype));
  const double bytes = (static_cast<double>(c.m * c.k + c.k * c.n) + static_cast<double>(c.m * c.n)) * e;
  return 4e-6 + std::max(compute, bytes / kHbm);
}

double collective_time(const DeviceCall& c) {
  const double n = static_cast<double>(c.comm_devices.size());
  double steps = 1, wire = 0;
  switch (c.kind) {
    case CallKind::AllGather: steps = n - 1; wire = (n - 1) / n * static_cast<double>(c.recv_bytes); break;
    case CallKind::ReduceScatter: steps = n - 1; wire = (n - 1) / n * static_cast<double>(c.send_bytes); break;
    case CallKind::AllReduce: steps = 2 * (n - 1); wire = 2 * (n - 1) / n * static_cast<double>(c.send_bytes); break;
    case CallKind::SendRecv: wire = (n - 1) * static_cast<double>(c.peer_bytes); break;
    case CallKind::Send: wire = static_cast<double>(c.send_bytes); break;
    case CallKind::Recv: wire = static_cast<double>(c.recv_bytes); break;
    case CallKind::Gemm:
    case CallKind::Copy: break;
  }
  return 8e-6 + steps * kStep + wire / kLink;
}

struct FakeSession {
  int gpus = 0;
  double memory = 0;
  Coordinator* coord = nullptr;  // several processes: this one is device coord->rank()
  std::set<std::vector<int>> comms;
  long collective_ops = 0;  // timed so far
  long timed_ops = 0;       // all ops timed so far
  bool gated = true;        // false once a gate gave up
  std::string broken;       // why a fatal failure ended the session
};

// One call's time; throws what the real backend would (a device out of range,
// fp8, a buffer larger than the device's memory).
double call_time(const FakeSession& s, const DeviceCall& c) {
  if (c.device < 0 || c.device >= s.gpus) throw std::runtime_error("GPU " + std::to_string(c.device) + " is not visible");
  if (c.kind == CallKind::Gemm && env_int("MESHSIM_FAKE_FAIL_GEMM_ON", -1, -1, 1 << 20) == c.device)
    throw std::runtime_error("fake GPU " + std::to_string(c.device) + ": GEMM failure (MESHSIM_FAKE_FAIL_GEMM_ON)");
  double bytes = 0;
  double t = 0;
  if (c.kind == CallKind::Gemm) {
    if (c.dtype != "bf16" && c.dtype != "fp16" && c.dtype != "fp32" && c.dtype != "int8" && c.dtype != "fp8")
      throw std::runtime_error("GEMM in " + c.dtype +
                               ": the CUDA backend runs GEMMs in bf16, fp16, fp32, int8 and fp8 only");
    if (c.dtype == "int8" && (c.m % 4 || c.k % 4))
      throw std::runtime_error("int8 GEMM M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" +
                               std::to_string(c.k) + ": cuBLAS's int8 kernels need M and K multiples of 4");
    if (c.dtype == "fp8" && (c.k % 16 || c.m % 8))
      throw std::runtime_error("fp8 GEMM M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" +
                               std::to_string(c.k) + ": cuBLASLt's fp8 kernels need K a multiple of 16 and M of 8");
    const double e = static_cast<double>(element_bytes(c.dtype));
    const double out = c.dtype == "int8" ? 4 : c.dtype == "fp8" ? 2 : e;  // int32 and bf16 results
    bytes = static_cast<double>(c.m * c.k + c.k * c.n) * e + static_cast<double>(c.m * c.n) * out;
    t = gemm_time(c);
  } else if (c.kind == CallKind::Copy) {
    bytes = 2.0 * static_cast<double>(c.send_bytes);
    t = 2e-6 + 2.0 * static_cast<double>(c.send_bytes) / kHbm;
  } else {
    bytes = static_cast<double>(c.send_bytes + c.recv_bytes + 2 * c.peer_bytes * c.comm_devices.size());
    t = collective_time(c);
  }
  if (bytes > s.memory)
    throw std::runtime_error("cannot allocate " + std::to_string(static_cast<std::uint64_t>(bytes)) + " bytes on GPU " +
                             std::to_string(c.device) + ": out of memory");
  return t;
}

// Repetition i of an op: its time with a jitter that depends only on the op's
// calls and i, so one process and several give the same samples.
double jittered(double t, const std::vector<DeviceCall>& calls, int i) {
  std::uint64_t seed = 1469598103934665603ull;
  for (const DeviceCall& c : calls)
    for (std::uint64_t v : {c.m, c.n, c.k, c.send_bytes, c.recv_bytes, c.peer_bytes})
      seed = (seed ^ v) * 1099511628211ull;
  const std::uint64_t h = (seed ^ static_cast<std::uint64_t>(i)) * std::uint64_t{0x9e3779b97f4a7c15};
  return t * (1 + static_cast<double>(h >> 53) / static_cast<double>(1ull << 11) * 0.02 - 0.01);
}

std::vector<double> time_calls(FakeSession& s, const std::vector<DeviceCall>& calls, const Repeat& repeat) {
  double t = 0;
  if (!s.coord) {
    for (const DeviceCall& c : calls) t = std::max(t, call_time(s, c));
  } else {
    // As the CUDA backend: its own calls, agreement on failures, the
    // communicator ids broadcast by their first member, the longest time.
    std::string error;
    try {
      for (const DeviceCall& c : calls)
        if (c.device == s.coord->rank()) t = std::max(t, call_time(s, c));
    } catch (const std::exception& e) {
      error = e.what();
    }
    error = s.coord->first_error(error);
    if (!error.empty()) throw std::runtime_error(error);
    for (const DeviceCall& c : calls) {
      if (c.kind == CallKind::Gemm || c.kind == CallKind::Copy || s.comms.count(c.comm_devices)) continue;
      std::string id;
      const std::string expected = "fake nccl id of " + std::to_string(c.comm_devices.size()) + " from " +
                                   std::to_string(c.comm_devices.front());
      if (s.coord->rank() == c.comm_devices.front()) id = expected;
      s.coord->broadcast(id, c.comm_devices.front());
      if (id != expected) error = "fake NCCL: communicator id garbled in the broadcast";
      // As ncclCommInitRank: a member that fails leaves the others waiting for it
      // (MESHSIM_FAKE_NCCL_INIT_FAILS_ON=r), until the watchdog ends them.
      const long fails_on = env_int("MESHSIM_FAKE_NCCL_INIT_FAILS_ON", -1, -1, 1 << 20);
      try {
        const std::chrono::seconds limit = nccl_init_limit();
        const bool with_failing = std::find(c.comm_devices.begin(), c.comm_devices.end(), fails_on) !=
                                  c.comm_devices.end();
        const bool member = std::find(c.comm_devices.begin(), c.comm_devices.end(), s.coord->rank()) !=
                            c.comm_devices.end();
        if (with_failing && member && error.empty()) {
          if (s.coord->rank() == fails_on) {
            error = "fake NCCL: ncclCommInitRank failed (MESHSIM_FAKE_NCCL_INIT_FAILS_ON)";
          } else {
            const Watchdog watchdog(limit, nccl_init_timeout_message(s.coord->rank(), limit));
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the peer never comes
          }
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
      s.comms.insert(c.comm_devices);
    }
    error = s.coord->first_error(error);
    if (!error.empty()) throw std::runtime_error(error);
  }
  std::vector<double> samples;
  for (int i = 0; i < repeat.repetitions; ++i) {
    const double mine = jittered(t, calls, i);
    samples.push_back(s.coord ? s.coord->max(mine) : mine);
  }
  return samples;
}

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// NCCL's tuning lines for one op's collectives, `launches` times each (see the top).
void log_tuning(const FakeSession& s, const std::vector<DeviceCall>& calls, int launches) {
  const char* level = std::getenv("NCCL_DEBUG");
  const char* file = std::getenv("NCCL_DEBUG_FILE");
  const char* subsys = std::getenv("NCCL_DEBUG_SUBSYS");
  if (!level || std::string(level) != "INFO" || !file || !*file ||
      (subsys && upper(subsys).find("TUNING") == std::string::npos))
    return;
  std::string path;  // NCCL writes %% for a literal %
  for (const char* p = file; *p; ++p) {
    path += *p;
    if (p[0] == '%' && p[1] == '%') ++p;
  }
  // As NCCL does (fopen "w" when it first logs): emptied once per process.
  static bool opened = false;
  std::ofstream out(path, opened ? std::ios::app : std::ios::trunc);
  opened = true;
  for (const DeviceCall& c : calls) {
    const char* func = c.kind == CallKind::AllGather       ? "AllGather"
                       : c.kind == CallKind::ReduceScatter ? "ReduceScatter"
                       : c.kind == CallKind::AllReduce     ? "AllReduce"
                                                           : nullptr;
    if (!func || c.comm_rank != 0 || (s.coord && c.device != s.coord->rank())) continue;
    const std::uint64_t bytes = c.kind == CallKind::ReduceScatter ? c.recv_bytes : c.send_bytes;
    const char* algo = std::getenv("NCCL_ALGO");
    const char* proto = std::getenv("NCCL_PROTO");
    const std::string protocol = proto && *proto ? upper(proto)
                                 : bytes < (64u << 10) ? "LL"
                                 : bytes < (8u << 20)  ? "LL128"
                                                       : "SIMPLE";
    for (int i = 0; i < launches; ++i)
      out << "fake:" << ::getpid() << ":" << ::getpid() << " [0] NCCL INFO " << func << ": " << bytes
          << " Bytes -> Algo " << (algo && *algo ? upper(algo) : std::string("RING")) << " proto " << protocol
          << " channel{Lo..Hi}={0..0}\n";
  }
}

template <typename F>
bool guarded(std::string& error, F&& f) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    error = e.what();
  }
  return false;
}

FakeSession* new_session(int gpus, Coordinator* coord) {
  auto* s = new FakeSession;
  s->gpus = gpus;
  s->memory = 1e6 * static_cast<double>(env_int("MESHSIM_FAKE_MEMORY_MB", 141000, 1, 1 << 30));
  s->coord = coord;
  return s;
}

void fake_probe(Probe& p) {
  p = Probe{};
  std::string error;
  if (!guarded(error, [&] { p.gpus = static_cast<int>(env_int("MESHSIM_FAKE_GPUS", 1, 0, 64)); })) {
    p.problem = "no usable GPU: " + error;
    return;
  }
  if (p.gpus == 0) {
    p.problem = "no GPU is visible";
    return;
  }
  const char* name = std::getenv("MESHSIM_FAKE_DEVICE");
  p.device = name && *name ? name : "NVIDIA H200 (meshsim fake GPU: synthetic times, not a measurement)";
  p.sms = kSms;
  p.cuda_runtime = "fake";
  p.nccl = "fake";
}

void* fake_open(int gpus, std::string& error) {
  FakeSession* s = nullptr;
  guarded(error, [&] { s = new_session(gpus, nullptr); });
  return s;
}

void* fake_open_rank(Coordinator& coord, int local_device, std::string& error) {
  FakeSession* s = nullptr;
  guarded(error, [&] {
    if (local_device < 0 || local_device >= env_int("MESHSIM_FAKE_GPUS", 1, 0, 64))
      throw std::runtime_error("GPU " + std::to_string(local_device) + " is not visible");
    s = new_session(coord.size(), &coord);
  });
  return s;
}

void fake_close(void* s) { delete static_cast<FakeSession*>(s); }

bool fake_time(void* session, const std::vector<DeviceCall>& calls, const Repeat& repeat, Timing& out,
               std::string& error, bool& fatal) {
  FakeSession& s = *static_cast<FakeSession*>(session);
  if (!s.broken.empty()) {
    error = "the GPU session ended after an earlier failure: " + s.broken;
    fatal = true;
    return false;
  }
  const bool collective = std::any_of(calls.begin(), calls.end(), [](const DeviceCall& c) {
    return c.kind != CallKind::Gemm && c.kind != CallKind::Copy;
  });
  if (collective) {
    long fail_on = 0;
    if (!guarded(error, [&] { fail_on = env_int("MESHSIM_FAKE_FATAL_ON_COLLECTIVE", 0, 0, 1 << 30); })) return false;
    if (++s.collective_ops == fail_on) {
      s.broken = "fake NCCL: unhandled system error (MESHSIM_FAKE_FATAL_ON_COLLECTIVE)";
      error = s.broken;
      fatal = true;
      return false;
    }
  }
  return guarded(error, [&] {
    const long gives_up_on = env_int("MESHSIM_FAKE_GATE_GIVES_UP_ON", 0, 0, 1 << 30);
    if (++s.timed_ops == gives_up_on) s.gated = false;
    out.samples = time_calls(s, calls, repeat);
    if (!s.gated)
      for (double& t : out.samples) t += 5e-6 * static_cast<double>(calls.size());
    out.gated = s.gated;
    log_tuning(s, calls, repeat.warmups + repeat.repetitions);
  });
}

}  // namespace
}  // namespace meshsim::kernels::cuda

const meshsim::kernels::cuda::BackendApi* meshsim_cuda_backend() {
  static const meshsim::kernels::cuda::BackendApi api = [] {
    meshsim::kernels::cuda::BackendApi a;
    a.probe = meshsim::kernels::cuda::fake_probe;
    a.open_session = meshsim::kernels::cuda::fake_open;
    a.open_rank_session = meshsim::kernels::cuda::fake_open_rank;
    a.close_session = meshsim::kernels::cuda::fake_close;
    a.time = meshsim::kernels::cuda::fake_time;
    return a;
  }();
  return &api;
}
