// safetensors (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {str: str}}, then the raw little-endian tensor bytes. It runs no code and
// takes a few lines to read from Python, JavaScript or C++.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace reftrain {

// BF16 (bfloat16: the top 16 bits of an f32) and BOOL (one byte, 0 or 1) are read, for Hugging
// Face files (bf16 weights, GPT-2's causal-mask buffers); reftrain writes neither.
enum class DType { kF64, kF32, kF16, kI64, kI32, kU16, kU8, kBF16, kBool };

const char* dtype_name(DType d);  // "F32", ...
size_t dtype_size(DType d);

struct SafeTensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  size_t numel() const;
  // The data as T; throws std::invalid_argument when T does not match dtype.
  template <typename T>
  std::vector<T> as() const;
  // A BF16 tensor's bit patterns (each the top half of an f32); throws std::invalid_argument
  // for any other dtype.
  std::vector<uint16_t> bf16_bits() const;
};

struct SafetensorsFile {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;

  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);
  // The tensor `name`; an input error naming the file when it is missing or has another shape.
  const SafeTensor& get(const std::string& name, const std::vector<int64_t>& shape = {}) const;
  std::string path;  // where it was read from, for messages
};

// A tensor to write, by reference: the bytes stay where they are (a model's mega-buffer), so
// writing a large model's checkpoint needs no second copy of it.
struct TensorRef {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // numel(shape)·dtype_size(dtype) bytes
};

// Validates before it trusts: header length within the file, JSON well formed, dtypes known,
// shapes non-negative without overflow, offsets inside the data and matching the shape. A bad
// file is an input error "PATH: problem". Without `data`, the same checks but no tensor's bytes
// are read: each tensor has its dtype and shape and empty `bytes` (for checking a file against
// what it must hold before anything is sized from it).
SafetensorsFile read_safetensors(const std::string& path, bool data = true);
// Both writers are atomic and durable (atomic_file.h): PATH holds either its old contents
// or the complete new file, never a partial one. Tensors are stored in the order given (the
// header's keys are sorted, as JSON objects are), the data section 8-byte aligned. `before_rename`
// is AtomicFileWriter::commit's test hook. Errors name the file and the reason (disk full, ...).
void write_safetensors(const std::string& path, const SafetensorsFile& file);
void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       void (*before_rename)(const std::string&, const std::string&) = nullptr);

}  // namespace reftrain
