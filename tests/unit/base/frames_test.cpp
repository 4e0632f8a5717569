// pack_texts / unpack_texts: any bytes round-trip; malformed frames are refused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/frames.hpp"

using namespace meshsim;

TEST_CASE("Frames: texts of any bytes come back as they went", "[base]") {
  const std::string binary("a\0b\n\xff\xfe", 6);  // a NUL, a newline, bytes that are not UTF-8
  const std::vector<std::vector<std::string>> cases = {
      {}, {""}, {"", ""}, {"one"}, {"12\nfake", binary, std::string(100000, 'x'), "last"}};
  for (const std::vector<std::string>& texts : cases) {
    const auto back = unpack_texts(pack_texts(texts));
    REQUIRE(back);
    CHECK(*back == texts);
  }
  CHECK(pack_texts({"ab", ""}) == "2\nab0\n");
}

TEST_CASE("Frames: what pack_texts cannot have written is refused", "[base]") {
  for (const char* bad : {"3\nab", "x\nab", "\nab", "2ab", "-1\n", "2\nab3", "99999999999999999999999\n"})
    CHECK_FALSE(unpack_texts(bad));
}
