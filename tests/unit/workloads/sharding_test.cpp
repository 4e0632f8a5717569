// The sharding notation: parse_sharding, split_subscript, format_sharding.
#include "workloads/sharding.hpp"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

using meshsim::workloads::format_sharding;
using meshsim::workloads::parse_sharding;
using meshsim::workloads::ShardingText;
using meshsim::workloads::split_subscript;

namespace {

using Strings = std::vector<std::string>;

// Parses `text`, requiring success; returns "dim:subscript" per dim.
Strings dims_of(const ShardingText& s) {
  Strings out;
  for (const auto& d : s.dims) out.push_back(d.dim + ":" + d.subscript);
  return out;
}

ShardingText parse_ok(const std::string& text) {
  std::string error;
  const std::optional<ShardingText> s = parse_sharding(text, error);
  INFO("sharding '" << text << "': " << error);
  REQUIRE(s.has_value());
  CHECK(error.empty());
  return *s;
}

std::string parse_error(const std::string& text) {
  std::string error;
  const std::optional<ShardingText> s = parse_sharding(text, error);
  INFO("sharding '" << text << "'");
  REQUIRE_FALSE(s.has_value());
  return error;
}

Strings split_ok(const std::string& subscript, const Strings& axes) {
  std::string error;
  const auto s = split_subscript(subscript, axes, error);
  INFO("subscript '" << subscript << "': " << error);
  REQUIRE(s.has_value());
  return *s;
}

std::string split_error(const std::string& subscript, const Strings& axes) {
  std::string error;
  const auto s = split_subscript(subscript, axes, error);
  INFO("subscript '" << subscript << "'");
  REQUIRE_FALSE(s.has_value());
  return error;
}

}  // namespace

TEST_CASE("Workload: parse_sharding reads array name, dims and subscripts", "[workloads]") {
  const ShardingText s = parse_ok("A[I_X, J_Y]");
  CHECK(s.array == "A");
  CHECK(dims_of(s) == Strings{"I:X", "J:Y"});

  CHECK(dims_of(parse_ok("A[I_XY, J]")) == Strings{"I:XY", "J:"});
  CHECK(dims_of(parse_ok("W[I, J, K]")) == Strings{"I:", "J:", "K:"});
  CHECK(dims_of(parse_ok("A[I]")) == Strings{"I:"});
}

TEST_CASE("Workload: parse_sharding without an array name", "[workloads]") {
  const ShardingText s = parse_ok("[I, J_X]");
  CHECK(s.array.empty());
  CHECK(dims_of(s) == Strings{"I:", "J:X"});
}

TEST_CASE("Workload: parse_sharding multi-letter names and spaces", "[workloads]") {
  const ShardingText s = parse_ok("act_0[batch_data, seq, hidden_model]");
  CHECK(s.array == "act_0");
  CHECK(dims_of(s) == Strings{"batch:data", "seq:", "hidden:model"});

  // Spaces are allowed around the name, the brackets and the commas.
  const ShardingText spaced = parse_ok("  A [ I_X ,J_Y  ]  ");
  CHECK(spaced.array == "A");
  CHECK(dims_of(spaced) == Strings{"I:X", "J:Y"});
  CHECK(dims_of(parse_ok("A[I_X,J_Y]")) == Strings{"I:X", "J:Y"});
}

TEST_CASE("Workload: parse_sharding syntax errors", "[workloads]") {
  CHECK(parse_error("A") == "expected '[' in sharding 'A' (write it like A[I_X, J])");
  CHECK(parse_error("") == "expected '[' in sharding '' (write it like A[I_X, J])");
  CHECK(parse_error("A(I_X)") == "expected '[' in sharding 'A(I_X)' (write it like A[I_X, J])");
  CHECK(parse_error("A[I_X, J_Y") == "expected ',' or ']' at position 11 of sharding 'A[I_X, J_Y'");
  CHECK(parse_error("A[I_X; J]") == "expected ',' or ']' at position 6 of sharding 'A[I_X; J]'");
  CHECK(parse_error("A[I_, J_Y]") == "expected mesh axes after 'I_' in sharding 'A[I_, J_Y]'");
  CHECK(parse_error("A[]") == "expected a dimension name at position 3 of sharding 'A[]'");
  CHECK(parse_error("A[I_X,]") == "expected a dimension name at position 7 of sharding 'A[I_X,]'");
  CHECK(parse_error("A[1_X]") == "expected a dimension name at position 3 of sharding 'A[1_X]'");
  CHECK(parse_error("A[I_X] B") == "unexpected text after ']' in sharding 'A[I_X] B'");
  CHECK(parse_error("A[I_X]]") == "unexpected text after ']' in sharding 'A[I_X]]'");
}

TEST_CASE("Workload: split_subscript single-letter axes", "[workloads]") {
  const Strings axes{"X", "Y", "Z"};
  CHECK(split_ok("X", axes) == Strings{"X"});
  CHECK(split_ok("XY", axes) == Strings{"X", "Y"});
  CHECK(split_ok("ZX", axes) == Strings{"Z", "X"});  // order as written, major first
  CHECK(split_ok("", axes).empty());                 // a replicated dim
  // Repeats are split_subscript's business only as names; the layout check refuses them.
  CHECK(split_ok("XX", axes) == Strings{"X", "X"});
}

TEST_CASE("Workload: split_subscript multi-letter axes", "[workloads]") {
  const Strings axes{"data", "model", "pod"};
  CHECK(split_ok("data", axes) == Strings{"data"});
  CHECK(split_ok("datamodel", axes) == Strings{"data", "model"});
  CHECK(split_ok("podmodeldata", axes) == Strings{"pod", "model", "data"});
}

TEST_CASE("Workload: split_subscript takes the longest matching name", "[workloads]") {
  // "XY" is a mesh axis of its own: "XY" is it, not X then Y, whatever the order of names.
  CHECK(split_ok("XY", {"X", "Y", "XY"}) == Strings{"XY"});
  CHECK(split_ok("XY", {"XY", "X", "Y"}) == Strings{"XY"});
  CHECK(split_ok("XYX", {"X", "XY", "Y"}) == Strings{"XY", "X"});
  CHECK(split_ok("YXY", {"X", "XY", "Y"}) == Strings{"Y", "XY"});
  CHECK(split_ok("x1x", {"x", "x1"}) == Strings{"x1", "x"});
  CHECK(split_ok("data", {"d", "data", "a"}) == Strings{"data"});
}

TEST_CASE("Workload: split_subscript names no axis", "[workloads]") {
  CHECK(split_error("Z", {"X", "Y"}) == "unknown mesh axis 'Z' in subscript 'Z'");
  CHECK(split_error("XZ", {"X", "Y"}) == "unknown mesh axis 'Z' in subscript 'XZ'");
  CHECK(split_error("dat", {"data", "model"}) == "unknown mesh axis 'dat' in subscript 'dat'");
  CHECK(split_error("datamod", {"data", "model"}) == "unknown mesh axis 'mod' in subscript 'datamod'");
  CHECK(split_error("x", {"X"}) == "unknown mesh axis 'x' in subscript 'x'");  // names are case-sensitive
  CHECK(split_error("X", {}) == "unknown mesh axis 'X' in subscript 'X'");
}

TEST_CASE("Workload: format_sharding", "[workloads]") {
  CHECK(format_sharding("A", {"I", "J"}, {{"X"}, {"Y"}}) == "A[I_X, J_Y]");
  CHECK(format_sharding("A", {"I", "J"}, {{"X", "Y"}, {}}) == "A[I_XY, J]");
  CHECK(format_sharding("A", {"I", "J"}, {{}, {}}) == "A[I, J]");
  CHECK(format_sharding("", {"I", "J"}, {{}, {"X"}}) == "[I, J_X]");
  CHECK(format_sharding("act", {"batch", "hidden"}, {{"data"}, {"model", "pod"}}) ==
        "act[batch_data, hidden_modelpod]");
  CHECK(format_sharding("v", {"I"}, {{}}) == "v[I]");
}

TEST_CASE("Workload: format_sharding output parses back", "[workloads]") {
  const Strings mesh{"data", "model", "X"};
  const std::string text = format_sharding("act", {"B", "S", "H"}, {{"data", "X"}, {}, {"model"}});
  CHECK(text == "act[B_dataX, S, H_model]");
  const ShardingText s = parse_ok(text);
  CHECK(s.array == "act");
  REQUIRE(s.dims.size() == 3u);
  CHECK(split_ok(s.dims[0].subscript, mesh) == Strings{"data", "X"});
  CHECK(split_ok(s.dims[1].subscript, mesh).empty());
  CHECK(split_ok(s.dims[2].subscript, mesh) == Strings{"model"});
}
