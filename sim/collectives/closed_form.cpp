#include "sim/collectives/closed_form.hpp"

#include <algorithm>
#include <cmath>

namespace meshsim::collectives {

ClosedForm cheat_sheet(const ClosedFormInput& in) {
  const double v = static_cast<double>(in.bytes);
  const double w = 2.0 * in.link_bandwidth_one_way;  // bidirectional per link
  const double t_min = in.hop_latency.seconds();
  double sum_x = 0, product = 1, max_x = 0;
  for (int x : in.axis_sizes) {
    sum_x += x;
    product *= x;
    max_x = std::max(max_x, static_cast<double>(x));
  }
  const double n_axes = static_cast<double>(in.axis_sizes.size());
  ClosedForm f;
  switch (in.kind) {
    case Kind::AllGather:
    case Kind::ReduceScatter:
      f.latency_s = t_min * sum_x / 2;
      f.bandwidth_s = n_axes > 0 ? v / (w * n_axes) : 0;
      break;
    case Kind::AllReduce:
      f.latency_s = 2 * t_min * sum_x / 2;
      f.bandwidth_s = n_axes > 0 ? 2 * v / (w * n_axes) : 0;
      break;
    case Kind::AllToAll:
      f.latency_s = t_min * sum_x / 2;
      f.bandwidth_s = n_axes > 0 ? max_x * v / (4 * w * product) : 0;
      break;
    case Kind::Send:
      f.latency_s = t_min * in.send_hops;
      f.bandwidth_s = in.send_routes > 0 ? v / (in.send_routes * in.link_bandwidth_one_way) : 0;
      break;
    case Kind::Matmul:  // not communication: kernels/roofline.hpp
    case Kind::Elementwise:
      break;
  }
  if (in.slices < 2) return f;
  // Multislice: the DCN part after (or before) the ICI part.
  const double s = in.slices, b = in.dcn_bandwidth_one_way, step = 2 * in.dcn_hop_latency.seconds();
  const double p = product * s;
  switch (in.kind) {
    case Kind::AllGather:
    case Kind::ReduceScatter:
      f.latency_s += step * std::floor(s / 2);
      f.bandwidth_s += (s - 1) * v / (p * b);
      break;
    case Kind::AllReduce:
      f.latency_s += 2 * step * std::floor(s / 2);
      f.bandwidth_s += 2 * (s - 1) * v / (p * b);
      break;
    case Kind::AllToAll:
      f.latency_s += step;
      f.bandwidth_s += (s - 1) * v / (s * p * b);
      break;
    case Kind::Send:
      f.latency_s = in.send_latency.seconds();
      f.bandwidth_s = in.send_routes > 0 ? v / (in.send_routes * b) : 0;
      break;
    case Kind::Matmul:
    case Kind::Elementwise:
      break;
  }
  return f;
}

}  // namespace meshsim::collectives
