// The sweep as a library (studies/sweep.hpp): points built in memory, typed
// results that pass between ranks as text exactly, and the JSON that embeds
// each run's document as `meshsim run --json` writes it.
#include "studies/sweep.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"

using namespace meshsim;
using namespace meshsim::studies;

namespace {

SweepSpec all_reduce_sweep() {
  SweepSpec s;
  s.op_kind = "all_reduce";
  s.presets = {"h100-dgx", "tpu-v5e"};
  s.meshes = {{8}};
  s.bytes = {4096, 1 << 22};
  return s;
}

std::vector<PointResult> simulate_all(const Sweep& sweep) {
  std::vector<PointResult> out;
  for (const SweepPoint& p : sweep.points()) out.push_back(simulate_point(sweep, p, {}));
  return out;
}

}  // namespace

TEST_CASE("sweep: a point's result reads back from its text exactly", "[studies]") {
  const Sweep sweep(all_reduce_sweep());
  REQUIRE(sweep.points().size() == 4);
  for (const PointResult& r : simulate_all(sweep)) {
    const PointResult back = decode_point(r.point, encode_point(r));
    CHECK(back.preset == r.preset);
    CHECK(back.mesh == r.mesh);
    CHECK(back.run == r.run);
    REQUIRE(back.ops.size() == r.ops.size());
    for (std::size_t i = 0; i < r.ops.size(); ++i) {
      const reports::OpRecord &a = r.ops[i], &b = back.ops[i];
      CHECK(a.name == b.name);
      CHECK(a.kind == b.kind);
      CHECK(a.mesh_axes == b.mesh_axes);
      CHECK(a.bytes == b.bytes);
      CHECK(a.time_ps == b.time_ps);
      CHECK(a.closed_form_ps == b.closed_form_ps);
      CHECK(a.lower_bound_ps == b.lower_bound_ps);
      CHECK(a.algbw_bytes_per_s == b.algbw_bytes_per_s);  // exactly: the same double
      CHECK(a.busbw_bytes_per_s == b.busbw_bytes_per_s);
      CHECK(a.ratio == b.ratio);
      CHECK(a.algorithm == b.algorithm);
      CHECK(a.protocol == b.protocol);
      CHECK(a.transfers == b.transfers);
    }
  }
}

TEST_CASE("sweep: the JSON embeds each point's run document as it was written", "[studies]") {
  const Sweep sweep(all_reduce_sweep());
  const std::vector<PointResult> results = simulate_all(sweep);
  const std::string text = format_sweep_json(sweep, results);
  const auto doc = nlohmann::ordered_json::parse(text);
  REQUIRE(doc.at("points").size() == results.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto run = nlohmann::ordered_json::parse(results[i].run);
    CHECK(doc.at("points").at(i).at("run") == run);
    CHECK(doc.at("points").at(i).at("bytes") == *results[i].point.bytes);
  }
  // Byte for byte what one document written at once gives.
  auto whole = doc;
  CHECK(text == whole.dump(2) + "\n");
}

TEST_CASE("sweep: a point that cannot be built names the point", "[studies]") {
  SweepSpec s = all_reduce_sweep();
  s.presets = {"tpu-v9"};
  const Sweep sweep(s);
  try {
    (void)sweep.workload(sweep.points().front());
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "sweep:/hardware: unknown preset 'tpu-v9' (known: tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, a100-dgx, h100-dgx, "
          "h200-dgx, b200-dgx, gb200-nvl72) (sweep point 0: preset=tpu-v9 mesh=8 bytes=4096)");
  }
}

TEST_CASE("sweep: a workload file is read once per preset, with that preset's keys", "[studies]") {
  // The file sets a TPU's hop latency (hardware.hop_latency_s): kept on every
  // TPU preset, a key a GPU preset does not have.
  SweepSpec s;
  s.workload = std::string(MESHSIM_SOURCE_DIR) + "/tests/sweep/tpu_two_ops.json";
  s.presets = {"tpu-v4", "h100-dgx", "tpu-v6e"};
  s.bytes = {1024, 2048};
  const Sweep sweep(s);
  REQUIRE(sweep.points().size() == 6);
  for (std::size_t i : {0U, 1U, 4U, 5U}) {
    const SweepPoint& p = sweep.points()[i];
    const workloads::Workload w = sweep.workload(p);
    CHECK(w.hardware.preset == p.preset);
    CHECK(w.hardware.ici.latency == Tick::from_ps(1'000'000));  // the file's value over the preset's
    for (const workloads::Op& op : w.ops) CHECK(op.comm_bytes() == *p.bytes);
  }
  // The spec read for a preset is not changed by a point's edits.
  CHECK(sweep.workload(sweep.points()[0]).ops[0].comm_bytes() == 1024);
  for (std::size_t i : {2U, 3U}) {
    try {
      (void)sweep.workload(sweep.points()[i]);
      FAIL("no error");
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(what.find("tpu_two_ops.json:/hardware/hop_latency_s: unknown key 'hop_latency_s'") != std::string::npos);
      CHECK(what.find(fmt::format("(sweep point {}: preset=h100-dgx bytes={})", i, i == 2 ? 1024 : 2048)) !=
            std::string::npos);
    }
  }
}
