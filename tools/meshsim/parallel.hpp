#pragma once
// Spreading work over processes. With MPI (meshsim built where CMake found MPI,
// and started by mpirun), every rank of a sweep simulates its share of the
// points and rank 0 gathers them, and a replay runs one GPU per rank; otherwise
// there is one process, rank 0 of 1.
#include <cstddef>
#include <functional>
#include <memory>
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

// This process's place among the ranks (MPI when mpirun started it); null,
// with the reason said as meshsim's one error line, when MPI cannot start.
std::unique_ptr<Parallel> join_ranks();

// The engine for running many independent items (a sweep's points, a search's
// plans): item i runs on rank i % size, `run(i, done, mine)` returning its text
// (`done` of this rank's `mine` items ran before it: for progress), and every
// rank gets every item's text, in item order. A collective call; `run` must not
// throw (an item's failure is part of its text).
std::vector<std::string> share_items(const Parallel& par, std::size_t count,
                                     const std::function<std::string(std::size_t item, std::size_t done,
                                                                     std::size_t mine)>& run);

// Runs `check` (what a rank can get wrong on its own: its files, its flags) and
// agrees on the outcome: the first rank's failure message by rank, on every
// rank ("" when every rank passed). A collective call.
std::string agreed_error(const Parallel& par, const std::function<void()>& check);

// The one rule of the ranks' exit codes (sweep, search, replay). A failure
// every rank shares (an agreed error, a result every rank sees) is said by rank
// 0, which ends with 1, while the others end with 0: a rank ending with 1 makes
// mpirun stop the job, perhaps before rank 0 has said why. A failure of one
// rank's own is said by that rank (naming it, when it is not rank 0) and ends
// it with 1.
constexpr int kReportedByRank0 = 0;
int shared_failure(const Parallel& par, const std::string& message);
int own_failure(const Parallel& par, const std::string& message);
// body()'s exit code, or its failure by the rule: an Error is every rank's when
// `errors_shared`, anything else (out of memory, a bug) this rank's own.
int guarded_rank(const Parallel& par, bool errors_shared, const std::function<int()>& body);

// Whether this build can use MPI.
bool mpi_built();
// Whether mpirun (Open MPI, MPICH or PMIx) started this process: its rank
// variables are set.
bool launched_by_mpi();

}  // namespace meshsim::cli
