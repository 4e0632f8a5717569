// The training-step verifier (training_verifier.hpp): the kernels' math, the
// unsharded reference layers, and a machine that runs the lowered ops of
// microbatch 0 chip by chip on the chips' real shards.
#include "verify/training_verifier.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "base/error.hpp"
#include "workloads/training_formulas.hpp"

namespace meshsim::verify {

namespace {

using Matrix = Eigen::MatrixXd;
using Index = Eigen::Index;
using topology::ChipId;
using workloads::ModelSpec;
using workloads::Op;
using workloads::Training;
using workloads::Workload;

Index ix(std::uint64_t v) {
  return static_cast<Index>(v);
}
double dbl(Index v) {
  return static_cast<double>(v);
}

constexpr double kNormEpsilon = 1e-5;
constexpr double kTolerance = 1e-9;  // relative, in double precision
constexpr double kMaxValues = 16e6;  // the most values --verify holds (about 128 MB of doubles)

// ------------------------------------------------------------------ sizes

struct Dims {
  Index h = 0, a = 0, kv = 0, d = 0, f = 0, s = 0, b = 0;
  // Keys per query as the lowering counts them: s, or under a causal mask s/2
  // (the average; the verifier multiplies the whole masked s x s block).
  Index keys = 0;
  bool gated = false, causal = true;
  double scale = 1;  // of the attention scores: 1/sqrt(head_dim)
  Index tokens() const { return b * s; }
};

Dims dims_of(const ModelSpec& m, std::uint64_t microbatch, bool causal) {
  Dims D;
  D.h = ix(m.d_model), D.a = ix(m.heads), D.kv = ix(m.kv_heads), D.d = ix(m.head_dim), D.f = ix(m.ffn);
  D.s = ix(m.seq_len), D.b = ix(microbatch);
  D.gated = m.gated, D.causal = causal;
  D.keys = causal ? D.s / 2 : D.s;
  D.scale = 1.0 / std::sqrt(dbl(D.d));
  return D;
}

// What one chip holds of the heads and the FFN (tensor parallelism).
struct Shard {
  Index a = 0, kv = 0, f = 0;
  Index q(const Dims& D) const { return a * D.d; }
  Index qkv(const Dims& D) const { return (a + 2 * kv) * D.d; }
  Index up(const Dims& D) const { return (D.gated ? 2 : 1) * f; }
};

// A layer's weights (or their gradients) as the kernels use them: Wqkv [h, q|k|v]
// (query heads, then key heads, then value heads), Wo [q, h], Wup [h, gate|up]
// when gated (else [h, up]), Wdown [ffn, h], the norms' gains [h, 1]. A chip's
// blocks have the same layout over its heads and FFN columns.
enum Block : int { kQkv, kOut, kUp, kDown, kG1, kG2, kBlocks };
using Blocks = std::array<Matrix, kBlocks>;
constexpr std::array<const char*, kBlocks> kBlockNames = {"Wqkv", "Wo", "Wup", "Wdown", "g_ln1", "g_ln2"};
std::string grad_name(int b) {
  return std::string("d") + kBlockNames[static_cast<std::size_t>(b)];
}

std::pair<Index, Index> block_shape(int b, const Dims& D, const Shard& sh) {
  switch (b) {
    case kQkv:
      return {D.h, sh.qkv(D)};
    case kOut:
      return {sh.q(D), D.h};
    case kUp:
      return {D.h, sh.up(D)};
    case kDown:
      return {sh.f, D.h};
    default:
      return {D.h, 1};
  }
}
Index flat_size(const Dims& D, const Shard& sh) {
  Index n = 0;
  for (int b = 0; b < kBlocks; ++b) {
    const auto [r, c] = block_shape(b, D, sh);
    n += r * c;
  }
  return n;
}

// Where element (li, lj) of tensor-parallel rank r's block b sits in the whole weight.
std::pair<Index, Index> to_global(int b, Index li, Index lj, Index r, const Dims& D, const Shard& sh) {
  switch (b) {
    case kQkv: {
      const Index q = sh.a * D.d, k = sh.kv * D.d;
      if (lj < q) return {li, r * q + lj};
      if (lj < q + k) return {li, D.a * D.d + r * k + (lj - q)};
      return {li, D.a * D.d + D.kv * D.d + r * k + (lj - q - k)};
    }
    case kOut:
      return {r * sh.q(D) + li, lj};
    case kUp:
      if (D.gated && lj >= sh.f) return {li, D.f + r * sh.f + (lj - sh.f)};
      return {li, r * sh.f + lj};
    case kDown:
      return {r * sh.f + li, lj};
    default:
      return {li, lj};
  }
}

Blocks local_blocks(const Blocks& global, Index r, const Dims& D, const Shard& sh) {
  Blocks out;
  for (int b = 0; b < kBlocks; ++b) {
    const auto [rows, cols] = block_shape(b, D, sh);
    Matrix& m = out[static_cast<std::size_t>(b)];
    m.resize(rows, cols);
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) {
        const auto [gi, gj] = to_global(b, i, j, r, D, sh);
        m(i, j) = global[static_cast<std::size_t>(b)](gi, gj);
      }
  }
  return out;
}

// The chip's layer buffer, as FSDP shards it: the blocks one after the other, column-major.
Matrix flatten(const Blocks& blocks) {
  Index n = 0;
  for (const Matrix& m : blocks) n += m.size();
  Matrix v(n, 1);
  Index at = 0;
  for (const Matrix& m : blocks) {
    v.middleRows(at, m.size()) = Eigen::Map<const Eigen::VectorXd>(m.data(), m.size());
    at += m.size();
  }
  return v;
}
Blocks unflatten(const Matrix& v, const Dims& D, const Shard& sh) {
  Blocks out;
  Index at = 0;
  for (int b = 0; b < kBlocks; ++b) {
    const auto [rows, cols] = block_shape(b, D, sh);
    out[static_cast<std::size_t>(b)] = Eigen::Map<const Matrix>(v.data() + at, rows, cols);
    at += rows * cols;
  }
  return out;
}
// Flat index -> (block, row, column).
std::tuple<int, Index, Index> locate(Index k, const Dims& D, const Shard& sh) {
  for (int b = 0; b < kBlocks; ++b) {
    const auto [rows, cols] = block_shape(b, D, sh);
    if (k < rows * cols) return {b, k % rows, k / rows};
    k -= rows * cols;
  }
  return {kBlocks, 0, 0};
}

// ------------------------------------------------------------------ kernels

// RMSNorm with a gain: y = x / rms(x) * g, row by row (one row a token).
Matrix rms_forward(const Matrix& x, const Matrix& g) {
  Matrix y(x.rows(), x.cols());
  for (Index i = 0; i < x.rows(); ++i) {
    const double r = 1.0 / std::sqrt(x.row(i).squaredNorm() / dbl(x.cols()) + kNormEpsilon);
    y.row(i) = x.row(i).cwiseProduct(g.col(0).transpose()) * r;
  }
  return y;
}
// dx and dg (summed over the rows given) from dy.
void rms_backward(const Matrix& x, const Matrix& g, const Matrix& dy, Matrix& dx, Matrix& dg) {
  dx.resize(x.rows(), x.cols());
  dg = Matrix::Zero(g.rows(), 1);
  for (Index i = 0; i < x.rows(); ++i) {
    const double r = 1.0 / std::sqrt(x.row(i).squaredNorm() / dbl(x.cols()) + kNormEpsilon);
    const Eigen::RowVectorXd u = dy.row(i).cwiseProduct(g.col(0).transpose());
    dx.row(i) = r * u - x.row(i) * (r * r * r * u.dot(x.row(i)) / dbl(x.cols()));
    dg.col(0) += (dy.row(i).cwiseProduct(x.row(i)) * r).transpose();
  }
}

double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}
double gelu(double z) {
  return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
}
double gelu_grad(double z) {
  return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
}

// SwiGLU (u = [gate | up], f columns each): silu(gate) * up; else GeLU (erf).
Matrix act_forward(const Matrix& u, Index f, bool gated) {
  Matrix a(u.rows(), f);
  for (Index j = 0; j < f; ++j)
    for (Index i = 0; i < u.rows(); ++i) {
      if (gated) {
        const double z = u(i, j);
        a(i, j) = z * sigmoid(z) * u(i, f + j);
      } else {
        a(i, j) = gelu(u(i, j));
      }
    }
  return a;
}
Matrix act_backward(const Matrix& u, const Matrix& da, Index f, bool gated) {
  Matrix du(u.rows(), u.cols());
  for (Index j = 0; j < f; ++j)
    for (Index i = 0; i < u.rows(); ++i) {
      const double z = u(i, j);
      if (gated) {
        const double sg = sigmoid(z);
        du(i, j) = da(i, j) * u(i, f + j) * sg * (1.0 + z * (1.0 - sg));
        du(i, f + j) = da(i, j) * z * sg;
      } else {
        du(i, j) = da(i, j) * gelu_grad(z);
      }
    }
  return du;
}

// Softmax of scale x scores per query row, keys after the query masked when causal.
Matrix softmax_forward(const Matrix& scores, double scale, bool causal) {
  Matrix p = Matrix::Zero(scores.rows(), scores.cols());
  for (Index i = 0; i < scores.rows(); ++i) {
    const Index end = causal ? std::min(i + 1, scores.cols()) : scores.cols();
    double top = -std::numeric_limits<double>::infinity(), sum = 0;
    for (Index j = 0; j < end; ++j) top = std::max(top, scale * scores(i, j));
    for (Index j = 0; j < end; ++j) sum += p(i, j) = std::exp(scale * scores(i, j) - top);
    for (Index j = 0; j < end; ++j) p(i, j) /= sum;
  }
  return p;
}
// The scores' gradient (the scale included).
Matrix softmax_backward(const Matrix& p, const Matrix& dp, double scale) {
  Matrix ds(p.rows(), p.cols());
  for (Index i = 0; i < p.rows(); ++i) {
    const double dot = p.row(i).dot(dp.row(i));
    ds.row(i) = scale * (p.row(i).array() * (dp.row(i).array() - dot)).matrix();
  }
  return ds;
}

// Attention over a [tokens, q|k|v] block of whole sequences: one (sequence,
// query head) pair per part, part = sequence * heads + head; query head i reads
// key/value head i / (heads / kv_heads) (GQA).
struct Attention {
  const Dims& D;
  Shard sh;
  Index sequences;
  Index group() const { return sh.a / sh.kv; }
  Index parts() const { return sequences * sh.a; }
  auto q(const Matrix& qkv, Index p) const { return qkv.block((p / sh.a) * D.s, (p % sh.a) * D.d, D.s, D.d); }
  auto k(const Matrix& qkv, Index p) const {
    return qkv.block((p / sh.a) * D.s, sh.q(D) + ((p % sh.a) / group()) * D.d, D.s, D.d);
  }
  auto v(const Matrix& qkv, Index p) const {
    return qkv.block((p / sh.a) * D.s, sh.q(D) + sh.kv * D.d + ((p % sh.a) / group()) * D.d, D.s, D.d);
  }
  std::vector<Matrix> scores(const Matrix& qkv) const {
    std::vector<Matrix> out;
    for (Index p = 0; p < parts(); ++p) out.push_back(q(qkv, p) * k(qkv, p).transpose());
    return out;
  }
  Matrix context(const std::vector<Matrix>& probs, const Matrix& qkv) const {  // [tokens, q]
    Matrix c(sequences * D.s, sh.q(D));
    for (Index p = 0; p < parts(); ++p)
      c.block((p / sh.a) * D.s, (p % sh.a) * D.d, D.s, D.d) = probs[static_cast<std::size_t>(p)] * v(qkv, p);
    return c;
  }
  std::vector<Matrix> probs_grad(const Matrix& dctx, const Matrix& qkv) const {  // dP = dC V^T
    std::vector<Matrix> out;
    for (Index p = 0; p < parts(); ++p)
      out.push_back(dctx.block((p / sh.a) * D.s, (p % sh.a) * D.d, D.s, D.d) * v(qkv, p).transpose());
    return out;
  }
  Matrix values_grad(const std::vector<Matrix>& probs, const Matrix& dctx) const {  // [tokens, kv]: sum of P^T dC
    Matrix dv = Matrix::Zero(sequences * D.s, sh.kv * D.d);
    for (Index p = 0; p < parts(); ++p)
      dv.block((p / sh.a) * D.s, ((p % sh.a) / group()) * D.d, D.s, D.d) +=
          probs[static_cast<std::size_t>(p)].transpose() * dctx.block((p / sh.a) * D.s, (p % sh.a) * D.d, D.s, D.d);
    return dv;
  }
  Matrix queries_grad(const std::vector<Matrix>& ds, const Matrix& qkv) const {  // dQ = dS K
    Matrix dq(sequences * D.s, sh.q(D));
    for (Index p = 0; p < parts(); ++p)
      dq.block((p / sh.a) * D.s, (p % sh.a) * D.d, D.s, D.d) = ds[static_cast<std::size_t>(p)] * k(qkv, p);
    return dq;
  }
  Matrix keys_grad(const std::vector<Matrix>& ds, const Matrix& qkv) const {  // dK = sum of dS^T Q
    Matrix dk = Matrix::Zero(sequences * D.s, sh.kv * D.d);
    for (Index p = 0; p < parts(); ++p)
      dk.block((p / sh.a) * D.s, ((p % sh.a) / group()) * D.d, D.s, D.d) +=
          ds[static_cast<std::size_t>(p)].transpose() * q(qkv, p);
    return dk;
  }
};

// ------------------------------------------------------------------ reference

struct Cache {
  Matrix x, n1, qkv, ctx, x1, n2, u, act, y;
  std::vector<Matrix> probs;
};

Cache reference_forward(const Dims& D, const Blocks& W, const Matrix& x) {
  const Attention at{D, Shard{D.a, D.kv, D.f}, x.rows() / D.s};
  Cache c;
  c.x = x;
  c.n1 = rms_forward(x, W[kG1]);
  c.qkv = c.n1 * W[kQkv];
  for (const Matrix& s : at.scores(c.qkv)) c.probs.push_back(softmax_forward(s, D.scale, D.causal));
  c.ctx = at.context(c.probs, c.qkv);
  c.x1 = x + c.ctx * W[kOut];
  c.n2 = rms_forward(c.x1, W[kG2]);
  c.u = c.n2 * W[kUp];
  c.act = act_forward(c.u, D.f, D.gated);
  c.y = c.x1 + c.act * W[kDown];
  return c;
}

// Adds the weights' gradients to `g`; returns the input's.
Matrix reference_backward(const Dims& D, const Blocks& W, const Cache& c, const Matrix& dy, Blocks& g) {
  const Attention at{D, Shard{D.a, D.kv, D.f}, c.x.rows() / D.s};
  Matrix dx1 = dy, dxa, dg;
  const Matrix da = dy * W[kDown].transpose();
  g[kDown] += c.act.transpose() * dy;
  const Matrix du = act_backward(c.u, da, D.f, D.gated);
  g[kUp] += c.n2.transpose() * du;
  rms_backward(c.x1, W[kG2], du * W[kUp].transpose(), dxa, dg);
  dx1 += dxa;
  g[kG2] += dg;
  const Matrix dctx = dx1 * W[kOut].transpose();
  g[kOut] += c.ctx.transpose() * dx1;
  const std::vector<Matrix> dp = at.probs_grad(dctx, c.qkv);
  std::vector<Matrix> ds;
  for (std::size_t p = 0; p < dp.size(); ++p) ds.push_back(softmax_backward(c.probs[p], dp[p], D.scale));
  Matrix dqkv(c.x.rows(), W[kQkv].cols());
  dqkv << at.queries_grad(ds, c.qkv), at.keys_grad(ds, c.qkv), at.values_grad(c.probs, dctx);
  g[kQkv] += c.n1.transpose() * dqkv;
  rms_backward(c.x, W[kG1], dqkv * W[kQkv].transpose(), dxa, dg);
  g[kG1] += dg;
  return dx1 + dxa;
}

Blocks zero_blocks(const Dims& D) {
  Blocks g;
  const Shard all{D.a, D.kv, D.f};
  for (int b = 0; b < kBlocks; ++b) {
    const auto [r, c] = block_shape(b, D, all);
    g[static_cast<std::size_t>(b)] = Matrix::Zero(r, c);
  }
  return g;
}

Matrix random_matrix(std::mt19937_64& rng, Index rows, Index cols, double scale, double offset = 0) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Matrix m(rows, cols);
  for (Index j = 0; j < cols; ++j)
    for (Index i = 0; i < rows; ++i) m(i, j) = offset + scale * dist(rng);
  return m;
}

Blocks random_weights(std::mt19937_64& rng, const Dims& D) {
  Blocks W;
  W[kQkv] = random_matrix(rng, D.h, (D.a + 2 * D.kv) * D.d, 1.0 / std::sqrt(dbl(D.h)));
  W[kOut] = random_matrix(rng, D.a * D.d, D.h, 1.0 / std::sqrt(dbl(D.a * D.d)));
  W[kUp] = random_matrix(rng, D.h, (D.gated ? 2 : 1) * D.f, 1.0 / std::sqrt(dbl(D.h)));
  W[kDown] = random_matrix(rng, D.f, D.h, 1.0 / std::sqrt(dbl(D.f)));
  W[kG1] = random_matrix(rng, D.h, 1, 0.5, 1.0);
  W[kG2] = random_matrix(rng, D.h, 1, 0.5, 1.0);
  return W;
}

// ------------------------------------------------------------------ the machine

std::string ops(std::size_t n) {
  return fmt::format("{} op{}", n, n == 1 ? "" : "s");
}

struct Range {
  Index begin = 0, end = 0;
  Index size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

// What a chip holds under a name: activations ([tokens, columns], `rows` the
// microbatch's tokens held), attention blocks (one part per sequence and head),
// weights (the six blocks), gradients (a block, or the flat buffer with `rows`
// the elements held).
struct Tensor {
  std::vector<Matrix> parts;
  Range rows;
  bool partial = false;  // unreduced partial sums over the tensor-parallel group (its other tokens or heads)
  bool broken = false;   // an op that wrote it failed: its contents mean nothing
  const Matrix& m() const { return parts.front(); }
};
Tensor tensor(Matrix m, Range rows, bool partial = false) {
  Tensor t;
  t.parts.push_back(std::move(m));
  t.rows = rows;
  t.partial = partial;
  return t;
}

struct Failure {
  std::string what;
};
struct NotRun {};  // an input comes from an op that failed

// What an op of the step is to the verifier.
struct Step {
  enum class Kind { Skip, Layer, Send, Gradients } kind = Kind::Skip;
  bool backward = false;   // a B op (recomputed forward kernels included)
  bool recompute = false;  // B{j}.R.L{l}.*
  std::uint64_t layer = 0;
  std::string kernel;
  std::string skip;  // why it is not executed
};

// The op's site in the step (workloads::StepSite, set by the lowering).
Step classify(const Op& op, const workloads::Training& t) {
  using Part = workloads::StepSite::Part;
  const workloads::StepSite& site = op.site;
  Step st;
  st.backward = site.pass == workloads::StepSite::Pass::Backward;
  st.recompute = site.recompute;
  switch (site.part) {
    case Part::Layer:
    case Part::Send:
    case Part::Outside:
      if (site.microbatch != 0) {
        st.skip =
            "the other microbatches (only microbatch 0 is executed; the gradient reductions carry its "
            "gradients alone)";
      } else if (site.part == Part::Layer) {
        st.kind = Step::Kind::Layer;
        st.layer = site.layer;
        st.kernel = t.kernel_name(site);
      } else if (site.part == Part::Send) {
        st.kind = Step::Kind::Send;
      } else {
        st.skip =
            "the embedding, the head and the loss (the first layer gets a random input, the last a random output "
            "gradient)";
      }
      return st;
    case Part::LayerGradients:
      st.kind = Step::Kind::Gradients;
      st.layer = site.layer;
      return st;
    case Part::OutsideGradients:
      st.skip = "the embedding's and the head's gradient reductions";
      return st;
    case Part::Optimizer:
      st.skip = "the optimizer step";
      return st;
    case Part::None:
      break;
  }
  st.skip = "other ops";
  return st;
}

enum class Form { Matmul, Elementwise, Collective };
// The kernels the verifier executes and what each writes (marked broken when it fails).
struct Kernel {
  Form form;
  std::vector<std::string> writes;
};
const std::map<std::string, Kernel>& forward_kernels() {
  static const std::map<std::string, Kernel> k = {
      {"gather", {Form::Collective, {"W"}}},
      {"ln1", {Form::Elementwise, {"n1"}}},
      {"ag1", {Form::Collective, {"n1.g"}}},
      {"qkv", {Form::Matmul, {"qkv"}}},
      {"qk", {Form::Matmul, {"scores"}}},
      {"softmax", {Form::Elementwise, {"p"}}},
      {"pv", {Form::Matmul, {"ctx"}}},
      {"out", {Form::Matmul, {"attn"}}},
      {"out.reduce", {Form::Collective, {"attn"}}},
      {"add_ln2", {Form::Elementwise, {"x1", "n2"}}},
      {"ag2", {Form::Collective, {"n2.g"}}},
      {"up", {Form::Matmul, {"u"}}},
      {"act", {Form::Elementwise, {"a"}}},
      {"down", {Form::Matmul, {"mlp"}}},
      {"down.reduce", {Form::Collective, {"mlp"}}},
      {"add", {Form::Elementwise, {"y"}}},
  };
  return k;
}
const std::map<std::string, Kernel>& backward_kernels() {
  static const std::map<std::string, Kernel> k = {
      {"gather", {Form::Collective, {"W"}}},
      {"add.bwd", {Form::Elementwise, {"dmlp", "dx1"}}},
      {"down.ag", {Form::Collective, {"dmlp.g"}}},
      {"down.dx", {Form::Matmul, {"da"}}},
      {"down.dw", {Form::Matmul, {"dWdown"}}},
      {"act.bwd", {Form::Elementwise, {"du"}}},
      {"ag2.again", {Form::Collective, {"n2.g"}}},
      {"up.dx", {Form::Matmul, {"dn2"}}},
      {"up.dw", {Form::Matmul, {"dWup"}}},
      {"up.reduce", {Form::Collective, {"dn2"}}},
      {"add_ln2.bwd", {Form::Elementwise, {"dx1", "dattn", "dg_ln2"}}},
      {"out.ag", {Form::Collective, {"dattn.g"}}},
      {"out.dx", {Form::Matmul, {"dctx"}}},
      {"out.dw", {Form::Matmul, {"dWo"}}},
      {"pv.dp", {Form::Matmul, {"dp"}}},
      {"pv.dv", {Form::Matmul, {"dv"}}},
      {"softmax.bwd", {Form::Elementwise, {"ds"}}},
      {"qk.dq", {Form::Matmul, {"dq"}}},
      {"qk.dk", {Form::Matmul, {"dk"}}},
      {"ag1.again", {Form::Collective, {"n1.g"}}},
      {"qkv.dx", {Form::Matmul, {"dn1"}}},
      {"qkv.dw", {Form::Matmul, {"dWqkv"}}},
      {"qkv.reduce", {Form::Collective, {"dn1"}}},
      {"ln1.bwd", {Form::Elementwise, {"dx", "dg_ln1"}}},
      {"norm_grads.reduce", {Form::Collective, {"dg_ln1", "dg_ln2"}}},
      {"reduce", {Form::Collective, {"grad"}}},
  };
  return k;
}
// Collectives on activations: what they read (and write, gathers under ".g").
const std::map<std::string, std::string>& activation_collectives() {
  static const std::map<std::string, std::string> c = {
      {"ag1", "n1"},       {"out.reduce", "attn"}, {"ag2", "n2"},       {"down.reduce", "mlp"}, {"down.ag", "dmlp"},
      {"ag2.again", "n2"}, {"up.reduce", "dn2"},   {"out.ag", "dattn"}, {"ag1.again", "n1"},    {"qkv.reduce", "dn1"},
  };
  return c;
}

const char* form_name(Form f) {
  switch (f) {
    case Form::Matmul:
      return "a matmul";
    case Form::Elementwise:
      return "an elementwise kernel";
    case Form::Collective:
      return "a collective";
  }
  return "?";
}
bool has_form(OpKind k, Form f) {
  switch (f) {
    case Form::Matmul:
      return k == OpKind::Matmul;
    case Form::Elementwise:
      return k == OpKind::Elementwise;
    case Form::Collective:
      return k == OpKind::AllGather || k == OpKind::ReduceScatter || k == OpKind::AllReduce || k == OpKind::AllToAll;
  }
  return false;
}

// The seven weights of a layer as the report names them, and where each lies
// in the blocks (Wgate and Wup share the up block when gated).
struct Param {
  const char* name;
  int block;
  Index col_begin, col_end;  // -1: all columns
};
std::vector<Param> params_of(const Dims& D) {
  std::vector<Param> p{{"Wqkv", kQkv, 0, -1}, {"Wo", kOut, 0, -1}};
  if (D.gated) {
    p.push_back({"Wgate", kUp, 0, D.f});
    p.push_back({"Wup", kUp, D.f, 2 * D.f});
  } else {
    p.push_back({"Wup", kUp, 0, -1});
  }
  p.push_back({"Wdown", kDown, 0, -1});
  p.push_back({"g_ln1", kG1, 0, -1});
  p.push_back({"g_ln2", kG2, 0, -1});
  return p;
}

class Machine {
 public:
  explicit Machine(const Workload& w)
      : w_(w), t_(*w.training), D_(dims_of(t_.model, t_.microbatch, t_.causal)), torus_(w.make_torus()) {
    coords_ = workloads::mesh_coordinates(w, torus_);
    for (ChipId c = 0; c < torus_.num_chips(); ++c)
      if (!coords_[c].empty()) chips_.push_back(c);
    tp_ = ix(t_.tp);
    shard_ = Shard{D_.a / tp_, D_.kv / tp_, D_.f / tp_};
    sp_ = t_.plan.sequence_parallel && tp_ > 1;
    e_ = workloads::element_size(t_.dtype);
    if (e_ == 0) e_ = 2;
    layers_ = t_.model.layers;
    layer_stage_.assign(layers_, 0);
    for (std::uint64_t s = 0; s < t_.pp; ++s)
      for (std::uint64_t l : workloads::stage_layers(t_, s)) layer_stage_[l] = s;
    flat_ = flat_size(D_, shard_);
    std::vector<int> replica_axes = t_.plan.data;
    replica_axes.insert(replica_axes.end(), t_.plan.fsdp.begin(), t_.plan.fsdp.end());
    replicas_ = ix(t_.dp * t_.fsdp);
    for (ChipId c = 0; c < torus_.num_chips(); ++c) {
      tp_rank_.push_back(coords_[c].empty() ? 0 : rank(c, t_.plan.tensor));
      fsdp_rank_.push_back(coords_[c].empty() ? 0 : rank(c, t_.plan.fsdp));
      replica_.push_back(coords_[c].empty() ? 0 : rank(c, replica_axes));
    }
    state_.resize(torus_.num_chips());
    backward_started_.resize(torus_.num_chips());
  }

  Report run() {
    Report r;
    const ModelSpec& m = t_.model;
    r.dims = {
        {"layers", m.layers},          {"d_model", m.d_model}, {"heads", m.heads},     {"kv_heads", m.kv_heads},
        {"head_dim", m.head_dim},      {"ffn", m.ffn},         {"seq_len", m.seq_len}, {"microbatch", t_.microbatch},
        {"replicas", t_.dp * t_.fsdp}, {"tp", t_.tp},          {"pp", t_.pp}};
    make_data();
    std::map<std::string, std::size_t> skipped;
    for (const Op& op : w_.ops) {
      const Step st = classify(op, t_);
      if (st.kind == Step::Kind::Skip) {
        ++skipped[st.skip];
        continue;
      }
      execute(op, st, r);
    }
    for (std::uint64_t l = 0; l < layers_; ++l) compare_layer(l, r);
    if (not_run_ > 0)
      r.ops.push_back(OpCheck{ops(not_run_), "not run", 0, 0, "their inputs come from ops that failed"});
    for (const auto& [why, count] : skipped) r.ops.push_back(OpCheck{ops(count), "skipped", 0, 0, why});
    if (t_.model.dropout)
      r.ops.push_back(OpCheck{"dropout", "skipped", 0, 0, "the layers are executed without dropout"});
    return r;
  }

 private:
  using Key = std::pair<std::uint64_t, std::string>;

  // ---------------------------------------------------------------- layout
  Index rank(ChipId c, const std::vector<int>& axes) const {
    Index r = 0;
    for (int a : axes) r = r * w_.mesh[static_cast<std::size_t>(a)].size + coords_[c][static_cast<std::size_t>(a)];
    return r;
  }
  Index axes_size(const std::vector<int>& axes) const {
    Index n = 1;
    for (int a : axes) n *= w_.mesh[static_cast<std::size_t>(a)].size;
    return n;
  }
  bool covers_tensor(const std::vector<int>& axes) const {
    return std::all_of(t_.plan.tensor.begin(), t_.plan.tensor.end(),
                       [&](int a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); });
  }
  std::uint64_t stage_of_layer(std::uint64_t l) const { return layer_stage_[l]; }
  std::vector<ChipId> stage_chips(std::uint64_t stage) const {
    std::vector<ChipId> out;
    for (ChipId c : chips_)
      if (t_.pp == 1 || static_cast<std::uint64_t>(t_.chip_stage[c]) == stage) out.push_back(c);
    return out;
  }
  std::vector<ChipId> chips_of(const Op& op) const {
    if (!op.chips) return chips_;
    std::vector<ChipId> out;
    for (ChipId c : *op.chips)
      if (c < coords_.size() && !coords_[c].empty()) out.push_back(c);
    return out;
  }
  // The microbatch's tokens a chip holds outside the tensor-parallel regions.
  Range token_rows(ChipId c) const {
    if (!sp_) return {0, D_.tokens()};
    const Index n = D_.tokens() / tp_;
    return {tp_rank_[c] * n, (tp_rank_[c] + 1) * n};
  }
  std::string chip(ChipId c) const { return torus_.chip_name(c); }

  // The groups of an op's chips over its mesh axes, each ordered by rank.
  std::vector<std::vector<ChipId>> groups(const Op& op) const {
    std::map<std::vector<int>, std::vector<std::pair<Index, ChipId>>> by;
    for (ChipId c : chips_of(op)) {
      std::vector<int> key = coords_[c];
      for (int a : op.collective().mesh_axes) key[static_cast<std::size_t>(a)] = -1;
      by[key].emplace_back(rank(c, op.collective().mesh_axes), c);
    }
    const Index size = axes_size(op.collective().mesh_axes);
    std::vector<std::vector<ChipId>> out;
    for (auto& [key, members] : by) {
      std::sort(members.begin(), members.end());
      if (ix(members.size()) != size)
        throw Failure{fmt::format("the group of chip {} over the op's axes has {} of its {} chips",
                                  chip(members.front().second), members.size(), size)};
      out.emplace_back();
      for (const auto& [r, c] : members) out.back().push_back(c);
    }
    return out;
  }

  // ---------------------------------------------------------------- data
  void make_data() {
    std::mt19937_64 rng(20261216);
    for (std::uint64_t l = 0; l < layers_; ++l) weights_.push_back(random_weights(rng, D_));
    const Index S = D_.tokens();
    for (Index r = 0; r < replicas_; ++r) {
      inputs_.push_back(random_matrix(rng, S, D_.h, 1.0));
      output_grads_.push_back(random_matrix(rng, S, D_.h, 1.0));
    }
    // The unsharded layers, replica by replica; weight gradients summed over them.
    grads_.assign(layers_, zero_blocks(D_));
    outputs_ref_.assign(static_cast<std::size_t>(replicas_), {});
    input_grads_ref_.assign(static_cast<std::size_t>(replicas_), std::vector<Matrix>(layers_));
    for (std::size_t r = 0; r < static_cast<std::size_t>(replicas_); ++r) {
      std::vector<Cache> caches;
      Matrix x = inputs_[r];
      for (std::uint64_t l = 0; l < layers_; ++l) {
        caches.push_back(reference_forward(D_, weights_[l], x));
        x = caches.back().y;
        outputs_ref_[r].push_back(x);
      }
      Matrix dy = output_grads_[r];
      for (std::uint64_t l = layers_; l-- > 0;) {
        dy = reference_backward(D_, weights_[l], caches[l], dy, grads_[l]);
        input_grads_ref_[r][l] = dy;
      }
    }
    // Every chip of a layer's stage holds its tensor-parallel blocks; with FSDP
    // only its shard of their flat buffer.
    const Index fsdp = ix(t_.fsdp);
    for (std::uint64_t l = 0; l < layers_; ++l)
      for (ChipId c : stage_chips(stage_of_layer(l))) {
        Blocks local = local_blocks(weights_[l], tp_rank_[c], D_, shard_);
        if (fsdp == 1) {
          Tensor t;
          t.parts.assign(local.begin(), local.end());
          t.rows = {0, flat_};
          put(c, l, "W", std::move(t));
        } else if (flat_ % fsdp == 0) {
          const Index n = flat_ / fsdp, q = fsdp_rank_[c];
          put(c, l, "Wpiece", tensor(flatten(local).middleRows(q * n, n), {q * n, (q + 1) * n}));
        } else {
          fsdp_problem_ = fmt::format("a chip's {} weights of a layer do not split into {} FSDP shards", flat_, fsdp);
        }
      }
  }

  // ---------------------------------------------------------------- state
  bool has(ChipId c, std::uint64_t l, const std::string& name) const { return state_[c].count({l, name}) > 0; }
  const Tensor& get(ChipId c, std::uint64_t l, const std::string& name) const {
    const auto it = state_[c].find({l, name});
    if (it == state_[c].end()) {
      if (name == "W") throw Failure{fmt::format("does not hold layer {}'s weights (no FSDP gather brought them)", l)};
      throw Failure{fmt::format("holds no {} of layer {}: no earlier op computed it", name, l)};
    }
    if (it->second.broken) throw NotRun{};
    return it->second;
  }
  // A tensor-parallel region's input: gathered (sequence parallelism) or as held.
  const Tensor& gathered(ChipId c, std::uint64_t l, const std::string& name) const {
    return has(c, l, name + ".g") ? get(c, l, name + ".g") : get(c, l, name);
  }
  void put(ChipId c, std::uint64_t l, const std::string& name, Tensor t) { state_[c][{l, name}] = std::move(t); }
  const Matrix& weight(ChipId c, std::uint64_t l, int b) const {
    return get(c, l, "W").parts[static_cast<std::size_t>(b)];
  }

  void complete(const Tensor& t, const std::string& name, std::uint64_t l) const {
    if (t.partial)
      throw Failure{
          fmt::format("{} of layer {} is still partial sums over the tensor-parallel group: a reduction is "
                      "missing before this op",
                      name, l)};
  }
  static void same_tokens(const Tensor& a, const std::string& an, const Tensor& b, const std::string& bn) {
    if (!(a.rows == b.rows))
      throw Failure{fmt::format("{} (tokens {}..{}) and {} (tokens {}..{}) cover different tokens", an, a.rows.begin,
                                a.rows.end, bn, b.rows.begin, b.rows.end)};
  }
  Index sequences(const Tensor& t, const std::string& name) const {
    if (t.rows.begin % D_.s != 0 || t.rows.size() % D_.s != 0 || t.rows.size() == 0)
      throw Failure{fmt::format("{} holds tokens {}..{}, not whole sequences of {}: attention needs every query's keys",
                                name, t.rows.begin, t.rows.end, D_.s)};
    return t.rows.size() / D_.s;
  }
  static void expect(const Op& op, Index m, Index k, Index n, Index batch) {
    if (ix(op.matmul().m) != m || ix(op.matmul().k) != k || ix(op.matmul().n) != n || ix(op.matmul().batch) != batch)
      throw Failure{
          fmt::format("the chip's blocks multiply m={} k={} n={} batch={}, the op has m={} k={} n={} batch={}", m, k, n,
                      batch, op.matmul().m, op.matmul().k, op.matmul().n, op.matmul().batch)};
  }
  void expect_bytes(const Op& op, Index elements, const std::string& what) const {
    const auto bytes = static_cast<std::uint64_t>(elements) * e_;
    if (bytes != op.comm_bytes())
      throw Failure{fmt::format("{} is {} elements ({} bytes) per group, the op has {} bytes", what, elements, bytes,
                                op.comm_bytes())};
  }

  // Layer l's input on chip c: kept, the previous layer's output on the chip,
  // delivered by a send, or (layer 0) the replica's random input.
  Tensor layer_input(ChipId c, std::uint64_t l) {
    if (has(c, l, "x")) return get(c, l, "x");
    if (l == 0) {
      const Range r = token_rows(c);
      return tensor(inputs_[static_cast<std::size_t>(replica_[c])].middleRows(r.begin, r.size()), r);
    }
    if (has(c, l - 1, "y")) return get(c, l - 1, "y");
    throw Failure{
        fmt::format("has no input for layer {}: no earlier layer ran on this chip and no send delivered one", l)};
  }
  // The gradient of layer l's output on chip c.
  Tensor output_grad(ChipId c, std::uint64_t l) {
    if (has(c, l, "dy")) return get(c, l, "dy");
    if (l + 1 == layers_) {
      const Range r = token_rows(c);
      return tensor(output_grads_[static_cast<std::size_t>(replica_[c])].middleRows(r.begin, r.size()), r);
    }
    if (has(c, l + 1, "dx")) return get(c, l + 1, "dx");
    throw Failure{fmt::format(
        "has no gradient of layer {}'s output: no later layer ran on this chip and no send delivered one", l)};
  }

  // What the backward pass of layer l finds: the forward's activations as the
  // recompute policy keeps them, without what the forward gathered (SP's full
  // activations, FSDP's weights): those must be gathered again.
  void begin_backward(ChipId c, std::uint64_t l) {
    if (!backward_started_[c].insert(l).second) return;
    auto& s = state_[c];
    const bool sharded_weights = s.count({l, "Wpiece"}) > 0;
    for (auto it = s.begin(); it != s.end();) {
      const std::string& n = it->first.second;
      bool drop = false;
      if (it->first.first == l) {
        drop = n.ends_with(".g") || (n == "W" && sharded_weights);
        if (t_.recompute == workloads::Recompute::Selective) drop = drop || n == "scores" || n == "p";
        if (t_.recompute == workloads::Recompute::Full)
          drop = drop || !(n == "x" || n == "dy" || n == "Wpiece" || (n == "W" && !sharded_weights));
      }
      it = drop ? s.erase(it) : std::next(it);
    }
  }

  // Runs fn on every chip of the op; a failure names the chip.
  template <class Fn>
  void each_chip(const Op& op, Fn&& fn) {
    for (ChipId c : chips_of(op)) {
      try {
        fn(c);
      } catch (const Failure& f) {
        throw Failure{fmt::format("chip {}: {}", chip(c), f.what)};
      }
    }
  }

  // ---------------------------------------------------------------- ops
  void execute(const Op& op, const Step& st, Report& r) {
    std::vector<std::string> writes;
    std::uint64_t layer = st.layer;
    try {
      if (st.kind == Step::Kind::Send) {
        send(op, !st.backward);
        return;
      }
      if (st.kind == Step::Kind::Gradients) {
        writes = {"grad"};
        if (st.layer >= layers_)
          throw Failure{fmt::format("reduces the gradients of layer {}, which does not exist", st.layer)};
        reduce_gradients(op, st.layer);
        return;
      }
      if (st.layer >= layers_) throw Failure{fmt::format("layer {} does not exist", st.layer)};
      const auto& table = st.backward && !st.recompute ? backward_kernels() : forward_kernels();
      const auto kernel = table.find(st.kernel);
      if (kernel == table.end())
        throw Failure{fmt::format("the verifier does not know the {} kernel '{}'",
                                  st.backward && !st.recompute ? "backward" : "forward", st.kernel)};
      writes = kernel->second.writes;
      if (!has_form(op.kind, kernel->second.form))
        throw Failure{
            fmt::format("is {}, but '{}' is {}", kind_name(op.kind), st.kernel, form_name(kernel->second.form))};
      if (st.backward)
        for (ChipId c : chips_of(op)) begin_backward(c, layer);
      layer_op(op, st);
    } catch (const Failure& f) {
      r.ops.push_back(OpCheck{op.name, "FAILED", 0, 0, f.what});
      mark_broken(op, layer, writes);
    } catch (const NotRun&) {
      ++not_run_;
      mark_broken(op, layer, writes);
    }
  }
  void mark_broken(const Op& op, std::uint64_t l, const std::vector<std::string>& writes) {
    for (ChipId c : chips_of(op))
      for (const std::string& n : writes) state_[c][{l, n}].broken = true;
  }

  // Long: one branch per kernel of the layer (about forty, each a few lines
  // of its Eigen reference), the table the lowering is checked against.
  // NOLINTNEXTLINE(readability-function-size)
  void layer_op(const Op& op, const Step& st) {
    const std::uint64_t l = st.layer;
    const std::string& k = st.kernel;
    const Dims& D = D_;
    const Shard& sh = shard_;
    const bool split = tp_ > 1;  // row-parallel products are partial sums
    const Index S = D.tokens();
    const auto partial_tokens = [&](const Tensor& t) { return !(t.rows == Range{0, S}); };
    if (const auto c = activation_collectives().find(k); c != activation_collectives().end()) {
      activation_collective(op, l, c->second, op.kind == OpKind::AllGather ? c->second + ".g" : c->second);
      return;
    }
    if (k == "gather") return weight_gather(op, l);
    if (k == "reduce") return reduce_gradients(op, l);
    if (k == "norm_grads.reduce") return reduce_gains(op, l);
    each_chip(op, [&](ChipId c) {
      if (k == "ln1") {
        Tensor x = st.recompute ? get(c, l, "x") : layer_input(c, l);
        complete(x, "the input", l);
        put(c, l, "n1", tensor(rms_forward(x.m(), weight(c, l, kG1)), x.rows));
        put(c, l, "x", std::move(x));
      } else if (k == "qkv") {
        const Tensor& a = gathered(c, l, "n1");
        complete(a, "n1", l);
        const Matrix& w = weight(c, l, kQkv);
        expect(op, a.rows.size(), a.m().cols(), w.cols(), 1);
        put(c, l, "qkv", tensor(a.m() * w, a.rows));
      } else if (k == "qk") {
        const Tensor& qkv = get(c, l, "qkv");
        const Attention at{D, sh, sequences(qkv, "qkv")};
        expect(op, D.s, D.d, D.keys, at.parts());
        Tensor s;
        s.parts = at.scores(qkv.m());
        s.rows = qkv.rows;
        put(c, l, "scores", std::move(s));
      } else if (k == "softmax") {
        Tensor p = get(c, l, "scores");
        for (Matrix& m : p.parts) m = softmax_forward(m, D.scale, D.causal);
        put(c, l, "p", std::move(p));
      } else if (k == "pv") {
        const Tensor& p = get(c, l, "p");
        const Tensor& qkv = get(c, l, "qkv");
        same_tokens(p, "p", qkv, "qkv");
        const Attention at{D, sh, sequences(qkv, "qkv")};
        expect(op, D.s, D.keys, D.d, at.parts());
        put(c, l, "ctx", tensor(at.context(p.parts, qkv.m()), qkv.rows));
      } else if (k == "out") {
        const Tensor& ctx = get(c, l, "ctx");
        const Matrix& w = weight(c, l, kOut);
        expect(op, ctx.rows.size(), w.rows(), w.cols(), 1);
        put(c, l, "attn", tensor(ctx.m() * w, ctx.rows, split));
      } else if (k == "add_ln2") {
        const Tensor& x = get(c, l, "x");
        const Tensor& attn = get(c, l, "attn");
        complete(attn, "the attention output", l);
        same_tokens(x, "the input", attn, "the attention output");
        Tensor x1 = tensor(x.m() + attn.m(), x.rows);
        put(c, l, "n2", tensor(rms_forward(x1.m(), weight(c, l, kG2)), x.rows));
        put(c, l, "x1", std::move(x1));
      } else if (k == "up") {
        const Tensor& a = gathered(c, l, "n2");
        complete(a, "n2", l);
        const Matrix& w = weight(c, l, kUp);
        expect(op, a.rows.size(), a.m().cols(), w.cols(), 1);
        put(c, l, "u", tensor(a.m() * w, a.rows));
      } else if (k == "act") {
        const Tensor& u = get(c, l, "u");
        put(c, l, "a", tensor(act_forward(u.m(), sh.f, D.gated), u.rows));
      } else if (k == "down") {
        const Tensor& a = get(c, l, "a");
        const Matrix& w = weight(c, l, kDown);
        expect(op, a.rows.size(), w.rows(), w.cols(), 1);
        put(c, l, "mlp", tensor(a.m() * w, a.rows, split));
      } else if (k == "add") {
        const Tensor& x1 = get(c, l, "x1");
        const Tensor& mlp = get(c, l, "mlp");
        complete(mlp, "the MLP output", l);
        same_tokens(x1, "the residual", mlp, "the MLP output");
        Tensor y = tensor(x1.m() + mlp.m(), x1.rows);
        if (!st.recompute) layer_outputs_[{l, c}] = y;
        put(c, l, "y", std::move(y));
      } else if (k == "add.bwd") {
        Tensor dy = output_grad(c, l);
        complete(dy, "the output gradient", l);
        put(c, l, "dmlp", dy);
        put(c, l, "dx1", dy);
        put(c, l, "dy", std::move(dy));
      } else if (k == "down.dx") {
        const Tensor& g = gathered(c, l, "dmlp");
        complete(g, "dmlp", l);
        const Matrix& w = weight(c, l, kDown);
        expect(op, g.rows.size(), w.cols(), w.rows(), 1);
        put(c, l, "da", tensor(g.m() * w.transpose(), g.rows));
      } else if (k == "down.dw") {
        const Tensor& a = get(c, l, "a");
        const Tensor& g = gathered(c, l, "dmlp");
        complete(g, "dmlp", l);
        same_tokens(a, "the activation's output", g, "dmlp");
        expect(op, a.m().cols(), a.rows.size(), g.m().cols(), 1);
        put(c, l, "dWdown", tensor(a.m().transpose() * g.m(), {}, partial_tokens(a)));
      } else if (k == "act.bwd") {
        const Tensor& u = get(c, l, "u");
        const Tensor& da = get(c, l, "da");
        same_tokens(u, "u", da, "da");
        put(c, l, "du", tensor(act_backward(u.m(), da.m(), sh.f, D.gated), u.rows));
      } else if (k == "up.dx") {
        const Tensor& du = get(c, l, "du");
        const Matrix& w = weight(c, l, kUp);
        expect(op, du.rows.size(), w.cols(), w.rows(), 1);
        put(c, l, "dn2", tensor(du.m() * w.transpose(), du.rows, split));
      } else if (k == "up.dw") {
        const Tensor& n2 = gathered(c, l, "n2");
        const Tensor& du = get(c, l, "du");
        complete(n2, "n2", l);
        same_tokens(n2, "n2", du, "du");
        expect(op, n2.m().cols(), n2.rows.size(), du.m().cols(), 1);
        put(c, l, "dWup", tensor(n2.m().transpose() * du.m(), {}, partial_tokens(n2)));
      } else if (k == "add_ln2.bwd") {
        const Tensor& x1 = get(c, l, "x1");
        const Tensor& dn2 = get(c, l, "dn2");
        const Tensor& dx1 = get(c, l, "dx1");
        complete(dn2, "dn2", l);
        same_tokens(x1, "the residual", dn2, "dn2");
        same_tokens(x1, "the residual", dx1, "its gradient");
        Matrix dxa, dg;
        rms_backward(x1.m(), weight(c, l, kG2), dn2.m(), dxa, dg);
        Tensor next = tensor(dx1.m() + dxa, dx1.rows);
        put(c, l, "dg_ln2", tensor(std::move(dg), {}, partial_tokens(x1)));
        put(c, l, "dattn", next);
        put(c, l, "dx1", std::move(next));
      } else if (k == "out.dx") {
        const Tensor& g = gathered(c, l, "dattn");
        complete(g, "dattn", l);
        const Matrix& w = weight(c, l, kOut);
        expect(op, g.rows.size(), w.cols(), w.rows(), 1);
        put(c, l, "dctx", tensor(g.m() * w.transpose(), g.rows));
      } else if (k == "out.dw") {
        const Tensor& ctx = get(c, l, "ctx");
        const Tensor& g = gathered(c, l, "dattn");
        complete(g, "dattn", l);
        same_tokens(ctx, "ctx", g, "dattn");
        expect(op, ctx.m().cols(), ctx.rows.size(), g.m().cols(), 1);
        put(c, l, "dWo", tensor(ctx.m().transpose() * g.m(), {}, partial_tokens(ctx)));
      } else if (k == "pv.dp") {
        const Tensor& dctx = get(c, l, "dctx");
        const Tensor& qkv = get(c, l, "qkv");
        same_tokens(dctx, "dctx", qkv, "qkv");
        const Attention at{D, sh, sequences(qkv, "qkv")};
        expect(op, D.s, D.d, D.keys, at.parts());
        Tensor dp;
        dp.parts = at.probs_grad(dctx.m(), qkv.m());
        dp.rows = qkv.rows;
        put(c, l, "dp", std::move(dp));
      } else if (k == "pv.dv") {
        const Tensor& p = get(c, l, "p");
        const Tensor& dctx = get(c, l, "dctx");
        same_tokens(p, "p", dctx, "dctx");
        const Attention at{D, sh, sequences(dctx, "dctx")};
        expect(op, D.keys, D.s, D.d, at.parts());
        put(c, l, "dv", tensor(at.values_grad(p.parts, dctx.m()), dctx.rows));
      } else if (k == "softmax.bwd") {
        const Tensor& p = get(c, l, "p");
        Tensor ds = get(c, l, "dp");
        same_tokens(p, "p", ds, "dp");
        for (std::size_t i = 0; i < ds.parts.size(); ++i)
          ds.parts[i] = softmax_backward(p.parts[i], ds.parts[i], D.scale);
        put(c, l, "ds", std::move(ds));
      } else if (k == "qk.dq" || k == "qk.dk") {
        const Tensor& ds = get(c, l, "ds");
        const Tensor& qkv = get(c, l, "qkv");
        same_tokens(ds, "ds", qkv, "qkv");
        const Attention at{D, sh, sequences(qkv, "qkv")};
        if (k == "qk.dq") {
          expect(op, D.s, D.keys, D.d, at.parts());
          put(c, l, "dq", tensor(at.queries_grad(ds.parts, qkv.m()), qkv.rows));
        } else {
          expect(op, D.keys, D.s, D.d, at.parts());
          put(c, l, "dk", tensor(at.keys_grad(ds.parts, qkv.m()), qkv.rows));
        }
      } else if (k == "qkv.dx") {
        const Matrix dqkv = qkv_grad(c, l);
        const Matrix& w = weight(c, l, kQkv);
        expect(op, dqkv.rows(), w.cols(), w.rows(), 1);
        put(c, l, "dn1", tensor(dqkv * w.transpose(), get(c, l, "dq").rows, split));
      } else if (k == "qkv.dw") {
        const Matrix dqkv = qkv_grad(c, l);
        const Tensor& n1 = gathered(c, l, "n1");
        complete(n1, "n1", l);
        same_tokens(n1, "n1", get(c, l, "dq"), "dqkv");
        expect(op, n1.m().cols(), n1.rows.size(), dqkv.cols(), 1);
        put(c, l, "dWqkv", tensor(n1.m().transpose() * dqkv, {}, partial_tokens(n1)));
      } else if (k == "ln1.bwd") {
        const Tensor& x = get(c, l, "x");
        const Tensor& dn1 = get(c, l, "dn1");
        const Tensor& dx1 = get(c, l, "dx1");
        complete(dn1, "dn1", l);
        same_tokens(x, "the input", dn1, "dn1");
        same_tokens(x, "the input", dx1, "the residual's gradient");
        Matrix dxa, dg;
        rms_backward(x.m(), weight(c, l, kG1), dn1.m(), dxa, dg);
        put(c, l, "dg_ln1", tensor(std::move(dg), {}, partial_tokens(x)));
        put(c, l, "dx", tensor(dx1.m() + dxa, x.rows));
      } else {
        throw Failure{fmt::format("the verifier does not execute '{}'", k)};
      }
    });
  }
  // [dQ | dK | dV] of the chip's heads.
  Matrix qkv_grad(ChipId c, std::uint64_t l) const {
    const Tensor& dq = get(c, l, "dq");
    const Tensor& dk = get(c, l, "dk");
    const Tensor& dv = get(c, l, "dv");
    same_tokens(dq, "dq", dk, "dk");
    same_tokens(dq, "dq", dv, "dv");
    Matrix out(dq.m().rows(), dq.m().cols() + dk.m().cols() + dv.m().cols());
    out << dq.m(), dk.m(), dv.m();
    return out;
  }

  // ---------------------------------------------------------------- collectives
  // Gathers (rows in rank order), reduce-scatters (sum, rank r keeps the r-th
  // rows) and all-reduces of activations over each group of the op.
  void activation_collective(const Op& op, std::uint64_t l, const std::string& in, const std::string& out) {
    for (const std::vector<ChipId>& g : groups(op)) {
      std::vector<const Tensor*> ts;
      for (ChipId c : g) {
        try {
          ts.push_back(&get(c, l, in));
        } catch (const Failure& f) {
          throw Failure{fmt::format("chip {}: {}", chip(c), f.what)};
        }
      }
      const Index cols = ts.front()->m().cols();
      if (op.kind == OpKind::AllGather) {
        Index rows = 0;
        for (std::size_t i = 0; i < ts.size(); ++i) {
          if (ts[i]->partial)
            throw Failure{fmt::format("gathers {}, which is still partial sums: reduce it first", in)};
          if (i > 0 && ts[i]->rows.begin != ts[i - 1]->rows.end)
            throw Failure{
                fmt::format("the blocks of {} it gathers do not line up: chip {} holds tokens {}..{}, chip "
                            "{} before it {}..{}",
                            in, chip(g[i]), ts[i]->rows.begin, ts[i]->rows.end, chip(g[i - 1]), ts[i - 1]->rows.begin,
                            ts[i - 1]->rows.end)};
          rows += ts[i]->rows.size();
        }
        expect_bytes(op, rows * cols, "the gathered " + in);
        Matrix m(rows, cols);
        Index at = 0;
        for (const Tensor* t : ts) {
          m.middleRows(at, t->m().rows()) = t->m();
          at += t->m().rows();
        }
        const Tensor result = tensor(std::move(m), {ts.front()->rows.begin, ts.back()->rows.end});
        for (ChipId c : g) put(c, l, out, result);
        continue;
      }
      if (op.kind != OpKind::AllReduce && op.kind != OpKind::ReduceScatter)
        throw Failure{fmt::format("moves {} with a {}", in, kind_name(op.kind))};
      Matrix sum = Matrix::Zero(ts.front()->m().rows(), cols);
      for (std::size_t i = 0; i < ts.size(); ++i) {
        if (!ts[i]->partial)
          throw Failure{
              fmt::format("sums {}, which chip {} holds complete (not partial sums): the result is {} "
                          "times too large",
                          in, chip(g[i]), g.size())};
        same_tokens(*ts.front(), in + " of chip " + chip(g.front()), *ts[i], in + " of chip " + chip(g[i]));
        sum += ts[i]->m();
      }
      expect_bytes(op, sum.size(), in);
      const bool partial = !covers_tensor(op.collective().mesh_axes);
      const Range rows = ts.front()->rows;
      if (op.kind == OpKind::AllReduce) {
        const Tensor result = tensor(std::move(sum), rows, partial);
        for (ChipId c : g) put(c, l, out, result);
        continue;
      }
      const Index n = ix(g.size());
      if (rows.size() % n != 0)
        throw Failure{fmt::format("scatters {} tokens of {} over {} chips", rows.size(), in, n)};
      const Index part = rows.size() / n;
      for (Index i = 0; i < n; ++i)
        put(g[static_cast<std::size_t>(i)], l, out,
            tensor(sum.middleRows(i * part, part), {rows.begin + i * part, rows.begin + (i + 1) * part}, partial));
    }
  }

  // FSDP: the layer's flat buffer gathered from the group's shards.
  void weight_gather(const Op& op, std::uint64_t l) {
    if (op.kind != OpKind::AllGather)
      throw Failure{fmt::format("brings layer {}'s weights with a {}: expected an all_gather", l, kind_name(op.kind))};
    if (!fsdp_problem_.empty()) throw Failure{fsdp_problem_};
    for (const std::vector<ChipId>& g : groups(op)) {
      Matrix flat(flat_, 1);
      Index at = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        const ChipId c = g[i];
        if (tp_rank_[c] != tp_rank_[g.front()])
          throw Failure{fmt::format("gathers the weights of different tensor-parallel shards (chips {} and {})",
                                    chip(g.front()), chip(c))};
        if (!has(c, l, "Wpiece"))
          throw Failure{fmt::format("chip {} holds no shard of layer {}'s weights", chip(c), l)};
        const Tensor& piece = get(c, l, "Wpiece");
        if (piece.rows.begin != at || piece.rows.end > flat_)
          throw Failure{
              fmt::format("the weight shards it gathers do not line up: chip {} holds elements {}..{}, "
                          "expected from {}",
                          chip(c), piece.rows.begin, piece.rows.end, at)};
        flat.middleRows(at, piece.rows.size()) = piece.m();
        at = piece.rows.end;
      }
      if (at != flat_)
        throw Failure{fmt::format("the group's shards hold {} of the layer's {} weights per chip", at, flat_)};
      expect_bytes(op, flat_, fmt::format("layer {}'s weights on a chip", l));
      const Blocks blocks = unflatten(flat, D_, shard_);
      Tensor w;
      w.parts.assign(blocks.begin(), blocks.end());
      w.rows = {0, flat_};
      for (ChipId c : g) put(c, l, "W", w);
    }
  }

  // The chip's weight gradients of layer l as one flat buffer (the layout FSDP shards).
  const Tensor& flat_grads(ChipId c, std::uint64_t l) {
    if (has(c, l, "grad")) return get(c, l, "grad");
    Matrix v(flat_, 1);
    bool partial = false;
    Index at = 0;
    for (int b = 0; b < kBlocks; ++b) {
      const Tensor& t = get(c, l, grad_name(b));
      const Matrix& m = t.m();
      v.middleRows(at, m.size()) = Eigen::Map<const Eigen::VectorXd>(m.data(), m.size());
      at += m.size();
      partial = partial || t.partial;
    }
    put(c, l, "grad", tensor(std::move(v), {0, flat_}, partial));
    return get(c, l, "grad");
  }

  // FSDP reduce-scatters and data-parallel reductions of the flat gradients.
  void reduce_gradients(const Op& op, std::uint64_t l) {
    if (op.kind != OpKind::AllReduce && op.kind != OpKind::ReduceScatter)
      throw Failure{fmt::format("reduces gradients with a {}", kind_name(op.kind))};
    for (const std::vector<ChipId>& g : groups(op)) {
      std::vector<const Tensor*> ts;
      for (ChipId c : g) {
        try {
          ts.push_back(&flat_grads(c, l));
        } catch (const Failure& f) {
          throw Failure{fmt::format("chip {}: {}", chip(c), f.what)};
        }
      }
      Matrix sum = Matrix::Zero(ts.front()->m().rows(), 1);
      bool partial = false;
      for (std::size_t i = 0; i < ts.size(); ++i) {
        if (!(ts[i]->rows == ts.front()->rows))
          throw Failure{fmt::format("chip {} holds gradient elements {}..{}, chip {} {}..{}", chip(g[i]),
                                    ts[i]->rows.begin, ts[i]->rows.end, chip(g.front()), ts.front()->rows.begin,
                                    ts.front()->rows.end)};
        sum += ts[i]->m();
        partial = partial || ts[i]->partial;
      }
      if (covers_tensor(op.collective().mesh_axes)) partial = false;
      expect_bytes(op, sum.size(), fmt::format("layer {}'s gradient buffer", l));
      const Range rows = ts.front()->rows;
      if (op.kind == OpKind::AllReduce) {
        const Tensor result = tensor(std::move(sum), rows, partial);
        for (ChipId c : g) put(c, l, "grad", result);
        continue;
      }
      const Index n = ix(g.size());
      if (rows.size() % n != 0)
        throw Failure{fmt::format("scatters {} gradient elements over {} chips", rows.size(), n)};
      const Index part = rows.size() / n;
      for (Index i = 0; i < n; ++i)
        put(g[static_cast<std::size_t>(i)], l, "grad",
            tensor(sum.middleRows(i * part, part), {rows.begin + i * part, rows.begin + (i + 1) * part}, partial));
    }
  }

  // The norm gains' gradients summed over the group (sequence parallelism: each
  // chip's cover its own tokens only).
  void reduce_gains(const Op& op, std::uint64_t l) {
    if (op.kind != OpKind::AllReduce)
      throw Failure{
          fmt::format("reduces the norm gains' gradients with a {}: expected an all_reduce", kind_name(op.kind))};
    for (const std::vector<ChipId>& g : groups(op)) {
      Matrix sum = Matrix::Zero(2 * D_.h, 1);
      bool partial = false;
      for (ChipId c : g) {
        if (has(c, l, "grad"))
          throw Failure{fmt::format("chip {}: comes after layer {}'s gradients were reduced", chip(c), l)};
        try {
          const Tensor& g1 = get(c, l, "dg_ln1");
          const Tensor& g2 = get(c, l, "dg_ln2");
          sum.topRows(D_.h) += g1.m();
          sum.bottomRows(D_.h) += g2.m();
          partial = partial || g1.partial || g2.partial;
        } catch (const Failure& f) {
          throw Failure{fmt::format("chip {}: {}", chip(c), f.what)};
        }
      }
      expect_bytes(op, sum.size(), "the norm gains' gradients");
      if (covers_tensor(op.collective().mesh_axes)) partial = false;
      for (ChipId c : g) {
        put(c, l, "dg_ln1", tensor(sum.topRows(D_.h), {}, partial));
        put(c, l, "dg_ln2", tensor(sum.bottomRows(D_.h), {}, partial));
      }
    }
  }

  // A pipeline send: every pair's layer output (forward: the latest layer the
  // source ran) or input gradient (backward: the earliest) to its destination.
  void send(const Op& op, bool forward) {
    for (const auto& [src, dst] : workloads::send_pairs(op)) {
      if (src >= coords_.size() || dst >= coords_.size()) throw Failure{"sends between chips outside the mesh"};
      std::optional<std::uint64_t> layer;
      for (const auto& [key, t] : state_[src])
        if (key.second == (forward ? "y" : "dx") && (!layer || (forward ? key.first > *layer : key.first < *layer)))
          layer = key.first;
      if (!layer)
        throw Failure{fmt::format("chip {} has no layer {} to send", chip(src), forward ? "output" : "input gradient")};
      if (!forward && *layer == 0) throw Failure{fmt::format("chip {} sends layer 0's input gradient on", chip(src))};
      const std::uint64_t to = forward ? *layer + 1 : *layer - 1;
      const std::string name = forward ? "x" : "dy";
      try {
        const Tensor& t = get(src, *layer, forward ? "y" : "dx");
        const auto bytes = static_cast<std::uint64_t>(t.m().size()) * e_;
        if (bytes != op.comm_bytes())
          throw Failure{fmt::format("chip {} sends layer {}'s {} of {} bytes, the op {} bytes", chip(src), *layer,
                                    forward ? "output" : "input gradient", bytes, op.comm_bytes())};
        put(dst, to, name, t);
      } catch (const NotRun&) {
        ++not_run_;
        state_[dst][{to, name}].broken = true;
      }
    }
  }

  // ---------------------------------------------------------------- comparing
  void compare_layer(std::uint64_t l, Report& r) {
    const std::vector<ChipId> chips = stage_chips(stage_of_layer(l));
    compare_activation(r, fmt::format("L{} output (forward)", l), chips, outputs_ref_, l,
                       [&](ChipId c) -> const Tensor* {
                         const auto it = layer_outputs_.find({l, c});
                         if (it != layer_outputs_.end()) return &it->second;
                         const auto y = state_[c].find({l, "y"});  // broken by a failed op
                         return y != state_[c].end() && y->second.broken ? &y->second : nullptr;
                       });
    compare_activation(r, fmt::format("L{} input gradient", l), chips, input_grads_ref_, l,
                       [&](ChipId c) -> const Tensor* {
                         const auto it = state_[c].find({l, "dx"});
                         return it == state_[c].end() ? nullptr : &it->second;
                       });
    compare_gradients(r, l, chips);
  }

  template <class Find>
  void compare_activation(Report& r, const std::string& label, const std::vector<ChipId>& chips,
                          const std::vector<std::vector<Matrix>>& reference, std::uint64_t l, Find&& find) const {
    OpCheck check{label, "ok", 0, 0, ""};
    double err = 0;
    for (const auto& per_replica : reference) check.scale = std::max(check.scale, per_replica[l].cwiseAbs().maxCoeff());
    for (ChipId c : chips) {
      const Tensor* t = find(c);
      std::string problem;
      if (!t)
        problem = "never computed";
      else if (t->broken)
        problem = "not computed: an op before it failed";
      else if (t->partial)
        problem = "left as partial sums over the tensor-parallel group";
      else if (t->rows.begin < 0 || t->rows.end > D_.tokens() || t->m().rows() != t->rows.size() ||
               t->m().cols() != D_.h)
        problem = fmt::format("holds a {}x{} block, not tokens of the layer's {}x{}", t->m().rows(), t->m().cols(),
                              D_.tokens(), D_.h);
      if (!problem.empty()) {
        check.status = "FAILED";
        check.scale = 0;  // nothing compared
        check.detail = fmt::format("chip {}: {}", chip(c), problem);
        r.ops.push_back(check);
        return;
      }
      const Matrix& ref = reference[static_cast<std::size_t>(replica_[c])][l];
      err = std::max(err, (t->m() - ref.middleRows(t->rows.begin, t->rows.size())).cwiseAbs().maxCoeff());
    }
    finish(check, err);
    r.ops.push_back(check);
  }
  static void finish(OpCheck& check, double err) {
    check.max_error = check.scale > 0 ? err / check.scale : err;
    if (!(std::isfinite(err) && err <= kTolerance * check.scale)) {
      check.status = "FAILED";
      if (check.detail.empty()) check.detail = "differs from the unsharded layer";
    }
  }

  // Every chip's gradients after the reductions (its flat shard, or all of its
  // tensor-parallel blocks) against the reference summed over the replicas;
  // together the chips must hold every element.
  void compare_gradients(Report& r, std::uint64_t l, const std::vector<ChipId>& chips) {
    const Blocks& ref = grads_[l];
    Blocks err;  // per element, NaN where no chip holds it
    for (int b = 0; b < kBlocks; ++b)
      err[static_cast<std::size_t>(b)] =
          Matrix::Constant(ref[static_cast<std::size_t>(b)].rows(), ref[static_cast<std::size_t>(b)].cols(),
                           std::numeric_limits<double>::quiet_NaN());
    std::array<std::string, kBlocks> problem;  // per block, the first chip that has no result
    bool partial = false;
    const auto hold = [&](ChipId c, int b, Index li, Index lj, double value) {
      const auto [gi, gj] = to_global(b, li, lj, tp_rank_[c], D_, shard_);
      const auto bi = static_cast<std::size_t>(b);
      double& slot = err[bi](gi, gj);
      const double e = std::abs(value - ref[bi](gi, gj));
      slot = std::isnan(slot) ? e : std::max(slot, e);
    };
    const auto note = [&](int b, const std::string& what) {
      std::string& p = problem[static_cast<std::size_t>(b)];
      if (p.empty()) p = what;
    };
    for (ChipId c : chips) {
      // After a reduction: the flat buffer (or the chip's shard of it).
      if (const auto it = state_[c].find({l, "grad"}); it != state_[c].end()) {
        const Tensor& g = it->second;
        if (g.broken) {
          for (int b = 0; b < kBlocks; ++b)
            note(b, fmt::format("chip {}: not computed: an op before it failed", chip(c)));
          continue;
        }
        partial = partial || g.partial;
        for (Index k = g.rows.begin; k < g.rows.end; ++k) {
          const auto [b, li, lj] = locate(k, D_, shard_);
          hold(c, b, li, lj, g.m()(k - g.rows.begin));
        }
        continue;
      }
      // Else the chip's blocks as the backward pass left them.
      for (int b = 0; b < kBlocks; ++b) {
        const auto it = state_[c].find({l, grad_name(b)});
        if (it == state_[c].end()) {
          note(b, fmt::format("chip {}: holds no {} of layer {}: no op computed it", chip(c), grad_name(b), l));
          continue;
        }
        const Tensor& g = it->second;
        const auto [rows, cols] = block_shape(b, D_, shard_);
        if (g.broken) {
          note(b, fmt::format("chip {}: not computed: an op before it failed", chip(c)));
          continue;
        }
        if (g.m().rows() != rows || g.m().cols() != cols) {
          note(b, fmt::format("chip {}: holds a {}x{} gradient, not the {}x{} of its weights", chip(c), g.m().rows(),
                              g.m().cols(), rows, cols));
          continue;
        }
        partial = partial || g.partial;
        for (Index j = 0; j < cols; ++j)
          for (Index i = 0; i < rows; ++i) hold(c, b, i, j, g.m()(i, j));
      }
    }
    for (const Param& p : params_of(D_)) {
      const auto bi = static_cast<std::size_t>(p.block);
      const Index c0 = p.col_begin, c1 = p.col_end < 0 ? ref[bi].cols() : p.col_end;
      OpCheck check{fmt::format("L{} grad {}", l, p.name), "ok", 0, 0, ""};
      const Matrix e = err[bi].middleCols(c0, c1 - c0);
      const Index missing = (e.array() != e.array()).count();
      if (!problem[bi].empty() || missing > 0) {
        check.status = "FAILED";
        check.detail = !problem[bi].empty()
                           ? problem[bi]
                           : fmt::format("{} of its {} elements are held by no chip of the stage", missing, e.size());
        r.ops.push_back(check);
        continue;
      }
      check.scale = ref[bi].middleCols(c0, c1 - c0).cwiseAbs().maxCoeff();
      finish(check, e.maxCoeff());
      if (check.status == "FAILED" && partial)
        check.detail +=
            " (some chip's gradients are partial sums over the tensor-parallel group's tokens: a "
            "reduction is missing)";
      r.ops.push_back(check);
    }
  }

  const Workload& w_;
  const Training& t_;
  Dims D_;
  topology::Torus torus_;
  std::vector<std::vector<int>> coords_;
  std::vector<ChipId> chips_;  // the chips on the mesh
  Index tp_ = 1;
  Shard shard_;
  bool sp_ = false;
  std::uint64_t e_ = 2;
  std::uint64_t layers_ = 0;
  std::vector<std::uint64_t> layer_stage_;  // per layer: its pipeline stage
  Index flat_ = 0;      // a chip's weights of one layer (before FSDP)
  Index replicas_ = 1;  // data x fsdp
  std::vector<Index> tp_rank_, fsdp_rank_, replica_;
  std::string fsdp_problem_;
  // Data and the unsharded reference.
  std::vector<Blocks> weights_, grads_;                             // per layer; gradients summed over the replicas
  std::vector<Matrix> inputs_, output_grads_;                       // per replica
  std::vector<std::vector<Matrix>> outputs_ref_, input_grads_ref_;  // [replica][layer]
  // Per chip: what it holds, by (layer, name).
  std::vector<std::map<Key, Tensor>> state_;
  std::vector<std::set<std::uint64_t>> backward_started_;
  std::map<std::pair<std::uint64_t, ChipId>, Tensor> layer_outputs_;  // what the forward pass's add wrote
  std::size_t not_run_ = 0;
};

// Values the verifier holds at once, about: every layer's activations,
// attention blocks and weights, on the chips and in the reference.
double verify_values(const Workload& w) {
  const Training& t = *w.training;
  const ModelSpec& m = t.model;
  const double S = static_cast<double>(t.microbatch * m.seq_len), h = static_cast<double>(m.d_model);
  const double qkv = static_cast<double>((m.heads + 2 * m.kv_heads) * m.head_dim);
  const double up = static_cast<double>((m.gated ? 2 : 1) * m.ffn), f = static_cast<double>(m.ffn);
  const double attention = 6.0 * static_cast<double>(t.microbatch * m.heads) * static_cast<double>(m.seq_len) *
                           static_cast<double>(m.seq_len);
  const double weights = 3.0 * (h * qkv + static_cast<double>(m.heads * m.head_dim) * h + h * up + f * h + 2 * h);
  const double layer = S * (12 * h + 3 * qkv + 3 * up + 3 * f) + attention + weights;
  // A chip holds about 1/tp of each of its stage's layers; the reference every layer once per replica.
  const double chips = static_cast<double>(w.make_torus().num_chips()), layers = static_cast<double>(m.layers);
  const double sharded = chips * layers / static_cast<double>(t.tp * t.pp);
  return (sharded + static_cast<double>(t.dp * t.fsdp) * layers) * layer;
}

// 4.2 million, 1.4 billion, 3.1e+15.
std::string count_words(double n) {
  if (n < 1e9) return fmt::format("{:.1f} million", n / 1e6);
  if (n < 1e12) return fmt::format("{:.1f} billion", n / 1e9);
  return fmt::format("{:.1e}", n);
}

}  // namespace

void check_training_verifiable(const Workload& w) {
  if (!w.training) return;
  const Training& t = *w.training;
  const ModelSpec& m = t.model;
  const auto refuse = [&](const std::string& message) { throw InputError(w.file, "/training", message); };
  if (m.biases)
    refuse(
        "--verify executes bias-free layers (RMSNorm with a gain, as LLaMA's): give the model \"biases\": false, "
        "or run without --verify");
  if (m.experts > 0)
    refuse(
        "--verify does not execute mixture-of-experts layers yet: give the model no experts, or run without "
        "--verify");
  if (t.kv_replicas > 1)
    refuse(
        fmt::format("--verify does not execute replicated KV heads yet (tensor parallelism {} over {} KV heads): "
                    "run without --verify",
                    t.tp, m.kv_heads));
  if (t.cp > 1) refuse("--verify does not execute context parallelism yet: drop \"context\", or run without --verify");
  if (t.gradient_bytes != 2)
    refuse("--verify executes 16-bit gradient reductions: give \"gradient_dtype\": \"bf16\", or run without --verify");
  if (m.parallel_block)
    refuse("--verify does not execute parallel attention+MLP blocks yet: give the model \"parallel_block\": false, or "
           "run without --verify");
  if (t.overlap.tensor)
    refuse(
        "--verify does not execute collective matmuls yet: give \"overlap\": {\"tensor\": false}, or run without "
        "--verify");
  const double values = verify_values(w);
  if (values > kMaxValues)
    refuse(
        fmt::format("--verify would hold about {} values in double precision (every chip's shards of {} layers "
                    "and the unsharded reference), more than {}: shrink d_model, ffn, seq_len, heads, layers, the "
                    "microbatch or the mesh",
                    count_words(values), m.layers, count_words(kMaxValues)));
}

Report verify_training(const Workload& w) {
  MESHSIM_ASSERT(w.training, "verify_training needs a training workload");
  check_training_verifiable(w);
  return Machine(w).run();
}

std::string format_training_report(const Report& r) {
  std::string out =
      "verification of the training step's layers on small random data (Eigen, double precision, every chip its own "
      "shards, microbatch 0):";
  for (const auto& [dim, size] : r.dims) out += fmt::format(" {}={}", dim, size);
  out += "\n";
  std::size_t width = 24;
  for (const OpCheck& c : r.ops)
    if (c.status != "skipped" && c.status != "not run") width = std::max(width, c.op.size());
  for (const OpCheck& c : r.ops) {
    if (c.status == "skipped" || c.status == "not run") {
      out += fmt::format("  {}: {}: {}\n", c.status == "skipped" ? "not executed" : "not run", c.op, c.detail);
      continue;
    }
    std::string line = fmt::format("  {:<{}} {:<6}", c.op, width, c.status == "ok" ? "PASS" : c.status);
    if (c.scale > 0) line += fmt::format(" max rel error {:.2e}", c.max_error);
    if (!c.detail.empty() && c.status != "ok") line += "  " + c.detail;
    out += line + "\n";
  }
  for (const std::string& p : r.problems) out += "  problem: " + p + "\n";
  out += r.ok() ? "verification passed\n" : "verification FAILED\n";
  return out;
}

namespace detail {

double reference_gradient_error(const ModelSpec& model, std::uint64_t microbatch, bool causal) {
  const Dims D = dims_of(model, microbatch, causal);
  std::mt19937_64 rng(7);
  Blocks W = random_weights(rng, D);
  Matrix x = random_matrix(rng, D.tokens(), D.h, 1.0);
  const Matrix dy = random_matrix(rng, D.tokens(), D.h, 1.0);
  Blocks g = zero_blocks(D);
  const Matrix dx = reference_backward(D, W, reference_forward(D, W, x), dy, g);
  const auto loss = [&] { return reference_forward(D, W, x).y.cwiseProduct(dy).sum(); };
  const double step = 1e-5;
  double worst = 0;
  // Each weight block and the input: a few elements spread over it.
  const auto probe = [&](Matrix& value, const Matrix& analytic) {
    const double scale = std::max(analytic.cwiseAbs().maxCoeff(), 1e-12);
    const Index n = value.size();
    for (Index k = 0; k < n; k += std::max<Index>(1, n / 7)) {
      double& v = value.data()[k];
      const double saved = v;
      v = saved + step;
      const double plus = loss();
      v = saved - step;
      const double minus = loss();
      v = saved;
      worst = std::max(worst, std::abs((plus - minus) / (2 * step) - analytic.data()[k]) / scale);
    }
  };
  for (int b = 0; b < kBlocks; ++b) probe(W[static_cast<std::size_t>(b)], g[static_cast<std::size_t>(b)]);
  probe(x, dx);
  return worst;
}

}  // namespace detail

}  // namespace meshsim::verify
