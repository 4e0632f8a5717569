// Run size estimates and the limits checked before anything is built.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "base/error.hpp"
#include "driver/expand.hpp"
#include "driver/simulate.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

workloads::Workload allreduces(int ops) {
  std::string text = R"({"hardware": "tpu-v4", "mesh": {"X": 16, "Y": 16, "Z": 16}, "ops": [)";
  for (int i = 0; i < ops; ++i)
    text += (i ? "," : "") + std::string(R"({"kind": "all_reduce", "bytes": 1073741824, "axes": ["X", "Y", "Z"]})");
  return workloads::parse_workload(text + "]}", "w.json");
}

}  // namespace

TEST_CASE("Limits: the estimate bounds the transfers expand() builds", "[limits]") {
  const workloads::Workload w = workloads::parse_workload(
      R"({"hardware": "tpu-v5e", "mesh": {"X": 8, "Y": 8}, "ops": [
            {"kind": "all_gather", "bytes": 1048576, "axes": ["X"]},
            {"kind": "all_reduce", "bytes": 1048576, "axes": ["X", "Y"]},
            {"kind": "all_to_all", "bytes": 1048576, "axes": ["Y"]}]})",
      "w.json");
  driver::RunContext torus_run(w);
  const driver::RunSize size = driver::estimate_run(w, torus_run);
  const driver::Expanded ex = driver::expand(w, torus_run);
  std::uint64_t built = 0;
  for (std::uint64_t n : ex.op_transfers) built += n;
  CHECK(built <= size.transfers);
  CHECK(ex.program.num_tasks() <= size.tasks);
  CHECK(ex.program.num_edges() <= size.edges);
  CHECK(size.memory_bytes > ex.program.memory_bytes());
}

TEST_CASE("Limits: the 4096-chip benchmark op is estimated exactly and fits the defaults", "[limits]") {
  const workloads::Workload w = allreduces(1);
  const driver::RunSize size = driver::estimate_run(w, *std::make_unique<driver::RunContext>(w));
  CHECK(size.transfers == 1179648);
  CHECK_NOTHROW(driver::check_limits(w, size, driver::Limits{}));
  CHECK_THROWS_WITH(driver::check_limits(w, size, driver::Limits{1179647, std::uint64_t{8} << 30}),
                    Catch::Contains("more than the limit of 1179647 transfers (--max-transfers)"));
}

TEST_CASE("Limits: transfers within the bound but tasks past the program's limit are refused up front", "[limits]") {
  // 113 of them: 133,300,224 transfers (under 2^27), but with their joins more than 2^27 tasks.
  const workloads::Workload w = allreduces(113);
  const driver::RunSize size = driver::estimate_run(w, *std::make_unique<driver::RunContext>(w));
  CHECK(size.transfers == 113ull * 1179648);
  CHECK(size.transfers < driver::kMaxTasks);
  CHECK_THROWS_WITH(driver::check_limits(w, size, driver::Limits{}),
                    Catch::StartsWith("w.json:/ops/0: the run would need about 133300224 hop transfers") &&
                        Catch::Contains("more than meshsim's limit of 134217728 tasks"));
}

TEST_CASE("Limits: a run that the torus' translations reduce counts what it simulates and builds", "[limits]") {
  // 113 all-reduces over every axis of a 16x16x16 v4 (all wrapped): the whole
  // program is past the task limit, its quotient one chip's share of each op,
  // and the largest op is built alone in full.
  const workloads::Workload w = allreduces(113);
  driver::RunContext torus_run(w);
  const driver::RunSize full = driver::estimate_run(w, torus_run);
  const driver::RunSize size = driver::run_size(w, torus_run);
  CHECK(full.tasks > driver::kMaxTasks);
  CHECK(size.translations == 4096);
  CHECK(size.transfers == 113ull * 1179648 / 4096);
  CHECK(size.biggest_op_transfers == 1179648 / 4096);
  CHECK(size.memory_bytes > full.memory_bytes / 113);  // the largest op, in full
  CHECK(size.memory_bytes < full.memory_bytes / 56);
  CHECK_NOTHROW(driver::check_limits(w, size, driver::Limits{}));
  CHECK_THROWS_WITH(driver::check_limits(w, size, driver::Limits{10000, std::uint64_t{8} << 30}),
                    Catch::Contains("32544 hop transfers (simulating one task of each set of 4096 translates)") &&
                        Catch::Contains("more than the limit of 10000 transfers (--max-transfers)"));
  // Without the reduction (meshsim run --no-reduce) the whole program counts.
  driver::SimulateOptions whole;
  whole.reduce = false;
  CHECK(driver::run_size(w, torus_run, whole).transfers == full.transfers);
}

TEST_CASE("Limits: a quotient whose op, built whole to check it, passes the task limit is refused up front",
          "[limits]") {
  // An all-to-all over every axis of a 16x16x16 v4: the translations leave one
  // chip's share to simulate, but the op is built whole for its check, past 2^27 tasks.
  const workloads::Workload w = workloads::parse_workload(
      R"({"hardware": "tpu-v4", "topology": {"shape": [16, 16, 16]}, "mesh": {"X": 16, "Y": 16, "Z": 16},
          "ops": [{"kind": "all_to_all", "bytes": 1073741824, "axes": ["X", "Y", "Z"]}]})",
      "w.json");
  const driver::RunSize size = driver::run_size(w, *std::make_unique<driver::RunContext>(w));
  CHECK(size.translations == 4096);
  CHECK(size.biggest_op_tasks > driver::kMaxTasks);
  CHECK_THROWS_WITH(driver::check_limits(w, size, driver::Limits{}),
                    Catch::Contains("(simulating one task of each set of 4096 translates)") &&
                        Catch::Contains("more than meshsim's limit of 134217728 tasks for the op built whole to check "
                                        "the reduction"));
  // 1 GiB over 8,192 H100s by NCCL's tree (256 KiB chunks: a tree of depth
  // 7 + 10 would get fewer than 8 x 17 chunks of 512 KiB a channel): the
  // rotation of the GPUs and the mirror of the nodes leave one sixteenth of
  // its 134.2 M transfers, whose quotient is built without the op: it fits.
  const workloads::Workload tree = workloads::parse_workload(
      R"({"hardware": "h100-dgx", "topology": {"nodes": 1024}, "mesh": {"G": 8, "N": 1024},
          "ops": [{"kind": "all_reduce", "bytes": 1073741824, "axes": ["G", "N"]}]})",
      "w.json");
  const driver::RunSize turned = driver::run_size(tree, *std::make_unique<driver::RunContext>(tree));
  CHECK(turned.translations == 16);
  CHECK(turned.mirrored);
  CHECK(turned.transfers == 134201344 / 16);
  CHECK(turned.biggest_op_tasks == 0);
  CHECK_NOTHROW(driver::check_limits(tree, turned, driver::Limits{}));
}
