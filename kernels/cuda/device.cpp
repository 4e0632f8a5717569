// The CUDA backend module (libmeshsim_cuda_backend.so; backend_abi.hpp): cuBLAS
// GEMMs, device-to-device copies and NCCL collectives, timed with CUDA events.
// Host code only (the CUDA runtime, cuBLAS and NCCL are host APIs): no nvcc, no
// kernels of our own. Nothing here links meshsim's own libraries: a failure is
// thrown as Failure inside the module and returned as one line at its boundary.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>

#include "kernels/cuda/backend_abi.hpp"
#include "kernels/cuda/watchdog.hpp"

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

void check(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  // ncclGetLastError says what went wrong; ncclGetErrorString only names the class.
  const char* last = ncclGetLastError(comm);
  throw Failure(last && *last ? fmt::format("NCCL: {} failed: {} ({})", what, ncclGetErrorString(r), last)
                              : fmt::format("NCCL: {} failed: {}", what, ncclGetErrorString(r)));
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

// A GEMM's input and output element sizes (bytes) by dtype; 0: no cuBLAS GEMM for it.
// int8 accumulates into int32, fp8 (e4m3) writes bf16.
std::uint64_t gemm_input_bytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp32") return 4;
  if (dtype == "int8" || dtype == "fp8") return 1;
  return 0;
}

std::uint64_t gemm_output_bytes(const std::string& dtype) {
  if (dtype == "int8" || dtype == "fp32") return 4;
  return 2;
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

// The longest wait for an op's streams to drain. Far above any op meshsim replays
// (an 8192^3 fp32 GEMM takes 16 ms on an H100): a stream still busy after it waits
// on something that will not come, such as an NCCL peer that failed.
constexpr auto kSyncLimit = std::chrono::seconds(60);

struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> gave_up{false};
};

// Opens a gate when it goes out of scope, so that an exception between
// enqueueing the gate and opening it never leaves a stream waiting for 2 s.
struct OpenOnExit {
  Gate& gate;
  ~OpenOnExit() { gate.open.store(true, std::memory_order_release); }
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

// An fp8 GEMM through cuBLASLt (cublasGemmEx has no fp8): e4m3 inputs, bf16
// output, fp32 accumulation, unit scales. cuBLASLt's fp8 kernels take A
// transposed and B not ("TN"): A is stored as the k x m column-major matrix
// whose transpose is the m x k operand, the same bytes as a row-major A[m,k].
// Its leading dimensions must be multiples of 16 bytes.
constexpr std::uint64_t kWorkspaceBytes = std::uint64_t{32} << 20;

struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  LtGemm(cublasLtHandle_t lt, const DeviceCall& call) {
    try {
      create(lt, call);
    } catch (...) {
      release();  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  ~LtGemm() { release(); }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

 private:
  void create(cublasLtHandle_t lt, const DeviceCall& call) {
    if (call.k % 16 || call.m % 8)
      throw Failure(fmt::format("fp8 GEMM M={} N={} K={}: cuBLASLt's fp8 kernels need K a multiple of 16 and M of 8",
                                call.m, call.n, call.k));
    const auto m = call.m, n = call.n, k = call.k;
    check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
          "cublasLtMatmulDescSetAttribute (TRANSA)");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none),
          "cublasLtMatmulDescSetAttribute (TRANSB)");
    check(cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, k, m, static_cast<std::int64_t>(k)), "cublasLtMatrixLayoutCreate");
    check(cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, k, n, static_cast<std::int64_t>(k)), "cublasLtMatrixLayoutCreate");
    check(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, m, n, static_cast<std::int64_t>(m)), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t workspace = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t best{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                             sizeof workspace);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, c, pref, 1, &best, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(st, "cublasLtMatmulAlgoGetHeuristic (fp8)");
    if (found == 0)
      throw Failure(fmt::format("fp8 GEMM M={} N={} K={}: cuBLASLt has no fp8 kernel for it on this GPU", m, n, k));
    algo = best.algo;
  }
  void release() noexcept {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
    c = b = a = nullptr;
    desc = nullptr;
  }
};

struct Prepared {
  const DeviceCall* call = nullptr;
  std::unique_ptr<Buffer> a, b, c;
  std::unique_ptr<LtGemm> lt;  // fp8 GEMMs
};

void launch_gemm(cublasHandle_t h, const DeviceCall& call, const Prepared& p) {
  const int m = static_cast<int>(call.m), n = static_cast<int>(call.n), k = static_cast<int>(call.k);
  if (call.dtype == "int8") {
    // The integer tensor-core (IMMA) kernels take A transposed and B not ("TN", as
    // for fp8): A is the k x m column-major matrix (the bytes of a row-major
    // A[m,k]), lda = ldb = k, and M and K are multiples of 4 (checked in prepare).
    const std::int32_t alpha = 1, beta = 0;
    check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, p.a->ptr, CUDA_R_8I, k, p.b->ptr, CUDA_R_8I, k,
                       &beta, p.c->ptr, CUDA_R_32I, m, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (int8)");
    return;
  }
  // Column-major C[m,n] = A[m,k] . B[k,n]: lda = m, ldb = k, ldc = m.
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = call.dtype == "fp16" ? CUDA_R_16F : call.dtype == "fp32" ? CUDA_R_32F : CUDA_R_16BF;
  check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, p.a->ptr, t, m, p.b->ptr, t, k, &beta, p.c->ptr, t,
                     m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

// A failure after an op's calls were issued in a session of several processes
// (DeviceFatal on the tool's side).
struct Fatal : Failure {
  using Failure::Failure;
};

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown failure in the CUDA backend";
  }
}

class CudaSession {
 public:
  explicit CudaSession(int gpus);                     // every device, one process
  CudaSession(Coordinator& coordinator, int local);   // one device of several processes
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;
  std::vector<double> time(const std::vector<DeviceCall>& calls, const Repeat& repeat);
  // False once a gate gave up: later repetitions run without gates.
  bool gated() const { return gates_; }

 private:
  struct PerDevice {
    int cuda = -1;  // the CUDA device; -1: another process drives it
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cublasLtHandle_t lt = nullptr;
    std::unique_ptr<Buffer> lt_workspace;    // for fp8 GEMMs, on first use
    std::unique_ptr<Buffer> blas_workspace;  // cuBLAS's
    cudaEvent_t start = nullptr, stop = nullptr;
    std::unique_ptr<Buffer> scratch;  // overwritten before each repetition when Repeat::cold_l2
    std::uint64_t scratch_bytes = 0;
  };
  std::vector<PerDevice> dev_;  // by DeviceCall::device
  Coordinator* coord_ = nullptr;
  std::map<std::vector<int>, std::vector<ncclComm_t>> comms_;  // by member devices; null: not ours
  std::vector<unsigned char> pattern_;  // host bytes copied into every buffer
  bool gates_ = true;                   // off once a gate had to give up
  std::string broken_;                  // why the session was ended (Fatal), if it was
  // Gates a stream may still read: freed only once their streams are synchronised.
  std::vector<std::unique_ptr<Gate>> unsynced_gates_;

  Gate& new_gate() { return *unsynced_gates_.emplace_back(std::make_unique<Gate>()); }

  void open_device(std::size_t index, int cuda);
  void release() noexcept;
  void abort_comms() noexcept;
  [[noreturn]] void fatal(const std::string& why);
  PerDevice& device(int index) { return dev_[static_cast<std::size_t>(index)]; }
  ncclComm_t comm(const std::vector<int>& devices, int rank);
  void create_rank_comms(const std::vector<DeviceCall>& calls);
  std::vector<Prepared> prepare(const std::vector<DeviceCall>& calls, const Repeat& repeat, std::vector<int>& devices);
  void fill(const Buffer& b, std::uint64_t bytes);
  void issue(const std::vector<Prepared>& prepared);
  void enqueue_timed(const std::vector<int>& devices, const Repeat& repeat, int repetition, Gate* gate);
  void sync(const std::vector<int>& devices);
  bool healthy(const std::vector<int>& devices) noexcept;
  double longest(const std::vector<int>& devices);
  std::vector<double> time_issued(const std::vector<Prepared>& prepared, const std::vector<int>& devices,
                                  const Repeat& repeat);
  std::vector<double> time_ranks(const std::vector<DeviceCall>& calls, const Repeat& repeat);
};

void CudaSession::open_device(std::size_t index, int cuda) {
  PerDevice& pd = dev_[index];
  pd.cuda = cuda;
  check(cudaSetDevice(cuda), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&pd.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublasCreate(&pd.blas), "cublasCreate");
  check(cublasSetStream(pd.blas, pd.stream), "cublasSetStream");
  // cuBLAS's workspace given up front (32 MiB, what NVIDIA advises for Hopper), so
  // that no GEMM allocates one on the fly, behind a gate.
  pd.blas_workspace = std::make_unique<Buffer>(cuda, kWorkspaceBytes);
  check(cublasSetWorkspace(pd.blas, pd.blas_workspace->ptr, kWorkspaceBytes), "cublasSetWorkspace");
  check(cublasLtCreate(&pd.lt), "cublasLtCreate");
  check(cudaEventCreate(&pd.start), "cudaEventCreate");
  check(cudaEventCreate(&pd.stop), "cudaEventCreate");
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, cuda), "cudaDeviceGetAttribute (L2 size)");
  pd.scratch_bytes = 2 * static_cast<std::uint64_t>(std::max(l2, 1 << 20));
}

std::vector<unsigned char> make_pattern() {
  // bf16 values of magnitude 2^-10 to 1, either sign (read as fp16 they are
  // between 0.5 and 2, as fp32 small finite values too).
  std::vector<unsigned char> pattern(std::size_t{16} << 20);
  std::mt19937 rng(7);
  for (std::size_t i = 0; i + 1 < pattern.size(); i += 2) {
    const auto r = static_cast<std::uint32_t>(rng());
    const std::uint32_t sign = (r >> 31) << 15, exponent = 117 + (r >> 8) % 10, mantissa = r & 0x7f;
    const auto v = static_cast<std::uint16_t>(sign | (exponent << 7) | mantissa);
    std::memcpy(&pattern[i], &v, 2);
  }
  return pattern;
}

CudaSession::CudaSession(int gpus) : dev_(static_cast<std::size_t>(gpus)), pattern_(make_pattern()) {
  try {
    for (int d = 0; d < gpus; ++d) open_device(static_cast<std::size_t>(d), d);
  } catch (...) {
    release();  // the devices opened before the one that failed
    throw;
  }
}

CudaSession::CudaSession(Coordinator& coordinator, int local)
    : dev_(static_cast<std::size_t>(coordinator.size())), coord_(&coordinator), pattern_(make_pattern()) {
  try {
    open_device(static_cast<std::size_t>(coordinator.rank()), local);
  } catch (...) {
    release();
    throw;
  }
}

CudaSession::~CudaSession() { release(); }

// Ends every communicator at once, whatever is in flight on it: after a failure
// a peer's kernel may wait for this process for ever, and ncclCommDestroy (which
// flushes outstanding work) or freeing a buffer would wait with it.
void CudaSession::abort_comms() noexcept {
  for (auto& [devices, list] : comms_)
    for (ncclComm_t& c : list)
      if (c) {
        ncclCommAbort(c);
        c = nullptr;
      }
}

// A failure once calls may be in flight: the communicators are aborted and the
// session refuses every later op.
void CudaSession::fatal(const std::string& why) {
  abort_comms();
  broken_ = why;
  throw Fatal(why);
}

void CudaSession::release() noexcept {
  // A gate whose stream was never synchronised (an op failed half-way) may still
  // be read by a host function CUDA has not run yet: it is left allocated.
  for (std::unique_ptr<Gate>& g : unsynced_gates_) (void)g.release();
  unsynced_gates_.clear();
  for (auto& [devices, list] : comms_)
    for (ncclComm_t& c : list)
      if (c) {
        ncclCommDestroy(c);
        c = nullptr;
      }
  for (PerDevice& pd : dev_) {
    if (pd.cuda < 0) continue;
    cudaSetDevice(pd.cuda);
    pd.scratch.reset();
    pd.lt_workspace.reset();
    if (pd.lt) cublasLtDestroy(pd.lt);
    if (pd.blas) cublasDestroy(pd.blas);
    pd.blas_workspace.reset();
    if (pd.start) cudaEventDestroy(pd.start);
    if (pd.stop) cudaEventDestroy(pd.stop);
    if (pd.stream) cudaStreamDestroy(pd.stream);
    pd = PerDevice{};
  }
}

ncclComm_t CudaSession::comm(const std::vector<int>& devices, int rank) {
  auto it = comms_.find(devices);
  if (it == comms_.end()) {
    // One process: every member's communicator at once.
    std::vector<int> cuda;
    for (int d : devices) cuda.push_back(device(d).cuda);
    std::vector<ncclComm_t> c(devices.size());
    check(ncclCommInitAll(c.data(), static_cast<int>(devices.size()), cuda.data()), "ncclCommInitAll");
    it = comms_.emplace(devices, std::move(c)).first;
  }
  return it->second[static_cast<std::size_t>(rank)];
}

// Several processes: every communicator the op's calls name, in the order they
// name them, on every process (the id broadcast is collective; the members then
// join with ncclCommInitRank, which waits for all of them). All processes agree
// after each communicator, so that none goes on to the next one (and waits there
// for a member that gave up) once one has failed.
void CudaSession::create_rank_comms(const std::vector<DeviceCall>& calls) {
  for (const DeviceCall& call : calls) {
    std::string error;
    if (call.kind == CallKind::Gemm || call.kind == CallKind::Copy || comms_.count(call.comm_devices)) continue;
    const std::vector<int>& members = call.comm_devices;
    std::string id;
    if (coord_->rank() == members.front()) {
      ncclUniqueId u{};
      const ncclResult_t r = ncclGetUniqueId(&u);
      if (r == ncclSuccess) id.assign(reinterpret_cast<const char*>(&u), sizeof u);
    }
    coord_->broadcast(id, members.front());
    std::vector<ncclComm_t> list(members.size(), nullptr);
    const auto me = std::find(members.begin(), members.end(), coord_->rank());
    if (me != members.end()) {
      if (id.size() != sizeof(ncclUniqueId)) {
        error = fmt::format("NCCL: ncclGetUniqueId failed on process {}", members.front());
      } else {
        ncclUniqueId u{};
        std::memcpy(&u, id.data(), sizeof u);
        const auto index = static_cast<std::size_t>(me - members.begin());
        try {
          check(cudaSetDevice(device(coord_->rank()).cuda), "cudaSetDevice");
          // A member that fails in here leaves the others waiting for it: bounded.
          const std::chrono::seconds limit = nccl_init_limit();
          const Watchdog watchdog(limit, nccl_init_timeout_message(coord_->rank(), limit));
          check(ncclCommInitRank(&list[index], static_cast<int>(members.size()), u, static_cast<int>(index)),
                "ncclCommInitRank");
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
    }
    comms_.emplace(members, std::move(list));
    error = coord_->first_error(error);
    if (!error.empty()) fatal(error);
  }
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

// The buffers of this process's calls (all of them in a single process); the
// devices they run on, in order of first appearance.
std::vector<Prepared> CudaSession::prepare(const std::vector<DeviceCall>& calls, const Repeat& repeat,
                                           std::vector<int>& devices) {
  std::vector<Prepared> prepared;
  for (const DeviceCall& call : calls) {
    if (call.device < 0 || static_cast<std::size_t>(call.device) >= dev_.size())
      throw Failure(fmt::format("GPU {} is not visible", call.device));
    const int cuda = device(call.device).cuda;
    if (cuda < 0) continue;  // another process's
    if (std::find(devices.begin(), devices.end(), call.device) == devices.end()) devices.push_back(call.device);
    Prepared p;
    p.call = &call;
    if (call.kind == CallKind::Gemm) {
      if (call.m > INT_MAX || call.n > INT_MAX || call.k > INT_MAX)
        throw Failure(fmt::format("GEMM M={} N={} K={} exceeds cuBLAS's 32-bit sizes", call.m, call.n, call.k));
      const bool fp8 = call.dtype == "fp8";
      const std::uint64_t e = gemm_input_bytes(call.dtype), ce = gemm_output_bytes(call.dtype);
      if (e == 0)
        throw Failure(fmt::format("GEMM in {}: the CUDA backend runs GEMMs in bf16, fp16, fp32, int8 and fp8 only",
                                  call.dtype));
      if (call.dtype == "int8" && (call.m % 4 || call.k % 4))
        throw Failure(fmt::format("int8 GEMM M={} N={} K={}: cuBLAS's int8 kernels need M and K multiples of 4",
                                  call.m, call.n, call.k));
      if (fp8) {
        PerDevice& pd = device(call.device);
        check(cudaSetDevice(cuda), "cudaSetDevice");
        p.lt = std::make_unique<LtGemm>(pd.lt, call);
        if (!pd.lt_workspace) pd.lt_workspace = std::make_unique<Buffer>(cuda, kWorkspaceBytes);
      }
      p.a = std::make_unique<Buffer>(cuda, call.m * call.k * e);
      p.b = std::make_unique<Buffer>(cuda, call.k * call.n * e);
      p.c = std::make_unique<Buffer>(cuda, call.m * call.n * ce);
      fill(*p.a, call.m * call.k * e);
      fill(*p.b, call.k * call.n * e);
    } else {
      const std::uint64_t in = call.kind == CallKind::SendRecv ? call.peer_bytes * call.comm_devices.size()
                                                               : call.send_bytes;
      const std::uint64_t out = call.kind == CallKind::SendRecv ? in
                                : call.kind == CallKind::Copy   ? call.send_bytes
                                                                : call.recv_bytes;
      p.a = std::make_unique<Buffer>(cuda, in);
      p.b = std::make_unique<Buffer>(cuda, out);
      fill(*p.a, in);
      if (call.kind != CallKind::Copy && !coord_) comm(call.comm_devices, call.comm_rank);
    }
    prepared.push_back(std::move(p));
  }
  // The L2 flush's scratch buffers, now: a cudaMalloc may wait for the device,
  // which must never happen behind a gate.
  if (repeat.cold_l2)
    for (int d : devices) {
      PerDevice& pd = device(d);
      if (!pd.scratch) pd.scratch = std::make_unique<Buffer>(pd.cuda, pd.scratch_bytes);
    }
  return prepared;
}

// The op's calls on every device's stream: GEMMs and copies first, then the
// NCCL calls of all devices in one group.
void CudaSession::issue(const std::vector<Prepared>& prepared) {
  bool nccl = false;
  for (const Prepared& p : prepared) {
    const DeviceCall& c = *p.call;
    PerDevice& pd = device(c.device);
    check(cudaSetDevice(pd.cuda), "cudaSetDevice");
    if (c.kind == CallKind::Gemm && p.lt) {
      const float alpha = 1.0f, beta = 0.0f;
      check(cublasLtMatmul(pd.lt, p.lt->desc, &alpha, p.a->ptr, p.lt->a, p.b->ptr, p.lt->b, &beta, p.c->ptr, p.lt->c,
                           p.c->ptr, p.lt->c, &p.lt->algo, pd.lt_workspace->ptr, kWorkspaceBytes, pd.stream),
            "cublasLtMatmul (fp8)");
    } else if (c.kind == CallKind::Gemm) {
      launch_gemm(pd.blas, c, p);
    } else if (c.kind == CallKind::Copy) {
      check(cudaMemcpyAsync(p.b->ptr, p.a->ptr, c.send_bytes, cudaMemcpyDeviceToDevice, pd.stream),
            "cudaMemcpyAsync");
    } else {
      nccl = true;
    }
  }
  if (!nccl) return;
  check(ncclGroupStart(), "ncclGroupStart");
  // A call failing inside the group must still end it: NCCL holds back every later
  // call of this thread until the group ends (ncclGroupEnd then drops the group).
  struct EndGroup {
    bool open = true;
    ~EndGroup() {
      if (open) ncclGroupEnd();
    }
  } group;
  for (const Prepared& p : prepared) {
    const DeviceCall& c = *p.call;
    if (c.kind == CallKind::Gemm || c.kind == CallKind::Copy) continue;
    const cudaStream_t st = device(c.device).stream;
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
  group.open = false;
  check(ncclGroupEnd(), "ncclGroupEnd");
}

// Ahead of a timed repetition on each device's stream: the L2 flush, the gate
// (when given) and the start event.
void CudaSession::enqueue_timed(const std::vector<int>& devices, const Repeat& repeat, int repetition, Gate* gate) {
  for (int d : devices) {
    PerDevice& pd = device(d);
    check(cudaSetDevice(pd.cuda), "cudaSetDevice");
    if (repeat.cold_l2) {
      check(cudaMemsetAsync(pd.scratch->ptr, repetition & 0xff, pd.scratch_bytes, pd.stream),
            "cudaMemsetAsync (L2 flush)");
    }
    if (gate) check(cudaLaunchHostFunc(pd.stream, wait_at_gate, gate), "cudaLaunchHostFunc");
    check(cudaEventRecord(pd.start, pd.stream), "cudaEventRecord");
  }
}

// Waits for the devices' streams, watching the communicators for NCCL's
// asynchronous errors (a stream stuck behind a failed collective never drains)
// and giving up after kSyncLimit.
void CudaSession::sync(const std::vector<int>& devices) {
  const auto deadline = std::chrono::steady_clock::now() + kSyncLimit;
  for (int d : devices) {
    check(cudaSetDevice(device(d).cuda), "cudaSetDevice");
    for (;;) {
      const cudaError_t e = cudaStreamQuery(device(d).stream);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) check(e, "cudaStreamQuery");
      for (const auto& [members, list] : comms_)
        for (ncclComm_t c : list) {
          if (!c) continue;
          ncclResult_t state = ncclSuccess;
          check(ncclCommGetAsyncError(c, &state), "ncclCommGetAsyncError", c);
          if (state != ncclSuccess && state != ncclInProgress) check(state, "a collective", c);
        }
      if (std::chrono::steady_clock::now() > deadline)
        throw Failure(fmt::format("GPU {} was still busy after {} s (a collective waiting for a peer that failed?)",
                                  device(d).cuda,
                                  std::chrono::duration_cast<std::chrono::seconds>(kSyncLimit).count()));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

// Whether the devices still work after a failed op: a sticky CUDA error (an
// illegal address, say) fails every later call, so the streams are drained.
bool CudaSession::healthy(const std::vector<int>& devices) noexcept {
  try {
    sync(devices);
    unsynced_gates_.clear();  // no host function reads them any more
    return true;
  } catch (...) {
    return false;
  }
}

// After a timed repetition: the longest of the devices' start-to-stop times (s).
double CudaSession::longest(const std::vector<int>& devices) {
  double t = 0;
  for (int d : devices) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, device(d).start, device(d).stop), "cudaEventElapsedTime");
    t = std::max(t, static_cast<double>(ms) * 1e-3);
  }
  return t;
}

std::vector<double> CudaSession::time(const std::vector<DeviceCall>& calls, const Repeat& repeat) {
  if (!broken_.empty()) throw Fatal(fmt::format("the GPU session ended after an earlier failure: {}", broken_));
  if (coord_) return time_ranks(calls, repeat);
  std::vector<int> devices;
  // A failure here (a GEMM cuBLAS refuses, a buffer too large) skips the op:
  // nothing was issued yet.
  const std::vector<Prepared> prepared = prepare(calls, repeat, devices);
  // From here on calls are in flight. A failing GEMM or copy skips the op if the
  // devices still work; a failure in an op with NCCL calls, or one that leaves a
  // device broken, ends the session (the communicators are aborted first, while
  // the op's buffers still exist: freeing them waits for the device).
  const bool collective = std::any_of(calls.begin(), calls.end(), [](const DeviceCall& c) {
    return c.kind != CallKind::Gemm && c.kind != CallKind::Copy;
  });
  try {
    return time_issued(prepared, devices, repeat);
  } catch (...) {
    const std::string why = what_of(std::current_exception());
    if (collective || !healthy(devices)) fatal(why);
    throw;
  }
}

std::vector<double> CudaSession::time_issued(const std::vector<Prepared>& prepared, const std::vector<int>& devices,
                                             const Repeat& repeat) {
  auto stop = [&] {
    for (int d : devices) {
      check(cudaSetDevice(device(d).cuda), "cudaSetDevice");
      check(cudaEventRecord(device(d).stop, device(d).stream), "cudaEventRecord");
    }
  };
  sync(devices);
  for (int i = 0; i < repeat.warmups; ++i) {
    issue(prepared);
    sync(devices);
  }
  std::vector<double> samples;
  for (int i = 0; i < repeat.repetitions; ++i) {
    Gate& gate = new_gate();
    {
      const OpenOnExit opener{gate};
      enqueue_timed(devices, repeat, i, gates_ ? &gate : nullptr);
      issue(prepared);
      stop();
    }
    sync(devices);
    const bool gave_up = gate.gave_up.load(std::memory_order_acquire);
    unsynced_gates_.clear();  // no host function reads them any more
    if (gave_up) {
      gates_ = false;  // this repetition again, without gates, and every later one
      --i;
      continue;
    }
    samples.push_back(longest(devices));
  }
  return samples;
}

// Several processes. Every step that can fail on one process alone is followed
// by an agreement (Coordinator::first_error), so that all of them fail together
// and none waits in a collective for ever: before anything is issued a failure
// skips the op (Failure); once NCCL calls may be in flight it ends the session
// (Fatal).
std::vector<double> CudaSession::time_ranks(const std::vector<DeviceCall>& calls, const Repeat& repeat) {
  std::vector<int> devices;
  std::vector<Prepared> prepared;
  std::string error;
  try {
    prepared = prepare(calls, repeat, devices);
  } catch (const std::exception& e) {
    error = e.what();
  }
  error = coord_->first_error(error);
  if (!error.empty()) throw Failure(error);
  create_rank_comms(calls);
  auto agree = [&](const std::function<void()>& step) {
    std::string mine;
    try {
      step();
    } catch (...) {
      mine = what_of(std::current_exception());
    }
    const std::string first = coord_->first_error(mine);
    if (!first.empty()) fatal(first);  // aborts the communicators first
  };
  auto stop = [&] {
    for (int d : devices) {
      check(cudaSetDevice(device(d).cuda), "cudaSetDevice");
      check(cudaEventRecord(device(d).stop, device(d).stream), "cudaEventRecord");
    }
  };
  agree([&] { sync(devices); });
  for (int i = 0; i < repeat.warmups; ++i) {
    agree([&] { issue(prepared); });
    agree([&] { sync(devices); });
  }
  std::vector<double> samples;
  for (int i = 0; i < repeat.repetitions; ++i) {
    Gate& gate = new_gate();
    {
      const OpenOnExit opener{gate};
      agree([&] {  // also the barrier: every process has issued before any gate opens
        enqueue_timed(devices, repeat, i, gates_ ? &gate : nullptr);
        issue(prepared);
        stop();
      });
    }
    double mine = 0;
    agree([&] {
      sync(devices);
      mine = longest(devices);
    });
    const bool gave_up_here = gate.gave_up.load(std::memory_order_acquire);
    unsynced_gates_.clear();  // every stream of this process is synchronised
    const bool gave_up = coord_->max(gave_up_here ? 1 : 0) > 0;
    const double t = coord_->max(mine);
    if (gave_up) {
      gates_ = false;
      --i;
      continue;
    }
    samples.push_back(t);
  }
  return samples;
}

// ------------------------------------------------------------------ boundary

// Runs f; a failure becomes `error` (and `fatal` for Fatal). Nothing is thrown
// across the module's boundary.
template <typename F>
bool guarded(std::string& error, bool& fatal, F&& f) {
  try {
    f();
    return true;
  } catch (const Fatal& e) {
    error = e.what();
    fatal = true;
  } catch (...) {
    error = what_of(std::current_exception());
  }
  return false;
}

void api_probe(Probe& out) {
  std::string error;
  bool fatal = false;
  if (!guarded(error, fatal, [&] { probe_into(out); })) {
    out = Probe{};
    out.problem = error;
  }
}

void* api_open(int gpus, std::string& error) {
  CudaSession* s = nullptr;
  bool fatal = false;
  guarded(error, fatal, [&] { s = new CudaSession(gpus); });
  return s;
}

void* api_open_rank(Coordinator& coordinator, int local_device, std::string& error) {
  CudaSession* s = nullptr;
  bool fatal = false;
  guarded(error, fatal, [&] { s = new CudaSession(coordinator, local_device); });
  return s;
}

void api_close(void* session) { delete static_cast<CudaSession*>(session); }

bool api_time(void* session, const std::vector<DeviceCall>& calls, const Repeat& repeat, Timing& out,
              std::string& error, bool& fatal) {
  return guarded(error, fatal, [&] {
    CudaSession& s = *static_cast<CudaSession*>(session);
    out.samples = s.time(calls, repeat);
    out.gated = s.gated();
  });
}

}  // namespace

}  // namespace meshsim::kernels::cuda

const meshsim::kernels::cuda::BackendApi* meshsim_cuda_backend() {
  static const meshsim::kernels::cuda::BackendApi api = [] {
    meshsim::kernels::cuda::BackendApi a;
    a.probe = meshsim::kernels::cuda::api_probe;
    a.open_session = meshsim::kernels::cuda::api_open;
    a.open_rank_session = meshsim::kernels::cuda::api_open_rank;
    a.close_session = meshsim::kernels::cuda::api_close;
    a.time = meshsim::kernels::cuda::api_time;
    return a;
  }();
  return &api;
}
