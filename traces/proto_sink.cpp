// Perfetto's native protobuf trace (TracePacket / TrackEvent with interned event
// names), written by a small encoder of our own: the wire format needs only
// varints, fixed64 and length-delimited fields, so meshsim carries no protobuf
// library. The schema subset is perfetto_trace.proto beside this file. Per chip:
// a process track, one child track per ops lane, compute, steps lane and link
// direction, and one counter track per link direction. Timestamps are ns.
#include <cstdio>
#include <cstring>
#include <map>

#include "traces/trace.hpp"

namespace meshsim::traces {

namespace {

class Message {
 public:
  Message& varint(int field, std::uint64_t v) {
    key(field, 0);
    raw_varint(v);
    return *this;
  }
  Message& fixed64(int field, std::uint64_t v) {
    key(field, 1);
    for (int i = 0; i < 8; ++i) buf_ += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
  Message& dbl(int field, double d) {
    std::uint64_t v;
    std::memcpy(&v, &d, sizeof v);
    return fixed64(field, v);
  }
  Message& bytes(int field, const std::string& s) {
    key(field, 2);
    raw_varint(s.size());
    buf_ += s;
    return *this;
  }
  Message& message(int field, const Message& m) { return bytes(field, m.buf_); }
  const std::string& data() const { return buf_; }

 private:
  void key(int field, int wire) { raw_varint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire)); }
  void raw_varint(std::uint64_t v) {
    while (v >= 0x80) {
      buf_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    buf_ += static_cast<char>(v);
  }
  std::string buf_;
};

// Field numbers (Perfetto's protos/perfetto/trace/...).
namespace f {
constexpr int kPacket = 1;
constexpr int kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInternedData = 12, kSequenceFlags = 13,
              kTrackDescriptor = 60;
constexpr int kEventCategories = 1, kEventNames = 2, kDebugAnnotationNames = 3, kIid = 1, kName = 2;
constexpr int kUuid = 1, kTrackName = 2, kProcess = 3, kParentUuid = 5, kCounter = 8;
constexpr int kPid = 1, kProcessName = 6;
constexpr int kCategoryIids = 3, kDebugAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11,
              kDoubleCounterValue = 44, kFlowIds = 47, kTerminatingFlowIds = 48;
constexpr int kAnnotationNameIid = 1, kAnnotationInt = 4, kAnnotationString = 6;
}  // namespace f

constexpr std::uint32_t kSequence = 1;
constexpr std::uint64_t kIncrementalStateCleared = 1, kNeedsIncrementalState = 2;
enum Type : std::uint64_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounterValue = 4 };

std::uint64_t ns(Tick t) { return static_cast<std::uint64_t>((t.ps() + 500) / 1000); }

class ProtoSink final : public Sink {
 public:
  explicit ProtoSink(std::FILE* out) : out_(out) {
    Message p;
    p.varint(f::kSequenceId, kSequence).varint(f::kSequenceFlags, kIncrementalStateCleared);
    packet(p);
  }

  void process(std::uint32_t pid, const std::string& name, std::uint32_t) override {
    Message proc, track, p;
    proc.varint(f::kPid, pid).bytes(f::kProcessName, name);
    track.varint(f::kUuid, process_uuid(pid)).message(f::kProcess, proc);
    p.varint(f::kSequenceId, kSequence).message(f::kTrackDescriptor, track);
    packet(p);
    events_ += 2;  // name and sort order, as in the JSON trace
  }
  void thread(std::uint32_t pid, std::uint32_t tid, const std::string& name) override {
    Message track, p;
    track.varint(f::kUuid, track_uuid(pid, tid)).bytes(f::kTrackName, name).varint(f::kParentUuid, process_uuid(pid));
    p.varint(f::kSequenceId, kSequence).message(f::kTrackDescriptor, track);
    packet(p);
    events_ += 2;
  }
  void slice(std::uint32_t pid, std::uint32_t tid, Tick start, Tick end, const std::string& name, const char* category,
             const std::vector<Arg>& args, const std::vector<std::uint64_t>& flows_out,
             const std::vector<std::uint64_t>& flows_in) override {
    Message e;
    e.varint(f::kType, kSliceBegin).varint(f::kTrackUuid, track_uuid(pid, tid));
    Message interned;
    e.varint(f::kCategoryIids, intern(categories_, f::kEventCategories, category, interned));
    e.varint(f::kNameIid, intern(names_, f::kEventNames, name, interned));
    for (const Arg& a : args) {
      Message d;
      d.varint(f::kAnnotationNameIid, intern(annotation_names_, f::kDebugAnnotationNames, a.key, interned));
      if (a.text.empty())
        d.varint(f::kAnnotationInt, static_cast<std::uint64_t>(a.number));
      else
        d.bytes(f::kAnnotationString, a.text);
      e.message(f::kDebugAnnotations, d);
    }
    for (std::uint64_t id : flows_out) e.fixed64(f::kFlowIds, id);
    for (std::uint64_t id : flows_in) e.fixed64(f::kTerminatingFlowIds, id);
    event(start, e, interned);
    Message end_event;
    end_event.varint(f::kType, kSliceEnd).varint(f::kTrackUuid, track_uuid(pid, tid));
    event(end, end_event, Message());
    events_ += 1 + flows_out.size() + flows_in.size();  // counted as in the JSON trace
  }
  void instant(std::uint32_t pid, std::uint32_t tid, Tick at, const std::string& name, const char* category,
               const std::vector<std::uint64_t>& flows_in) override {
    Message e, interned;
    e.varint(f::kType, kInstant).varint(f::kTrackUuid, track_uuid(pid, tid));
    e.varint(f::kCategoryIids, intern(categories_, f::kEventCategories, category, interned));
    e.varint(f::kNameIid, intern(names_, f::kEventNames, name, interned));
    for (std::uint64_t id : flows_in) e.fixed64(f::kTerminatingFlowIds, id);
    event(at, e, interned);
    events_ += 1 + flows_in.size();
  }
  void counter(std::uint32_t pid, const std::string& name, const std::vector<std::pair<std::string, double>>& series,
               Tick at) override {
    for (const auto& [key, value] : series) {
      const std::uint64_t uuid = counter_uuid(pid, name + " " + key);
      Message e;
      e.varint(f::kType, kCounterValue).varint(f::kTrackUuid, uuid).dbl(f::kDoubleCounterValue, value);
      event(at, e, Message());
    }
    ++events_;
  }
  void finish() override { out_.flush(); }
  std::size_t events() const override { return events_; }

 private:
  static std::uint64_t process_uuid(std::uint32_t pid) { return std::uint64_t{pid} << 32; }
  static std::uint64_t track_uuid(std::uint32_t pid, std::uint32_t tid) { return (std::uint64_t{pid} << 32) | tid; }

  std::uint64_t counter_uuid(std::uint32_t pid, const std::string& name) {
    const auto key = std::make_pair(pid, name);
    if (auto it = counters_.find(key); it != counters_.end()) return it->second;
    const std::uint64_t uuid = process_uuid(pid) | (std::uint64_t{1} << 31) | counters_.size();
    counters_[key] = uuid;
    Message counter, track, p;
    track.varint(f::kUuid, uuid).bytes(f::kTrackName, name).varint(f::kParentUuid, process_uuid(pid));
    track.message(f::kCounter, counter);
    p.varint(f::kSequenceId, kSequence).message(f::kTrackDescriptor, track);
    packet(p);
    return uuid;
  }

  // Interned strings (event names, categories, annotation names): the first use
  // carries the string in the packet's interned_data, later ones only its iid.
  static std::uint64_t intern(std::map<std::string, std::uint64_t>& table, int field, const std::string& text,
                              Message& interned) {
    if (auto it = table.find(text); it != table.end()) return it->second;
    const std::uint64_t iid = table.size() + 1;
    table[text] = iid;
    Message n;
    n.varint(f::kIid, iid).bytes(f::kName, text);
    interned.message(field, n);
    return iid;
  }

  void event(Tick at, const Message& track_event, const Message& interned) {
    Message p;
    p.varint(f::kTimestamp, ns(at)).varint(f::kSequenceId, kSequence).varint(f::kSequenceFlags, kNeedsIncrementalState);
    if (!interned.data().empty()) p.message(f::kInternedData, interned);
    p.message(f::kTrackEvent, track_event);
    packet(p);
  }

  void packet(const Message& p) {
    Message wrapper;
    wrapper.message(f::kPacket, p);
    out_.append(wrapper.data());
  }

  BufferedFile out_;
  std::size_t events_ = 0;
  std::map<std::string, std::uint64_t> names_, categories_, annotation_names_;
  std::map<std::pair<std::uint32_t, std::string>, std::uint64_t> counters_;
};

}  // namespace

std::unique_ptr<Sink> make_proto_sink(std::FILE* out) { return std::make_unique<ProtoSink>(out); }

}  // namespace meshsim::traces
