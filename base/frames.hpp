#pragma once
// Texts packed into one string and back: each as its length in decimal, a
// newline, then its bytes. Any bytes pass (a JSON array of strings refuses
// text that is not UTF-8); how ranks hand each other lists of texts over MPI.
#include <optional>
#include <string>
#include <vector>

namespace meshsim {

std::string pack_texts(const std::vector<std::string>& texts);
// nullopt when `packed` is not what pack_texts writes.
std::optional<std::vector<std::string>> unpack_texts(const std::string& packed);

}  // namespace meshsim
