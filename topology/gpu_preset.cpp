#include "topology/gpu_preset.hpp"

#include <array>

namespace meshsim::topology {

namespace {

// Compute, HBM and NVLink: "How To Scale Your Model" (jax-ml.github.io/scaling-book),
// chapter "How to Think About GPUs" (../shared/notes/hardware.md): NVLink
// bandwidth is PER DIRECTION per GPU (H100/H200: 18 links x 25 GB/s = 450 GB/s;
// B200/GB200: 900 GB/s); one 400 Gb/s (50 GB/s) InfiniBand NIC per GPU; 8 GPUs per
// DGX node, 72 in a GB200 NVL72 domain.
//
// Latencies: NCCL's cost model, src/graph/tuning.cc (github.com/NVIDIA/nccl), its
// hardware latency per step of the Ring algorithm with the Simple protocol, in
// the table of NCCL 2.18 to today (2.29; the same table holds the base latencies
// and the rest of the model meshsim uses, driver/costs.cpp): 3.4 us per step over
// NVLink and 14 us per step over the network (NCCL 2.7 to 2.17 had 9.6). A ring
// step crosses two of our links (NVLink up and down, or NIC up and down), so each
// carries half. A step through a spine crosses four links; the spine cables get
// the NIC's half too.
constexpr Tick kNvlinkHop = Tick::from_ps(1'700'000);
constexpr Tick kNetHop = Tick::from_ps(7'000'000);
constexpr std::uint64_t kNic = 50'000'000'000;
// NCCL moves data in chunks of its buffer (NCCL_BUFFSIZE 4 MiB over 8 steps =
// 512 KiB): a GPU forwards a chunk once it has arrived.
constexpr std::uint64_t kChunk = 512 * 1024;

// NVLink SHARP (NVLS: the NVLink switches reduce and multicast; third-generation
// NVSwitch, Hopper on): the fraction of the NVLink rate its multimem traffic
// achieves, NCCL's nvlsEfficiency (src/graph/tuning.cc, NCCL 2.2x; src/tuning/nvls.cc
// in later releases): 0.85 on Hopper, 0.74 on Blackwell, 0 on Volta and Ampere,
// whose NVSwitches have no NVLS. Measured on 8 H100s, NVLS reaches about 480 GB/s
// of nccl-tests busbw where the ring reaches 365-370 GB/s (github.com/NVIDIA/nccl/
// issues/1455 and NVIDIA/nccl-tests#212): 1.3 times, where the two algorithms'
// link traffic alone would give 1.56 times (docs/MODEL.md, "GPU fabrics").
constexpr double kHopperNvls = 0.85;
constexpr double kBlackwellNvls = 0.74;

// What NVLink achieves: NCCL's topology model (src/graph/topo.h, NCCL 2.2x:
// SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1 GB/s per link and
// direction; the bandwidths of its tuning model's rings, trees and NVLS are built
// on them) against the datasheets' 25 GB/s per link and direction (A100's NVLink 3,
// H100's NVLink 4) and 50 GB/s (B200's NVLink 5). Measured, the ring all-gather on
// 8 H100s reaches 365 to 370 GB/s of busbw (the NVIDIA issues cited above): 0.81
// to 0.82 of the 450 GB/s peak, where NCCL's model says 0.824.
constexpr double kAmpereNvlink = 20.0 / 25.0;
constexpr double kHopperNvlink = 20.6 / 25.0;
constexpr double kBlackwellNvlink = 40.1 / 50.0;

// What NCCL's cost model asks of the machine (src/graph/tuning.cc: the LL
// protocol's bandwidth cap, llMaxBws, is per GPU generation inside one node and
// per host CPU vendor across nodes). CUDA compute capability (NVIDIA's "CUDA GPUs"
// list, developer.nvidia.com/cuda-gpus): A100 8.0, H100 and H200 9.0, B200 10.0.
// Host CPUs: DGX A100, 2 x AMD EPYC 7742 (DGX A100 User Guide); DGX H100 and
// H200, 2 x Intel Xeon Platinum 8480C; DGX B200, 2 x Intel Xeon Platinum 8570
// (their user guides); GB200 NVL72, NVIDIA Grace (Arm: NCCL counts it as not AMD).

// H100 SXM and H200 (the same GH100 compute): FP32 (non-tensor) 67 TFLOPS and
// INT8 tensor 1,979 TOPS dense (the datasheets list 3,958 "with sparsity"):
// NVIDIA H100 and H200 Tensor Core GPU datasheets (nvidia.com). B200 leaves them
// at 0 (its datasheets differ between HGX/DGX revisions; give them in the workload).
constexpr double kHopperFp32 = 6.7e13;
constexpr double kHopperInt8 = 1.979e15;

// A100 SXM 80GB, NVIDIA A100 Tensor Core GPU datasheet (nvidia.com): BF16 tensor
// 312 TFLOPS and INT8 tensor 624 TOPS dense (the datasheet's 624 / 1,248 are
// "with sparsity"), FP32 (non-tensor) 19.5 TFLOPS, as kHopperFp32 is H100's
// non-tensor FP32; no FP8 (Ampere has none: 0); HBM2e 80 GB at 2,039 GB/s;
// NVLink 3 600 GB/s per GPU bidirectional (12 links x 25 GB/s per direction =
// 300 GB/s per direction), all through the NVSwitches of the HGX A100 board.
// Network: NVIDIA DGX A100 System Architecture whitepaper and DGX A100 User Guide:
// eight single-port ConnectX-6 HDR InfiniBand 200 Gb/s adapters for compute
// traffic, one per GPU (25 GB/s per direction). Latencies as above: NCCL's hwLat
// is per link type (NVLink, PCI, network), not per GPU generation (Ampere only
// changes its bandwidth caps), so A100 gets the same 3.4 us and 14 us steps.
constexpr double kAmpereFp32 = 1.95e13;
constexpr double kAmpereBf16 = 3.12e14;
constexpr double kAmpereInt8 = 6.24e14;
constexpr std::uint64_t kHdrNic = 25'000'000'000;

const std::array<GpuPreset, 5> kGpuPresets = {{
    {"a100-dgx", "DGX A100: 8 x A100 SXM 80GB, NVLink 300 GB/s per direction per GPU, 200 Gb/s IB per GPU",
     ChipSpec{.bf16_flops_per_s = kAmpereBf16,
              .int8_ops_per_s = kAmpereInt8,
              .fp8_flops_per_s = 0,
              .fp32_flops_per_s = kAmpereFp32,
              .hbm_bytes = 80'000'000'000,
              .hbm_bandwidth_bytes_per_s = 2.039e12},
     8, LinkSpec{300'000'000'000, kNvlinkHop}, kAmpereNvlink, LinkSpec{kHdrNic, kNetHop}, LinkSpec{kHdrNic, kNetHop},
     kChunk, 0, 80, true},
    {"h100-dgx", "DGX H100: 8 x H100 SXM, NVLink 450 GB/s per direction per GPU, 400 Gb/s IB per GPU",
     ChipSpec{.bf16_flops_per_s = 9.9e14,
              .int8_ops_per_s = kHopperInt8,
              .fp8_flops_per_s = 2.0e15,
              .fp32_flops_per_s = kHopperFp32,
              .hbm_bytes = 80'000'000'000,
              .hbm_bandwidth_bytes_per_s = 3.35e12},
     8, LinkSpec{450'000'000'000, kNvlinkHop}, kHopperNvlink, LinkSpec{kNic, kNetHop}, LinkSpec{kNic, kNetHop}, kChunk,
     kHopperNvls, 90},
    {"h200-dgx", "DGX H200: 8 x H200, NVLink 450 GB/s per direction per GPU, 400 Gb/s IB per GPU",
     ChipSpec{.bf16_flops_per_s = 9.9e14,
              .int8_ops_per_s = kHopperInt8,
              .fp8_flops_per_s = 2.0e15,
              .fp32_flops_per_s = kHopperFp32,
              .hbm_bytes = 141'000'000'000,
              .hbm_bandwidth_bytes_per_s = 4.8e12},
     8, LinkSpec{450'000'000'000, kNvlinkHop}, kHopperNvlink, LinkSpec{kNic, kNetHop}, LinkSpec{kNic, kNetHop}, kChunk,
     kHopperNvls, 90},
    {"b200-dgx", "DGX B200: 8 x B200, NVLink 900 GB/s per direction per GPU, 400 Gb/s IB per GPU",
     ChipSpec{.bf16_flops_per_s = 2.3e15,
              .fp8_flops_per_s = 4.5e15,
              .hbm_bytes = 192'000'000'000,
              .hbm_bandwidth_bytes_per_s = 8.0e12},
     8, LinkSpec{900'000'000'000, kNvlinkHop}, kBlackwellNvlink, LinkSpec{kNic, kNetHop}, LinkSpec{kNic, kNetHop},
     kChunk, kBlackwellNvls, 100},
    {"gb200-nvl72", "GB200 NVL72: 72 B200 in one NVLink domain, 900 GB/s per direction per GPU",
     ChipSpec{.bf16_flops_per_s = 2.3e15,
              .fp8_flops_per_s = 4.5e15,
              .hbm_bytes = 192'000'000'000,
              .hbm_bandwidth_bytes_per_s = 8.0e12},
     72, LinkSpec{900'000'000'000, kNvlinkHop}, kBlackwellNvlink, LinkSpec{kNic, kNetHop}, LinkSpec{kNic, kNetHop},
     kChunk, kBlackwellNvls, 100},
}};

}  // namespace

std::span<const GpuPreset> gpu_presets() { return kGpuPresets; }

const GpuPreset* find_gpu_preset(std::string_view name) {
  for (const GpuPreset& p : kGpuPresets)
    if (p.name == name) return &p;
  return nullptr;
}

std::string gpu_preset_names() {
  std::string s;
  for (const GpuPreset& p : kGpuPresets) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

}  // namespace meshsim::topology
