#include "base/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace meshsim {

InputError::InputError(std::string file, std::string json_pointer, std::string message)
    : Error(file + ":" + json_pointer + ": " + message),
      file_(std::move(file)),
      pointer_(std::move(json_pointer)),
      message_(std::move(message)) {}

void SourceRef::fail(const std::string& message) const {
  throw InputError(file, one_line(pointer), one_line(message));
}

std::string one_line(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", u);
      out += code;
    } else {
      out += c;
    }
  }
  return out;
}

SourceRef SourceRef::child(std::string_view key) const { return {file, pointer + "/" + escape_pointer_token(key)}; }

SourceRef SourceRef::child(std::size_t index) const { return {file, pointer + "/" + std::to_string(index)}; }

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

void assertion_failed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "meshsim: internal error: %s (%s) at %s:%d\n", message, condition, file, line);
  std::abort();
}

}  // namespace meshsim
