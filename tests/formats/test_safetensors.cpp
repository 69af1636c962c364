// safetensors: a round trip of every dtype, the header layout, and rejection (as a UserError,
// never a crash or an out-of-bounds read) of truncated and inconsistent files.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/formats/safetensors.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

using testing::user_error_of;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char((v >> (8 * i)) & 0xff);
  return s;
}

// A file from a hand-written header and data section.
std::string raw_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

SafetensorsFile sample_file() {
  SafetensorsFile f;
  const std::vector<float> f32 = {1.5f, -0.0f, 3.25e-39f, -7.0f, 1e30f, 0.1f};
  const std::vector<double> f64 = {3.141592653589793, -2.5e-300};
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff};  // raw half bits: 1, -2, 65504
  const std::vector<int64_t> i64 = {-1, int64_t(1) << 40};
  const std::vector<int32_t> i32 = {-5, 7, 2147483647, -2147483647 - 1};
  const std::vector<uint16_t> u16 = {0, 65535, 50256};
  const std::vector<uint8_t> u8 = {0, 1, 255};
  f.add("w.f32", DType::kF32, {2, 3}, f32.data());
  f.add("w.f64", DType::kF64, {2}, f64.data());
  f.add("w.f16", DType::kF16, {3}, f16.data());
  f.add("w.i64", DType::kI64, {2, 1}, i64.data());
  f.add("w.i32", DType::kI32, {4}, i32.data());
  f.add("w.u16", DType::kU16, {1, 3}, u16.data());
  f.add("w.u8", DType::kU8, {3}, u8.data());
  const float scalar = 42.0f;
  f.add("scalar", DType::kF32, {}, &scalar);
  f.add("empty", DType::kF32, {0, 4}, nullptr);
  f.metadata["config"] = R"({"layers":2})";
  f.metadata["note"] = "ünïcode ok";
  return f;
}

TEST(Safetensors, RoundTripsEveryDtype) {
  TempDir dir;
  const SafetensorsFile f = sample_file();
  write_safetensors(dir.file("a.safetensors"), f);
  const SafetensorsFile g = read_safetensors(dir.file("a.safetensors"));
  EXPECT_EQ(g.path, dir.file("a.safetensors"));
  EXPECT_EQ(g.metadata, f.metadata);
  ASSERT_EQ(g.tensors.size(), f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    SCOPED_TRACE(name);
    ASSERT_EQ(g.tensors.count(name), 1u);
    const SafeTensor& u = g.tensors.at(name);
    EXPECT_EQ(u.dtype, t.dtype);
    EXPECT_EQ(u.shape, t.shape);
    EXPECT_EQ(u.bytes, t.bytes);  // bit for bit: -0.0, subnormals, extremes
  }
  EXPECT_EQ(g.tensors.at("scalar").numel(), 1u);
  EXPECT_EQ(g.tensors.at("empty").numel(), 0u);
  const std::vector<int32_t> i32 = g.get("w.i32", {4}).as<int32_t>();
  EXPECT_EQ(i32, (std::vector<int32_t>{-5, 7, 2147483647, -2147483647 - 1}));
  EXPECT_EQ(g.get("w.f32").as<float>()[4], 1e30f);
  EXPECT_EQ(g.get("w.u16").as<uint16_t>()[2], 50256);
  EXPECT_THROW(g.get("w.f32").as<int32_t>(), std::invalid_argument);
}

// JSON is UTF-8: a metadata value that is not (a Latin-1 file name) is written with U+FFFD in
// place of the bad byte, where dump() used to throw and end the program.
TEST(Safetensors, NonUtf8MetadataIsWrittenAsReplacementCharacter) {
  TempDir dir;
  SafetensorsFile f;
  f.metadata["data"] = "caf\xe9.txt";
  write_safetensors(dir.file("a.safetensors"), f);
  EXPECT_EQ(read_safetensors(dir.file("a.safetensors")).metadata.at("data"), "caf\xef\xbf\xbd.txt");
}

TEST(Safetensors, HeaderIsStandardJsonAndDataIsAligned) {
  TempDir dir;
  write_safetensors(dir.file("a.safetensors"), sample_file());
  const std::string bytes = read_file(dir.file("a.safetensors"));
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "the data section starts 8-byte aligned";
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(h["w.f32"]["dtype"], "F32");
  EXPECT_EQ(h["w.f32"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(h["__metadata__"]["config"], R"({"layers":2})");
  // Offsets tile the data section with neither gaps nor overlap.
  uint64_t total = 0;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    total += it.value()["data_offsets"][1].get<uint64_t>() -
             it.value()["data_offsets"][0].get<uint64_t>();
  }
  EXPECT_EQ(8 + n + total, bytes.size());
}

TEST(Safetensors, GetChecksNameAndShape) {
  TempDir dir;
  write_safetensors(dir.file("a.safetensors"), sample_file());
  const SafetensorsFile g = read_safetensors(dir.file("a.safetensors"));
  EXPECT_NO_THROW(g.get("w.f32", {2, 3}));
  EXPECT_NE(user_error_of([&] { g.get("w.f32", {3, 2}); }).find("shape [2,3]"), std::string::npos);
  EXPECT_NE(user_error_of([&] { g.get("missing"); }).find("missing"), std::string::npos);
}

TEST(Safetensors, TruncatedFileIsRejected) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  write_safetensors(path, sample_file());
  const std::string good = read_file(path);
  // Cut anywhere inside the data section: some tensor's offsets now lie outside it.
  for (size_t cut : {size_t(1), size_t(4), size_t(20)}) {
    write_file(path, good.substr(0, good.size() - cut));
    const std::string msg = user_error_of([&] { read_safetensors(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << "cut " << cut << ": " << msg;
    EXPECT_NE(msg.find("outside"), std::string::npos) << "cut " << cut << ": " << msg;
  }
  // Cut inside the header, and inside the 8-byte length.
  write_file(path, good.substr(0, 30));
  EXPECT_NE(user_error_of([&] { read_safetensors(path); }), "");
  write_file(path, good.substr(0, 5));
  EXPECT_NE(user_error_of([&] { read_safetensors(path); }).find("8-byte"), std::string::npos);
  write_file(path, "");
  EXPECT_NE(user_error_of([&] { read_safetensors(path); }), "");
}

TEST(Safetensors, HeaderLengthPastEndIsRejected) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  const std::string header = R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  write_file(path, raw_file(header, "ab"));
  EXPECT_EQ(read_safetensors(path).get("x").bytes, (std::vector<uint8_t>{'a', 'b'}));  // control
  for (uint64_t len : {uint64_t(header.size()) + 3, uint64_t(1) << 40, ~uint64_t(0)}) {
    write_file(path, le64(len) + header + "ab");
    const std::string msg = user_error_of([&] { read_safetensors(path); });
    EXPECT_NE(msg.find("past the end"), std::string::npos) << len << ": " << msg;
  }
}

TEST(Safetensors, OffsetsOutsideDataAreRejected) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  const std::string data(16, 'x');
  const char* bad[] = {
      R"({"x":{"dtype":"F32","shape":[100],"data_offsets":[0,400]}})",  // end past data
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",    // straddles the end
      R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[17,17]}})",    // begins past the end
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})",      // begin > end
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4294967300]}})",
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,0]}})",
  };
  for (const char* header : bad) {
    write_file(path, raw_file(header, data));
    const std::string msg = user_error_of([&] { read_safetensors(path); });
    EXPECT_NE(msg.find("outside"), std::string::npos) << header << ": " << msg;
    EXPECT_NE(msg.find("'x'"), std::string::npos) << header << ": " << msg;
  }
  // The control: all sixteen bytes are one valid tensor.
  write_file(path, raw_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data));
  EXPECT_EQ(read_safetensors(path).get("x").bytes.size(), 16u);
}

// The tensors must tile the data section: no gap, no overlap, nothing after the last one (as
// the reference implementation requires). Otherwise a small file could list the same bytes
// under many names and make the reader allocate many times its size.
TEST(Safetensors, TensorsMustTileTheData) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  const std::string data(16, 'x');
  const struct {
    const char* header;
    const char* problem;
  } bad[] = {
      {R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})", "4 bytes of the data"},
      {R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", "last 4 bytes"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
       "before tensor 'b'"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       "tensor 'b' [8,16) overlaps tensor 'a' [0,16)"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
       R"("b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       "overlaps"},
  };
  for (const auto& c : bad) {
    write_file(path, raw_file(c.header, data));
    const std::string msg = user_error_of([&] { read_safetensors(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << c.header << ": " << msg;
    EXPECT_NE(msg.find(c.problem), std::string::npos) << c.header << ": " << msg;
  }
  // 10000 names for the same 4 KB: refused before any tensor is read.
  std::string header = "{";
  for (int i = 0; i < 10000; ++i) {
    header += (i ? ",\"t" : "\"t") + std::to_string(i) +
              R"(":{"dtype":"U8","shape":[4096],"data_offsets":[0,4096]})";
  }
  write_file(path, raw_file(header + "}", std::string(4096, 'x')));
  EXPECT_NE(user_error_of([&] { read_safetensors(path); }).find("overlaps"), std::string::npos);
  // Empty tensors may sit anywhere in the order, even at the very end; two halves tile.
  write_file(path, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                            R"("e":{"dtype":"F32","shape":[0],"data_offsets":[16,16]},)"
                            R"("z":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                            data));
  EXPECT_EQ(read_safetensors(path).tensors.size(), 4u);
}

TEST(Safetensors, InconsistentEntriesAreRejected) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  const std::string data(8, '\0');
  const struct {
    const char* header;
    const char* problem;
  } bad[] = {
      {R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "does not match shape [3]"},
      {R"({"x":{"dtype":"BF17","shape":[2],"data_offsets":[0,8]}})", "unknown dtype 'BF17'"},
      {R"({"x":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", "unknown dtype '4'"},
      {R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", "not a non-negative integer"},
      // Numbers that are not integers: once truncated (2.5 -> 2) or converted with undefined
      // behaviour (1e300 does not fit any integer type).
      {R"({"x":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", "not a non-negative"},
      {R"({"x":{"dtype":"F32","shape":[1e300],"data_offsets":[0,8]}})", "not a non-negative"},
      {R"({"x":{"dtype":"F32","shape":[true],"data_offsets":[0,8]}})", "not a non-negative"},
      {R"({"x":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", "not a non-negative"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0.0,8.0]}})", "not a non-negative"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[-0,8]}})", "not a non-negative"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,1e30]}})", "not a non-negative"},
      {R"({"x":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", "shape is not an array"},
      {R"({"x":{"dtype":"F32","shape":{"a":2},"data_offsets":[0,8]}})", "shape is not an array"},
      // Products that wrap around 2^64 (to 0 and to 8) must not pass for the 8 bytes present.
      {R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       "does not match shape"},
      {R"({"x":{"dtype":"U8","shape":[4,4611686018427387906],"data_offsets":[0,8]}})",
       "does not match shape"},
      {R"({"x":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,8]}})",
       "dimension overflows"},
      {R"({"x":{"dtype":"F32","shape":[1]}})", "needs dtype, shape and data_offsets"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", "needs 2 values"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":{"a":0,"b":8}}})", "needs 2 values"},
      {R"({"x":7})", "needs dtype"},
      {R"({"__metadata__":{"a":1}})", "__metadata__ must map names to strings"},
      {R"({"__metadata__":"a"})", "__metadata__ must map names to strings"},
      {R"({"x":{"dtype":"F32",)", "not JSON"},
      {R"([1,2,3])", "not a JSON object"},
      {"{\"x\":{\"dtype\":\"F32\xff\"}}", "not JSON"},  // not UTF-8
  };
  for (const auto& c : bad) {
    write_file(path, raw_file(c.header, data));
    const std::string msg = user_error_of([&] { read_safetensors(path); });
    EXPECT_NE(msg.find(c.problem), std::string::npos) << c.header << ": " << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << c.header << ": " << msg;
  }
}

TEST(Safetensors, NamesFromTheFileAreQuotedOnOneLine) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  write_file(path, raw_file(R"({"evil\nname":{"dtype":"F\r32","shape":[1],"data_offsets":[0,4]}})",
                            std::string(4, '\0')));
  std::string msg = user_error_of([&] { read_safetensors(path); });
  EXPECT_NE(msg.find(R"(bad entry 'evil\x0aname': unknown dtype 'F\x0d32')"), std::string::npos)
      << msg;
  const std::string long_name(100000, 'n');
  write_file(path,
             raw_file("{\"" + long_name + R"(":{"dtype":"X","shape":[1],"data_offsets":[0,4]}})",
                      std::string(4, '\0')));
  msg = user_error_of([&] { read_safetensors(path); });
  EXPECT_NE(msg.find("bad entry 'nnnn"), std::string::npos) << msg.substr(0, 200);
  EXPECT_NE(msg.find("n'...: unknown dtype 'X'"), std::string::npos) << msg.substr(0, 200);
  EXPECT_LT(msg.size(), 300u + path.size());
}

TEST(Safetensors, HeaderOverTheLimitIsRejected) {
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  // A sparse file just long enough for a 16 MiB + 1 header: the length is refused before the
  // header is read or allocated.
  const uint64_t len = (16 << 20) + 1;
  write_file(path, le64(len));
  std::filesystem::resize_file(path, 8 + len);
  const std::string msg = user_error_of([&] { read_safetensors(path); });
  EXPECT_NE(msg.find("over reftrain's limit of 16 MiB"), std::string::npos) << msg;
}

// Parsing builds a container per level of nesting (about 40 bytes of memory per byte of
// "[[[["), so a header nested deeper than the format's three levels is refused before parsing.
TEST(Safetensors, DeeplyNestedHeaderIsRejected) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  const std::string ok = R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  write_file(path, raw_file(ok, "a"));
  EXPECT_EQ(read_safetensors(path).tensors.size(), 1u);  // three levels: the control
  const std::string too_deep[] = {
      R"({"x":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})",
      std::string(1 << 20, '[') + std::string(1 << 20, ']'),
  };
  for (const std::string& header : too_deep) {
    write_file(path, raw_file(header, "a"));
    const std::string msg = user_error_of([&] { read_safetensors(path); });
    EXPECT_NE(msg.find("nested deeper than 3 levels"), std::string::npos) << msg;
  }
  // Brackets inside strings, escaped quotes included, do not count.
  write_file(path, raw_file(R"({"x[[[\"{{{":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                            R"("__metadata__":{"k":"]]]\\[[[[[["}})",
                            "a"));
  EXPECT_EQ(read_safetensors(path).metadata.at("k"), "]]]\\[[[[[[");
}

TEST(Safetensors, DirectoryOrDeviceIsRejected) {
  TempDir dir;
  EXPECT_NE(user_error_of([&] { read_safetensors(dir.file("")); }).find("is a directory"),
            std::string::npos);
  EXPECT_NE(user_error_of([&] { read_safetensors("/dev/zero"); }).find("not a regular file"),
            std::string::npos);
}

TEST(Safetensors, MissingFileIsRejected) {
  TempDir dir;
  const std::string msg = user_error_of([&] { read_safetensors(dir.file("none.safetensors")); });
  EXPECT_NE(msg.find("none.safetensors"), std::string::npos) << msg;
}

}  // namespace
}  // namespace reftrain
