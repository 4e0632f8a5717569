#pragma once
// The vocabulary of communication ops, shared by workloads, expansion and reports.
#include <optional>
#include <string_view>

namespace meshsim {

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce, AllToAll, Send };

constexpr std::string_view kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::AllToAll:
      return "all_to_all";
    case CollectiveKind::Send:
      return "send";
  }
  return "?";
}

constexpr std::optional<CollectiveKind> parse_kind(std::string_view s) {
  for (auto k : {CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce,
                 CollectiveKind::AllToAll, CollectiveKind::Send})
    if (kind_name(k) == s) return k;
  return std::nullopt;
}

}  // namespace meshsim
