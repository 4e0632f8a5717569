#include "sim/reduce.hpp"

#include <algorithm>
#include <unordered_map>

#include "base/error.hpp"

namespace meshsim::sim {

namespace {

constexpr std::uint32_t kNone = ~std::uint32_t{0};

// Union-find over task ids, by size with path halving.
class Components {
 public:
  explicit Components(std::size_t n) : parent_(n), size_(n, 1) {
    for (std::size_t i = 0; i < n; ++i) parent_[i] = static_cast<std::uint32_t>(i);
  }
  std::uint32_t find(std::uint32_t x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  void unite(std::uint32_t a, std::uint32_t b) {
    a = find(a), b = find(b);
    if (a == b) return;
    if (size_[a] < size_[b]) std::swap(a, b);
    parent_[b] = a;
    size_[a] += size_[b];
  }

 private:
  BigVector<std::uint32_t> parent_;
  BigVector<std::uint32_t> size_;
};

bool uses_resource(const Task& t) { return t.kind() != TaskKind::Join; }

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// The program of the tasks `kept` says (whole components), in ascending id
// order, and each one's id in `p` (`full_id`, appended).
template <class Kept>
Program representatives(const Program& p, const Kept& kept, std::vector<TaskId>& full_id) {
  const std::size_t n = p.num_tasks();
  BigVector<std::uint32_t> new_id(n, kNone);
  ProgramBuilder b;
  for (std::uint32_t op = 0; op < p.num_ops(); ++op) b.add_op();
  std::size_t tasks = 0, edges = 0;
  for (TaskId t = 0; t < n; ++t)
    if (kept(t)) ++tasks, edges += p.successors(t).size();
  b.reserve(tasks, edges);
  full_id.reserve(full_id.size() + tasks);
  for (TaskId t = 0; t < n; ++t) {
    if (!kept(t)) continue;
    new_id[t] = b.copy(p.task(t), p.task(t).resource, p.step(t));
    full_id.push_back(t);
  }
  for (TaskId t = 0; t < n; ++t) {
    if (new_id[t] == kNone) continue;
    for (std::uint32_t e : p.successors(t)) {
      MESHSIM_ASSERT(new_id[e >> 1] != kNone, "an edge leaves its component");
      b.depend(new_id[t], new_id[e >> 1], (e & 1u) ? EdgeKind::Stream : EdgeKind::Full);
    }
  }
  return std::move(b).finish();
}

}  // namespace

std::optional<Reduced> reduce(const Program& p, std::span<const Resource> resources) {
  const std::size_t n = p.num_tasks();
  if (n < 2) return std::nullopt;
  Components uf(n);
  {
    std::vector<std::uint32_t> first_on(resources.size(), kNone);
    for (TaskId t = 0; t < n; ++t) {
      for (std::uint32_t e : p.successors(t)) uf.unite(t, e >> 1);
      const Task& task = p.task(t);
      if (!uses_resource(task)) continue;
      std::uint32_t& first = first_on[task.resource];
      if (first == kNone)
        first = t;
      else
        uf.unite(first, t);
    }
  }
  // Components numbered by their first task; each one's tasks in ascending order.
  BigVector<std::uint32_t> component(n);
  std::vector<std::uint32_t> begin;  // CSR offsets of members, per component
  {
    std::unordered_map<std::uint32_t, std::uint32_t> number;
    for (TaskId t = 0; t < n; ++t) {
      const std::uint32_t root = uf.find(t);
      auto [it, fresh] = number.try_emplace(root, static_cast<std::uint32_t>(begin.size()));
      if (fresh) begin.push_back(0);
      component[t] = it->second;
      ++begin[it->second];
    }
  }
  const std::size_t num_components = begin.size();
  if (num_components < 2) return std::nullopt;
  std::uint32_t sum = 0;
  for (std::uint32_t& b : begin) {
    const std::uint32_t count = b;
    b = sum;
    sum += count;
  }
  begin.push_back(sum);
  BigVector<std::uint32_t> members(n);   // tasks of component c: members[begin[c] .. begin[c+1])
  BigVector<std::uint32_t> position(n);  // a task's position in its component's list
  {
    std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
    for (TaskId t = 0; t < n; ++t) {
      const std::uint32_t c = component[t];
      position[t] = fill[c] - begin[c];
      members[fill[c]++] = t;
    }
  }
  // A resource's position among its component's resources, in first-use order.
  std::vector<std::uint32_t> resource_position(resources.size(), kNone);
  std::vector<std::vector<std::uint32_t>> component_resources(num_components);
  for (std::size_t c = 0; c < num_components; ++c)
    for (std::uint32_t k = begin[c]; k < begin[c + 1]; ++k) {
      const Task& task = p.task(members[k]);
      if (!uses_resource(task) || resource_position[task.resource] != kNone) continue;
      resource_position[task.resource] = static_cast<std::uint32_t>(component_resources[c].size());
      component_resources[c].push_back(task.resource);
    }

  const auto same_resource = [&](std::uint32_t a, std::uint32_t b) {
    const Resource& x = resources[a];
    const Resource& y = resources[b];
    return x == y && resource_position[a] == resource_position[b];
  };
  const auto signature = [&](std::size_t c) {
    std::uint64_t h = mix(0, begin[c + 1] - begin[c]);
    for (std::uint32_t k = begin[c]; k < begin[c + 1]; ++k) {
      const TaskId t = members[k];
      const Task& task = p.task(t);
      h = mix(h, task.amount);
      h = mix(h, task.op_kind);
      h = mix(h, p.step(t));
      if (uses_resource(task)) {
        const Resource& r = resources[task.resource];
        h = mix(h, r.bandwidth_bytes_per_s);
        h = mix(h, static_cast<std::uint64_t>(r.latency.ps()));
        h = mix(h, resource_position[task.resource]);
      }
      for (std::uint32_t e : p.successors(t)) h = mix(h, (std::uint64_t{position[e >> 1]} << 1) | (e & 1u));
    }
    return h;
  };
  // Exact comparison (the hash only finds candidates).
  const auto identical = [&](std::size_t a, std::size_t b) {
    if (begin[a + 1] - begin[a] != begin[b + 1] - begin[b]) return false;
    if (component_resources[a].size() != component_resources[b].size()) return false;
    for (std::uint32_t k = 0; k < begin[a + 1] - begin[a]; ++k) {
      const TaskId x = members[begin[a] + k];
      const TaskId y = members[begin[b] + k];
      const Task& tx = p.task(x);
      const Task& ty = p.task(y);
      if (tx.amount != ty.amount || tx.op_kind != ty.op_kind || p.step(x) != p.step(y)) return false;
      if (uses_resource(tx) && !same_resource(tx.resource, ty.resource)) return false;
      const auto sx = p.successors(x);
      const auto sy = p.successors(y);
      if (sx.size() != sy.size()) return false;
      for (std::size_t i = 0; i < sx.size(); ++i)
        if (position[sx[i] >> 1] != position[sy[i] >> 1] || (sx[i] & 1u) != (sy[i] & 1u)) return false;
    }
    return true;
  };

  std::vector<std::uint32_t> class_of(num_components, kNone);
  std::vector<std::uint32_t> representative;  // per class: its first component
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> by_signature;  // signature -> classes
  Reduced out;
  out.full_tasks = n;
  for (std::size_t c = 0; c < num_components; ++c) {
    std::vector<std::uint32_t>& candidates = by_signature[signature(c)];
    for (std::uint32_t cls : candidates)
      if (identical(representative[cls], c)) {
        class_of[c] = cls;
        break;
      }
    if (class_of[c] == kNone) {
      class_of[c] = static_cast<std::uint32_t>(representative.size());
      candidates.push_back(class_of[c]);
      representative.push_back(static_cast<std::uint32_t>(c));
      out.classes.push_back({1, component_resources[c], {}});
    } else {
      Reduced::Class& cls = out.classes[class_of[c]];
      ++cls.copies;
      cls.replicas.push_back(std::move(component_resources[c]));
    }
  }
  if (out.classes.size() == num_components) return std::nullopt;  // nothing repeats

  // The reduced program: every representative's tasks, in ascending id order.
  const auto kept = [&](TaskId t) { return representative[class_of[component[t]]] == component[t]; };
  out.program = representatives(p, kept, out.full_id);
  return out;
}

}  // namespace meshsim::sim
