// Sharded matmuls C = A . B and MLP blocks, lowered to collectives plus local
// matmuls following the cheat sheet (../shared/seeds/000_*.txt):
//   case 1  no input split on the contracting dim J: no communication;
//   case 2  one input split on J: all-gather it, or slice the other input locally
//           and reduce the partial sums of C, whichever moves less;
//   case 3  both split on J along the same axes: partial sums, then all-reduce
//           (or reduce-scatter when the requested output stays split on them);
//   case 4  an axis splits I of A and K of B: C[I_X, K_X] is illegal; all-gather
//           the smaller input along it first.
// J split on different axes in A and B is resharded (gather one side, slice the
// other). Requested output layouts are reached by free local slices (pushed into
// the inputs, so less is computed), reduce-scatters, all-to-alls or all-gathers.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/error.hpp"
#include "workloads/lowering.hpp"

namespace meshsim::workloads::detail {

namespace {

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::vector<int> common(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  for (int x : a)
    if (has(b, x)) out.push_back(x);
  return out;
}

// The shortest suffix of `axes` that contains every axis of `wanted`.
std::vector<int> minor_suffix_with(const std::vector<int>& axes, const std::vector<int>& wanted) {
  std::size_t from = axes.size();
  for (std::size_t i = 0; i < axes.size(); ++i)
    if (has(wanted, axes[i])) {
      from = i;
      break;
    }
  return {axes.begin() + static_cast<std::ptrdiff_t>(from), axes.end()};
}

bool used_by(const Array& a, int axis) {
  for (const auto& axes : a.shard_axes)
    if (has(axes, axis)) return true;
  return false;
}

}  // namespace

// One matmul step: a matmul op, or one of an MLP block's two.
struct MatmulStep {
  std::string name;
  std::string a, b, out;
  std::optional<std::vector<std::vector<int>>> requested;  // layout of C over (I, K)
  SourceRef where;                                         // the op, for errors
  SourceRef a_at, b_at;                                    // its operands (an MLP's: the op)
  SourceRef requested_at;                                  // the out_sharding value, if any
  std::vector<std::uint32_t> after;
};

class MatmulLowering {
 public:
  MatmulLowering(Lowerer& lowerer, const MatmulStep& spec) : L_(lowerer), w_(lowerer.workload()), s_(spec) {}

  void run() {
    load();
    explain_.name = s_.name;
    explain_.a_before = sharding_string(w_, a_);
    explain_.b_before = sharding_string(w_, b_);
    resolve_illegal_output();
    resolve_contracting();
    const std::vector<int> partial = jstar_;
    multiply();
    if (!partial.empty()) reduce(partial);
    reshard_output();
    explain_.c_after = sharding_string(w_, w_.arrays[output_index()]);
    explain_.seed_case = case_;
    w_.explanations.push_back(std::move(explain_));
  }

 private:
  // ---------------------------------------------------------------- operands
  void load() {
    a_ = L_.array(s_.a, s_.a_at);
    b_ = L_.array(s_.b, s_.b_at);
    for (const Array* x : {&a_, &b_}) {
      const SourceRef& f = x == &a_ ? s_.a_at : s_.b_at;
      if (x->dims.size() != 2)
        f.fail(fmt::format("a matmul multiplies 2-D arrays; {} has {} dimensions", x->name, x->dims.size()));
      if (!x->partial_axes.empty())
        f.fail(fmt::format("{} holds unreduced partial sums over {}; reduce them first", sharding_string(w_, *x),
                           fmt::join(axis_names(w_, x->partial_axes), ",")));
    }
    std::vector<std::string> shared;
    for (const std::string& d : a_.dims)
      if (b_.dim_index(d) >= 0) shared.push_back(d);
    if (shared.size() != 1)
      s_.where.fail(fmt::format("{} and {} must share exactly one dimension (the contracting one); they share {}",
                                 sharding_string(w_, a_), sharding_string(w_, b_),
                                 shared.empty() ? std::string("none") : fmt::format("{}", fmt::join(shared, ", "))));
    j_ = shared[0];
    aj_ = a_.dim_index(j_);
    ai_ = 1 - aj_;
    bj_ = b_.dim_index(j_);
    bk_ = 1 - bj_;
    i_ = a_.dims[idx(ai_)];
    k_ = b_.dims[idx(bk_)];
    if (i_ == k_)
      s_.where.fail(fmt::format("C = {} . {} would have two dimensions named {}; rename one", a_.name, b_.name, i_));
    if (a_.sizes[idx(aj_)] != b_.sizes[idx(bj_)])
      s_.where.fail(fmt::format("the contracting dimension {} has {} elements in {} but {} in {}", j_,
                                 a_.sizes[idx(aj_)], a_.name, b_.sizes[idx(bj_)], b_.name));
    if (a_.dtype != b_.dtype)
      s_.where.fail(fmt::format("{} is {} but {} is {}; a matmul needs one dtype", a_.name, a_.dtype, b_.name, b_.dtype));
    const unsigned __int128 c_bytes =
        static_cast<unsigned __int128>(a_.sizes[idx(ai_)]) * b_.sizes[idx(bk_)] * a_.element_bytes;
    if (c_bytes > kMaxArrayBytes)
      s_.where.fail(fmt::format("the output {}[{}, {}] would be larger than 2^62 bytes", s_.out, i_, k_));
    if (s_.requested) {
      // The requested layout must divide C's real sizes (an MLP asks for its
      // input's layout on its output, which need not fit).
      Array c = natural_c({});
      c.shard_axes = *s_.requested;
      check_layout(w_, c, s_.requested_at);
    }
  }

  static std::size_t idx(int i) { return static_cast<std::size_t>(i); }
  std::vector<int>& a_i() { return a_.shard_axes[idx(ai_)]; }
  std::vector<int>& a_j() { return a_.shard_axes[idx(aj_)]; }
  std::vector<int>& b_j() { return b_.shard_axes[idx(bj_)]; }
  std::vector<int>& b_k() { return b_.shard_axes[idx(bk_)]; }
  std::string names(const std::vector<int>& axes) const { return fmt::format("{}", fmt::join(axis_names(w_, axes), "")); }
  std::string bytes_text(std::uint64_t v) const { return fmt::format("{} bytes", v); }

  // ---------------------------------------------------------------- emitting
  // All-gathers `axes` (a minor suffix of one dim or several) of x into a copy.
  Array gather(const Array& x, const std::vector<int>& axes, const std::string& label) {
    Array out = x;
    out.name = s_.name + "." + x.name;
    for (auto& dim_axes : out.shard_axes) std::erase_if(dim_axes, [&](int a) { return has(axes, a); });
    emit_collective(OpKind::AllGather, x, out, axes, label);
    return out;
  }

  std::uint32_t emit_collective(OpKind kind, const Array& in, const Array& out, const std::vector<int>& axes,
                                const std::string& label) {
    Op op = collective_step(w_, kind, s_.name + "." + label, s_.name, s_.where.pointer, in, out, axes);
    const std::uint32_t id = L_.emit(std::move(op), s_.after);  // every step waits, not just the first
    explain_.ops.push_back(id);
    last_ = id;
    return id;
  }

  // ---------------------------------------------------------------- case 4
  void resolve_illegal_output() {
    const std::vector<int> clash = common(a_i(), b_k());
    if (clash.empty()) return;
    case_ = 4;
    const std::vector<int> ga = minor_suffix_with(a_i(), clash), gb = minor_suffix_with(b_k(), clash);
    const std::uint64_t va = group_bytes(w_, a_, ga), vb = group_bytes(w_, b_, gb);
    const bool gather_a = va <= vb;
    line(fmt::format("case 4: mesh axis {} splits {} of {} and {} of {}, so the output C[{}_{}, {}_{}] would use one "
                     "axis for two dimensions, which is not a legal layout (the chip at {} = x could only form the "
                     "diagonal block C[x, x]).",
                     names(clash), i_, a_.name, k_, b_.name, i_, names(clash), k_, names(clash), names(clash)));
    line(fmt::format("fix: all-gather the smaller input along {}: {} ({}) rather than {} ({}); this frees the axis. "
                     "Better: avoid it by construction, putting {} and {} on different axes.",
                     names(gather_a ? ga : gb), gather_a ? a_.name : b_.name, bytes_text(gather_a ? va : vb),
                     gather_a ? b_.name : a_.name, bytes_text(gather_a ? vb : va), i_, k_));
    if (gather_a)
      a_ = gather(a_, ga, "gather_" + a_.name);
    else
      b_ = gather(b_, gb, "gather_" + b_.name);
  }

  // ---------------------------------------------------------------- J
  // Bytes a reduction of C's partial sums over `axes` moves (cheat sheet's
  // bandwidth terms in units of V/W: reduce-scatter V, all-reduce 2V).
  std::uint64_t reduce_cost(const std::vector<int>& axes) {
    const Array c = natural_c(axes);
    const std::uint64_t v = group_bytes(w_, c, axes);
    return can_reduce_scatter(c, axes) ? v : 2 * v;
  }

  Array natural_c(const std::vector<int>& partial) const {
    Array c;
    c.name = s_.out;
    c.dims = {i_, k_};
    c.sizes = {a_.sizes[idx(ai_)], b_.sizes[idx(bk_)]};
    c.dtype = a_.dtype;
    c.element_bytes = a_.element_bytes;
    c.shard_axes = {a_.shard_axes[idx(ai_)], b_.shard_axes[idx(bk_)]};
    c.partial_axes = partial;
    return c;
  }

  // The requested output keeps `axes` as the minor split of one dimension whose
  // other axes C already has: a reduce-scatter onto that dimension gives it.
  std::optional<std::size_t> reduce_scatter_dim(const Array& c, const std::vector<int>& axes) const {
    if (!s_.requested) return std::nullopt;
    for (std::size_t d = 0; d < 2; ++d) {
      const auto& want = (*s_.requested)[d];
      if (want.size() < axes.size()) continue;
      const std::vector<int> head(want.begin(), want.end() - static_cast<std::ptrdiff_t>(axes.size()));
      const std::vector<int> tail(want.end() - static_cast<std::ptrdiff_t>(axes.size()), want.end());
      if (tail == axes && head == c.shard_axes[d]) return d;
    }
    return std::nullopt;
  }
  bool can_reduce_scatter(const Array& c, const std::vector<int>& axes) const {
    return reduce_scatter_dim(c, axes).has_value();
  }

  void resolve_contracting() {
    const std::vector<int> ja = a_j(), jb = b_j();
    if (ja == jb) {
      jstar_ = ja;
      if (case_ == 0) case_ = ja.empty() ? 1 : 3;
      if (ja.empty())
        line(fmt::format("case 1: neither input is split on the contracting dimension {}: every chip multiplies its "
                         "local shards, no communication.",
                         j_));
      else
        line(fmt::format("case 3: both inputs are split on {} along {}: every chip multiplies its local shards into "
                         "partial sums of C over {}, which must be summed.",
                         j_, names(ja), names(ja)));
      return;
    }
    if (case_ == 0) case_ = ja.empty() || jb.empty() ? 2 : 0;
    // Options: gather every split of J; or keep one side's split and slice the
    // other side to match (reducing C's partial sums afterwards).
    struct Option {
      const char* what;
      std::uint64_t cost;
      int keep;  // 0: gather both, 1: keep A's split, 2: keep B's split
    };
    std::vector<Option> options;
    const std::uint64_t va = ja.empty() ? 0 : group_bytes(w_, a_, ja);
    const std::uint64_t vb = jb.empty() ? 0 : group_bytes(w_, b_, jb);
    options.push_back({"gather", va + vb, 0});
    auto slice_ok = [&](const Array& x, int other_dim, const std::vector<int>& axes) {
      for (int axis : axes)
        if (has(x.shard_axes[idx(other_dim)], axis)) return false;
      return true;
    };
    if (!ja.empty() && slice_ok(b_, bk_, ja)) options.push_back({"keep A", vb + reduce_cost(ja), 1});
    if (!jb.empty() && slice_ok(a_, ai_, jb)) options.push_back({"keep B", va + reduce_cost(jb), 2});
    const Option best = *std::min_element(options.begin(), options.end(),
                                          [](const Option& x, const Option& y) { return x.cost < y.cost; });
    if (ja.empty() || jb.empty()) {
      const Array& split = ja.empty() ? b_ : a_;
      const std::vector<int>& axes = ja.empty() ? jb : ja;
      line(fmt::format("case 2: only {} is split on the contracting dimension {} (along {}).", split.name, j_,
                       names(axes)));
      for (const Option& o : options)
        line(o.keep == 0 ? fmt::format("  option: all-gather {} along {}: moves {}.", split.name, names(axes),
                                       bytes_text(o.cost))
                         : fmt::format("  option: slice {} locally along {} and reduce the partial sums of C: moves "
                                       "{} ({}).",
                                       ja.empty() ? a_.name : b_.name, names(axes), bytes_text(o.cost),
                                       can_reduce_scatter(natural_c(axes), axes) ? "reduce-scatter" : "all-reduce"));
    } else {
      line(fmt::format("the contracting dimension {} is split along {} in {} but along {} in {}: reshard.", j_,
                       names(ja), a_.name, names(jb), b_.name));
      for (const Option& o : options)
        line(o.keep == 0 ? fmt::format("  option: all-gather both splits: moves {}.", bytes_text(o.cost))
                         : fmt::format("  option: keep {}'s split along {}, gather and slice the other: moves {}.",
                                       o.keep == 1 ? a_.name : b_.name, names(o.keep == 1 ? ja : jb),
                                       bytes_text(o.cost)));
    }
    line(fmt::format("chosen: the option that moves the least ({}).", bytes_text(best.cost)));
    if (best.keep != 1 && !ja.empty()) a_ = gather(a_, ja, "gather_" + a_.name);
    if (best.keep != 2 && !jb.empty()) b_ = gather(b_, jb, "gather_" + b_.name);
    if (best.keep == 1) b_j() = ja;  // free local slice of B's replicated J
    if (best.keep == 2) a_j() = jb;
    jstar_ = best.keep == 1 ? ja : best.keep == 2 ? jb : std::vector<int>{};
  }

  // ---------------------------------------------------------------- local matmul
  void multiply() {
    // Requested splits of I and K that C will not get otherwise: slice the inputs
    // locally first (free), so each chip computes only what it keeps.
    if (s_.requested) {
      auto push = [&](Array& x, int dim, const std::vector<int>& want) {
        auto& have = x.shard_axes[idx(dim)];
        if (want.size() <= have.size() || !std::equal(have.begin(), have.end(), want.begin())) return;
        for (std::size_t t = have.size(); t < want.size(); ++t)
          if (used_by(a_, want[t]) || used_by(b_, want[t]) || has(jstar_, want[t])) return;
        const std::vector<int> extra(want.begin() + static_cast<std::ptrdiff_t>(have.size()), want.end());
        have = want;
        line(fmt::format("the requested output splits {} along {}: each chip slices its {} locally first (free).",
                         x.dims[idx(dim)], names(extra), x.name));
      };
      push(a_, ai_, (*s_.requested)[0]);
      push(b_, bk_, (*s_.requested)[1]);
    }
    Array c = natural_c(jstar_);
    Op op(OpKind::Matmul);
    op.name = s_.name + ".matmul";
    op.group = s_.name;
    op.pointer = s_.where.pointer;
    op.inputs = {a_, b_};
    op.outputs = {c};
    MatmulOp& mm = op.matmul();
    mm.m = a_.sizes[idx(ai_)] / axes_product(w_, a_i());
    mm.k = a_.sizes[idx(aj_)] / axes_product(w_, jstar_);
    mm.n = b_.sizes[idx(bk_)] / axes_product(w_, b_k());
    line(fmt::format("local matmul on every chip: {} . {} -> {} ({} x {} x {} per chip){}.", sharding_string(w_, a_),
                     sharding_string(w_, b_), sharding_string(w_, c), mm.m, mm.k, mm.n,
                     jstar_.empty() ? "" : fmt::format(", partial sums over {}", names(jstar_))));
    const std::uint32_t id = L_.emit(std::move(op), s_.after);  // every step waits, not just the first
    explain_.ops.push_back(id);
    last_ = id;
  }

  std::size_t output_index() const {
    for (std::size_t i = w_.arrays.size(); i-- > 0;)
      if (w_.arrays[i].name == s_.out) return i;
    MESHSIM_ASSERT(false, "matmul output missing");
    return 0;
  }
  const Array& current_c() const { return w_.arrays[output_index()]; }

  // ---------------------------------------------------------------- reductions
  void reduce(const std::vector<int>& axes) {
    const Array c = current_c();
    Array out = c;
    out.partial_axes.clear();
    const std::uint64_t v = group_bytes(w_, c, axes);
    if (const auto d = reduce_scatter_dim(c, axes)) {
      out.shard_axes[*d].insert(out.shard_axes[*d].end(), axes.begin(), axes.end());
      line(fmt::format("reduce-scatter the partial sums over {} onto {} (the requested output stays split): V = {}, "
                       "cost V/(W N_axes).",
                       names(axes), c.dims[*d], bytes_text(v)));
      emit_collective(OpKind::ReduceScatter, c, out, axes, "reduce_scatter");
    } else {
      line(fmt::format("all-reduce the partial sums over {}: V = {}, cost 2V/(W N_axes).", names(axes),
                       bytes_text(v)));
      emit_collective(OpKind::AllReduce, c, out, axes, "all_reduce");
    }
  }

  // ---------------------------------------------------------------- output layout
  void reshard_output() {
    if (!s_.requested) return;
    const Array c = current_c();
    const auto& want = *s_.requested;
    if (c.shard_axes == want) return;
    Array out = c;
    out.shard_axes = want;
    check_layout(w_, out, s_.requested_at);
    // Axes C has but the request places elsewhere or nowhere.
    std::vector<int> removed, moved;
    int from = -1, to = -1;
    for (std::size_t d = 0; d < 2; ++d)
      for (int axis : c.shard_axes[d]) {
        int target = -1;
        for (std::size_t e = 0; e < 2; ++e)
          if (has(want[e], axis)) target = static_cast<int>(e);
        if (target < 0) {
          removed.push_back(axis);
        } else if (target != static_cast<int>(d)) {
          moved.push_back(axis);
          from = static_cast<int>(d);
          to = target;
        }
      }
    const bool only_moves = removed.empty() && !moved.empty() &&
                            minor_suffix_with(c.shard_axes[idx(from)], moved) == moved &&
                            want[idx(to)].size() >= moved.size() &&
                            std::equal(moved.begin(), moved.end(), want[idx(to)].end() - static_cast<std::ptrdiff_t>(moved.size()));
    if (only_moves) {
      line(fmt::format("all-to-all over {} moves the split from {} to {} as requested: V = {}, cost V/(4W) on a ring.",
                       names(moved), c.dims[idx(from)], c.dims[idx(to)], bytes_text(group_bytes(w_, c, moved))));
      emit_collective(OpKind::AllToAll, c, out, moved, "all_to_all");
      return;
    }
    // Gather every axis that must go (with the minor axes after it), then keep the
    // requested slices locally.
    std::vector<int> go = removed;
    go.insert(go.end(), moved.begin(), moved.end());
    std::vector<int> gathered;
    for (std::size_t d = 0; d < 2; ++d) {
      std::vector<int> suffix = minor_suffix_with(c.shard_axes[d], go);
      // What stays must be the start of the requested split, or gather it all.
      const std::vector<int> stays(c.shard_axes[d].begin(), c.shard_axes[d].end() - static_cast<std::ptrdiff_t>(suffix.size()));
      if (want[d].size() < stays.size() || !std::equal(stays.begin(), stays.end(), want[d].begin()))
        suffix = c.shard_axes[d];
      gathered.insert(gathered.end(), suffix.begin(), suffix.end());
    }
    if (gathered.empty()) {
      // Only new splits: a free local slice of the last op's result.
      Op& last = w_.ops[last_];
      last.outputs = {out};
      last.sharding_after = sharding_string(w_, out);
      w_.arrays[output_index()] = out;
      line(fmt::format("slice the result locally to the requested {} (free).", sharding_string(w_, out)));
      return;
    }
    line(fmt::format("all-gather {} along {} to reach the requested {}: V = {}, cost V/(W N_axes).", s_.out,
                     names(gathered), sharding_string(w_, out), bytes_text(group_bytes(w_, c, gathered))));
    emit_collective(OpKind::AllGather, c, out, gathered, "gather_out");
  }

  void line(std::string text) { explain_.lines.push_back(std::move(text)); }

  Lowerer& L_;
  Workload& w_;
  const MatmulStep& s_;
  Array a_, b_;
  int ai_ = 0, aj_ = 1, bj_ = 0, bk_ = 1;
  std::string i_, j_, k_;
  std::vector<int> jstar_;
  int case_ = 0;
  std::uint32_t last_ = 0;
  MatmulExplanation explain_;
};

void Lowerer::lower_matmul(const MatmulOpSpec& m, const SourceRef& where, const std::string& name,
                           const std::vector<std::uint32_t>& after) {
  MatmulStep step;
  step.name = name;
  step.a = m.a.name;
  step.b = m.b.name;
  step.out = m.out.name;
  check_array_name(step.out, m.out.where);
  if (has_array(step.out)) m.out.where.fail(fmt::format("array '{}' already exists", step.out));
  step.where = where;
  step.a_at = m.a.where;
  step.b_at = m.b.where;
  step.after = after;
  const Array& a = array(step.a, m.a.where);
  const Array& b = array(step.b, m.b.where);
  // Dims of C are known once A and B are: I from A, K from B. Operands that are
  // not 2-D are reported by the lowering itself.
  if (m.out_sharding && a.dims.size() == 2 && b.dims.size() == 2) {
    std::vector<std::string> dims;
    for (const std::string& d : a.dims)
      if (b.dim_index(d) < 0) dims.push_back(d);
    for (const std::string& d : b.dims)
      if (a.dim_index(d) < 0) dims.push_back(d);
    if (dims.size() == 2) {
      step.requested = parse_layout(w_, step.out, dims, *m.out_sharding);
      step.requested_at = m.out_sharding->where;
      Array c_layout;
      c_layout.name = step.out;
      c_layout.dims = dims;
      c_layout.sizes = {a.sizes[static_cast<std::size_t>(a.dim_index(dims[0]))],
                        b.sizes[static_cast<std::size_t>(b.dim_index(dims[1]))]};
      c_layout.shard_axes = *step.requested;
      check_layout(w_, c_layout, m.out_sharding->where);
    }
  }
  MatmulLowering(*this, step).run();
}

void Lowerer::lower_mlp(const MlpSpec& m, const SourceRef& where, const std::string& name,
                        const std::vector<std::uint32_t>& after) {
  const std::string &x = m.x.name, &w1 = m.w1.name, &w2 = m.w2.name, &out = m.out.name;
  check_array_name(out, m.out.where);
  if (has_array(out)) m.out.where.fail(fmt::format("array '{}' already exists", out));
  std::string variant = "column_row";
  if (m.variant) {
    variant = m.variant->name;
    if (variant != "column_row" && variant != "gather_middle")
      m.variant->where.fail(fmt::format("unknown variant '{}' (known: column_row, gather_middle)", variant));
  }
  if (m.repeat < 1 || m.repeat > 1000)
    m.repeat_at.fail(fmt::format("expected an integer in [1, 1000], got {}", m.repeat));
  const int repeat = static_cast<int>(m.repeat);
  const Array& input = array(x, m.x.where);
  const Array& up_w = array(w1, m.w1.where);
  const Array& down_w = array(w2, m.w2.where);
  if (input.dims.size() != 2) m.x.where.fail(fmt::format("the MLP input {} must be 2-D", x));
  // A block maps x[B, D] back to [B, D] (so blocks chain and the output keeps
  // x's layout): w2 must end in x's feature dim D, the one w1 contracts.
  for (std::size_t d = 0; d < 2; ++d) {
    const std::string& feature = input.dims[d];
    if (up_w.dim_index(feature) < 0) continue;
    const int at = down_w.dim_index(feature);
    if (at < 0 || down_w.sizes[static_cast<std::size_t>(at)] != input.sizes[d])
      m.w2.where.fail(fmt::format("an MLP block maps {} back to its feature dimension {} ({} elements), so {} "
                                  "needs {} with {} elements",
                                  x, feature, input.sizes[d], w2, feature, input.sizes[d]));
  }

  const std::size_t explanation_at = w_.explanations.size();
  std::vector<std::uint32_t> layer_ops;
  std::string in = x;
  std::vector<std::uint32_t> deps = after;
  for (int r = 1; r <= repeat; ++r) {
    const std::string tag = repeat > 1 ? fmt::format("{}.{}", name, r) : name;
    const std::string h = tag + ".h";
    const std::string y = r == repeat ? out : tag + ".y";
    MatmulStep up;
    up.name = tag + ".up";
    up.a = in;
    up.b = w1;
    up.out = h;
    up.where = up.a_at = up.b_at = where;
    up.after = deps;
    MatmulLowering(*this, up).run();
    if (variant == "gather_middle") {
      // Replicate the hidden activation before the second matmul.
      const Array hidden = array(h, where);
      std::vector<std::vector<int>> replicated = hidden.shard_axes;
      replicated[1].clear();
      if (replicated != hidden.shard_axes) {
        Array gathered = hidden;
        gathered.shard_axes = replicated;
        layer_ops.push_back(emit(collective_step(w_, OpKind::AllGather, tag + ".gather_h", tag + ".gather_h",
                                                 where.pointer, hidden, gathered, hidden.shard_axes[1]),
                                 {}));
      }
    }
    MatmulStep down;
    down.name = tag + ".down";
    down.a = h;
    down.b = w2;
    down.out = y;
    down.where = down.a_at = down.b_at = where;
    // The block's output keeps the input's layout, so blocks chain.
    const Array& xin = array(in, where);
    down.requested = xin.shard_axes;
    down.requested_at = where;
    MatmulLowering(*this, down).run();
    deps.clear();
    in = y;
  }
  explain_mlp(where, name, x, w1, w2, variant, layer_ops, explanation_at);
}

void Lowerer::explain_mlp(const SourceRef& where, const std::string& name, const std::string& x, const std::string& w1,
                          const std::string& w2, const std::string& variant, const std::vector<std::uint32_t>& ops,
                          std::size_t at) {
  MatmulExplanation e;
  e.layer = true;
  e.name = name;
  e.ops = ops;
  e.a_before = sharding_string(w_, array(x, where));
  const Array& up = array(w1, where);
  const Array& down = array(w2, where);
  e.b_before = sharding_string(w_, up) + " and " + sharding_string(w_, down);
  const std::string hidden = up.dims.size() == 2 ? up.dims[1] : "F";
  const auto& up_split = up.shard_axes.size() == 2 ? up.shard_axes[1] : std::vector<int>{};
  const int down_dim = down.dim_index(hidden);
  const auto& down_split = down_dim >= 0 ? down.shard_axes[static_cast<std::size_t>(down_dim)] : std::vector<int>{};
  const std::string s = fmt::format("{}", fmt::join(axis_names(w_, up_split), ""));
  if (variant == "column_row") {
    e.lines.push_back(fmt::format("column-parallel first matmul: {} splits its output columns {} along {}, so each "
                                  "chip computes its own slice of the hidden activation, H[.., {}_{}], with no "
                                  "communication.",
                                  sharding_string(w_, up), hidden, s.empty() ? "-" : s, hidden, s));
    if (!up_split.empty() && up_split == down_split)
      e.lines.push_back(fmt::format("row-parallel second matmul: {} splits its input rows {} along {} too: H's shard on "
                                    "each chip is exactly the rows of W2 it holds, so the second matmul starts at once "
                                    "(no gather in the middle) and yields partial sums, reduced by one all-reduce at the "
                                    "end (Y = sum_i H_i W2_i).",
                                    sharding_string(w_, down), hidden, s));
    else
      e.lines.push_back(fmt::format("note: {} is not split on {} like the first matmul's output, so the pairing needs "
                                    "communication in the middle (see the matmul steps).",
                                    sharding_string(w_, down), hidden));
  } else {
    e.lines.push_back(fmt::format("gather-in-the-middle variant: the hidden activation H is all-gathered along {} "
                                  "after the first matmul, then each chip slices the rows its W2 shard needs and the "
                                  "partial sums are all-reduced. Compared with column->row it moves H's bytes once "
                                  "more.",
                                  s.empty() ? "-" : s));
  }
  e.c_after = sharding_string(w_, array(w_.ops.back().outputs.empty() ? x : w_.ops.back().outputs[0].name, where));
  w_.explanations.insert(w_.explanations.begin() + static_cast<std::ptrdiff_t>(at), std::move(e));
}

}  // namespace meshsim::workloads::detail
