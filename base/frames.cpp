#include "base/frames.hpp"

#include <charconv>

namespace meshsim {

std::string pack_texts(const std::vector<std::string>& texts) {
  std::string out;
  for (const std::string& t : texts) {
    out += std::to_string(t.size());
    out += '\n';
    out += t;
  }
  return out;
}

std::optional<std::vector<std::string>> unpack_texts(const std::string& packed) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < packed.size()) {
    const std::size_t newline = packed.find('\n', at);
    if (newline == std::string::npos || newline == at) return std::nullopt;
    std::size_t length = 0;
    const char* end = packed.data() + newline;
    const auto [p, ec] = std::from_chars(packed.data() + at, end, length);
    if (ec != std::errc() || p != end || length > packed.size() - newline - 1) return std::nullopt;
    out.push_back(packed.substr(newline + 1, length));
    at = newline + 1 + length;
  }
  return out;
}

}  // namespace meshsim
