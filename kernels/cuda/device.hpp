#pragma once
// The hardware replay's device primitives: cuBLAS GEMMs, HBM copies and NCCL
// collectives on the visible GPUs of one process, timed with CUDA events. A plain
// C++ interface: no CUDA type crosses it. CMake decides whether the CUDA backend
// exists (device.cpp with MESHSIM_CUDA=ON, unavailable.cpp otherwise); the
// orchestration (which calls, in which order, what to record) lives in replay/.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace meshsim::kernels::cuda {

// What this process can use. Never throws: with no GPU (or no driver, or a
// build without CUDA) `gpus` is 0 and `problem` says why in one line.
struct Probe {
  int gpus = 0;
  std::string device;        // name of GPU 0
  int sms = 0;               // its streaming multiprocessors
  std::string cuda_runtime;  // "12.4"
  std::string nccl;          // "2.21.5"; empty without NCCL
  std::string problem;
};
Probe probe();
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
};

// cuBLAS handles, streams and NCCL communicators (one per distinct device list,
// created on first use) for `gpus` devices. Throws Error (one line) when a CUDA,
// cuBLAS or NCCL call fails, or when an op does not fit in device memory.
class Session {
 public:
  explicit Session(int gpus);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // Seconds per repetition after the warm-ups: per repetition the longest of the
  // devices' times from their start event to their end event.
  std::vector<double> time(const std::vector<DeviceCall>& calls, const Repeat& repeat);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshsim::kernels::cuda
