#pragma once
// Spreading work over processes. With MPI (meshsim built where CMake found MPI,
// and started by mpirun), every rank of a sweep simulates its share of the
// points and rank 0 gathers them, and a replay runs one GPU per rank; otherwise
// there is one process, rank 0 of 1.
#include <string>
#include <vector>

namespace meshsim::cli {

class Parallel {
 public:
  // Joins MPI when this process was started by an MPI launcher; throws Error
  // when it was but meshsim was built without MPI.
  Parallel();
  ~Parallel();  // leaves MPI
  Parallel(const Parallel&) = delete;
  Parallel& operator=(const Parallel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Every rank passes its own text; rank 0 gets all of them, by rank; the
  // others get an empty vector. A collective call: every rank must make it.
  std::vector<std::string> gather(const std::string& mine) const;
  // Collective too: root's bytes on every rank.
  void broadcast(std::string& bytes, int root) const;
  // Collective: the largest of the ranks' values, on every rank.
  double max(double mine) const;
  // Collective: the first non-empty of the ranks' texts, by rank, on every rank
  // ("" when all are empty). How ranks agree to fail together.
  std::string first_error(const std::string& mine) const;
  // This rank's index among the ranks on its node, as the MPI launcher says
  // (OpenMPI, MPICH, Slurm); rank() when it says nothing.
  int local_rank() const;

 private:
  int rank_ = 0;
  int size_ = 1;
  bool mpi_ = false;
};

// Whether this build can use MPI.
bool mpi_built();

}  // namespace meshsim::cli
