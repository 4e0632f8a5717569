#include "workloads/sharding.hpp"

#include <cctype>

namespace meshsim::workloads {

namespace {
bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
void skip_space(std::string_view s, std::size_t& i) {
  while (i < s.size() && s[i] == ' ') ++i;
}
}  // namespace

std::optional<ShardingText> parse_sharding(std::string_view s, std::string& error) {
  ShardingText out;
  std::size_t i = 0;
  skip_space(s, i);
  const std::size_t name_start = i;
  while (i < s.size() && (ident_char(s[i]) || s[i] == '_')) ++i;
  out.array = std::string(s.substr(name_start, i - name_start));
  skip_space(s, i);
  if (i >= s.size() || s[i] != '[') {
    error = "expected '[' in sharding '" + std::string(s) + "' (write it like A[I_X, J])";
    return std::nullopt;
  }
  ++i;
  while (true) {
    skip_space(s, i);
    if (i >= s.size() || !ident_start(s[i])) {
      error = "expected a dimension name at position " + std::to_string(i + 1) + " of sharding '" + std::string(s) + "'";
      return std::nullopt;
    }
    ShardedDim d;
    const std::size_t dim_start = i;
    while (i < s.size() && ident_char(s[i])) ++i;
    d.dim = std::string(s.substr(dim_start, i - dim_start));
    if (i < s.size() && s[i] == '_') {
      ++i;
      const std::size_t sub_start = i;
      while (i < s.size() && ident_char(s[i])) ++i;
      d.subscript = std::string(s.substr(sub_start, i - sub_start));
      if (d.subscript.empty()) {
        error = "expected mesh axes after '" + d.dim + "_' in sharding '" + std::string(s) + "'";
        return std::nullopt;
      }
    }
    out.dims.push_back(std::move(d));
    skip_space(s, i);
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    if (i < s.size() && s[i] == ']') {
      ++i;
      break;
    }
    error = "expected ',' or ']' at position " + std::to_string(i + 1) + " of sharding '" + std::string(s) + "'";
    return std::nullopt;
  }
  skip_space(s, i);
  if (i != s.size()) {
    error = "unexpected text after ']' in sharding '" + std::string(s) + "'";
    return std::nullopt;
  }
  return out;
}

std::optional<std::vector<std::string>> split_subscript(std::string_view subscript,
                                                        const std::vector<std::string>& axis_names,
                                                        std::string& error) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < subscript.size()) {
    std::size_t best = 0;
    const std::string* match = nullptr;
    for (const std::string& name : axis_names) {
      if (name.size() > best && subscript.substr(i, name.size()) == name) {
        best = name.size();
        match = &name;
      }
    }
    if (!match) {
      error = "unknown mesh axis '" + std::string(subscript.substr(i)) + "' in subscript '" + std::string(subscript) + "'";
      return std::nullopt;
    }
    out.push_back(*match);
    i += best;
  }
  return out;
}

std::string format_sharding(std::string_view array, const std::vector<std::string>& dims,
                            const std::vector<std::vector<std::string>>& axes) {
  std::string s(array);
  s += '[';
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (d) s += ", ";
    s += dims[d];
    if (!axes[d].empty()) {
      s += '_';
      for (const std::string& a : axes[d]) s += a;
    }
  }
  return s + ']';
}

}  // namespace meshsim::workloads
