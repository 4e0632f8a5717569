// Lower bounds (driver/bounds.hpp): never above a simulated time, over every
// bundled example and a deterministic random set of shapes, ops and sizes on
// TPU tori and GPU fabrics; tight where the schedule is known optimal.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "driver/simulate.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

void check_all(const workloads::Workload& w, const std::string& what) {
  const driver::RunResult r = driver::simulate(w);
  for (const driver::OpResult& o : r.ops) {
    if (is_local(o.kind)) continue;
    INFO(what << " op " << o.name << ": time " << o.time().seconds() << " s, bound " << o.bound_s << " s ("
              << o.bound_term << ")");
    CHECK(o.bound_s <= o.time().seconds() * (1 + 1e-9) + 1e-12);
  }
}

}  // namespace

TEST_CASE("Lower bounds: never above the simulated time of any bundled example's op", "[bounds]") {
  for (const auto& e : std::filesystem::directory_iterator(std::string(MESHSIM_SOURCE_DIR) + "/examples")) {
    if (e.path().extension() != ".json" || e.path().stem().string().starts_with("training_")) continue;
    check_all(workloads::load_workload(e.path().string()), e.path().filename().string());
  }
}

TEST_CASE("Lower bounds: never above the simulated time on random shapes, ops and sizes", "[bounds]") {
  std::mt19937_64 rng(16);  // fixed: the same cases every run
  const auto pick = [&](std::uint64_t n) { return static_cast<std::uint64_t>(rng() % n); };
  const char* kinds[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"};
  for (int i = 0; i < 120; ++i) {
    const bool gpu = i % 4 == 3;
    std::string mesh, topology, axes;
    if (gpu) {
      const std::uint64_t nodes = 1 + pick(4);
      mesh = R"({"G": 8, "N": )" + std::to_string(nodes) + "}";
      topology = R"({"nodes": )" + std::to_string(nodes) + "}";
      const std::uint64_t which = 1 + pick(3);
      axes = which == 1 ? R"(["G"])" : which == 2 ? R"(["N"])" : R"(["G", "N"])";
    } else {
      const std::uint64_t dims = 1 + pick(3);
      const int sizes[] = {2, 3, 4, 5, 8};
      std::string shape, wrap, names;
      for (std::uint64_t d = 0; d < dims; ++d) {
        const int s = sizes[pick(5)];
        shape += (d ? ", " : "") + std::to_string(s);
        wrap += (d ? ", " : "") + std::string(pick(2) ? "true" : "false");
        mesh += (d ? ", " : "") + std::string("\"A") + std::to_string(d) + "\": " + std::to_string(s);
        if (pick(2) || d + 1 == dims) names += std::string(names.empty() ? "" : ", ") + "\"A" + std::to_string(d) + "\"";
      }
      mesh = "{" + mesh + "}";
      topology = R"({"shape": [)" + shape + R"(], "wraparound": [)" + wrap + "]}";
      axes = "[" + names + "]";
    }
    const std::uint64_t bytes = std::uint64_t{1} << (10 + pick(15));
    const std::string op = std::string(R"({"kind": ")") + kinds[pick(4)] + R"(", "bytes": )" + std::to_string(bytes) +
                           R"(, "axes": )" + axes + "}";
    std::string text = std::string(R"({"hardware": ")") + (gpu ? "h100-dgx" : "tpu-v4") + R"(", "topology": )" +
                       topology + R"(, "mesh": )" + mesh + R"(, "ops": [)" + op + "]}";
    INFO(text);
    check_all(workloads::parse_workload(text, "t.json"), "random case " + std::to_string(i));
  }
}

TEST_CASE("Lower bounds: never above the simulated time on twisted tori, every op over every axis set", "[bounds]") {
  const char* kinds[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"};
  const char* axis_sets[] = {R"(["X"])", R"(["Z"])", R"(["X", "Z"])", R"(["Y", "Z"])", R"(["X", "Y", "Z"])"};
  for (const char* shape : {"4, 4, 8", "8, 4, 8"}) {
    const std::string sizes = shape[0] == '4' ? R"("X": 4, "Y": 4, "Z": 8)" : R"("X": 8, "Y": 4, "Z": 8)";
    for (const char* axes : axis_sets)
      for (const char* kind : kinds)
        for (std::uint64_t bytes : {std::uint64_t{4096}, std::uint64_t{1} << 26}) {
          const std::string text = std::string(R"({"hardware": "tpu-v4", "topology": {"shape": [)") + shape +
                                   R"(], "twisted": true}, "mesh": {)" + sizes + R"(}, "ops": [{"kind": ")" + kind +
                                   R"(", "bytes": )" + std::to_string(bytes) + R"(, "axes": )" + axes + "}]}";
          INFO(text);
          check_all(workloads::parse_workload(text, "t.json"), "twisted");
        }
  }
}

TEST_CASE("Twisted 4x4x8: all-to-all over every axis faster than untwisted, at most 1.2x its bound", "[bounds]") {
  const auto run = [](bool twisted) {
    const std::string text = std::string(R"({"hardware": "tpu-v4", "topology": {"shape": [4, 4, 8], "twisted": )") +
                             (twisted ? "true" : "false") +
                             R"(}, "mesh": {"X": 4, "Y": 4, "Z": 8}, "ops": [{"kind": "all_to_all", "bytes": 1073741824,
                             "axes": ["X", "Y", "Z"]}]})";
    return driver::simulate(workloads::parse_workload(text, "t.json")).ops.at(0);
  };
  const driver::OpResult plain = run(false), twisted = run(true);
  // The twist doubles the links across the long axis's middle plane: the cut
  // bound halves, and the all-to-all is 1.74x faster (docs/MODEL.md).
  CHECK(twisted.bound_s == Approx(plain.bound_s / 2));
  CHECK(plain.time().seconds() / twisted.time().seconds() > 1.6);
  CHECK(twisted.time().seconds() <= 1.2 * twisted.bound_s);
}

TEST_CASE("Lower bounds: never above NCCL's NVLS tree, whose switches reduce in every node", "[bounds]") {
  // A GPU sends its V into its switch and takes the sum out once: less than
  // the 2(p-1)/p V it moves without in-switch reduction (on 2 nodes 256 MiB
  // take 891.7 us, where 2(p-1)/p V over a GPU's 450 + 50 GB/s is 1,006.6).
  for (int nodes : {2, 3, 4})
    for (std::uint64_t bytes : {std::uint64_t{1} << 20, std::uint64_t{1} << 26, std::uint64_t{1} << 28}) {
      const std::string m = std::to_string(nodes);
      check_all(workloads::parse_workload(R"({"hardware": "h100-dgx", "topology": {"nodes": )" + m +
                                              R"(}, "mesh": {"G": 8, "N": )" + m +
                                              R"(}, "ops": [{"name": "ar", "kind": "all_reduce", "bytes": )" +
                                              std::to_string(bytes) +
                                              R"(, "axes": ["G", "N"], "algorithm": "nvls_tree"}]})",
                                          "t.json"),
                "nvls_tree on " + m + " nodes, " + std::to_string(bytes) + " bytes");
    }
}

TEST_CASE("Lower bounds: a ring and a cube in the bandwidth regime run at their bound", "[bounds]") {
  const auto ratio = [](const std::string& text) {
    const driver::RunResult r = driver::simulate(workloads::parse_workload(text, "t.json"));
    return r.ops.front().time().seconds() / r.ops.front().bound_s;
  };
  // A bidirectional ring of 16: V (1 - 1/16) / (2 b) is what it takes.
  CHECK(ratio(R"({"hardware": "tpu-v5e", "mesh": {"X": 16},
                  "ops": [{"kind": "all_gather", "bytes": 1073741824, "axes": ["X"]}]})") == Approx(1).epsilon(0.005));
  // All three axes of a 4x4x4 v5p: within 0.2 % of V (1 - 1/64) / (6 b).
  CHECK(ratio(R"({"hardware": "tpu-v5p", "topology": {"shape": [4, 4, 4]}, "mesh": {"X": 4, "Y": 4, "Z": 4},
                  "ops": [{"kind": "all_gather", "bytes": 1073741824, "axes": ["X", "Y", "Z"]}]})") ==
        Approx(1).epsilon(0.002));
}

TEST_CASE("Lower bounds: collectives over random groups of chips, on plain, twisted and multislice tori", "[bounds]") {
  // Random chip sets split into random equal groups (any order: ring order is
  // the listed order). The simulated time is never below the bound, and the
  // transfer estimate the size limits use is the count actually built.
  std::mt19937_64 rng(21);  // fixed: the same cases every run
  const auto pick = [&](std::uint64_t n) { return static_cast<std::uint64_t>(rng() % n); };
  const OpKind kinds[] = {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::AllToAll};
  const char* topologies[] = {
      R"({"shape": [8], "wraparound": [true]}, "mesh": {"A": 8})",
      R"({"shape": [4, 4], "wraparound": [true, false]}, "mesh": {"A": 4, "B": 4})",
      R"({"shape": [3, 5]}, "mesh": {"A": 3, "B": 5})",
      R"({"shape": [4, 4, 4]}, "mesh": {"A": 4, "B": 4, "C": 4})",
      R"({"shape": [4, 4, 8], "twisted": true}, "mesh": {"A": 4, "B": 4, "C": 8})",
      R"({"shape": [2, 4], "slices": 2}, "mesh": {"A": 2, "B": 4, "S": 2})",
  };
  for (int i = 0; i < 48; ++i) {
    const std::string text = std::string(R"({"hardware": "tpu-v4", "topology": )") + topologies[i % 6] +
                             R"(, "ops": [{"kind": "all_reduce", "bytes": 1024, "axes": ["A"]}]})";
    workloads::Workload w = workloads::parse_workload(text, "t.json");
    const topology::Torus t = w.make_torus();
    std::vector<topology::ChipId> chips(t.num_chips());
    for (topology::ChipId c = 0; c < t.num_chips(); ++c) chips[c] = c;
    std::shuffle(chips.begin(), chips.end(), rng);
    // Group sizes that divide some chip count: 2 to 8 members, 1 to all groups.
    const std::uint64_t n = 2 + pick(7);
    const std::uint64_t groups = 1 + pick(t.num_chips() / n);
    auto list = std::make_shared<std::vector<std::vector<topology::ChipId>>>();
    auto used = std::make_shared<std::vector<topology::ChipId>>();
    for (std::uint64_t g = 0; g < groups; ++g) {
      list->emplace_back(chips.begin() + static_cast<std::ptrdiff_t>(g * n), chips.begin() + static_cast<std::ptrdiff_t>((g + 1) * n));
      used->insert(used->end(), list->back().begin(), list->back().end());
    }
    std::sort(used->begin(), used->end());
    workloads::Op& op = w.ops.at(0);
    op.kind = kinds[pick(4)];
    op.collective().bytes = std::uint64_t{1} << (10 + pick(15));
    op.collective().mesh_axes.clear();
    op.collective().hw_axes.clear();
    op.collective().groups = std::move(list);
    op.chips = std::move(used);
    INFO("case " << i << ": " << t.shape_string() << ", " << groups << " groups of " << n << ", " << kind_name(op.kind)
                 << " of " << op.comm_bytes() << " bytes");
    check_all(w, "random groups");
    const driver::RunResult r = driver::simulate(w);
    CHECK(r.ops.at(0).transfers == driver::estimate_transfers(op, w, t, nullptr));
    CHECK(r.ops.at(0).transfers > 0);
  }
}
