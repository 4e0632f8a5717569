#include "hlo/lower.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "base/error.hpp"
#include "workloads/imported.hpp"

namespace meshsim::hlo {

using workloads::CollectiveOp;
using workloads::MatmulOp;
using workloads::Op;
using workloads::SendOp;

namespace {

// The most ops an import may lower to (a loop's body once per trip), and the
// largest matmul and collective.
constexpr std::size_t kMaxOps = std::size_t{1} << 21;
constexpr std::uint64_t kMaxProducts = std::uint64_t{1} << 62;
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 62;
constexpr std::uint64_t kMaxVisits = std::uint64_t{1} << 24;

// An f32 dot's bf16 passes on the TPU's MXU, by the precision XLA was given
// (workloads::MatmulOp::bf16_passes): operand_precision={default|high|highest}
// (the larger of the two operands') or algorithm=dot_bf16_bf16_f32[_x3|_x6];
// DEFAULT, as JAX and torch_xla leave it, is one pass.
std::uint32_t f32_passes(const Instruction& dot) {
  std::uint32_t passes = 1;
  if (const std::string* p = dot.attr("operand_precision")) {
    if (p->find("high") != std::string::npos) passes = 3;
    if (p->find("highest") != std::string::npos) passes = 6;
  }
  if (const std::string* a = dot.attr("algorithm")) {
    if (a->ends_with("_x3")) passes = 3;
    if (a->ends_with("_x6") || *a == "dot_f32_f32_f32") passes = 6;
  }
  return passes;
}

std::string dtype_of(const Shape& s) {
  const std::string& t = s.type;
  if (t == "bf16") return "bf16";
  if (t == "f16") return "fp16";
  if (t == "f32") return "fp32";
  if (t == "s8" || t == "u8") return "int8";
  if (t.rfind("f8e", 0) == 0) return "fp8";
  return t;
}

std::uint64_t product(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& pick) {
  std::uint64_t p = 1;
  for (std::int64_t d : pick) p *= static_cast<std::uint64_t>(dims[static_cast<std::size_t>(d)]);
  return p;
}

class Lowering {
 public:
  Lowering(const Module& m, workloads::Workload& w, ImportReport& rep, std::vector<int> devices,
           std::optional<std::int64_t> trip_count)
      : m_(m), w_(w), rep_(rep), torus_(w.make_torus()), devices_(std::move(devices)), trip_count_(trip_count) {}

  void run(const Computation& entry) {
    active_.push_back(&entry);
    (void)computation(entry, "", {});
  }

 private:
  // What a value carries for async pairs: the op an async start issued (its
  // handle; no op for a collective that moves nothing), or a tuple of values
  // (loop state, a call's results); null for a value that carries neither. A
  // -done reads its start through tuples, get-tuple-element, loop state (XLA's
  // collective pipeliner starts a collective in one trip and ends it in the
  // next) and calls.
  struct Carried;
  using Value = std::shared_ptr<const Carried>;
  struct Carried {
    bool handle = false;
    std::optional<std::uint32_t> op;
    std::vector<Value> elements;
    std::string recv_channel;  // a recv's channel_id: its recv-done waits for that channel's send
  };
  using Frame = std::map<const Instruction*, Value>;

  // A computation's instructions with `args` as its parameters; the root's value.
  Value computation(const Computation& c, const std::string& prefix, const std::vector<Value>& args) {
    Frame frame;
    for (const Instruction& inst : c.instructions) {
      Value v = instruction(inst, c, prefix, frame, args);
      if (v) frame[&inst] = std::move(v);
    }
    const Instruction* root = c.root();
    const auto it = root ? frame.find(root) : frame.end();
    return it == frame.end() ? nullptr : it->second;
  }

  // A called computation's instructions; a computation that calls itself
  // (through any chain) is an error, not an endless recursion.
  Value enter(const Computation& callee, const Instruction& at, const std::string& prefix, const std::vector<Value>& args) {
    if (std::find(active_.begin(), active_.end(), &callee) != active_.end())
      fail(at, fmt::format("computation '{}' calls itself", callee.name));
    active_.push_back(&callee);
    Value v = computation(callee, prefix, args);
    active_.pop_back();
    return v;
  }

  // The value of operand i of `inst` in `frame` (null when it carries none).
  Value operand_value(const Instruction& inst, const Computation& c, const Frame& frame, std::size_t i) const {
    if (i >= inst.operands.size()) return nullptr;
    const Instruction* o = c.find(inst.operands[i]);
    const auto it = o ? frame.find(o) : frame.end();
    return it == frame.end() ? nullptr : it->second;
  }

  static Value handle(std::optional<std::uint32_t> op) {
    auto v = std::make_shared<Carried>();
    v->handle = true;
    v->op = op;
    return v;
  }

  [[noreturn]] void fail(const Instruction& inst, const std::string& message) const {
    throw InputError(m_.file, std::to_string(inst.line), fmt::format("{}: {}", inst.name, message));
  }

  int chip_of(int device) const { return devices_.empty() ? device : devices_[static_cast<std::size_t>(device)]; }

  const Shape& operand_shape(const Instruction& inst, const Computation& c, std::size_t i) const {
    if (i >= inst.operands.size()) fail(inst, fmt::format("expected at least {} operands", i + 1));
    const Instruction* o = c.find(inst.operands[i]);
    if (!o) fail(inst, fmt::format("operand '{}' is not in computation '{}'", inst.operands[i], c.name));
    if (o->shape.type.empty() && !o->shape.is_tuple)  // a test-style instruction printed without its shape
      fail(inst, fmt::format("operand '{}' has no shape in the dump: meshsim cannot size what reads it", o->name));
    return o->shape;
  }

  std::uint32_t emit(Op op, const Instruction& inst, const std::string& prefix, bool blocking) {
    if (w_.ops.size() >= kMaxOps)
      fail(inst, fmt::format("the module lowers to more than {} ops (loops are unrolled by their trip counts)", kMaxOps));
    op.name = prefix + inst.name;
    op.group = op.name;
    op.pointer = std::to_string(inst.line);
    std::sort(frontier_.begin(), frontier_.end());
    frontier_.erase(std::unique(frontier_.begin(), frontier_.end()), frontier_.end());
    op.deps = frontier_;
    const auto id = static_cast<std::uint32_t>(w_.ops.size());
    w_.ops.push_back(std::move(op));
    if (blocking) frontier_ = {id};
    return id;
  }

  void matmul(const Instruction& dot, const Computation& c, const std::string& prefix, const Instruction& at) {
    const Shape& lhs = operand_shape(dot, c, 0);
    const Shape& rhs = operand_shape(dot, c, 1);
    if (lhs.is_tuple || rhs.is_tuple) fail(dot, "a dot of tuples");
    const auto dims = [&](const char* key) { return int_list(dot, key, m_).value_or(std::vector<std::int64_t>{}); };
    const std::vector<std::int64_t> lc = dims("lhs_contracting_dims"), rc = dims("rhs_contracting_dims"),
                                    lb = dims("lhs_batch_dims"), rb = dims("rhs_batch_dims");
    for (const auto& [list, shape] : {std::pair{&lc, &lhs}, std::pair{&lb, &lhs}, std::pair{&rc, &rhs}, std::pair{&rb, &rhs}})
      for (std::int64_t d : *list)
        if (d < 0 || static_cast<std::size_t>(d) >= shape->dims.size()) fail(dot, fmt::format("no dimension {}", d));
    const auto free_of = [](const Shape& s, const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
      std::uint64_t p = 1;
      for (std::size_t i = 0; i < s.dims.size(); ++i)
        if (std::find(a.begin(), a.end(), static_cast<std::int64_t>(i)) == a.end() &&
            std::find(b.begin(), b.end(), static_cast<std::int64_t>(i)) == b.end())
          p *= static_cast<std::uint64_t>(s.dims[i]);
      return p;
    };
    Op op(OpKind::Matmul);
    MatmulOp& mm = op.matmul();
    mm.m = free_of(lhs, lc, lb);
    mm.n = free_of(rhs, rc, rb);
    mm.k = product(lhs.dims, lc);
    mm.batch = product(lhs.dims, lb);
    mm.dtype = dtype_of(lhs);
    if (mm.dtype == "fp32" && !w_.hardware.gpu) mm.bf16_passes = f32_passes(dot);  // a TPU's MXU
    emit_matmul(std::move(op), dot, prefix, at);
  }

  // A dot's or convolution's local matmul (none for an empty product); inside
  // a fusion `at` is the fusion and the op is named "dot@fusion".
  void emit_matmul(Op op, const Instruction& inst, const std::string& prefix, const Instruction& at) {
    const MatmulOp& mm = op.matmul();
    if (mm.m == 0 || mm.n == 0 || mm.k == 0 || mm.batch == 0) return;  // an empty product: nothing to compute
    if (static_cast<unsigned __int128>(mm.m) * mm.k * mm.n * mm.batch > kMaxProducts)
      fail(inst, "a matmul of more than 2^62 multiply-adds per chip");
    ++rep_.matmuls;
    emit(std::move(op), at, prefix + (&inst == &at ? "" : inst.name + "@"), true);
  }

  // The sets of chips along each subset of the hardware axes; the subset whose
  // sets are exactly `groups`.
  std::optional<std::vector<int>> axes_of(std::vector<std::vector<int>> groups) const {
    for (auto& g : groups) std::sort(g.begin(), g.end());
    std::sort(groups.begin(), groups.end());
    std::vector<int> big;
    for (int a = 0; a < torus_.num_axes(); ++a)
      if (torus_.axis(a).size > 1) big.push_back(a);
    for (unsigned mask = 1; mask < (1u << big.size()); ++mask) {
      std::vector<int> axes;
      for (std::size_t i = 0; i < big.size(); ++i)
        if (mask & (1u << i)) axes.push_back(big[i]);
      std::map<std::vector<int>, std::vector<int>> by_rest;  // coordinates off the axes -> chips
      for (topology::ChipId c = 0; c < torus_.num_chips(); ++c) {
        std::vector<int> rest;
        for (int a = 0; a < torus_.num_axes(); ++a)
          if (std::find(axes.begin(), axes.end(), a) == axes.end()) rest.push_back(torus_.coord(c, a));
        by_rest[rest].push_back(static_cast<int>(c));
      }
      std::vector<std::vector<int>> sets;
      for (auto& [rest, chips] : by_rest) sets.push_back(std::move(chips));
      std::sort(sets.begin(), sets.end());
      if (sets == groups) return axes;
    }
    return std::nullopt;
  }

  // Every operand's bytes, summed: a collective of several operands (XLA's
  // combiners make them) moves them all. Saturates above 2^62.
  std::uint64_t operands_bytes(const Instruction& inst, const Computation& c) const {
    std::uint64_t b = 0;
    for (std::size_t i = 0; i < inst.operands.size(); ++i)
      b = std::min(b + operand_shape(inst, c, i).bytes(), kMaxBytes + 1);
    return b;
  }

  // A collective: `result` its (per-chip) result shape, `operand_bytes` its
  // inputs' bytes per chip.
  std::optional<std::uint32_t> collective(const Instruction& inst, const std::string& kind, std::uint64_t operand_bytes,
                                          const Shape& result, const std::string& prefix, bool blocking) {
    std::vector<std::vector<int>> groups = device_groups(inst, m_);
    for (auto& g : groups)
      for (int& d : g) d = chip_of(d);
    const std::size_t p = groups.front().size();
    if (std::all_of(groups.begin(), groups.end(), [](const std::vector<int>& g) { return g.size() <= 1; })) {
      ++rep_.trivial;
      return std::nullopt;
    }
    // Groups that are the chips along a set of axes run the axis collectives
    // (the balanced multi-axis schedule); any other groups, rings over their chips.
    const auto axes = axes_of(groups);
    if (!axes && w_.hardware.gpu)
      fail(inst, fmt::format("its groups (of {} devices, e.g. {{{}}}) are not the GPUs of whole nodes, the nodes, or "
                             "all: meshsim runs a GPU cluster's collectives over those",
                             p, fmt::join(groups.front(), ",")));
    Op op;  // a collective: its kind is set below
    CollectiveOp& co = op.collective();
    if (axes) {
      co.mesh_axes = *axes;
      co.hw_axes = *axes;
    } else {
      auto list = std::make_shared<std::vector<std::vector<topology::ChipId>>>();
      auto chips = std::make_shared<std::vector<topology::ChipId>>();
      for (const std::vector<int>& g : groups) {
        if (g.size() != p)
          fail(inst, fmt::format("its replica groups have different sizes ({} and {} devices)", p, g.size()));
        list->emplace_back(g.begin(), g.end());
        chips->insert(chips->end(), g.begin(), g.end());
      }
      std::sort(chips->begin(), chips->end());
      co.groups = std::move(list);
      op.chips = std::move(chips);
      ++rep_.grouped;
    }
    std::uint64_t v = 0;
    if (kind == "all-gather") {
      op.kind = OpKind::AllGather, v = result.bytes();
    } else if (kind == "reduce-scatter") {
      op.kind = OpKind::ReduceScatter, v = operand_bytes;
    } else if (kind == "all-reduce") {
      op.kind = OpKind::AllReduce, v = operand_bytes;
    } else {
      // Its operand split P ways (or, of several operands, operand i to the
      // group's i-th chip): V is P times what each chip holds.
      op.kind = OpKind::AllToAll;
      using U = unsigned __int128;
      v = static_cast<std::uint64_t>(std::min<U>(static_cast<U>(operand_bytes) * p, static_cast<U>(kMaxBytes) + 1));
    }
    if (v > kMaxBytes) fail(inst, "a collective of more than 2^62 bytes");
    co.bytes = std::max<std::uint64_t>(v, 1);
    ++rep_.collectives;
    return emit(std::move(op), inst, prefix, blocking);
  }

  // `bytes`: what each source sends (the operand, or an in-place permute's slice).
  std::optional<std::uint32_t> permute(const Instruction& inst, std::uint64_t bytes, const std::string& prefix,
                                       bool blocking) {
    std::vector<std::pair<topology::ChipId, topology::ChipId>> pairs;
    for (const auto& [s, t] : source_target_pairs(inst, m_))
      if (s != t) pairs.emplace_back(static_cast<topology::ChipId>(chip_of(s)), static_cast<topology::ChipId>(chip_of(t)));
    if (pairs.empty()) {
      ++rep_.trivial;
      return std::nullopt;
    }
    Op op(OpKind::Send);
    SendOp& send = op.send();
    send.src = pairs.front().first, send.dst = pairs.front().second;
    if (pairs.size() > 1) send.pairs = std::move(pairs);
    if (bytes > kMaxBytes) fail(inst, "a send of more than 2^62 bytes");
    send.bytes = std::max<std::uint64_t>(bytes, 1);
    ++rep_.sends;
    return emit(std::move(op), inst, prefix, blocking);
  }

  // The collective kinds by opcode (without -start).
  static bool collective_kind(const std::string& op) {
    return op == "all-gather" || op == "all-reduce" || op == "reduce-scatter" || op == "all-to-all";
  }

  // A collective or permute, sync or the start of an async pair; the op id (none when trivial).
  std::optional<std::uint32_t> communication(const Instruction& inst, const Computation& c, const std::string& kind,
                                             const std::string& prefix, bool blocking) {
    // An async start's shape is a tuple (operand, result, ...): its result is the second.
    const Shape& result = inst.shape.is_tuple && !blocking && inst.shape.tuple.size() >= 2 ? inst.shape.tuple[1]
                                                                                             : inst.shape;
    if (kind == "collective-permute") {
      // In place (buffer in, buffer out, their start indices): the slice alone moves.
      const Shape& buffer = operand_shape(inst, c, 0);
      if (const std::optional<std::uint64_t> slice = permute_slice_bytes(inst, buffer, m_))
        return permute(inst, *slice, prefix, blocking);
      return permute(inst, buffer.bytes(), prefix, blocking);
    }
    (void)operand_shape(inst, c, 0);  // at least one operand
    return collective(inst, kind, operands_bytes(inst, c), result, prefix, blocking);
  }

  // Lowers one instruction; its value (for async pairs).
  Value instruction(const Instruction& inst, const Computation& c, const std::string& prefix, const Frame& frame,
                    const std::vector<Value>& args) {
    if (++rep_.instructions > kMaxVisits)
      fail(inst, fmt::format("the module visits more than {} instructions (loops are unrolled by their trip counts)",
                             kMaxVisits));
    const std::string& op = inst.opcode;
    if (op == "while") {
      std::optional<std::int64_t> trips = known_trip_count(inst);
      if (!trips && trip_count_) {
        trips = trip_count_;
        ++rep_.assumed_trips;
      }
      if (!trips)
        fail(inst,
             "the loop's trip count is unknown (no known_trip_count in its backend_config): meshsim unrolls "
             "loops by their trip counts; give --trip-count N");
      const Computation* body = called(inst, "body", m_);
      // The loop state: the init operand, then each trip's result.
      Value state = operand_value(inst, c, frame, 0);
      for (std::int64_t t = 0; t < *trips; ++t)
        state = enter(*body, inst, fmt::format("{}{}[{}]/", prefix, inst.name, t), {state});
      return state;
    }
    if (op == "call") {
      std::vector<Value> values;
      for (std::size_t i = 0; i < inst.operands.size(); ++i) values.push_back(operand_value(inst, c, frame, i));
      return enter(*called(inst, "to_apply", m_), inst, prefix + inst.name + "/", values);
    }
    if (op == "dot") {
      matmul(inst, c, prefix, inst);
      return nullptr;
    }
    if (op == "convolution") {
      convolution(inst, c, prefix, inst);
      return nullptr;
    }
    if (op == "fusion") {
      fusion(inst, c, prefix);
      return nullptr;
    }
    if (op == "fft") {
      memory_kernel(inst, c, prefix);
      return nullptr;
    }
    if (op == "async-start") {
      // The generic async pair: the wrapped computation's root is the collective.
      const Computation* wrapped = called(inst, "calls", m_);
      const Instruction* root = wrapped->root();
      if (!root || !(collective_kind(root->opcode) || root->opcode == "collective-permute")) {
        ++rep_.skipped[op];
        return handle(std::nullopt);
      }
      return handle(communication(*root, *wrapped, root->opcode, prefix + inst.name + "@", false));
    }
    if (op == "async-done") {
      done(inst, operand_value(inst, c, frame, 0));
      return nullptr;
    }
    if (collective_kind(op) || op == "collective-permute") {
      (void)communication(inst, c, op, prefix, true);
      return nullptr;
    }
    if ((op == "send" || op == "recv") && !host_transfer(inst)) return point_to_point(inst, c, prefix);
    if ((op == "send-done" || op == "recv-done") && !host_transfer(inst)) {
      const Value v = operand_value(inst, c, frame, 0);
      if (op == "send-done") {
        done(inst, v);
      } else if (v && !v->recv_channel.empty()) {
        // The data arrives when the send of the same channel has.
        const auto sent = sends_.find(v->recv_channel);
        if (sent != sends_.end()) done(inst, sent->second);
      }
      return nullptr;
    }
    if (op.size() > 6 && op.ends_with("-start") && (collective_kind(op.substr(0, op.size() - 6)) ||
                                                    op == "collective-permute-start"))
      return handle(communication(inst, c, op.substr(0, op.size() - 6), prefix, false));
    if (op.size() > 5 && op.ends_with("-done") && (collective_kind(op.substr(0, op.size() - 5)) ||
                                                   op == "collective-permute-done")) {
      done(inst, operand_value(inst, c, frame, 0));
      return nullptr;
    }
    // Skipped, but the values that carry async pairs pass through: the loop
    // state's tuples and parameters, and what copies them unchanged.
    ++rep_.skipped[op];
    if (op == "parameter") {
      const std::size_t i = inst.operands.empty() ? 0 : static_cast<std::size_t>(std::atoi(inst.operands[0].c_str()));
      return i < args.size() ? args[i] : nullptr;
    }
    if (op == "tuple") {
      auto v = std::make_shared<Carried>();
      bool any = false;
      for (std::size_t i = 0; i < inst.operands.size(); ++i) {
        v->elements.push_back(operand_value(inst, c, frame, i));
        any = any || v->elements.back();
      }
      return any ? v : nullptr;
    }
    if (op == "get-tuple-element") {
      const Value t = operand_value(inst, c, frame, 0);
      const std::string* index = inst.attr("index");
      const std::size_t i = index ? static_cast<std::size_t>(std::atoi(index->c_str())) : 0;
      return t && i < t->elements.size() ? t->elements[i] : nullptr;
    }
    if (op == "copy" || op == "bitcast" || op == "optimization-barrier") return operand_value(inst, c, frame, 0);
    return nullptr;
  }

  // What follows an async -done waits for the collective its -start issued.
  static bool host_transfer(const Instruction& inst) {
    const std::string* h = inst.attr("is_host_transfer");
    return h && *h == "true";
  }

  // XLA's point-to-point send and recv (pipeline parallelism): a send is an
  // async send over the pairs of its frontend attribute
  // _xla_send_recv_source_target_pairs, of its operand's bytes, until its
  // send-done; a recv carries its channel, and its recv-done waits for that
  // channel's last send.
  Value point_to_point(const Instruction& inst, const Computation& c, const std::string& prefix) {
    const std::string* channel = inst.attr("channel_id");
    if (!channel) fail(inst, fmt::format("a {} without channel_id", inst.opcode));
    if (inst.opcode == "recv") {
      ++rep_.skipped[inst.opcode];
      auto v = std::make_shared<Carried>();
      v->recv_channel = *channel;
      return v;
    }
    const std::string* attrs = inst.attr("frontend_attributes");
    const std::string key = "_xla_send_recv_source_target_pairs=";
    const std::size_t at = attrs ? attrs->find(key) : std::string::npos;
    if (at == std::string::npos)
      fail(inst,
           "a send without _xla_send_recv_source_target_pairs in its frontend_attributes: meshsim cannot tell "
           "which devices it connects");
    std::string_view value = std::string_view(*attrs).substr(at + key.size());
    std::string pairs;
    if (!value.empty() && value.front() == '"') {
      const std::size_t end = value.find('"', 1);
      pairs = std::string(value.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1));
    } else {
      int depth = 0;
      for (char ch : value) {
        pairs += ch;
        depth += ch == '{' ? 1 : ch == '}' ? -1 : 0;
        if (depth == 0) break;
      }
    }
    Instruction as_permute = inst;
    as_permute.attrs.emplace_back("source_target_pairs", pairs);
    // The data sent: the send's shape is (data, context, token), else its operand's.
    const std::uint64_t bytes = inst.shape.is_tuple && !inst.shape.tuple.empty() ? inst.shape.tuple[0].bytes()
                                                                                 : operand_shape(inst, c, 0).bytes();
    const Value h = handle(permute(as_permute, bytes, prefix, false));
    sends_[*channel] = h;
    return h;
  }

  void done(const Instruction& inst, const Value& start) {
    if (!start || !start->handle)
      fail(inst, "an async -done whose operand is not an async -start (followed through tuples, "
                 "get-tuple-element, loop state and calls)");
    if (start->op) frontier_.push_back(*start->op);
  }

  // A convolution that is a matmul (TPU prints dots so): dim_labels such as
  // bf_io->bf or b0f_0io->b0f, every window size 1, no feature or batch groups.
  // m = the lhs's batch and spatial sizes, k = its feature size, n = the rhs's
  // output features.
  void convolution(const Instruction& conv, const Computation& c, const std::string& prefix, const Instruction& at) {
    const std::string* labels = conv.attr("dim_labels");
    const std::size_t underscore = labels ? labels->find('_') : std::string::npos;
    const std::size_t arrow = labels ? labels->find("->") : std::string::npos;
    if (underscore == std::string::npos || arrow == std::string::npos || arrow < underscore)
      fail(conv, "a convolution without dim_labels=LHS_RHS->OUT");
    const std::string lhs_labels = labels->substr(0, underscore), rhs_labels = labels->substr(underscore + 1, arrow - underscore - 1);
    if (const std::string* window = conv.attr("window")) {
      const std::size_t size = window->find("size=");
      if (size != std::string::npos) {
        std::size_t i = size + 5;
        while (i < window->size() && (((*window)[i] >= '0' && (*window)[i] <= '9') || (*window)[i] == 'x')) {
          if ((*window)[i] != '1' && (*window)[i] != 'x')
            fail(conv, "a convolution with a window larger than 1 is not a matmul; meshsim lowers only those");
          ++i;
        }
      }
    }
    for (const char* key : {"feature_group_count", "batch_group_count"})
      if (const std::string* g = conv.attr(key); g && *g != "1") fail(conv, fmt::format("a convolution with {}={}", key, *g));
    const Shape& lhs = operand_shape(conv, c, 0);
    const Shape& rhs = operand_shape(conv, c, 1);
    if (lhs.is_tuple || rhs.is_tuple || lhs.dims.size() != lhs_labels.size() || rhs.dims.size() != rhs_labels.size())
      fail(conv, "dim_labels do not match the operands' ranks");
    Op op(OpKind::Matmul);
    MatmulOp& mm = op.matmul();
    mm.m = 1, mm.k = 1, mm.n = 1;
    for (std::size_t i = 0; i < lhs_labels.size(); ++i) {
      const auto d = static_cast<std::uint64_t>(lhs.dims[i]);
      (lhs_labels[i] == 'f' ? mm.k : mm.m) *= d;  // b and spatial dimensions are rows
    }
    for (std::size_t i = 0; i < rhs_labels.size(); ++i)
      if (rhs_labels[i] == 'o') mm.n *= static_cast<std::uint64_t>(rhs.dims[i]);
    mm.dtype = dtype_of(lhs);
    if (mm.dtype == "fp32" && !w_.hardware.gpu) mm.bf16_passes = f32_passes(conv);
    emit_matmul(std::move(op), conv, prefix, at);
  }

  // A fusion: its dots as matmuls, its collectives (TPU's kCustom fusions) as
  // collectives; without either, one HBM-bound kernel of its operands' and
  // result's bytes.
  void fusion(const Instruction& inst, const Computation& c, const std::string& prefix) {
    const Computation* callee = called(inst, "calls", m_);
    bool any = false;
    for (const Instruction& i : callee->instructions) {
      if (i.opcode == "dot") {
        matmul(i, *callee, prefix, inst);
        any = true;
      } else if (i.opcode == "convolution") {
        convolution(i, *callee, prefix, inst);
        any = true;
      } else if (collective_kind(i.opcode) || i.opcode == "collective-permute") {
        (void)communication(i, *callee, i.opcode, prefix + inst.name + "@", true);
        any = true;
      }
    }
    if (any) return;
    memory_kernel(inst, c, prefix);
  }

  // One HBM-bound kernel of its operands' and result's bytes: a fusion of no
  // dot or collective, an fft (cuFFT's and the TPU's FFTs of the sizes programs
  // use run in one pass over the data, memory-bound).
  void memory_kernel(const Instruction& inst, const Computation& c, const std::string& prefix) {
    std::uint64_t bytes = inst.shape.bytes();
    for (std::size_t i = 0; i < inst.operands.size(); ++i) bytes += operand_shape(inst, c, i).bytes();
    if (bytes == 0) return;
    Op op(OpKind::Elementwise);
    op.elementwise().hbm_bytes = bytes;
    op.elementwise().dtype = dtype_of(inst.shape.is_tuple ? Shape{} : inst.shape);
    ++rep_.kernels;
    emit(std::move(op), inst, prefix, true);
  }

  const Module& m_;
  workloads::Workload& w_;
  ImportReport& rep_;
  const topology::Torus torus_;
  std::vector<std::uint32_t> frontier_;  // what the next op waits for
  std::vector<const Computation*> active_;  // the calls being lowered
  std::vector<int> devices_;                // device -> chip; empty: the same id
  std::optional<std::int64_t> trip_count_;  // of loops the dump gives no trip count
  std::map<std::string, Value> sends_;      // by channel_id: the last send issued
};

}  // namespace

std::string ImportReport::summary() const {
  std::string s;
  if (!assumed_devices.empty())
    s += fmt::format("no device count in the module: {} {}, the topology's chips; ", devices, assumed_devices);
  s += fmt::format("lowered {} matmuls, {} kernels, {} collectives{}, {} sends", matmuls, kernels, collectives,
                   grouped > 0 ? fmt::format(" ({} over groups of chips)", grouped) : "", sends);
  if (assumed_trips > 0)
    s += fmt::format(" ({} while loop{} without a known trip count run --trip-count times)", assumed_trips,
                     assumed_trips == 1 ? "" : "s");
  if (trivial > 0) s += fmt::format(" ({} collectives over single devices: nothing to move)", trivial);
  std::uint64_t n = 0;
  std::vector<std::pair<std::uint64_t, std::string>> by;
  for (const auto& [op, k] : skipped) n += k, by.emplace_back(k, op);
  if (n == 0) return s;
  std::stable_sort(by.begin(), by.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> parts;
  for (const auto& [k, op] : by) parts.push_back(fmt::format("{} {}", k, op));
  return s + fmt::format("; skipped {} instructions: {}", n, fmt::join(parts, ", "));
}

namespace {

// Whether any instruction of the module has a channel_id: an SPMD program's
// collectives and sends are between partitions.
bool has_channel_collective(const Module& m) {
  for (const Computation& c : m.computations)
    for (const Instruction& i : c.instructions)
      if (i.attr("channel_id")) return true;
  return false;
}

}  // namespace

workloads::Workload import_module(const Module& given, const ImportOptions& o, ImportReport* report) {
  workloads::Workload w = workloads::empty_workload(o, /*gpu_ok=*/true, "HLO import");
  const std::uint32_t chips = w.make_torus().num_chips();
  ImportReport local;
  ImportReport& rep = report ? *report : local;
  const Module* module = &given;
  Module sized;
  if (!given.counts_given && chips > 1) {
    // XLA's tests and torch_xla's dumps print no device count: the topology's chips.
    sized = given;
    const bool spmd = has_channel_collective(given);
    (spmd ? sized.num_partitions : sized.replica_count) = static_cast<int>(chips);
    rep.assumed_devices = spmd ? "partitions" : "replicas";
    rep.devices = chips;
    module = &sized;
  }
  const Module& m = *module;
  if (static_cast<std::int64_t>(chips) != m.devices())
    throw InputError(m.file, "1",
                     fmt::format("the module runs on {} devices ({} replicas x {} partitions); the {} topology has {} "
                                 "chips",
                                 m.devices(), m.replica_count, m.num_partitions,
                                 fmt::format("{}", fmt::join(o.shape, "x")), chips));
  w.file = m.file;
  workloads::check_device_order(o.devices, chips);
  Lowering lowering(m, w, rep, o.devices, o.trip_count);
  lowering.run(m.entry_computation());
  if (w.ops.empty())
    throw InputError(m.file, std::to_string(m.entry_computation().line),
                     "nothing to simulate: no dot, fusion or collective in the ENTRY computation (" + rep.summary() + ")");
  return w;
}

bool is_mlir_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line.compare(first, 2, "//") == 0) continue;
    return line.compare(first, 7, "module ") == 0 || line.compare(first, 7, "module{") == 0 ||
           line.compare(first, 9, "func.func") == 0;
  }
  return false;
}

bool is_hlo_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line.compare(first, 2, "//") == 0) continue;  // blank, or a comment
    return line.compare(first, 10, "HloModule ") == 0;
  }
  return false;
}

}  // namespace meshsim::hlo
