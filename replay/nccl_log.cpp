#include "replay/nccl_log.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

namespace meshsim::replay {

namespace {

// NCCL's tuner enums (src/include/plugin/nccl_tuner.h), for the older numeric form.
constexpr std::array<const char*, 7> kAlgorithms = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                                    "NVLS", "NVLS_TREE", "PAT"};
constexpr std::array<const char*, 3> kProtocols = {"LL", "LL128", "SIMPLE"};

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// A name, or an enum number looked up in `names`; "" for a number out of range.
template <std::size_t N>
std::string name_of(const std::string& token, const std::array<const char*, N>& names) {
  if (token.find_first_not_of("0123456789") != std::string::npos) return upper(token);
  std::size_t i = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), i);
  return ec == std::errc() && end == token.data() + token.size() && i < N ? names[i] : "";
}

}  // namespace

std::optional<NcclChoice> parse_nccl_tuning_line(std::string_view line) {
  static const std::regex kLine(R"(NCCL INFO (?:[A-Za-z]+: )?[0-9]+ Bytes -> Algo ([A-Za-z0-9_]+) proto ([A-Za-z0-9_]+))");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(line.begin(), line.end(), m, kLine)) return std::nullopt;
  NcclChoice c{name_of(m[1].str(), kAlgorithms), name_of(m[2].str(), kProtocols)};
  if (c.algorithm.empty() || c.protocol.empty()) return std::nullopt;
  return c;
}

NcclTuningLog::NcclTuningLog() {
  if (std::getenv("NCCL_DEBUG") || std::getenv("NCCL_DEBUG_FILE")) return;  // the user's own logging
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) return;
  // A new file of our own (mkstemps), never one left by an earlier process with
  // the same id or another user's: NCCL opens it with fopen(.., "w").
  std::string path = (dir / "meshsim-nccl-XXXXXX.log").string();
  const int fd = ::mkstemps(path.data(), 4);
  if (fd < 0) return;
  ::close(fd);
  // NCCL expands %h and %p in the file name; a literal % is written %%.
  std::string escaped;
  for (char c : path) escaped += c == '%' ? std::string("%%") : std::string(1, c);
  if (::setenv("NCCL_DEBUG", "INFO", 1) != 0 || ::setenv("NCCL_DEBUG_FILE", escaped.c_str(), 1) != 0) {
    std::filesystem::remove(path, ec);
    return;
  }
  if (!std::getenv("NCCL_DEBUG_SUBSYS")) ::setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
  path_ = std::move(path);
}

NcclTuningLog::~NcclTuningLog() {
  if (!active()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

std::optional<NcclChoice> NcclTuningLog::next() {
  if (!active()) return std::nullopt;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return std::nullopt;
  // Shorter than what was read: NCCL emptied the file when it opened it ("w").
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path_, ec);
  if (ec) return std::nullopt;
  if (size < offset_) offset_ = 0;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::optional<NcclChoice> last;
  std::string line;
  // Whole lines only: one NCCL is still writing is read next time.
  while (std::getline(in, line) && !in.eof()) {
    offset_ += line.size() + 1;
    if (auto c = parse_nccl_tuning_line(line)) last = std::move(c);
  }
  return last;
}

}  // namespace meshsim::replay
