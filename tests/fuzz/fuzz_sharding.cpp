// libFuzzer target: the sharding notation ("A[I_X, J_YZ]"). Input: the sharding
// text, then after the first newline a comma-separated list of mesh axis names.
// Parsing either fails with a message or succeeds; a parsed sharding whose
// subscripts split into the given axes must survive format_sharding and a second
// parse unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/sharding.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = input.find('\n');
  const std::string_view text = input.substr(0, newline);
  std::vector<std::string> axis_names;
  if (newline != std::string_view::npos) {
    std::string_view rest = input.substr(newline + 1);
    while (true) {
      const std::size_t comma = rest.find(',');
      axis_names.emplace_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  std::string error;
  const auto parsed = meshsim::workloads::parse_sharding(text, error);
  if (!parsed) {
    check(!error.empty());
    return 0;
  }
  std::vector<std::string> dims;
  std::vector<std::vector<std::string>> axes;
  for (const meshsim::workloads::ShardedDim& d : parsed->dims) {
    check(!d.dim.empty());
    dims.push_back(d.dim);
    const auto split = meshsim::workloads::split_subscript(d.subscript, axis_names, error);
    if (!split) {
      check(!error.empty());
      return 0;
    }
    std::string joined;
    for (const std::string& a : *split) joined += a;
    check(joined == d.subscript);
    axes.push_back(*split);
  }
  const std::string formatted = meshsim::workloads::format_sharding(parsed->array, dims, axes);
  const auto again = meshsim::workloads::parse_sharding(formatted, error);
  check(again.has_value() && again->array == parsed->array && again->dims.size() == parsed->dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i)
    check(again->dims[i].dim == parsed->dims[i].dim && again->dims[i].subscript == parsed->dims[i].subscript);
  return 0;
}
