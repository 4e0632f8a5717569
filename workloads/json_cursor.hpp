#pragma once
// A read-only view of one JSON value that knows its file and JSON pointer, so
// every error names the offending field: "w.json:/ops/3/m: expected ...".
// nlohmann::json stays inside workloads/: nothing past parsing sees it.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace meshsim::workloads {

using Json = nlohmann::ordered_json;

// Parses JSON text. Syntax errors and duplicate keys throw InputError naming
// the JSON pointer where the parser stood.
Json parse_json(std::string_view text, const std::string& file);

class Cursor {
 public:
  Cursor(const Json& value, std::string pointer, const std::string& file)
      : value_(&value), pointer_(std::move(pointer)), file_(&file) {}

  [[noreturn]] void fail(const std::string& message) const;
  const std::string& pointer() const { return pointer_; }
  const std::string& file() const { return *file_; }
  SourceRef ref() const { return {*file_, pointer_}; }
  const Json& raw() const { return *value_; }

  // Objects.
  void expect_object() const;
  bool has(std::string_view key) const;
  Cursor at(std::string_view key) const;                   // required member
  std::optional<Cursor> find(std::string_view key) const;  // optional member
  // Every member must be one of `allowed`; the first other one is an error.
  void only_keys(std::initializer_list<std::string_view> allowed) const;
  std::vector<std::pair<std::string, Cursor>> members() const;  // in file order

  // Arrays.
  std::vector<Cursor> elements() const;

  // Scalars.
  std::string as_string() const;
  std::string as_identifier() const;   // [A-Za-z][A-Za-z0-9_]*, non-empty
  bool as_bool() const;
  std::int64_t as_int() const;         // an integral number (1e9 allowed)
  std::int64_t as_int_in(std::int64_t lo, std::int64_t hi) const;
  std::uint64_t as_positive_u64(std::uint64_t max = std::uint64_t{1} << 62) const;
  double as_positive_double(double max) const;

  std::string type_name() const;

 private:
  std::string child_pointer(std::string_view key) const;
  const Json* value_;
  std::string pointer_;
  const std::string* file_;
};

}  // namespace meshsim::workloads
