// Fitting fabric terms to measured collectives by simulating them: synthetic
// measurements made by meshsim itself with known terms are fitted back.
#include "calibrate/fit_fabric.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.hpp"
#include "calibrate/measured.hpp"

using namespace meshsim;
using namespace meshsim::calibrate;

namespace {

// The ground truth: ICI links at 92 % of peak, 1.3 us per hop, fixed costs per kind.
LevelFit truth() {
  LevelFit t;
  t.level = workloads::FabricLevel::Ici;
  t.preset = "tpu-v5e";
  t.hop_latency_s = 1.3e-6;
  t.efficiency = 0.92;
  t.fixed_cost = {{OpKind::AllGather, 5e-6, 0}, {OpKind::AllReduce, 8e-6, 0}};
  return t;
}

MeasuredPoint point(OpKind kind, const char* shape, const char* axes, std::uint64_t bytes) {
  MeasuredPoint p;
  p.kind = kind;
  p.hardware = "tpu-v5e";
  p.topology = shape;
  p.axes = axes;
  p.bytes = bytes;
  p.file = "synthetic";
  p.pointer = fmt::format("{} {} {} {}", kind_name(kind), shape, axes, bytes);
  return p;
}

// Sizes 2^lo .. 2^hi (every `step`-th), on the given (shape, axes), both kinds,
// timed by the truth, with a deterministic relative noise of +-`noise`.
std::vector<MeasuredPoint> measure(const std::vector<std::pair<const char*, const char*>>& systems, int lo, int hi,
                                   int step, double noise) {
  std::vector<MeasuredPoint> out;
  const LevelFit t = truth();
  int k = 0;
  for (OpKind kind : {OpKind::AllGather, OpKind::AllReduce})
    for (const auto& [shape, axes] : systems)
      for (int e = lo; e <= hi; e += step) {
        MeasuredPoint p = point(kind, shape, axes, std::uint64_t{1} << e);
        const double jitter = noise * std::sin(1.7 * ++k);  // in [-noise, noise], no pattern in size
        p.time_s = simulate_point(p, std::span(&t, 1)) * (1 + jitter);
        out.push_back(p);
      }
  return out;
}

void require_recovered(const FabricFit& fit, double tolerance) {
  REQUIRE(fit.levels.size() == 1);
  const LevelFit& f = fit.levels[0];
  const LevelFit t = truth();
  CHECK(f.hop_latency_fitted);
  CHECK(f.hop_latency_s == Approx(t.hop_latency_s).epsilon(tolerance));
  CHECK(f.efficiency == Approx(t.efficiency).epsilon(tolerance));
  // The kinds measured, fitted; the others (reduce_scatter, all_to_all, send)
  // share their mean.
  REQUIRE(f.fixed_cost.size() == 5);
  double sum = 0;
  for (const LevelFit::Fixed& x : f.fixed_cost) {
    const auto truth_of = std::find_if(t.fixed_cost.begin(), t.fixed_cost.end(),
                                       [&](const LevelFit::Fixed& y) { return y.kind == x.kind; });
    if (truth_of == t.fixed_cost.end()) continue;
    CHECK(x.fitted);
    CHECK_FALSE(x.shared);
    CHECK(x.seconds == Approx(truth_of->seconds).epsilon(tolerance));
    sum += x.seconds;
  }
  for (const LevelFit::Fixed& x : f.fixed_cost)
    if (x.kind == OpKind::ReduceScatter || x.kind == OpKind::AllToAll || x.kind == OpKind::Send) {
      CHECK(x.shared);
      CHECK_FALSE(x.fitted);
      CHECK(x.seconds == Approx(sum / 2).epsilon(1e-12));
    }
}

const std::vector<std::pair<const char*, const char*>> kOneSlice = {{"8x16", "y"}, {"8x16", "x"}, {"8x16", "x+y"}};

}  // namespace

TEST_CASE("fit_fabric: synthetic measurements with noise are fitted back within 2 %", "[fit_fabric]") {
  const std::vector<MeasuredPoint> points = measure(kOneSlice, 12, 28, 2, 0.005);
  const FabricFit fit = fit_fabric(points);
  require_recovered(fit, 0.02);
  // Residuals of the order of the noise; standard errors reported.
  CHECK(fit.levels[0].quality.points == points.size());
  CHECK(fit.levels[0].quality.max_relative_residual < 0.01);
  CHECK(fit.levels[0].efficiency_error > 0);
  CHECK(fit.levels[0].hop_latency_error_s > 0);
}

TEST_CASE("fit_fabric: without noise the terms come back to rounding", "[fit_fabric]") {
  const FabricFit fit = fit_fabric(measure(kOneSlice, 12, 28, 4, 0.0));
  require_recovered(fit, 0.002);
}

TEST_CASE("fit_fabric: fitted on the even sizes, the odd sizes are predicted within 1 %", "[fit_fabric]") {
  const FabricFit fit = fit_fabric(measure(kOneSlice, 12, 28, 2, 0.0));
  for (const MeasuredPoint& odd : measure(kOneSlice, 13, 27, 2, 0.0))
    CHECK(simulate_point(odd, fit.levels) == Approx(odd.time_s).epsilon(0.01));
}

TEST_CASE("fit_fabric: fitted on one slice shape, other shapes are predicted within 2 %", "[fit_fabric]") {
  const FabricFit fit = fit_fabric(measure(kOneSlice, 12, 28, 2, 0.005));
  for (const MeasuredPoint& other : measure({{"16x16", "x+y"}, {"4x4", "x"}, {"4x8", "y"}}, 12, 28, 4, 0.0))
    CHECK(simulate_point(other, fit.levels) == Approx(other.time_s).epsilon(0.02));
}

// Only all-gathers over one ring: the fixed cost adds the same to every point,
// the hop latency does not (how much of it the transfers hide depends on size).
std::vector<MeasuredPoint> all_gathers_over_y(int lo, int hi, int step) {
  std::vector<MeasuredPoint> p = measure({{"8x16", "y"}}, lo, hi, step, 0.0);
  std::erase_if(p, [](const MeasuredPoint& x) { return x.kind != OpKind::AllGather; });
  return p;
}

TEST_CASE("fit_fabric: one kind over one ring still separates hop latency from its fixed cost", "[fit_fabric]") {
  const FabricFit fit = fit_fabric(all_gathers_over_y(12, 28, 2));
  REQUIRE(fit.levels.size() == 1);
  CHECK(fit.levels[0].hop_latency_fitted);
  CHECK(fit.levels[0].hop_latency_s == Approx(1.3e-6).epsilon(0.02));
  CHECK(fit.levels[0].efficiency == Approx(0.92).epsilon(0.02));
  REQUIRE(fit.levels[0].fixed_cost.size() == 5);  // all_gather's, then shared by the other four kinds
  for (const LevelFit::Fixed& x : fit.levels[0].fixed_cost) {
    CHECK(x.seconds == Approx(5e-6).epsilon(0.02));
    CHECK(x.shared == (x.kind != OpKind::AllGather));
  }
  CHECK(std::any_of(fit.notes.begin(), fit.notes.end(), [](const std::string& n) {
    return n ==
           "the ici fixed cost of reduce_scatter, all_reduce, all_to_all, send (no points that show it) is "
           "all_gather's: one launch and synchronisation path for every kind";
  }));
  // All-reduces of large sizes only cannot show their fixed cost: it takes the
  // all-gathers' too, instead of 0.
  std::vector<MeasuredPoint> mixed = all_gathers_over_y(12, 28, 4);
  for (const MeasuredPoint& p : measure({{"8x16", "y"}}, 27, 30, 1, 0.0))
    if (p.kind == OpKind::AllReduce) mixed.push_back(p);
  const FabricFit shared = fit_fabric(mixed);
  const auto all_reduce = std::find_if(shared.levels.at(0).fixed_cost.begin(), shared.levels.at(0).fixed_cost.end(),
                                       [](const LevelFit::Fixed& x) { return x.kind == OpKind::AllReduce; });
  REQUIRE(all_reduce != shared.levels.at(0).fixed_cost.end());
  CHECK(all_reduce->shared);
  CHECK(all_reduce->seconds == Approx(5e-6).epsilon(0.02));
  for (const MeasuredPoint& p : all_gathers_over_y(13, 27, 4))
    CHECK(simulate_point(p, fit.levels) == Approx(p.time_s).epsilon(0.01));
}

TEST_CASE("fit_fabric: what the points cannot determine is kept at the preset, and said", "[fit_fabric]") {
  // Only large messages (128 MiB to 1 GiB, milliseconds): no fixed cost moves
  // a time by 0.1 % per microsecond; the efficiency is fitted, the fixed costs
  // kept at 0 and said.
  // (One ring of the slice: a third of kOneSlice's simulations, for the sanitizers' sake.)
  const FabricFit large = fit_fabric(measure({{"8x16", "y"}}, 27, 30, 1, 0.0));
  REQUIRE(large.levels.size() == 1);
  CHECK(large.levels[0].efficiency_fitted);
  CHECK(large.levels[0].efficiency == Approx(0.92).epsilon(0.01));
  REQUIRE_FALSE(large.levels[0].fixed_cost.empty());
  for (const LevelFit::Fixed& f : large.levels[0].fixed_cost) {
    CHECK_FALSE(f.fitted);
    CHECK(f.seconds == 0);
  }
  const auto said = [&](const std::string& start) {
    return std::any_of(large.notes.begin(), large.notes.end(), [&](const std::string& n) {
      return n.starts_with(start) && n.ends_with("(add smaller messages to fit it)");
    });
  };
  CHECK(
      said("the ici fixed cost of all_gather is kept at the preset's 0 s: 1 us of it changes no measured time by "
           "more than"));
  CHECK(said("the ici fixed cost of all_reduce is kept at the preset's 0 s: "));
  // Only small messages: no bandwidth information; the efficiency is the preset's.
  const FabricFit small = fit_fabric(measure({{"8x16", "y"}}, 6, 8, 1, 0.0));
  CHECK_FALSE(small.levels.at(0).efficiency_fitted);
  CHECK(small.levels.at(0).efficiency == 1.0);
  CHECK(std::any_of(small.notes.begin(), small.notes.end(), [](const std::string& n) {
    return n.starts_with("the ici link efficiency is kept at the preset's 1: bandwidth is at most");
  }));
  // On a GPU preset the preset's NVLink efficiency is NCCL's payload rate: the
  // fit starts there, simulates "before" with it and keeps it when undetermined.
  std::vector<MeasuredPoint> gpu;
  for (const std::uint64_t bytes : {4096ULL, 8192ULL, 16384ULL, 32768ULL}) {
    MeasuredPoint p = point(OpKind::AllGather, "1", "all", bytes);
    p.hardware = "h100-dgx";
    p.time_s = 30e-6;
    gpu.push_back(p);
  }
  const FabricFit nvlink = fit_fabric(gpu);
  CHECK_FALSE(nvlink.levels.at(0).efficiency_fitted);
  CHECK(nvlink.levels.at(0).efficiency == Approx(20.6 / 25.0).epsilon(1e-12));
  CHECK(std::any_of(nvlink.notes.begin(), nvlink.notes.end(), [](const std::string& n) {
    return n.starts_with("the nvlink link efficiency is kept at the preset's 0.824: bandwidth is at most");
  }));
  CHECK(nvlink.points.at(0).before_s == Approx(simulate_point(gpu[0], {})).epsilon(1e-12));
  // Too few points for the terms.
  std::vector<MeasuredPoint> few = measure({{"8x16", "y"}, {"8x16", "x"}}, 14, 26, 12, 0.0);
  few.resize(3);
  CHECK_THROWS_WITH(fit_fabric(few), Catch::Contains("points cannot determine"));
  // Links faster than their peak: the preset or the size convention is wrong.
  std::vector<MeasuredPoint> fast = measure(kOneSlice, 12, 28, 2, 0.0);
  for (MeasuredPoint& p : fast) p.time_s *= 0.5;
  CHECK_THROWS_WITH(fit_fabric(fast), Catch::Contains("above the tpu-v5e peak"));
  // Two presets at once.
  std::vector<MeasuredPoint> mixed = measure(kOneSlice, 12, 28, 4, 0.0);
  mixed.back().hardware = "tpu-v4";
  mixed.back().topology = "4x4x4";
  CHECK_THROWS_AS(fit_fabric(mixed), InputError);
}

TEST_CASE("measured points: CSV and JSON", "[measured]") {
  const std::string csv =
      "# kind, system, size, median\n"
      "kind,hardware,topology,axes,bytes,time_s,spread_s\n"
      "all_gather,tpu-v5e,8x16,y,1048576,2.1e-05,1e-7\n"
      "\n"
      "all_reduce,h100-dgx,2,all,4096,3.0e-05,0\n";
  const std::vector<MeasuredPoint> p = parse_points_csv(csv, "m.csv");
  REQUIRE(p.size() == 2);
  CHECK(p[0].kind == OpKind::AllGather);
  CHECK(p[0].where() == "m.csv:3");
  CHECK(p[0].spread_s == 1e-7);
  CHECK(p[1].where() == "m.csv:5");
  CHECK(point_workload(p[1]).ops.front().collective().hw_axes.size() == 2);
  const std::vector<MeasuredPoint> j = parse_points_json(
      R"({"points": [{"kind": "all_to_all", "hardware": "tpu-v4", "topology": "4x4x4", "axes": "x+y+z",
                      "bytes": 65536, "time_s": 1e-5}]})",
      "m.json");
  REQUIRE(j.size() == 1);
  CHECK(j[0].where() == "m.json:/points/0");
  CHECK(point_workload(j[0]).ops.front().collective().hw_axes.size() == 3);
}

TEST_CASE("measured points: each malformed input is one error line at its place", "[measured]") {
  const auto csv_error = [](const std::string& body) {
    try {
      std::string text = "kind,hardware,topology,axes,bytes,time_s\n";
      text.append(body);
      parse_points_csv(text, "m.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(csv_error("broadcast,tpu-v5e,8x16,y,1024,1e-5\n") ==
        "m.csv:2: unknown collective 'broadcast' (expected all_gather, reduce_scatter, all_reduce or all_to_all)");
  CHECK(csv_error("all_gather,tpu-v5e,8x16,y,1.5,1e-5\n") == "m.csv:2: bytes '1.5' is not a whole number");
  CHECK(csv_error("all_gather,tpu-v5e,8x16,y,1024,fast\n") == "m.csv:2: time_s 'fast' is not a number");
  CHECK(csv_error("all_gather,tpu-v5e,8x16,y,1024,-1e-5\n") ==
        "m.csv:2: measured time -1e-05 s is not a positive time (at most 1e4 s)");
  CHECK(csv_error("all_gather,tpu-v5e,8x16,y,1024\n") == "m.csv:2: 5 cells, the header has 6 columns");
  CHECK(csv_error("") == "m.csv:2: no points (a header line, then one point per line)");
  CHECK_THROWS_WITH(parse_points_csv("kind,hardware,topology,axes,bytes\n", "m.csv"),
                    "m.csv:1: the header has no column 'time_s'");
  CHECK_THROWS_WITH(parse_points_csv("kind,hardware,topology,axes,bytes,time_s,when\n", "m.csv"),
                    Catch::StartsWith("m.csv:1: unknown column 'when'"));
  const auto system_error = [](const char* hardware, const char* topology, const char* axes) {
    MeasuredPoint p = point(OpKind::AllGather, topology, axes, 1024);
    p.hardware = std::string_view(hardware);
    p.pointer = "7";
    try {
      point_workload(p);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(system_error("tpu-v5e", "8x16", "z") == "synthetic:7: axis 'z' is not an axis of the 8x16 slice (x, y)");
  CHECK(system_error("tpu-v5e", "8xa", "x") == "synthetic:7: topology '8xa' is not a TPU slice shape like 8x16 or 4x4x4");
  CHECK_THAT(system_error("tpu-v5e", "8x8x8", "x"), Catch::StartsWith("synthetic:7: the point's system: "));
  CHECK_THAT(system_error("tpu-v9", "8x8", "x"), Catch::StartsWith("synthetic:7: unknown preset 'tpu-v9'"));
  CHECK(system_error("h100-dgx", "1", "node") ==
        "synthetic:7: axes 'node' on one node: a collective across nodes needs two or more");
}

TEST_CASE("is_measurements_file: meshsim's own suites and other JSON, not points, CSV or logs", "[measured]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "meshsim_is_measurements_test";
  std::filesystem::create_directories(dir);
  const auto file = [&](const std::string& name, const std::string& text) {
    const std::filesystem::path p = dir / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  };
  CHECK_FALSE(calibrate::is_measurements_file(file("points.json", R"( {"points": []})")));
  CHECK_FALSE(calibrate::is_measurements_file(file("points.csv", "kind,hardware,topology,axes,bytes,time_s\n")));
  CHECK_FALSE(calibrate::is_measurements_file(file("log.txt", "# nThread 1 nGpus 8\n")));
  CHECK(calibrate::is_measurements_file(file("suite.json", R"({"meshsim_measurements": 1, "gemm": []})")));
  CHECK(calibrate::is_measurements_file(file("both.json", R"({"meshsim_measurements": 1, "points": []})")));
  // Malformed JSON goes to the measurements reader, which names the error.
  CHECK(calibrate::is_measurements_file(file("broken.json", R"({"points": [)")));
  CHECK_THROWS_AS(calibrate::is_measurements_file((dir / "missing.json").string()), Error);
  std::filesystem::remove_all(dir);
}

// All-gathers over one axis length, and over two, with noise: the Ironwood
// guide's measurements are of this form (one 4-chip group, 256 KiB to 64 MiB).
std::vector<MeasuredPoint> noisy_all_gathers(const std::vector<std::pair<const char*, const char*>>& systems,
                                             double noise) {
  std::vector<MeasuredPoint> p = measure(systems, 18, 26, 1, noise);
  std::erase_if(p, [](const MeasuredPoint& x) { return x.kind != OpKind::AllGather; });
  return p;
}

TEST_CASE("fit_fabric: a hop latency one ring length leaves loose is kept, and two lengths fit it", "[fit_fabric]") {
  // One length (8 chips, 5 % of noise): the latency of a hop and the fixed cost
  // both add a near-constant; the fit puts the latency at 1.61 us +- 11 % (the
  // truth is 1.3), so it stays the preset's and the note says what to measure.
  const FabricFit one = fit_fabric(noisy_all_gathers({{"8x16", "x"}}, 0.05));
  REQUIRE(one.levels.size() == 1);
  INFO(one.levels[0].hop_latency_s << " +- " << one.levels[0].hop_latency_error_s);
  CHECK_FALSE(one.levels[0].hop_latency_fitted);
  CHECK(one.levels[0].hop_latency_s == 1e-6);  // tpu-v5e's
  for (const std::string& n : one.notes) UNSCOPED_INFO(n);
  CHECK(std::any_of(one.notes.begin(), one.notes.end(), [](const std::string& n) {
    return n.find("ici hop latency is kept at the preset's 1e-06 s") != std::string::npos &&
           n.find("measure the collective over two axis lengths") != std::string::npos;
  }));
  // Two lengths (4 and 16 chips) separate them: within 5 % of the truth, and
  // a third length's floor is predicted.
  const FabricFit two = fit_fabric(noisy_all_gathers({{"4x4", "x"}, {"16x16", "x"}}, 0.02));
  REQUIRE(two.levels.size() == 1);
  CHECK(two.levels[0].hop_latency_fitted);
  CHECK(two.levels[0].hop_latency_s == Approx(1.3e-6).epsilon(0.05));
  CHECK(two.levels[0].hop_latency_error_s < 0.1 * two.levels[0].hop_latency_s);
  CHECK(std::none_of(two.notes.begin(), two.notes.end(),
                     [](const std::string& n) { return n.find("hop latency") != std::string::npos; }));
  for (const MeasuredPoint& p : measure({{"8x8", "x"}}, 18, 18, 1, 0.0))
    if (p.kind == OpKind::AllGather) CHECK(simulate_point(p, two.levels) == Approx(p.time_s).epsilon(0.05));
}
