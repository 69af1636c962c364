// CRC-32C (Castagnoli, the iSCSI / ext4 / safetensors-tools checksum): the checkpoint's
// per-tensor integrity check (docs/checkpoints.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace reftrain {

// The CRC-32C of `size` bytes at `data` (crc32c("123456789") = 0xE3069283).
uint32_t crc32c(const void* data, size_t size);

}  // namespace reftrain
