#pragma once
// Which chips an op runs on, and where its per-chip entry and exit joins are in
// the program: an op on n chips has its entry joins at ids [entry_begin,
// entry_begin + n) and its exit joins at [entry_begin + n, entry_begin + 2n),
// the i-th of each for the i-th chip of the set. Most ops run on every chip; a
// pipeline stage's ops run on the stage's chips only.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sim/program.hpp"

namespace meshsim::sim {

using ChipSet = std::shared_ptr<const std::vector<std::uint32_t>>;  // ascending chip ids; null: every chip

struct OpChips {
  TaskId entry_begin = 0;
  ChipSet chips;            // null: chips 0 .. all - 1
  std::uint32_t all = 0;    // chips in the whole system

  std::uint32_t count() const { return chips ? static_cast<std::uint32_t>(chips->size()) : all; }
  std::uint32_t chip_at(std::uint32_t i) const { return chips ? (*chips)[i] : i; }
  // The position of `chip` in the set, or nothing when the op does not run there.
  std::optional<std::uint32_t> position(std::uint32_t chip) const {
    if (!chips) return chip < all ? std::optional<std::uint32_t>(chip) : std::nullopt;
    const auto it = std::lower_bound(chips->begin(), chips->end(), chip);
    if (it == chips->end() || *it != chip) return std::nullopt;
    return static_cast<std::uint32_t>(it - chips->begin());
  }
  bool is_entry(TaskId id) const { return id >= entry_begin && id < entry_begin + count(); }
  bool is_port(TaskId id) const { return id >= entry_begin && id < entry_begin + 2 * count(); }
};

}  // namespace meshsim::sim
