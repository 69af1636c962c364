// Comm over MPI: every collective is point-to-point messages (MPI_Isend/MPI_Irecv) between
// pointers, cut into pieces of at most 1 GiB, so neither a part's size nor its offset meets
// MPI's int counts and displacements.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/dist/comm.h"

namespace reftrain {

namespace {

constexpr size_t kPieceBytes = size_t(1) << 30;

// Launched by an MPI launcher (Open MPI, MPICH's Hydra, PMIx): start MPI, or stay one process.
bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  std::fprintf(stderr, "error: %s failed (MPI error %d)\n", what, rc);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Posts the messages of `bytes` bytes at `data` to (send) or from (receive) `peer`, one per
// piece, tagged by the piece's index.
void post(std::vector<MPI_Request>& requests, bool send, void* data, size_t bytes, int peer) {
  uint8_t* p = static_cast<uint8_t*>(data);
  for (size_t at = 0, piece = 0; at < bytes; at += kPieceBytes, ++piece) {
    const int n = int(std::min(kPieceBytes, bytes - at));
    MPI_Request r;
    check(send ? MPI_Isend(p + at, n, MPI_BYTE, peer, int(piece), MPI_COMM_WORLD, &r)
               : MPI_Irecv(p + at, n, MPI_BYTE, peer, int(piece), MPI_COMM_WORLD, &r),
          send ? "MPI_Isend" : "MPI_Irecv");
    requests.push_back(r);
  }
}

void wait_all(std::vector<MPI_Request>& requests) {
  check(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

}  // namespace

bool Comm::built_with_mpi() {
  return true;
}

Comm::Comm(bool world) {
  if (!world || !launched_by_mpirun()) return;
  int provided = 0;
  // OpenMP threads never call MPI: only the main thread does.
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  mpi_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Comm& Comm::world() {
  static Comm comm(true);
  return comm;
}

Comm& Comm::self() {
  static Comm comm(false);
  return comm;
}

void Comm::allgather(const void* send, void* recv, size_t bytes) {
  if (!mpi_) {
    std::copy_n(static_cast<const uint8_t*>(send), bytes, static_cast<uint8_t*>(recv));
    return;
  }
  check(MPI_Allgather(send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgather");
  bytes_sent_ += bytes * uint64_t(size_ - 1);
}

void Comm::allgather_parts(void* buf, const std::vector<Part>& parts) {
  if (!mpi_) return;
  uint8_t* b = static_cast<uint8_t*>(buf);
  std::vector<MPI_Request> requests;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    post(requests, false, b + parts[peer].offset, parts[peer].bytes, peer);
    post(requests, true, b + parts[rank_].offset, parts[rank_].bytes, peer);
    bytes_sent_ += parts[rank_].bytes;
  }
  wait_all(requests);
}

void Comm::alltoall_parts(const void* send, const std::vector<Part>& send_parts, void* recv,
                          const std::vector<Part>& recv_parts) {
  const uint8_t* s = static_cast<const uint8_t*>(send);
  uint8_t* r = static_cast<uint8_t*>(recv);
  std::copy_n(s + send_parts[rank_].offset, send_parts[rank_].bytes, r + recv_parts[rank_].offset);
  std::vector<MPI_Request> requests;
  for (int peer = 0; peer < size_ && mpi_; ++peer) {
    if (peer == rank_) continue;
    post(requests, false, r + recv_parts[peer].offset, recv_parts[peer].bytes, peer);
    post(requests, true, const_cast<uint8_t*>(s + send_parts[peer].offset), send_parts[peer].bytes,
         peer);
    bytes_sent_ += send_parts[peer].bytes;
  }
  wait_all(requests);
}

void Comm::gather_parts(const void* send, void* recv, const std::vector<Part>& parts) {
  const uint8_t* s = static_cast<const uint8_t*>(send);
  uint8_t* r = static_cast<uint8_t*>(recv);
  std::vector<MPI_Request> requests;
  if (rank_ == 0) {
    std::copy_n(s, parts[0].bytes, r + parts[0].offset);
    for (int peer = 1; peer < size_ && mpi_; ++peer) {
      post(requests, false, r + parts[peer].offset, parts[peer].bytes, peer);
    }
  } else {
    post(requests, true, const_cast<uint8_t*>(s), parts[rank_].bytes, 0);
    bytes_sent_ += parts[rank_].bytes;
  }
  wait_all(requests);
}

void Comm::barrier() {
  if (mpi_) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void Comm::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void Comm::finalize() {
  if (!mpi_) return;
  MPI_Finalize();
  mpi_ = false;
}

}  // namespace reftrain
