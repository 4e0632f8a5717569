#include "calibrate/calibration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "base/error.hpp"
#include "base/text_file.hpp"
#include "workloads/json_cursor.hpp"

namespace meshsim::calibrate {

using workloads::Cursor;
using workloads::Json;

std::string_view level_name(Level l) {
  switch (l) {
    case Level::Nvlink:
      return "nvlink";
    case Level::Nic:
      return "nic";
    case Level::Ici:
      return "ici";
  }
  return "?";
}

const MatmulFit* Calibration::matmul_for(std::string_view dtype) const {
  for (const MatmulFit& m : matmul)
    if (m.dtype == dtype) return &m;
  return nullptr;
}

const LinkFit* Calibration::link_for(Level level) const {
  for (const LinkFit& l : links)
    if (l.level == level) return &l;
  return nullptr;
}

namespace {

// Limits: far beyond any real device, small enough that the simulator's integer
// picoseconds never overflow.
constexpr double kMaxSeconds = 1.0;        // a latency or launch time
constexpr double kMaxRate = 1e18;          // bytes/s or FLOP/s
constexpr double kMinRate = 1e3;

double nonnegative_seconds(const Cursor& c) {
  if (!c.raw().is_number()) c.fail("expected a number of seconds, got " + c.type_name());
  const double d = c.raw().get<double>();
  if (!(d >= 0)) c.fail(fmt::format("expected a non-negative number of seconds, got {}", d));
  if (d > kMaxSeconds) c.fail(fmt::format("{} s is too large (at most {} s)", d, kMaxSeconds));
  return d;
}

double rate(const Cursor& c) {
  const double d = c.as_positive_double(kMaxRate);
  if (d < kMinRate) c.fail(fmt::format("{} is too small (at least {})", d, kMinRate));
  return d;
}

FitQuality quality(const Cursor& parent) {
  FitQuality q;
  q.points = parent.at("points").as_positive_u64(std::uint64_t{1} << 40);
  for (const char* key : {"rms_relative_residual", "max_relative_residual"}) {
    const Cursor c = parent.at(key);
    if (!c.raw().is_number()) c.fail("expected a number, got " + c.type_name());
    const double d = c.raw().get<double>();
    if (!(d >= 0) || !std::isfinite(d)) c.fail(fmt::format("expected a non-negative number, got {}", d));
    (std::string_view(key) == "rms_relative_residual" ? q.rms_relative_residual : q.max_relative_residual) = d;
  }
  return q;
}

Level level(const Cursor& c) {
  const std::string s = c.as_string();
  for (Level l : {Level::Nvlink, Level::Nic, Level::Ici})
    if (level_name(l) == s) return l;
  c.fail(fmt::format("unknown fabric level '{}' (expected nvlink, nic or ici)", s));
}

std::string dtype(const Cursor& c) {
  const std::string s = c.as_string();
  for (const char* d : {"bf16", "fp16", "fp32", "int8", "fp8"})
    if (s == d) return s;
  c.fail(fmt::format("unknown dtype '{}' (expected bf16, fp16, fp32, int8 or fp8)", s));
}

std::string string_or_empty(const Cursor& parent, std::string_view key) {
  if (auto c = parent.find(key)) return c->as_string();
  return "";
}

double efficiency(const Cursor& c) {
  if (!c.raw().is_number()) c.fail("expected a number, got " + c.type_name());
  const double d = c.raw().get<double>();
  if (!(d > 0) || d > 1) c.fail(fmt::format("an efficiency is a fraction of the peak bandwidth, above 0 and at most 1 "
                                            "(got {})", d));
  return d;
}

// {"all_gather": seconds, ...}: the kinds of communication ops.
std::vector<std::pair<OpKind, double>> seconds_per_kind(const Cursor& c) {
  c.expect_object();
  std::vector<std::pair<OpKind, double>> out;
  for (const auto& [name, value] : c.members()) {
    const std::optional<OpKind> k = parse_kind(name);
    if (!k || is_local(*k))
      value.fail(fmt::format("unknown kind '{}' (expected all_gather, reduce_scatter, all_reduce, all_to_all or send)",
                             name));
    out.emplace_back(*k, nonnegative_seconds(value));
  }
  std::sort(out.begin(), out.end());
  return out;
}

LevelFit level_fit(const Cursor& f, const Calibration& cal) {
  f.only_keys({"level", "preset", "hop_latency_s", "hop_latency_fitted", "efficiency", "efficiency_fitted",
               "fixed_cost_s", "standard_error", "points", "rms_relative_residual", "max_relative_residual"});
  LevelFit l;
  const Cursor name = f.at("level");
  const std::optional<workloads::FabricLevel> level = workloads::parse_level(name.as_string());
  if (!level) name.fail(fmt::format("unknown fabric level '{}' (expected ici, dcn, nvlink or nic)", name.as_string()));
  l.level = *level;
  for (const LevelFit& other : cal.fabric)
    if (other.level == l.level) name.fail(fmt::format("a second fit for level {}", name.as_string()));
  for (const LinkFit& other : cal.links)
    if (level_name(other.level) == workloads::level_name(l.level))
      name.fail(fmt::format("level {} is given both in \"links\" and here: keep one", name.as_string()));
  l.preset = f.at("preset").as_string();
  l.hop_latency_s = nonnegative_seconds(f.at("hop_latency_s"));
  if (auto v = f.find("hop_latency_fitted")) l.hop_latency_fitted = v->as_bool();
  l.efficiency = efficiency(f.at("efficiency"));
  if (auto v = f.find("efficiency_fitted")) l.efficiency_fitted = v->as_bool();
  for (const auto& [kind, seconds] : seconds_per_kind(f.at("fixed_cost_s"))) l.fixed_cost.push_back({kind, seconds, 0});
  if (auto e = f.find("standard_error")) {
    e->only_keys({"hop_latency_s", "efficiency", "fixed_cost_s"});
    l.hop_latency_error_s = nonnegative_seconds(e->at("hop_latency_s"));
    const Cursor eff = e->at("efficiency");
    if (!eff.raw().is_number() || !(eff.raw().get<double>() >= 0))
      eff.fail("expected a non-negative number");
    l.efficiency_error = eff.raw().get<double>();
    const Cursor fixed = e->at("fixed_cost_s");
    for (const auto& [kind, seconds] : seconds_per_kind(fixed)) {
      const OpKind k = kind;
      auto it = std::find_if(l.fixed_cost.begin(), l.fixed_cost.end(), [k](const auto& x) { return x.kind == k; });
      if (it == l.fixed_cost.end())
        fixed.fail(fmt::format("an error for {}, which has no fixed cost above", kind_name(kind)));
      it->error_s = seconds;
    }
  }
  l.quality = quality(f);
  return l;
}

}  // namespace

Calibration parse_calibration(std::string_view text, std::string_view file_name) {
  Calibration cal;
  cal.file = std::string(file_name);
  const Json root = workloads::parse_json(text, cal.file);
  const Cursor top(root, "", cal.file);
  top.only_keys({"meshsim_calibration", "hardware", "hbm", "matmul", "links", "collectives", "fabric"});
  {
    const Cursor v = top.at("meshsim_calibration");
    if (v.as_int() != kCalibrationVersion)
      v.fail(fmt::format("unsupported calibration version {} (this meshsim reads version {})", v.as_int(),
                         kCalibrationVersion));
  }
  {
    const Cursor h = top.at("hardware");
    h.only_keys({"device", "gpus", "sms", "cuda_runtime", "nccl", "nccl_algo", "nccl_proto"});
    if (auto sms = h.find("sms")) cal.hardware.sms = static_cast<int>(sms->as_int_in(1, 1 << 16));
    cal.hardware.device = h.at("device").as_string();
    if (cal.hardware.device.empty()) h.at("device").fail("expected the device's name, got an empty string");
    if (auto g = h.find("gpus")) cal.hardware.gpus = static_cast<int>(g->as_int_in(1, 1 << 20));
    cal.hardware.cuda_runtime = string_or_empty(h, "cuda_runtime");
    cal.hardware.nccl = string_or_empty(h, "nccl");
    cal.hardware.nccl_algo = string_or_empty(h, "nccl_algo");
    cal.hardware.nccl_proto = string_or_empty(h, "nccl_proto");
  }
  if (auto h = top.find("hbm")) {
    h->only_keys({"latency_s", "bandwidth_bytes_per_s", "points", "rms_relative_residual", "max_relative_residual"});
    HbmFit f;
    f.latency_s = nonnegative_seconds(h->at("latency_s"));
    f.bandwidth_bytes_per_s = rate(h->at("bandwidth_bytes_per_s"));
    f.quality = quality(*h);
    cal.hbm = f;
  }
  if (auto list = top.find("matmul")) {
    if (!list->raw().is_array()) list->fail("expected an array of fits, got " + list->type_name());
    for (const Cursor& m : list->elements()) {
      m.only_keys({"dtype", "launch_s", "flops_per_s", "wave_flops_per_s", "sms", "hbm_bytes_per_s", "points",
                   "rms_relative_residual", "max_relative_residual"});
      MatmulFit f;
      f.dtype = dtype(m.at("dtype"));
      if (cal.matmul_for(f.dtype)) m.at("dtype").fail(fmt::format("a second fit for dtype {}", f.dtype));
      f.launch_s = nonnegative_seconds(m.at("launch_s"));
      f.flops_per_s = rate(m.at("flops_per_s"));
      f.hbm_bytes_per_s = rate(m.at("hbm_bytes_per_s"));
      if (auto sms = m.find("sms")) {
        f.sms = static_cast<int>(sms->as_int_in(1, 1 << 16));
        f.wave_flops_per_s = rate(m.at("wave_flops_per_s"));
      } else if (auto w = m.find("wave_flops_per_s")) {
        w->fail("a wave rate needs \"sms\", the streaming multiprocessors it was fitted with");
      }
      f.quality = quality(m);
      cal.matmul.push_back(f);
    }
  }
  if (auto list = top.find("links")) {
    if (!list->raw().is_array()) list->fail("expected an array of fits, got " + list->type_name());
    for (const Cursor& l : list->elements()) {
      l.only_keys({"level", "step_latency_s", "bandwidth_bytes_per_s", "points", "rms_relative_residual",
                   "max_relative_residual"});
      LinkFit f;
      f.level = level(l.at("level"));
      if (cal.link_for(f.level)) l.at("level").fail(fmt::format("a second fit for level {}", level_name(f.level)));
      f.step_latency_s = nonnegative_seconds(l.at("step_latency_s"));
      f.bandwidth_bytes_per_s = rate(l.at("bandwidth_bytes_per_s"));
      f.quality = quality(l);
      cal.links.push_back(f);
    }
  }
  if (auto list = top.find("collectives")) {
    if (!list->raw().is_array()) list->fail("expected an array of fits, got " + list->type_name());
    for (const Cursor& c : list->elements()) {
      c.only_keys({"kind", "level", "ranks", "step_latency_s", "bandwidth_bytes_per_s", "points",
                   "rms_relative_residual", "max_relative_residual"});
      CollectiveFit f;
      const Cursor kind = c.at("kind");
      const std::optional<OpKind> k = parse_kind(kind.as_string());
      if (!k || !is_collective(*k))
        kind.fail(fmt::format("unknown collective '{}' (expected all_gather, reduce_scatter, all_reduce or all_to_all)",
                              kind.as_string()));
      f.kind = *k;
      f.level = level(c.at("level"));
      f.ranks = static_cast<int>(c.at("ranks").as_int_in(2, 1 << 20));
      f.step_latency_s = nonnegative_seconds(c.at("step_latency_s"));
      f.bandwidth_bytes_per_s = rate(c.at("bandwidth_bytes_per_s"));
      f.quality = quality(c);
      cal.collectives.push_back(f);
    }
  }
  if (auto list = top.find("fabric")) {
    if (!list->raw().is_array()) list->fail("expected an array of fits, got " + list->type_name());
    for (const Cursor& f : list->elements()) cal.fabric.push_back(level_fit(f, cal));
  }
  return cal;
}

Calibration load_calibration(const std::string& path) {
  return parse_calibration(read_text_file(path, "calibration file"), path);
}

namespace {

void put_quality(Json& j, const FitQuality& q) {
  j["points"] = q.points;
  j["rms_relative_residual"] = q.rms_relative_residual;
  j["max_relative_residual"] = q.max_relative_residual;
}

}  // namespace

std::string format_calibration(const Calibration& c) {
  Json j;
  j["meshsim_calibration"] = kCalibrationVersion;
  Json& h = j["hardware"];
  h["device"] = c.hardware.device;
  if (c.hardware.gpus > 0) h["gpus"] = c.hardware.gpus;
  if (c.hardware.sms > 0) h["sms"] = c.hardware.sms;
  if (!c.hardware.cuda_runtime.empty()) h["cuda_runtime"] = c.hardware.cuda_runtime;
  if (!c.hardware.nccl.empty()) h["nccl"] = c.hardware.nccl;
  if (!c.hardware.nccl_algo.empty()) h["nccl_algo"] = c.hardware.nccl_algo;
  if (!c.hardware.nccl_proto.empty()) h["nccl_proto"] = c.hardware.nccl_proto;
  if (c.hbm) {
    Json& b = j["hbm"];
    b["latency_s"] = c.hbm->latency_s;
    b["bandwidth_bytes_per_s"] = c.hbm->bandwidth_bytes_per_s;
    put_quality(b, c.hbm->quality);
  }
  if (!c.matmul.empty()) {
    Json& list = j["matmul"] = Json::array();
    for (const MatmulFit& m : c.matmul) {
      Json e;
      e["dtype"] = m.dtype;
      e["launch_s"] = m.launch_s;
      e["flops_per_s"] = m.flops_per_s;
      e["hbm_bytes_per_s"] = m.hbm_bytes_per_s;
      if (m.sms > 0) {
        e["sms"] = m.sms;
        e["wave_flops_per_s"] = m.wave_flops_per_s;
      }
      put_quality(e, m.quality);
      list.push_back(e);
    }
  }
  if (!c.links.empty()) {
    Json& list = j["links"] = Json::array();
    for (const LinkFit& l : c.links) {
      Json e;
      e["level"] = level_name(l.level);
      e["step_latency_s"] = l.step_latency_s;
      e["bandwidth_bytes_per_s"] = l.bandwidth_bytes_per_s;
      put_quality(e, l.quality);
      list.push_back(e);
    }
  }
  if (!c.collectives.empty()) {
    Json& list = j["collectives"] = Json::array();
    for (const CollectiveFit& f : c.collectives) {
      Json e;
      e["kind"] = kind_name(f.kind);
      e["level"] = level_name(f.level);
      e["ranks"] = f.ranks;
      e["step_latency_s"] = f.step_latency_s;
      e["bandwidth_bytes_per_s"] = f.bandwidth_bytes_per_s;
      put_quality(e, f.quality);
      list.push_back(e);
    }
  }
  if (!c.fabric.empty()) {
    Json& list = j["fabric"] = Json::array();
    for (const LevelFit& l : c.fabric) {
      Json e;
      e["level"] = workloads::level_name(l.level);
      e["preset"] = l.preset;
      e["hop_latency_s"] = l.hop_latency_s;
      if (!l.hop_latency_fitted) e["hop_latency_fitted"] = false;
      e["efficiency"] = l.efficiency;
      if (!l.efficiency_fitted) e["efficiency_fitted"] = false;
      Json& fixed = e["fixed_cost_s"] = Json::object();
      Json& err = e["standard_error"];
      err["hop_latency_s"] = l.hop_latency_error_s;
      err["efficiency"] = l.efficiency_error;
      Json& fixed_err = err["fixed_cost_s"] = Json::object();
      for (const LevelFit::Fixed& f : l.fixed_cost) {
        fixed[std::string(kind_name(f.kind))] = f.seconds;
        fixed_err[std::string(kind_name(f.kind))] = f.error_s;
      }
      put_quality(e, l.quality);
      list.push_back(e);
    }
  }
  return j.dump(2) + "\n";
}

std::vector<std::string> apply_calibration(workloads::Workload& w, const Calibration& c) {
  std::vector<std::string> changes;
  workloads::Hardware& hw = w.hardware;
  if (c.hbm) {
    hw.chip.hbm_bandwidth_bytes_per_s = c.hbm->bandwidth_bytes_per_s;
    changes.push_back(fmt::format("HBM bandwidth {:.4g} B/s", c.hbm->bandwidth_bytes_per_s));
  }
  hw.calibrated_matmuls.clear();
  for (const MatmulFit& m : c.matmul) {
    hw.calibrated_matmuls.push_back({m.dtype, m.launch_s, m.flops_per_s, m.wave_flops_per_s, m.hbm_bytes_per_s, m.sms});
    changes.push_back(fmt::format("{} matmul: {:.3g} s + flops / {:.4g} FLOP/s + wave flops / {:.4g} FLOP/s ({} SMs) "
                                  "+ bytes / {:.4g} B/s",
                                  m.dtype, m.launch_s, m.flops_per_s, m.wave_flops_per_s, m.sms, m.hbm_bytes_per_s));
  }
  // A fitted bandwidth is the level's new peak, at full efficiency.
  auto set_link = [&](topology::LinkSpec& spec, std::uint64_t& peak, workloads::FabricLevel level, const LinkFit& f,
                      double latency_share) {
    spec.bandwidth_bytes_per_s = static_cast<std::uint64_t>(std::llround(f.bandwidth_bytes_per_s));
    peak = spec.bandwidth_bytes_per_s;
    hw.link_efficiency[static_cast<std::size_t>(level)] = 1.0;
    spec.latency = tick_from_seconds(f.step_latency_s * latency_share);
    changes.push_back(fmt::format("{} links: {:.4g} B/s, {:.4g} s per step", level_name(f.level),
                                  f.bandwidth_bytes_per_s, f.step_latency_s));
  };
  using workloads::FabricLevel;
  for (const LinkFit& f : c.links) {
    if (hw.gpu && f.level == Level::Nvlink) set_link(hw.nvlink, hw.peak.nvlink, FabricLevel::Nvlink, f, 0.5);
    if (hw.gpu && f.level == Level::Nic) set_link(hw.nic, hw.peak.nic, FabricLevel::Nic, f, 0.5);
    if (!hw.gpu && f.level == Level::Ici) set_link(hw.ici, hw.peak.ici, FabricLevel::Ici, f, 1.0);
  }
  for (const LevelFit& f : c.fabric) {
    const bool applies = hw.gpu ? f.level == FabricLevel::Nvlink || f.level == FabricLevel::Nic
                                : f.level == FabricLevel::Ici || f.level == FabricLevel::Dcn;
    if (!applies) continue;
    const Tick latency = tick_from_seconds(f.hop_latency_s);
    switch (f.level) {
      case FabricLevel::Ici:
        hw.ici.latency = latency;
        break;
      case FabricLevel::Dcn:
        hw.dcn.latency = latency;
        break;
      case FabricLevel::Nvlink:
        hw.nvlink.latency = latency;
        break;
      case FabricLevel::Nic:
        hw.nic.latency = latency;
        hw.spine.latency = latency;
        break;
    }
    const auto index = static_cast<std::size_t>(f.level);
    hw.link_efficiency[index] = f.efficiency;
    std::vector<std::string> fixed;
    for (const LevelFit::Fixed& k : f.fixed_cost) {
      hw.fixed_cost[index][static_cast<std::size_t>(k.kind)] = tick_from_seconds(k.seconds);
      fixed.push_back(fmt::format("{} {:.4g} s", kind_name(k.kind), k.seconds));
    }
    changes.push_back(fmt::format("{} links: {:.4g} s per hop, {:.4g} of peak bandwidth (fitted on {}); fixed cost {}",
                                  workloads::level_name(f.level), f.hop_latency_s, f.efficiency, f.preset,
                                  fixed.empty() ? std::string("none") : fmt::format("{}", fmt::join(fixed, ", "))));
  }
  workloads::apply_link_efficiency(hw);
  return changes;
}

}  // namespace meshsim::calibrate
