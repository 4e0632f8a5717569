#pragma once
// The seed's sharding notation: "A[I_X, J_Y]", "A[I_XY, J]", "[I, J_X]".
// A dim's subscript names the mesh axes it is split over, major to minor; several
// axes are written back to back ("XY"). Multi-letter axis names are matched
// longest first against the mesh's names.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::workloads {

struct ShardedDim {
  std::string dim;
  std::string subscript;  // raw text after '_', empty when replicated
};

struct ShardingText {
  std::string array;  // empty when the text has no array name
  std::vector<ShardedDim> dims;
};

// Returns nullopt and sets `error` on a syntax error.
std::optional<ShardingText> parse_sharding(std::string_view text, std::string& error);

// Splits a subscript ("XY") into mesh axis names; nullopt and `error` when some
// part names no axis.
std::optional<std::vector<std::string>> split_subscript(std::string_view subscript,
                                                        const std::vector<std::string>& axis_names,
                                                        std::string& error);

// "A[I_X, J_YZ]" from dims and their axis names.
std::string format_sharding(std::string_view array, const std::vector<std::string>& dims,
                            const std::vector<std::vector<std::string>>& axes);

}  // namespace meshsim::workloads
