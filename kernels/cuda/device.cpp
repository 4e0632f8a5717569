// The CUDA backend: cuBLAS GEMMs, device-to-device copies and NCCL collectives,
// timed with CUDA events. Host code only (the CUDA runtime, cuBLAS and NCCL are
// host APIs): no nvcc, no kernels of our own.
#include "kernels/cuda/device.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <random>

#include "base/error.hpp"

namespace meshsim::kernels::cuda {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(fmt::format("CUDA: {} failed: {}", what, cudaGetErrorString(e)));
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(fmt::format("cuBLAS: {} failed: status {}", what, static_cast<int>(s)));
}

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(fmt::format("NCCL: {} failed: {}", what, ncclGetErrorString(r)));
}

std::string version_string(int v, int major_div, int minor_div, int minor_mod) {
  return fmt::format("{}.{}", v / major_div, (v / minor_div) % minor_mod);
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
      throw Error(fmt::format("cannot allocate {} bytes on GPU {}: {}", bytes, dev, cudaGetErrorString(e)));
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

}  // namespace

Probe probe() {
  Probe p;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    p.problem = fmt::format("no usable GPU: {}", cudaGetErrorString(e));
    return p;
  }
  if (count == 0) {
    p.problem = "no GPU is visible";
    return p;
  }
  p.gpus = count;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    p.device = prop.name;
    p.sms = prop.multiProcessorCount;
  }
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) p.cuda_runtime = version_string(runtime, 1000, 10, 100);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    p.nccl = nccl >= 10000 ? fmt::format("{}.{}.{}", nccl / 10000, (nccl / 100) % 100, nccl % 100)
                           : fmt::format("{}.{}.{}", nccl / 1000, (nccl / 100) % 10, nccl % 100);
  return p;
}

bool built_with_cuda() { return true; }

struct Session::Impl {
  int gpus = 0;
  std::vector<cudaStream_t> streams;
  std::vector<cublasHandle_t> blas;
  std::vector<cudaEvent_t> start, stop;
  std::map<std::vector<int>, std::vector<ncclComm_t>> comms;
  std::vector<unsigned char> pattern;  // host bytes copied into every buffer

  ncclComm_t comm(const std::vector<int>& devices, int rank) {
    auto it = comms.find(devices);
    if (it == comms.end()) {
      std::vector<ncclComm_t> c(devices.size());
      check(ncclCommInitAll(c.data(), static_cast<int>(devices.size()), devices.data()), "ncclCommInitAll");
      it = comms.emplace(devices, std::move(c)).first;
    }
    return it->second[static_cast<std::size_t>(rank)];
  }

  // Fills a buffer with pseudo-random values in [-1, 1) of its type, so that
  // GEMMs do not run on zeros (tensor cores draw less power on zeros).
  void fill(const Buffer& b, std::uint64_t bytes) {
    check(cudaSetDevice(b.device), "cudaSetDevice");
    for (std::uint64_t off = 0; off < bytes; off += pattern.size()) {
      const std::uint64_t n = std::min<std::uint64_t>(pattern.size(), bytes - off);
      check(cudaMemcpy(static_cast<unsigned char*>(b.ptr) + off, pattern.data(), n, cudaMemcpyHostToDevice),
            "cudaMemcpy");
    }
  }
};

Session::Session(int gpus) : impl_(std::make_unique<Impl>()) {
  impl_->gpus = gpus;
  for (int d = 0; d < gpus; ++d) {
    check(cudaSetDevice(d), "cudaSetDevice");
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    impl_->streams.push_back(s);
    cublasHandle_t h;
    check(cublasCreate(&h), "cublasCreate");
    check(cublasSetStream(h, s), "cublasSetStream");
    impl_->blas.push_back(h);
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    impl_->start.push_back(a);
    impl_->stop.push_back(b);
  }
  // bf16 values of magnitude 2^-10 to 1, either sign (read as fp16 they are
  // between 0.5 and 2, as fp32 small finite values too).
  impl_->pattern.resize(std::size_t{16} << 20);
  std::mt19937 rng(7);
  for (std::size_t i = 0; i + 1 < impl_->pattern.size(); i += 2) {
    const auto r = static_cast<std::uint32_t>(rng());
    const std::uint32_t sign = (r >> 31) << 15, exponent = 117 + (r >> 8) % 10, mantissa = r & 0x7f;
    const auto v = static_cast<std::uint16_t>(sign | (exponent << 7) | mantissa);
    std::memcpy(&impl_->pattern[i], &v, 2);
  }
}

Session::~Session() {
  for (auto& [devices, list] : impl_->comms)
    for (ncclComm_t c : list) ncclCommDestroy(c);
  for (std::size_t d = 0; d < impl_->streams.size(); ++d) {
    cudaSetDevice(static_cast<int>(d));
    cublasDestroy(impl_->blas[d]);
    cudaEventDestroy(impl_->start[d]);
    cudaEventDestroy(impl_->stop[d]);
    cudaStreamDestroy(impl_->streams[d]);
  }
}

namespace {

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

}  // namespace

std::vector<double> Session::time(const std::vector<DeviceCall>& calls, const Repeat& repeat) {
  Impl& s = *impl_;
  std::vector<Prepared> prepared;
  std::vector<int> devices;  // in order of first appearance
  for (const DeviceCall& call : calls) {
    if (call.device < 0 || call.device >= s.gpus) throw Error(fmt::format("GPU {} is not visible", call.device));
    if (std::find(devices.begin(), devices.end(), call.device) == devices.end()) devices.push_back(call.device);
    Prepared p;
    p.call = &call;
    if (call.kind == CallKind::Gemm) {
      if (call.dtype == "fp8") throw Error("fp8 GEMMs need cuBLASLt, which the replay does not use yet");
      if (call.m > INT_MAX || call.n > INT_MAX || call.k > INT_MAX)
        throw Error(fmt::format("GEMM M={} N={} K={} exceeds cuBLAS's 32-bit sizes", call.m, call.n, call.k));
      const std::uint64_t e = call.dtype == "fp32" ? 4 : call.dtype == "int8" ? 1 : 2;
      const std::uint64_t ce = call.dtype == "int8" ? 4 : e;
      p.a = std::make_unique<Buffer>(call.device, call.m * call.k * e);
      p.b = std::make_unique<Buffer>(call.device, call.k * call.n * e);
      p.c = std::make_unique<Buffer>(call.device, call.m * call.n * ce);
      s.fill(*p.a, call.m * call.k * e);
      s.fill(*p.b, call.k * call.n * e);
    } else {
      const std::uint64_t in = call.kind == CallKind::SendRecv ? call.peer_bytes * call.comm_devices.size()
                                                               : call.send_bytes;
      const std::uint64_t out = call.kind == CallKind::SendRecv ? in
                                : call.kind == CallKind::Copy   ? call.send_bytes
                                                                : call.recv_bytes;
      p.a = std::make_unique<Buffer>(call.device, in);
      p.b = std::make_unique<Buffer>(call.device, out);
      s.fill(*p.a, in);
      if (call.kind != CallKind::Copy && call.kind != CallKind::Gemm) s.comm(call.comm_devices, call.comm_rank);
    }
    prepared.push_back(std::move(p));
  }

  auto issue = [&]() {
    bool nccl = false;
    for (const Prepared& p : prepared) nccl = nccl || (p.call->kind != CallKind::Gemm && p.call->kind != CallKind::Copy);
    for (const Prepared& p : prepared) {
      const DeviceCall& c = *p.call;
      check(cudaSetDevice(c.device), "cudaSetDevice");
      const cudaStream_t st = s.streams[static_cast<std::size_t>(c.device)];
      if (c.kind == CallKind::Gemm) launch_gemm(s.blas[static_cast<std::size_t>(c.device)], c, p);
      if (c.kind == CallKind::Copy)
        check(cudaMemcpyAsync(p.b->ptr, p.a->ptr, c.send_bytes, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
    }
    if (!nccl) return;
    check(ncclGroupStart(), "ncclGroupStart");
    for (const Prepared& p : prepared) {
      const DeviceCall& c = *p.call;
      if (c.kind == CallKind::Gemm || c.kind == CallKind::Copy) continue;
      const cudaStream_t st = s.streams[static_cast<std::size_t>(c.device)];
      const ncclComm_t comm = s.comm(c.comm_devices, c.comm_rank);
      const ncclDataType_t t = nccl_type(c.dtype);
      const std::uint64_t eb = nccl_type_bytes(c.dtype);
      switch (c.kind) {
        case CallKind::AllGather:
          check(ncclAllGather(p.a->ptr, p.b->ptr, c.send_bytes / eb, t, comm, st), "ncclAllGather");
          break;
        case CallKind::ReduceScatter:
          check(ncclReduceScatter(p.a->ptr, p.b->ptr, c.recv_bytes / eb, t, ncclSum, comm, st), "ncclReduceScatter");
          break;
        case CallKind::AllReduce:
          check(ncclAllReduce(p.a->ptr, p.b->ptr, c.send_bytes / eb, t, ncclSum, comm, st), "ncclAllReduce");
          break;
        case CallKind::SendRecv:
          for (std::size_t r = 0; r < c.comm_devices.size(); ++r) {
            if (static_cast<int>(r) == c.comm_rank) continue;
            check(ncclSend(static_cast<unsigned char*>(p.a->ptr) + r * c.peer_bytes, c.peer_bytes, ncclInt8,
                           static_cast<int>(r), comm, st),
                  "ncclSend");
            check(ncclRecv(static_cast<unsigned char*>(p.b->ptr) + r * c.peer_bytes, c.peer_bytes, ncclInt8,
                           static_cast<int>(r), comm, st),
                  "ncclRecv");
          }
          break;
        case CallKind::Send:
          check(ncclSend(p.a->ptr, c.send_bytes, ncclInt8, c.peer, comm, st), "ncclSend");
          break;
        case CallKind::Recv:
          check(ncclRecv(p.b->ptr, c.recv_bytes, ncclInt8, c.peer, comm, st), "ncclRecv");
          break;
        default:
          break;
      }
    }
    check(ncclGroupEnd(), "ncclGroupEnd");
  };
  auto sync_all = [&]() {
    for (int d : devices) {
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaStreamSynchronize(s.streams[static_cast<std::size_t>(d)]), "cudaStreamSynchronize");
    }
  };

  sync_all();
  for (int i = 0; i < repeat.warmups; ++i) {
    issue();
    sync_all();
  }
  std::vector<double> samples;
  for (int i = 0; i < repeat.repetitions; ++i) {
    for (int d : devices) {
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaEventRecord(s.start[static_cast<std::size_t>(d)], s.streams[static_cast<std::size_t>(d)]),
            "cudaEventRecord");
    }
    issue();
    for (int d : devices) {
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaEventRecord(s.stop[static_cast<std::size_t>(d)], s.streams[static_cast<std::size_t>(d)]),
            "cudaEventRecord");
    }
    sync_all();
    double longest = 0;
    for (int d : devices) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, s.start[static_cast<std::size_t>(d)], s.stop[static_cast<std::size_t>(d)]),
            "cudaEventElapsedTime");
      longest = std::max(longest, static_cast<double>(ms) * 1e-3);
    }
    samples.push_back(longest);
  }
  return samples;
}

}  // namespace meshsim::kernels::cuda
