// libFuzzer target: the calibration file parser (calibrate/calibration.hpp). Any
// input must parse or end in meshsim::Error with a one-line message; a parsed
// calibration must survive format_calibration and a second parse, printing the
// same text again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "calibrate/calibration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string formatted;
  try {
    formatted = meshsim::calibrate::format_calibration(meshsim::calibrate::parse_calibration(text, "fuzz.json"));
  } catch (const meshsim::Error& e) {
    const std::string_view message = e.what();
    if (message.empty() || message.find('\n') != std::string_view::npos) std::abort();  // one line, always
    return 0;
  }
  // What meshsim writes, it reads back to the same text.
  const std::string again =
      meshsim::calibrate::format_calibration(meshsim::calibrate::parse_calibration(formatted, "formatted.json"));
  if (again != formatted) std::abort();
  return 0;
}
