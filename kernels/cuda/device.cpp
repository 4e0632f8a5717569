// The CUDA backend module (libmeshsim_cuda_backend.so; backend_abi.hpp): cuBLAS
// GEMMs, device-to-device copies and NCCL collectives, timed with CUDA events.
// Host code only (the CUDA runtime, cuBLAS and NCCL are host APIs): no nvcc, no
// kernels of our own. Nothing here links meshsim's own libraries: a failure is
// thrown as Failure inside the module and returned as one line at its boundary.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>

#include "kernels/cuda/backend_abi.hpp"

namespace meshsim::kernels::cuda {

namespace {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Failure(fmt::format("CUDA: {} failed: {}", what, cudaGetErrorString(e)));
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Failure(fmt::format("cuBLAS: {} failed: {}", what, cublasGetStatusString(s)));
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Failure(fmt::format("NCCL: {} failed: {}", what, ncclGetErrorString(r)));
}

ncclDataType_t nccl_type(const std::string& dtype) {
  if (dtype == "bf16") return ncclBfloat16;
  if (dtype == "fp16") return ncclFloat16;
  if (dtype == "fp32") return ncclFloat32;
  if (dtype == "int32") return ncclInt32;
  return ncclInt8;  // int8, fp8 and byte counts: reduced as int8 (the same bytes move)
}

std::uint64_t nccl_type_bytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp32" || dtype == "int32") return 4;
  return 1;
}

// Device memory, freed on scope exit.
struct Buffer {
  void* ptr = nullptr;
  int device = 0;
  Buffer(int dev, std::uint64_t bytes) : device(dev) {
    check(cudaSetDevice(dev), "cudaSetDevice");
    if (bytes == 0) bytes = 256;
    const cudaError_t e = cudaMalloc(&ptr, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Failure(fmt::format("cannot allocate {} bytes on GPU {}: {}", bytes, dev, cudaGetErrorString(e)));
    }
  }
  ~Buffer() {
    if (ptr) {
      cudaSetDevice(device);
      cudaFree(ptr);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

void probe_into(Probe& p) {
  p = Probe{};
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    p.problem = fmt::format("no usable GPU: {}", cudaGetErrorString(e));
    return;
  }
  if (count == 0) {
    p.problem = "no GPU is visible";
    return;
  }
  p.gpus = count;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    p.device = prop.name;
    p.sms = prop.multiProcessorCount;
  }
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    p.cuda_runtime = fmt::format("{}.{}", runtime / 1000, (runtime / 10) % 100);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    p.nccl = nccl >= 10000 ? fmt::format("{}.{}.{}", nccl / 10000, (nccl / 100) % 100, nccl % 100)
                           : fmt::format("{}.{}.{}", nccl / 1000, (nccl / 100) % 10, nccl % 100);
}

// The gate at the head of every device's stream in a timed repetition: a host
// function that returns once the host has issued the whole repetition, so the
// start event and the op's first kernel run back to back. A launch that blocks
// until the stream moves (a cudaMalloc inside a library, say) would wait on the
// gate forever; the gate gives up after kGateLimit, and the repetition is then
// run again without gates (Session::time).
constexpr auto kGateLimit = std::chrono::seconds(2);

struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> gave_up{false};
};

void CUDART_CB wait_at_gate(void* arg) {
  Gate& g = *static_cast<Gate*>(arg);
  const auto deadline = std::chrono::steady_clock::now() + kGateLimit;
  while (!g.open.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) {
      g.gave_up.store(true, std::memory_order_release);
      return;
    }
    std::this_thread::yield();
  }
}

struct Prepared {
  const DeviceCall* call = nullptr;
  std::unique_ptr<Buffer> a, b, c;
};

void launch_gemm(cublasHandle_t h, const DeviceCall& call, const Prepared& p) {
  const int m = static_cast<int>(call.m), n = static_cast<int>(call.n), k = static_cast<int>(call.k);
  // Column-major C[m,n] = A[m,k] . B[k,n]: lda = m, ldb = k, ldc = m.
  if (call.dtype == "int8") {
    const std::int32_t alpha = 1, beta = 0;
    check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, p.a->ptr, CUDA_R_8I, m, p.b->ptr, CUDA_R_8I, k,
                       &beta, p.c->ptr, CUDA_R_32I, m, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (int8)");
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = call.dtype == "fp16" ? CUDA_R_16F : call.dtype == "fp32" ? CUDA_R_32F : CUDA_R_16BF;
  check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, p.a->ptr, t, m, p.b->ptr, t, k, &beta, p.c->ptr, t,
                     m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

class CudaSession {
 public:
  explicit CudaSession(int gpus);
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;
  std::vector<double> time(const std::vector<DeviceCall>& calls, const Repeat& repeat);

 private:
  struct PerDevice {
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    std::unique_ptr<Buffer> scratch;  // overwritten before each repetition when Repeat::cold_l2
    std::uint64_t scratch_bytes = 0;
  };
  std::vector<PerDevice> dev_;
  std::map<std::vector<int>, std::vector<ncclComm_t>> comms_;
  std::vector<unsigned char> pattern_;  // host bytes copied into every buffer
  bool gates_ = true;                   // off once a gate had to give up

  ncclComm_t comm(const std::vector<int>& devices, int rank);
  void fill(const Buffer& b, std::uint64_t bytes);
  void issue(const std::vector<Prepared>& prepared);
  void sync(const std::vector<int>& devices);
};

CudaSession::CudaSession(int gpus) : dev_(static_cast<std::size_t>(gpus)) {
  for (int d = 0; d < gpus; ++d) {
    PerDevice& pd = dev_[static_cast<std::size_t>(d)];
    check(cudaSetDevice(d), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&pd.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&pd.blas), "cublasCreate");
    check(cublasSetStream(pd.blas, pd.stream), "cublasSetStream");
    check(cudaEventCreate(&pd.start), "cudaEventCreate");
    check(cudaEventCreate(&pd.stop), "cudaEventCreate");
    int l2 = 0;
    check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, d), "cudaDeviceGetAttribute (L2 size)");
    pd.scratch_bytes = 2 * static_cast<std::uint64_t>(std::max(l2, 1 << 20));
  }
  // bf16 values of magnitude 2^-10 to 1, either sign (read as fp16 they are
  // between 0.5 and 2, as fp32 small finite values too).
  pattern_.resize(std::size_t{16} << 20);
  std::mt19937 rng(7);
  for (std::size_t i = 0; i + 1 < pattern_.size(); i += 2) {
    const auto r = static_cast<std::uint32_t>(rng());
    const std::uint32_t sign = (r >> 31) << 15, exponent = 117 + (r >> 8) % 10, mantissa = r & 0x7f;
    const auto v = static_cast<std::uint16_t>(sign | (exponent << 7) | mantissa);
    std::memcpy(&pattern_[i], &v, 2);
  }
}

CudaSession::~CudaSession() {
  for (auto& [devices, list] : comms_)
    for (ncclComm_t c : list) ncclCommDestroy(c);
  for (std::size_t d = 0; d < dev_.size(); ++d) {
    PerDevice& pd = dev_[d];
    cudaSetDevice(static_cast<int>(d));
    pd.scratch.reset();
    if (pd.blas) cublasDestroy(pd.blas);
    if (pd.start) cudaEventDestroy(pd.start);
    if (pd.stop) cudaEventDestroy(pd.stop);
    if (pd.stream) cudaStreamDestroy(pd.stream);
  }
}

ncclComm_t CudaSession::comm(const std::vector<int>& devices, int rank) {
  auto it = comms_.find(devices);
  if (it == comms_.end()) {
    std::vector<ncclComm_t> c(devices.size());
    check(ncclCommInitAll(c.data(), static_cast<int>(devices.size()), devices.data()), "ncclCommInitAll");
    it = comms_.emplace(devices, std::move(c)).first;
  }
  return it->second[static_cast<std::size_t>(rank)];
}

// Fills a buffer with pseudo-random values in [-1, 1) of its type, so that
// GEMMs do not run on zeros (tensor cores draw less power on zeros).
void CudaSession::fill(const Buffer& b, std::uint64_t bytes) {
  check(cudaSetDevice(b.device), "cudaSetDevice");
  for (std::uint64_t off = 0; off < bytes; off += pattern_.size()) {
    const std::uint64_t n = std::min<std::uint64_t>(pattern_.size(), bytes - off);
    check(cudaMemcpy(static_cast<unsigned char*>(b.ptr) + off, pattern_.data(), n, cudaMemcpyHostToDevice),
          "cudaMemcpy");
  }
}

// The op's calls on every device's stream: GEMMs and copies first, then the
// NCCL calls of all devices in one group.
void CudaSession::issue(const std::vector<Prepared>& prepared) {
  bool nccl = false;
  for (const Prepared& p : prepared) {
    const DeviceCall& c = *p.call;
    PerDevice& pd = dev_[static_cast<std::size_t>(c.device)];
    check(cudaSetDevice(c.device), "cudaSetDevice");
    if (c.kind == CallKind::Gemm)
      launch_gemm(pd.blas, c, p);
    else if (c.kind == CallKind::Copy)
      check(cudaMemcpyAsync(p.b->ptr, p.a->ptr, c.send_bytes, cudaMemcpyDeviceToDevice, pd.stream),
            "cudaMemcpyAsync");
    else
      nccl = true;
  }
  if (!nccl) return;
  check(ncclGroupStart(), "ncclGroupStart");
  for (const Prepared& p : prepared) {
    const DeviceCall& c = *p.call;
    if (c.kind == CallKind::Gemm || c.kind == CallKind::Copy) continue;
    const cudaStream_t st = dev_[static_cast<std::size_t>(c.device)].stream;
    const ncclComm_t cm = comm(c.comm_devices, c.comm_rank);
    const ncclDataType_t t = nccl_type(c.dtype);
    const std::uint64_t eb = nccl_type_bytes(c.dtype);
    switch (c.kind) {
      case CallKind::AllGather:
        check(ncclAllGather(p.a->ptr, p.b->ptr, c.send_bytes / eb, t, cm, st), "ncclAllGather");
        break;
      case CallKind::ReduceScatter:
        check(ncclReduceScatter(p.a->ptr, p.b->ptr, c.recv_bytes / eb, t, ncclSum, cm, st), "ncclReduceScatter");
        break;
      case CallKind::AllReduce:
        check(ncclAllReduce(p.a->ptr, p.b->ptr, c.send_bytes / eb, t, ncclSum, cm, st), "ncclAllReduce");
        break;
      case CallKind::SendRecv:
        for (std::size_t r = 0; r < c.comm_devices.size(); ++r) {
          if (static_cast<int>(r) == c.comm_rank) continue;
          check(ncclSend(static_cast<unsigned char*>(p.a->ptr) + r * c.peer_bytes, c.peer_bytes, ncclInt8,
                         static_cast<int>(r), cm, st),
                "ncclSend");
          check(ncclRecv(static_cast<unsigned char*>(p.b->ptr) + r * c.peer_bytes, c.peer_bytes, ncclInt8,
                         static_cast<int>(r), cm, st),
                "ncclRecv");
        }
        break;
      case CallKind::Send:
        check(ncclSend(p.a->ptr, c.send_bytes, ncclInt8, c.peer, cm, st), "ncclSend");
        break;
      case CallKind::Recv:
        check(ncclRecv(p.b->ptr, c.recv_bytes, ncclInt8, c.peer, cm, st), "ncclRecv");
        break;
      case CallKind::Gemm:
      case CallKind::Copy:
        break;
    }
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
}

void CudaSession::sync(const std::vector<int>& devices) {
  for (int d : devices) {
    check(cudaSetDevice(d), "cudaSetDevice");
    check(cudaStreamSynchronize(dev_[static_cast<std::size_t>(d)].stream), "cudaStreamSynchronize");
  }
}

std::vector<double> CudaSession::time(const std::vector<DeviceCall>& calls, const Repeat& repeat) {
  std::vector<Prepared> prepared;
  std::vector<int> devices;  // in order of first appearance
  for (const DeviceCall& call : calls) {
    if (call.device < 0 || static_cast<std::size_t>(call.device) >= dev_.size())
      throw Failure(fmt::format("GPU {} is not visible", call.device));
    if (std::find(devices.begin(), devices.end(), call.device) == devices.end()) devices.push_back(call.device);
    Prepared p;
    p.call = &call;
    if (call.kind == CallKind::Gemm) {
      if (call.dtype == "fp8") throw Failure("fp8 GEMMs need cuBLASLt, which the replay does not use yet");
      if (call.m > INT_MAX || call.n > INT_MAX || call.k > INT_MAX)
        throw Failure(fmt::format("GEMM M={} N={} K={} exceeds cuBLAS's 32-bit sizes", call.m, call.n, call.k));
      const std::uint64_t e = call.dtype == "fp32" ? 4 : call.dtype == "int8" ? 1 : 2;
      const std::uint64_t ce = call.dtype == "int8" ? 4 : e;
      p.a = std::make_unique<Buffer>(call.device, call.m * call.k * e);
      p.b = std::make_unique<Buffer>(call.device, call.k * call.n * e);
      p.c = std::make_unique<Buffer>(call.device, call.m * call.n * ce);
      fill(*p.a, call.m * call.k * e);
      fill(*p.b, call.k * call.n * e);
    } else {
      const std::uint64_t in = call.kind == CallKind::SendRecv ? call.peer_bytes * call.comm_devices.size()
                                                               : call.send_bytes;
      const std::uint64_t out = call.kind == CallKind::SendRecv ? in
                                : call.kind == CallKind::Copy   ? call.send_bytes
                                                                : call.recv_bytes;
      p.a = std::make_unique<Buffer>(call.device, in);
      p.b = std::make_unique<Buffer>(call.device, out);
      fill(*p.a, in);
      if (call.kind != CallKind::Copy) comm(call.comm_devices, call.comm_rank);
    }
    prepared.push_back(std::move(p));
  }
  if (repeat.cold_l2)
    for (int d : devices) {
      PerDevice& pd = dev_[static_cast<std::size_t>(d)];
      if (!pd.scratch) pd.scratch = std::make_unique<Buffer>(d, pd.scratch_bytes);
    }

  sync(devices);
  for (int i = 0; i < repeat.warmups; ++i) {
    issue(prepared);
    sync(devices);
  }
  std::vector<double> samples;
  for (int i = 0; i < repeat.repetitions; ++i) {
    Gate gate;
    const bool gated = gates_;
    for (int d : devices) {
      PerDevice& pd = dev_[static_cast<std::size_t>(d)];
      check(cudaSetDevice(d), "cudaSetDevice");
      if (repeat.cold_l2)
        check(cudaMemsetAsync(pd.scratch->ptr, i & 0xff, pd.scratch_bytes, pd.stream), "cudaMemsetAsync (L2 flush)");
      if (gated) check(cudaLaunchHostFunc(pd.stream, wait_at_gate, &gate), "cudaLaunchHostFunc");
      check(cudaEventRecord(pd.start, pd.stream), "cudaEventRecord");
    }
    issue(prepared);
    for (int d : devices) {
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaEventRecord(dev_[static_cast<std::size_t>(d)].stop, dev_[static_cast<std::size_t>(d)].stream),
            "cudaEventRecord");
    }
    gate.open.store(true, std::memory_order_release);
    sync(devices);  // the gate outlives every host function that reads it
    if (gate.gave_up.load(std::memory_order_acquire)) {
      gates_ = false;  // this repetition again, without gates, and every later one
      --i;
      continue;
    }
    double longest = 0;
    for (int d : devices) {
      const PerDevice& pd = dev_[static_cast<std::size_t>(d)];
      float ms = 0;
      check(cudaEventElapsedTime(&ms, pd.start, pd.stop), "cudaEventElapsedTime");
      longest = std::max(longest, static_cast<double>(ms) * 1e-3);
    }
    samples.push_back(longest);
  }
  return samples;
}

// ------------------------------------------------------------------ boundary

template <typename F>
bool guarded(std::string& error, F&& f) {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown failure in the CUDA backend";
  }
  return false;
}

void api_probe(Probe& out) {
  std::string error;
  if (!guarded(error, [&] { probe_into(out); })) {
    out = Probe{};
    out.problem = error;
  }
}

void* api_open(int gpus, std::string& error) {
  CudaSession* s = nullptr;
  guarded(error, [&] { s = new CudaSession(gpus); });
  return s;
}

void api_close(void* session) { delete static_cast<CudaSession*>(session); }

bool api_time(void* session, const std::vector<DeviceCall>& calls, const Repeat& repeat, std::vector<double>& samples,
              std::string& error) {
  return guarded(error, [&] { samples = static_cast<CudaSession*>(session)->time(calls, repeat); });
}

}  // namespace

}  // namespace meshsim::kernels::cuda

const meshsim::kernels::cuda::BackendApi* meshsim_cuda_backend() {
  static const meshsim::kernels::cuda::BackendApi api = [] {
    meshsim::kernels::cuda::BackendApi a;
    a.probe = meshsim::kernels::cuda::api_probe;
    a.open_session = meshsim::kernels::cuda::api_open;
    a.close_session = meshsim::kernels::cuda::api_close;
    a.time = meshsim::kernels::cuda::api_time;
    return a;
  }();
  return &api;
}
