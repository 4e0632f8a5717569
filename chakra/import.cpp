#include "chakra/import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <filesystem>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <unordered_map>

#include "base/error.hpp"
#include "base/text_file.hpp"
#include "chakra/et_file.hpp"
#include "workloads/imported.hpp"
#include "workloads/json_cursor.hpp"

namespace meshsim::chakra {

using workloads::CollectiveOp;
using workloads::Op;
using workloads::SendOp;

namespace {

constexpr std::uint32_t kPass = ~std::uint32_t{0};  // a node that becomes no op of its own
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 62;

// What an op is made of before it is built: its kind and the nodes it joins.
struct Pending {
  OpKind kind = OpKind::Elementwise;
  std::int64_t comm_type = 0;
  std::uint64_t size = 0;                 // comm_size (collectives, sends)
  std::string pg;                         // collectives: the process group
  std::vector<int> ranks;                 // collectives: the group's ranks in order; sends: src, dst
  std::vector<std::pair<int, std::uint32_t>> members;  // (rank, node index) of the nodes it joins
  bool has_recv = false, has_send = false;
  std::optional<std::uint64_t> recv_size; // sends: what the receive expects, when it says
  std::vector<std::uint32_t> deps;        // other pending ops it waits for (ascending, once each)
};

class Importer {
 public:
  Importer(std::vector<RankTrace> ranks, const ImportOptions& o, const topology::Torus& torus, bool gpu,
           std::map<std::string, std::vector<int>> groups, ImportReport& rep)
      : ranks_(std::move(ranks)), o_(o), torus_(torus), gpu_(gpu), groups_(std::move(groups)), rep_(rep) {}

  std::vector<Op> run() {
    index_nodes();
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) classify(r);
    check_complete();
    resolve_dependencies();
    return build(merge(order()));
  }

 private:
  const Node& node(int r, std::uint32_t i) const { return ranks_[static_cast<std::size_t>(r)].nodes[i]; }
  const std::string& file(int r) const { return ranks_[static_cast<std::size_t>(r)].file; }
  [[noreturn]] void fail(int r, std::uint32_t i, const std::string& message) const {
    const Node& n = node(r, i);
    throw InputError(file(r), fmt::format("byte {}", n.offset),
                     fmt::format("node {}{}: {}", n.id, n.name.empty() ? "" : " ('" + n.name + "')", message));
  }
  topology::ChipId chip(int rank) const {
    return static_cast<topology::ChipId>(o_.devices.empty() ? rank : o_.devices[static_cast<std::size_t>(rank)]);
  }

  void index_nodes() {
    index_.resize(ranks_.size());
    op_of_.resize(ranks_.size());
    receives_.resize(ranks_.size());
    deps_.resize(ranks_.size());
    std::size_t all = 0;
    for (const RankTrace& t : ranks_) all += t.nodes.size();
    pending_.reserve(all);
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const auto& nodes = ranks_[r].nodes;
      rep_.nodes += nodes.size();
      op_of_[r].assign(nodes.size(), kPass);
      receives_[r].assign(nodes.size(), false);
      index_[r].reserve(nodes.size());
      deps_[r].resize(nodes.size());
      for (std::uint32_t i = 0; i < nodes.size(); ++i)
        if (!index_[r].emplace(nodes[i].id, i).second)
          fail(static_cast<int>(r), i, "a second node with this id (ids must be unique in a rank's trace)");
      // A GPU node on a CUDA stream also waits for the stream's node before it
      // (launch order, the trace's order): PyTorch traces tie a kernel only to
      // the CPU op that launched it, not to the kernels the stream ran before.
      std::map<std::int64_t, std::uint32_t> stream_last;
      for (std::uint32_t i = 0; i < nodes.size(); ++i) {
        for (const auto* deps : {&nodes[i].data_deps, &nodes[i].ctrl_deps})
          for (std::uint64_t d : *deps) {
            const auto it = index_[r].find(d);
            if (it == index_[r].end())
              fail(static_cast<int>(r), i, fmt::format("depends on node {}, which is not in this rank's trace", d));
            if (it->second == i) fail(static_cast<int>(r), i, "depends on itself");
            deps_[r][i].push_back(it->second);
          }
        if (nodes[i].stream && !nodes[i].is_cpu_op.value_or(false)) {
          const auto [it, first] = stream_last.try_emplace(*nodes[i].stream, i);
          if (!first) {
            deps_[r][i].push_back(it->second);
            it->second = i;
          }
        }
      }
    }
  }

  std::uint32_t add(Pending p) {
    pending_.push_back(std::move(p));
    return static_cast<std::uint32_t>(pending_.size() - 1);
  }

  void skip(const std::string& why) { ++rep_.skipped[why]; }

  // The ranks of a process group.
  // A process group's name as the comm-group file has it: a whole number
  // printed as a float ("0.0") is that number when the file has no such name
  // (ASTRA-sim's own traces name the file's group "0" so, and ASTRA-sim accepts
  // them).
  std::string group_name(const std::string& pg) const {
    if (groups_.count(pg)) return pg;
    const std::size_t dot = pg.find('.');
    if (dot != std::string::npos && dot > 0 && pg.find_first_not_of("0123456789") == dot &&
        pg.find_first_not_of('0', dot + 1) == std::string::npos)
      return pg.substr(0, dot);
    return pg;
  }

  // The ranks of a process group (`pg` as group_name gives it; `written` as the
  // trace wrote it, for the message).
  const std::vector<int>& group(int r, std::uint32_t i, const std::string& pg, const std::string& written) {
    const auto it = groups_.find(pg);
    if (it != groups_.end()) return it->second;
    if (pg.empty() || pg == "0") {
      if (all_.empty())
        for (int k = 0; k < static_cast<int>(ranks_.size()); ++k) all_.push_back(k);
      return all_;
    }
    fail(r, i,
         fmt::format("its process group '{}' is not in the comm-group file{}", written,
                     o_.comm_groups.empty() ? " (none given: --comm-groups FILE)" : " " + o_.comm_groups));
  }

  void classify(int r) {
    std::map<std::string, std::uint64_t> colls;                          // per process group: collectives so far
    std::map<std::tuple<int, int, std::int64_t>, std::uint64_t> p2p;   // per (src, dst, tag): sends so far
    const auto& nodes = ranks_[static_cast<std::size_t>(r)].nodes;
    for (std::uint32_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      std::uint32_t& op = op_of_[static_cast<std::size_t>(r)][i];
      switch (static_cast<NodeType>(n.type)) {
        case NodeType::Comp: {
          if (n.is_cpu_op.value_or(false)) {
            skip("cpu ops");
            break;
          }
          Pending p;
          p.kind = OpKind::Elementwise;
          p.members.emplace_back(r, i);
          op = add(std::move(p));
          ++rep_.kernels;
          break;
        }
        case NodeType::Coll: {
          if (!n.comm_type) fail(r, i, "a COMM_COLL_NODE without comm_type");
          const std::int64_t type = *n.comm_type;
          const CommType t = static_cast<CommType>(type);
          if (t != CommType::AllReduce && t != CommType::AllGather && t != CommType::ReduceScatter &&
              t != CommType::ReduceScatterBlock && t != CommType::AllToAll)
            fail(r, i, fmt::format("comm_type {} ({}): meshsim simulates ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, "
                                   "REDUCE_SCATTER_BLOCK and ALL_TO_ALL",
                                   type, *comm_type_name(type) ? comm_type_name(type) : "not a Chakra collective"));
          if (!n.comm_size) fail(r, i, "a COMM_COLL_NODE without comm_size");
          const std::string pg = group_name(n.pg_name.value_or(""));
          const std::vector<int>& ranks = group(r, i, pg, n.pg_name.value_or(""));
          if (std::find(ranks.begin(), ranks.end(), r) == ranks.end())
            fail(r, i, fmt::format("its process group '{}' (ranks {}) does not hold this rank ({})", pg,
                                   fmt::join(ranks, ","), r));
          const std::uint64_t k = colls[pg]++;
          if (ranks.size() < 2) {
            skip("collectives over one rank");
            break;
          }
          const auto key = std::pair{pg, k};
          auto it = colls_.find(key);
          if (it == colls_.end()) {
            Pending p;
            p.kind = t == CommType::AllReduce   ? OpKind::AllReduce
                     : t == CommType::AllGather ? OpKind::AllGather
                     : t == CommType::AllToAll  ? OpKind::AllToAll
                                                : OpKind::ReduceScatter;
            p.comm_type = type;
            p.size = *n.comm_size;
            p.pg = pg;
            p.ranks = ranks;
            it = colls_.emplace(key, add(std::move(p))).first;
          }
          Pending& p = pending_[it->second];
          const auto [r0, i0] = p.members.empty() ? std::pair{r, i} : p.members.front();
          if (p.comm_type != type || p.size != *n.comm_size)
            fail(r, i, fmt::format("collective {} of process group '{}' is {} of {} bytes here and {} of {} bytes "
                                   "on rank {} (node {}): the ranks of a group must agree",
                                   k + 1, pg, comm_type_name(type), *n.comm_size, comm_type_name(p.comm_type), p.size,
                                   r0, node(r0, i0).id));
          p.members.emplace_back(r, i);
          op = it->second;
          break;
        }
        case NodeType::Send:
        case NodeType::Recv: {
          const bool send = static_cast<NodeType>(n.type) == NodeType::Send;
          const char* what = send ? "COMM_SEND_NODE" : "COMM_RECV_NODE";
          const std::optional<std::int64_t> peer = send ? n.comm_dst : n.comm_src;
          if (!peer) fail(r, i, fmt::format("a {} without {}", what, send ? "comm_dst" : "comm_src"));
          const std::optional<std::int64_t> self = send ? n.comm_src : n.comm_dst;
          if (self && *self != r)
            fail(r, i, fmt::format("a {} whose {} is {}, not this rank ({})", what, send ? "comm_src" : "comm_dst",
                                   *self, r));
          if (*peer < 0 || *peer >= static_cast<std::int64_t>(ranks_.size()))
            fail(r, i, fmt::format("{} {} is not a rank (0 to {})", send ? "comm_dst" : "comm_src", *peer,
                                   ranks_.size() - 1));
          if (send && !n.comm_size) fail(r, i, "a COMM_SEND_NODE without comm_size");
          const int src = send ? r : static_cast<int>(*peer), dst = send ? static_cast<int>(*peer) : r;
          const std::int64_t tag = n.comm_tag.value_or(0);
          const std::uint64_t k = p2p[{src, dst, tag}]++;
          if (src == dst) {
            skip("sends to the same rank");
            break;
          }
          const auto key = std::tuple{src, dst, tag, k};
          auto it = sends_.find(key);
          if (it == sends_.end()) {
            Pending p;
            p.kind = OpKind::Send;
            p.ranks = {src, dst};
            it = sends_.emplace(key, add(std::move(p))).first;
          }
          Pending& p = pending_[it->second];
          if (send) {
            if (p.recv_size && *p.recv_size != *n.comm_size)
              fail(r, i, fmt::format("sends {} bytes; its receive on rank {} expects {}", *n.comm_size, dst,
                                     *p.recv_size));
            p.size = *n.comm_size;
            p.has_send = true;
          } else {
            if (p.has_send && n.comm_size && *n.comm_size != p.size)
              fail(r, i, fmt::format("receives {} bytes; its send from rank {} sends {}", *n.comm_size, src, p.size));
            p.recv_size = n.comm_size;
            p.has_recv = true;
            receives_[static_cast<std::size_t>(r)][i] = true;
          }
          p.members.emplace_back(r, i);
          op = it->second;
          break;
        }
        case NodeType::Invalid:
        case NodeType::Metadata:
        case NodeType::MemLoad:
        case NodeType::MemStore:
        case NodeType::Storage:
        case NodeType::Batch:
        case NodeType::Checkpoint:
          skip(node_type_name(n.type));
          break;
        default:
          fail(r, i, fmt::format("node type {} is not a Chakra node type (0 to 10)", n.type));
      }
    }
  }

  void check_complete() const {
    for (const auto& [key, id] : colls_) {
      const Pending& p = pending_[id];
      const auto [r0, i0] = p.members.front();
      for (int r : p.ranks)
        if (std::none_of(p.members.begin(), p.members.end(), [&](const auto& m) { return m.first == r; }))
          fail(r0, i0, fmt::format("collective {} of process group '{}' ({} of {} bytes) has no counterpart on rank "
                                   "{}: every rank of the group must run it",
                                   key.second + 1, key.first, comm_type_name(p.comm_type), p.size, r));
    }
    for (const auto& [key, id] : sends_) {
      const Pending& p = pending_[id];
      const auto [src, dst, tag, k] = key;
      const auto [r0, i0] = p.members.front();
      if (!p.has_send || !p.has_recv)
        fail(r0, i0, fmt::format("{} {} from rank {} to rank {} (tag {}) has no matching {} on rank {}",
                                 p.has_send ? "send" : "receive", k + 1, src, dst, tag, p.has_send ? "receive" : "send",
                                 p.has_send ? dst : src));
    }
  }

  // Every op waits for the ops its nodes depend on, through the nodes that
  // become no op (their own dependencies stand in for them).
  void resolve_dependencies() {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      const auto& nodes = ranks_[static_cast<std::size_t>(r)].nodes;
      std::vector<std::set<std::uint32_t>> through(nodes.size());  // a pass node: the ops it stands for
      std::vector<std::uint8_t> state(nodes.size(), 0);            // 0 new, 1 on the path, 2 done
      const auto& op_of = op_of_[static_cast<std::size_t>(r)];
      const auto& deps_of = deps_[static_cast<std::size_t>(r)];
      const auto& receives = receives_[static_cast<std::size_t>(r)];
      // The ops node i waits for (its dependencies' ops), by an explicit stack.
      const auto waits = [&](std::uint32_t start) {
        std::set<std::uint32_t> out;  // (few: a node's own dependencies' ops)
        std::vector<std::pair<std::uint32_t, std::size_t>> stack;  // (pass node, next dependency)
        const auto visit = [&](std::uint32_t d, std::set<std::uint32_t>& into) -> bool {  // true: descend
          if (op_of[d] != kPass) {
            into.insert(op_of[d]);
            // What waits for a receive waits for its send's op and for what
            // the receive itself waited for.
            if (!receives[d]) return false;
          }
          if (state[d] == 2) {
            into.insert(through[d].begin(), through[d].end());
            return false;
          }
          if (state[d] == 1) fail(r, d, "its dependencies lead back to it (a cycle)");
          return true;
        };
        for (std::uint32_t d : deps_of[start]) {
          if (!visit(d, out)) continue;
          stack.emplace_back(d, 0);
          state[d] = 1;
          while (!stack.empty()) {
            auto& [i, next] = stack.back();
            const std::vector<std::uint32_t>& deps = deps_of[i];
            if (next < deps.size()) {
              const std::uint32_t e = deps[next++];
              if (visit(e, through[i])) {
                state[e] = 1;
                stack.emplace_back(e, 0);
              }
              continue;
            }
            state[i] = 2;
            const std::uint32_t done = i;
            stack.pop_back();
            if (!stack.empty()) {
              auto& parent = through[stack.back().first];
              parent.insert(through[done].begin(), through[done].end());
            }
          }
          out.insert(through[d].begin(), through[d].end());
        }
        return out;
      };
      for (std::uint32_t i = 0; i < nodes.size(); ++i) {
        // A send starts when its sender is ready, as ASTRA-sim runs it (the
        // receiver need not have posted its receive): a receive's own
        // dependencies hold what follows it, not the transfer.
        if (op_of[i] == kPass || receives[i]) continue;
        std::vector<std::uint32_t>& deps = pending_[op_of[i]].deps;
        for (std::uint32_t d : waits(i)) {
          if (d == op_of[i]) fail(r, i, "waits for its own op (through its dependencies): a cycle");
          deps.push_back(d);
        }
      }
    }
    for (Pending& p : pending_) {
      std::sort(p.deps.begin(), p.deps.end());
      p.deps.erase(std::unique(p.deps.begin(), p.deps.end()), p.deps.end());
    }
  }

  // The ops in an order where each follows those it waits for (the earliest
  // created first among the ready ones); a cycle across ranks is an error.
  std::vector<std::uint32_t> order() const {
    std::vector<std::uint32_t> indegree(pending_.size(), 0);
    std::vector<std::vector<std::uint32_t>> after(pending_.size());
    for (std::uint32_t o = 0; o < pending_.size(); ++o)
      for (std::uint32_t d : pending_[o].deps) {
        after[d].push_back(o);
        ++indegree[o];
      }
    std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready;
    for (std::uint32_t o = 0; o < pending_.size(); ++o)
      if (indegree[o] == 0) ready.push(o);
    std::vector<std::uint32_t> out;
    while (!ready.empty()) {
      const std::uint32_t o = ready.top();
      ready.pop();
      out.push_back(o);
      for (std::uint32_t s : after[o])
        if (--indegree[s] == 0) ready.push(s);
    }
    if (out.size() != pending_.size()) {
      for (std::uint32_t o = 0; o < pending_.size(); ++o)
        if (indegree[o] > 0) {
          const auto [r, i] = pending_[o].members.front();
          fail(r, i, "its op and the ops it waits for wait for each other across ranks (a cycle: e.g. two ranks "
                     "that run two collectives in opposite orders)");
        }
    }
    return out;
  }

  // The ops to build, in an order where each follows those it waits for: the
  // pending ops, with the kernels of several ranks that are the same kernel
  // merged into one op on their chips. Kernels are the same when they have
  // one name and cost and wait for the same ops (the k-th such kernel of each
  // rank joins the k-th op). Exact: on each of its chips the merged op waits for
  // the ops that run there among its dependencies, which are that rank's own
  // (kernels ready at once and independent run in op order: the first rank's).
  // Collectives of several process groups merge alike: the same name, kind
  // and size over the same axes, on disjoint chips, waiting for the same ops
  // (the data-parallel groups' all-reduces of one layer become one all-reduce
  // over an axis, on every group at once); so do sends of one name and size
  // between disjoint chips (a pipeline stage handing on its activations, chip
  // to chip, becomes one send of many pairs).
  struct Merged {
    std::uint32_t first;                  // its first pending op (names it)
    std::vector<std::uint32_t> pending;   // every pending op it joins
    std::vector<std::uint32_t> deps;      // merged ops, ascending
    std::vector<int> ranks;               // kernels: the ranks it runs on
    std::vector<topology::ChipId> chips;  // axis collectives, sends: their chips, ascending
    std::vector<int> axes;                // axis collectives: the axes
  };
  std::vector<Merged> merge(const std::vector<std::uint32_t>& order) const {
    std::vector<std::uint32_t> canon(pending_.size());
    std::vector<Merged> out;
    using Key = std::tuple<std::string, std::uint64_t, std::optional<std::uint64_t>, std::optional<std::uint64_t>,
                           std::vector<std::uint32_t>>;
    std::map<Key, std::vector<std::uint32_t>> kernels;
    using CollectiveKey =
        std::tuple<std::string, std::int64_t, std::uint64_t, std::vector<int>, std::vector<std::uint32_t>>;
    std::map<CollectiveKey, std::vector<std::uint32_t>> collectives;
    using SendKey = std::tuple<std::string, std::uint64_t, std::vector<std::uint32_t>>;
    std::map<SendKey, std::vector<std::uint32_t>> sends;
    // Joins pending op `id` to the first merged op of `same` that `fits` (when
    // merging): that op, or null.
    const auto join = [&](const std::vector<std::uint32_t>& same, std::uint32_t id, const auto& fits) -> Merged* {
      if (!o_.merge) return nullptr;
      const auto it = std::find_if(same.begin(), same.end(), fits);
      if (it == same.end()) return nullptr;
      canon[id] = *it;
      out[*it].pending.push_back(id);
      return &out[*it];
    };
    // A new merged op, which later ops of `same` (if any) may join.
    const auto start = [&](std::vector<std::uint32_t>* same, Merged m) {
      const auto at = static_cast<std::uint32_t>(out.size());
      if (same) same->push_back(at);
      canon[m.first] = at;
      out.push_back(std::move(m));
    };
    for (std::uint32_t id : order) {
      const Pending& p = pending_[id];
      std::vector<std::uint32_t> deps;
      for (std::uint32_t d : p.deps) deps.push_back(canon[d]);
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      const auto [r, i] = p.members.front();
      const Node& n = node(r, i);
      if (p.kind == OpKind::Elementwise) {
        std::vector<std::uint32_t>& same = kernels[Key{n.name, n.duration_micros, n.num_ops, n.tensor_size, deps}];
        if (Merged* m = join(same, id, [&, rank = r](std::uint32_t k) {
              return std::find(out[k].ranks.begin(), out[k].ranks.end(), rank) == out[k].ranks.end();
            })) {
          m->ranks.push_back(r);
          continue;
        }
        start(&same, {id, {id}, std::move(deps), {r}, {}, {}});
        continue;
      }
      if (p.kind == OpKind::Send) {
        std::vector<topology::ChipId> ends{chip(p.ranks[0]), chip(p.ranks[1])};
        std::sort(ends.begin(), ends.end());
        std::vector<std::uint32_t>& same = sends[SendKey{n.name, p.size, deps}];
        if (Merged* m = join(same, id, [&](std::uint32_t k) {
              return !std::binary_search(out[k].chips.begin(), out[k].chips.end(), ends[0]) &&
                     !std::binary_search(out[k].chips.begin(), out[k].chips.end(), ends[1]);
            })) {
          m->chips.insert(std::upper_bound(m->chips.begin(), m->chips.end(), ends[0]), ends[0]);
          m->chips.insert(std::upper_bound(m->chips.begin(), m->chips.end(), ends[1]), ends[1]);
          continue;
        }
        start(&same, {id, {id}, std::move(deps), {}, std::move(ends), {}});
        continue;
      }
      std::vector<topology::ChipId> chips;
      for (int k : p.ranks) chips.push_back(chip(k));
      std::sort(chips.begin(), chips.end());
      if (std::optional<std::vector<int>> axes = axes_of(chips)) {
        std::vector<std::uint32_t>& same = collectives[CollectiveKey{n.name, p.comm_type, p.size, *axes, deps}];
        if (Merged* m = join(same, id, [&](std::uint32_t k) {
              for (topology::ChipId c : chips)
                if (std::binary_search(out[k].chips.begin(), out[k].chips.end(), c)) return false;
              return true;
            })) {
          std::vector<topology::ChipId> both;
          std::merge(m->chips.begin(), m->chips.end(), chips.begin(), chips.end(), std::back_inserter(both));
          m->chips = std::move(both);
          continue;
        }
        start(&same, {id, {id}, std::move(deps), {}, std::move(chips), std::move(*axes)});
        continue;
      }
      start(nullptr, {id, {id}, std::move(deps), {}, {}, {}});
    }
    return out;
  }

  std::vector<Op> build(const std::vector<Merged>& merged) {
    std::vector<Op> ops;
    ops.reserve(merged.size());
    for (const Merged& m : merged) {
      const Pending& p = pending_[m.first];
      const auto [r, i] = p.members.front();
      const Node& n = node(r, i);
      Op op(p.kind);
      op.pointer = fmt::format("rank {} node {}", r, n.id);
      op.name = n.name.empty() ? fmt::format("node{}", n.id) : n.name;
      op.deps = m.deps;
      auto chips = std::make_shared<std::vector<topology::ChipId>>();
      if (p.kind == OpKind::Elementwise) {
        // A kernel of one rank is named by its rank too.
        if (m.ranks.size() == 1) op.name = fmt::format("r{}/{}", r, op.name);
        for (int k : m.ranks) chips->push_back(chip(k));
        std::sort(chips->begin(), chips->end());
        if (n.duration_micros > 0) {
          if (n.duration_micros > static_cast<std::uint64_t>(kMaxTick.ps() / 1'000'000))
            fail(r, i, fmt::format("a duration of {} us, past the simulator's limit (2^62 ps)", n.duration_micros));
          op.elementwise().duration = Tick::from_ps(static_cast<std::int64_t>(n.duration_micros) * 1'000'000);
        } else {
          op.elementwise().flops = n.num_ops.value_or(0);
          op.elementwise().hbm_bytes = n.tensor_size.value_or(0);
        }
      } else if (p.kind == OpKind::Send) {
        SendOp& send = op.send();
        send.src = chip(p.ranks[0]);
        send.dst = chip(p.ranks[1]);
        send.bytes = std::max<std::uint64_t>(p.size, 1);
        if (p.size > kMaxBytes) fail(r, i, "a send of more than 2^62 bytes");
        if (m.pending.size() > 1)
          for (std::uint32_t id : m.pending)
            send.pairs.emplace_back(chip(pending_[id].ranks[0]), chip(pending_[id].ranks[1]));
        *chips = m.chips;
        rep_.sends += m.pending.size();
      } else {
        const std::uint64_t group = p.ranks.size();
        const bool times_ranks = p.kind == OpKind::AllGather || p.kind == OpKind::AllToAll;
        if (p.size > kMaxBytes / (times_ranks ? group : 1)) fail(r, i, "a collective of more than 2^62 bytes");
        CollectiveOp& co = op.collective();
        co.bytes = std::max<std::uint64_t>(p.size * (times_ranks ? group : 1), 1);
        std::vector<topology::ChipId> members;
        for (int k : p.ranks) members.push_back(chip(k));
        rep_.collectives += m.pending.size() - 1;  // (the merged groups; this one below)
        if (!m.chips.empty()) {
          // The mesh has one axis per hardware axis, in order (empty_workload).
          *chips = m.chips;
          co.hw_axes = m.axes;
          co.mesh_axes = m.axes;
        } else if (gpu_) {
          fail(r, i, fmt::format("process group '{}' (ranks {}) is not the GPUs along the node's GPUs or the nodes "
                                 "(or both); collectives over other groups run on TPU slices only",
                                 p.pg, fmt::join(p.ranks, ",")));
        } else {
          *chips = members;
          std::sort(chips->begin(), chips->end());
          co.groups = std::make_shared<std::vector<std::vector<topology::ChipId>>>(
              std::vector<std::vector<topology::ChipId>>{members});
          ++rep_.grouped;
        }
        ++rep_.collectives;
      }
      op.chips = std::move(chips);
      ops.push_back(std::move(op));
    }
    rep_.ops = ops.size();
    return ops;
  }

  // The axes along which `chips` (ascending) are exactly the chips of one group.
  std::optional<std::vector<int>> axes_of(const std::vector<topology::ChipId>& chips) const {
    std::vector<int> axes;
    std::uint64_t n = 1;
    for (int a = 0; a < torus_.num_axes(); ++a) {
      const int first = torus_.coord(chips.front(), a);
      if (std::any_of(chips.begin(), chips.end(), [&](topology::ChipId c) { return torus_.coord(c, a) != first; })) {
        axes.push_back(a);
        n *= static_cast<std::uint64_t>(torus_.axis(a).size);
      }
    }
    if (n != chips.size()) return std::nullopt;
    return axes;
  }

  std::vector<RankTrace> ranks_;
  const ImportOptions& o_;
  const topology::Torus& torus_;
  bool gpu_;
  std::map<std::string, std::vector<int>> groups_;
  std::vector<int> all_;
  ImportReport& rep_;
  std::vector<std::unordered_map<std::uint64_t, std::uint32_t>> index_;
  std::vector<std::vector<std::uint32_t>> op_of_;
  std::vector<std::vector<bool>> receives_;                    // [rank][node]: a receive, a member of its send's op
  std::vector<std::vector<std::vector<std::uint32_t>>> deps_;  // [rank][node]: its dependencies' node indices
  std::vector<Pending> pending_;
  std::map<std::pair<std::string, std::uint64_t>, std::uint32_t> colls_;
  std::map<std::tuple<int, int, std::int64_t, std::uint64_t>, std::uint32_t> sends_;
};

// The comm-group file: {"<id>": [rank, ...], ...}.
std::map<std::string, std::vector<int>> read_groups(const std::string& path, std::size_t ranks) {
  std::map<std::string, std::vector<int>> out;
  if (path.empty()) return out;
  const std::string text = read_text_file(path, "comm-group file");
  const workloads::Json doc = workloads::parse_json(text, path);
  const workloads::Cursor root(doc, "", path);
  root.expect_object();
  for (const auto& [name, value] : root.members()) {
    std::vector<int> group;
    std::set<int> seen;
    const std::vector<workloads::Cursor> elements = value.elements();
    if (elements.empty()) value.fail("a process group of no ranks");
    for (const workloads::Cursor& e : elements) {
      const int r = static_cast<int>(e.as_int_in(0, static_cast<std::int64_t>(ranks) - 1));
      if (!seen.insert(r).second) e.fail(fmt::format("rank {} is in this process group twice", r));
      group.push_back(r);
    }
    out.emplace(name, std::move(group));
  }
  return out;
}

}  // namespace

std::optional<std::pair<std::string, std::string>> rank_file_parts(const std::string& path) {
  for (const char* suffix : {".et", ".et.gz"}) {
    const std::string s = suffix;
    if (path.size() <= s.size() || path.compare(path.size() - s.size(), s.size(), s) != 0) continue;
    const std::string stem = path.substr(0, path.size() - s.size());
    const std::size_t dot = stem.rfind('.');
    if (dot == std::string::npos || dot + 1 == stem.size()) return std::nullopt;
    if (!std::all_of(stem.begin() + static_cast<std::ptrdiff_t>(dot) + 1, stem.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    return std::pair{stem.substr(0, dot), s};
  }
  return std::nullopt;
}

std::string ImportReport::summary() const {
  std::string s = fmt::format("{} ranks, {} nodes: lowered {} kernels, {} collectives{}, {} sends as {} ops", ranks,
                              nodes, kernels, collectives,
                              grouped > 0 ? fmt::format(" ({} over groups of chips)", grouped) : "", sends, ops);
  std::uint64_t n = 0;
  std::vector<std::string> parts;
  for (const auto& [why, k] : skipped) n += k, parts.push_back(fmt::format("{} {}", k, why));
  if (n > 0) s += fmt::format("; skipped {} nodes: {}", n, fmt::join(parts, ", "));
  return s;
}

workloads::Workload import_trace(const std::string& rank_file, const ImportOptions& o, ImportReport* report) {
  const auto parts = rank_file_parts(rank_file);
  if (!parts)
    throw Error(fmt::format("{}: a Chakra trace file is named <prefix>.<rank>.et (or .et.gz)", rank_file));
  const std::string prefix = parts->first, suffix = parts->second;
  workloads::Workload w =
      workloads::empty_workload(o, /*gpu_ok=*/true, "Chakra import");
  const topology::Torus torus = w.make_torus();
  const std::uint32_t chips = torus.num_chips();
  workloads::check_device_order(o.devices, chips);
  const auto name = [&](std::uint32_t r) { return fmt::format("{}.{}{}", prefix, r, suffix); };
  if (std::filesystem::exists(name(chips)))
    throw Error(fmt::format("{}: the trace has more ranks than the topology has chips ({}): one rank per chip",
                            name(chips), chips));
  std::vector<RankTrace> ranks;
  for (std::uint32_t r = 0; r < chips; ++r) {
    if (!std::filesystem::exists(name(r)))
      throw Error(fmt::format("{}: missing: the topology has {} chips, one rank file each ({}.0{} to {}.{}{})",
                              name(r), chips, prefix, suffix, prefix, chips - 1, suffix));
    ranks.push_back(read_rank(name(r)));
  }
  ImportReport local;
  ImportReport& rep = report ? *report : local;
  rep.ranks = chips;
  Importer importer(std::move(ranks), o, torus, w.hardware.gpu, read_groups(o.comm_groups, chips), rep);
  w.ops = importer.run();
  w.file = prefix + ".*" + suffix;
  if (w.ops.empty())
    throw InputError(name(0), "byte 0", "nothing to simulate: no kernel, collective or send in the trace (" +
                                            rep.summary() + ")");
  return w;
}

}  // namespace meshsim::chakra
