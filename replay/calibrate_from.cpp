#include "replay/calibrate_from.hpp"

#include <fmt/format.h>

#include <iterator>

#include "base/error.hpp"
#include "calibrate/fit_fabric.hpp"
#include "topology/gpu_preset.hpp"

namespace meshsim::replay {

std::vector<calibrate::MeasuredPoint> suite_points(const Measurements& m, const std::string& hardware) {
  if (m.collectives.empty()) return {};  // one GPU's suite: no preset needed
  const std::string preset = hardware.empty() ? preset_for_device(m.hardware.device) : hardware;
  if (preset.empty())
    throw Error(fmt::format("{}: no GPU preset for the device '{}': name it with --hardware", m.file, m.hardware.device));
  std::vector<calibrate::MeasuredPoint> out;
  for (std::size_t i = 0; i < m.collectives.size(); ++i) {
    const CollectiveMeasurement& c = m.collectives[i];
    calibrate::MeasuredPoint p;
    p.kind = c.kind;
    p.hardware = preset;
    p.topology = std::string("1");  // (a move: GCC 12 -O3 warns falsely of -Wrestrict on assigning the literal)
    p.axes = std::string("all");
    p.bytes = c.bytes;
    p.time_s = c.time.median_s;
    p.spread_s = c.time.max_s - c.time.min_s;
    p.file = m.file;
    p.pointer = fmt::format("/collectives/{}", i);
    const topology::GpuPreset* g = topology::find_gpu_preset(preset);
    if (g && c.ranks != g->gpus_per_node)
      throw InputError(m.file, p.pointer,
                       fmt::format("{} ranks; meshsim models whole nodes of {} GPUs ({}): measure with all of them",
                                   c.ranks, g->gpus_per_node, g->name));
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

// Suites of one GPU: their GEMMs and copies, and no fabric.
std::string local_report(const calibrate::Calibration& local) {
  if (local.matmul.empty() && !local.hbm)
    throw Error("calibrate: the files hold nothing to fit: no collective, GEMM or HBM copy");
  const auto quality = [](const calibrate::FitQuality& q) {
    return fmt::format("rms residual {:.2f} %, max {:.2f} % over {} points\n", 100 * q.rms_relative_residual,
                       100 * q.max_relative_residual, q.points);
  };
  std::string out;
  for (const calibrate::MatmulFit& f : local.matmul) out += fmt::format("fitted {} GEMMs: {}", f.dtype, quality(f.quality));
  if (local.hbm) out += "fitted HBM copies: " + quality(local.hbm->quality);
  return out + "no collective: the fabric keeps the preset's terms\n";
}

}  // namespace

FittedFiles calibrate_from(const std::vector<std::string>& files, const calibrate::NcclTestsContext& context) {
  std::vector<calibrate::MeasuredPoint> points;
  // meshsim's own suites also bring GEMM and HBM points: fitted as calibrate fits them.
  FittedFiles out;
  calibrate::Calibration& cal = out.calibration;
  std::vector<std::string> not_fitted;
  for (const std::string& path : files) {
    std::vector<calibrate::MeasuredPoint> more;
    if (calibrate::is_measurements_file(path)) {
      const Measurements m = load_measurements(path);
      if (!m.suite)
        throw Error(path + ": a replay's measurements are op times of a workload: compare them with meshsim compare; "
                           "calibrate --from reads suites (calibrate --measurements)");
      more = suite_points(m, context.hardware);
      const calibrate::Calibration fitted = fit_suite(m, not_fitted);
      cal.matmul.insert(cal.matmul.end(), fitted.matmul.begin(), fitted.matmul.end());
      if (fitted.hbm) cal.hbm = fitted.hbm;
      cal.hardware = fitted.hardware;
    } else {
      more = calibrate::load_points(path, context);
    }
    points.insert(points.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  if (points.empty()) {
    out.report = local_report(cal);
  } else {
    calibrate::FabricFit fit;
    try {
      fit = calibrate::fit_fabric(points);
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      throw Error(std::string("calibrate: ") + e.what());  // what the points cannot determine
    }
    out.report = calibrate::format_fabric_fit(fit, points);
    if (cal.hardware.device.empty()) cal.hardware.device = points.front().hardware;
    cal.fabric = fit.levels;
  }
  for (const std::string& n : not_fitted) out.report += "not fitted: " + n + "\n";
  return out;
}

}  // namespace meshsim::replay
