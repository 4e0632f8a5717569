// nccl-tests output: the tables of every version since 2019, the lines around
// them, several tests in one file, and each way a log is refused. The numbers are
// our own, laid out the way nccl-tests prints them.
#include "calibrate/nccl_tests.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <string>

#include "base/error.hpp"
#include "calibrate/measured.hpp"
#include "driver/simulate.hpp"

using namespace meshsim;
using namespace meshsim::calibrate;

namespace {

// One H100 node, 8 GPUs in one process (-g 8), nccl-tests 2.17 on.
const std::string kAllReducePreamble = R"(# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 8 maxBytes 4294967296 step: 16(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  51230 on     node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  51230 on     node-a device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  51230 on     node-a device  2 [0000:3a:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  51230 on     node-a device  3 [0000:5d:00] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  51230 on     node-a device  4 [0000:9a:00] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  51230 on     node-a device  5 [0000:ab:00] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  51230 on     node-a device  6 [0000:ba:00] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  51230 on     node-a device  7 [0000:db:00] NVIDIA H100 80GB HBM3
)";

const std::string kHeader =
    R"(#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
)";

const std::string kAllReduceRows =
    R"(           8             2     float     sum      -1    14.21    0.00    0.00       0    14.05    0.00    0.00       0
        1024           256     float     sum      -1    15.10    0.07    0.12       0    14.87    0.07    0.12       0
     1048576        262144     float     sum      -1    28.40   36.92   64.61       0    28.05   37.38   65.42       0
    16777216       4194304     float     sum      -1    92.50  181.38  317.41       0    91.80  182.76  319.83       0
   268435456      67108864     float     sum      -1  1020.40  263.07  460.37       0  1018.90  263.46  461.05       0
  4294967296    1073741824     float     sum      -1  15800.0  271.83  475.71       0  15790.0  272.01  476.01       0
)";

const std::string kFooter = R"(# Out of bounds values : 0 OK
# Avg bus bandwidth    : 222.7
#
# Collective test concluded: all_reduce_perf
#
)";

const std::string kAllGather = R"(# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_gather_perf
# nThread 1 nGpus 8 minBytes 1024 maxBytes 268435456 step: 1024(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  51302 on     node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  51302 on     node-a device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  51302 on     node-a device  2 [0000:3a:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  51302 on     node-a device  3 [0000:5d:00] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  51302 on     node-a device  4 [0000:9a:00] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  51302 on     node-a device  5 [0000:ab:00] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  51302 on     node-a device  6 [0000:ba:00] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  51302 on     node-a device  7 [0000:db:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
        1024            32     float    none      -1    13.02    0.08    0.07       0    12.71    0.08    0.07       0
     1048576         32768     float    none      -1    22.15   47.34   41.42       0    21.60   48.55   42.48       0
   268435456       8388608     float    none      -1   760.20  353.11  308.97       0   755.40  355.36  310.94       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 117.3
#
# Collective test concluded: all_gather_perf
#
)";

// One line of the modern table, for the error cases.
const std::string kGoodRow =
    "     1048576        262144     float     sum      -1    28.40   36.92   64.61       0    28.05   37.38   65.42   "
    "    0\n";

std::string table_with(const std::string& rows) {
  return kHeader + rows + kFooter;
}

std::string error_of(const std::string& text) {
  try {
    parse_nccl_tests(text, "nccl.log");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("nccl-tests: an all_reduce table, out-of-place and in-place", "[calibrate]") {
  const std::vector<NcclTestsLog> logs =
      parse_nccl_tests(kAllReducePreamble + kHeader + kAllReduceRows + kFooter, "nccl.log");
  REQUIRE(logs.size() == 1);
  const NcclTestsLog& log = logs[0];
  CHECK(log.collective == "all_reduce");
  CHECK(log.ranks == 8);
  CHECK(log.nodes == 1);
  CHECK(log.device == "NVIDIA H100 80GB HBM3");
  REQUIRE(log.rows.size() == 6);
  const NcclTestsRow& first = log.rows[0];
  CHECK(first.bytes == 8);
  CHECK(first.count == 2);
  CHECK(first.type == "float");
  CHECK(first.redop == "sum");
  CHECK(first.out_of_place_us == 14.21);
  CHECK(first.in_place_us == 14.05);
  CHECK(first.line == 18);  // 13 preamble lines, 4 header lines, then the rows
  const NcclTestsRow& last = log.rows[5];
  CHECK(last.bytes == 4294967296ull);
  CHECK(last.count == 1073741824ull);
  CHECK(last.out_of_place_us == 15800.0);
  CHECK(last.out_of_place_busbw == 475.71);
  CHECK(last.in_place_busbw == 476.01);
  CHECK(last.line == 23);
}

TEST_CASE("nccl-tests: NCCL's log lines, blank lines and comments are skipped", "[calibrate]") {
  const std::string text = "Warning: Permanently added 'node-a' (ED25519) to the list of known hosts.\n" +
                           kAllReducePreamble +
                           "node-a:51230:51230 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                           "node-a:51230:51230 [0] NCCL INFO NCCL version 2.27.3+cuda12.9\n"
                           "\n" +
                           kHeader + "# a comment inside the table\n" + kGoodRow +
                           "node-a:51230:51245 [3] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7\n"
                           "\n" +
                           kGoodRow + kFooter + "\nall done\n";
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(text, "nccl.log");
  REQUIRE(logs.size() == 1);
  REQUIRE(logs[0].rows.size() == 2);
  CHECK(logs[0].rows[0].line == 23);
  CHECK(logs[0].rows[1].line == 26);
  CHECK(logs[0].rows[1].out_of_place_busbw == 64.61);
}

TEST_CASE("nccl-tests: a table alone, without the lines before it", "[calibrate]") {
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(table_with(kGoodRow), "nccl.log");
  REQUIRE(logs.size() == 1);
  CHECK(logs[0].collective.empty());
  CHECK(logs[0].ranks == 0);
  CHECK(logs[0].nodes == 0);
  CHECK(logs[0].device.empty());
  CHECK(logs[0].rows.size() == 1);
}

TEST_CASE("nccl-tests: several tests in one file", "[calibrate]") {
  const std::vector<NcclTestsLog> logs =
      parse_nccl_tests(kAllReducePreamble + kHeader + kAllReduceRows + kFooter + kAllGather, "sweep.log");
  REQUIRE(logs.size() == 2);
  CHECK(logs[0].collective == "all_reduce");
  CHECK(logs[0].rows.size() == 6);
  CHECK(logs[1].collective == "all_gather");
  CHECK(logs[1].ranks == 8);
  REQUIRE(logs[1].rows.size() == 3);
  // all_gather's size is the gathered total; count is each rank's part.
  CHECK(logs[1].rows[2].bytes == 268435456);
  CHECK(logs[1].rows[2].count == 8388608);
  CHECK(logs[1].rows[2].redop == "none");
  CHECK(logs[1].rows[2].out_of_place_us == 760.20);
  CHECK(logs[1].rows[2].in_place_busbw == 310.94);
}

TEST_CASE("nccl-tests: the per-test columns of 2019-2022 (all_gather without redop and root)", "[calibrate]") {
  const std::string text =
      R"(# nThread 1 nGpus 8 minBytes 65536 maxBytes 1073741824 step: 256(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid   7001 on   dgx-a100 device  0 [0x07] NVIDIA A100-SXM4-80GB
#   Rank  1 Pid   7001 on   dgx-a100 device  1 [0x0f] NVIDIA A100-SXM4-80GB
#   Rank  2 Pid   7001 on   dgx-a100 device  2 [0x47] NVIDIA A100-SXM4-80GB
#   Rank  3 Pid   7001 on   dgx-a100 device  3 [0x4e] NVIDIA A100-SXM4-80GB
#   Rank  4 Pid   7001 on   dgx-a100 device  4 [0x87] NVIDIA A100-SXM4-80GB
#   Rank  5 Pid   7001 on   dgx-a100 device  5 [0x90] NVIDIA A100-SXM4-80GB
#   Rank  6 Pid   7001 on   dgx-a100 device  6 [0xb7] NVIDIA A100-SXM4-80GB
#   Rank  7 Pid   7001 on   dgx-a100 device  7 [0xbd] NVIDIA A100-SXM4-80GB
#
#                                             out-of-place                       in-place
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
       65536          2048   float    18.44    3.55    3.11  0e+00    17.90    3.66    3.20  0e+00
    16777216        524288   float    96.31  174.20  152.43  0e+00    95.12  176.38  154.33  0e+00
  1073741824      33554432   float   4890.3  219.57  192.12  0e+00   4861.7  220.86  193.25  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 116.6
#
)";
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(text, "old.log");
  REQUIRE(logs.size() == 1);
  const NcclTestsLog& log = logs[0];
  CHECK(log.collective.empty());  // not printed before 2025
  CHECK(log.ranks == 8);
  CHECK(log.nodes == 1);
  CHECK(log.device == "NVIDIA A100-SXM4-80GB");
  REQUIRE(log.rows.size() == 3);
  CHECK(log.rows[0].redop.empty());
  CHECK(log.rows[2].bytes == 1073741824);
  CHECK(log.rows[2].out_of_place_us == 4890.3);
  CHECK(log.rows[2].in_place_us == 4861.7);
  CHECK(log.rows[2].in_place_busbw == 193.25);
}

TEST_CASE("nccl-tests: #wrong N/A when run with -c 0", "[calibrate]") {
  const std::string rows =
      R"(           8             2  bfloat16     sum      -1    14.21    0.00    0.00     N/A    14.05    0.00    0.00     N/A
     1048576        262144  bfloat16     sum      -1    28.40   36.92   64.61     N/A    28.05   37.38   65.42     N/A
)";
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(table_with(rows), "nocheck.log");
  REQUIRE(logs.size() == 1);
  REQUIRE(logs[0].rows.size() == 2);
  CHECK(logs[0].rows[1].type == "bfloat16");
  CHECK(logs[0].rows[1].in_place_us == 28.05);
}

TEST_CASE("nccl-tests: two nodes, 16 ranks, one process per GPU", "[calibrate]") {
  std::string text =
      "# Collective test starting: all_reduce_perf_mpi\n"
      "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 268435456 step: 256(factor) warmup iters: 5 "
      "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n";
  const char* bus[] = {"0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00",
                       "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00"};
  for (int r = 0; r < 16; ++r)
    text += "#  Rank " + std::string(r < 10 ? " " : "") + std::to_string(r) + " Group  0 Pid  " +
            std::to_string(61000 + r) + " on     " + (r < 8 ? "h100-a" : "h100-b") + " device  " +
            std::to_string(r % 8) + " [" + bus[r % 8] + "] NVIDIA H100 80GB HBM3\n";
  text += kHeader;
  text +=
      "     1048576        262144     float     sum      -1    61.30   17.11   32.07       0    60.95   17.20   "
      "32.26       0\n";
  text +=
      "   268435456      67108864     float     sum      -1  1920.50  139.77  262.08       0  1915.20  140.16  "
      "262.80       0\n";
  text += kFooter;
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(text, "two-nodes.log");
  REQUIRE(logs.size() == 1);
  CHECK(logs[0].collective == "all_reduce");
  CHECK(logs[0].ranks == 16);
  CHECK(logs[0].nodes == 2);
  CHECK(logs[0].device == "NVIDIA H100 80GB HBM3");
  REQUIRE(logs[0].rows.size() == 2);
  CHECK(logs[0].rows[1].out_of_place_busbw == 262.08);
}

TEST_CASE("nccl-tests: -C's cputime and -S's timestamps", "[calibrate]") {
  const std::string text =
      R"(#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root  cputime   algbw   busbw  #wrong  cputime   algbw   busbw  #wrong           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S
           8             2     float     sum      -1    14.21    0.00    0.00       0    14.05    0.00    0.00       0  2025-06-03 10:15:42
        1024           256     float     sum      -1    15.10    0.07    0.12       0    14.87    0.07    0.12       0  2025-06-03 10:15:42
)";
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(text, "ts.log");
  REQUIRE(logs.size() == 1);
  REQUIRE(logs[0].rows.size() == 2);
  CHECK(logs[0].rows[1].out_of_place_us == 15.10);
  CHECK(logs[0].rows[1].in_place_busbw == 0.12);
}

TEST_CASE("nccl-tests: -I's per-iteration columns", "[calibrate]") {
  const std::string text =
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    "
      "i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%\n"
      "     1048576        262144     float     sum      -1    28.40   36.92   64.61       0    27.90    29.85    "
      "29.80     1.52    28.05   37.38   65.42       0    27.61    29.30    29.22     1.33\n";
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(text, "iter.log");
  REQUIRE(logs.size() == 1);
  REQUIRE(logs[0].rows.size() == 1);
  CHECK(logs[0].rows[0].out_of_place_us == 28.40);
  CHECK(logs[0].rows[0].in_place_us == 28.05);
  CHECK(logs[0].rows[0].in_place_busbw == 65.42);
}

TEST_CASE("nccl-tests: program and collective names", "[calibrate]") {
  CHECK(nccl_tests_collective("all_reduce_perf") == "all_reduce");
  CHECK(nccl_tests_collective("/opt/nccl-tests/build/all_gather_perf") == "all_gather");
  CHECK(nccl_tests_collective("reduce_scatter_perf_mpi") == "reduce_scatter");
  CHECK(nccl_tests_collective("alltoall_perf") == "all_to_all");
  CHECK(nccl_tests_collective("sendrecv_perf") == "send");
  CHECK(nccl_tests_collective("broadcast_perf") == "broadcast");
  CHECK(nccl_tests_collective("reduce_perf") == "reduce");
  CHECK(nccl_tests_collective("AllReduce") == "all_reduce");
  CHECK(nccl_tests_collective("all_to_all") == "all_to_all");
  CHECK(nccl_tests_collective("AlltoAll") == "all_to_all");
  CHECK(nccl_tests_collective("send") == "send");
  CHECK_FALSE(nccl_tests_collective("scatter_perf"));
  CHECK_FALSE(nccl_tests_collective("alltoallv_perf"));
  CHECK_FALSE(nccl_tests_collective("hypercube_perf"));
  CHECK_FALSE(nccl_tests_collective("all_reduce_perfx"));
  CHECK_FALSE(nccl_tests_collective(""));
}

TEST_CASE("nccl-tests: what is not a log", "[calibrate]") {
  CHECK(error_of("") == "nccl.log:1: not an nccl-tests log: no table header ('#  size  count  type ...') was found");
  CHECK(error_of("hello\nworld\n") ==
        "nccl.log:1: not an nccl-tests log: no table header ('#  size  count  type ...') was found");
  CHECK(error_of("#       bytes             N    type      op     time  algbw  busbw      res\n") ==
        "nccl.log:1: a table of nccl-tests before 2019 ('bytes N type ...', times in ms); meshsim reads the 'size "
        "count type ...' tables printed since 2019");
  CHECK(error_of("#       size         count      type   redop     time   algbw   busbw  #wrong  latency\n") ==
        "nccl.log:1: the table header has an unknown column 'latency' (expected size count type [redop] [root], then "
        "time algbw busbw #wrong, out-of-place and in-place)");
  CHECK(error_of("#       size         count      type   redop     time   algbw  #wrong\n1 1 float sum 1.0 0 0\n") ==
        "nccl.log:1: the table header's out-of-place group lacks one of algbw, busbw, #wrong");
}

TEST_CASE("nccl-tests: malformed data lines", "[calibrate]") {
  // Rows start on line 5 of table_with().
  CHECK(
      error_of(table_with("     1048576        262144     float     sum      -1    28.40   36.92   64.61       0\n")) ==
      "nccl.log:5: a data line with 9 fields where the table header (line 3) calls for 13");
  CHECK(error_of(table_with(
            "     1.5e+06        262144     float     sum      -1    28.40   36.92   64.61       0    28.05   37.38   "
            "65.42       0\n")) == "nccl.log:5: size '1.5e+06' is not a whole number of bytes");
  CHECK(error_of(table_with(
            "      1024.5        262144     float     sum      -1    28.40   36.92   64.61       0    28.05   37.38   "
            "65.42       0\n")) == "nccl.log:5: size '1024.5' is not a whole number of bytes");
  CHECK(error_of(table_with(
            "        many        262144     float     sum      -1    28.40   36.92   64.61       0    28.05   37.38   "
            "65.42       0\n")) == "nccl.log:5: size 'many' is not a number");
  CHECK(error_of(table_with(
            "     1048576        262144     float     sum      -1    fast   36.92   64.61       0    28.05   37.38   "
            "65.42       0\n")) == "nccl.log:5: out-of-place time 'fast' is not a number");
  CHECK(error_of(table_with(
            "     1048576        262144     float     sum      -1    28.40   36.92   64.61       0     0.00   37.38   "
            "65.42       0\n")) == "nccl.log:5: in-place time 0.00 us is not positive");
  CHECK(error_of(table_with(
            "     1048576        262144     float     sum      -1   -28.40   36.92   64.61       0    28.05   37.38   "
            "65.42       0\n")) == "nccl.log:5: out-of-place time -28.40 us is not positive");
  CHECK(error_of(table_with(
            "     1048576        262144     float     sum      -1    28.40   36.92   64.61       0    28.05   37.38   "
            "  fast       0\n")) == "nccl.log:5: in-place busbw 'fast' is not a number");
  // The second row is bad: the line number is its own.
  CHECK(error_of(table_with(kGoodRow +
                            "     1048576        262144     float     sum      -1    28.40   36.92   64.61       0    "
                            "28.05   37.38   65.42\n")) ==
        "nccl.log:6: a data line with 12 fields where the table header (line 3) calls for 13");
}

TEST_CASE("nccl-tests: a table with no data rows", "[calibrate]") {
  CHECK(error_of(kHeader + kFooter) == "nccl.log:3: a table with no data rows");
  CHECK(error_of(kHeader) == "nccl.log:3: a table with no data rows");
  // Eight processes, each printing its own table: the headers come one after another.
  CHECK(error_of(kHeader + kHeader + kGoodRow + kFooter) ==
        "nccl.log:3: a table with no data rows: another table header follows it directly (several processes "
        "printing their own tables: nccl-tests built without MPI=1 but started by mpirun?)");
}

TEST_CASE("nccl-tests: a run that reports wrong results is refused", "[calibrate]") {
  CHECK(error_of(table_with(
            "     1048576        262144     float     sum      -1    28.40   36.92   64.61       0    28.05   37.38   "
            "65.42     512\n")) ==
        "nccl.log:5: the in-place #wrong column reports 512 wrong elements: the run gave wrong results, so its times "
        "are not trusted");
  CHECK(error_of(kHeader + kGoodRow + "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 64.6\n") ==
        "nccl.log:6: nccl-tests reports 3 out-of-bounds values: the run gave wrong results, so its times are not "
        "trusted");
  CHECK(error_of(kHeader + kGoodRow + "node-a: Test NCCL failure common.cu:1037 'unhandled system error'\n") ==
        "nccl.log:6: nccl-tests failed: 'node-a: Test NCCL failure common.cu:1037 'unhandled system error''");
}

TEST_CASE("nccl-tests: the lines before a table are checked", "[calibrate]") {
  // Twelve ranks listed where every process drives 8.
  std::string text = "# nThread 1 nGpus 8 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20\n";
  for (int r = 0; r < 12; ++r)
    text += "#  Rank " + std::to_string(r) + " Group  0 Pid  51230 on     node-a device  " + std::to_string(r % 8) +
            " [0x18] NVIDIA H100 80GB HBM3\n";
  CHECK(error_of(text + kHeader + kGoodRow) ==
        "nccl.log:13: 12 ranks listed, not a whole number of processes of nThread x nGpus = 8 ranks each");
  // A rank missing from the list.
  CHECK(error_of("#  Rank  0 Group  0 Pid 1 on node-a device  0 [0x18] NVIDIA H100 80GB HBM3\n"
                 "#  Rank  2 Group  0 Pid 1 on node-a device  2 [0x2a] NVIDIA H100 80GB HBM3\n" +
                 kHeader + kGoodRow) == "nccl.log:2: rank 2 where rank 1 was expected");
  CHECK(error_of("#  Rank  0 Group  0 Pid 1 on node-a device  0 [0x18] NVIDIA H100 80GB HBM3\n"
                 "#  Rank  0 Group  0 Pid 2 on node-a device  0 [0x18] NVIDIA H100 80GB HBM3\n" +
                 kHeader + kGoodRow) ==
        "nccl.log:2: rank 0 again after rank 0: several processes printed their own device lists (nccl-tests built "
        "without MPI=1 but started by mpirun?)");
  CHECK(error_of("#  Rank  0 on node-a\n" + kHeader + kGoodRow) ==
        "nccl.log:1: a '#  Rank' line not of the form 'Rank N ... on HOST device D [BUS] NAME'");
  CHECK(error_of("# Collective test starting: scatter_perf\n" + kHeader + kGoodRow) ==
        "nccl.log:1: 'scatter_perf' is not a test meshsim reads (all_reduce_perf, all_gather_perf, "
        "reduce_scatter_perf, alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf)");
}

TEST_CASE("nccl-tests: an all-to-all's size is each rank's send buffer, V/P", "[calibrate]") {
  // alltoall_perf prints each rank's send buffer (count x type size); meshsim's
  // V of an all-to-all is the whole array, P of them.
  const std::string text = "# Collective test starting: alltoall_perf\n" + kHeader +
                           "     1048576        262144     float    none      -1    40.10   26.15   22.88       0    "
                           "39.80   26.35   23.05       0\n" +
                           kFooter;
  for (const int nodes : {1, 2}) {
    const std::vector<MeasuredPoint> points = points_from_nccl_tests(text, "a2a.log", {"h100-dgx", nodes, "", "", ""});
    REQUIRE(points.size() == 1);
    CHECK(points[0].kind == OpKind::AllToAll);
    CHECK(points[0].bytes == std::uint64_t{1048576} * 8 * static_cast<std::uint64_t>(nodes));
    CHECK(points[0].time_s == Approx(40.10e-6));
    // The point's workload moves what the log's ranks moved: V/P bytes leave each GPU.
    const workloads::Workload w = point_workload(points[0]);
    REQUIRE(w.ops.size() == 1);
    CHECK(w.ops[0].comm_bytes() == points[0].bytes);
  }
  // An all-gather's size is already V.
  const std::vector<MeasuredPoint> gather = points_from_nccl_tests(kAllGather, "ag.log", {"h100-dgx", 0, "", "", ""});
  REQUIRE(gather.size() == 3);
  CHECK(gather[1].bytes == 1048576);
}

namespace {

NcclTestsContext h100(int nodes = 0, const std::string& collective = "") {
  return {"h100-dgx", nodes, collective, "", ""};
}

std::string points_error(const std::string& text, const std::string& file, const NcclTestsContext& c) {
  try {
    (void)points_from_nccl_tests(text, file, c);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("nccl-tests: a log without its test's name takes the collective from the program or the file name",
          "[calibrate]") {
  // Before 2025 nccl-tests printed no '# Collective test starting' line; logs
  // pasted in docs often start at '# nThread'.
  // (kFooter's "Collective test concluded: all_reduce_perf" would name it.)
  const std::string table = kHeader + kGoodRow + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 64.61\n";
  CHECK(points_error(table, "run.log", h100()) ==
        "run.log:5: the log does not name its collective (no '# Collective test starting' line, no nccl-tests program "
        "in the log or its file name): give --collective all_reduce (all_gather, reduce_scatter, all_to_all)");
  // --collective
  CHECK(points_from_nccl_tests(table, "run.log", h100(0, "reduce_scatter")).at(0).kind == OpKind::ReduceScatter);
  // The command line echoed before the output.
  CHECK(points_from_nccl_tests("> ./build/all_gather_perf -b 8 -e 8G -f 2 -g 8\n" + table, "run.log", h100())
            .at(0)
            .kind == OpKind::AllGather);
  CHECK(points_from_nccl_tests("$ mpirun -np 16 /opt/nccl-tests/build/alltoall_perf_mpi -b 1M\n" + table, "run.log",
                               h100())
            .at(0)
            .kind == OpKind::AllToAll);
  // The file name.
  CHECK(points_from_nccl_tests(table, "logs/p5_2nodes_all_reduce_clean.log", h100()).at(0).kind == OpKind::AllReduce);
  CHECK(points_from_nccl_tests(table, "reduce_scatter_ring.out", h100()).at(0).kind == OpKind::ReduceScatter);
  // A name that says two collectives says none.
  CHECK(points_error(table, "all_reduce_vs_all_gather.log", h100()).find("does not name its collective") !=
        std::string::npos);
  // --collective against the log's own line.
  CHECK(points_error(kAllGather, "ag.log", h100(0, "all_reduce")) ==
        "ag.log:18: the log says its test is all_gather; --collective says all_reduce");
}

TEST_CASE("nccl-tests: output tagged by mpirun is read as rank 0 printed it", "[calibrate]") {
  // mpirun --tag-output puts "[job,rank]<stdout>:" before every line, and again
  // where a process's writes split a line (nccl-tests prints a row in parts).
  std::string tagged = "Warning: Permanently added 'node-b' (ED25519) to the list of known hosts.\n";
  const auto tag = [](int rank) { return fmt::format("[1,{}]<stdout>:", rank); };
  const std::string preamble = kAllReducePreamble;
  for (std::size_t begin = 0; begin < preamble.size();) {
    const std::size_t end = preamble.find('\n', begin);
    tagged += tag(0) + preamble.substr(begin, end - begin) + "\n";
    begin = end + 1;
  }
  tagged += tag(3) + "node-a:4243:4300 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM\n";
  tagged += tag(0) + "#\n" + tag(0) +
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   "
            "busbw  #wrong\n";
  tagged += tag(0) + "     1048576        262144     float     sum      -1" + tag(0) +
            "    28.40   36.92   64.61       0" + tag(0) + "    28.05   37.38   65.42       0\n";
  tagged += tag(5) + "node-a:4245:4301 [5] NCCL INFO comm 0x55 rank 5 nranks 8 - Destroy COMPLETE\n";
  tagged += tag(0) + "   268435456      67108864     float     sum      -1" + tag(0) +
            "  1020.40  263.07  460.37       0" + tag(0) + "  1018.90  263.46  461.05       0\n";
  tagged += tag(0) + "# Out of bounds values : 0 OK\n";
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(tagged, "tagged.log");
  REQUIRE(logs.size() == 1);
  CHECK(logs[0].collective == "all_reduce");
  CHECK(logs[0].ranks == 8);
  REQUIRE(logs[0].rows.size() == 2);
  CHECK(logs[0].rows[0].bytes == 1048576);
  CHECK(logs[0].rows[0].out_of_place_us == 28.40);
  CHECK(logs[0].rows[1].in_place_us == 1018.90);
}

TEST_CASE("nccl-tests: the algorithm and protocol a run forced, from NCCL's lines or the options", "[calibrate]") {
  const std::string forced = kAllReducePreamble +
                             "node-a:51230:51300 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
                             "node-a:51230:51300 [0] NCCL INFO NCCL_PROTO set by environment to LL128\n" +
                             kHeader + kGoodRow + kFooter;
  const std::vector<NcclTestsLog> logs = parse_nccl_tests(forced, "ring.log");
  REQUIRE(logs.size() == 1);
  CHECK(logs[0].algorithm == "ring");
  CHECK(logs[0].protocol == "ll128");
  const std::vector<MeasuredPoint> points = points_from_nccl_tests(forced, "ring.log", h100());
  REQUIRE(points.size() == 1);
  CHECK(points[0].algorithm == "ring");
  CHECK(points[0].protocol == "ll128");
  const workloads::Workload w = point_workload(points[0]);
  CHECK(w.ops.at(0).collective().algorithm == "ring");
  CHECK(w.ops.at(0).collective().protocol == "ll128");
  // An echoed environment, and what meshsim cannot follow: a list, an exclusion.
  CHECK(parse_nccl_tests("NCCL_ALGO=NVLSTree\n" + kHeader + kGoodRow + kFooter, "x.log").at(0).algorithm ==
        "nvls_tree");
  CHECK(parse_nccl_tests("NCCL_ALGO=Ring,Tree\n" + kHeader + kGoodRow + kFooter, "x.log").at(0).algorithm.empty());
  CHECK(parse_nccl_tests("NCCL_ALGO=^NVLS\n" + kHeader + kGoodRow + kFooter, "x.log").at(0).algorithm.empty());
  // Another variable whose name begins the same.
  CHECK(parse_nccl_tests("NCCL INFO NCCL_ALGO_THRESHOLD set by environment to 64\n" + kHeader + kGoodRow + kFooter,
                         "x.log")
            .at(0)
            .algorithm.empty());
  // A line that names the variable without setting it.
  CHECK(parse_nccl_tests("NCCL INFO NET/OFI Skipping NCCL_PROTO checks on P5 + RDMA\n" + kHeader + kGoodRow + kFooter,
                         "x.log")
            .at(0)
            .protocol.empty());
  // The options win; an algorithm NCCL does not run for the kind is NCCL's choice (all-gathers are rings).
  NcclTestsContext tree = h100();
  tree.algorithm = "tree";
  CHECK(points_from_nccl_tests(forced, "ring.log", tree).at(0).algorithm == "tree");
  CHECK(points_from_nccl_tests(kAllGather, "ag.log", tree).at(0).algorithm.empty());
}

TEST_CASE("nccl-tests: a sendrecv table is point-to-point points, a ring of sends over the ranks", "[calibrate]") {
  // sendrecv_perf: each rank sends size bytes to the next and receives as many
  // from the one before, at once; busbw = algbw = size / time.
  const std::string text = "# Collective test starting: sendrecv_perf\n" + kHeader +
                           "    33554432       8388608     float     sum      -1   422.19   79.48   79.48       0   "
                           "422.04   79.51   79.51     N/A\n" +
                           kFooter;
  for (const int nodes : {1, 2}) {
    const std::vector<MeasuredPoint> points = points_from_nccl_tests(text, "sr.log", h100(nodes));
    REQUIRE(points.size() == 1);
    CHECK(points[0].kind == OpKind::Send);
    CHECK(points[0].bytes == 33554432);
    const workloads::Workload w = point_workload(points[0]);
    REQUIRE(w.ops.size() == 1);
    const workloads::SendOp& send = w.ops[0].send();
    CHECK(send.bytes == 33554432);
    const auto n = static_cast<topology::ChipId>(8 * nodes);
    REQUIRE(send.pairs.size() == n);
    for (topology::ChipId r = 0; r < n; ++r)
      CHECK(send.pairs[r] == std::pair{r, static_cast<topology::ChipId>((r + 1) % n)});
  }
  // On one node each GPU sends over its own NVLink port, the pairs do not
  // contend: the simulated time is one send's closed form, above 32 MiB over
  // one port.
  const workloads::Workload one = point_workload(points_from_nccl_tests(text, "sr.log", h100(1)).at(0));
  const double nvlink = static_cast<double>(one.hardware.nvlink.bandwidth_bytes_per_s);
  const driver::RunResult r = driver::simulate(one);
  INFO(r.ops.at(0).closed_s << " " << r.makespan.seconds());
  CHECK(r.makespan.seconds() == Approx(r.ops.at(0).closed_s).epsilon(0.01));
  CHECK(r.makespan.seconds() > 33554432.0 / nvlink);
}
