#pragma once
// meshsim search's JSON: a plan's workload (what `meshsim run` reproduces it
// with) and the search's results (docs/SEARCH.md).
#include <cstddef>

#include "search/search.hpp"
#include "workloads/json_cursor.hpp"

namespace meshsim::search {

workloads::Json plan_workload(const SearchSpec& spec, const Plan& plan);
workloads::Json search_json(const SearchSpec& spec, const SearchResult& r, std::size_t top);

}  // namespace meshsim::search
