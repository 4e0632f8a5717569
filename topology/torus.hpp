#pragma once
// An N-dimensional torus or mesh of chips (TPU ICI). Each axis has or lacks a
// wraparound link; between neighbours there is one link per direction, each with
// a one-way bandwidth and a per-hop latency. Chip ids are linear with axis 0
// fastest. Link ids are dense slots: chip * 2 * num_axes + axis * 2 + direction;
// slots at the open ends of an axis without wraparound hold no link.
//
// Multislice (several TPU slices joined by the data-center network, DCN): the
// last axis may be a switched axis, the slice index. It has no links between
// neighbours: every chip has one link out to the network (its Plus slot) and one
// in from it (its Minus slot), its share of its host's NICs, and the network (not
// modelled as a resource: non-blocking) takes data from any chip to any chip of
// another slice. A step crosses two links.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/tick.hpp"

namespace meshsim::topology {

using ChipId = std::uint32_t;
using LinkId = std::uint32_t;
constexpr ChipId kNoChip = ~ChipId{0};
constexpr LinkId kNoLink = ~LinkId{0};

enum class Direction : std::uint8_t { Plus = 0, Minus = 1 };
constexpr int sign(Direction d) { return d == Direction::Plus ? 1 : -1; }

struct AxisSpec {
  int size = 1;
  bool wraparound = false;
  // The slices of a multislice system over the data-center network (see the
  // top of this file): any slice reaches any other; at most one, the last axis.
  bool switched = false;
  // A GPU grid's axis among the GPUs of one node (topology/system.hpp): the
  // leading axes, whose sizes multiply to the node's GPUs (one axis, or its
  // factors where mesh axes take part of a node); the others are node axes.
  // Never set on a torus.
  bool in_node = false;
};

// The most axes a torus (or a GPU grid, with its node's GPUs split) has.
inline constexpr int kMaxTorusAxes = 6;

struct LinkSpec {
  std::uint64_t bandwidth_bytes_per_s = 0;  // one-way, per link, 1e9-based bytes
  Tick latency;                             // per hop
};

struct Link {
  ChipId src = kNoChip;
  ChipId dst = kNoChip;
  std::uint8_t axis = 0;
  Direction direction = Direction::Plus;
  // A data-center network link: Plus is the chip's link out to the network,
  // Minus its link in; src and dst are both the chip.
  bool dcn = false;
};

class Torus {
 public:
  // Preconditions (validated by the workload parser): 1..6 axes, each size >= 1,
  // bandwidth > 0; `twisted` only where twist_error() of the ICI axes is empty;
  // a switched axis only last, then `dcn` with bandwidth > 0. Violations are
  // bugs and assert.
  Torus(std::vector<AxisSpec> axes, LinkSpec link, bool twisted = false, LinkSpec dcn = {});

  // Twisted tori (TPU v4): a shape k x k x 2k or k x 2k x 2k (any axis order, k a
  // multiple of 4, every axis wrapped) can be wired so that the wraparound link of
  // each short axis lands shifted by k along every long axis: crossing it in the
  // Plus direction adds k to those coordinates, Minus subtracts k (the same, mod 2k).
  // Empty when `axes` can be twisted, else why not.
  static std::string twist_error(std::span<const AxisSpec> axes);
  bool twisted() const { return !twist_.empty(); }
  // The shift crossing axis a's wraparound (Plus) applies to axis b (0 when untwisted).
  int twist(int a, int b) const {
    return twist_.empty() ? 0 : twist_[static_cast<std::size_t>(a) * axes_.size() + static_cast<std::size_t>(b)];
  }
  // Whether crossing axis a's wraparound shifts other axes.
  bool twisted_axis(int a) const;

  int num_axes() const { return static_cast<int>(axes_.size()); }
  const AxisSpec& axis(int a) const { return axes_[static_cast<std::size_t>(a)]; }
  const std::vector<AxisSpec>& axes() const { return axes_; }
  std::uint32_t num_chips() const { return num_chips_; }
  const LinkSpec& link_spec() const { return link_spec_; }  // the ICI links'

  // Multislice: the switched axis (the slices), or -1; its links' spec.
  // A step along it (ring phases, neighbor()) goes to the chip at the same
  // position in the next slice: the chip's link out, the other chip's link in.
  int dcn_axis() const { return dcn_axis_; }
  bool switched(int axis) const { return axis == dcn_axis_; }
  const LinkSpec& dcn_spec() const { return dcn_spec_; }
  LinkId dcn_out(ChipId chip) const { return link(chip, dcn_axis_, Direction::Plus); }
  LinkId dcn_in(ChipId chip) const { return link(chip, dcn_axis_, Direction::Minus); }
  // The bandwidth and latency of a link (ICI or DCN).
  const LinkSpec& spec(LinkId id) const { return links_[id].dcn ? dcn_spec_ : link_spec_; }

  int coord(ChipId chip, int axis) const;
  std::vector<int> coords(ChipId chip) const;
  ChipId chip(std::span<const int> coords) const;
  // The chip whose coordinate on `axis` is `value`, others as in `chip`.
  ChipId with_coord(ChipId chip, int axis, int value) const;

  // Neighbour one hop away, or kNoChip at the open end of a line. Along the
  // switched axis: the same position in the next (previous) slice, round.
  ChipId neighbor(ChipId chip, int axis, Direction dir) const;
  LinkId link(ChipId chip, int axis, Direction dir) const {
    const std::size_t slot = static_cast<std::size_t>(chip) * 2 * axes_.size() + static_cast<std::size_t>(axis) * 2 +
                             static_cast<std::size_t>(dir);
    return links_[slot].src == kNoChip ? kNoLink : static_cast<LinkId>(slot);
  }
  std::size_t num_link_slots() const { return links_.size(); }
  bool link_exists(LinkId id) const { return id < links_.size() && links_[id].src != kNoChip; }
  const Link& link_info(LinkId id) const { return links_[id]; }
  std::size_t num_links() const { return num_links_; }

  // Hops and direction of the shortest way from coordinate a to b on one axis.
  // With wraparound, a tie (exactly half way round an even ring) goes Plus. The
  // switched axis: one hop (two links) to any other slice.
  struct AxisHops {
    int hops = 0;
    Direction direction = Direction::Plus;
  };
  AxisHops axis_hops(int axis, int from, int to) const;

  // Dimension-order route: the axes in `axis_order` one after another, each the
  // short way round. Axes not listed must already agree. Returns the links in order.
  // Between slices (the slice axis listed) the route is the data-center network,
  // host to host: the source's DCN link out and the destination's link in.
  bool between_slices(ChipId src, ChipId dst) const;
  // On a twisted torus the route is a shortest path: each twisted axis in the order
  // is crossed directly or through its wraparound (shifting the long axes, which
  // must be in the order), whichever gives the fewest hops in all.
  std::vector<LinkId> route(ChipId src, ChipId dst, std::span<const int> axis_order) const;
  // Every shortest route in `axis_order`: a piece exactly half way round an even
  // ring may go either way, and on a twisted torus every tie between crossing a
  // twisted wraparound or not is a route too (route() takes the first).
  std::vector<std::vector<LinkId>> shortest_routes(ChipId src, ChipId dst, std::span<const int> axis_order) const;
  // Route in the default order 0, 1, 2, ...
  std::vector<LinkId> route(ChipId src, ChipId dst) const;
  int hop_distance(ChipId src, ChipId dst) const;
  // The latency of route(src, dst): its links' latencies added up.
  Tick route_latency(ChipId src, ChipId dst) const;

  std::string axis_name(int axis) const;
  std::string chip_name(ChipId chip) const;   // "(1,0,3)"; with slices "(1,0,3,2)"
  std::string link_name(LinkId id) const;     // "(1,0,3)+y"; "(1,0,3,2) dcn out"
  std::string shape_string() const;           // "4x4x4"; "4x4x4 x 2 slices"

 private:
  std::vector<AxisSpec> axes_;
  std::vector<std::uint32_t> strides_;
  LinkSpec link_spec_;
  std::uint32_t num_chips_ = 1;
  std::vector<Link> links_;
  std::size_t num_links_ = 0;
  std::vector<int> twist_;  // num_axes x num_axes shifts (empty: not twisted)
  int dcn_axis_ = -1;
  LinkSpec dcn_spec_;

  // A twisted torus's choices of wraparound crossings for the shortest routes.
  struct TwistedPlan {
    int hops = 0;
    std::vector<std::vector<int>> crossings;  // each per axis: 0, +1 (Plus through the wrap) or -1
  };
  TwistedPlan twisted_plan(ChipId src, ChipId dst, std::span<const int> axis_order) const;
  // Walks the axes of `axis_order` from position i (the twisted crossings as
  // given; empty: none), appending each finished route to `out`; with
  // `all_ties` a normal axis at half its even ring branches both ways.
  void walk(ChipId at, ChipId dst, std::span<const int> axis_order, std::size_t i, std::span<const int> crossing,
            bool all_ties, std::vector<LinkId>& path, std::vector<std::vector<LinkId>>& out) const;
};

}  // namespace meshsim::topology
