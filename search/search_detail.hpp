#pragma once
// Internal to search/: what the search (search.cpp) and its JSON frontend and
// writer (spec_json.cpp) share.
#include <array>
#include <vector>

#include "search/search.hpp"

namespace meshsim::search::detail {

struct SwitchInfo {
  const char* key;                     // in "search"
  const char* overlap_key;             // in training.overlap, or null
  std::vector<bool> defaults;
  std::vector<const char*> strategies;  // it applies to plans with any of these
  const char* on_label;                 // in the options when on (or null)
  const char* off_label;                // when off (or null)
};

// The switches' keys, defaults and labels, in Switch order.
extern const std::array<SwitchInfo, kSwitches> kSwitchInfo;

// The scaling book's rules of thumb for a search's system and model.
struct Rules {
  double tokens = 0, c_over_w = 0, x_opt = 0;
};
Rules rules_of(const SearchSpec& spec, const SearchResult& r);
// The book's X: the chips that split the batch (data and FSDP), all of them
// but the tensor-parallel ones in its FSDP x TP setting.
double book_x(const SearchResult& r, const Plan& p);
// The X of the plans that fit in memory (simulated or pruned by the bound)
// nearest to `x_opt` (by ratio).
double nearest_x(const SearchResult& r, double x_opt);

}  // namespace meshsim::search::detail
