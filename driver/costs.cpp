#include "driver/costs.hpp"

#include <fmt/format.h>

#include "base/error.hpp"

namespace meshsim::driver {

double matmul_flops(const workloads::Op& op) {
  return 2.0 * static_cast<double>(op.m) * static_cast<double>(op.k) * static_cast<double>(op.n);
}

kernels::Roofline matmul_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file) {
  MESHSIM_ASSERT(op.kind == OpKind::Matmul && !op.inputs.empty(), "not a matmul");
  const std::string& dtype = op.inputs[0].dtype;
  double peak = 0;
  const char* key = "";
  if (dtype == "bf16" || dtype == "fp16") {
    peak = hw.chip.bf16_flops_per_s;
    key = "bf16_flops_per_s";
  } else if (dtype == "int8") {
    peak = hw.chip.int8_ops_per_s;
    key = "int8_ops_per_s";
  } else if (dtype == "fp8") {
    peak = hw.chip.fp8_flops_per_s;
    key = "fp8_flops_per_s";
  } else if (dtype == "fp32") {
    peak = hw.chip.fp32_flops_per_s;
    key = "fp32_flops_per_s";
  } else {
    throw InputError(file, op.pointer, fmt::format("no matmul rate for dtype {} (use bf16, fp16, fp32, int8 or fp8)", dtype));
  }
  if (peak <= 0)
    throw InputError(file, op.pointer,
                     fmt::format("{} has no published {} matmul rate; give \"hardware\": {{\"{}\": ...}}", hw.preset,
                                 dtype, key));
  if (hw.chip.hbm_bandwidth_bytes_per_s <= 0)
    throw InputError(file, op.pointer, fmt::format("{} has no HBM bandwidth; give \"hardware\": {{\"hbm_bandwidth_bytes_per_s\": ...}}", hw.preset));
  kernels::RooflineInput in = kernels::matmul_traffic(op.m, op.k, op.n, op.inputs[0].element_bytes);
  in.peak_flops_per_s = peak;
  in.hbm_bandwidth_bytes_per_s = hw.chip.hbm_bandwidth_bytes_per_s;
  in.efficiency = hw.matmul_efficiency;
  return kernels::roofline(in);
}

collectives::ClosedForm communication_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                    const topology::Torus& torus) {
  std::vector<int> sizes;
  for (int a : op.hw_axes) sizes.push_back(torus.axis(a).size);
  collectives::ClosedFormInput in;
  in.kind = op.kind;
  in.bytes = op.bytes;
  in.link_bandwidth_one_way = static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  in.hop_latency = w.hardware.ici.latency;
  in.axis_sizes = sizes;
  if (op.kind == OpKind::Send) {
    in.send_hops = torus.hop_distance(op.src, op.dst);
    in.send_routes = collectives::send_paths(torus, op.src, op.dst);
  }
  return collectives::cheat_sheet(in);
}


}  // namespace meshsim::driver
