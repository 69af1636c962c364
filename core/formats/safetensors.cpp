#include "core/formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/base/checked.h"
#include "core/base/error.h"
#include "core/base/json_depth.h"
#include "core/formats/atomic_file.h"
#include "core/formats/input_file.h"

namespace reftrain {

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF64, "F64", 8}, {DType::kF32, "F32", 4},   {DType::kF16, "F16", 2},
    {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},   {DType::kU16, "U16", 2},
    {DType::kU8, "U8", 1},   {DType::kBF16, "BF16", 2}, {DType::kBool, "BOOL", 1}};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<double>() {
  return DType::kF64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::kU16;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kU8;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// Parsing a JSON header takes up to ~20 times its size in memory (a json value and a vector
// slot per "0," of a long array; ~40 times for "[[[[" nesting). The format allows 100 MB; we
// accept 16 MB, over 100,000 tensor entries of ~100 bytes, so a header costs at most ~320 MB.
constexpr uint64_t kMaxHeaderBytes = 16 << 20;
// {name: {"shape": [...]}} is as deep as the format goes.
constexpr int kMaxHeaderDepth = 3;

// Why one header entry is malformed; read_safetensors adds the file and the entry's name.
struct BadEntry : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A tensor's header entry, checked against itself and the data section's size; its bytes are
// read only after every entry has passed (so a lying header allocates nothing).
struct Entry {
  std::string name;
  SafeTensor tensor;  // bytes still empty
  uint64_t begin = 0, end = 0;
};

uint64_t non_negative(const nlohmann::json& v, const char* what) {
  // JSON numbers that are non-negative integers parse as number_unsigned; a negative, fractional
  // or huge (> 2^64) number, a string or a bool does not.
  if (!v.is_number_unsigned()) throw BadEntry(std::string(what) + " is not a non-negative integer");
  return v.get<uint64_t>();
}

DType parse_dtype(const nlohmann::json& v) {
  if (v.is_string()) {
    for (const DTypeInfo& d : kDTypes) {
      if (v.get_ref<const std::string&>() == d.name) return d.dtype;
    }
  }
  throw BadEntry("unknown dtype " + printable(v.is_string() ? v.get<std::string>() : v.dump()) +
                 " (reftrain reads F64 F32 F16 BF16 I64 I32 U16 U8 BOOL)");
}

// The tensor's size in bytes, from its dtype and shape; the shape goes into `t`.
CheckedSize parse_shape(const nlohmann::json& shape, SafeTensor* t) {
  if (!shape.is_array()) throw BadEntry("shape is not an array");
  CheckedSize bytes = dtype_size(t->dtype);
  for (const nlohmann::json& d : shape) {
    const uint64_t v = non_negative(d, "a dimension");
    if (v > uint64_t(std::numeric_limits<int64_t>::max())) throw BadEntry("a dimension overflows");
    t->shape.push_back(int64_t(v));
    bytes *= v;
  }
  return bytes;
}

Entry parse_entry(const std::string& name, const nlohmann::json& e, uint64_t data_size) {
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
      !e.contains("data_offsets")) {
    throw BadEntry("needs dtype, shape and data_offsets");
  }
  Entry r{name, SafeTensor{}, 0, 0};
  r.tensor.dtype = parse_dtype(e["dtype"]);
  const CheckedSize bytes = parse_shape(e["shape"], &r.tensor);
  const nlohmann::json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2) throw BadEntry("data_offsets needs 2 values");
  r.begin = non_negative(off[0], "data_offsets[0]");
  r.end = non_negative(off[1], "data_offsets[1]");
  if (r.begin > r.end || r.end > data_size) {
    throw BadEntry("data_offsets [" + std::to_string(r.begin) + "," + std::to_string(r.end) +
                   "] outside the data (" + std::to_string(data_size) + " bytes)");
  }
  if (bytes.overflowed() || r.end - r.begin != bytes.value()) {
    throw BadEntry("data_offsets size does not match shape " + shape_str(r.tensor.shape));
  }
  return r;
}

std::string span_str(const Entry& e) {
  return "tensor " + printable(e.name) + " [" + std::to_string(e.begin) + "," +
         std::to_string(e.end) + ")";
}

// The tensors must tile the data section in offset order, with neither gaps nor overlap, as
// the format requires: then the bytes read add up to the file's size, however many entries
// the header lists.
void check_tiling(std::vector<Entry>& entries, uint64_t data_size, const std::string& file) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < cursor) {
      throw input_error(file + ": " + span_str(e) + " overlaps " + span_str(entries[i - 1]));
    }
    if (e.begin > cursor) {
      throw input_error(file + ": " + std::to_string(e.begin - cursor) +
                        " bytes of the data section before " + span_str(e) +
                        " belong to no tensor");
    }
    cursor = e.end;
  }
  if (cursor != data_size) {
    throw input_error(file + ": the last " + std::to_string(data_size - cursor) +
                      " bytes of the data section belong to no tensor");
  }
}

std::map<std::string, std::string> parse_metadata(const nlohmann::json& m,
                                                  const std::string& file) {
  const auto bad = [&] { return input_error(file + ": __metadata__ must map names to strings"); };
  if (!m.is_object()) throw bad();
  std::map<std::string, std::string> r;
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it->is_string()) throw bad();
    r[it.key()] = it->get<std::string>();
  }
  return r;
}

// The 8-byte little-endian header length, checked against the file.
uint64_t read_header_length(InputFile& in) {
  if (in.size() < 8) {
    throw input_error(in.name() +
                      ": not a safetensors file (shorter than its 8-byte header length)");
  }
  uint8_t len_bytes[8];
  in.read_at(0, len_bytes, 8, "the header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > in.size() - 8) {
    throw input_error(in.name() + ": corrupt safetensors header (length " +
                      std::to_string(header_len) + " runs past the end of the file)");
  }
  if (header_len > kMaxHeaderBytes) {
    throw input_error(in.name() + ": safetensors header of " + std::to_string(header_len) +
                      " bytes is over reftrain's limit of 16 MiB");
  }
  return header_len;
}

}  // namespace

const char* dtype_name(DType d) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.dtype == d) return i.name;
  }
  return "?";
}

size_t dtype_size(DType d) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.dtype == d) return i.size;
  }
  return 0;
}

size_t SafeTensor::numel() const {
  return bytes.size() / dtype_size(dtype);
}

template <typename T>
std::vector<T> SafeTensor::as() const {
  if (dtype_of<T>() != dtype) {
    throw std::invalid_argument(std::string("tensor is ") + dtype_name(dtype) + ", not " +
                                dtype_name(dtype_of<T>()));
  }
  std::vector<T> out(numel());
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}
std::vector<uint16_t> SafeTensor::bf16_bits() const {
  if (dtype != DType::kBF16) {
    throw std::invalid_argument(std::string("tensor is ") + dtype_name(dtype) + ", not BF16");
  }
  std::vector<uint16_t> out(numel());
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

template std::vector<double> SafeTensor::as<double>() const;
template std::vector<float> SafeTensor::as<float>() const;
template std::vector<int64_t> SafeTensor::as<int64_t>() const;
template std::vector<int32_t> SafeTensor::as<int32_t>() const;
template std::vector<uint16_t> SafeTensor::as<uint16_t>() const;
template std::vector<uint8_t> SafeTensor::as<uint8_t>() const;

void SafetensorsFile::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                          const void* data) {
  SafeTensor t{dtype, std::move(shape), {}};
  CheckedSize n = dtype_size(dtype);
  for (int64_t d : t.shape) {
    if (d < 0) throw std::invalid_argument("tensor " + name + " has a negative dimension");
    n *= uint64_t(d);
  }
  if (!n.fits(std::numeric_limits<size_t>::max())) {
    throw std::invalid_argument("tensor " + name + " is too large");
  }
  t.bytes.resize(n.value());
  if (n.value()) std::memcpy(t.bytes.data(), data, n.value());
  tensors[name] = std::move(t);
}

const SafeTensor& SafetensorsFile::get(const std::string& name,
                                       const std::vector<int64_t>& shape) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw input_error(path + ": no tensor named '" + name + "'");
  if (!shape.empty() && it->second.shape != shape) {
    throw input_error(path + ": tensor '" + name + "' has shape " + shape_str(it->second.shape) +
                      ", expected " + shape_str(shape));
  }
  return it->second;
}

SafetensorsFile read_safetensors(const std::string& path, bool data) {
  InputFile in(path, "safetensors file");
  const uint64_t header_len = read_header_length(in);
  std::string header(header_len, '\0');
  in.read_at(8, header.data(), header_len, "the header");
  if (json_nested_deeper_than(header, kMaxHeaderDepth)) {
    throw input_error(in.name() + ": corrupt safetensors header (JSON nested deeper than " +
                      std::to_string(kMaxHeaderDepth) + " levels)");
  }
  const nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw input_error(in.name() + ": corrupt safetensors header (not JSON)");
  if (!j.is_object()) {
    throw input_error(in.name() + ": corrupt safetensors header (not a JSON object)");
  }
  SafetensorsFile file;
  file.path = path;
  const uint64_t data_start = 8 + header_len, data_size = in.size() - data_start;
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      file.metadata = parse_metadata(*it, in.name());
      continue;
    }
    try {
      entries.push_back(parse_entry(it.key(), *it, data_size));
    } catch (const BadEntry& e) {
      throw input_error(in.name() + ": bad entry " + printable(it.key()) + ": " + e.what());
    }
  }
  check_tiling(entries, data_size, in.name());
  for (Entry& e : entries) {
    if (!data) {
      file.tensors.emplace(std::move(e.name), std::move(e.tensor));
      continue;
    }
    e.tensor.bytes.resize(e.end - e.begin);
    in.read_at(data_start + e.begin, e.tensor.bytes.data(), e.tensor.bytes.size(),
               "tensor " + printable(e.name));
    file.tensors.emplace(std::move(e.name), std::move(e.tensor));
  }
  return file;
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       void (*before_rename)(const std::string&, const std::string&)) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<size_t> sizes;
  for (const TensorRef& t : tensors) {
    size_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= size_t(d);
    header[t.name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    sizes.push_back(n);
  }
  // Invalid UTF-8 in a metadata value (a file name) becomes U+FFFD rather than a type_error.
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  uint8_t len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  AtomicFileWriter out(path);
  out.write(len_bytes, 8);
  out.write(text.data(), text.size());
  for (size_t i = 0; i < tensors.size(); ++i) out.write(tensors[i].data, sizes[i]);
  out.commit(before_rename);
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  std::vector<TensorRef> refs;
  for (const auto& [name, t] : file.tensors)
    refs.push_back({name, t.dtype, t.shape, t.bytes.data()});
  write_safetensors(path, refs, file.metadata);
}

}  // namespace reftrain
