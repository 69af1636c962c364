#include "core/safetensors.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/error.h"

namespace reftrain {

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {{DType::kF64, "F64", 8}, {DType::kF32, "F32", 4},
                                 {DType::kF16, "F16", 2}, {DType::kI64, "I64", 8},
                                 {DType::kI32, "I32", 4}, {DType::kU16, "U16", 2},
                                 {DType::kU8, "U8", 1}};

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

// Parses one header entry; throws std::runtime_error with the reason.
SafeTensor parse_entry(const nlohmann::json& e, uint64_t data_size, uint64_t* begin) {
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
      !e.contains("data_offsets")) {
    throw std::runtime_error("needs dtype, shape and data_offsets");
  }
  SafeTensor t{};
  const std::string dt = e.at("dtype").get<std::string>();
  bool known = false;
  for (const DTypeInfo& d : kDTypes) known = known || (dt == d.name && (t.dtype = d.dtype, true));
  if (!known) throw std::runtime_error("unknown dtype " + dt);
  uint64_t numel = 1;
  for (const auto& d : e.at("shape")) {
    const int64_t v = d.get<int64_t>();
    if (v < 0) throw std::runtime_error("negative dimension");
    if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / uint64_t(v)) {
      throw std::runtime_error("shape overflows");
    }
    numel *= uint64_t(v);
    t.shape.push_back(v);
  }
  const auto& off = e.at("data_offsets");
  if (!off.is_array() || off.size() != 2) throw std::runtime_error("data_offsets needs 2 values");
  const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
  if (b > en || en > data_size) throw std::runtime_error("data_offsets outside the data");
  if (en - b != numel * dtype_size(t.dtype)) {
    throw std::runtime_error("data_offsets size does not match shape " + shape_str(t.shape));
  }
  *begin = b;
  t.bytes.resize(en - b);
  return t;
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
template std::vector<double> SafeTensor::as<double>() const;
template std::vector<float> SafeTensor::as<float>() const;
template std::vector<int64_t> SafeTensor::as<int64_t>() const;
template std::vector<int32_t> SafeTensor::as<int32_t>() const;
template std::vector<uint16_t> SafeTensor::as<uint16_t>() const;
template std::vector<uint8_t> SafeTensor::as<uint8_t>() const;

void SafetensorsFile::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                          const void* data) {
  SafeTensor t{dtype, std::move(shape), {}};
  size_t n = dtype_size(dtype);
  for (int64_t d : t.shape) n *= size_t(d);
  t.bytes.resize(n);
  if (n) std::memcpy(t.bytes.data(), data, n);
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

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw input_error(path + ": cannot open file");
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  uint8_t len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) {
    throw input_error(path + ": not a safetensors file (shorter than its 8-byte header length)");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8) {
    throw input_error(path + ": corrupt safetensors header (length " + std::to_string(header_len) +
                      " runs past the end of the file)");
  }
  std::string header(header_len, '\0');
  in.read(header.data(), std::streamsize(header_len));
  SafetensorsFile file;
  file.path = path;
  const uint64_t data_size = file_size - 8 - header_len;
  const auto fail = [&](const std::string& what) { return input_error(path + ": " + what); };
  nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw fail("corrupt safetensors header (not a JSON object)");
  for (auto it = j.begin(); it != j.end(); ++it) {
    try {
      if (it.key() == "__metadata__") {
        for (auto m = it->begin(); m != it->end(); ++m)
          file.metadata[m.key()] = m->get<std::string>();
        continue;
      }
      uint64_t begin = 0;
      SafeTensor t = parse_entry(*it, data_size, &begin);
      in.seekg(std::streamoff(8 + header_len + begin));
      if (!in.read(reinterpret_cast<char*>(t.bytes.data()), std::streamsize(t.bytes.size()))) {
        throw std::runtime_error("short read");
      }
      file.tensors[it.key()] = std::move(t);
    } catch (const UserError&) {
      throw;
    } catch (const std::exception& e) {
      throw fail("bad entry '" + it.key() + "': " + e.what());
    }
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
  std::string text = header.dump();
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
