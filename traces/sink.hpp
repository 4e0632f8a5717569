#pragma once
// What a trace is made of, independent of the file format: processes (chips),
// tracks (threads of a chip), slices, instants, counters and flows. The trace
// writer produces these in one deterministic order; a sink serialises them
// (Chrome JSON in json_sink.cpp, Perfetto protobuf in proto_sink.cpp).
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "base/tick.hpp"

namespace meshsim::traces {

struct Arg {
  std::string key;
  std::string text;      // a string value, or
  std::int64_t number;   // an integer value when text is empty
};

// Output buffered in memory and written in 1 MiB pieces.
class BufferedFile {
 public:
  explicit BufferedFile(std::FILE* out) : out_(out) {}
  void append(const std::string& bytes) {
    buf_ += bytes;
    if (buf_.size() >= (1u << 20)) flush();
  }
  void flush() {
    std::fwrite(buf_.data(), 1, buf_.size(), out_);
    buf_.clear();
  }

 private:
  std::FILE* out_;
  std::string buf_;
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void process(std::uint32_t pid, const std::string& name, std::uint32_t sort_index) = 0;
  virtual void thread(std::uint32_t pid, std::uint32_t tid, const std::string& name) = 0;
  // A slice [start, end] on (pid, tid). It starts `flows_out` and ends `flows_in`.
  virtual void slice(std::uint32_t pid, std::uint32_t tid, Tick start, Tick end, const std::string& name,
                     const char* category, const std::vector<Arg>& args, const std::vector<std::uint64_t>& flows_out,
                     const std::vector<std::uint64_t>& flows_in) = 0;
  // An instant on (pid, tid); it may end flows (data arriving into an op).
  virtual void instant(std::uint32_t pid, std::uint32_t tid, Tick at, const std::string& name, const char* category,
                       const std::vector<std::uint64_t>& flows_in) = 0;
  // One sample of a chip's counter track `name`, one value per series.
  virtual void counter(std::uint32_t pid, const std::string& name,
                       const std::vector<std::pair<std::string, double>>& series, Tick at) = 0;
  virtual void finish() = 0;
  virtual std::size_t events() const = 0;
};

}  // namespace meshsim::traces
