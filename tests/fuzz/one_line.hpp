#pragma once
// The fuzz targets' check of an error: one non-empty line, or abort (a crash
// libFuzzer reports).
#include <cstdlib>
#include <string_view>

#include "base/error.hpp"

namespace meshsim::fuzz {

inline void one_line(const Error& e) {
  const std::string_view message = e.what();
  if (message.empty() || message.find('\n') != std::string_view::npos) std::abort();
}

}  // namespace meshsim::fuzz
