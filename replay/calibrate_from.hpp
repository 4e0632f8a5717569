#pragma once
// meshsim calibrate --from (docs/CALIBRATION.md): the fabric terms fitted to
// measurements made elsewhere, by simulating them; no GPU needed.
#include <string>
#include <vector>

#include "calibrate/calibration.hpp"
#include "calibrate/measured.hpp"
#include "replay/hardware.hpp"

namespace meshsim::replay {

// The collectives of a suite (calibrate --measurements) as points on one node's
// GPUs: the preset is `hardware`, else the one matching the measured device
// (Error when none does). InputError when a sweep did not use every GPU of a node.
std::vector<calibrate::MeasuredPoint> suite_points(const Measurements& m, const std::string& hardware);

// The files' points (points CSV or JSON, nccl-tests logs read with `context`,
// meshsim's suites, whose GEMMs and HBM copies are fitted as calibrate fits them)
// fitted; `report` says what was fitted and how well, and ends with what could not
// be. The calibration's `file` is left for the caller. Errors are one line.
struct FittedFiles {
  calibrate::Calibration calibration;
  std::string report;
};
FittedFiles calibrate_from(const std::vector<std::string>& files, const calibrate::NcclTestsContext& context);

}  // namespace meshsim::replay
