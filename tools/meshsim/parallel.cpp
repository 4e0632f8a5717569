// The part of Parallel common to the MPI and the serial builds.
#include <nlohmann/json.hpp>

#include <exception>
#include <new>

#include "base/error.hpp"
#include "tools/meshsim/parallel.hpp"

namespace meshsim::cli {

std::vector<std::string> share_items(const Parallel& par, std::size_t count,
                                     const std::function<std::string(std::size_t, std::size_t, std::size_t)>& run) {
  const auto size = static_cast<std::size_t>(par.size());
  const auto rank = static_cast<std::size_t>(par.rank());
  const std::size_t mine = count / size + (rank < count % size ? 1 : 0);
  nlohmann::json texts = nlohmann::json::array();
  for (std::size_t i = rank, done = 0; i < count; i += size, ++done) texts.push_back(run(i, done, mine));
  if (size == 1) return texts.get<std::vector<std::string>>();
  // Rank 0 puts the ranks' items in order and hands the whole list to every rank.
  const std::vector<std::string> shares = par.gather(texts.dump());
  std::string all;
  if (rank == 0) {
    std::vector<std::string> out(count);
    for (std::size_t r = 0; r < shares.size(); ++r) {
      const nlohmann::json share = nlohmann::json::parse(shares[r]);
      for (std::size_t k = 0; k < share.size(); ++k) out.at(r + k * size) = share.at(k).get<std::string>();
    }
    all = nlohmann::json(out).dump();
  }
  par.broadcast(all, 0);
  return nlohmann::json::parse(all).get<std::vector<std::string>>();
}

std::string agreed_error(const Parallel& par, const std::function<void()>& check) {
  std::string mine;
  try {
    check();
  } catch (const Error& e) {
    mine = e.what();
  } catch (const std::bad_alloc&) {
    mine = "out of memory";
  } catch (const std::exception& e) {
    mine = std::string("internal error: ") + e.what();
  }
  return par.first_error(mine);
}

}  // namespace meshsim::cli
