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

enum class DType { kF64, kF32, kF16, kI64, kI32, kU16, kU8 };

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
};

struct SafetensorsFile {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;

  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);
  // The tensor `name`; an input error naming the file when it is missing or has another shape.
  const SafeTensor& get(const std::string& name, const std::vector<int64_t>& shape = {}) const;
  std::string path;  // where it was read from, for messages
};

// Validates before it trusts: header length within the file, JSON well formed, dtypes known,
// shapes non-negative without overflow, offsets inside the data and matching the shape. A bad
// file is an input error "PATH: problem".
SafetensorsFile read_safetensors(const std::string& path);
void write_safetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace reftrain
