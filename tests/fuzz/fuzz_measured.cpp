// libFuzzer target: the readers of measurements made elsewhere
// (calibrate/measured.hpp, calibrate/nccl_tests.hpp): points CSV and JSON and
// nccl-tests logs. Any input must parse or end in meshsim::Error with a one-line
// message, and so must building the workload of each point it parsed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "tests/fuzz/one_line.hpp"
#include "calibrate/measured.hpp"

namespace {

using meshsim::fuzz::one_line;

template <class Parse>
void check(Parse parse) {
  std::vector<meshsim::calibrate::MeasuredPoint> points;
  try {
    points = parse();
  } catch (const meshsim::Error& e) {
    one_line(e);
    return;
  }
  for (std::size_t i = 0; i < points.size() && i < 4; ++i) {
    try {
      (void)meshsim::calibrate::point_workload(points[i]);
    } catch (const meshsim::Error& e) {
      one_line(e);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace meshsim::calibrate;
  check([&] { return parse_points_csv(text, "fuzz.csv"); });
  check([&] { return parse_points_json(text, "fuzz.json"); });
  check([&] { return points_from_nccl_tests(text, "fuzz.log", {"h100-dgx", 0, "", "", ""}); });
  return 0;
}
