#pragma once
// The vocabulary of lowered ops, shared by workloads, expansion and reports:
// the communication primitives and the local matmul.
#include <optional>
#include <string_view>

namespace meshsim {

// Elementwise: a memory-bound local kernel priced by its HBM bytes (training
// steps lower norms, activations, softmax and the optimizer update to it).
enum class OpKind { AllGather, ReduceScatter, AllReduce, AllToAll, Send, Matmul, Elementwise };

constexpr std::string_view kind_name(OpKind k) {
  switch (k) {
    case OpKind::AllGather:
      return "all_gather";
    case OpKind::ReduceScatter:
      return "reduce_scatter";
    case OpKind::AllReduce:
      return "all_reduce";
    case OpKind::AllToAll:
      return "all_to_all";
    case OpKind::Send:
      return "send";
    case OpKind::Matmul:
      return "matmul";
    case OpKind::Elementwise:
      return "elementwise";
  }
  return "?";
}

constexpr std::optional<OpKind> parse_kind(std::string_view s) {
  for (auto k : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::AllToAll, OpKind::Send,
                 OpKind::Matmul, OpKind::Elementwise})
    if (kind_name(k) == s) return k;
  return std::nullopt;
}

constexpr bool is_local(OpKind k) { return k == OpKind::Matmul || k == OpKind::Elementwise; }
constexpr bool is_collective(OpKind k) { return k != OpKind::Send && !is_local(k); }

}  // namespace meshsim
