#include "verify/verifier.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

namespace meshsim::verify {

namespace {

using Matrix = Eigen::MatrixXd;
using workloads::Array;
using workloads::Op;
using workloads::Workload;

struct Range {
  std::uint64_t begin = 0, end = 0;
  std::uint64_t size() const { return end - begin; }
};

class Machine {
 public:
  explicit Machine(const Workload& w) : w_(w), torus_(w.make_torus()) {
    coords_ = mesh_coordinates(w, torus_);
    choose_sizes();
  }

  Report run() {
    Report r;
    for (const auto& [dim, size] : small_) r.dims.emplace_back(dim, size);
    declare_inputs();
    for (const Op& op : w_.ops) r.ops.push_back(execute(op));
    for (const auto& [name, value] : values_)
      if (!value.layout.partial_axes.empty() && name.find('.') == std::string::npos)
        r.problems.push_back(fmt::format("{} is left as unreduced partial sums", name));
    return r;
  }

 private:
  struct Value {
    Array layout;                // with small sizes
    Matrix global;               // the logical (reduced) value
    std::vector<Matrix> shards;  // per chip
    bool broken = false;         // an op that wrote it failed: its contents mean nothing
  };

  // ---------------------------------------------------------------- sizes
  void choose_sizes() {
    std::map<std::string, std::uint64_t> need;
    auto visit = [&](const Array& a) {
      for (std::size_t d = 0; d < a.dims.size(); ++d) {
        std::uint64_t parts = 1;
        for (int axis : a.shard_axes[d]) parts *= static_cast<std::uint64_t>(w_.mesh[static_cast<std::size_t>(axis)].size);
        std::uint64_t& n = need[a.dims[d]];
        n = n == 0 ? parts : std::lcm(n, parts);
      }
    };
    for (const Array& a : w_.arrays) visit(a);
    for (const Op& op : w_.ops) {
      for (const Array& a : op.inputs) visit(a);
      for (const Array& a : op.outputs) visit(a);
    }
    // Three elements per block: every shard a real matrix, every sum several terms.
    for (const auto& [dim, n] : need) small_[dim] = 3 * n;
  }

  Array shrink(const Array& a) const {
    Array s = a;
    for (std::size_t d = 0; d < s.dims.size(); ++d) s.sizes[d] = small_.at(s.dims[d]);
    return s;
  }

  // ---------------------------------------------------------------- layouts
  Range block(const Array& a, std::size_t dim, topology::ChipId chip) const {
    std::uint64_t index = 0, parts = 1;
    for (int axis : a.shard_axes[dim]) {
      const auto size = static_cast<std::uint64_t>(w_.mesh[static_cast<std::size_t>(axis)].size);
      index = index * size + static_cast<std::uint64_t>(coords_[chip][static_cast<std::size_t>(axis)]);
      parts *= size;
    }
    const std::uint64_t n = a.sizes[dim] / parts;
    return {index * n, (index + 1) * n};
  }

  std::vector<topology::ChipId> group(topology::ChipId chip, const std::vector<int>& axes) const {
    std::vector<topology::ChipId> out;
    for (topology::ChipId p = 0; p < torus_.num_chips(); ++p) {
      bool same = true;
      for (std::size_t m = 0; m < w_.mesh.size() && same; ++m)
        if (std::find(axes.begin(), axes.end(), static_cast<int>(m)) == axes.end())
          same = coords_[p][m] == coords_[chip][m];
      if (same) out.push_back(p);
    }
    return out;
  }

  // The chip's block of a 2-D (or 1-D, as a column) array.
  Matrix slice_of(const Matrix& global, const Array& a, topology::ChipId chip) const {
    const Range r = block(a, 0, chip);
    const Range c = a.dims.size() > 1 ? block(a, 1, chip) : Range{0, 1};
    return global.block(static_cast<Eigen::Index>(r.begin), static_cast<Eigen::Index>(c.begin),
                        static_cast<Eigen::Index>(r.size()), static_cast<Eigen::Index>(c.size()));
  }

  // Copies into `out` (the chip's block under `to`) every element that `from`'s
  // block of `source` holds. Returns how many elements it copied.
  static Eigen::Index copy_overlap(const Matrix& source, Range sr, Range sc, Matrix& out, Range dr, Range dc) {
    const std::uint64_t r0 = std::max(sr.begin, dr.begin), r1 = std::min(sr.end, dr.end);
    const std::uint64_t c0 = std::max(sc.begin, dc.begin), c1 = std::min(sc.end, dc.end);
    if (r0 >= r1 || c0 >= c1) return 0;
    const auto rows = static_cast<Eigen::Index>(r1 - r0), cols = static_cast<Eigen::Index>(c1 - c0);
    out.block(static_cast<Eigen::Index>(r0 - dr.begin), static_cast<Eigen::Index>(c0 - dc.begin), rows, cols) =
        source.block(static_cast<Eigen::Index>(r0 - sr.begin), static_cast<Eigen::Index>(c0 - sc.begin), rows, cols);
    return rows * cols;
  }

  Range rows_of(const Array& a, topology::ChipId c) const { return block(a, 0, c); }
  Range cols_of(const Array& a, topology::ChipId c) const { return a.dims.size() > 1 ? block(a, 1, c) : Range{0, 1}; }

  // ---------------------------------------------------------------- data
  // Arrays some op reads before any op writes them are the workload's inputs:
  // seeded random values, each chip holding its block.
  void declare_inputs() {
    std::mt19937_64 rng(20261201);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::set<std::string> written;
    for (const Op& op : w_.ops) {
      for (const Array& in : op.inputs) {
        if (values_.count(in.name) || written.count(in.name)) continue;
        const Array* declared = find_declared(in.name);
        if (!declared) continue;
        Value v;
        v.layout = shrink(*declared);
        const auto rows = static_cast<Eigen::Index>(v.layout.sizes[0]);
        const auto cols = static_cast<Eigen::Index>(v.layout.sizes.size() > 1 ? v.layout.sizes[1] : 1);
        v.global = Matrix(rows, cols);
        for (Eigen::Index i = 0; i < rows; ++i)
          for (Eigen::Index j = 0; j < cols; ++j) v.global(i, j) = dist(rng);
        for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) v.shards.push_back(slice_of(v.global, v.layout, c));
        values_[in.name] = std::move(v);
      }
      for (const Array& a : op.outputs) written.insert(a.name);
    }
  }

  // The declared version of an array: the first one in the workload's list.
  const Array* find_declared(const std::string& name) const {
    for (const Array& a : w_.declared)
      if (a.name == name) return &a;
    return nullptr;
  }

  // ---------------------------------------------------------------- ops
  OpCheck execute(const Op& op) {
    OpCheck check;
    check.op = op.name;
    if (op.inputs.empty() || op.outputs.empty()) {
      check.status = "no data";
      check.detail = "bytes only";
      return check;
    }
    for (const Array& in : op.inputs) {
      if (!values_.count(in.name)) {
        check.status = "FAILED";
        check.detail = fmt::format("reads {} before anything wrote it", in.name);
        return check;
      }
      if (values_.at(in.name).broken) {
        check.status = "not run";
        check.detail = fmt::format("its input {} comes from a failed op", in.name);
        values_[op.outputs[0].name].broken = true;
        return check;
      }
    }
    Value out;
    out.layout = shrink(op.outputs[0]);
    std::vector<int> axes = is_collective(op.kind) ? op.collective().mesh_axes : std::vector<int>{};
    switch (op.kind) {
      case OpKind::AllGather:
      case OpKind::AllToAll:
        out.global = values_.at(op.inputs[0].name).global;
        move_data(values_.at(op.inputs[0].name), out, axes, check);
        break;
      case OpKind::AllReduce:
      case OpKind::ReduceScatter: {
        const Value& in = values_.at(op.inputs[0].name);
        // Summing a complete (not partial) array over a group multiplies it.
        const bool was_partial = !in.layout.partial_axes.empty();
        out.global = in.global * (was_partial ? 1.0 : static_cast<double>(group(0, axes).size()));
        reduce(in, out, axes);
        break;
      }
      case OpKind::Matmul:
        multiply(op, out, check);
        break;
      case OpKind::Send:
      case OpKind::Elementwise:
        check.status = "no data";
        return check;
    }
    if (check.status == "FAILED") {
      out.broken = true;
      values_[op.outputs[0].name] = std::move(out);
      return check;
    }
    if (!out.layout.partial_axes.empty()) {
      check.status = "partial sums";
      check.detail = "checked after the reduction";
    } else {
      compare(out, check);
    }
    values_[op.outputs[0].name] = std::move(out);
    return check;
  }

  void move_data(const Value& in, Value& out, const std::vector<int>& axes, OpCheck& check) {
    for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) {
      const Range dr = rows_of(out.layout, c), dc = cols_of(out.layout, c);
      Matrix local = Matrix::Constant(static_cast<Eigen::Index>(dr.size()), static_cast<Eigen::Index>(dc.size()),
                                      std::numeric_limits<double>::quiet_NaN());
      for (topology::ChipId p : group(c, axes))
        copy_overlap(in.shards[p], rows_of(in.layout, p), cols_of(in.layout, p), local, dr, dc);
      if (local.hasNaN()) {
        check.status = "FAILED";
        check.detail = fmt::format("chip {} does not receive all of its block from its group", torus_.chip_name(c));
      }
      out.shards.push_back(std::move(local));
    }
  }

  void reduce(const Value& in, Value& out, const std::vector<int>& axes) {
    for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) {
      Matrix sum = Matrix::Zero(in.shards[c].rows(), in.shards[c].cols());
      for (topology::ChipId p : group(c, axes)) sum += in.shards[p];
      Matrix local(static_cast<Eigen::Index>(rows_of(out.layout, c).size()),
                   static_cast<Eigen::Index>(cols_of(out.layout, c).size()));
      copy_overlap(sum, rows_of(in.layout, c), cols_of(in.layout, c), local, rows_of(out.layout, c),
                   cols_of(out.layout, c));
      out.shards.push_back(std::move(local));
    }
  }

  // The chip's shard of `view` (a local slice of what it stores), as a matrix
  // oriented (non-contracting, contracting) for A or (contracting, other) for B.
  Matrix view_of(const Value& stored, const Array& view, topology::ChipId c, OpCheck& check) {
    const Array v = shrink(view);
    const Range dr = rows_of(v, c), dc = cols_of(v, c);
    Matrix local = Matrix::Constant(static_cast<Eigen::Index>(dr.size()), static_cast<Eigen::Index>(dc.size()),
                                    std::numeric_limits<double>::quiet_NaN());
    copy_overlap(stored.shards[c], rows_of(stored.layout, c), cols_of(stored.layout, c), local, dr, dc);
    if (local.hasNaN()) {
      check.status = "FAILED";
      check.detail = fmt::format("chip {} does not hold the {} block it multiplies", torus_.chip_name(c), view.name);
    }
    return local;
  }

  void multiply(const Op& op, Value& out, OpCheck& check) {
    const Array& av = op.inputs[0];
    const Array& bv = op.inputs[1];
    const Value& a = values_.at(av.name);
    const Value& b = values_.at(bv.name);
    const std::string& i = out.layout.dims[0];
    const bool a_t = av.dims[0] != i;               // A stored as [J, I]
    const bool b_t = bv.dims[0] == out.layout.dims[1];  // B stored as [K, J]
    const Matrix ag = a_t ? Matrix(a.global.transpose()) : a.global;
    const Matrix bg = b_t ? Matrix(b.global.transpose()) : b.global;
    out.global = ag * bg;
    for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) {
      Matrix al = view_of(a, av, c, check), bl = view_of(b, bv, c, check);
      if (a_t) al.transposeInPlace();
      if (b_t) bl.transposeInPlace();
      if (al.cols() != bl.rows()) {
        check.status = "FAILED";
        check.detail = fmt::format("chip {} multiplies shards that do not line up ({}x{} . {}x{})",
                                   torus_.chip_name(c), al.rows(), al.cols(), bl.rows(), bl.cols());
        out.shards.push_back(Matrix());
        continue;
      }
      const Matrix product = al * bl;
      // The computed block is (A's I rows) x (B's K cols); the output may keep a slice.
      const Array avs = shrink(av), bvs = shrink(bv);
      const Range pr = a_t ? cols_of(avs, c) : rows_of(avs, c);
      const Range pc = b_t ? rows_of(bvs, c) : cols_of(bvs, c);
      Matrix local = Matrix::Constant(static_cast<Eigen::Index>(rows_of(out.layout, c).size()),
                                      static_cast<Eigen::Index>(cols_of(out.layout, c).size()),
                                      std::numeric_limits<double>::quiet_NaN());
      copy_overlap(product, pr, pc, local, rows_of(out.layout, c), cols_of(out.layout, c));
      if (local.hasNaN()) {
        check.status = "FAILED";
        check.detail = fmt::format("chip {} did not compute the block it keeps", torus_.chip_name(c));
      }
      out.shards.push_back(std::move(local));
    }
  }

  void compare(const Value& v, OpCheck& check) const {
    double err = 0, scale = 0;
    for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) {
      const Matrix expected = slice_of(v.global, v.layout, c);
      if (expected.rows() != v.shards[c].rows() || expected.cols() != v.shards[c].cols()) {
        err = std::numeric_limits<double>::infinity();
        break;
      }
      err = std::max(err, (expected - v.shards[c]).cwiseAbs().maxCoeff());
      scale = std::max(scale, expected.cwiseAbs().maxCoeff());
    }
    check.max_error = err;
    check.scale = scale;
    const bool ok = std::isfinite(err) && err <= 1e-9 * std::max(1.0, scale);
    check.status = ok ? "ok" : "FAILED";
    if (!ok) check.detail = "shards differ from the unsharded result";
  }

  const Workload& w_;
  topology::Torus torus_;
  std::vector<std::vector<int>> coords_;
  std::map<std::string, std::uint64_t> small_;
  std::map<std::string, Value> values_;
};

}  // namespace

bool Report::ok() const {
  if (!problems.empty()) return false;
  return std::none_of(ops.begin(), ops.end(), [](const OpCheck& c) { return c.status == "FAILED"; });
}

Report verify(const Workload& w) { return Machine(w).run(); }

std::string format_report(const Report& r) {
  std::string out = "verification on small random data (Eigen, every chip its own shard); dims:";
  for (const auto& [dim, size] : r.dims) out += fmt::format(" {}={}", dim, size);
  out += "\n";
  std::size_t width = 20;
  for (const OpCheck& c : r.ops) width = std::max(width, c.op.size());
  for (const OpCheck& c : r.ops) {
    out += fmt::format("  {:<{}} {:<13}", c.op, width, c.status);
    if (c.status == "ok" || c.status == "FAILED") out += fmt::format(" max error {:.2e} (values up to {:.2e})", c.max_error, c.scale);
    if (!c.detail.empty() && c.status != "ok") out += "  " + c.detail;
    out += "\n";
  }
  for (const std::string& p : r.problems) out += "  problem: " + p + "\n";
  out += r.ok() ? "verification passed\n" : "verification FAILED\n";
  return out;
}

}  // namespace meshsim::verify
