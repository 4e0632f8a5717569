#pragma once
// XLA HLO text (what `jax.jit(f).lower(...).compile().as_text()` prints, or
// `--xla_dump_to`): a streaming reader of the parts meshsim simulates
// (docs/HLO.md). A module is computations of instructions; an instruction keeps
// its name, shape, opcode, operand names and attributes as text, and the
// helpers below read the attributes that matter: replica groups (explicit and
// iota) resolved to device ids, source-target pairs, dot dimensions, while trip
// counts, called computations. Errors are InputError "FILE:LINE: message".
#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim::hlo {

// bf16[8,128]{1,0}, f32[], (s32[], bf16[4]), token[].
struct Shape {
  std::string type;                 // element type ("bf16", "f32", "pred", ...); empty for a tuple
  std::vector<std::int64_t> dims;   // sizes (a bounded dynamic "<=8" counts as 8); at most 2^50 elements
  std::vector<Shape> tuple;         // a tuple's elements
  bool is_tuple = false;
  std::int64_t elements() const;    // product of dims (1 for a scalar); a tuple's: the sum
  std::uint64_t bytes() const;      // elements x element size (sub-byte types rounded up per array); tuples summed
};

// Bits of one element of `type` (bf16 16, pred 8, s4 4, token 0); 0 when unknown.
int element_bits(std::string_view type);

struct Instruction {
  std::string name;  // without '%'
  Shape shape;
  std::string opcode;
  std::vector<std::string> operands;  // operand names (without '%'); literals as written
  std::vector<std::pair<std::string, std::string>> attrs;  // in order, values as written
  bool root = false;
  std::size_t line = 0;
  const std::string* attr(std::string_view key) const;  // null when absent
};

struct Computation {
  std::string name;
  bool entry = false;
  std::vector<Instruction> instructions;
  std::map<std::string, std::size_t, std::less<>> index;  // name -> position
  std::size_t line = 0;
  const Instruction* find(std::string_view name) const;
  const Instruction* root() const;  // the ROOT, or the last instruction
};

struct Module {
  std::string file;
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // HloModule's key=value pairs
  std::vector<Computation> computations;                   // in file order (callees first)
  std::map<std::string, std::size_t, std::less<>> index;
  std::size_t entry = 0;
  int replica_count = 1;
  int num_partitions = 1;
  bool counts_given = false;  // the HloModule line gives replica_count or num_partitions
  int devices() const { return replica_count * num_partitions; }
  const Computation& entry_computation() const { return computations[entry]; }
  const Computation* find(std::string_view name) const;
};

// Reads a module; InputError (FILE:LINE) when the text is not HLO (no HloModule
// line, a line that is neither a computation nor an instruction, unbalanced
// brackets, no ENTRY).
Module parse_module(std::istream& in, const std::string& file);
Module parse_module_text(std::string_view text, const std::string& file);
Module load_module(const std::string& path);

// The device groups of a collective, as global device ids (replica r,
// partition p is device r * num_partitions + p), every group sorted as
// written. By XLA's modes: without channel_id the groups are of replicas (one
// set per partition); with channel_id, of partitions (one set per replica);
// with use_global_device_ids=true, of global ids. `replica_groups={}` is every
// device in one group (per partition or replica as the mode says). Explicit
// groups `{{0,1},{2,3}}` and iota groups `[G,S]<=[d0,d1]T(1,0)` are read;
// InputError (at the instruction's line) on anything else, an id out of range,
// or an id in two groups.
std::vector<std::vector<int>> device_groups(const Instruction& inst, const Module& m);

// Iota groups `[G,S]<=[d...]T(p...)` as G lists of S ids: arange(prod d)
// reshaped to d, transposed by p, flattened, cut into G rows. nullopt when the
// text is not of that form.
std::optional<std::vector<std::vector<int>>> iota_groups(std::string_view text);

// collective-permute's source_target_pairs={{0,1},{1,2}} (global device ids
// in the mode above). InputError when malformed or out of range.
std::vector<std::pair<int, int>> source_target_pairs(const Instruction& inst, const Module& m);

// An in-place collective-permute's (operands: the buffer in, the buffer out,
// their start indices) `slice_sizes={{4256,8,128}}`: the bytes of the slice of
// `buffer`'s element type each source sends; nullopt when it has none (the
// whole operand moves). InputError when malformed, larger than the buffer, or
// of several slices (meshsim's send moves one size per pair).
std::optional<std::uint64_t> permute_slice_bytes(const Instruction& inst, const Shape& buffer, const Module& m);

// A list attribute `{1,2}` as integers; nullopt when absent.
std::optional<std::vector<std::int64_t>> int_list(const Instruction& inst, std::string_view key, const Module& m);

// A while loop's known trip count (backend_config={"known_trip_count":{"n":"10"}},
// or the same JSON quoted); nullopt when the dump does not say.
std::optional<std::int64_t> known_trip_count(const Instruction& inst);

// The computation an attribute names (calls=, to_apply=, body=, condition=);
// InputError when it names none.
const Computation* called(const Instruction& inst, std::string_view key, const Module& m);

// A dot's FLOPs: 2 x the output's elements x the product of the lhs
// contracting dimensions' sizes. InputError when an operand or a dimension is
// missing.
std::uint64_t dot_flops(const Instruction& inst, const Computation& c, const Module& m);

}  // namespace meshsim::hlo
