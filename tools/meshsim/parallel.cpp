// The part of Parallel common to the MPI and the serial builds.
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <optional>

#include "base/error.hpp"
#include "base/frames.hpp"
#include "tools/meshsim/commands.hpp"
#include "tools/meshsim/parallel.hpp"

namespace meshsim::cli {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

std::unique_ptr<Parallel> join_ranks() {
  try {
    return std::make_unique<Parallel>();
  } catch (const Error& e) {
    fail(e.what());
    return nullptr;
  }
}

std::vector<std::string> share_items(const Parallel& par, std::size_t count,
                                     const std::function<std::string(std::size_t, std::size_t, std::size_t)>& run) {
  const auto size = static_cast<std::size_t>(par.size());
  const auto rank = static_cast<std::size_t>(par.rank());
  const std::size_t mine = count / size + (rank < count % size ? 1 : 0);
  std::vector<std::string> texts;
  for (std::size_t i = rank, done = 0; i < count; i += size, ++done) texts.push_back(run(i, done, mine));
  if (size == 1) return texts;
  // Rank 0 puts the ranks' items in order and hands the whole list to every rank.
  const std::vector<std::string> shares = par.gather(pack_texts(texts));
  std::string all;
  if (rank == 0) {
    std::vector<std::string> out(count);
    for (std::size_t r = 0; r < shares.size(); ++r) {
      const std::optional<std::vector<std::string>> share = unpack_texts(shares[r]);
      MESHSIM_ASSERT(share, "a rank's share is not packed texts");
      for (std::size_t k = 0; k < share->size(); ++k) out.at(r + k * size) = (*share)[k];
    }
    all = pack_texts(out);
  }
  par.broadcast(all, 0);
  std::optional<std::vector<std::string>> every = unpack_texts(all);
  MESHSIM_ASSERT(every, "rank 0's list is not packed texts");
  return *std::move(every);
}

std::string agreed_error(const Parallel& par, const std::function<void()>& check) {
  return par.first_error(failure_of(check).message);
}

int shared_failure(const Parallel& par, const std::string& message) {
  return par.rank() == 0 ? fail(message) : kReportedByRank0;
}

int own_failure(const Parallel& par, const std::string& message) {
  return fail(par.rank() == 0 ? message : fmt::format("rank {}: {}", par.rank(), message));
}

int guarded_rank(const Parallel& par, bool errors_shared, const std::function<int()>& body) {
  int code = 0;
  const Failure f = failure_of([&] { code = body(); });
  if (f.message.empty()) return code;
  return f.error && errors_shared ? shared_failure(par, f.message) : own_failure(par, f.message);
}

}  // namespace meshsim::cli
