// The Chrome JSON trace-event format, written the way Perfetto's importer reads
// it (../shared/notes/perfetto.md): ts/dur in microseconds with 6 decimals (the
// engine's picoseconds; Perfetto keeps ns), tids >= 1, flows v1 ("s" where a
// flow leaves a slice, "f" with bp "e" where it enters one), counters with numeric
// args, and only the metadata names Perfetto uses.
#include <fmt/format.h>

#include <cstdio>

#include "traces/trace.hpp"

namespace meshsim::traces {

namespace {

std::string ts(Tick t) {
  const std::int64_t ps = t.ps();
  return fmt::format("{}.{:06}", ps / 1'000'000, ps % 1'000'000);
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

class JsonSink final : public Sink {
 public:
  explicit JsonSink(std::FILE* out) : out_(out) { out_.append("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"); }

  void process(std::uint32_t pid, const std::string& name, std::uint32_t sort_index) override {
    event(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":{}}}}})", pid, quoted(name)));
    event(fmt::format(R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})", pid,
                      sort_index));
  }
  void thread(std::uint32_t pid, std::uint32_t tid, const std::string& name) override {
    event(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})", pid, tid,
                      quoted(name)));
    event(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_sort_index","args":{{"sort_index":{}}}}})", pid,
                      tid, tid));
  }
  void slice(std::uint32_t pid, std::uint32_t tid, Tick start, Tick end, const std::string& name, const char* category,
             const std::vector<Arg>& args, const std::vector<std::uint64_t>& flows_out,
             const std::vector<std::uint64_t>& flows_in) override {
    std::string a;
    for (const Arg& arg : args) {
      if (!a.empty()) a += ',';
      a += quoted(arg.key) + ":" + (arg.text.empty() ? std::to_string(arg.number) : quoted(arg.text));
    }
    event(fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}","args":{{{}}}}})", pid,
                      tid, ts(start), ts(end - start), quoted(name), category, a));
    for (std::uint64_t id : flows_in) finish_flow(pid, tid, start, id);
    for (std::uint64_t id : flows_out)
      event(fmt::format(R"({{"ph":"s","id":{},"pid":{},"tid":{},"ts":{},"name":"data","cat":"flow"}})", id, pid, tid,
                        ts(start)));
  }
  void instant(std::uint32_t pid, std::uint32_t tid, Tick at, const std::string& name, const char* category,
               const std::vector<std::uint64_t>& flows_in) override {
    event(fmt::format(R"({{"ph":"i","s":"t","pid":{},"tid":{},"ts":{},"name":{},"cat":"{}"}})", pid, tid, ts(at),
                      quoted(name), category));
    for (std::uint64_t id : flows_in) finish_flow(pid, tid, at, id);
  }
  void counter(std::uint32_t pid, const std::string& name, const std::vector<std::pair<std::string, double>>& series,
               Tick at) override {
    std::string a;
    for (const auto& [key, value] : series) {
      if (!a.empty()) a += ',';
      a += fmt::format("{}:{:.4f}", quoted(key), value);
    }
    event(fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":{},"args":{{{}}}}})", pid, ts(at), quoted(name), a));
  }
  void finish() override {
    out_.append("{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"meshsim\"}}\n]}\n");
    out_.flush();
  }
  std::size_t events() const override { return events_; }

 private:
  void finish_flow(std::uint32_t pid, std::uint32_t tid, Tick at, std::uint64_t id) {
    event(fmt::format(R"({{"ph":"f","bp":"e","id":{},"pid":{},"tid":{},"ts":{},"name":"data","cat":"flow"}})", id, pid,
                      tid, ts(at)));
  }
  void event(const std::string& json) {
    out_.append(json + ",\n");
    ++events_;
  }

  BufferedFile out_;
  std::size_t events_ = 0;
};

}  // namespace

std::unique_ptr<Sink> make_json_sink(std::FILE* out) { return std::make_unique<JsonSink>(out); }

}  // namespace meshsim::traces
