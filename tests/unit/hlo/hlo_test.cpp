// XLA HLO text: modules, shapes, attributes; replica groups in every mode and
// form (iota groups against a reference computed here by scattering an iota
// into its transposed shape); the fixtures; one error line per malformed dump.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "hlo/hlo.hpp"

using namespace meshsim;
using namespace meshsim::hlo;

namespace {

// arange(prod dims) reshaped to dims and transposed by perm, flattened, cut into
// rows of `size`: every source position is written to its transposed position.
std::vector<std::vector<int>> reference_iota(const std::vector<int>& dims, const std::vector<int>& perm, int size) {
  const int r = static_cast<int>(dims.size());
  int total = 1;
  for (int d : dims) total *= d;
  std::vector<int> t(dims.size());
  for (int i = 0; i < r; ++i) t[static_cast<std::size_t>(i)] = dims[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])];
  std::vector<int> flat(static_cast<std::size_t>(total));
  for (int src = 0; src < total; ++src) {
    std::vector<int> idx(dims.size());
    for (int i = r - 1, rest = src; i >= 0; --i) {
      idx[static_cast<std::size_t>(i)] = rest % dims[static_cast<std::size_t>(i)];
      rest /= dims[static_cast<std::size_t>(i)];
    }
    int dst = 0;
    for (int i = 0; i < r; ++i)
      dst = dst * t[static_cast<std::size_t>(i)] + idx[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])];
    flat[static_cast<std::size_t>(dst)] = src;
  }
  std::vector<std::vector<int>> groups;
  for (int g = 0; g < total / size; ++g)
    groups.emplace_back(flat.begin() + g * size, flat.begin() + (g + 1) * size);
  return groups;
}

std::string error_of(const std::string& text) {
  try {
    const Module m = parse_module_text(text, "d.hlo");
    for (const Computation& c : m.computations)
      for (const Instruction& i : c.instructions) {
        if (i.attr("replica_groups")) (void)device_groups(i, m);
        if (i.attr("source_target_pairs")) (void)source_target_pairs(i, m);
      }
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string module(const std::string& body, const std::string& header = ", num_partitions=4") {
  return "HloModule m" + header + "\n\nENTRY %main {\n" + body + "\n}\n";
}

}  // namespace

TEST_CASE("hlo: iota replica groups: the notes' examples and random shapes against a reference", "[hlo]") {
  using G = std::vector<std::vector<int>>;
  CHECK(*iota_groups("[2,4]<=[8]") == G{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(*iota_groups("[4,2]<=[2,4]T(1,0)") == G{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(*iota_groups("[2,4]<=[4,2]T(1,0)") == G{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(*iota_groups("[1,8]<=[8]") == G{{0, 1, 2, 3, 4, 5, 6, 7}});
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int> dims, perm(static_cast<std::size_t>(rank));
    int total = 1;
    for (int i = 0; i < rank; ++i) {
      dims.push_back(1 + static_cast<int>(rng() % 4));
      total *= dims.back();
    }
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int> sizes;
    for (int s = 1; s <= total; ++s)
      if (total % s == 0) sizes.push_back(s);
    const int size = sizes[rng() % sizes.size()];
    const std::string text = fmt::format("[{},{}]<=[{}]T({})", total / size, size, fmt::join(dims, ","), fmt::join(perm, ","));
    INFO(text);
    const auto got = iota_groups(text);
    REQUIRE(got);
    CHECK(*got == reference_iota(dims, perm, size));
  }
  // Not of the form: nullopt.
  CHECK(!iota_groups("{{0,1}}"));
  CHECK(!iota_groups("[3,3]<=[8]"));        // 9 ids from 8
  CHECK(!iota_groups("[2,4]<=[4,2]T(0,0)"));  // not a permutation
  CHECK(!iota_groups("[2,4]<=[4,2]T(1)"));    // a permutation of the wrong rank
  CHECK(!iota_groups("[8]<=[8]"));            // groups are two-dimensional
}

TEST_CASE("hlo: the FSDP fixture: tables skipped, computations, async collectives in a while loop", "[hlo]") {
  const Module m = load_module(std::string(MESHSIM_SOURCE_DIR) + "/tests/hlo/fsdp_mlp_while.hlo");
  CHECK(m.name == "jit_train_step");
  CHECK(m.num_partitions == 4);
  CHECK(m.devices() == 4);
  REQUIRE(m.computations.size() == 5);
  CHECK(m.entry_computation().name == "main.30");
  const Computation& body = *m.find("body.7");
  const Instruction& ag = *body.find("all-gather-start.13");
  CHECK(ag.opcode == "all-gather-start");
  CHECK(ag.operands == std::vector<std::string>{"w1.11"});
  REQUIRE(ag.shape.is_tuple);
  CHECK(ag.shape.tuple[1].dims == std::vector<std::int64_t>{1024, 4096});  // TPU tiling read past
  CHECK(ag.shape.tuple[1].bytes() == 1024u * 4096u * 2u);
  CHECK(device_groups(ag, m) == std::vector<std::vector<int>>{{0, 1, 2, 3}});
  CHECK(device_groups(*body.find("all-gather-start.14"), m) == std::vector<std::vector<int>>{{0, 1, 2, 3}});
  CHECK(*int_list(ag, "dimensions", m) == std::vector<std::int64_t>{0});
  CHECK(dot_flops(*body.find("dot.16"), body, m) == 2u * 4u * 4096u * 1024u);
  CHECK(called(*body.find("fusion.17"), "calls", m)->name == "fused_gelu");
  const Instruction& loop = *m.entry_computation().find("while.29");
  CHECK(known_trip_count(loop) == 8);
  CHECK(called(loop, "body", m) == &body);
  CHECK(m.entry_computation().root()->name == "out.31");
  // The quoted backend_config of older prints.
  Instruction quoted = loop;
  quoted.attrs.back().second = R"("{\"known_trip_count\":{\"n\":\"12\"}}")";
  CHECK(known_trip_count(quoted) == 12);
  quoted.attrs.pop_back();
  CHECK(!known_trip_count(quoted));
}

TEST_CASE("hlo: the TP fixture: iota, explicit and cross-partition groups, permute pairs", "[hlo]") {
  const Module m = load_module(std::string(MESHSIM_SOURCE_DIR) + "/tests/hlo/tp_block_reduce_scatter.hlo");
  const Computation& e = m.entry_computation();
  using G = std::vector<std::vector<int>>;
  CHECK(device_groups(*e.find("reduce-scatter.2"), m) == G{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(device_groups(*e.find("all-reduce.3"), m) == G{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  // channel_id without use_global_device_ids: partition ids (one replica here).
  CHECK(device_groups(*e.find("a2a.5"), m) == G{{0, 2, 4, 6}, {1, 3, 5, 7}});
  const auto pairs = source_target_pairs(*e.find("cp.4"), m);
  REQUIRE(pairs.size() == 8);
  CHECK(pairs[3] == std::pair{3, 0});
  CHECK(dot_flops(*e.find("dot.1"), e, m) == 2ull * 8 * 512 * 1024 * 1024);
  CHECK(e.find("x")->shape.bytes() == 8u * 512u * 1024u * 2u);
}

TEST_CASE("hlo: group modes: cross-replica, cross-partition, global ids", "[hlo]") {
  // 2 replicas x 2 partitions: device = replica * 2 + partition.
  const Module m = parse_module_text(
      module(R"(  %p = f32[8] parameter(0)
  %r = f32[8] all-reduce(%p), replica_groups={{0,1}}, to_apply=%add
  %q = f32[8] all-reduce(%p), channel_id=1, replica_groups={{0,1}}, to_apply=%add
  %g = f32[8] all-reduce(%p), channel_id=2, replica_groups={{0,3},{1,2}}, use_global_device_ids=true, to_apply=%add
  ROOT %all = f32[8] all-reduce(%p), replica_groups={}, to_apply=%add)",
             ", replica_count=2, num_partitions=2"),
      "d.hlo");
  const Computation& e = m.entry_computation();
  using G = std::vector<std::vector<int>>;
  CHECK(device_groups(*e.find("r"), m) == G{{0, 2}, {1, 3}});  // replicas 0 and 1, per partition
  CHECK(device_groups(*e.find("q"), m) == G{{0, 1}, {2, 3}});  // partitions 0 and 1, per replica
  CHECK(device_groups(*e.find("g"), m) == G{{0, 3}, {1, 2}});
  CHECK(device_groups(*e.find("all"), m) == G{{0, 2}, {1, 3}});  // {}: every replica
}

TEST_CASE("hlo: malformed dumps are one error line each", "[hlo]") {
  CHECK(error_of("{\"hardware\": \"tpu-v5e\"}") == "d.hlo:1: not an HLO module: expected 'HloModule NAME' first");
  CHECK(error_of("") == "d.hlo:1: not an HLO module: expected 'HloModule NAME' first");
  CHECK(error_of("HloModule m\n\n%c {\n  %p = f32[] parameter(0)\n}\n") == "d.hlo:5: the module has no ENTRY computation");
  CHECK(error_of("HloModule m\n\nENTRY %c {\n  %p = f32[] parameter(0)\n") ==
        "d.hlo:4: computation 'c' is not closed ('}')");
  CHECK(error_of("HloModule m\n  %p = f32[] parameter(0)\n") == "d.hlo:2: an instruction outside a computation");
  CHECK(error_of(module("  %p = f32[8 parameter(0)")) ==
        "d.hlo:4: instruction 'p': cannot read its shape (malformed, or more than 2^50 elements)");
  CHECK(error_of(module("  %p = f32[1048576,1048576,2048] parameter(0)")) ==
        "d.hlo:4: instruction 'p': cannot read its shape (malformed, or more than 2^50 elements)");
  CHECK(error_of(module("  %p = f32[8] parameter(0")) == "d.hlo:4: instruction 'p': unbalanced brackets");
  CHECK(error_of(module("  this is not hlo")) == "d.hlo:4: not an HLO instruction or computation: 'this is not hlo'");
  CHECK(error_of(module("  %p = f32[8] parameter(0)\n  %p = f32[8] parameter(1)")) ==
        "d.hlo:5: instruction 'p' is defined twice in computation 'main'");
  CHECK(error_of(module("  %p = f32[8] all-reduce(%x), channel_id=1, replica_groups={{0,4}}, to_apply=%a")) ==
        "d.hlo:4: p: replica group names id 4, outside the module's 4 partitions");
  CHECK(error_of(module("  %p = f32[8] all-reduce(%x), channel_id=1, replica_groups={{0,1},{1,2}}, to_apply=%a")) ==
        "d.hlo:4: p: id 1 is in two replica groups");
  CHECK(error_of(module("  %p = f32[8] all-reduce(%x), channel_id=1, replica_groups=[2,4]<=[4], to_apply=%a")) ==
        "d.hlo:4: p: malformed iota replica groups '[2,4]<=[4]' (expected [G,S]<=[d0,...] or [G,S]<=[d0,...]T(p0,...))");
  CHECK(error_of(module("  %p = f32[8] all-reduce(%x), channel_id=1, replica_groups=[1,8]<=[8], to_apply=%a")) ==
        "d.hlo:4: p: replica group names id 4, outside the module's 4 partitions");
  CHECK(error_of(module("  %p = f32[8] all-reduce(%x), channel_id=1, replica_groups=@mesh<a=2,b=2> {a}, to_apply=%a")) ==
        "d.hlo:4: p: replica groups in the @mesh<...> form are not read; print the module with explicit or iota groups");
  CHECK(error_of(module("  %p = f32[8] all-reduce(%x), replica_groups={}, use_global_device_ids=true, to_apply=%a")) ==
        "d.hlo:4: p: use_global_device_ids=true needs a channel_id");
  CHECK(error_of(module("  %p = f32[8] collective-permute(%x), channel_id=1, source_target_pairs={{0,9}}")) ==
        "d.hlo:4: p: a source-target pair must be two ids below 4");
  CHECK(error_of("HloModule m, num_partitions=0\n") == "d.hlo:1: num_partitions: expected 1 to 1048576, got '0'");
  CHECK(error_of("HloModule m\n%c {\n}\n%c {\n}\n") == "d.hlo:4: computation 'c' is defined twice");
  CHECK(error_of("HloModule m\nENTRY %a {\n}\nENTRY %b {\n}\n") == "d.hlo:4: a second ENTRY computation");
  CHECK(error_of("HloModule m\nENTRY %a {\n%b {\n") == "d.hlo:3: a computation inside a computation (a missing '}'?)");
  CHECK(error_of("HloModule m\n}\n") == "d.hlo:2: '}' outside a computation");
  CHECK(error_of("HloModule m\nENTRY %a {\nFileNames\n") == "d.hlo:3: a table inside a computation");
  CHECK(error_of(module("  ROOT p")) == "d.hlo:4: ROOT without 'NAME = ...'");
}
