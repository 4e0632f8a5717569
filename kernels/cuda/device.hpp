#pragma once
// The hardware replay's device primitives: cuBLAS GEMMs, HBM copies and NCCL
// collectives on the visible GPUs of one process, timed with CUDA events. A plain
// C++ interface: no CUDA type crosses it. The implementation is a module loaded
// on first use (backend_abi.hpp: device.cpp built as libmeshsim_cuda_backend.so
// when MESHSIM_CUDA is on; loader.cpp finds and loads it), so that nothing but
// `replay` and `calibrate` ever loads CUDA. The orchestration (which calls, in
// which order, what to record) lives in replay/.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace meshsim::kernels::cuda {

// What this process can use. Never throws: with no GPU (or no driver, or a
// build without CUDA, or a backend module that cannot be loaded) `gpus` is 0
// and `problem` says why in one line.
struct Probe {
  int gpus = 0;
  std::string device;        // name of GPU 0
  int sms = 0;               // its streaming multiprocessors
  std::string cuda_runtime;  // "12.4"
  std::string nccl;          // "2.21.5"; empty without NCCL
  std::string problem;
};
Probe probe();
// Whether this build has the CUDA backend module (MESHSIM_CUDA); says nothing
// about whether it loads here.
bool built_with_cuda();

enum class CallKind { Gemm, Copy, AllGather, ReduceScatter, AllReduce, SendRecv, Send, Recv };

// One device's part of an op. The calls of one op run together: every device
// starts them at once, the NCCL calls of all devices in one NCCL group.
struct DeviceCall {
  CallKind kind = CallKind::Gemm;
  int device = 0;
  std::string dtype = "bf16";  // bf16, fp16, fp32, int8, int32, fp8, bytes
  std::uint64_t m = 0, n = 0, k = 0;             // Gemm: C[m,n] = A[m,k] . B[k,n]
  std::uint64_t send_bytes = 0, recv_bytes = 0;  // collectives, Copy (send_bytes)
  std::uint64_t peer_bytes = 0;                  // SendRecv: to and from every other member
  std::vector<int> comm_devices;                 // the communicator's devices, in rank order
  int comm_rank = 0;                             // this device's rank in it
  int peer = 0;                                  // Send/Recv: the peer's rank in it
};

struct Repeat {
  int warmups = 2;
  int repetitions = 5;
  // Before every timed repetition, overwrite a scratch buffer of twice the L2
  // cache on each device, so that an op reads its inputs from HBM as it would
  // in a model (not from the L2 its previous repetition filled). false: warm
  // caches, as nccl-tests and most GEMM benchmarks measure.
  bool cold_l2 = true;
};

// What a session of one process among several (a replay under MPI, one GPU per
// process) needs from its launcher. Every method is collective: all processes
// call it, in the same order. Implemented by the tool over MPI; the backend
// calls it, so nothing of MPI is in the backend.
class Coordinator {
 public:
  virtual ~Coordinator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void broadcast(std::string& bytes, int root) = 0;  // root's bytes everywhere
  virtual double max(double mine) = 0;
  // The first non-empty `mine` by rank, on every process ("" when all are empty).
  virtual std::string first_error(const std::string& mine) = 0;
};

// A failure after some device had started an op's NCCL calls, in a session of
// several processes: a peer may wait in NCCL for ever, so the replay cannot go
// on with the next op; it ends with this message.
class DeviceFatal : public Error {
 public:
  using Error::Error;
};

// What Session::time measured: seconds per timed repetition, and whether every
// one of them ran behind the gate. Once a gate gives up (a launch that waited for
// the GPU while a gate held it) the session times without gates from then on, and
// those times include the host's launch time: `gated` is false.
struct Timing {
  std::vector<double> samples;
  bool gated = true;
};

// cuBLAS handles, streams and NCCL communicators (one per distinct device list,
// created on first use) for `gpus` devices. Throws Error (one line) when the
// backend cannot be loaded, when a CUDA, cuBLAS or NCCL call fails, or when an
// op does not fit in device memory.
//
// Timing: per repetition each device's stream holds [L2 flush], a gate, the
// start event, the op's calls and the stop event. The gate (a host function
// that waits until every call of the repetition has been issued) keeps the
// host's launch time out of the measurement and starts the devices together.
class Session {
 public:
  explicit Session(int gpus);
  // One process among several: it drives CUDA device `local_device` as device
  // `coordinator.rank()` of `coordinator.size()` (the devices DeviceCall names).
  // time() takes every device's calls, runs this process's own, and returns on
  // every process the longest device time per repetition. Communicators come
  // from ncclCommInitRank with ids broadcast through the coordinator.
  Session(Coordinator& coordinator, int local_device);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // Seconds per repetition after the warm-ups: per repetition the longest of the
  // devices' times from their start event to their end event.
  Timing time(const std::vector<DeviceCall>& calls, const Repeat& repeat);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshsim::kernels::cuda
