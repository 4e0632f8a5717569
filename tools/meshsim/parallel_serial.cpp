// Parallel without MPI: one process. Refuses to run under mpirun, where every
// rank would compute every point (or replay every GPU) and write the same files.
#include "base/error.hpp"
#include "tools/meshsim/parallel.hpp"

namespace meshsim::cli {

Parallel::Parallel() {
  if (launched_by_mpi())
    throw Error("this meshsim was built without MPI (CMake found none, or -DMESHSIM_MPI=OFF), so it cannot share work "
                "between mpirun's ranks (a sweep's points, a replay's GPUs); install libopenmpi-dev "
                "(scripts/install-deps) and rebuild, or run it without mpirun");
}
Parallel::~Parallel() = default;

std::vector<std::string> Parallel::gather(const std::string& mine) const { return {mine}; }

void Parallel::broadcast(std::string&, int) const {}
double Parallel::max(double mine) const { return mine; }
std::string Parallel::first_error(const std::string& mine) const { return mine; }
int Parallel::local_rank() const { return 0; }

bool mpi_built() { return false; }

}  // namespace meshsim::cli
