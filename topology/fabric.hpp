#pragma once
// A switched GPU fabric: NVLink domains of G GPUs, each GPU with one port of a
// given one-way bandwidth into a non-blocking NVLink switch, and the nodes joined
// by a rail-optimised fat tree of up to three tiers:
//   leaves: the nodes come in units of `leaf_nodes` (a scalable unit); GPU i of
//     every node of a unit has its NIC on that unit's rail-i leaf switch;
//   spines: the units come in pods of `pod_nodes` nodes; each of a pod's `spines`
//     spine switches takes `spine_cables` parallel cables from every leaf of the
//     pod (fewer cables than the leaf has NICs: an oversubscribed leaf);
//   core: with more than one pod, spine s of every pod has `core_cables` cables
//     up to core plane s (fewer than it has cables down: oversubscribed spines).
// Every switch is non-blocking inside; contention happens on the cables. Chips
// are GPUs, numbered with the local rank fastest: gpu = node * G + local. Link ids
// are dense; every link is one direction of one cable (or of a GPU's aggregate
// switch port).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "topology/torus.hpp"

namespace meshsim::topology {

struct FabricSpec {
  int gpus_per_node = 8;
  int nodes = 1;
  LinkSpec nvlink;   // per GPU and direction: GPU -> NVLink switch, switch -> GPU
  LinkSpec nic;      // per GPU and direction: GPU -> rail leaf, leaf -> GPU
  LinkSpec spine;    // per leaf-spine cable and direction
  int spines = 1;    // spine switches (per pod)
  int spine_cables = 1;  // parallel cables from every leaf to every spine
  int leaf_nodes = 0;    // nodes under one rail leaf (a unit); 0: all
  int pod_nodes = 0;     // nodes under one pod's spines, a multiple of leaf_nodes; 0: all (two tiers)
  int core_cables = 1;   // parallel cables from every spine of a pod to its core plane
  // NVLink SHARP in the NVLink switches (NCCL's NVLS): the fraction of the NVLink
  // rate its multimem traffic (load-reduces, stores, multicasts) achieves; 0: the
  // switches have none.
  double nvls_efficiency = 0;
  // NCCL's NVLS channels across nodes (its NVLS tree): NVLS_NCHANNELS, 16 on
  // Hopper and 32 on Blackwell between nodes (src/transport/nvls.cc, NCCL 2.29).
  int nvls_channels = 16;
  // NCCL's LL protocol: the data bytes per second a GPU's kernel passes on in
  // LL lines (its flags polled line by line), NCCL's llMaxBws inside one node;
  // 0: no cap. The LL lines a GPU sends into its NVLink switch go no faster.
  double ll_bytes_per_s = 0;
};

enum class FabricLinkKind : std::uint8_t {
  NvlinkUp,
  NvlinkDown,
  NicUp,
  NicDown,
  LeafToSpine,
  SpineToLeaf,
  SpineToCore,
  CoreToSpine
};

struct FabricLink {
  FabricLinkKind kind;
  std::uint32_t a = 0;  // NvlinkUp/Down, NicUp/Down: the GPU; Leaf/Spine: the leaf; Spine/Core: the pod
  std::uint32_t b = 0;  // Leaf/Spine, Spine/Core: the spine (core plane)
  LinkSpec spec;
  std::uint32_t cable = 0;  // Leaf/Spine, Spine/Core: which of the parallel cables
};

class Fabric {
 public:
  // Preconditions (validated by the workload parser): sizes >= 1, bandwidths > 0.
  explicit Fabric(FabricSpec spec);

  std::uint32_t num_gpus() const { return num_gpus_; }
  int gpus_per_node() const { return spec_.gpus_per_node; }
  double nvls_efficiency() const { return spec_.nvls_efficiency; }  // 0: no NVLink SHARP
  int nvls_channels() const { return spec_.nvls_channels; }
  double ll_bytes_per_s() const { return spec_.ll_bytes_per_s; }    // 0: LL uncapped
  int nodes() const { return spec_.nodes; }
  int node_of(ChipId gpu) const { return static_cast<int>(gpu) / spec_.gpus_per_node; }
  int local_rank(ChipId gpu) const { return static_cast<int>(gpu) % spec_.gpus_per_node; }
  ChipId gpu(int node, int local) const { return static_cast<ChipId>(node * spec_.gpus_per_node + local); }

  std::size_t num_links() const { return links_.size(); }
  const FabricLink& link(LinkId id) const { return links_[id]; }
  LinkId nvlink_up(ChipId g) const { return g; }
  LinkId nvlink_down(ChipId g) const { return num_gpus_ + g; }
  LinkId nic_up(ChipId g) const { return 2 * num_gpus_ + g; }
  LinkId nic_down(ChipId g) const { return 3 * num_gpus_ + g; }
  int spine_cables() const { return spec_.spine_cables; }
  // Leaves are numbered unit * G + rail (with one unit, the rail).
  int leaves() const { return units_ * spec_.gpus_per_node; }
  int leaf_of(ChipId gpu) const { return node_of(gpu) / leaf_nodes_ * spec_.gpus_per_node + local_rank(gpu); }
  int pods() const { return pods_; }
  int pod_of_leaf(int leaf) const { return leaf / spec_.gpus_per_node / units_per_pod_; }
  int leaves_per_pod() const { return units_per_pod_ * spec_.gpus_per_node; }
  int units() const { return units_; }
  int spines() const { return spec_.spines; }
  int core_cables() const { return spec_.core_cables; }
  const LinkSpec& cable_spec() const { return spec_.spine; }  // every leaf, spine and core cable
  LinkId leaf_to_spine(int leaf, int spine, int cable = 0) const;
  LinkId spine_to_leaf(int spine, int leaf, int cable = 0) const;
  LinkId spine_to_core(int pod, int spine, int cable = 0) const;
  LinkId core_to_spine(int spine, int pod, int cable = 0) const;

  // The links a transfer from src to dst crosses, in order (with i the node's
  // index in its unit):
  //   same node: NVLink up, NVLink down (the switch is non-blocking);
  //   same leaf (unit and rail): NIC up to the leaf, NIC down;
  //   same pod: NIC up, leaf -> spine (spine = destination node mod spines,
  //             cable = source i mod spine_cables), spine -> destination's leaf
  //             (cable = destination i / spines mod spine_cables), NIC down;
  //   other pod: as in the pod, with spine -> core and core -> spine between the
  //             two spine cables (plane = that spine; cable = the leaf cable's
  //             index among its pod's on that spine, mod core_cables, at the
  //             source going up and at the destination coming down).
  // A cable is one FIFO resource: with one spine and a cable per node, every
  // source node has its own up cable and every destination node its own down
  // cable (and, with a core cable per leaf cable, its own core cables), so any
  // permutation of sends between leaves is non-blocking; with fewer cables,
  // flows share them as statically routed (hashed) flows do.
  std::vector<LinkId> route(ChipId src, ChipId dst) const;

  // The cables as shifts of the nodes carry them. A permutation of the nodes
  // that moves every aligned block of cable_period() consecutive nodes onto
  // another whole and in order keeps every node's index in its unit, its
  // spine (node mod spines) and its cables' indices, and maps units onto units
  // and pods onto pods: it carries route(src, dst) onto the route between the
  // images, cable for cable (the image of a unit's leaf cable is the same cable
  // of the image unit, of a pod's core cable the same cable of the image pod).
  // The period is lcm(leaf_nodes, spines), and pod_nodes with several pods; 0
  // when a unit or pod is partial (the node count not a multiple), which no
  // such permutation keeps.
  int cable_period() const;
  // A cable's owner, the GPU its unit's or pod's block moves it with: for a
  // leaf cable the GPU on its rail in the unit's first node, for a core cable
  // GPU 0 of the pod's first node; and how far apart, in link ids, the same
  // cable of consecutive units (pods) is, and the nodes per unit (pod).
  struct CableBlock {
    ChipId owner = 0;
    std::uint32_t nodes = 0;      // nodes per unit or pod
    std::uint32_t id_stride = 0;  // link ids between the same cable of consecutive units or pods
  };
  CableBlock cable_block(LinkId cable) const;  // precondition: cable >= 4 * num_gpus()

  std::string gpu_name(ChipId g) const;      // "n1.g3"
  std::string link_name(LinkId id) const;    // "n1.g3 nvlink up", "rail 3 -> spine 0" (", cable 2" with several)
  std::string leaf_name(int leaf) const;     // "rail 3", or with several units "unit 1 rail 3"

  // The fabric as a graph: vertices are the GPUs (0 .. num_gpus-1), then one
  // NVLink switch per node, the leaves, the spines (pod-major) and, with several
  // pods, one core plane per spine; every link joins two of them.
  std::uint32_t num_vertices() const;
  std::pair<std::uint32_t, std::uint32_t> link_ends(LinkId id) const;  // (from, to)
  std::string vertex_name(std::uint32_t v) const;  // "n1.g3", "n1 nvswitch", "rail 3 leaf", "spine 0", "core 0"
  std::string spine_name(int pod, int spine) const;  // "spine 0", or with several pods "pod 1 spine 0"

 private:
  FabricSpec spec_;
  std::uint32_t num_gpus_ = 0;
  int leaf_nodes_ = 1, units_ = 1, units_per_pod_ = 1, pods_ = 1;
  LinkId core_base_ = 0;
  std::vector<FabricLink> links_;
};

// Cross-checks a fabric with Boost.Graph: every GPU reaches every other, and no
// route is longer than the BFS distance plus the detour a rail-optimised route
// takes (returns false on a violation).
bool check_fabric_with_bfs(const Fabric& fabric);

}  // namespace meshsim::topology
