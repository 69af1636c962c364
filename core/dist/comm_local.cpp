// Comm in a build without MPI: always rank 0 of 1, and every collective a local copy.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/dist/comm.h"

namespace reftrain {

bool Comm::built_with_mpi() {
  return false;
}

Comm::Comm(bool) {}

Comm& Comm::world() {
  static Comm comm(true);
  return comm;
}

Comm& Comm::self() {
  static Comm comm(false);
  return comm;
}

void Comm::allgather(const void* send, void* recv, size_t bytes) {
  std::copy_n(static_cast<const uint8_t*>(send), bytes, static_cast<uint8_t*>(recv));
}

void Comm::allgather_parts(void*, const std::vector<Part>&) {}

void Comm::alltoall_parts(const void* send, const std::vector<Part>& send_parts, void* recv,
                          const std::vector<Part>& recv_parts) {
  std::copy_n(static_cast<const uint8_t*>(send) + send_parts[0].offset, send_parts[0].bytes,
              static_cast<uint8_t*>(recv) + recv_parts[0].offset);
}

void Comm::gather_parts(const void* send, void* recv, const std::vector<Part>& parts) {
  std::copy_n(static_cast<const uint8_t*>(send), parts[0].bytes,
              static_cast<uint8_t*>(recv) + parts[0].offset);
}

void Comm::barrier() {}

void Comm::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

void Comm::finalize() {}

}  // namespace reftrain
