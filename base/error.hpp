#pragma once
// meshsim's error doctrine (see docs/ARCHITECTURE.md):
//  - InputError: the user's workload is malformed or inconsistent. Carries the file
//    and the JSON pointer of the offending value. Printed by main() as
//    "meshsim: error: FILE:/json/pointer: message", exit code 1.
//  - Error: the environment failed (file unreadable, ...). Printed with its context.
//  - MESHSIM_ASSERT: a bug. Always on, never reachable from user input.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace meshsim {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  InputError(std::string file, std::string json_pointer, std::string message);
  const std::string& file() const { return file_; }
  const std::string& json_pointer() const { return pointer_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  std::string pointer_;
  std::string message_;
};

// Where a value was written: its file and JSON pointer ("w.json", "/training/parallelism").
// A workload built in memory (the search's plans, an importer's system) carries
// the pointers its JSON form would have, so an error found after reading names
// the same place either way.
struct SourceRef {
  std::string file;
  std::string pointer;
  [[noreturn]] void fail(const std::string& message) const;
  SourceRef child(std::string_view key) const;    // pointer + "/" + key (escaped)
  SourceRef child(std::size_t index) const;       // pointer + "/" + index
};

// Errors are one line: control characters from the input (a "\n" inside a key
// or a string) written as JSON escapes. SourceRef::fail applies it.
std::string one_line(std::string_view text);

// A JSON pointer token: '~' as "~0", '/' as "~1" (RFC 6901).
std::string escape_pointer_token(std::string_view token);

[[noreturn]] void assertion_failed(const char* condition, const char* message, const char* file, int line);

}  // namespace meshsim

#define MESHSIM_ASSERT(cond, msg)                                        \
  do {                                                                   \
    if (!(cond)) ::meshsim::assertion_failed(#cond, msg, __FILE__, __LINE__); \
  } while (false)
