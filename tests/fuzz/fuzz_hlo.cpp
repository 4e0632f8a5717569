// libFuzzer target: the XLA HLO reader and its lowering (hlo/hlo.hpp,
// hlo/lower.hpp). Any input must parse or end in meshsim::Error with a one-line
// message; so must reading every instruction's groups, pairs, lists and trip
// count, and lowering the module onto a slice of its device count.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "tests/fuzz/one_line.hpp"
#include "hlo/hlo.hpp"
#include "hlo/lower.hpp"

namespace {

using meshsim::fuzz::one_line;

template <class F>
void guarded(F f) {
  try {
    f();
  } catch (const meshsim::Error& e) {
    one_line(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace meshsim::hlo;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Module m;
  try {
    m = parse_module_text(text, "fuzz.hlo");
  } catch (const meshsim::Error& e) {
    one_line(e);
    return 0;
  }
  for (const Computation& c : m.computations)
    for (const Instruction& i : c.instructions) {
      if (i.attr("replica_groups")) guarded([&] { (void)device_groups(i, m); });
      if (i.attr("source_target_pairs")) guarded([&] { (void)source_target_pairs(i, m); });
      guarded([&] { (void)int_list(i, "dimensions", m); });
      (void)known_trip_count(i);
      if (i.opcode == "dot") guarded([&] { (void)dot_flops(i, c, m); });
    }
  if (m.devices() <= 64) {
    ImportOptions o;
    o.hardware = "tpu-v5e";
    o.shape = {m.devices()};
    guarded([&] { (void)import_module(m, o); });
  }
  return 0;
}
