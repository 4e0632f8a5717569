#pragma once
// NCCL-style collectives on a switched GPU fabric (topology/fabric.hpp), each a
// schedule of routed transfers like the torus ones: a ring step from one GPU to
// the next crosses that pair's route (NVLink up and down inside a node; NIC, and
// a spine when rails differ, between nodes) with cut-through forwarding.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "sim/collectives/collective.hpp"
#include "sim/executor.hpp"
#include "topology/fabric.hpp"

namespace meshsim::collectives::gpu {

// The GPUs of each group of a collective over `axes` of the chip coordinates
// `coords` (the in_node axes: the GPU within its node, one axis or its factors
// where mesh axes split a node; then the node, or a grid of nodes), the GPUs
// that differ only on those axes, in NCCL's ring order: node by node (ordered
// by the listed node axes, first fastest), the local order
// reversed on every other node so that the node-to-node steps stay on one rail.
//
// NCCL runs a ring over the GPUs of several nodes as several channels, one ring
// each carrying 1/C of the data, whose node-to-node steps leave from different
// GPUs so that every NIC carries one channel each way: channel c (0 <= c < C = G,
// the group's GPUs per node) enters every other node at its GPU c and leaves it
// at its GPU c-1 (mod G), the nodes between the other way round. Channel 0 is
// the order above. A ring inside one node or across nodes on one rail is one
// channel. A group's GPUs in a node (the in-node axes among `axes`: all of the
// node's, or a factor of them) come in the order of those axes, first fastest.
std::vector<std::vector<ChipId>> rings(const Torus& coords, std::span<const int> axes, int channel = 0);
int ring_channels(const Torus& coords, std::span<const int> axes);
// Every channel's rings, channel-major (channel 0's are rings(coords, axes)).
std::vector<std::vector<ChipId>> channel_rings(const Torus& coords, std::span<const int> axes);

// Whether a group's GPUs are in more than one node.
bool spans_nodes(const topology::Fabric& fabric, const std::vector<ChipId>& group);
// The distinct nodes of a group's GPUs.
std::uint64_t node_count(const topology::Fabric& fabric, std::span<const ChipId> group);

// NCCL's tree: 2G channels (G: the group's GPUs per node), one per rail r and
// tree t. Inside one node it is the chain alone, as NCCL's tree there is (its
// cost model's tree latency, 2 (G-1) NVLink steps on one node). Channel (r, t)
// lists the group's nodes root first, parents before children (breadth first,
// children by rank), each as a chain of its GPUs from rail r (the head) in
// local order. The trees are NCCL's double binary tree over the M nodes' ranks
// (their ring order): tree 0 is the in-order binary tree in which rank r's
// level is its lowest set bit b, its parent the rank with bit b cleared and bit
// 2b set (or, past the last rank, bit b cleared), and rank 0 the root with one
// child; tree 1 is tree 0 mirrored
// (rank r as M-1-r) for even M, shifted by one rank for odd M, so that a node
// inside one tree is a leaf of the other. Subtrees are runs of consecutive
// ranks: most edges join nearby nodes (under one leaf of a multi-unit fabric).
// Channels are rail-major: (0, 0), (0, 1), (1, 0), ...
struct TreeChannel {
  std::vector<std::vector<ChipId>> chains;  // root first, parents before children; chains[i][0] is the head
  std::vector<std::uint32_t> parent;        // per position: its parent's position (the root's: 0, itself)
};
// The parent of each rank of tree `tree` (0 or 1) of NCCL's double binary tree
// over `m` ranks; the root's is itself.
std::vector<std::uint32_t> double_binary_tree(std::uint32_t m, int tree);
std::vector<TreeChannel> tree_channels(const topology::Fabric& fabric, const std::vector<ChipId>& group);

enum class Algorithm {
  Ring,          // NCCL's ring: AllGather/ReduceScatter N-1 steps of V/N, AllReduce both
  Nvls,          // AllReduce reduced in the NVLink switch (NVLink SHARP): one node only
  Hierarchical,  // AllReduce: ring reduce-scatter in the node, ring all-reduce across
                 // nodes on each rail, ring all-gather in the node
  Direct,        // AllToAll: every piece straight to its destination (grouped send/recv);
                 // AllReduce: one-shot, every GPU sends its whole buffer to every other
  Tree,          // AllReduce: NCCL's tree, reduced up and broadcast down, pipelined: a
                 // double binary tree of the nodes with a chain in each node, on 2G
                 // channels (tree_channels); inside one node the chains alone
  NvlsTree,      // AllReduce across nodes whose switches have NVLink SHARP (NCCL's
                 // NVLS_TREE): each node reduces in its NVLink switch, every GPU the
                 // head of 1/G of the data, and the heads of a rail run the double
                 // binary tree of the nodes over their NICs (nvls_tree_cut)
};
const char* algorithm_name(Algorithm a);

// NCCL's protocols: how a step's data crosses a link (src/include/device.h,
// src/init.cc; docs/MODEL.md, "NCCL's protocols").
//  - Simple: the data itself, in steps of the buffer (NCCL_BUFFSIZE 4 MiB over
//    NCCL_STEPS 8: the hardware's forward chunk), each signalled by a flag
//    written after a memory fence: the highest latency a step.
//  - LL: 16-byte lines of two 4-byte words each followed by its 4-byte flag,
//    which the receiver polls: twice the bytes on the wire, the lowest latency;
//    a step is 8 lines x 512 threads = 64 KiB of lines, 32 KiB of data.
//  - LL128: 128-byte lines of 120 data bytes and an 8-byte flag: 128/120 the
//    bytes; a step is 120 x 640 threads x 8 B = 614,400 bytes of lines, 576,000
//    of data.
// NCCL runs the ring and the tree with any of them, NVLS with Simple only;
// meshsim's hierarchical, direct and all-to-all algorithms are Simple's. The
// value is the op's class in the executor (sim::Executor::classify_ops): LL
// sees every link's variant 1, LL128 variant 2 (protocol_variant).
enum class Protocol : std::uint8_t { Simple = 0, LL = 1, LL128 = 2 };
const char* protocol_name(Protocol p);
std::optional<Protocol> parse_protocol(std::string_view name);
bool supports(Algorithm a, Protocol p);
// The bytes on the wire that carry `payload` data bytes (whole lines).
std::uint64_t wire_bytes(Protocol p, std::uint64_t payload);
// Wire bytes per data byte: 1, 2, 128/120.
double wire_factor(Protocol p);
// The data bytes of one step, and its bytes on the wire (the forwarding chunk):
// `simple_step` both for Simple.
std::uint64_t step_bytes(Protocol p, std::uint64_t simple_step);
std::uint64_t step_wire_bytes(Protocol p, std::uint64_t simple_step);
// How protocol p (LL or LL128) sees a link of `kind` whose Simple per-hop
// latency is `latency`: that latency scaled by NCCL's hwLat of p over Simple's
// for the link's kind (NVLink, else the network), and as the forwarding chunk
// a line over NVLink, where the receiving GPU polls each line's flag and
// passes it on, a step's lines over the network, which NCCL's proxy sends a
// step at a time.
sim::ResourceVariant protocol_variant(Protocol p, topology::FabricLinkKind kind, Tick latency);
// The per-hop latency and forwarding chunk of link `l` of `fabric` as protocol
// p sees it (`simple_chunk`: the hardware's forwarding chunk, Simple's).
Tick link_latency(const topology::Fabric& fabric, topology::LinkId l, Protocol p);
// The bandwidth at which protocol p's bytes cross link `l`: the link's, but for
// LL leaving a GPU into its NVLink switch, where the GPU's LL data rate
// (Fabric::ll_bytes_per_s, NCCL's llMaxBws in one node) caps the lines.
std::uint64_t link_bandwidth(const topology::Fabric& fabric, topology::LinkId l, Protocol p);
std::uint64_t link_forward_chunk(const topology::Fabric& fabric, topology::LinkId l, Protocol p,
                                 std::uint64_t simple_chunk);

// The algorithms that apply to `kind` over these groups, best known first.
// NVLS only where the fabric's switches have NVLink SHARP (nvls_efficiency > 0).
std::vector<Algorithm> candidates(Kind kind, const Torus& coords, std::span<const int> axes,
                                  const topology::Fabric& fabric);

// `chunk_bytes`: the pipelining granularity of algorithms that loop over chunks
// (NVLS, the tree), Simple's step. With `protocol` (one the algorithm runs:
// supports), the tree loops over that protocol's steps (step_bytes) and every
// transfer carries the protocol's wire bytes for its data (wire_bytes); the op
// must run as the protocol's class (sim::Executor::classify_ops).
void build(ProgramBuilder& b, const topology::Fabric& fabric, const Torus& coords, Kind kind, Algorithm algorithm,
           std::span<const int> axes, std::uint64_t group_bytes, std::uint64_t chunk_bytes, const OpPorts& ports,
           Protocol protocol = Protocol::Simple);
void send(ProgramBuilder& b, const topology::Fabric& fabric, ChipId src, ChipId dst, std::uint64_t bytes,
          const OpPorts& ports);

// NCCL's tree all-reduce over `axes` (axis 0, a node's GPUs unsplit, and node
// axes) under the rotation of every node's GPUs (GPU i to i + 1, mod G), when
// that is an automorphism (checked first): every group's rail-r channels are rail 0's turned by r
// (chains and trees), and every edge's route crosses GPU links alone (no switch
// cable) and turns with its ends. Then its quotient by the rotation, built
// without the rest: rail 0's two channels per group, listed as build() lists
// them, every link put on the same link of its node's GPU 0 and every chip's
// ports (`ports`, per chip) its node's GPU 0's. Each set of G turned tasks is
// one task here, and each link's tasks come in the order of the
// representatives' on GPU 0's links in the whole program (the rails are
// innermost there: driver/translations.cpp). Returns those links, ascending:
// transfer resource k is the k-th; nothing (and nothing built) when the
// channels do not turn.
//
// With `mirrors` (tree_mirror's map; empty: none), its quotient by the mirror
// of the nodes too (also checked first: tree 1 is tree 0 mirrored, its chains,
// its tree and its routes): rail 0's tree 0 alone, each link put on the lower of it and its
// mirror, and the ports of both nodes the lower's (the caller's `ports`). Each
// set of 2G tasks is one task here.
std::optional<std::vector<topology::LinkId>> tree_rail_quotient(ProgramBuilder& b, const topology::Fabric& fabric,
                                                      const Torus& coords, std::span<const int> axes,
                                                      std::uint64_t group_bytes, std::uint64_t chunk_bytes,
                                                      const OpPorts& ports,
                                                      std::span<const ChipId> mirrors = {},
                                                      Protocol protocol = Protocol::Simple);

// The mirror of the nodes of NCCL's tree over `axes`: per GPU, the same GPU of
// the node of rank m - 1 - its node's rank, when the op is one group over every
// GPU of an even number m of nodes; else empty. For an even m, tree 1 of the
// double binary tree is tree 0 mirrored so (double_binary_tree, tree_channels),
// and the mirror maps each of the op's tasks onto one of the other tree.
std::vector<ChipId> tree_mirror(const topology::Fabric& fabric, const Torus& coords, std::span<const int> axes);

// The pipelining chunks of `bytes` cut at `chunk_bytes` (at least 1): what the
// chunked algorithms (NVLS over a GPU's slice, the tree over half the buffer)
// loop over.
std::uint64_t chunk_count(std::uint64_t bytes, std::uint64_t chunk_bytes);

// How NCCL's tree cuts a group's bytes: each of its `channels` carries
// ceil(bytes / channels), in `chunks` chunks of `chunk` bytes (the last may be
// shorter). The chunk starts at `chunk_bytes` (NCCL's step, a buffer over its 8
// steps) and is halved as NCCL halves it for a tree of `depth` (tree_depth)
// where the buffer would give each channel too few chunks to fill the pipeline
// (docs/MODEL.md). The builder, the task bound and the closed form all use it.
struct TreeChunking {
  std::uint64_t per_channel = 0, chunks = 0, chunk = 0;
};
TreeChunking tree_chunking(std::uint64_t group_bytes, std::uint64_t channels, std::uint64_t chunk_bytes,
                           std::uint64_t depth);
// The same with LL128 (src/enqueue.cc): the chunk starts at `chunk_bytes`
// (LL128's step, 576,000 data bytes) and is halved while the buffer over the
// channels gives fewer than 64/ppn x s chunks, while above 128 KiB, then fewer
// than 16/ppn x s, while above 32 KiB; s = 1 + floor(log2 nodes) + 0.1 ppn,
// ppn the group's GPUs per node.
TreeChunking tree_chunking_ll128(std::uint64_t group_bytes, std::uint64_t channels, std::uint64_t chunk_bytes,
                                 std::uint64_t nodes, std::uint64_t ppn);
// How NCCL's tree cuts `group`'s bytes over `channels` with protocol p, from
// p's step `chunk_bytes` (step_bytes): LL128's rule, else Simple's (LL's 32 KiB
// step is never halved by either).
TreeChunking tree_cut(const topology::Fabric& fabric, std::span<const ChipId> group, std::uint64_t group_bytes,
                      std::uint64_t channels, std::uint64_t chunk_bytes, Protocol p);
// NCCL's estimate of its tree's depth over `group`: the GPUs of a node less
// one (the chain), plus floor(log2(nodes)).
std::uint64_t tree_depth(const topology::Fabric& fabric, std::span<const ChipId> group);

// How NCCL's NVLS tree (NCCL_ALGO_NVLS_TREE, NCCL 2.19 to 2.29: src/device/
// all_reduce.h, src/enqueue.cc, src/transport/nvls.cc) cuts a group's bytes:
// each of the fabric's NVLS channels (Fabric::nvls_channels) carries
// ceil(bytes / channels) in `loops` loops; a loop moves H pieces, one per
// head (GPU h of every node heads piece h; H = the GPUs of a node, at most
// NCCL_MAX_NVLS_ARITY, 32: an NVL72 domain has 32 heads). NCCL's chunk is 128 KiB
// (NCCL_NVLS_CHUNKSIZE), at most 64 KiB on 4 nodes and more, then 64 KiB where
// the bytes are under 4 x channels x G chunks and 32 KiB under 1 x; the pieces
// are evened out over the loops (as the tree's chunks are).
struct NvlsTreeCut {
  std::uint64_t channels = 0, heads = 0, per_channel = 0, loops = 0, piece = 0;
};
NvlsTreeCut nvls_tree_cut(const topology::Fabric& fabric, std::span<const ChipId> group, std::uint64_t group_bytes);
// The NVLS tree's closed form for one group: the way of one piece (loaded and
// reduced through the switch, up the slowest way to the root of either tree,
// down the slowest way again, stored and multicast), its latency and the time
// the piece takes to cross each link on it; and the busiest link in seconds
// per byte of the group's data (NVLink: (1 + 1/H) V at the NVLS efficiency
// each way at a head; a NIC: V / 2H per tree edge at its head, each way).
struct NvlsTreeLimits {
  double latency_s = 0;
  double path_forward_s = 0;
  double seconds_per_byte = 0;
};
NvlsTreeLimits nvls_tree_limits(const topology::Fabric& fabric, const std::vector<ChipId>& group, double piece);

// The GPUs of an NVLink domain of `gpus` that own a slice of an NVLS
// all-reduce, or head the NVLS tree's pieces (NCCL's heads): all, at most
// NCCL_MAX_NVLS_ARITY, 32 (an NVL72 domain's other 40 GPUs load and take the
// multicasts).
std::size_t nvls_owners(std::size_t gpus);

// What an NVLS transfer of `bytes` costs its link, at `efficiency` (0 < e <= 1)
// of the link rate: ceil(bytes / e), the time its multimem traffic holds the
// link (request packets, the switch's reduction). Link byte counts include it.
std::uint64_t nvls_link_bytes(std::uint64_t bytes, double efficiency);

// An upper bound of the transfers build() creates for a group collective,
// computed from the same rings, routes and chunk counts without building
// anything (exact for the ring phases and the tree); saturates at 2^62.
std::uint64_t transfer_bound(const topology::Fabric& fabric, const Torus& coords, Kind kind, Algorithm algorithm,
                             std::span<const int> axes, std::uint64_t group_bytes, std::uint64_t chunk_bytes,
                             Protocol protocol = Protocol::Simple);

// The narrowest one-way bandwidth a ring step of these rings crosses (bytes/s),
// and the latency of the slowest ring step.
// `seconds_per_byte`: the busiest link of all the given rings' steps, in seconds
// per byte each step moves (crossings / bandwidth): 1/B for rings that share no
// link, less for channels whose NIC steps are spread over the GPUs.
// `phase_latency_s`: the latency of a ring phase (N-1 consecutive steps from any
// start): the ring's step latencies summed, less its fastest step; (N-1) times
// the step latency when every step is alike. `phase_forward_s`: over the same
// steps, the time a step's `piece` bytes take to let it forward: a step forwards
// what it received once a forwarding chunk of it (the link's, as protocol p
// sees it: link_forward_chunk) has crossed each link, or all of it if smaller,
// so a phase's first data take the sum of min(piece, chunk) / b on top.
struct RingLimits {
  double bandwidth_bytes_per_s = 0;
  double step_latency_s = 0;
  double seconds_per_byte = 0;
  double phase_latency_s = 0;
  double phase_forward_s = 0;
};
// Latencies and forwarding chunks as protocol `p` sees the links; `piece`: the
// bytes of a step on the wire, `simple_chunk` the hardware's forwarding chunk.
RingLimits ring_limits(const topology::Fabric& fabric, const std::vector<std::vector<ChipId>>& rings,
                       Protocol p = Protocol::Simple, double piece = 0, std::uint64_t simple_chunk = 0);

// NCCL's tree across nodes for one group (tree_channels): the way of one chunk,
// up the chain and the tree and down again: 2 (G-1) chain steps, each the
// slowest chain step, and the slowest way from a head up to the root and from
// the root down to a head, each the sum of its own tree steps (at most the
// trees' depth, ceil(log2 M); a step across leaves crosses more links than one
// within a leaf); in latency, and in the time a `chunk` of bytes on the wire
// takes to be forwarded at each link crossed (stored and forwarded whole where
// the link's forwarding chunk, as protocol p sees it, is no smaller); and the
// busiest link in seconds per byte of a channel's data (each channel carries
// V / channels through every edge, up and down).
struct TreeLimits {
  double latency_s = 0;
  double path_forward_s = 0;
  double seconds_per_byte = 0;
  std::size_t channels = 0;
};
TreeLimits tree_limits(const topology::Fabric& fabric, const std::vector<ChipId>& group,
                       Protocol p = Protocol::Simple, double chunk = 0, std::uint64_t simple_chunk = 0);

}  // namespace meshsim::collectives::gpu
