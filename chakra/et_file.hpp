#pragma once
// One rank's Chakra execution trace (prefix.<rank>.et, optionally gzipped: the
// name ends in .gz): a varint32 length and a serialized message, repeated; the
// first message is the GlobalMetadata, then one Node per message (et.proto).
// The reader keeps what meshsim simulates and checks it; the writer writes what
// ASTRA-sim reads. libprotobuf does the decoding; nothing else sees it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace meshsim::chakra {

// The node types and collective kinds, by their numbers on the wire.
enum class NodeType : int {
  Invalid = 0, Metadata = 1, MemLoad = 2, MemStore = 3, Comp = 4, Send = 5, Recv = 6, Coll = 7,
  Storage = 8, Batch = 9, Checkpoint = 10,
};
enum class CommType : std::int64_t {
  AllReduce = 0, Reduce = 1, AllGather = 2, Gather = 3, Scatter = 4, Broadcast = 5, AllToAll = 6,
  ReduceScatter = 7, ReduceScatterBlock = 8, Barrier = 9,
};
const char* node_type_name(int type);  // "COMP_NODE"; "" when unknown
const char* comm_type_name(std::int64_t type);  // "ALL_REDUCE"; "" when unknown

struct Node {
  std::uint64_t id = 0;
  std::string name;  // control characters read as '?'
  int type = 0;  // a NodeType; an unknown number is kept for the importer's error
  std::vector<std::uint64_t> ctrl_deps, data_deps;
  std::uint64_t duration_micros = 0;
  // The attributes meshsim reads, when present (any integer type is read as an integer).
  std::optional<bool> is_cpu_op;
  std::optional<std::uint64_t> num_ops, tensor_size, comm_size;
  std::optional<std::int64_t> comm_type, comm_src, comm_dst, comm_tag;
  std::optional<std::string> pg_name;  // control characters read as '?'
  // The CUDA stream a GPU node ran on (PyTorch traces): a stream runs its
  // kernels and collectives one after another, in launch order.
  std::optional<std::int64_t> stream;
  std::uint64_t offset = 0;  // where its message starts in the (decompressed) file: for errors
};

struct RankTrace {
  std::string file;
  std::string version;  // GlobalMetadata.version
  std::vector<Node> nodes;
};

// The most nodes one rank's file may hold.
constexpr std::size_t kMaxNodes = std::size_t{1} << 22;

// Throws Error when the file cannot be opened and InputError(file, "byte N", ...)
// for a malformed length varint, a message that runs past the end, a message
// that does not decode, no metadata, an attribute of the wrong type, too many nodes.
RankTrace read_rank(const std::string& path);

// Writes `trace` (gzipped when the path ends in .gz); Error when it cannot.
void write_rank(const std::string& path, const RankTrace& trace);

}  // namespace meshsim::chakra
