// parse_json (workloads/json_cursor.cpp): the document it builds from the SAX
// events, and where its errors point.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "workloads/json_cursor.hpp"

using namespace meshsim;
using workloads::Json;
using workloads::parse_json;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json(text, "t.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("parse_json: the document equals nlohmann's own parse, members in file order", "[json]") {
  const std::string text =
      R"({"b": [1, -2, 3.5, true, false, null, "s", {"z": 1, "a": [[], {}]}], "a": {"y": {"x": 18446744073709551615}},)"
      R"( "c": "\u00e9\n", "d": 1e9, "e": []})";
  const Json parsed = parse_json(text, "t.json");
  CHECK(parsed == Json::parse(text));
  CHECK(parsed.dump() == Json::parse(text).dump());
  std::string keys;
  for (const auto& [k, v] : parsed.items()) keys += k;
  CHECK(keys == "bacde");  // not sorted
  CHECK(parse_json("[1, [2, [3]]]", "t.json") == Json::parse("[1, [2, [3]]]"));
  CHECK(parse_json(" 7 ", "t.json") == Json(7));
}

TEST_CASE("parse_json: duplicate keys and syntax errors name where the parser stood", "[json]") {
  CHECK(error_of(R"({"a": 1, "a": 2})") == "t.json:/a: duplicate key 'a'");
  CHECK(error_of(R"({"ops": [{"k": 1}, {"k": 1, "m": {"x": 1, "x": 2}}]})") == "t.json:/ops/1/m/x: duplicate key 'x'");
  // The same key in sibling objects is no duplicate.
  CHECK(error_of(R"({"ops": [{"k": 1}, {"k": 2}]})").empty());
  CHECK(error_of(R"({"ops": [1, 2, ]})").find("t.json:/ops/2: syntax error") == 0);
  CHECK(error_of(R"({"a": {"b": 1e400}})").find("t.json:/a/b:") == 0);
  CHECK(error_of(R"({"a": 1} x)").find("t.json:: syntax error") == 0);
  CHECK(error_of("  ") == "t.json:: the file is empty; expected a JSON object");
  CHECK(error_of(std::string("{\"a\": 1}\0", 9)) == "t.json:: byte 8 is a NUL; expected JSON text");
  // A key with a slash or tilde is escaped in the pointer.
  CHECK(error_of(R"({"a/b~": {"c": 1, "c": 2}})") == "t.json:/a~1b~0/c: duplicate key 'c'");
}

TEST_CASE("parse_json: deep nesting and long arrays", "[json]") {
  std::string deep(5000, '[');
  deep += std::string(5000, ']');
  CHECK(parse_json(deep, "t.json").is_array());
  std::string many = "[";
  for (int i = 0; i < 100000; ++i) many += (i ? ",{\"k\":" : "{\"k\":") + std::to_string(i) + "}";
  many += "]";
  const Json j = parse_json(many, "t.json");
  REQUIRE(j.size() == 100000);
  CHECK(j[99999]["k"] == 99999);
}
