#include "tools/meshsim/commands.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <new>
#include <system_error>

#include "base/error.hpp"

namespace meshsim::cli {

int fail(const std::string& message) {
  std::fprintf(stderr, "meshsim: error: %s\n", message.c_str());
  return 1;
}

Failure failure_of(const std::function<void()>& body) {
  try {
    body();
    return {};
  } catch (const Error& e) {
    return {e.what(), true};
  } catch (const std::bad_alloc&) {
    return {"out of memory", false};
  } catch (const std::exception& e) {
    return {std::string("internal error: ") + e.what(), false};
  }
}

int guarded(const std::function<int()>& body) {
  int code = 0;
  const Failure f = failure_of([&] { code = body(); });
  return f.message.empty() ? code : fail(f.message);
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(path + ": cannot write file");
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec_a, ec_b;
  // Absolute first: weakly_canonical leaves a relative path with no existing prefix relative.
  const std::filesystem::path pa = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ec_a), ec_a);
  const std::filesystem::path pb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, ec_b), ec_b);
  if (ec_a || ec_b) return a == b;
  return pa == pb;
}

}  // namespace meshsim::cli
