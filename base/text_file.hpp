#pragma once
// A whole input file as text. A folder, a file that cannot be opened or read is
// an Error "PATH: is a directory, not a WHAT" / "PATH: cannot open file" /
// "PATH: cannot read file".
#include <string>

namespace meshsim {

std::string read_text_file(const std::string& path, const char* what);

}  // namespace meshsim
