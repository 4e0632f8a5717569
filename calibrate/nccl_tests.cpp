#include "calibrate/nccl_tests.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <set>
#include <utility>

#include "base/error.hpp"

namespace meshsim::calibrate {

namespace {

using Tokens = std::vector<std::string_view>;

// A line of the log, for messages: "FILE:LINE: message".
struct Where {
  const std::string& file;
  int line = 0;
  [[noreturn]] void fail(const std::string& message) const { throw InputError(file, std::to_string(line), message); }
};

constexpr std::string_view kSpace = " \t\r";

std::string_view trim(std::string_view s) {
  const std::size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

Tokens split(std::string_view s) {
  Tokens out;
  for (std::size_t i = s.find_first_not_of(kSpace); i != std::string_view::npos; i = s.find_first_not_of(kSpace, i)) {
    const std::size_t end = std::min(s.find_first_of(kSpace, i), s.size());
    out.push_back(s.substr(i, end - i));
    i = end;
  }
  return out;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// ---- mpirun's tags: "[1,0]<stdout>:" (job, rank), also in mid-line

// The length of a tag at the start of `s`, and its rank; 0 when there is none.
std::size_t tag_at(std::string_view s, int& rank) {
  std::size_t i = 0;
  const auto digits = [&](int* value) {
    const std::size_t from = i;
    int v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - from < 9) v = v * 10 + (s[i++] - '0');
    if (value) *value = v;
    return i > from;
  };
  if (s.empty() || s[0] != '[') return 0;
  ++i;
  if (!digits(nullptr) || i >= s.size() || s[i++] != ',' || !digits(&rank)) return 0;
  for (std::string_view rest : {std::string_view("]<stdout>:"), std::string_view("]<stderr>:")})
    if (s.substr(i).starts_with(rest)) return i + rest.size();
  return 0;
}

// The line as rank 0 printed it, its tags removed; nullopt for another rank's
// line. A line without a tag at its start is kept as it is.
std::optional<std::string> untagged(std::string_view line) {
  int rank = 0;
  if (tag_at(line, rank) == 0) return std::string(line);
  if (rank != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < line.size();) {
    int r = 0;
    if (const std::size_t n = tag_at(line.substr(i), r); n > 0) {
      i += n;
      continue;
    }
    out += line[i++];
  }
  return out;
}

// NCCL's environment as its log lines print it ("NCCL INFO NCCL_ALGO set by
// environment to Ring", or "NCCL_ALGO=Ring" echoed by a script): the value of
// `name` in `line`, lower case; nullopt when the line does not set it.
std::optional<std::string> nccl_setting(std::string_view line, std::string_view name) {
  const std::size_t at = line.find(name);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + name.size());
  constexpr std::string_view kSetBy = " set by environment to ";
  if (rest.starts_with("="))
    rest.remove_prefix(1);
  else if (rest.starts_with(kSetBy))
    rest.remove_prefix(kSetBy.size());
  else
    return std::nullopt;  // another variable (NCCL_ALGO_...), or a mention
  const Tokens t = split(rest);
  if (t.empty()) return std::nullopt;
  std::string v;
  for (char c : t[0]) v += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  return v;
}

// An NCCL_ALGO or NCCL_PROTO value as meshsim names it; "" for what meshsim
// cannot follow (a list, an exclusion "^nvls", CollNet, PAT).
std::string algorithm_named(const std::string& v) {
  if (v == "ring" || v == "tree" || v == "nvls") return v;
  if (v == "nvlstree") return "nvls_tree";
  return "";
}
std::string protocol_named(const std::string& v) {
  if (v == "simple" || v == "ll" || v == "ll128") return v;
  return "";
}

// ---- numbers, as nccl-tests prints them ("%12li", "%7.2f", "%6g", "1.2e+05")

std::optional<double> decimal(std::string_view s) {
  double d = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

std::uint64_t whole(std::string_view s, std::string_view what, std::string_view unit, const Where& w) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && end == s.data() + s.size()) return v;
  if (ec == std::errc::result_out_of_range) w.fail(fmt::format("{} '{}' is too large", what, s));
  const std::optional<double> d = decimal(s);
  if (!d) w.fail(fmt::format("{} '{}' is not a number", what, s));
  if (*d < 0) w.fail(fmt::format("{} '{}' is negative", what, s));
  w.fail(fmt::format("{} '{}' is not a whole number of {}", what, s, unit));
}

double number(std::string_view s, const std::string& what, const Where& w) {
  const std::optional<double> d = decimal(s);
  if (!d) w.fail(fmt::format("{} '{}' is not a number", what, s));
  return *d;
}

// ---- the table header

// The last column of each group: "#wrong" (since 2022) counts wrong elements;
// "error" (2019-2022) is the largest deviation, judged by the footer.
enum class Check { WrongCount, MaxDeviation };

// One group of columns: out-of-place, then in-place (token indices; -1: absent).
struct Group {
  int time = -1, algbw = -1, busbw = -1, check = -1;
  Check kind = Check::WrongCount;
};

constexpr std::array<const char*, 2> kGroupNames = {"out-of-place", "in-place"};

struct Layout {
  int line = 0;            // the header's line
  std::size_t tokens = 0;  // tokens in a data line
  int redop = -1, root = -1;
  std::vector<Group> groups;  // one or two
};

bool is_table_header(const Tokens& t) {
  return t.size() >= 3 && t[0] == "size" && t[1] == "count" && t[2] == "type";
}
bool is_2017_header(const Tokens& t) {
  return t.size() >= 3 && t[0] == "bytes" && t[1] == "N" && t[2] == "type";
}

// The column of `name` in the last group, or null if `name` is not one of its columns.
int* group_slot(Group& g, std::string_view name) {
  if (name == "algbw") return &g.algbw;
  if (name == "busbw") return &g.busbw;
  if (name == "#wrong" || name == "error") {
    g.kind = name == "error" ? Check::MaxDeviation : Check::WrongCount;
    return &g.check;
  }
  return nullptr;
}

void add_column(Layout& l, const Tokens& t, std::size_t i, const Where& w) {
  const std::string_view name = t[i];
  const int index = static_cast<int>(i);
  if (name == "redop" || name == "root") {
    int& slot = name == "redop" ? l.redop : l.root;
    if (!l.groups.empty() || slot >= 0) w.fail(fmt::format("the table header has column '{}' out of place", name));
    slot = index;
  } else if (name == "time" || name == "cputime") {
    if (l.groups.size() == kGroupNames.size()) w.fail("the table header has more than two groups of time columns");
    l.groups.push_back(Group{index});
  } else if (name == "i_min" || name == "i_max" || name == "i_p99" || name == "i_cv%") {
    if (l.groups.empty()) w.fail(fmt::format("the table header has column '{}' before any time column", name));
  } else if (name == "timestamp") {
    if (i + 1 != t.size()) w.fail("the table header has columns after 'timestamp'");
  } else if (int* slot = l.groups.empty() ? nullptr : group_slot(l.groups.back(), name)) {
    if (*slot >= 0) w.fail(fmt::format("the table header has a second '{}' in one group", name));
    *slot = index;
  } else {
    w.fail(
        fmt::format("the table header has an unknown column '{}' (expected size count type [redop] [root], then "
                    "time algbw busbw #wrong, out-of-place and in-place)",
                    name));
  }
}

Layout table_layout(const Tokens& t, const Where& w) {
  Layout l;
  l.line = w.line;
  for (std::size_t i = 3; i < t.size(); ++i) add_column(l, t, i, w);
  if (l.groups.empty()) w.fail("the table header has no time column");
  for (std::size_t g = 0; g < l.groups.size(); ++g) {
    const Group& group = l.groups[g];
    if (group.algbw < 0 || group.busbw < 0 || group.check < 0)
      w.fail(fmt::format("the table header's {} group lacks one of algbw, busbw, #wrong", kGroupNames[g]));
  }
  // A timestamp prints as two tokens, "2025-01-31 12:00:00".
  l.tokens = t.size() + (t.back() == "timestamp" ? 1u : 0u);
  return l;
}

// ---- data lines

struct Measured {
  double us = 0, busbw = 0;
};

void check_results(std::string_view s, const Group& g, const std::string& group, const Where& w) {
  if (s == "N/A") return;  // run with -c 0: not checked
  const double d = number(s, group + (g.kind == Check::WrongCount ? " #wrong" : " error"), w);
  if (d < 0) w.fail(fmt::format("{} check column '{}' is negative", group, s));
  if (g.kind == Check::WrongCount && d != 0)
    w.fail(
        fmt::format("the {} #wrong column reports {} wrong elements: the run gave wrong results, so its times are "
                    "not trusted",
                    group, s));
}

Measured measured(const Tokens& t, const Group& g, const std::string& group, const Where& w) {
  const auto at = [&t](int i) { return t[static_cast<std::size_t>(i)]; };
  Measured m;
  m.us = number(at(g.time), group + " time", w);
  if (m.us <= 0) w.fail(fmt::format("{} time {} us is not positive", group, at(g.time)));
  if (number(at(g.algbw), group + " algbw", w) < 0) w.fail(fmt::format("{} algbw {} is negative", group, at(g.algbw)));
  m.busbw = number(at(g.busbw), group + " busbw", w);
  if (m.busbw < 0) w.fail(fmt::format("{} busbw {} is negative", group, at(g.busbw)));
  check_results(at(g.check), g, group, w);
  return m;
}

NcclTestsRow table_row(const Tokens& t, const Layout& l, const Where& w) {
  if (t.size() != l.tokens)
    w.fail(fmt::format("a data line with {} fields where the table header (line {}) calls for {}", t.size(), l.line,
                       l.tokens));
  NcclTestsRow row;
  row.line = w.line;
  row.bytes = whole(t[0], "size", "bytes", w);
  row.count = whole(t[1], "count", "elements", w);
  row.type = std::string(t[2]);
  if (l.redop >= 0) row.redop = std::string(t[static_cast<std::size_t>(l.redop)]);
  if (l.root >= 0) {
    const std::string_view root = t[static_cast<std::size_t>(l.root)];
    int r = 0;
    const auto [end, ec] = std::from_chars(root.data(), root.data() + root.size(), r);
    if (ec != std::errc() || end != root.data() + root.size()) w.fail(fmt::format("root '{}' is not a rank", root));
  }
  const Measured out = measured(t, l.groups[0], kGroupNames[0], w);
  row.out_of_place_us = out.us;
  row.out_of_place_busbw = out.busbw;
  if (l.groups.size() > 1) {
    const Measured in = measured(t, l.groups[1], kGroupNames[1], w);
    row.in_place_us = in.us;
    row.in_place_busbw = in.busbw;
  }
  return row;
}

// A table row, as opposed to other output between the rows (NCCL's own log lines
// start with the host name; MPI's with '['): it starts like a number, or it has
// exactly the columns of the table.
bool is_data_line(const Tokens& t, const Layout& l) {
  const char c = t[0][0];
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || t.size() == l.tokens;
}

bool is_nccl_log_line(std::string_view line) {
  return contains(line, "NCCL INFO") || contains(line, "NCCL WARN") || contains(line, "NCCL TRACE");
}

// common.h's CUDACHECK, NCCLCHECK and TESTCHECK print these before the test exits.
bool is_failure_line(std::string_view line) {
  return contains(line, "Test CUDA failure") || contains(line, "Test NCCL failure") || contains(line, "Test failure");
}

// ---- the lines before a table

// "# nThread 1 nGpus 8 ...": each process drives nThread x nGpus ranks.
int ranks_per_process(const Tokens& t, const Where& w) {
  if (t.size() < 4 || t[2] != "nGpus") w.fail("a '# nThread' line without 'nGpus'");
  const std::uint64_t threads = whole(t[1], "nThread", "threads", w);
  const std::uint64_t gpus = whole(t[3], "nGpus", "GPUs", w);
  if (threads == 0 || gpus == 0 || threads * gpus > (1u << 20))
    w.fail(fmt::format("nThread {} x nGpus {} is not a number of ranks", t[1], t[3]));
  return static_cast<int>(threads * gpus);
}

struct Preamble {
  std::string collective;
  int per_process = 0;  // nThread x nGpus; 0: no '# nThread' line
  int last_rank = -1;
  int last_rank_line = 0;
  bool truncated = false;  // a process's list cut short ("..."): later ranks may skip
  std::set<std::string> hosts;
  std::string device;
};

// "#  Rank  3 Group  0 Pid  4242 on node-a device  3 [0000:3a:00] NVIDIA H100 80GB HBM3"
// (before 2022 without "Group", before 2025 "[0x3a]").
void add_rank(Preamble& p, std::string_view text, const Where& w) {
  if (text.ends_with("...")) {  // MPI gathers at most 2 KB of lines per process
    p.truncated = true;
    return;
  }
  const Tokens t = split(text);
  std::size_t on = 2;
  while (on < t.size() && t[on] != "on") ++on;
  if (on + 6 > t.size() || t[on + 2] != "device" || !t[on + 4].starts_with('[') || !t[on + 4].ends_with(']'))
    w.fail("a '#  Rank' line not of the form 'Rank N ... on HOST device D [BUS] NAME'");
  const std::uint64_t r = whole(t[1], "rank", "ranks", w);
  if (r >= (1u << 20)) w.fail(fmt::format("rank {} is too large", r));
  const int rank = static_cast<int>(r);
  whole(t[on + 3], "device", "devices", w);
  if (rank == 0 && p.last_rank >= 0)
    w.fail(
        fmt::format("rank 0 again after rank {}: several processes printed their own device lists (nccl-tests "
                    "built without MPI=1 but started by mpirun?)",
                    p.last_rank));
  if (p.truncated ? rank <= p.last_rank : rank != p.last_rank + 1)
    w.fail(fmt::format("rank {} where rank {} was expected", rank, p.last_rank + 1));
  const std::string_view bus = t[on + 4];
  if (rank == 0)
    p.device = std::string(trim(text.substr(static_cast<std::size_t>(bus.data() + bus.size() - text.data()))));
  p.hosts.insert(std::string(t[on + 1]));
  p.last_rank = rank;
  p.last_rank_line = w.line;
}

// The ranks of the run: the rank lines, checked against nThread x nGpus per process.
int ranks_of(const Preamble& p, const std::string& file) {
  if (p.last_rank < 0) return 0;
  const int listed = p.last_rank + 1;
  if (p.per_process == 0) return listed;
  if (p.truncated) return (listed + p.per_process - 1) / p.per_process * p.per_process;
  if (listed % p.per_process != 0)
    Where{file, p.last_rank_line}.fail(fmt::format(
        "{} ranks listed, not a whole number of processes of nThread x nGpus = {} ranks each", listed, p.per_process));
  return listed;
}

// ---- the whole log

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  void line(std::string_view text, int number) {
    const Where w{file_, number};
    if (is_failure_line(text)) w.fail(fmt::format("nccl-tests failed: '{}'", trim(text)));
    const std::string_view body = trim(text);
    if (body.empty()) return;
    if (const auto a = nccl_setting(body, "NCCL_ALGO")) algorithm_ = algorithm_named(*a);
    if (const auto p = nccl_setting(body, "NCCL_PROTO")) protocol_ = protocol_named(*p);
    for (std::string_view token : split(body))
      if (contains(token, "_perf"))
        if (const std::optional<std::string> kind = nccl_tests_collective(token)) programs_.insert(*kind);
    if (body.front() == '#') {
      comment(body.substr(1), w);
    } else if (table_) {
      table_->other_output = true;
      if (is_nccl_log_line(body)) return;
      const Tokens t = split(body);
      if (is_data_line(t, table_->layout)) table_->log.rows.push_back(table_row(t, table_->layout, w));
    }
  }

  std::vector<NcclTestsLog> finish() {
    close_table(nullptr);
    if (logs_.empty())
      Where{file_, 1}.fail("not an nccl-tests log: no table header ('#  size  count  type ...') was found");
    if (programs_.size() == 1)
      for (NcclTestsLog& log : logs_) log.named_program = *programs_.begin();
    return std::move(logs_);
  }

 private:
  struct Table {
    Layout layout;
    NcclTestsLog log;
    bool other_output = false;  // any line not a comment since the header
  };

  void comment(std::string_view text, const Where& w) {
    const Tokens t = split(text);
    if (t.empty()) return;
    if (is_table_header(t)) return open_table(t, w);
    if (is_2017_header(t))
      w.fail(
          "a table of nccl-tests before 2019 ('bytes N type ...', times in ms); meshsim reads the 'size count "
          "type ...' tables printed since 2019");
    if (text.find("Out of bounds values") != std::string_view::npos) return footer(t, w);
    if (t[0] == "Avg" || t[0] == "nccl-tests" || t[0] == "Collective" || t[0] == "nThread" || t[0] == "Using" ||
        t[0] == "Rank")
      close_table(nullptr);
    preamble(text, t, w);
  }

  void preamble(std::string_view text, const Tokens& t, const Where& w) {
    if (t[0] == "nccl-tests" && t.size() > 1 && t[1] == "version") {
      pre_ = {};
    } else if (t.size() == 4 && t[0] == "Collective" && t[1] == "test" && t[2] == "starting:") {
      pre_ = {};
      const std::optional<std::string> kind = nccl_tests_collective(t[3]);
      if (!kind)
        w.fail(
            fmt::format("'{}' is not a test meshsim reads (all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                        "alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf)",
                        t[3]));
      pre_.collective = *kind;
    } else if (t[0] == "nThread") {
      if (pre_.per_process > 0 || pre_.last_rank >= 0) pre_ = {};  // another test, without a name line
      pre_.per_process = ranks_per_process(t, w);
    } else if (t[0] == "Rank") {
      add_rank(pre_, text, w);
    }
  }

  // "# Out of bounds values : 3 FAILED": some check of some size failed.
  void footer(const Tokens& t, const Where& w) {
    close_table(nullptr);
    if (t.size() >= 6 && t[5] != "0")
      w.fail(
          fmt::format("nccl-tests reports {} out-of-bounds values: the run gave wrong results, so its times are "
                      "not trusted",
                      t[5]));
  }

  void open_table(const Tokens& t, const Where& w) {
    close_table(&w);
    table_ = Table{table_layout(t, w), {}, false};
    NcclTestsLog& log = table_->log;
    log.collective = pre_.collective;
    log.ranks = ranks_of(pre_, file_);
    log.nodes = static_cast<int>(pre_.hosts.size());
    log.device = pre_.device;
    log.algorithm = algorithm_;
    log.protocol = protocol_;
    pre_ = {};
  }

  // `next`: the header of the table that follows, if that is what ends this one.
  void close_table(const Where* next) {
    if (!table_) return;
    if (table_->log.rows.empty()) {
      const Where header{file_, table_->layout.line};
      if (next && !table_->other_output)
        header.fail(
            "a table with no data rows: another table header follows it directly (several processes "
            "printing their own tables: nccl-tests built without MPI=1 but started by mpirun?)");
      header.fail("a table with no data rows");
    }
    logs_.push_back(std::move(table_->log));
    table_.reset();
  }

  const std::string& file_;
  Preamble pre_;
  std::optional<Table> table_;
  std::vector<NcclTestsLog> logs_;
  std::string algorithm_, protocol_;  // as NCCL's lines set them so far
  std::set<std::string> programs_;    // the collectives of the nccl-tests programs named
};

}  // namespace

std::vector<NcclTestsLog> parse_nccl_tests(std::string_view text, const std::string& file) {
  Reader reader(file);
  int number = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    ++number;
    if (const std::optional<std::string> line = untagged(text.substr(begin, end - begin))) reader.line(*line, number);
    begin = end + 1;
  }
  return reader.finish();
}

std::optional<std::string> nccl_tests_collective(std::string_view name) {
  if (const std::size_t slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (const std::size_t perf = name.find("_perf"); perf != std::string_view::npos) {
    const std::string_view suffix = name.substr(perf + 5);  // a NAME_SUFFIX such as "_mpi"
    if (!suffix.empty() && suffix[0] != '_' && suffix[0] != '-' && suffix[0] != '.') return std::nullopt;
    name = name.substr(0, perf);
  }
  std::string key;  // lower case, no underscores: all_reduce, AllReduce, allreduce
  for (char c : name)
    if (c != '_') key += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kNames = {{
      {"allreduce", "all_reduce"},
      {"allgather", "all_gather"},
      {"reducescatter", "reduce_scatter"},
      {"alltoall", "all_to_all"},
      {"sendrecv", "send"},
      {"send", "send"},
      {"broadcast", "broadcast"},
      {"reduce", "reduce"},
  }};
  for (const auto& [from, to] : kNames)
    if (key == from) return std::string(to);
  return std::nullopt;
}

}  // namespace meshsim::calibrate
