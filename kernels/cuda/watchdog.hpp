#pragma once
// A bound on a call that waits for other processes and cannot be interrupted:
// ncclCommInitRank under mpirun. When one process fails while NCCL sets up a
// communicator, the others wait inside ncclCommInitRank for a peer that never
// comes. A Watchdog armed around the call ends the process with one line and
// exit code 1 once the limit has passed; mpirun then ends the others. Used by the
// CUDA backend module and the fake GPU (tests/fake_gpu); meshsim itself only checks
// the limit's variable before a replay. Ending the process this way skips every
// destructor (a scratch file such as the NCCL log stays in the temporary folder).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace meshsim::kernels::cuda {

// MESHSIM_NCCL_INIT_TIMEOUT_S: how long one ncclCommInitRank may take (whole
// seconds, 1 to 86400; unset or empty: 300, far above NCCL's set-up across a few
// nodes).
inline std::chrono::seconds nccl_init_limit() {
  const char* v = std::getenv("MESHSIM_NCCL_INIT_TIMEOUT_S");
  if (!v || !*v) return std::chrono::seconds(300);
  char* end = nullptr;
  const long s = std::strtol(v, &end, 10);
  if (*v < '0' || *v > '9' || *end != '\0' || s < 1 || s > 86400)
    throw std::runtime_error(std::string("MESHSIM_NCCL_INIT_TIMEOUT_S: expected whole seconds from 1 to 86400, got '") +
                             v + "'");
  return std::chrono::seconds(s);
}

// What a process says when its ncclCommInitRank ran past the limit.
inline std::string nccl_init_timeout_message(int rank, std::chrono::seconds limit) {
  return "replay: rank " + std::to_string(rank) + ": ncclCommInitRank did not return within " +
         std::to_string(limit.count()) +
         " s (MESHSIM_NCCL_INIT_TIMEOUT_S): another rank may have failed while NCCL set up the communicator";
}

class Watchdog {
 public:
  // After `limit`, prints "meshsim: error: <message>" and ends the process (exit 1)
  // unless the Watchdog was destroyed first.
  Watchdog(std::chrono::seconds limit, std::string message) : message_(std::move(message)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
      std::fprintf(stderr, "meshsim: error: %s\n", message_.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string message_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace meshsim::kernels::cuda
