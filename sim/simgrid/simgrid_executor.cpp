#include "sim/simgrid/simgrid_executor.hpp"
#include "sim/simgrid/module_abi.hpp"

#include <fmt/format.h>
#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/Mailbox.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <unordered_map>

#include "base/error.hpp"

namespace meshsim::sim {

namespace {

namespace s4u = simgrid::s4u;

// SimGrid's configuration. Its defaults do not model a plain link: each setting
// below makes one transfer alone on an idle link take exactly
// latency + bytes / bandwidth (docs/CROSSCHECK.md checks it with a test).
const char* const kConfig[] = {
    "--log=root.thres:critical",         // errors only (they also reach us through the child's stderr)
    "--cfg=network/model:CM02",          // no slow-start factors: LV08 multiplies latency by 13.01, bandwidth by 0.97
    "--cfg=network/latency-factor:1",    // (CM02's defaults, set explicitly)
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/crosstraffic:0",      // no 5 % of each flow charged to the reverse links (acknowledgements)
    "--cfg=network/TCP-gamma:0",         // no TCP window cap (gamma / 2 latency) on a flow's rate
    "--cfg=network/weight-S:0",          // max-min penalty is the route latency alone (CM02's default, set explicitly)
    "--cfg=surf/precision:1e-12",        // times equal within one picosecond, meshsim's tick (default 1e-9 s)
    // Worker actors: one per activity in flight (24,576 on a 16x16x16 torus). Small
    // stacks, and no guard pages, which would take two memory mappings each.
    "--cfg=contexts/stack-size:16",      // KiB (measured: resident in full)
    "--cfg=contexts/guard-size:0",
};

// AddressSanitizer cannot follow SimGrid's own stack switching: its builds run
// actors as threads ("contexts/factory:thread").
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// One flop per picosecond: an execution of `ps` flops takes `ps` picoseconds.
constexpr double kHostSpeed = 1e12;

constexpr std::uint64_t kMagic = 0x6d65736873696d31ull;  // "meshsim1"

struct Header {
  std::uint64_t magic = kMagic;
  std::uint64_t tasks = 0;
  SimgridStats stats;
};

Tick now_tick() {
  const double s = s4u::Engine::get_clock();
  return Tick::from_ps(static_cast<std::int64_t>(std::llround(s * 1e12)));
}

// Runs the graph in this process (the child). Writes a Header and the task timings to `out`.
class Controller {
 public:
  Controller(const FlowGraph& g, std::span<const FlowResource> res, std::uint32_t num_nodes)
      : g_(g), pending_(g.num_nodes()), timing_(g.num_nodes()) {
    for (std::uint32_t i = 0; i < g.num_nodes(); ++i) pending_[i] = g.num_predecessors(i);
    for (NodeTiming& t : timing_) t.start = kMaxTick;
    build_platform(res, num_nodes);
  }

  // Runs the graph to the end; returns the counts (engine_seconds left to the caller).
  //
  // Joins complete at once, without SimGrid. Each flow or compute is run by a
  // worker actor on its source host (a flow's) or its compute host: it sends the
  // flow's bytes to the destination node's mailbox (or executes), waits, resolves
  // what depended on it, then takes the next ready one of its host or sleeps.
  // Every destination node has a permanent receiver actor, so a flow starts the
  // moment it is sent. (SimGrid 3.32's host-to-host Comm::sendto and the
  // activities maestro starts itself are tracked in one list that every
  // completion scans: quadratic in the flows in flight.)
  Header run() {
    for (std::uint32_t v = 0; v < node_host_.size(); ++v) {
      if (incoming_[v] == 0) continue;
      s4u::Mailbox* box = s4u::Mailbox::by_name(fmt::format("to n{}", v));
      mailbox_[v] = box;
      const std::uint64_t n = incoming_[v];
      s4u::ActorPtr receiver = s4u::Actor::create("receiver", node_host_[v], [box, n] {
        for (std::uint64_t i = 0; i < n; ++i) box->get<void>();
        box->set_receiver(nullptr);
      });
      box->set_receiver(receiver);
    }
    for (std::uint32_t i = 0; i < g_.num_nodes(); ++i)
      if (pending_[i] == 0) ready_.push_back(i);
    remaining_ = g_.num_nodes();
    drain(kZeroTick);
    s4u::Engine::get_instance()->run();

    Header h;
    h.tasks = g_.num_tasks();
    SimgridStats& s = h.stats;
    s.flows = flows_;
    s.computes = computes_;
    s.hosts = hosts_;
    s.routes = routes_;
    s.workers = workers_.size();
    s.makespan = makespan_;
    for (std::uint32_t i = 0; i < g_.num_nodes(); ++i)
      if (pending_[i] != kDone) {
        if (s.unfinished == 0) s.first_unfinished = i;
        ++s.unfinished;
      }
    return h;
  }

  const std::vector<NodeTiming>& timing() const { return timing_; }

 private:
  static constexpr std::uint32_t kDone = ~std::uint32_t{0};

  void build_platform(std::span<const FlowResource> res, std::uint32_t num_nodes) {
    s4u::NetZone* zone = s4u::create_empty_zone("meshsim");
    // Routes: a flow from node a to node b over its links. SimGrid keeps one route
    // per (source host, destination host), so a second route between the same two
    // nodes (the two ways round a ring to its antipode), or a route from a node to
    // itself, starts at an alias host of the source: alias k of node a is "a#k".
    struct Known {
      std::uint32_t flow;  // a flow with this route
      std::uint32_t alias;
    };
    std::unordered_map<std::uint64_t, std::vector<Known>> known;
    std::vector<std::uint32_t> aliases(num_nodes, 0);  // highest alias index used per node
    std::vector<std::pair<std::uint32_t, std::uint32_t>> flow_ends(g_.num_flows());  // (alias, flow with the route)
    for (std::uint32_t f = 0; f < g_.num_flows(); ++f) {
      const auto id = static_cast<std::uint32_t>(g_.num_tasks() + f);
      const std::span<const std::uint32_t> route = g_.route(id);
      const std::uint32_t a = res[route.front()].src, b = res[route.back()].dst;
      std::vector<Known>& list = known[(std::uint64_t{a} << 32) | b];
      std::uint32_t alias = kDone;
      for (const Known& k : list) {
        const std::span<const std::uint32_t> other = g_.route(static_cast<std::uint32_t>(g_.num_tasks() + k.flow));
        if (std::equal(route.begin(), route.end(), other.begin(), other.end())) {
          alias = k.alias;
          flow_ends[f] = {k.alias, k.flow};
          break;
        }
      }
      if (alias == kDone) {
        alias = static_cast<std::uint32_t>(list.size()) + (a == b ? 1u : 0u);
        list.push_back({f, alias});
        flow_ends[f] = {alias, f};
        aliases[a] = std::max(aliases[a], alias);
      }
    }
    std::vector<std::vector<std::uint32_t>> host_index(num_nodes);
    for (std::uint32_t v = 0; v < num_nodes; ++v)
      for (std::uint32_t k = 0; k <= aliases[v]; ++k) {
        host_index[v].push_back(static_cast<std::uint32_t>(all_hosts_.size()));
        all_hosts_.push_back(zone->create_host(k == 0 ? fmt::format("n{}", v) : fmt::format("n{}#{}", v, k), kHostSpeed));
        ++hosts_;
      }
    idle_.resize(all_hosts_.size());
    const auto hosts = [&](std::uint32_t node, std::uint32_t alias) { return all_hosts_[host_index[node][alias]]; };
    std::vector<s4u::Link*> links(res.size(), nullptr);
    for (std::size_t r = 0; r < res.size(); ++r) {
      if (res[r].bandwidth_bytes_per_s == 0) continue;
      links[r] = zone->create_link(fmt::format("l{}", r), static_cast<double>(res[r].bandwidth_bytes_per_s));
      links[r]->set_latency(res[r].latency.seconds());
    }
    for (std::uint32_t v = 0; v < num_nodes; ++v) node_host_.push_back(hosts(v, 0));
    mailbox_.assign(num_nodes, nullptr);
    incoming_.assign(num_nodes, 0);
    compute_hosts_.assign(res.size(), nullptr);
    compute_host_index_.assign(res.size(), 0);
    for (std::size_t r = 0; r < res.size(); ++r)
      if (res[r].bandwidth_bytes_per_s == 0) {
        compute_hosts_[r] = hosts(res[r].src, 0);
        compute_host_index_[r] = host_index[res[r].src][0];
      }
    std::vector<s4u::LinkInRoute> list;
    for (std::uint32_t f = 0; f < g_.num_flows(); ++f) {
      const auto id = static_cast<std::uint32_t>(g_.num_tasks() + f);
      const std::span<const std::uint32_t> route = g_.route(id);
      s4u::Host* src = hosts(res[route.front()].src, flow_ends[f].first);
      s4u::Host* dst = hosts(res[route.back()].dst, 0);
      flow_src_.push_back(host_index[res[route.front()].src][flow_ends[f].first]);
      flow_dst_.push_back(res[route.back()].dst);
      ++incoming_[res[route.back()].dst];
      if (flow_ends[f].second != f) continue;  // the route is known already
      list.clear();
      for (std::uint32_t l : route) list.emplace_back(links[l]);
      zone->add_bypass_route(src->get_netpoint(), dst->get_netpoint(), nullptr, nullptr, list);
      ++routes_;
    }
    zone->seal();
  }

  // Worker w: runs its activity to completion, resolves what depended on it, then
  // sleeps until dispatch() hands it another (or the run ends).
  void work(std::size_t w) {
    for (;;) {
      const std::uint32_t id = workers_[w].task;
      if (id == kDone) return;
      const FlowGraph::Node& n = g_.node(id);
      if (n.kind == FlowGraph::Kind::Flow) {
        mailbox_[flow_dst_[id - g_.num_tasks()]]->put(&payload_, n.amount);
      } else if (n.kind == FlowGraph::Kind::Join) {
        s4u::this_actor::sleep_for(Tick::from_ps(static_cast<std::int64_t>(n.amount)).seconds());
      } else {
        s4u::ExecPtr e = s4u::Exec::init();
        e->set_flops_amount(static_cast<double>(n.amount));
        e->set_host(compute_hosts_[n.resource]);
        e->start();
        e->wait();
      }
      const Tick now = now_tick();
      finish(id, now);
      drain(now);
      if (remaining_ == 0) return;  // the last node: the run is over
      idle_[workers_[w].host].push_back(w);
      s4u::this_actor::suspend();
    }
  }

  // Hands flow or compute `id` to a sleeping worker on its host, or to a new one.
  void dispatch(std::uint32_t id, std::uint32_t host) {
    std::vector<std::size_t>& idle = idle_[host];
    if (!idle.empty()) {
      const std::size_t w = idle.back();
      idle.pop_back();
      workers_[w].task = id;
      workers_[w].actor->resume();
      return;
    }
    const std::size_t w = workers_.size();
    workers_.push_back({nullptr, id, host});
    workers_[w].actor = s4u::Actor::create("worker", all_hosts_[host], [this, w] { work(w); });
  }

  // The node completed at `now`: its successors may become ready.
  void finish(std::uint32_t id, Tick now) {
    --remaining_;
    pending_[id] = kDone;
    timing_[id].done = now;
    makespan_ = max(makespan_, now);
    for (std::uint32_t s : g_.successors(id))
      if (--pending_[s] == 0) ready_.push_back(s);
    if (remaining_ == 0)  // the run is over: sleeping workers exit
      for (std::vector<std::size_t>& idle : idle_) {
        for (std::size_t w : idle) {
          workers_[w].task = kDone;
          workers_[w].actor->resume();
        }
        idle.clear();
      }
  }

  void drain(Tick now) {
    while (!ready_.empty()) {
      const std::uint32_t id = ready_.back();
      ready_.pop_back();
      start(id, now);
    }
  }

  void start(std::uint32_t id, Tick now) {
    timing_[id].start = min(timing_[id].start, now);
    const FlowGraph::Node& n = g_.node(id);
    switch (n.kind) {
      case FlowGraph::Kind::Join:  // no resource: at once, or after its delay (a worker sleeps it)
        if (n.amount == 0)
          finish(id, now);
        else
          dispatch(id, 0);
        return;
      case FlowGraph::Kind::Flow:
        // A transfer started when the first flow over it did.
        for (std::uint32_t hop : g_.successors(id)) timing_[hop].start = min(timing_[hop].start, now);
        ++flows_;
        dispatch(id, flow_src_[id - g_.num_tasks()]);
        return;
      case FlowGraph::Kind::Compute:
        ++computes_;
        dispatch(id, compute_host_index_[n.resource]);
        return;
    }
  }

  struct Worker {
    s4u::ActorPtr actor;
    std::uint32_t task = kDone;  // what it runs next; kDone: exit
    std::uint32_t host = 0;      // index in all_hosts_
  };

  const FlowGraph& g_;
  std::vector<std::uint32_t> pending_;
  std::vector<NodeTiming> timing_;
  std::vector<s4u::Host*> compute_hosts_;
  std::vector<std::uint32_t> ready_;
  std::vector<Worker> workers_;
  int payload_ = 0;  // what every flow's message points to: SimGrid sends a pointer, the bytes are simulated
  std::vector<std::vector<std::size_t>> idle_;  // per host: its sleeping workers
  std::vector<s4u::Host*> all_hosts_;           // every host, aliases included
  std::vector<s4u::Host*> node_host_;           // per node: its host (alias 0)
  std::vector<s4u::Mailbox*> mailbox_;          // per node: where flows to it are sent
  std::vector<std::uint64_t> incoming_;         // per node: flows to it
  std::vector<std::uint32_t> flow_src_;         // per flow: its source host (index in all_hosts_)
  std::vector<std::uint32_t> flow_dst_;         // per flow: its destination node
  std::vector<std::uint32_t> compute_host_index_;  // per resource: a compute unit's host (index in all_hosts_)
  std::size_t remaining_ = 0;              // nodes not completed
  Tick makespan_;
  std::uint64_t flows_ = 0, computes_ = 0, hosts_ = 0, routes_ = 0;
};

void run_child(const FlowGraph& g, std::span<const FlowResource> res, std::uint32_t num_nodes,
               std::span<const std::string> extra_config, std::FILE* out) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> args{"meshsim"};
  for (const char* c : kConfig) args.emplace_back(c);
  if (kAddressSanitizer) args.emplace_back("--cfg=contexts/factory:thread");
  for (const std::string& c : extra_config) args.push_back("--cfg=" + c);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  s4u::Engine engine(&argc, argv.data());
  Controller controller(g, res, num_nodes);
  Header h = controller.run();
  h.stats.engine_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<NodeTiming>& t = controller.timing();
  if (std::fwrite(&h, sizeof h, 1, out) != 1 || std::fwrite(t.data(), sizeof(NodeTiming), g.num_tasks(), out) != g.num_tasks() ||
      std::fflush(out) != 0)
    throw Error("cannot write the results");
}

// The first line a failed child printed (SimGrid's error; a backtrace or a list
// of valid settings may follow), without SimGrid's "[time] [category/LEVEL] " prefix.
std::string first_message(std::FILE* err) {
  std::string text;
  std::rewind(err);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, err)) > 0 && text.size() < 65536;) text.append(buf, n);
  std::string line;
  for (std::size_t at = 0; at < text.size() && line.empty();) {
    const std::size_t nl = std::min(text.find('\n', at), text.size());
    line = text.substr(at, nl - at);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    at = nl + 1;
  }
  if (line.starts_with("[")) {
    const std::size_t prefix = line.rfind("] ");
    if (prefix != std::string::npos) line = line.substr(prefix + 2);
  }
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

SimgridRun run_here(const FlowGraph& graph, std::span<const FlowResource> resources, std::uint32_t num_nodes,
                    std::span<const std::string> extra_config) {
  for (std::size_t r = 0; r < resources.size(); ++r)
    MESHSIM_ASSERT(resources[r].src < num_nodes && resources[r].dst < num_nodes, "resource end out of range");
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  if (!out || !err) {
    if (out) std::fclose(out);
    if (err) std::fclose(err);
    throw Error("SimGrid engine: cannot create temporary files for its results");
  }
  struct Close {
    std::FILE* a;
    std::FILE* b;
    ~Close() { std::fclose(a), std::fclose(b); }
  } close{out, err};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(fmt::format("SimGrid engine: cannot start its process: {}", std::strerror(errno)));
  if (pid == 0) {
    // The child: SimGrid's messages go to `err`; it never returns into meshsim.
    int code = 0;
    if (dup2(fileno(err), STDERR_FILENO) < 0) _exit(3);
    try {
      run_child(graph, resources, num_nodes, extra_config, out);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      code = 2;
    } catch (...) {
      std::fprintf(stderr, "unknown exception\n");
      code = 2;
    }
    std::fflush(stderr);
    _exit(code);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error(fmt::format("SimGrid engine: lost its process: {}", std::strerror(errno)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string message = first_message(err);
    const std::string how = WIFSIGNALED(status) ? fmt::format("it was killed by signal {} ({})", WTERMSIG(status),
                                                              strsignal(WTERMSIG(status)))
                                                : fmt::format("it exited with code {}", WEXITSTATUS(status));
    throw Error(fmt::format("SimGrid engine failed ({}){}{}", how, message.empty() ? "" : ": ", message));
  }
  std::rewind(out);
  Header h;
  SimgridRun run;
  if (std::fread(&h, sizeof h, 1, out) != 1 || h.magic != kMagic || h.tasks != graph.num_tasks())
    throw Error("SimGrid engine: its process returned no results");
  run.tasks.resize(h.tasks);
  if (std::fread(run.tasks.data(), sizeof(NodeTiming), h.tasks, out) != h.tasks)
    throw Error("SimGrid engine: its process returned truncated results");
  static_cast<SimgridStats&>(run) = h.stats;
  return run;
}

bool run_entry(const FlowGraph& graph, std::span<const FlowResource> resources, std::uint32_t num_nodes,
               std::span<const std::string> extra_config, SimgridRun& out, std::string& error) {
  try {
    out = run_here(graph, resources, num_nodes, extra_config);
    return true;
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "SimGrid engine: unknown failure";
  }
  return false;
}

}  // namespace

}  // namespace meshsim::sim

extern "C" __attribute__((visibility("default"))) const meshsim::sim::SimgridModuleApi* meshsim_simgrid_module() {
  static const meshsim::sim::SimgridModuleApi api{.run = &meshsim::sim::run_entry};
  return &api;
}
