#include "workloads/json_cursor.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "base/error.hpp"

namespace meshsim::workloads {

namespace {

struct Frame {
  bool is_array = false;
  std::size_t index = 0;
  std::string key;
  bool has_key = false;
  std::set<std::string> keys;
};

std::string frames_pointer(const std::vector<Frame>& stack) {
  std::string p;
  for (const Frame& f : stack) {
    if (!f.is_array && !f.has_key) continue;
    p += '/';  // (not "/" + token: GCC 12 reports a false -Wrestrict on that here)
    p += f.is_array ? std::to_string(f.index) : escape_pointer_token(f.key);
  }
  return p;
}

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error
// while parsing value - unexpected ']'" -> "syntax error at line 1, column 5: unexpected ']'..."
std::string tidy_parse_message(const std::string& what) {
  std::string m = what;
  if (const auto close = m.find("] "); m.rfind("[json.exception", 0) == 0 && close != std::string::npos)
    m = m.substr(close + 2);
  if (m.rfind("parse error", 0) == 0) m = "syntax error" + m.substr(11);
  // nlohmann repeats itself: "...: syntax error while parsing value - unexpected ']'".
  if (const auto from = m.find(": syntax error while parsing "); from != std::string::npos)
    if (const auto dash = m.find(" - ", from); dash != std::string::npos)
      m = m.substr(0, from + 2) + m.substr(dash + 3);
  return m;
}

[[noreturn]] void input_error(const std::string& file, const std::string& pointer, const std::string& message) {
  throw InputError(file, one_line(pointer), one_line(message));
}

}  // namespace

namespace {

// Builds the document from the parser's SAX events, tracking where it stands
// (for error pointers) and each object's keys (duplicates are errors). Linear
// in the text: nlohmann's callback parser rescans the enclosing array at every
// closing bracket, which made a file of N ops take O(N^2) (issue 18).
class DomBuilder {
 public:
  explicit DomBuilder(const std::string& file) : file_(file) {}
  Json root;

  bool null() { return scalar(nullptr); }
  bool boolean(bool v) { return scalar(v); }
  bool number_integer(Json::number_integer_t v) { return scalar(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return scalar(v); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return scalar(v); }
  bool string(Json::string_t& v) { return scalar(std::move(v)); }
  bool binary(Json::binary_t& v) { return scalar(std::move(v)); }

  bool start_object(std::size_t) {
    values_.push_back(place(Json::object()));
    frames_.emplace_back();
    return true;
  }
  bool key(Json::string_t& k) {
    Frame& top = frames_.back();
    top.key = k;
    top.has_key = true;
    if (!top.keys.insert(top.key).second)
      input_error(file_, frames_pointer(frames_), fmt::format("duplicate key '{}'", top.key));
    // Appended, not looked up: the key is new (just checked), and an ordered
    // object's own insertion searches its members.
    Json::object_t& members = values_.back()->get_ref<Json::object_t&>();
    members.emplace_back(std::move(k), nullptr);
    member_ = &members.back().second;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) {
    values_.push_back(place(Json::array()));
    frames_.emplace_back().is_array = true;
    return true;
  }
  bool end_array() { return close(); }

  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    // A syntax error, or out_of_range for a number like 1e400.
    input_error(file_, frames_pointer(frames_), tidy_parse_message(e.what()));
  }

 private:
  // Puts a new value where the parser stands: the root, the next element of
  // the array being read, or the member whose key was just read.
  Json* place(Json&& v) {
    if (values_.empty()) {
      root = std::move(v);
      return &root;
    }
    Json& top = *values_.back();
    if (top.is_array()) {
      top.get_ref<Json::array_t&>().push_back(std::move(v));
      return &top.get_ref<Json::array_t&>().back();
    }
    *member_ = std::move(v);
    return member_;
  }
  bool scalar(Json&& v) {
    place(std::move(v));
    after_value();
    return true;
  }
  bool close() {
    frames_.pop_back();
    values_.pop_back();
    after_value();
    return true;
  }
  void after_value() {
    if (frames_.empty()) return;
    Frame& top = frames_.back();
    if (top.is_array)
      ++top.index;
    else
      top.has_key = false;
  }

  const std::string& file_;
  std::vector<Frame> frames_;
  std::vector<Json*> values_;  // the open arrays and objects, innermost last
  Json* member_ = nullptr;     // the member whose key was read last
};

}  // namespace

Json parse_json(std::string_view text, const std::string& file) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    input_error(file, "", "the file is empty; expected a JSON object");
  // nlohmann's lexer stops at a NUL as if the text ended there; JSON never holds one.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
    input_error(file, "", fmt::format("byte {} is a NUL; expected JSON text", nul));
  DomBuilder builder(file);
  Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json, /*strict=*/true,
                  /*ignore_comments=*/false);
  return std::move(builder.root);
}

void Cursor::fail(const std::string& message) const { input_error(*file_, pointer_, message); }

std::string Cursor::type_name() const {
  switch (value_->type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

std::string Cursor::child_pointer(std::string_view key) const { return pointer_ + "/" + escape_pointer_token(key); }

void Cursor::expect_object() const {
  if (!value_->is_object()) fail("expected an object, got " + type_name());
}

bool Cursor::has(std::string_view key) const { return value_->is_object() && value_->contains(key); }

Cursor Cursor::at(std::string_view key) const {
  expect_object();
  const auto it = value_->find(key);
  if (it == value_->end()) fail(fmt::format("missing required field '{}'", key));
  return Cursor(*it, child_pointer(key), *file_);
}

std::optional<Cursor> Cursor::find(std::string_view key) const {
  expect_object();
  const auto it = value_->find(key);
  if (it == value_->end()) return std::nullopt;
  return Cursor(*it, child_pointer(key), *file_);
}

void Cursor::only_keys(std::initializer_list<std::string_view> allowed) const {
  expect_object();
  for (const auto& [key, value] : value_->items()) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string list;
      for (std::string_view a : allowed) {
        if (!list.empty()) list += ", ";
        list += a;
      }
      input_error(*file_, child_pointer(key), fmt::format("unknown key '{}' (expected one of: {})", key, list));
    }
  }
}

std::vector<std::pair<std::string, Cursor>> Cursor::members() const {
  expect_object();
  std::vector<std::pair<std::string, Cursor>> out;
  for (const auto& [key, value] : value_->items()) out.emplace_back(key, Cursor(value, child_pointer(key), *file_));
  return out;
}

std::vector<Cursor> Cursor::elements() const {
  if (!value_->is_array()) fail("expected an array, got " + type_name());
  std::vector<Cursor> out;
  for (std::size_t i = 0; i < value_->size(); ++i)
    out.emplace_back((*value_)[i], pointer_ + "/" + std::to_string(i), *file_);
  return out;
}

std::string Cursor::as_string() const {
  if (!value_->is_string()) fail("expected a string, got " + type_name());
  return value_->get<std::string>();
}

std::string Cursor::as_identifier() const {
  std::string s = as_string();
  bool ok = !s.empty() && std::isalpha(static_cast<unsigned char>(s[0]));
  for (char c : s) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
  if (!ok) fail(fmt::format("expected a name (a letter, then letters, digits, '_', '-', '.'), got '{}'", s));
  return s;
}

bool Cursor::as_bool() const {
  if (!value_->is_boolean()) fail("expected true or false, got " + type_name());
  return value_->get<bool>();
}

std::int64_t Cursor::as_int() const {
  if (value_->is_number_integer()) {
    if (value_->is_number_unsigned() && value_->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail(fmt::format("number too large: {}", value_->get<std::uint64_t>()));
    return value_->get<std::int64_t>();
  }
  if (value_->is_number_float()) {
    const double d = value_->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) fail(fmt::format("expected an integer, got {}", d));
    if (std::fabs(d) > 9.2e18) fail(fmt::format("number too large: {}", d));
    return static_cast<std::int64_t>(d);
  }
  fail("expected an integer, got " + type_name());
}

std::int64_t Cursor::as_int_in(std::int64_t lo, std::int64_t hi) const {
  const std::int64_t v = as_int();
  if (v < lo || v > hi) fail(fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v));
  return v;
}

std::uint64_t Cursor::as_positive_u64(std::uint64_t max) const {
  const std::int64_t v = as_int();
  if (v <= 0) fail(fmt::format("expected a positive integer, got {}", v));
  if (static_cast<std::uint64_t>(v) > max) fail(fmt::format("{} is too large (at most {})", v, max));
  return static_cast<std::uint64_t>(v);
}

double Cursor::as_positive_double(double max) const {
  if (!value_->is_number()) fail("expected a number, got " + type_name());
  const double d = value_->get<double>();
  if (!(d > 0)) fail(fmt::format("expected a positive number, got {}", d));
  if (d > max) fail(fmt::format("{} is too large (at most {})", d, max));
  return d;
}

}  // namespace meshsim::workloads
