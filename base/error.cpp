#include "base/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace meshsim {

InputError::InputError(std::string file, std::string json_pointer, std::string message)
    : Error(file + ":" + json_pointer + ": " + message),
      file_(std::move(file)),
      pointer_(std::move(json_pointer)),
      message_(std::move(message)) {}

void assertion_failed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "meshsim: internal error: %s (%s) at %s:%d\n", message, condition, file, line);
  std::abort();
}

}  // namespace meshsim
