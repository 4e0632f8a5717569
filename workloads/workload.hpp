#pragma once
// A workload, parsed and validated: every name resolved, every size checked. The
// format is documented in docs/WORKLOAD.md. Nothing beyond this point sees JSON.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/collective_kind.hpp"
#include "topology/preset.hpp"
#include "topology/torus.hpp"

namespace meshsim::workloads {

struct Hardware {
  std::string preset;
  topology::ChipSpec chip;
  topology::LinkSpec ici;  // one-way bandwidth per link, per-hop latency
  std::uint64_t forward_chunk_bytes = 0;
};

struct MeshAxis {
  std::string name;
  int size = 1;
  std::vector<int> hw_axes;  // the consecutive hardware axes it spans
};

struct Array {
  std::string name;
  std::vector<std::string> dims;
  std::vector<std::uint64_t> sizes;
  std::string dtype;
  std::uint64_t element_bytes = 0;
  std::vector<std::vector<int>> shard_axes;  // mesh axis indices per dim, major first
  std::uint64_t bytes() const;               // global size
};

struct Op {
  std::string name;
  std::string pointer;  // JSON pointer of the op, for errors found later
  CollectiveKind kind = CollectiveKind::AllGather;
  std::vector<int> mesh_axes;           // collectives: the mesh axes, as written
  std::vector<int> hw_axes;             // the hardware axes they span (size > 1 only)
  std::uint64_t bytes = 0;              // V for collectives (see docs/WORKLOAD.md), payload for send
  topology::ChipId src = 0, dst = 0;    // send only
  std::vector<std::uint32_t> deps;      // earlier ops this one waits for
  std::string array;                    // input array, empty for a bytes-only op
  std::string sharding_before, sharding_after;
};

struct Workload {
  std::string file;
  Hardware hardware;
  std::vector<topology::AxisSpec> topology;  // hardware axes x, y, z
  std::vector<MeshAxis> mesh;
  std::vector<Array> arrays;  // declared arrays and the results named by "out"
  std::vector<Op> ops;

  topology::Torus make_torus() const;
};

// Throws InputError ("FILE:/json/pointer: message") on any malformed or
// inconsistent input.
Workload parse_workload(std::string_view text, const std::string& file);
// Reads and parses a file; an unreadable file is an Error.
Workload load_workload(const std::string& path);

// Limits applied while parsing.
constexpr std::uint32_t kMaxChips = 65536;
constexpr int kMaxAxisSize = 4096;

}  // namespace meshsim::workloads
