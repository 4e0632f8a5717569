// libFuzzer target: Chakra rank files (chakra/et_file.hpp) and their import
// (chakra/import.hpp). Any bytes must read or end in meshsim::Error with a
// one-line message; so must importing them as both ranks of a 2-chip trace and,
// when that succeeds with few ops, simulating it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "base/error.hpp"
#include "chakra/et_file.hpp"
#include "chakra/import.hpp"
#include "driver/simulate.hpp"
#include "tests/fuzz/one_line.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string prefix = "/tmp/meshsim_fuzz_chakra_" + std::to_string(::getpid());
  for (int r = 0; r < 2; ++r) {
    std::ofstream out(prefix + "." + std::to_string(r) + ".et", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    (void)meshsim::chakra::read_rank(prefix + ".0.et");
    meshsim::chakra::ImportOptions o;
    o.hardware = "tpu-v5e";
    o.shape = {2};
    const meshsim::workloads::Workload w = meshsim::chakra::import_trace(prefix + ".0.et", o);
    if (w.ops.size() <= 64) (void)meshsim::driver::simulate(w);
  } catch (const meshsim::Error& e) {
    meshsim::fuzz::one_line(e);
  }
  for (int r = 0; r < 2; ++r) std::remove((prefix + "." + std::to_string(r) + ".et").c_str());
  return 0;
}
