// Chakra execution traces: traces written by the test's own generator (each
// collective kind, a send/receive ring, compute chains with dependencies) import
// into the program they describe, simulate as the same program written as a
// workload does, and round-trip through export; malformed traces are one error
// line each.
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "base/error.hpp"
#include "chakra/et_file.hpp"
#include "chakra/export.hpp"
#include "chakra/import.hpp"
#include "driver/costs.hpp"
#include "driver/simulate.hpp"
#include "workloads/imported.hpp"

using namespace meshsim;
using chakra::CommType;
using chakra::Node;
using chakra::NodeType;

namespace {

// A scratch directory per test case, removed after.
struct Scratch {
  std::filesystem::path dir;
  explicit Scratch(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / fmt::format("meshsim_chakra_{}_{}", name, ::getpid())) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string prefix(const std::string& p = "t") const { return (dir / p).string(); }
};

Node comp(std::uint64_t id, std::uint64_t micros, std::vector<std::uint64_t> deps = {}) {
  Node n;
  n.id = id;
  n.name = fmt::format("k{}", id);
  n.type = static_cast<int>(NodeType::Comp);
  n.duration_micros = micros;
  n.data_deps = std::move(deps);
  return n;
}

Node coll(std::uint64_t id, CommType type, std::uint64_t size, std::vector<std::uint64_t> deps = {},
          std::string pg = "") {
  Node n;
  n.id = id;
  n.name = fmt::format("c{}", id);
  n.type = static_cast<int>(NodeType::Coll);
  n.comm_type = static_cast<std::int64_t>(type);
  n.comm_size = size;
  n.data_deps = std::move(deps);
  if (!pg.empty()) n.pg_name = std::move(pg);
  return n;
}

Node p2p(std::uint64_t id, bool send, int src, int dst, std::uint64_t size, std::vector<std::uint64_t> deps = {}) {
  Node n;
  n.id = id;
  n.name = fmt::format("{}{}", send ? "s" : "r", id);
  n.type = static_cast<int>(send ? NodeType::Send : NodeType::Recv);
  n.comm_src = src;
  n.comm_dst = dst;
  n.comm_size = size;
  n.comm_tag = 0;
  n.data_deps = std::move(deps);
  return n;
}

// Writes prefix.<r>.et for every rank: `nodes(r)` gives rank r's.
template <class F>
void write_trace(const std::string& prefix, int ranks, F nodes, const std::string& suffix = ".et") {
  for (int r = 0; r < ranks; ++r) {
    chakra::RankTrace t;
    t.version = "0.0.4";
    t.nodes = nodes(r);
    chakra::write_rank(fmt::format("{}.{}{}", prefix, r, suffix), t);
  }
}

workloads::Workload import(const std::string& prefix, const std::string& hardware, std::vector<int> shape,
                           chakra::ImportReport* report = nullptr, const std::string& groups = "",
                           const std::string& suffix = ".et") {
  chakra::ImportOptions o;
  o.hardware = hardware;
  o.shape = std::move(shape);
  o.comm_groups = groups;
  return chakra::import_trace(prefix + ".0" + suffix, o, report);
}

std::string error_of(const std::string& prefix, std::vector<int> shape = {2, 4}, const std::string& groups = "",
                     const std::string& hardware = "tpu-v5e") {
  try {
    (void)import(prefix, hardware, std::move(shape), nullptr, groups);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The times of every op of both, which must agree to the picosecond.
void check_same_times(const workloads::Workload& a, const workloads::Workload& b) {
  const driver::RunResult x = driver::simulate(a), y = driver::simulate(b);
  REQUIRE(x.ops.size() == y.ops.size());
  for (std::size_t i = 0; i < x.ops.size(); ++i) {
    INFO("op " << i << ": " << x.ops[i].name << " / " << y.ops[i].name);
    CHECK(x.ops[i].kind == y.ops[i].kind);
    CHECK(x.ops[i].bytes == y.ops[i].bytes);
    CHECK(x.ops[i].begin == y.ops[i].begin);
    CHECK(x.ops[i].end == y.ops[i].end);
  }
  CHECK(x.makespan == y.makespan);
}

}  // namespace

TEST_CASE("chakra: rank files round-trip through the writer and the reader, gzipped too", "[chakra]") {
  Scratch s("file");
  for (const std::string suffix : {".et", ".et.gz"}) {
    chakra::RankTrace t;
    t.version = "0.0.4";
    t.nodes = {comp(1, 7), coll(2, CommType::AllGather, 4096, {1}, "3"), p2p(5, true, 0, 1, 100, {1, 2})};
    t.nodes[0].num_ops = 1000;
    t.nodes[0].tensor_size = 64;
    t.nodes[0].is_cpu_op = false;
    const std::string path = s.prefix() + ".0" + suffix;
    chakra::write_rank(path, t);
    const chakra::RankTrace back = chakra::read_rank(path);
    CHECK(back.version == "0.0.4");
    REQUIRE(back.nodes.size() == 3);
    CHECK(back.nodes[0].duration_micros == 7);
    CHECK(back.nodes[0].num_ops == 1000u);
    CHECK(back.nodes[0].tensor_size == 64u);
    CHECK(back.nodes[0].is_cpu_op == false);
    CHECK(back.nodes[1].comm_type == static_cast<std::int64_t>(CommType::AllGather));
    CHECK(back.nodes[1].comm_size == 4096u);
    CHECK(back.nodes[1].pg_name == "3");
    CHECK(back.nodes[1].data_deps == std::vector<std::uint64_t>{1});
    CHECK(back.nodes[2].comm_dst == 1);
    CHECK(back.nodes[2].data_deps == std::vector<std::uint64_t>{1, 2});
  }
}

TEST_CASE("chakra: each collective kind over every rank is the axis collective of the same V", "[chakra]") {
  // comm_size as ASTRA-sim reads it: the all-reduce's and reduce-scatter's
  // buffer; the all-gather's input shard and the all-to-all's buffer (V / 8).
  Scratch s("kinds");
  const std::uint64_t v = 8 << 20;
  struct Kind {
    CommType type;
    const char* name;
    std::uint64_t comm_size;
  };
  for (const Kind& k : {Kind{CommType::AllReduce, "all_reduce", v}, Kind{CommType::AllGather, "all_gather", v / 8},
                        Kind{CommType::ReduceScatter, "reduce_scatter", v},
                        Kind{CommType::ReduceScatterBlock, "reduce_scatter", v},
                        Kind{CommType::AllToAll, "all_to_all", v / 8}}) {
    INFO(k.name);
    write_trace(s.prefix(), 8, [&](int) { return std::vector<Node>{coll(1, k.type, k.comm_size)}; });
    chakra::ImportReport report;
    const workloads::Workload w = import(s.prefix(), "tpu-v5e", {2, 4}, &report);
    CHECK(report.summary() == "8 ranks, 8 nodes: lowered 0 kernels, 1 collectives, 0 sends as 1 ops");
    REQUIRE(w.ops.size() == 1);
    CHECK(w.ops[0].collective().hw_axes == std::vector<int>{0, 1});
    const workloads::Workload written = workloads::parse_workload(
        fmt::format(R"({{"hardware": "tpu-v5e", "topology": {{"shape": [2, 4]}}, "mesh": {{"X": 2, "Y": 4}},
                        "ops": [{{"kind": "{}", "bytes": {}, "axes": ["X", "Y"]}}]}})",
                    k.name, v),
        "w.json");
    check_same_times(w, written);
  }
}

TEST_CASE("chakra: a send/receive ring is one routed send per pair", "[chakra]") {
  // Rank r sends 1 MB to r+1 and receives from r-1 on 8 chips: each send alone
  // on its route (7 -> 0 as many hops as the topology puts between them).
  Scratch s("ring");
  const std::uint64_t bytes = 1'000'000;
  write_trace(s.prefix(), 8, [&](int r) {
    return std::vector<Node>{p2p(1, true, r, (r + 1) % 8, bytes), p2p(2, false, (r + 7) % 8, r, bytes)};
  });
  chakra::ImportReport report;
  const workloads::Workload w = import(s.prefix(), "tpu-v5e", {8}, &report);
  CHECK(report.sends == 8);
  // Sends alike (one name and size, waiting for nothing) between disjoint chips
  // are one send of many pairs: 0->1 2->3 4->5 6->7, then 1->2 3->4 5->6, then 7->0.
  REQUIRE(w.ops.size() == 3);
  std::multiset<std::size_t> sizes;
  for (const workloads::Op& op : w.ops) sizes.insert(workloads::send_pairs(op).size());
  CHECK(sizes == std::multiset<std::size_t>{1, 3, 4});
  const driver::RunResult r = driver::simulate(w);
  const topology::Torus t = w.make_torus();
  const double b = static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s), alpha = w.hardware.ici.latency.seconds();
  const double chunk = static_cast<double>(w.hardware.forward_chunk_bytes);
  std::set<std::pair<topology::ChipId, topology::ChipId>> pairs;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    // Each pair alone on its route: h hops, cut-through: bytes / b + h alpha + (h - 1) chunks.
    int h = 0;
    for (const auto& [src, dst] : workloads::send_pairs(w.ops[i])) {
      CHECK(dst == (src + 1) % 8);
      pairs.emplace(src, dst);
      h = std::max(h, t.hop_distance(src, dst));
    }
    INFO("op " << i << ", " << h << " hops");
    CHECK(r.ops[i].time().seconds() == Approx(bytes / b + h * alpha + (h - 1) * chunk / b).epsilon(1e-6));
  }
  CHECK(pairs.size() == 8);
}

TEST_CASE("chakra: compute chains wait for their dependencies on each rank", "[chakra]") {
  // Each rank: k1 (10 us) -> metadata -> c2 all-reduce -> k3 (num_ops, tensor_size) and
  // k4 (5 us, after k1 only). Rank 1's k1 takes 30 us: the all-reduce waits for it
  // on every chip; k4 runs beside the all-reduce.
  Scratch s("chain");
  write_trace(s.prefix(), 8, [](int r) {
    Node meta;
    meta.id = 9;
    meta.type = static_cast<int>(NodeType::Metadata);
    meta.ctrl_deps = {1};
    Node k3 = comp(3, 0, {2});
    k3.num_ops = 197'000'000'000;  // 1 ms at v5e's 1.97e14 bf16 FLOP/s
    k3.tensor_size = 1024;
    Node cpu = comp(5, 100, {1});
    cpu.is_cpu_op = true;
    return std::vector<Node>{comp(1, r == 1 ? 30 : 10), meta, coll(2, CommType::AllReduce, 1 << 20, {9}), k3,
                             comp(4, 5, {1}), cpu};
  });
  chakra::ImportReport report;
  const workloads::Workload w = import(s.prefix(), "tpu-v5e", {2, 4}, &report);
  // The kernels alike on every rank are one op each; rank 1's slower k1, and
  // the k4 after it, are ops of their own.
  CHECK(report.summary() == "8 ranks, 48 nodes: lowered 24 kernels, 1 collectives, 0 sends as 6 ops; skipped 16 "
                            "nodes: 8 METADATA_NODE, 8 cpu ops");
  const driver::RunResult r = driver::simulate(w);
  std::map<std::string, const driver::OpResult*> by;
  for (const driver::OpResult& o : r.ops) by[o.name] = &o;
  REQUIRE(by.count("c2"));
  CHECK(by.at("k1")->time() == Tick::from_ps(10'000'000));
  CHECK(by.at("r1/k1")->time() == Tick::from_ps(30'000'000));
  // The all-reduce's start: when its last chip may start it, after rank 1's 30 us.
  CHECK(by.at("c2")->begin == Tick::from_ps(30'000'000));
  // k3 starts when chip 0 holds the all-reduce's result.
  CHECK(by.at("k3")->begin > by.at("c2")->begin);
  CHECK(by.at("k3")->begin <= by.at("c2")->end);
  CHECK(by.at("k3")->time().seconds() == Approx(1e-3).epsilon(1e-9));
  CHECK(by.at("k4")->begin == Tick::from_ps(10'000'000));
  CHECK(by.at("r1/k4")->begin == Tick::from_ps(30'000'000));
  CHECK(*w.ops[0].chips == std::vector<topology::ChipId>{0, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("chakra: process groups: axis groups, any groups on a torus, refused on GPUs", "[chakra]") {
  Scratch s("groups");
  // {0,1} is x at y = 0 (an axis group); {2,5} is a diagonal of the 2x4.
  write_text(s.prefix("g") + ".json", R"({"1": [0, 1], "2": [2, 5]})");
  write_trace(s.prefix(), 8, [](int r) {
    std::vector<Node> n;
    if (r < 2) n.push_back(coll(1, CommType::AllReduce, 1 << 20, {}, "1"));
    if (r == 2 || r == 5) n.push_back(coll(1, CommType::AllGather, 1 << 19, {}, "2"));
    n.push_back(comp(2, 1));
    return n;
  });
  chakra::ImportReport report;
  const workloads::Workload w = import(s.prefix(), "tpu-v5e", {2, 4}, &report, s.prefix("g") + ".json");
  CHECK(report.grouped == 1);
  const auto coll_op = [&](OpKind kind) -> const workloads::Op& {
    for (const workloads::Op& op : w.ops)
      if (op.kind == kind) return op;
    FAIL("no such op");
    return w.ops.front();
  };
  CHECK(coll_op(OpKind::AllReduce).collective().hw_axes == std::vector<int>{0});
  CHECK(*coll_op(OpKind::AllReduce).chips == std::vector<topology::ChipId>{0, 1});
  const workloads::Op& ag = coll_op(OpKind::AllGather);
  REQUIRE(ag.collective().groups);
  CHECK(*ag.collective().groups == std::vector<std::vector<topology::ChipId>>{{2, 5}});
  CHECK(ag.comm_bytes() == 1u << 20);
  const driver::RunResult r = driver::simulate(w);
  for (const driver::OpResult& o : r.ops)
    if (!is_local(o.kind)) CHECK(o.time().seconds() >= o.bound_s);
  // On a GPU cluster the diagonal is refused.
  write_text(s.prefix("h") + ".json", R"({"1": [0, 9]})");
  write_trace(s.prefix("gpu"), 16, [](int rank) {
    return rank == 0 || rank == 9 ? std::vector<Node>{coll(1, CommType::AllReduce, 1024, {}, "1")}
                                  : std::vector<Node>{comp(1, 1)};
  });
  CHECK(error_of(s.prefix("gpu"), {2}, s.prefix("h") + ".json", "h100-dgx") ==
        s.prefix("gpu") + ".0.et:byte 8: node 1 ('c1'): process group '1' (ranks 0,9) is not the GPUs along the node's "
                          "GPUs or the nodes (or both); collectives over other groups run on TPU slices only");
}

TEST_CASE("chakra: export then import gives the same program", "[chakra]") {
  // A program on a 2x4 v5e: kernels of whole microseconds on chips, collectives
  // over one group (all chips), a send, an all-gather over a diagonal pair.
  workloads::Workload w = workloads::empty_workload({"tpu-v5e", {2, 4}, {}}, false, "test");
  const auto chips = [](std::vector<topology::ChipId> c) {
    return std::make_shared<const std::vector<topology::ChipId>>(std::move(c));
  };
  const auto kernel = [&](const std::string& name, std::vector<topology::ChipId> on, std::uint64_t micros,
                          std::vector<std::uint32_t> deps) {
    workloads::Op op(OpKind::Elementwise);
    op.name = name;
    op.elementwise().duration = Tick::from_ps(static_cast<std::int64_t>(micros) * 1'000'000);
    op.chips = chips(std::move(on));
    op.deps = std::move(deps);
    w.ops.push_back(std::move(op));
  };
  kernel("k0", {0, 1, 2, 3, 4, 5, 6, 7}, 12, {});
  workloads::Op ar(OpKind::AllReduce);
  ar.name = "ar";
  ar.collective().hw_axes = ar.collective().mesh_axes = {0, 1};
  ar.collective().bytes = 8 << 20;
  ar.deps = {0};
  w.ops.push_back(ar);
  workloads::Op send(OpKind::Send);
  send.name = "send";
  send.send().src = 0, send.send().dst = 7, send.send().bytes = 3 << 20;
  send.chips = chips({0, 7});
  send.deps = {1};
  w.ops.push_back(send);
  workloads::Op diag(OpKind::AllGather);
  diag.name = "diag";
  diag.collective().bytes = 2 << 20;
  diag.collective().groups = std::make_shared<const std::vector<std::vector<topology::ChipId>>>(
      std::vector<std::vector<topology::ChipId>>{{2, 5}});
  diag.chips = chips({2, 5});
  diag.deps = {1};
  w.ops.push_back(diag);
  kernel("k4", {7}, 3, {2});
  kernel("k5", {2}, 4, {3});
  for (const bool gzip : {false, true}) {
    Scratch s(gzip ? "export_gz" : "export");
    const chakra::ExportReport rep = chakra::export_trace(w, s.prefix(), gzip);
    CHECK(rep.ranks == 8);
    CHECK(rep.groups == 2);
    CHECK(rep.nodes == 8 + 8 + 2 + 2 + 1 + 1);
    const workloads::Workload back =
        import(s.prefix(), "tpu-v5e", {2, 4}, nullptr, s.prefix() + ".comm_groups.json", gzip ? ".et.gz" : ".et");
    REQUIRE(back.ops.size() == w.ops.size());
    CHECK(driver::simulate(back).makespan == driver::simulate(w).makespan);
    std::map<std::string, const workloads::Op*> by;
    for (const workloads::Op& op : back.ops) by[op.name] = &op;
    CHECK(by.at("ar")->collective().hw_axes == std::vector<int>{0, 1});
    CHECK(by.at("ar")->comm_bytes() == ar.comm_bytes());
    CHECK(by.at("send")->send().src == 0);
    CHECK(by.at("send")->send().dst == 7);
    CHECK(*by.at("diag")->collective().groups == *diag.collective().groups);
    CHECK(by.at("r7/k4")->elementwise().duration == Tick::from_ps(3'000'000));
  }
}

TEST_CASE("chakra: merging the same kernel, collective and send of several ranks changes no time", "[chakra]") {
  // 8 ranks on a 2x4: k1 (3 us), an all-reduce in its row pair ({0,1}, {2,3},
  // ...: x), k2 (rank 5 slower), a send two ranks on (along y) and the receive
  // from two back, k3 after the receive. Merged: one op per kernel and stage
  // alike; unmerged: one op per node and group. Same picoseconds.
  Scratch s("merge");
  std::string groups = "{";
  for (int g = 0; g < 4; ++g) groups += fmt::format("{}\"{}\": [{}, {}]", g ? ", " : "", g + 1, 2 * g, 2 * g + 1);
  write_text(s.prefix("g") + ".json", groups + "}");
  write_trace(s.prefix(), 8, [](int r) {
    Node send = p2p(4, true, r, (r + 2) % 8, 1 << 20, {3});
    Node recv = p2p(5, false, (r + 6) % 8, r, 1 << 20, {3});
    return std::vector<Node>{comp(1, 3), coll(2, CommType::AllReduce, 1 << 20, {1}, std::to_string(r / 2 + 1)),
                             comp(3, r == 5 ? 9 : 2, {2}), send, recv, comp(6, 1, {5})};
  });
  chakra::ImportOptions o;
  o.hardware = "tpu-v5e";
  o.shape = {2, 4};
  o.comm_groups = s.prefix("g") + ".json";
  chakra::ImportReport merged_report, plain_report;
  const workloads::Workload merged = chakra::import_trace(s.prefix() + ".0.et", o, &merged_report);
  o.merge = false;
  const workloads::Workload plain = chakra::import_trace(s.prefix() + ".0.et", o, &plain_report);
  CHECK(plain.ops.size() == 8 + 4 + 8 + 8 + 8);
  CHECK(merged.ops.size() < plain.ops.size() / 2);
  const driver::RunResult a = driver::simulate(merged), b = driver::simulate(plain);
  CHECK(a.makespan == b.makespan);
  CHECK(a.transfers == b.transfers);
  CHECK(a.link_bytes == b.link_bytes);
  // Each kernel node ends at the same time either way.
  const auto ends = [](const workloads::Workload& w, const driver::RunResult& r) {
    std::multiset<std::pair<std::string, std::int64_t>> out;
    for (std::size_t i = 0; i < w.ops.size(); ++i)
      if (w.ops[i].kind == OpKind::Elementwise) {
        std::string name = w.ops[i].name;
        if (const auto slash = name.find('/'); slash != std::string::npos) name = name.substr(slash + 1);
        for (std::size_t c = 0; c < w.ops[i].chips->size(); ++c) out.emplace(name, r.ops[i].end.ps());
      }
    return out;
  };
  CHECK(ends(merged, a) == ends(plain, b));
}

TEST_CASE("chakra: export passes dependencies through an op's chips that get no node", "[chakra]") {
  // A send that runs on every chip (as a workload's send does) has nodes on its
  // two ends only; a kernel on chip 3 after it still waits for what the send
  // waited for on chip 3.
  workloads::Workload w = workloads::empty_workload({"tpu-v5e", {2, 4}, {}}, false, "test");
  workloads::Op k(OpKind::Elementwise);
  k.name = "before";
  k.elementwise().duration = Tick::from_ps(2'000'000);
  w.ops.push_back(k);
  workloads::Op send(OpKind::Send);
  send.name = "send";
  send.send().src = 0, send.send().dst = 7, send.send().bytes = 1024;
  send.deps = {0};
  w.ops.push_back(send);
  k.name = "after";
  k.chips = std::make_shared<const std::vector<topology::ChipId>>(std::vector<topology::ChipId>{3});
  k.deps = {1};
  w.ops.push_back(k);
  Scratch s("through");
  (void)chakra::export_trace(w, s.prefix(), false);
  const chakra::RankTrace r3 = chakra::read_rank(s.prefix() + ".3.et");
  REQUIRE(r3.nodes.size() == 2);
  CHECK(r3.nodes[0].name == "before");
  CHECK(r3.nodes[1].name == "after");
  CHECK(r3.nodes[1].data_deps == std::vector<std::uint64_t>{r3.nodes[0].id});
  const chakra::RankTrace r7 = chakra::read_rank(s.prefix() + ".7.et");
  REQUIRE(r7.nodes.size() == 2);
  CHECK(r7.nodes[1].type == static_cast<int>(NodeType::Recv));
  CHECK(r7.nodes[1].data_deps == std::vector<std::uint64_t>{r7.nodes[0].id});
}

TEST_CASE("chakra: malformed traces are one error line each", "[chakra]") {
  Scratch s("bad");
  const std::string p = s.prefix();
  const auto f0 = p + ".0.et";
  const auto ok_rank = [](int) { return std::vector<Node>{comp(1, 1)}; };
  // Byte-level damage to rank 0's file.
  const auto damaged = [&](const std::string& bytes) {
    write_trace(p, 8, ok_rank);
    write_text(f0, bytes);
    return error_of(p);
  };
  CHECK(damaged(std::string(6, '\xff')) ==
        f0 + ":byte 0: a message length that is not a valid varint32 (the file is not a Chakra trace, or is corrupt)");
  CHECK(damaged(std::string("\x05\x0a\x01", 3)) == f0 + ":byte 0: a message of 5 bytes runs past the end of the file (truncated)");
  CHECK(damaged("") == f0 + ":byte 0: an empty file: a Chakra trace starts with its GlobalMetadata");
  CHECK(damaged(std::string("\x02\x0a\x00\x03\xff\xff\xff", 7)) == f0 + ":byte 3: a message that is not a Chakra Node");
  // Node-level errors.
  const auto with = [&](std::vector<Node> rank0, std::vector<int> shape = {2, 4}, const std::string& groups = "") {
    write_trace(p, 8, [&](int r) { return r == 0 ? rank0 : std::vector<Node>{comp(1, 1)}; });
    return error_of(p, std::move(shape), groups);
  };
  Node weird = comp(1, 1);
  weird.type = 42;
  CHECK(with({weird}) == f0 + ":byte 8: node 1 ('k1'): node type 42 is not a Chakra node type (0 to 10)");
  CHECK(with({comp(1, 1), comp(1, 2)}) ==
        f0 + ":byte 19: node 1 ('k1'): a second node with this id (ids must be unique in a rank's trace)");
  CHECK(with({comp(1, 1, {7})}) == f0 + ":byte 8: node 1 ('k1'): depends on node 7, which is not in this rank's trace");
  CHECK(with({comp(1, 1, {1})}) == f0 + ":byte 8: node 1 ('k1'): depends on itself");
  CHECK(with({coll(1, CommType::Broadcast, 64)}) ==
        f0 + ":byte 8: node 1 ('c1'): comm_type 5 (BROADCAST): meshsim simulates ALL_REDUCE, ALL_GATHER, "
             "REDUCE_SCATTER, REDUCE_SCATTER_BLOCK and ALL_TO_ALL");
  CHECK(with({coll(1, CommType::AllReduce, 64)}) ==
        f0 + ":byte 8: node 1 ('c1'): collective 1 of process group '' (ALL_REDUCE of 64 bytes) has no counterpart "
             "on rank 1: every rank of the group must run it");
  CHECK(with({coll(1, CommType::AllReduce, 64, {}, "7")}) ==
        f0 + ":byte 8: node 1 ('c1'): its process group '7' is not in the comm-group file (none given: --comm-groups FILE)");
  CHECK(with({p2p(1, true, 0, 3, 64)}) ==
        f0 + ":byte 8: node 1 ('s1'): send 1 from rank 0 to rank 3 (tag 0) has no matching receive on rank 3");
  CHECK(with({p2p(1, true, 0, 9, 64)}) == f0 + ":byte 8: node 1 ('s1'): comm_dst 9 is not a rank (0 to 7)");
  // Ranks that disagree on a collective, and two ranks running two collectives in opposite orders.
  write_trace(p, 8, [](int r) { return std::vector<Node>{coll(1, CommType::AllReduce, r == 3 ? 128 : 64)}; });
  CHECK(error_of(p) == p + ".3.et:byte 8: node 1 ('c1'): collective 1 of process group '' is ALL_REDUCE of 128 "
                           "bytes here and ALL_REDUCE of 64 bytes on rank 0 (node 1): the ranks of a group must agree");
  write_text(p + ".json", R"({"1": [0, 1], "2": [0, 1]})");
  write_trace(p, 8, [](int r) {
    if (r > 1) return std::vector<Node>{comp(1, 1)};
    Node a = coll(1, CommType::AllReduce, 64, {}, r == 0 ? "1" : "2");
    Node b = coll(2, CommType::AllReduce, 64, {1}, r == 0 ? "2" : "1");
    return std::vector<Node>{a, b};
  });
  CHECK_THAT(error_of(p, {2, 4}, p + ".json"),
             Catch::EndsWith("its op and the ops it waits for wait for each other across ranks (a cycle: e.g. two "
                             "ranks that run two collectives in opposite orders)"));
  // Attributes of the wrong type; the comm-group file's own errors.
  Node wrong = coll(1, CommType::AllReduce, 64);
  wrong.comm_size.reset();
  CHECK(with({wrong}) == f0 + ":byte 8: node 1 ('c1'): a COMM_COLL_NODE without comm_size");
  write_text(p + ".json", R"({"1": [0, 0]})");
  CHECK(error_of(p, {2, 4}, p + ".json") == p + ".json:/1/1: rank 0 is in this process group twice");
  write_text(p + ".json", R"({"1": [0, 8]})");
  CHECK_THAT(error_of(p, {2, 4}, p + ".json"), Catch::StartsWith(p + ".json:/1/1: "));
  // Rank files missing or one too many.
  write_trace(p, 8, ok_rank);
  std::filesystem::remove(p + ".5.et");
  CHECK(error_of(p) == p + ".5.et: missing: the topology has 8 chips, one rank file each (" + p + ".0.et to " + p +
                           ".7.et)");
  write_trace(p, 9, ok_rank);
  CHECK(error_of(p) == p + ".8.et: the trace has more ranks than the topology has chips (8): one rank per chip");
  CHECK_THROWS_WITH(chakra::import_trace(p + ".et", {{"tpu-v5e", {2, 4}, {}}, {}, ""}),
                    p + ".et: a Chakra trace file is named <prefix>.<rank>.et (or .et.gz)");
}

TEST_CASE("chakra: a PyTorch trace's GPU nodes run in their stream's order", "[chakra]") {
  // As PyTorch's execution-trace converter writes them: each kernel depends only
  // on the CPU op that launched it, and the CPU ops on each other; the stream
  // runs the kernels, then the all-reduce, one after another (the real two-rank
  // trace of ../shared/real has this shape, its 40 kernels and two all-reduces
  // on stream 7). Stream 9's kernel is on a stream of its own.
  Scratch s("stream");
  write_trace(s.prefix(), 8, [](int) {
    std::vector<Node> nodes;
    const auto cpu = [&](std::uint64_t id, std::vector<std::uint64_t> deps) {
      Node n = comp(id, 50, std::move(deps));
      n.is_cpu_op = true;
      nodes.push_back(n);
    };
    const auto gpu = [&](Node n, std::int64_t stream) {
      n.is_cpu_op = false;
      n.stream = stream;
      nodes.push_back(n);
    };
    cpu(1, {});
    gpu(comp(2, 100, {1}), 7);  // k2: 100 us
    cpu(3, {1});
    gpu(comp(4, 40, {3}), 7);  // k4: after k2 on stream 7
    cpu(5, {3});
    gpu(coll(6, CommType::AllReduce, 1 << 20, {5}), 7);  // after k4
    cpu(7, {5});
    gpu(comp(8, 10, {7}), 9);  // stream 9: only after its launcher
    return nodes;
  });
  const workloads::Workload w = import(s.prefix(), "tpu-v5e", {2, 4});
  const driver::RunResult r = driver::simulate(w);
  std::map<std::string, const driver::OpResult*> by;
  for (const driver::OpResult& o : r.ops) by[o.name] = &o;
  REQUIRE(by.count("k2"));
  REQUIRE(by.count("c6"));
  // Each waits for the one before it on stream 7 (the chip's compute unit
  // runs one kernel at a time, so k8 may go between them).
  CHECK(by.at("k2")->begin == kZeroTick);
  CHECK(by.at("k4")->begin >= by.at("k2")->end);
  CHECK(by.at("c6")->begin == by.at("k4")->end);
  CHECK(by.at("c6")->begin >= Tick::from_ps(140'000'000));
  // k8 waits for no kernel of stream 7: ready at once.
  CHECK(by.at("k8")->begin == kZeroTick);
  for (const workloads::Op& op : w.ops)
    if (op.name == "k4" || op.name == "c6") CHECK(op.deps.size() == 1);
}

TEST_CASE("chakra: export writes a memory-bound kernel as one op, so ASTRA-sim's roofline times it", "[chakra]") {
  // ASTRA-sim's roofline mode: time = num_ops / min(bw x num_ops / tensor_size, peak).
  // With num_ops 0 that is 0 / 0 and no rank finishes; with 1 it is tensor_size / bw.
  workloads::Workload w = workloads::empty_workload({"tpu-v5e", {2}, {}}, false, "test");
  workloads::Op norm(OpKind::Elementwise);
  norm.name = "norm";
  norm.elementwise().hbm_bytes = 64 << 20;  // no FLOPs: memory-bound
  w.ops.push_back(norm);
  workloads::Op act(OpKind::Elementwise);
  act.name = "act";
  act.elementwise().hbm_bytes = 1 << 20;
  act.elementwise().flops = 5'000'000;
  w.ops.push_back(act);
  Scratch s("export_roofline");
  (void)chakra::export_trace(w, s.prefix(), false);
  const chakra::RankTrace t = chakra::read_rank(s.prefix() + ".0.et");
  std::map<std::string, const Node*> by;
  for (const Node& n : t.nodes) by[n.name] = &n;
  REQUIRE(by.count("norm"));
  REQUIRE(by.at("norm")->num_ops.has_value());
  CHECK(*by.at("norm")->num_ops == 1);
  CHECK(*by.at("act")->num_ops == 5'000'000);
  const double bw = w.hardware.chip.hbm_bandwidth_bytes_per_s, peak = w.hardware.chip.bf16_flops_per_s;
  const auto astra_time = [&](const Node& n) {
    const auto ops = static_cast<double>(*n.num_ops), bytes = static_cast<double>(*n.tensor_size);
    return ops / std::min(bw * ops / bytes, peak);
  };
  CHECK(std::isfinite(astra_time(*by.at("norm"))));
  CHECK(astra_time(*by.at("norm")) == Approx(static_cast<double>(64 << 20) / bw));
  CHECK(astra_time(*by.at("norm")) == Approx(driver::local_cost(w.ops[0], w.hardware, w.file).time().seconds()));
}

TEST_CASE("chakra: a send-then-receive ring (MSCCL) runs: a send does not wait for its receive to be posted",
          "[chakra]") {
  // Each rank: send step k to the next rank, then receive step k from the one
  // before, then reduce, then send step k+1 (ASTRA-sim's custom ring
  // all-reduce). Were a send to wait for its receive, every send of a step would
  // wait for the next rank's send first: a cycle around the ring.
  Scratch s("msccl");
  const std::uint64_t bytes = 131072;
  write_trace(s.prefix(), 8, [&](int r) {
    std::vector<Node> nodes;
    std::uint64_t last = 0;
    for (std::uint64_t k = 0; k < 3; ++k) {
      const std::uint64_t id = 10 * k + 1;
      Node send =
          p2p(id, true, r, (r + 1) % 8, bytes, last ? std::vector<std::uint64_t>{last} : std::vector<std::uint64_t>{});
      send.comm_tag = static_cast<std::int64_t>(k);
      Node recv = p2p(id + 1, false, (r + 7) % 8, r, bytes, {id});
      recv.comm_tag = static_cast<std::int64_t>(k);
      Node reduce = comp(id + 2, 2, {id + 1});
      nodes.insert(nodes.end(), {send, recv, reduce});
      last = id + 2;
    }
    return nodes;
  });
  const workloads::Workload w = import(s.prefix(), "tpu-v5e", {8});
  const driver::RunResult r = driver::simulate(w);
  std::map<std::string, const driver::OpResult*> by;
  for (const driver::OpResult& o : r.ops) by[o.name] = &o;
  // Step 0's sends start at once; each reduction waits for its receive; step
  // 1's sends wait for the reduction before them.
  REQUIRE(by.count("s1"));
  REQUIRE(by.count("k3"));
  REQUIRE(by.count("s11"));
  CHECK(by.at("s1")->begin == kZeroTick);
  CHECK(by.at("k3")->begin >= by.at("s1")->end);
  CHECK(by.at("s11")->begin >= by.at("k3")->end);
  CHECK(r.makespan > by.at("s11")->end);
}

TEST_CASE("chakra: a process group written as a float ('0.0') is the comm-group file's '0'", "[chakra]") {
  Scratch s("group_alias");
  write_trace(s.prefix(), 8, [](int r) {
    // Ranks 0-3 name their row group "0.0", ranks 4-7 "1".
    return std::vector<Node>{coll(1, CommType::AllReduce, 1 << 20, {}, r < 4 ? "0.0" : "1")};
  });
  const std::string groups = s.prefix() + ".groups.json";
  write_text(groups, R"({"0": [0, 1, 2, 3], "1": [4, 5, 6, 7]})");
  // Both groups are rows of the 4x2 (x fastest): one all-reduce over x.
  const workloads::Workload w = import(s.prefix(), "tpu-v5e", {4, 2}, nullptr, groups);
  REQUIRE(w.ops.size() == 1);
  CHECK(w.ops[0].collective().hw_axes == std::vector<int>{0});
  // A name the file has, as written, stays itself: "0.0" is not "0" (every chip) here.
  write_text(groups, R"({"0.0": [0, 1, 2, 3], "0": [0, 1, 2, 3, 4, 5, 6, 7], "1": [4, 5, 6, 7]})");
  const workloads::Workload again = import(s.prefix(), "tpu-v5e", {4, 2}, nullptr, groups);
  REQUIRE(again.ops.size() == 1);
  CHECK(again.ops[0].collective().hw_axes == std::vector<int>{0});
  // Not a whole number: not in the file.
  write_trace(s.prefix(), 8, [](int) { return std::vector<Node>{coll(1, CommType::AllReduce, 1 << 20, {}, "0.5")}; });
  CHECK(error_of(s.prefix(), {4, 2}, groups).find("its process group '0.5' is not in the comm-group file") !=
        std::string::npos);
}
