#include "base/text_file.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.hpp"

namespace meshsim {

std::string read_text_file(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a " + what);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path + ": cannot read file");
  return ss.str();
}

}  // namespace meshsim
