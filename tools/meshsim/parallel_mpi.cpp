// Parallel with MPI. MPI is joined only when an MPI launcher started this
// process (its environment says so); a plain `meshsim sweep` never touches MPI.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "base/error.hpp"
#include "tools/meshsim/parallel.hpp"

namespace meshsim::cli {

Parallel::Parallel() {
  if (!launched_by_mpi()) return;
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw Error("MPI_Init failed");
  mpi_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

int Parallel::local_rank() const {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  return rank_;
}

Parallel::~Parallel() {
  if (mpi_) MPI_Finalize();
}

std::vector<std::string> Parallel::gather(const std::string& mine) const {
  if (!mpi_) return {mine};
  // Past MPI's int counts no rank can go on alone: stop them all.
  if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    std::fputs("meshsim: error: a rank's sweep results exceed 2 GB; use more ranks or fewer points\n", stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(static_cast<std::size_t>(size_));
  std::string all;
  if (rank_ == 0) {
    long long total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      offsets[r] = static_cast<int>(total);
      total += lengths[r];
      if (total > std::numeric_limits<int>::max()) {
        std::fputs("meshsim: error: the sweep results exceed 2 GB; use fewer points\n", stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (rank_ != 0) return out;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return out;
}

void Parallel::broadcast(std::string& bytes, int root) const {
  if (!mpi_) return;
  unsigned long long length = bytes.size();
  MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD);
  if (length > static_cast<unsigned long long>(std::numeric_limits<int>::max())) {
    std::fputs("meshsim: error: an MPI broadcast exceeds 2 GB\n", stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  bytes.resize(static_cast<std::size_t>(length));
  MPI_Bcast(bytes.data(), static_cast<int>(length), MPI_CHAR, root, MPI_COMM_WORLD);
}

double Parallel::max(double mine) const {
  if (!mpi_) return mine;
  double all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

std::string Parallel::first_error(const std::string& mine) const {
  if (!mpi_) return mine;
  std::string first;
  for (const std::string& e : gather(mine))
    if (!e.empty()) {
      first = e;
      break;
    }
  broadcast(first, 0);
  return first;
}

bool mpi_built() { return true; }

}  // namespace meshsim::cli
