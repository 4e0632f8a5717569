#include "tools/meshsim/commands.hpp"

#include <cstdio>

namespace meshsim::cli {

int fail(const std::string& message) {
  std::fprintf(stderr, "meshsim: error: %s\n", message.c_str());
  return 1;
}

}  // namespace meshsim::cli
