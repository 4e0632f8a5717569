#include "topology/system.hpp"

#include <utility>

#include "base/error.hpp"

namespace meshsim::topology {

namespace {

std::vector<std::string> torus_axis_names(const Torus& t) {
  std::vector<std::string> names;
  for (int a = 0; a < t.num_axes(); ++a) names.push_back(t.axis_name(a));
  return names;
}

}  // namespace

System::System(Torus torus) : grid_(std::move(torus)), axis_names_(torus_axis_names(grid_)) {}

System::System(Torus grid, Fabric fabric, std::vector<std::string> axis_names)
    : grid_(std::move(grid)), fabric_(std::move(fabric)), axis_names_(std::move(axis_names)) {
  MESHSIM_ASSERT(axis_names_.size() == static_cast<std::size_t>(grid_.num_axes()), "a name per grid axis");
  MESHSIM_ASSERT(fabric_->num_gpus() == grid_.num_chips(), "the fabric's GPUs are the grid's chips");
  int node = 1, a = 0;
  for (; a < grid_.num_axes() && grid_.axis(a).in_node; ++a) node *= grid_.axis(a).size;
  MESHSIM_ASSERT(a > 0 && node == fabric_->gpus_per_node(), "the leading in-node axes hold a node's GPUs");
  for (; a < grid_.num_axes(); ++a) MESHSIM_ASSERT(!grid_.axis(a).in_node, "in-node axes come first");
}

std::vector<LinkId> System::route(ChipId src, ChipId dst) const {
  return fabric_ ? fabric_->route(src, dst) : grid_.route(src, dst);
}

const LinkSpec& System::link_spec(LinkId link) const {
  return fabric_ ? fabric_->link(link).spec : grid_.spec(link);
}

}  // namespace meshsim::topology
