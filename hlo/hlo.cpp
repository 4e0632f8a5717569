#include "hlo/hlo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.hpp"

namespace meshsim::hlo {

namespace {

[[noreturn]] void fail(const std::string& file, std::size_t line, const std::string& message) {
  throw InputError(file, std::to_string(line), message);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string_view strip_percent(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '%') s.remove_prefix(1);
  return s;
}

// The position just past the string opening at `open`; npos when unclosed.
std::size_t string_end(std::string_view s, std::size_t open) {
  for (std::size_t j = open + 1; j < s.size(); ++j) {
    if (s[j] == '\\') ++j;
    else if (s[j] == '"') return j + 1;
  }
  return std::string_view::npos;
}

// The position just past the bracket that closes the one at `open` (`(`, `[`,
// `{`, or `<` of `@mesh<`), skipping quoted strings; npos when unbalanced.
std::size_t close_of(std::string_view s, std::size_t open) {
  std::vector<char> stack;
  for (std::size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      const std::size_t end = string_end(s, i);
      if (end == std::string_view::npos) return std::string_view::npos;
      i = end - 1;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') stack.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == '<' && i >= 5 && s.substr(i - 5, 5) == "@mesh") stack.push_back('>');
    if (c == ')' || c == ']' || c == '}' || (c == '>' && !stack.empty() && stack.back() == '>')) {
      if (stack.empty() || stack.back() != c) return std::string_view::npos;
      stack.pop_back();
      if (stack.empty()) return i + 1;
    }
  }
  return std::string_view::npos;
}

// Splits at the commas outside brackets and strings; false when unbalanced.
bool split_top(std::string_view s, std::vector<std::string_view>& out) {
  std::size_t begin = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool mesh = c == '<' && i >= 5 && s.substr(i - 5, 5) == "@mesh";
    if (c == '"' || c == '(' || c == '[' || c == '{' || mesh) {
      const std::size_t end = c == '"' ? string_end(s, i) : close_of(s, i);
      if (end == std::string_view::npos) return false;
      i = end - 1;
      continue;
    }
    if (c == ')' || c == ']' || c == '}') return false;
    if (c == ',') {
      out.push_back(trim(s.substr(begin, i - begin)));
      begin = i + 1;
    }
  }
  if (!trim(s.substr(begin)).empty() || !out.empty()) out.push_back(trim(s.substr(begin)));
  return true;
}

bool parse_int(std::string_view s, std::int64_t& v) {
  s = trim(s);
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == '%';
}

constexpr std::int64_t kMaxElements = std::int64_t{1} << 50;

// Whether `s` starts with `word` (a keyword and its space); if so, drops it.
bool drop_word(std::string_view& s, std::string_view word) {
  if (s.substr(0, word.size()) != word) return false;
  s = trim(s.substr(word.size()));
  return true;
}

// The length of the name (with its '%') at the start of `s`.
std::size_t name_length(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && is_name_char(s[i])) ++i;
  return i;
}

// Reads a shape at the start of `s`; returns the characters used (0 on failure).
std::size_t read_shape(std::string_view s, Shape& out) {
  if (s.empty()) return 0;
  if (s.front() == '(') {
    const std::size_t end = close_of(s, 0);
    if (end == std::string_view::npos) return 0;
    out.is_tuple = true;
    std::vector<std::string_view> parts;
    if (!split_top(s.substr(1, end - 2), parts)) return 0;
    for (std::string_view p : parts) {
      Shape e;
      if (read_shape(p, e) != p.size()) return 0;
      out.tuple.push_back(std::move(e));
    }
    return end;
  }
  std::size_t i = 0;
  while (i < s.size() && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))) ++i;
  if (i == 0 || i >= s.size() || s[i] != '[') return 0;
  out.type = std::string(s.substr(0, i));
  const std::size_t close = s.find(']', i);
  if (close == std::string_view::npos) return 0;
  std::vector<std::string_view> dims;
  if (!split_top(s.substr(i + 1, close - i - 1), dims)) return 0;
  unsigned __int128 elements = 1;
  for (std::string_view d : dims) {
    if (d.substr(0, 2) == "<=") d.remove_prefix(2);  // a bounded dynamic size
    std::int64_t v = 0;
    if (!parse_int(d, v) || v < 0 || v > kMaxElements) return 0;
    elements *= static_cast<unsigned __int128>(v);
    if (elements > kMaxElements) return 0;  // no array that large (2^50 elements)
    out.dims.push_back(v);
  }
  std::size_t end = close + 1;
  if (end < s.size() && s[end] == '{') {  // the layout (and TPU tiling): padding only
    const std::size_t e = close_of(s, end);
    if (e == std::string_view::npos) return 0;
    end = e;
  }
  return end;
}

// Whether `s` starts with an opcode and its '(' ("get-tuple-element(").
bool starts_with_call(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
    ++i;
  return i > 0 && i < s.size() && s[i] == '(';
}

// Drops `line`'s comments in place: `/*index=5*/` (XLA numbers long tuples so),
// `// ...` to the end of the line (`} // name` after a computation, JAX's
// dumps), outside strings. `in_comment`: inside a /* */ that began on an
// earlier line.
void strip_comments(std::string& line, bool& in_comment) {
  if (!in_comment && line.find('/') == std::string::npos) return;  // most lines
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_comment) {
      if (c == '*' && i + 1 < line.size() && line[i + 1] == '/') in_comment = false, ++i;
      continue;
    }
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size())
        out += line[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '/' && i + 1 < line.size() && line[i + 1] == '*') {
      in_comment = true;
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < line.size() && line[i + 1] == '/') break;
    out += c;
  }
  line = std::move(out);
}

// Whether the text so far goes on on the next line: brackets left open, or a
// trailing ',' or '=' (an instruction's `NAME = SHAPE` with its opcode on the
// next line the Reader tells itself, as it reads the shape).
bool continues(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
  }
  const std::string_view t = trim(s);
  if (t.empty()) return false;
  std::string_view rest = t;
  drop_word(rest, "ROOT ");
  const std::size_t n = name_length(rest);
  const bool instruction = n > 0 && rest.substr(n, 3) == " = ";
  // A computation's '{' opens its body, which the next lines are.
  if (!instruction && t.back() == '{' && depth == 1) return false;
  return depth > 0 || t.back() == ',' || t.back() == '=';
}

struct Reader {
  std::string file;
  Module m;
  Computation* current = nullptr;
  bool header = false;
  bool in_table = false;
  bool at_end = false;          // the file's last line: nothing more to wait for
  bool awaits_opcode = false;   // the last line was `NAME = SHAPE`, its opcode on the next

  // Reads one (logical) line; false when it is an instruction whose opcode is
  // on the next line (nothing read yet: call again with more).
  bool line(std::string_view raw, std::size_t number) {
    awaits_opcode = false;
    read_line(raw, number);
    return !awaits_opcode;
  }

  void read_line(std::string_view raw, std::size_t number) {
    const std::string_view s = trim(raw);
    if (in_table) {
      if (s.empty()) in_table = false;
      return;
    }
    if (s.empty() || s.substr(0, 2) == "//") return;
    if (header && s.substr(0, 10) == "HloModule ")
      fail(file, number,
           "a second HloModule in the file: meshsim reads one module per file (split it, e.g. at its '// -----' "
           "lines)");
    if (!header) {
      if (s.substr(0, 10) != "HloModule ") fail(file, number, "not an HLO module: expected 'HloModule NAME' first");
      module_line(s.substr(10), number);
      header = true;
      return;
    }
    if (s == "FileNames" || s == "FunctionNames" || s == "FileLocations" || s == "StackFrames") {
      if (current) fail(file, number, "a table inside a computation");
      in_table = true;
      return;
    }
    if (s == "}") {
      if (!current) fail(file, number, "'}' outside a computation");
      current = nullptr;
      return;
    }
    if (instruction_line(s, number)) return;
    if (s.back() == '{') {
      if (current) fail(file, number, "a computation inside a computation (a missing '}'?)");
      computation_line(s, number);
      return;
    }
    fail(file, number, "not an HLO instruction or computation: '" + std::string(s.substr(0, 80)) + "'");
  }

  void module_line(std::string_view s, std::size_t number) {
    const std::size_t comma = s.find(',');
    m.name = std::string(trim(s.substr(0, comma)));
    if (m.name.empty()) fail(file, number, "the HloModule has no name");
    if (comma == std::string_view::npos) return;
    std::vector<std::string_view> parts;
    if (!split_top(s.substr(comma + 1), parts)) fail(file, number, "unbalanced brackets in the HloModule line");
    for (std::string_view p : parts) {
      const std::size_t eq = p.find('=');
      const std::string key(trim(p.substr(0, eq))), value(eq == std::string_view::npos ? "" : trim(p.substr(eq + 1)));
      if (key == "replica_count" || key == "num_partitions") {
        std::int64_t v = 0;
        if (!parse_int(value, v) || v < 1 || v > (1 << 20))
          fail(file, number, fmt::format("{}: expected 1 to {}, got '{}'", key, 1 << 20, value));
        (key == "replica_count" ? m.replica_count : m.num_partitions) = static_cast<int>(v);
        m.counts_given = true;
      }
      m.attrs.emplace_back(key, value);
    }
  }

  void computation_line(std::string_view s, std::size_t number) {
    Computation c;
    c.line = number;
    c.entry = drop_word(s, "ENTRY ");
    const std::size_t i = name_length(s);
    c.name = std::string(strip_percent(s.substr(0, i)));
    if (c.name.empty()) fail(file, number, "a computation without a name");
    if (m.index.count(c.name)) fail(file, number, "computation '" + c.name + "' is defined twice");
    if (c.entry && std::any_of(m.computations.begin(), m.computations.end(), [](const Computation& x) { return x.entry; }))
      fail(file, number, "a second ENTRY computation");
    m.index.emplace(c.name, m.computations.size());
    m.computations.push_back(std::move(c));
    current = &m.computations.back();
  }

  // `[ROOT ]%name = SHAPE opcode(operands), attr=value, ...`; false when the
  // line is not of that form (a computation header).
  bool instruction_line(std::string_view s, std::size_t number) {
    Instruction inst;
    inst.line = number;
    inst.root = drop_word(s, "ROOT ");
    const std::size_t i = name_length(s);
    if (i == 0 || s.substr(i, 3) != " = ") {
      if (inst.root) fail(file, number, "ROOT without 'NAME = ...'");
      return false;
    }
    if (!current) fail(file, number, "an instruction outside a computation");
    inst.name = std::string(strip_percent(s.substr(0, i)));
    std::string_view rest = trim(s.substr(i + 3));
    const std::size_t used = read_shape(rest, inst.shape);
    // XLA's parser lets tests leave a shape out ("count = get-tuple-element(param),
    // index=0"): an empty shape, which no size is read from.
    if (used == 0 && !starts_with_call(rest))
      fail(file, number,
           "instruction '" + inst.name + "': cannot read its shape (malformed, or more than 2^50 elements)");
    rest = trim(rest.substr(used));
    if (rest.empty() && used > 0 && !at_end) {
      awaits_opcode = true;
      return true;
    }
    const std::size_t paren = rest.find('(');
    if (paren == std::string_view::npos || paren == 0)
      fail(file, number, "instruction '" + inst.name + "': expected 'opcode(operands)' after the shape");
    inst.opcode = std::string(trim(rest.substr(0, paren)));
    const std::size_t close = close_of(rest, paren);
    if (close == std::string_view::npos) fail(file, number, "instruction '" + inst.name + "': unbalanced brackets");
    std::vector<std::string_view> operands;
    if (!split_top(rest.substr(paren + 1, close - paren - 2), operands))
      fail(file, number, "instruction '" + inst.name + "': unbalanced brackets in its operands");
    for (std::string_view o : operands) {
      const std::size_t pct = o.rfind('%');
      const std::size_t space = o.rfind(' ');
      if (pct != std::string_view::npos)
        o = o.substr(pct + 1);
      else if (space != std::string_view::npos && o.find('[') != std::string_view::npos && o.back() != '}')
        o = o.substr(space + 1);  // test-style "f32[8] x"
      inst.operands.emplace_back(trim(o));
    }
    rest = trim(rest.substr(close));
    if (!rest.empty()) {
      if (rest.front() != ',') fail(file, number, "instruction '" + inst.name + "': expected ', attr=value' after ')'");
      std::vector<std::string_view> attrs;
      if (!split_top(rest.substr(1), attrs))
        fail(file, number, "instruction '" + inst.name + "': unbalanced brackets in its attributes");
      for (std::string_view a : attrs) {
        const std::size_t eq = a.find('=');
        inst.attrs.emplace_back(std::string(trim(a.substr(0, eq))),
                                eq == std::string_view::npos ? std::string() : std::string(trim(a.substr(eq + 1))));
      }
    }
    if (current->index.count(inst.name))
      fail(file, number, "instruction '" + inst.name + "' is defined twice in computation '" + current->name + "'");
    current->index.emplace(inst.name, current->instructions.size());
    current->instructions.push_back(std::move(inst));
    return true;
  }

  Module finish(std::size_t lines) {
    lines = std::max<std::size_t>(lines, 1);
    if (!header) fail(file, lines, "not an HLO module: expected 'HloModule NAME' first");
    if (current) fail(file, lines, "computation '" + current->name + "' is not closed ('}')");
    const auto entry = std::find_if(m.computations.begin(), m.computations.end(),
                                    [](const Computation& c) { return c.entry; });
    if (entry == m.computations.end()) fail(file, lines, "the module has no ENTRY computation");
    m.entry = static_cast<std::size_t>(entry - m.computations.begin());
    m.file = file;
    return std::move(m);
  }
};

std::vector<int> iota_ids(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& perm) {
  // Output position o, in the transposed shape (t_i = dims[perm[i]]), holds the
  // row-major index of the source position whose perm[i]-th coordinate is o's i-th.
  std::int64_t total = 1;
  for (std::int64_t d : dims) total *= d;
  const std::size_t r = dims.size();
  std::vector<std::int64_t> t(r), stride(r, 1);
  for (std::size_t i = 0; i < r; ++i) t[i] = dims[static_cast<std::size_t>(perm[i])];
  for (std::size_t i = r; i-- > 1;) stride[i - 1] = stride[i] * dims[i];
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(total));
  std::vector<std::int64_t> at(r, 0);
  for (std::int64_t o = 0; o < total; ++o) {
    std::int64_t src = 0;
    for (std::size_t i = 0; i < r; ++i) src += at[i] * stride[static_cast<std::size_t>(perm[i])];
    out.push_back(static_cast<int>(src));
    for (std::size_t i = r; i-- > 0;) {
      if (++at[i] < t[i]) break;
      at[i] = 0;
    }
  }
  return out;
}

bool int_items(std::string_view s, std::vector<std::int64_t>& out) {
  std::vector<std::string_view> parts;
  if (!split_top(s, parts)) return false;
  for (std::string_view p : parts) {
    std::int64_t v = 0;
    if (!parse_int(p, v)) return false;
    out.push_back(v);
  }
  return true;
}

// "{{0,1},{2,3}}" (or "{0,1},{2,3}" inside) as lists; false when malformed.
bool nested_lists(std::string_view s, std::vector<std::vector<std::int64_t>>& out) {
  s = trim(s);
  if (s.size() < 2 || s.front() != '{' || s.back() != '}') return false;
  std::vector<std::string_view> parts;
  if (!split_top(s.substr(1, s.size() - 2), parts)) return false;
  for (std::string_view p : parts) {
    if (p.size() < 2 || p.front() != '{' || p.back() != '}') return false;
    std::vector<std::int64_t> v;
    if (!int_items(p.substr(1, p.size() - 2), v)) return false;
    out.push_back(std::move(v));
  }
  return true;
}

bool has_channel(const Instruction& inst) { return inst.attr("channel_id") != nullptr; }
bool global_ids(const Instruction& inst) {
  const std::string* g = inst.attr("use_global_device_ids");
  return g && *g == "true";
}

}  // namespace

int element_bits(std::string_view type) {
  if (type == "pred" || type == "s8" || type == "u8" || type.substr(0, 3) == "f8e") return 8;
  if (type == "s4" || type == "u4" || type.substr(0, 3) == "f4e") return 4;
  if (type == "s2" || type == "u2") return 2;
  if (type == "bf16" || type == "f16" || type == "s16" || type == "u16") return 16;
  if (type == "f32" || type == "s32" || type == "u32") return 32;
  if (type == "f64" || type == "s64" || type == "u64" || type == "c64") return 64;
  if (type == "c128") return 128;
  if (type == "token" || type == "opaque") return 0;
  return 0;
}

std::int64_t Shape::elements() const {
  if (is_tuple) {  // saturating: a tuple of many huge arrays
    std::int64_t n = 0;
    for (const Shape& e : tuple) n = std::min(n + e.elements(), std::int64_t{1} << 62);
    return n;
  }
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

std::uint64_t Shape::bytes() const {
  if (is_tuple) {
    std::uint64_t b = 0;
    for (const Shape& e : tuple) b = std::min(b + e.bytes(), std::uint64_t{1} << 62);
    return b;
  }
  return (static_cast<std::uint64_t>(elements()) * static_cast<std::uint64_t>(element_bits(type)) + 7) / 8;
}

const std::string* Instruction::attr(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

const Instruction* Computation::find(std::string_view n) const {
  const auto it = index.find(n);
  return it == index.end() ? nullptr : &instructions[it->second];
}

const Instruction* Computation::root() const {
  for (const Instruction& i : instructions)
    if (i.root) return &i;
  return instructions.empty() ? nullptr : &instructions.back();
}

const Computation* Module::find(std::string_view n) const {
  const auto it = index.find(n);
  return it == index.end() ? nullptr : &computations[it->second];
}

Module parse_module(std::istream& in, const std::string& file) {
  Reader r;
  r.file = file;
  std::string line, logical;  // `logical`: an instruction XLA printed over several lines
  std::size_t number = 0, first = 0;
  bool in_comment = false;
  while (std::getline(in, line)) {
    ++number;
    strip_comments(line, in_comment);
    if (logical.empty()) {
      if (trim(line).empty()) {
        r.line(line, number);  // (a blank line ends a table of the dump)
        continue;
      }
      first = number;
      logical.swap(line);
    } else {
      logical += ' ';
      logical += trim(line);
    }
    if (continues(logical) || !r.line(logical, first)) continue;
    logical.clear();
  }
  if (in.bad()) throw InputError(file, "", "cannot read the file");
  r.at_end = true;
  if (!logical.empty()) r.line(logical, first);
  return r.finish(number);
}

Module parse_module_text(std::string_view text, const std::string& file) {
  std::istringstream in{std::string(text)};
  return parse_module(in, file);
}

Module load_module(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file");
  return parse_module(in, path);
}

std::optional<std::vector<std::vector<int>>> iota_groups(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty() || s.front() != '[') return std::nullopt;
  const std::size_t a = s.find(']');
  if (a == std::string_view::npos || s.substr(a + 1, 3) != "<=[") return std::nullopt;
  std::vector<std::int64_t> shape, dims, perm;
  if (!int_items(s.substr(1, a - 1), shape) || shape.size() != 2) return std::nullopt;
  const std::size_t b = s.find(']', a + 4);
  if (b == std::string_view::npos || !int_items(s.substr(a + 4, b - a - 4), dims) || dims.empty()) return std::nullopt;
  std::string_view tail = s.substr(b + 1);
  if (tail.empty()) {
    for (std::size_t i = 0; i < dims.size(); ++i) perm.push_back(static_cast<std::int64_t>(i));
  } else {
    if (tail.size() < 3 || tail.substr(0, 2) != "T(" || tail.back() != ')') return std::nullopt;
    if (!int_items(tail.substr(2, tail.size() - 3), perm) || perm.size() != dims.size()) return std::nullopt;
    std::vector<std::int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size(); ++i)
      if (sorted[i] != static_cast<std::int64_t>(i)) return std::nullopt;
  }
  std::int64_t total = 1;
  for (std::int64_t d : dims) {
    if (d < 1 || d > (1 << 20)) return std::nullopt;
    total *= d;
    if (total > (1 << 20)) return std::nullopt;
  }
  if (shape[0] < 1 || shape[1] < 1 || shape[0] * shape[1] != total) return std::nullopt;
  const std::vector<int> ids = iota_ids(dims, perm);
  std::vector<std::vector<int>> groups(static_cast<std::size_t>(shape[0]));
  for (std::size_t g = 0; g < groups.size(); ++g)
    groups[g].assign(ids.begin() + static_cast<std::ptrdiff_t>(g * static_cast<std::size_t>(shape[1])),
                     ids.begin() + static_cast<std::ptrdiff_t>((g + 1) * static_cast<std::size_t>(shape[1])));
  return groups;
}

std::vector<std::vector<int>> device_groups(const Instruction& inst, const Module& m) {
  const auto bad = [&](const std::string& msg) { fail(m.file, inst.line, fmt::format("{}: {}", inst.name, msg)); };
  const bool channel = has_channel(inst), global = global_ids(inst);
  if (global && !channel) bad("use_global_device_ids=true needs a channel_id");
  // The id space of the groups, and how many copies of them run side by side.
  const int space = global ? m.devices() : channel ? m.num_partitions : m.replica_count;
  const int copies = global ? 1 : channel ? m.replica_count : m.num_partitions;
  std::vector<std::vector<int>> groups;
  const std::string* text = inst.attr("replica_groups");
  const std::string_view t = text ? trim(*text) : std::string_view("{}");
  if (t.substr(0, 5) == "@mesh")
    bad("replica groups in the @mesh<...> form are not read; print the module with explicit or iota groups");
  if (t == "{}") {
    groups.emplace_back();
    for (int i = 0; i < space; ++i) groups.back().push_back(i);
  } else if (t.front() == '[') {
    auto iota = iota_groups(t);
    if (!iota) bad(fmt::format("malformed iota replica groups '{}' (expected [G,S]<=[d0,...] or [G,S]<=[d0,...]T(p0,...))", t));
    groups = std::move(*iota);
  } else {
    std::vector<std::vector<std::int64_t>> lists;
    if (!nested_lists(t, lists)) bad(fmt::format("malformed replica groups '{}' (expected {{{{0,1}},{{2,3}}}})", t));
    for (const auto& l : lists) {
      groups.emplace_back();
      for (std::int64_t v : l) {
        if (v < 0 || v >= space)
          bad(fmt::format("replica group names id {}, outside the module's {} {}", v, space,
                          global ? "devices" : channel ? "partitions" : "replicas"));
        groups.back().push_back(static_cast<int>(v));
      }
    }
  }
  if (groups.empty()) {  // "{ }": every id, as {}
    groups.emplace_back();
    for (int i = 0; i < space; ++i) groups.back().push_back(i);
  }
  std::set<int> seen;
  for (const auto& g : groups)
    for (int v : g) {
      if (v >= space)
        bad(fmt::format("replica group names id {}, outside the module's {} {}", v, space,
                        global ? "devices" : channel ? "partitions" : "replicas"));
      if (!seen.insert(v).second) bad(fmt::format("id {} is in two replica groups", v));
    }
  if (global) return groups;
  std::vector<std::vector<int>> out;
  for (int k = 0; k < copies; ++k)
    for (const auto& g : groups) {
      out.emplace_back();
      for (int v : g) out.back().push_back(channel ? k * m.num_partitions + v : v * m.num_partitions + k);
    }
  return out;
}

std::vector<std::pair<int, int>> source_target_pairs(const Instruction& inst, const Module& m) {
  const std::string* text = inst.attr("source_target_pairs");
  std::vector<std::vector<std::int64_t>> lists;
  if (!text || !nested_lists(*text, lists))
    fail(m.file, inst.line, inst.name + ": expected source_target_pairs={{0,1},...}");
  const bool channel = has_channel(inst);
  const int space = channel ? m.num_partitions : m.replica_count;
  const int copies = channel ? m.replica_count : m.num_partitions;
  std::vector<std::pair<int, int>> out;
  for (int k = 0; k < copies; ++k)
    for (const auto& l : lists) {
      if (l.size() != 2 || l[0] < 0 || l[1] < 0 || l[0] >= space || l[1] >= space)
        fail(m.file, inst.line,
             fmt::format("{}: a source-target pair must be two ids below {}", inst.name, space));
      const auto global = [&](std::int64_t v) {
        return channel ? k * m.num_partitions + static_cast<int>(v) : static_cast<int>(v) * m.num_partitions + k;
      };
      out.emplace_back(global(l[0]), global(l[1]));
    }
  return out;
}

std::optional<std::uint64_t> permute_slice_bytes(const Instruction& inst, const Shape& buffer, const Module& m) {
  const std::string* text = inst.attr("slice_sizes");
  if (!text) return std::nullopt;
  std::vector<std::vector<std::int64_t>> lists;
  if (!nested_lists(*text, lists) || lists.empty())
    fail(m.file, inst.line, inst.name + ": expected slice_sizes={{d0,d1,...}}");
  if (lists.size() > 1)
    fail(m.file, inst.line,
         fmt::format("{}: an in-place collective-permute of {} slices (meshsim sends one slice per source-target pair)",
                     inst.name, lists.size()));
  if (buffer.is_tuple || lists[0].size() != buffer.dims.size())
    fail(m.file, inst.line,
         fmt::format("{}: slice_sizes has {} dimensions, its buffer {}", inst.name, lists[0].size(),
                     buffer.is_tuple ? std::string("is a tuple") : fmt::format("has {}", buffer.dims.size())));
  Shape slice;
  slice.type = buffer.type;
  for (std::size_t d = 0; d < lists[0].size(); ++d) {
    if (lists[0][d] < 0 || lists[0][d] > buffer.dims[d])
      fail(m.file, inst.line,
           fmt::format("{}: slice size {} of dimension {} is outside its buffer's 0..{}", inst.name, lists[0][d], d,
                       buffer.dims[d]));
    slice.dims.push_back(lists[0][d]);
  }
  return slice.bytes();
}

std::optional<std::vector<std::int64_t>> int_list(const Instruction& inst, std::string_view key, const Module& m) {
  const std::string* text = inst.attr(key);
  if (!text) return std::nullopt;
  const std::string_view t = trim(*text);
  std::vector<std::int64_t> v;
  if (t.size() < 2 || t.front() != '{' || t.back() != '}' || !int_items(t.substr(1, t.size() - 2), v))
    fail(m.file, inst.line, fmt::format("{}: {}: expected {{integers}}, got '{}'", inst.name, key, t));
  return v;
}

std::optional<std::int64_t> known_trip_count(const Instruction& inst) {
  const std::string* config = inst.attr("backend_config");
  if (!config) return std::nullopt;
  const std::size_t k = config->find("known_trip_count");
  if (k == std::string::npos) return std::nullopt;
  const std::size_t n = config->find("\"n", k);  // "n" or, quoted, \"n\"
  if (n == std::string::npos) return std::nullopt;
  std::size_t i = n + 2;
  while (i < config->size() && ((*config)[i] == ':' || (*config)[i] == ' ' || (*config)[i] == '"' || (*config)[i] == '\\'))
    ++i;
  std::size_t j = i;
  while (j < config->size() && (*config)[j] >= '0' && (*config)[j] <= '9') ++j;
  std::int64_t v = 0;
  if (j == i || !parse_int(std::string_view(*config).substr(i, j - i), v)) return std::nullopt;
  return v;
}

const Computation* called(const Instruction& inst, std::string_view key, const Module& m) {
  const std::string* text = inst.attr(key);
  if (!text) fail(m.file, inst.line, fmt::format("{}: no {}=", inst.name, key));
  const Computation* c = m.find(strip_percent(*text));
  if (!c) fail(m.file, inst.line, fmt::format("{}: {}={} names no computation", inst.name, key, *text));
  return c;
}

std::uint64_t dot_flops(const Instruction& inst, const Computation& c, const Module& m) {
  if (inst.operands.size() != 2) fail(m.file, inst.line, inst.name + ": a dot has two operands");
  const Instruction* lhs = c.find(inst.operands[0]);
  if (!lhs) fail(m.file, inst.line, fmt::format("{}: operand '{}' is not in computation '{}'", inst.name, inst.operands[0], c.name));
  const std::vector<std::int64_t> contracting = int_list(inst, "lhs_contracting_dims", m).value_or(std::vector<std::int64_t>{});
  std::uint64_t k = 1;
  for (std::int64_t d : contracting) {
    if (lhs->shape.is_tuple || d < 0 || static_cast<std::size_t>(d) >= lhs->shape.dims.size())
      fail(m.file, inst.line, fmt::format("{}: lhs_contracting_dims names dimension {} of a rank-{} operand", inst.name,
                                          d, lhs->shape.dims.size()));
    k *= static_cast<std::uint64_t>(lhs->shape.dims[static_cast<std::size_t>(d)]);
  }
  return 2 * static_cast<std::uint64_t>(inst.shape.elements()) * k;
}

}  // namespace meshsim::hlo
