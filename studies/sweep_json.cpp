// The sweep's JSON writer (docs/SWEEPS.md): the points and, in each, its run's
// --json document as format_json wrote it.
#include <nlohmann/json.hpp>

#include <string>

#include "base/error.hpp"
#include "studies/sweep.hpp"

namespace meshsim::studies {

namespace {

using Json = nlohmann::ordered_json;

// A run's place in the document until its text goes there: a string no other
// value of the document can be (a control character and the point's place).
std::string placeholder(std::size_t i) { return "\x01run " + std::to_string(i); }

}  // namespace

std::string format_sweep_json(const Sweep& s, const std::vector<PointResult>& results) {
  Json j;
  j["format"] = "meshsim-sweep";
  j["format_version"] = 1;
  j["workload"] = s.spec().workload.empty() ? Json(nullptr) : Json(s.spec().workload);
  Json points = Json::array();
  for (std::size_t i = 0; i < results.size(); ++i) {
    const PointResult& r = results[i];
    Json p;
    p["point"] = r.point.index;
    p["preset"] = r.point.preset.empty() ? Json(nullptr) : Json(r.point.preset);
    p["mesh"] = r.point.mesh.empty() ? Json(nullptr) : Json(r.point.mesh);
    p["algorithm"] = r.point.algorithm.empty() ? Json(nullptr) : Json(r.point.algorithm);
    p["bytes"] = r.point.bytes ? Json(*r.point.bytes) : Json(nullptr);
    if (r.point.calibrated) p["calibrated"] = true;
    p["run"] = placeholder(i);
    points.push_back(std::move(p));
  }
  j["points"] = std::move(points);
  std::string text = j.dump(2) + "\n";
  // Each run's document in its place, indented as the document nests it: its
  // lines 6 spaces deeper (the run object is a member of a point, in the
  // "points" array of the root).
  std::size_t from = text.find("\"points\": [");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string key = "\"run\": " + Json(placeholder(i)).dump();
    const std::size_t at = text.find(key, from);
    MESHSIM_ASSERT(at != std::string::npos, "every point's placeholder is in the document");
    std::string run = results[i].run;
    if (!run.empty() && run.back() == '\n') run.pop_back();
    std::string nested;
    for (char c : run) nested += c == '\n' ? std::string("\n      ") : std::string(1, c);
    text.replace(at, key.size(), "\"run\": " + nested);
    from = at + nested.size();
  }
  return text;
}

}  // namespace meshsim::studies
