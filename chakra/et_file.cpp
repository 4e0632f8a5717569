#include "chakra/et_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <unistd.h>

#include <climits>
#include <memory>

#include "base/error.hpp"
#include "chakra/et.pb.h"

namespace meshsim::chakra {

namespace {

namespace io = google::protobuf::io;

bool gzipped(const std::string& path) { return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0; }

// An attribute's integer value, whichever integer type it was written with.
std::optional<std::int64_t> integer(const pb::Attribute& a) {
  switch (a.value_case()) {
    case pb::Attribute::kInt32Val: return a.int32_val();
    case pb::Attribute::kInt64Val: return a.int64_val();
    case pb::Attribute::kUint32Val: return a.uint32_val();
    case pb::Attribute::kUint64Val: return static_cast<std::int64_t>(a.uint64_val());
    case pb::Attribute::kSint32Val: return a.sint32_val();
    case pb::Attribute::kSint64Val: return a.sint64_val();
    case pb::Attribute::kFixed32Val: return a.fixed32_val();
    case pb::Attribute::kFixed64Val: return static_cast<std::int64_t>(a.fixed64_val());
    case pb::Attribute::kSfixed32Val: return a.sfixed32_val();
    case pb::Attribute::kSfixed64Val: return a.sfixed64_val();
    default: return std::nullopt;
  }
}

const char* value_name(const pb::Attribute& a) {
  switch (a.value_case()) {
    case pb::Attribute::kDoubleVal:
    case pb::Attribute::kFloatVal: return "a floating-point number";
    case pb::Attribute::kBoolVal: return "a bool";
    case pb::Attribute::kBoolList: return "a bool list";
    case pb::Attribute::kStringVal: return "a string";
    case pb::Attribute::VALUE_NOT_SET: return "no value (or a list type meshsim does not read)";
    default: return "an integer";
  }
}

// A name or id as text from a file: control characters (a newline would break
// an error line or a table) become '?'.
std::string printable(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

Node convert(const pb::Node& n, const std::string& path, std::uint64_t offset) {
  Node out;
  out.id = n.id();
  out.name = printable(n.name());
  out.type = static_cast<int>(n.type());
  out.ctrl_deps.assign(n.ctrl_deps().begin(), n.ctrl_deps().end());
  out.data_deps.assign(n.data_deps().begin(), n.data_deps().end());
  out.duration_micros = n.duration_micros();
  out.offset = offset;
  const auto where = fmt::format("byte {}", offset);
  for (const pb::Attribute& a : n.attr()) {
    const auto bad = [&](const char* want) {
      throw InputError(path, where,
                       fmt::format("node {} ('{}'): attribute {} is {}, expected {}", n.id(), out.name,
                                   printable(a.name()), value_name(a), want));
    };
    const auto count = [&]() -> std::uint64_t {
      const std::optional<std::int64_t> v = integer(a);
      if (!v) bad("an integer");
      if (*v < 0) bad("a count of at least 0");
      return static_cast<std::uint64_t>(*v);
    };
    const auto signed_int = [&]() -> std::int64_t {
      const std::optional<std::int64_t> v = integer(a);
      if (!v) bad("an integer");
      return *v;
    };
    const std::string& name = a.name();
    if (name == "is_cpu_op") {
      if (a.value_case() == pb::Attribute::kBoolVal)
        out.is_cpu_op = a.bool_val();
      else if (const auto v = integer(a))
        out.is_cpu_op = *v != 0;
      else
        bad("a bool");
    } else if (name == "num_ops") {
      out.num_ops = count();
    } else if (name == "tensor_size") {
      out.tensor_size = count();
    } else if (name == "comm_size") {
      out.comm_size = count();
    } else if (name == "comm_type") {
      out.comm_type = signed_int();
    } else if (name == "comm_src") {
      out.comm_src = signed_int();
    } else if (name == "comm_dst") {
      out.comm_dst = signed_int();
    } else if (name == "comm_tag") {
      out.comm_tag = signed_int();
    } else if (name == "stream") {
      out.stream = signed_int();
    } else if (name == "pg_name") {
      if (a.value_case() == pb::Attribute::kStringVal)
        out.pg_name = printable(a.string_val());
      else if (const auto v = integer(a))
        out.pg_name = std::to_string(*v);
      else
        bad("a string");
    }
  }
  return out;
}

// Closes a file descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

const char* node_type_name(int type) {
  static constexpr const char* kNames[] = {"INVALID_NODE",   "METADATA_NODE",  "MEM_LOAD_NODE", "MEM_STORE_NODE",
                                           "COMP_NODE",      "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE",
                                           "STORAGE_NODE",   "BATCH_NODE",     "CHECKPOINT_NODE"};
  return type >= 0 && type <= 10 ? kNames[type] : "";
}

const char* comm_type_name(std::int64_t type) {
  static constexpr const char* kNames[] = {"ALL_REDUCE", "REDUCE",         "ALL_GATHER",           "GATHER",
                                           "SCATTER",    "BROADCAST",      "ALL_TO_ALL",           "REDUCE_SCATTER",
                                           "REDUCE_SCATTER_BLOCK", "BARRIER"};
  return type >= 0 && type <= 9 ? kNames[type] : "";
}

RankTrace read_rank(const std::string& path) {
  Fd fd{::open(path.c_str(), O_RDONLY)};
  if (fd.fd < 0) throw Error(fmt::format("{}: cannot open the trace file", path));
  io::FileInputStream file(fd.fd);
  std::unique_ptr<io::GzipInputStream> gz;
  io::ZeroCopyInputStream* raw = &file;
  if (gzipped(path)) {
    gz = std::make_unique<io::GzipInputStream>(&file, io::GzipInputStream::GZIP);
    raw = gz.get();
  }
  io::CodedInputStream in(raw);
  in.SetTotalBytesLimit(INT_MAX);
  RankTrace trace;
  trace.file = path;
  std::string bytes;
  bool metadata = false;
  for (;;) {
    const std::uint64_t offset = static_cast<std::uint64_t>(in.CurrentPosition());
    const auto where = fmt::format("byte {}", offset);
    const void* data = nullptr;
    int available = 0;
    if (!in.GetDirectBufferPointer(&data, &available)) {
      if (gz && gz->ZlibErrorCode() < 0)
        throw InputError(path, where, fmt::format("the gzip stream is corrupt ({})",
                                                  gz->ZlibErrorMessage() ? gz->ZlibErrorMessage() : "zlib error"));
      break;  // the end
    }
    std::uint32_t length = 0;
    if (!in.ReadVarint32(&length))
      throw InputError(path, where, "a message length that is not a valid varint32 (the file is not a Chakra trace, or is corrupt)");
    if (length > static_cast<std::uint32_t>(INT_MAX) || !in.ReadString(&bytes, static_cast<int>(length)))
      throw InputError(path, where,
                       fmt::format("a message of {} bytes runs past the end of the file (truncated)", length));
    if (!metadata) {
      pb::GlobalMetadata m;
      if (!m.ParseFromString(bytes))
        throw InputError(path, where, "the first message is not a Chakra GlobalMetadata");
      trace.version = m.version();
      metadata = true;
      continue;
    }
    pb::Node n;
    if (!n.ParseFromString(bytes)) throw InputError(path, where, "a message that is not a Chakra Node");
    if (trace.nodes.size() == kMaxNodes)
      throw InputError(path, where, fmt::format("more than {} nodes in one rank's trace", kMaxNodes));
    trace.nodes.push_back(convert(n, path, offset));
  }
  if (!metadata) throw InputError(path, "byte 0", "an empty file: a Chakra trace starts with its GlobalMetadata");
  return trace;
}

void write_rank(const std::string& path, const RankTrace& trace) {
  Fd fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)};
  if (fd.fd < 0) throw Error(fmt::format("{}: cannot write the trace file", path));
  bool ok = true;
  {
    io::FileOutputStream file(fd.fd);
    std::unique_ptr<io::GzipOutputStream> gz;
    io::ZeroCopyOutputStream* raw = &file;
    if (gzipped(path)) {
      gz = std::make_unique<io::GzipOutputStream>(&file);
      raw = gz.get();
    }
    {
      io::CodedOutputStream out(raw);
      pb::GlobalMetadata m;
      m.set_version(trace.version);
      out.WriteVarint32(static_cast<std::uint32_t>(m.ByteSizeLong()));
      m.SerializeWithCachedSizes(&out);
      for (const Node& node : trace.nodes) {
        pb::Node n;
        n.set_id(node.id);
        n.set_name(node.name);
        n.set_type(static_cast<pb::NodeType>(node.type));
        for (std::uint64_t d : node.ctrl_deps) n.add_ctrl_deps(d);
        for (std::uint64_t d : node.data_deps) n.add_data_deps(d);
        n.set_duration_micros(node.duration_micros);
        // The types ASTRA-sim reads them as.
        const auto attr = [&](const char* name) {
          pb::Attribute* a = n.add_attr();
          a->set_name(name);
          return a;
        };
        if (node.is_cpu_op) attr("is_cpu_op")->set_bool_val(*node.is_cpu_op);
        if (node.num_ops) attr("num_ops")->set_int64_val(static_cast<std::int64_t>(*node.num_ops));
        if (node.tensor_size) attr("tensor_size")->set_uint64_val(*node.tensor_size);
        if (node.comm_type) attr("comm_type")->set_int64_val(*node.comm_type);
        if (node.comm_size) attr("comm_size")->set_int64_val(static_cast<std::int64_t>(*node.comm_size));
        if (node.comm_src) attr("comm_src")->set_int32_val(static_cast<std::int32_t>(*node.comm_src));
        if (node.comm_dst) attr("comm_dst")->set_int32_val(static_cast<std::int32_t>(*node.comm_dst));
        if (node.comm_tag) attr("comm_tag")->set_int32_val(static_cast<std::int32_t>(*node.comm_tag));
        if (node.pg_name) attr("pg_name")->set_string_val(*node.pg_name);
        if (node.stream) attr("stream")->set_int64_val(*node.stream);
        out.WriteVarint32(static_cast<std::uint32_t>(n.ByteSizeLong()));
        n.SerializeWithCachedSizes(&out);
      }
      ok = !out.HadError();
    }
    if (gz) ok = gz->Close() && ok;
    ok = file.Close() && ok;
    fd.fd = -1;  // closed by the stream
  }
  if (!ok) throw Error(fmt::format("{}: could not write the trace file", path));
}

}  // namespace meshsim::chakra
