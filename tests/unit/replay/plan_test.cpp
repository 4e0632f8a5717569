// The replay plan of the bundled matmul cases and MLP blocks: every rank's GEMM
// shapes, NCCL calls and communicator groups, and what a few GPUs replay.
#include <catch2/catch.hpp>

#include <string>

#include "replay/plan.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;
using namespace meshsim::replay;

namespace {

workloads::Workload example(const std::string& name) {
  return workloads::load_workload(std::string(MESHSIM_SOURCE_DIR) + "/examples/" + name);
}

void check_gemm(const Call& c, std::uint64_t m, std::uint64_t n, std::uint64_t k) {
  CHECK(c.kind == CallKind::Gemm);
  CHECK(c.m == m);
  CHECK(c.n == n);
  CHECK(c.k == k);
  CHECK(c.dtype == "bf16");
}

// On the 16x16 v5e mesh (X on x, Y on y, chip = x + 16 y): the group of `rank`
// over X is its row, over Y its column, in coordinate order.
std::vector<std::uint32_t> row(std::uint32_t rank) {
  std::vector<std::uint32_t> v;
  for (std::uint32_t x = 0; x < 16; ++x) v.push_back(rank / 16 * 16 + x);
  return v;
}
std::vector<std::uint32_t> column(std::uint32_t rank) {
  std::vector<std::uint32_t> v;
  for (std::uint32_t y = 0; y < 16; ++y) v.push_back(rank % 16 + 16 * y);
  return v;
}

}  // namespace

TEST_CASE("plan: case 1, A[I_X, J] . B[J, K_Y]: one GEMM per rank, no NCCL", "[replay]") {
  const workloads::Workload w = example("matmul_case1_v5e.json");
  const Plan p = make_plan(w);
  CHECK(p.ranks == 256);
  CHECK(p.communicators.empty());
  for (std::uint32_t r : {0u, 17u, 255u}) {
    REQUIRE(p.calls[r].size() == 1);
    check_gemm(p.calls[r][0], 16384 / 16, 16384 / 16, 8192);
  }
}

TEST_CASE("plan: case 2, A[I, J_X] . B[J, K]: all_gather of A over X, then the full GEMM", "[replay]") {
  const workloads::Workload w = example("matmul_case2_v5e.json");
  const Plan p = make_plan(w);
  CHECK(p.communicators.size() == 16);  // one per row
  for (std::uint32_t r : {0u, 37u, 255u}) {
    REQUIRE(p.calls[r].size() == 2);
    const Call& ag = p.calls[r][0];
    CHECK(ag.kind == CallKind::AllGather);
    CHECK(ag.recv_bytes == 1024u * 8192 * 2);  // V: A within one row
    CHECK(ag.send_bytes == 1024u * 8192 * 2 / 16);
    CHECK(p.communicators[ag.communicator].ranks == row(r));
    CHECK(p.communicators[ag.communicator].mesh_axes == std::vector<std::string>{"X"});
    CHECK(ag.comm_rank == r % 16);
    check_gemm(p.calls[r][1], 1024, 16384, 8192);
  }
}

TEST_CASE("plan: case 3, A[I, J_Y] . B[J_Y, K]: local GEMM of partial sums, all_reduce over Y", "[replay]") {
  const workloads::Workload w = example("matmul_case3_v5e.json");
  const Plan p = make_plan(w);
  CHECK(p.communicators.size() == 16);  // one per column
  for (std::uint32_t r : {0u, 37u, 255u}) {
    REQUIRE(p.calls[r].size() == 2);
    check_gemm(p.calls[r][0], 4096, 4096, 16384 / 16);
    const Call& ar = p.calls[r][1];
    CHECK(ar.kind == CallKind::AllReduce);
    CHECK(ar.send_bytes == 4096u * 4096 * 2);
    CHECK(ar.recv_bytes == ar.send_bytes);
    CHECK(p.communicators[ar.communicator].ranks == column(r));
    CHECK(ar.comm_rank == r / 16);
  }
}

TEST_CASE("plan: case 4, A[I_X, J] . B[J, K_X]: all_gather of B over X, then the GEMM", "[replay]") {
  const workloads::Workload w = example("matmul_case4_v5e.json");
  const Plan p = make_plan(w);
  for (std::uint32_t r : {0u, 200u}) {
    REQUIRE(p.calls[r].size() == 2);
    const Call& ag = p.calls[r][0];
    CHECK(ag.kind == CallKind::AllGather);
    CHECK(ag.recv_bytes == 4096u * 2048 * 2);
    CHECK(ag.send_bytes == 4096u * 2048 * 2 / 16);
    CHECK(p.communicators[ag.communicator].ranks == row(r));
    check_gemm(p.calls[r][1], 8192 / 16, 2048, 4096);
  }
}

TEST_CASE("plan: MLP blocks", "[replay]") {
  SECTION("2x2: up and down GEMMs, all_reduce over Y") {
    const workloads::Workload w = example("mlp_2x2_v5e.json");
    const Plan p = make_plan(w);
    REQUIRE(p.ranks == 4);
    REQUIRE(p.communicators.size() == 2);
    CHECK(p.communicators[0].ranks == std::vector<std::uint32_t>{0, 2});
    CHECK(p.communicators[1].ranks == std::vector<std::uint32_t>{1, 3});
    for (std::uint32_t r = 0; r < 4; ++r) {
      REQUIRE(p.calls[r].size() == 3);
      check_gemm(p.calls[r][0], 256, 2048, 1024);
      check_gemm(p.calls[r][1], 256, 1024, 2048);
      CHECK(p.calls[r][2].kind == CallKind::AllReduce);
      CHECK(p.calls[r][2].send_bytes == 524288);
      CHECK(p.calls[r][2].communicator == r % 2);
    }
    const std::string text = format_plan(w, p);
    CHECK(text.find("comm 0: 2 ranks [0,2] (mesh axes Y)") != std::string::npos);
    CHECK(text.find("rank 3:\n  op 0 mlp.up.matmul: gemm M=256 N=2048 K=1024 bf16\n") != std::string::npos);
    CHECK(text.find("op 2 mlp.down.all_reduce: nccl all_reduce bf16 send 524288 B recv 524288 B comm 1 rank 1") !=
          std::string::npos);
  }
  SECTION("16x16, two variants: every collective on the rank's column communicator (Y)") {
    const workloads::Workload w = example("mlp_v5e.json");
    const Plan p = make_plan(w);
    CHECK(p.communicators.size() == 16);
    // column_row: up, down, all_reduce; gather_middle: up, all_gather, down, all_reduce.
    const std::vector<CallKind> kinds = {CallKind::Gemm, CallKind::Gemm,      CallKind::AllReduce, CallKind::Gemm,
                                         CallKind::AllGather, CallKind::Gemm, CallKind::AllReduce};
    for (std::uint32_t r : {0u, 37u, 255u}) {
      REQUIRE(p.calls[r].size() == kinds.size());
      for (std::size_t i = 0; i < kinds.size(); ++i) {
        const Call& c = p.calls[r][i];
        CHECK(c.kind == kinds[i]);
        CHECK(c.op == i);
        if (c.kind != CallKind::Gemm) CHECK(p.communicators[c.communicator].ranks == column(r));
      }
      CHECK(p.calls[r][2].send_bytes == 8388608);
      CHECK(p.calls[r][4].recv_bytes == 33554432);
      CHECK(p.calls[r][4].send_bytes == 33554432 / 16);
    }
  }
}

TEST_CASE("plan: what one or a few GPUs replay, and what they skip", "[replay]") {
  const workloads::Workload w = example("matmul_case3_v5e.json");
  const Plan p = make_plan(w);
  SECTION("one GPU: rank 0's GEMM; no group fits") {
    const std::vector<OpStep> steps = device_steps(w, p, 1);
    REQUIRE(steps.size() == 2);
    CHECK(steps[0].ranks_replayed == 1);
    REQUIRE(steps[0].calls.size() == 1);
    CHECK(steps[0].calls[0].device == 0);
    CHECK(steps[0].calls[0].m == 4096);
    CHECK(steps[0].skipped == "GEMMs of ranks 1 to 255 (no GPU for them)");
    CHECK(steps[1].calls.empty());
    CHECK(steps[1].skipped == "all 16 groups (rank r runs on GPU r: the first group needs 241 GPUs, 1 visible)");
  }
  SECTION("the 2x2 MLP on 4 GPUs: everything") {
    const workloads::Workload mlp = example("mlp_2x2_v5e.json");
    const std::vector<OpStep> steps = device_steps(mlp, make_plan(mlp), 4);
    for (const OpStep& s : steps) {
      CHECK(s.skipped.empty());
      CHECK(s.ranks_replayed == 4);
    }
    REQUIRE(steps[2].calls.size() == 4);
    CHECK(steps[2].calls[3].comm_devices == std::vector<int>{1, 3});
    CHECK(steps[2].calls[3].comm_rank == 1);
  }
  SECTION("the 2x2 MLP on 2 GPUs: no Y group has both its ranks") {
    const workloads::Workload mlp = example("mlp_2x2_v5e.json");
    const std::vector<OpStep> steps = device_steps(mlp, make_plan(mlp), 2);
    CHECK(steps[0].ranks_replayed == 2);
    CHECK(steps[2].ranks_replayed == 0);
    CHECK(steps[2].skipped == "all 2 groups (rank r runs on GPU r: the first group needs 3 GPUs, 2 visible)");
  }
}

TEST_CASE("plan: multi-axis collectives, all_to_all as grouped send/recv, send as a pair", "[replay]") {
  const workloads::Workload w = workloads::parse_workload(R"({
    "hardware": "tpu-v5e", "mesh": {"X": 16, "Y": 16},
    "ops": [{"name": "ag", "kind": "all_gather", "axes": ["X", "Y"], "bytes": 16777216},
            {"name": "a2a", "kind": "all_to_all", "axes": ["Y"], "bytes": 1048576},
            {"name": "p2p", "kind": "send", "bytes": 4096, "from": [0, 0], "to": [3, 5]}]})",
                                                          "w.json");
  const Plan p = make_plan(w);
  // One communicator of all 256 chips for X,Y, ordered X major: (x, y) has rank 16x + y.
  const Call& ag = p.calls[37][0];  // chip 37 = (5, 2)
  CHECK(ag.kind == CallKind::AllGather);
  const Communicator& both = p.communicators[ag.communicator];
  REQUIRE(both.ranks.size() == 256);
  CHECK(both.mesh_axes == std::vector<std::string>{"X", "Y"});
  CHECK(both.ranks[0] == 0);
  CHECK(both.ranks[1] == 16);   // (0, 1)
  CHECK(both.ranks[16] == 1);   // (1, 0)
  CHECK(ag.comm_rank == 5 * 16 + 2);
  CHECK(ag.send_bytes == 16777216 / 256);
  // AllToAll over Y: V/P to and from the group, V/P^2 to each peer.
  const Call& a2a = p.calls[37][1];
  CHECK(a2a.kind == CallKind::SendRecv);
  CHECK(p.communicators[a2a.communicator].ranks == column(37));
  CHECK(a2a.send_bytes == 1048576 / 16);
  CHECK(a2a.peer_bytes == 1048576 / 256);
  // The send: chip (0,0) = 0 to chip (3,5) = 83 on a two-rank communicator.
  REQUIRE(p.calls[0].size() == 3);
  REQUIRE(p.calls[83].size() == 3);
  const Call& s = p.calls[0][2];
  const Call& r = p.calls[83][2];
  CHECK(s.kind == CallKind::Send);
  CHECK(r.kind == CallKind::Recv);
  CHECK(s.peer == 83);
  CHECK(r.peer == 0);
  CHECK(s.communicator == r.communicator);
  CHECK(p.communicators[s.communicator].ranks == std::vector<std::uint32_t>{0, 83});
  CHECK(p.calls[1].size() == 2);  // no part in the send
  // On 84 GPUs the send replays; on 83 it cannot.
  CHECK(device_steps(w, p, 84)[2].ranks_replayed == 2);
  CHECK(device_steps(w, p, 83)[2].ranks_replayed == 0);
}
