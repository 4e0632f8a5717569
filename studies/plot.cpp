#include "studies/plot.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "base/error.hpp"

extern char** environ;

namespace meshsim::studies {

std::string gp_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

namespace {

void run_gnuplot(const std::string& script, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string prog = "gnuplot";
  std::vector<char*> argv{prog.data(), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    std::error_code ec;
    std::filesystem::remove(log, ec);
    if (rc == ENOENT)
      throw Error("--plot: gnuplot is not installed (Debian package gnuplot-nox; scripts/install-deps installs it)");
    throw Error(std::string("--plot: cannot start gnuplot: ") + std::strerror(rc));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::string first, line;
    while (std::getline(in, line))
      if (!line.empty() && first.empty()) first = line;
    throw Error(fmt::format("--plot: gnuplot failed on {} ({}); its messages are in {}", script,
                            first.empty() ? "no message" : first, log));
  }
  std::error_code ec;
  std::filesystem::remove(log, ec);
}

}  // namespace

void write_plot(const std::string& prefix, const std::string& what, const std::string& data, const std::string& body,
                int width, int height) {
  std::string script = fmt::format("# {}: `gnuplot {}.gp` redraws {}.png and {}.svg from {}.dat\n", what, prefix,
                                   prefix, prefix, prefix);
  script += fmt::format("set terminal pngcairo noenhanced size {},{} font ',10'\nset output {}\n{}", width, height,
                        gp_quote(prefix + ".png"), body);
  script += fmt::format("set terminal svg noenhanced size {},{} font ',10' dynamic\nset output {}\n{}", width, height,
                        gp_quote(prefix + ".svg"), body);
  script += "set output\n";
  for (const auto& [path, text] : {std::pair{prefix + ".dat", data}, std::pair{prefix + ".gp", script}}) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw Error(path + ": cannot write file");
  }
  run_gnuplot(prefix + ".gp", prefix + ".gnuplot.log");
}

}  // namespace meshsim::studies
