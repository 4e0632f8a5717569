#include "replay/nccl_log.hpp"

#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

using meshsim::replay::NcclChoice;
using meshsim::replay::NcclTuningLog;
using meshsim::replay::parse_nccl_tuning_line;

namespace {

std::string describe(const std::optional<NcclChoice>& c) {
  return c ? c->algorithm + "/" + c->protocol : "none";
}

}  // namespace

TEST_CASE("nccl log: both forms of NCCL's tuning line, and nothing else", "[replay]") {
  // NCCL 2.19 on (src/enqueue.cc): the function, the bytes, the names.
  CHECK(describe(parse_nccl_tuning_line(
            "gpu0:1234:1234 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}")) ==
        "TREE/LL");
  CHECK(describe(parse_nccl_tuning_line(
            "h:1:1 [0] NCCL INFO AllGather: 268435456 Bytes -> Algo NVLS_TREE proto SIMPLE channel{Lo..Hi}={0..15} "
            "comm 0x55a7a339db50")) == "NVLS_TREE/SIMPLE");
  CHECK(describe(parse_nccl_tuning_line(
            "h:1:1 [0] NCCL INFO AllReduce: 8388608 Bytes -> Algo Ring proto LL128 channel{Lo..Hi}={0..15}")) ==
        "RING/LL128");
  // Before (src/enqueue.cc, getAlgoInfo): the tuner's enum numbers.
  CHECK(describe(parse_nccl_tuning_line("node-0:309:309 [0] NCCL INFO 37756928 Bytes -> Algo 1 proto 2 time 2860.2")) ==
        "RING/SIMPLE");
  CHECK(describe(parse_nccl_tuning_line("n:1:1 [0] NCCL INFO 1024 Bytes -> Algo 4 proto 1 time 9.5")) == "NVLS/LL128");
  // Enum numbers NCCL does not have, and other lines.
  CHECK_FALSE(parse_nccl_tuning_line("n:1:1 [0] NCCL INFO 1024 Bytes -> Algo 9 proto 1 time 9.5"));
  CHECK_FALSE(parse_nccl_tuning_line("n:1:1 [0] NCCL INFO 1024 Bytes -> Algo 1 proto 3 time 9.5"));
  CHECK_FALSE(parse_nccl_tuning_line("n:1:1 [0] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7"));
  CHECK_FALSE(parse_nccl_tuning_line("n:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f count 262144 datatype 7"));
  CHECK_FALSE(parse_nccl_tuning_line(""));
}

TEST_CASE("nccl log: the environment it sets, and its lines read op by op", "[replay]") {
  for (const char* v : {"NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS"}) ::unsetenv(v);
  std::string path;
  {
    NcclTuningLog log;
    REQUIRE(log.active());
    path = log.path();
    CHECK(std::string(std::getenv("NCCL_DEBUG")) == "INFO");
    CHECK(std::string(std::getenv("NCCL_DEBUG_SUBSYS")) == "TUNING");
    CHECK(std::string(std::getenv("NCCL_DEBUG_FILE")) == log.path());
    CHECK(std::filesystem::is_regular_file(path));  // its own new file, empty
    CHECK(std::filesystem::file_size(path) == 0);
    CHECK_FALSE(log.next());  // NCCL has not run
    std::ofstream out(log.path(), std::ios::binary);
    out << "h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n"
        << "h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..0}\n"
        << "h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo TREE proto SIM" << std::flush;
    CHECK(describe(log.next()) == "RING/LL128");  // the last whole line
    CHECK_FALSE(log.next());                      // nothing new
    out << "PLE channel{Lo..Hi}={0..0}\n" << std::flush;
    CHECK(describe(log.next()) == "TREE/SIMPLE");  // the line finished since
    out.close();
    // NCCL emptied the file (it opens it with "w"): read again from its start.
    std::ofstream again(log.path(), std::ios::binary | std::ios::trunc);
    again << "h:1:1 [0] NCCL INFO 1024 Bytes -> Algo 0 proto 0 time 9.5\n" << std::flush;
    CHECK(describe(log.next()) == "TREE/LL");
    again.close();
    CHECK(std::filesystem::exists(path));
  }
  CHECK_FALSE(std::filesystem::exists(path));  // removed with the log
  {
    // Two logs (two processes) never share a file.
    for (const char* v : {"NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS"}) ::unsetenv(v);
    NcclTuningLog a;
    ::unsetenv("NCCL_DEBUG");
    ::unsetenv("NCCL_DEBUG_FILE");
    NcclTuningLog b;
    REQUIRE(a.active());
    REQUIRE(b.active());
    CHECK(a.path() != b.path());
    ::unsetenv("NCCL_DEBUG");
    ::unsetenv("NCCL_DEBUG_FILE");
  }
  {
    // A temporary folder with % in its name: NCCL reads %% as a literal %.
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "meshsim%p-nccl-test";
    std::filesystem::create_directories(dir);
    const char* old_tmp = std::getenv("TMPDIR");
    const std::string saved = old_tmp ? old_tmp : "";
    ::setenv("TMPDIR", dir.c_str(), 1);
    {
      NcclTuningLog log;
      REQUIRE(log.active());
      CHECK(log.path().find("meshsim%p-nccl-test") != std::string::npos);
      const std::string file = std::getenv("NCCL_DEBUG_FILE");
      CHECK(file.find("meshsim%%p-nccl-test") != std::string::npos);
      CHECK(file.find("meshsim%p-nccl-test") == std::string::npos);
    }
    if (old_tmp)
      ::setenv("TMPDIR", saved.c_str(), 1);
    else
      ::unsetenv("TMPDIR");
    std::filesystem::remove_all(dir);
    for (const char* v : {"NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS"}) ::unsetenv(v);
  }
  // The user's own NCCL logging is left alone.
  for (const char* v : {"NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS"}) ::unsetenv(v);
  ::setenv("NCCL_DEBUG", "WARN", 1);
  {
    NcclTuningLog log;
    CHECK_FALSE(log.active());
    CHECK(std::getenv("NCCL_DEBUG_FILE") == nullptr);
    CHECK_FALSE(log.next());
  }
  ::unsetenv("NCCL_DEBUG");
  // A user's NCCL_DEBUG_FILE alone is left alone too.
  ::setenv("NCCL_DEBUG_FILE", "/tmp/mine.%p.log", 1);
  {
    NcclTuningLog log;
    CHECK_FALSE(log.active());
    CHECK(std::getenv("NCCL_DEBUG") == nullptr);
    CHECK(std::string(std::getenv("NCCL_DEBUG_FILE")) == "/tmp/mine.%p.log");
  }
  ::unsetenv("NCCL_DEBUG_FILE");
}
