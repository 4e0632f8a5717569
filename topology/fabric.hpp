#pragma once
// A switched GPU fabric: NVLink domains of G GPUs, each GPU with one port of a
// given one-way bandwidth into a non-blocking NVLink switch, and the nodes joined
// by a rail-optimised fat tree (GPU i of every node on rail leaf switch i through
// its NIC; leaves joined by spine switches, each leaf to each spine by one or
// more parallel cables). Chips are GPUs, numbered with the
// local rank fastest: gpu = node * G + local. Link ids are dense; every link is
// one direction of one cable (or of a GPU's aggregate switch port).
#include <cstdint>
#include <string>
#include <vector>

#include "topology/torus.hpp"

namespace meshsim::topology {

struct FabricSpec {
  int gpus_per_node = 8;
  int nodes = 1;
  LinkSpec nvlink;   // per GPU and direction: GPU -> NVLink switch, switch -> GPU
  LinkSpec nic;      // per GPU and direction: GPU -> rail leaf, leaf -> GPU
  LinkSpec spine;    // per leaf-spine cable and direction
  int spines = 1;    // spine switches
  int spine_cables = 1;  // parallel cables from every leaf to every spine
};

enum class FabricLinkKind : std::uint8_t { NvlinkUp, NvlinkDown, NicUp, NicDown, LeafToSpine, SpineToLeaf };

struct FabricLink {
  FabricLinkKind kind;
  std::uint32_t a = 0;  // NvlinkUp/Down, NicUp/Down: the GPU; Leaf/Spine: the rail (leaf)
  std::uint32_t b = 0;  // Leaf/Spine: the spine
  LinkSpec spec;
  std::uint32_t cable = 0;  // Leaf/Spine: which of the parallel cables
};

class Fabric {
 public:
  // Preconditions (validated by the workload parser): sizes >= 1, bandwidths > 0.
  explicit Fabric(FabricSpec spec);

  std::uint32_t num_gpus() const { return num_gpus_; }
  int gpus_per_node() const { return spec_.gpus_per_node; }
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
  LinkId leaf_to_spine(int rail, int spine, int cable = 0) const;
  LinkId spine_to_leaf(int spine, int rail, int cable = 0) const;

  // The links a transfer from src to dst crosses, in order:
  //   same node: NVLink up, NVLink down (the switch is non-blocking);
  //   same rail: NIC up to the rail leaf, NIC down;
  //   other rail: NIC up, leaf -> spine (spine = destination node mod spines,
  //               cable = source node mod spine_cables), spine -> destination
  //               rail's leaf (cable = destination node / spines), NIC down.
  // A cable is one FIFO resource: with one spine and a cable per node, every
  // source node has its own up cable and every destination node its own down
  // cable, so any permutation of cross-rail sends is non-blocking.
  std::vector<LinkId> route(ChipId src, ChipId dst) const;

  std::string gpu_name(ChipId g) const;      // "n1.g3"
  std::string link_name(LinkId id) const;    // "n1.g3 nvlink up", "rail 3 -> spine 0" (", cable 2" with several)

 private:
  FabricSpec spec_;
  std::uint32_t num_gpus_ = 0;
  std::vector<FabricLink> links_;
};

// Cross-checks a fabric with Boost.Graph: every GPU reaches every other, and no
// route is longer than the BFS distance plus the detour a rail-optimised route
// takes (returns false on a violation).
bool check_fabric_with_bfs(const Fabric& fabric);

}  // namespace meshsim::topology
