// The ranks of a data-parallel run and the few collectives it needs. Launched by `mpirun -np N`
// (in a build that found MPI), the process is one of N ranks; otherwise it is rank 0 of 1 and
// every operation is a local copy. Nothing here adds numbers: each collective moves bytes to
// fixed places, so the result cannot depend on MPI's choice of algorithm. The trainer does the
// arithmetic itself, in an order it defines (core/train/data_parallel.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace reftrain {

// Bytes [offset, offset + bytes) of a buffer.
struct Part {
  size_t offset = 0, bytes = 0;
};

class Comm {
 public:
  // The process's communicator, started on first use: all ranks of `mpirun`, or rank 0 of 1.
  static Comm& world();
  // This process alone, rank 0 of 1, even under mpirun (the commands other than train).
  static Comm& self();
  // True when this build can run several ranks (CMake found MPI).
  static bool built_with_mpi();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool root() const { return rank_ == 0; }

  // Every rank's `bytes` bytes at `send`, in rank order, into every rank's recv (size()·bytes).
  void allgather(const void* send, void* recv, size_t bytes);
  // In place: rank r's bytes are buf's parts[r]; afterwards every rank holds every part.
  void allgather_parts(void* buf, const std::vector<Part>& parts);
  // Rank p sends send's send_parts[q] to rank q, which puts it at its recv's recv_parts[p]
  // (the two describe the same bytes: send_parts[q].bytes on p = recv_parts[p].bytes on q).
  void alltoall_parts(const void* send, const std::vector<Part>& send_parts, void* recv,
                      const std::vector<Part>& recv_parts);
  // Rank r's parts[r].bytes bytes at `send` go to rank 0's recv at parts[r].offset (recv is
  // only written, and only read, on rank 0).
  void gather_parts(const void* send, void* recv, const std::vector<Part>& parts);
  void barrier();
  // Ends every rank of the job with `code` (MPI_Abort); with one rank, exits.
  [[noreturn]] void abort(int code);
  // Ends MPI cleanly at the end of main (the destructor cannot: MPI must end before exit).
  void finalize();
  // Bytes this rank has sent to other ranks so far (its share of the traffic).
  uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  explicit Comm(bool world);
  int rank_ = 0, size_ = 1;
  bool mpi_ = false;  // MPI was initialised (launched by mpirun, built with MPI)
  uint64_t bytes_sent_ = 0;
};

// True on every rank when `flag` is true on any: the ranks agree, e.g. on stopping.
inline bool any_rank(Comm& comm, bool flag) {
  const uint8_t mine = flag ? 1 : 0;
  std::vector<uint8_t> all(size_t(comm.size()));
  comm.allgather(&mine, all.data(), 1);
  for (const uint8_t f : all) {
    if (f) return true;
  }
  return false;
}

}  // namespace reftrain
