// TPU mesh axes over part of a torus axis (MeshAxis::factors): collectives
// over their groups against the closed forms of a line or ring of that size and
// their bounds, the table's mapping, and exact reductions.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "driver/run_context.hpp"
#include "driver/simulate.hpp"
#include "reports/report.hpp"
#include "unit/driver/run_json.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

const std::uint64_t kGiB = std::uint64_t{1} << 30;

std::string workload(const std::string& topology, const std::string& mesh, const std::string& ops) {
  return R"({"hardware": "tpu-v5p", "topology": )" + topology + R"(, "mesh": )" + mesh + R"(, "ops": [)" + ops + "]}";
}

std::string op(const char* kind, const std::string& axes, std::uint64_t bytes = kGiB) {
  return std::string(R"({"kind": ")") + kind + R"(", "bytes": )" + std::to_string(bytes) + R"(, "axes": )" + axes + "}";
}

driver::OpResult run_one(const std::string& text) {
  return driver::simulate(workloads::parse_workload(text, "t.json")).ops.at(0);
}

std::string json(const std::string& text, bool reduce) {
  return test::run_json(text, reduce);
}

}  // namespace

TEST_CASE("TPU factors: the inner part of a torus axis is a line, as fast as a torus axis without wraparound",
          "[factors]") {
  // T = x:4 of a 16-ring: chips 0-3, 4-7, ...; its ring closes over 3 links
  // back, which carries what a line's end links carry: (n - 1) V / n one way.
  const std::string factored = workload(R"({"shape": [16, 4, 4]})", R"({"T": 4, "F": 64})", "%");
  const std::string line =
      workload(R"({"shape": [4, 4, 4], "wraparound": [false, true, true]})", R"({"X": 4, "Y": 16})", "%");
  const double link = 90e9;  // one-way bytes/s of a v5p ICI link (topology/preset.cpp)
  for (const char* kind : {"all_gather", "reduce_scatter", "all_reduce"}) {
    INFO(kind);
    const auto with = [](std::string text, const std::string& o) { return text.replace(text.find('%'), 1, o); };
    const driver::OpResult f = run_one(with(factored, op(kind, R"(["T"])")));
    const driver::OpResult l = run_one(with(line, op(kind, R"(["X"])")));
    const double phases = std::string(kind) == "all_reduce" ? 2 : 1;
    CHECK(f.bandwidth_s == Approx(phases * 3.0 / 4.0 * static_cast<double>(kGiB) / link).epsilon(1e-6));
    CHECK(f.time().seconds() == Approx(l.time().seconds()).epsilon(0.002));
    CHECK(f.time().seconds() == Approx(f.closed_s).epsilon(0.002));
    CHECK(f.time().seconds() >= f.bound_s);
  }
}

TEST_CASE("TPU factors: the outer part of a torus axis is a ring whose steps cross stride links", "[factors]") {
  // D = x:4@4 (chips x, x + 4, x + 8, x + 12 of a 16-ring): a ring of 4 whose
  // every step crosses 4 links, which the 4 groups (T) share: each link carries
  // 4 x the (n - 1)/2 shards of a ring of 4 each way.
  const std::string text =
      workload(R"({"shape": [16, 4, 4]})", R"({"T": 4, "D": 4, "R": 16})", op("all_gather", R"(["D"])"));
  const driver::OpResult d = run_one(text);
  const double shard = static_cast<double>(kGiB) / 4;
  CHECK(d.bandwidth_s == Approx(4 * 1.5 * shard / 90e9).epsilon(1e-6));
  CHECK(d.time().seconds() == Approx(d.closed_s).epsilon(0.002));
  CHECK(d.time().seconds() >= d.bound_s);
  // 4 times the same ring of 4 on a torus axis of 4 (within the latencies of
  // 4 hops a step): the bytes per link, 4 times over.
  const driver::OpResult ring =
      run_one(workload(R"({"shape": [4, 4, 4]})", R"({"X": 4, "Y": 16})", op("all_gather", R"(["X"])")));
  CHECK(d.time().seconds() == Approx(4 * ring.time().seconds()).epsilon(0.002));
}

TEST_CASE("TPU factors: a collective over several factors runs a phase per factor, within its bounds", "[factors]") {
  const std::string topo = R"({"shape": [16, 4, 4]})", mesh = R"({"T": 4, "F": 64})";
  for (const char* kind : {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"})
    for (const char* axes : {R"(["F"])", R"(["F", "T"])"}) {
      INFO(kind << " over " << axes);
      const driver::OpResult r = run_one(workload(topo, mesh, op(kind, axes)));
      CHECK(r.time().seconds() >= r.bound_s);
      CHECK(r.time().seconds() <= 1.15 * r.closed_s);
      CHECK(r.time().seconds() >= 0.999 * r.closed_s);
    }
  // The table names what each mesh axis takes of the torus axes.
  const workloads::Workload w = workloads::parse_workload(workload(topo, mesh, op("all_gather", R"(["F"])")), "t.json");
  driver::RunContext context(w);
  const std::string table = reports::format_table(w, context, driver::simulate(w, context));
  CHECK(table.find("mesh T=4(x:4) F=64(x:4@4+y+z)") != std::string::npos);
}

TEST_CASE("TPU factors: the reduced runs give the bytes of the full ones", "[factors]") {
  const std::string ops = op("all_gather", R"(["T"])", 1 << 24) + "," + op("reduce_scatter", R"(["F"])", 1 << 24) +
                          "," + op("all_reduce", R"(["F", "T"])", 1 << 24) + "," +
                          op("all_to_all", R"(["T"])", 1 << 24);
  for (const char* mesh : {R"({"T": 4, "F": 64})", R"({"T": 2, "F": 128})", R"({"F": 8, "T": 2, "G": 16})"}) {
    INFO(mesh);
    const std::string text = workload(R"({"shape": [16, 4, 4]})", mesh, ops);
    CHECK(json(text, true) == json(text, false));
  }
}
