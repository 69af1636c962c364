// The checks every reader makes before it trusts a file: overflow-checked size arithmetic,
// printable messages, regular files only (a device or FIFO would hang the reader), reads bounded
// by the file's size, and llm.c headers whose fields are out of range. Each bad file must give an
// input error naming the file and the problem, never a crash, hang or huge allocation.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/base/checked.h"
#include "core/base/error.h"
#include "core/formats/input_file.h"
#include "core/formats/llmc.h"
#include "core/model/gpt2.h"
#include "core/train/data.h"
#include "simd/aligned_buffer.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::llmc_header;
using testing::TempDir;
using testing::uint16_le;
using testing::user_error_of;
using testing::write_file;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// --- CheckedSize -------------------------------------------------------------------------------

TEST(CheckedSize, ExactResultsUpToTheLimit) {
  const CheckedSize a = CheckedSize(0xffffffffull) * 0x100000001ull;  // (2^32-1)(2^32+1)
  EXPECT_FALSE(a.overflowed());
  EXPECT_EQ(a.value(), kMax);
  EXPECT_TRUE(a.fits(kMax));
  EXPECT_FALSE(a.fits(kMax - 1));
  const CheckedSize b = CheckedSize(kMax - 1) + 1;
  EXPECT_FALSE(b.overflowed());
  EXPECT_EQ(b.value(), kMax);
  EXPECT_EQ((CheckedSize(12) * 768 * 768 + CheckedSize(13) * 768).value(),
            12u * 768 * 768 + 13 * 768);
}

TEST(CheckedSize, WrapAroundIsReportedAndSticks) {
  EXPECT_TRUE((CheckedSize(1ull << 32) * (1ull << 32)).overflowed());  // would wrap to 0
  EXPECT_TRUE((CheckedSize(1ull << 63) * 2).overflowed());
  EXPECT_TRUE((CheckedSize(kMax) + 1).overflowed());  // would wrap to 0
  // Once overflowed, later operations cannot bring the value back into range.
  CheckedSize c = CheckedSize(kMax) * 3;
  c *= 0;
  c += 1;
  EXPECT_TRUE(c.overflowed());
  EXPECT_FALSE(c.fits(kMax));
}

// --- printable ---------------------------------------------------------------------------------

TEST(Printable, EscapesControlBytesAndCutsLongText) {
  EXPECT_EQ(printable("wte.weight"), "'wte.weight'");
  EXPECT_EQ(printable(std::string("a\nb\0c\x7f\xff", 7)), "'a\\x0ab\\x00c\\x7f\\xff'");
  const std::string cut = printable(std::string(1000, 'x'), 8);
  EXPECT_EQ(cut, "'xxxxxxxx'...");
  EXPECT_EQ(printable(std::string(8, 'x'), 8), "'xxxxxxxx'");
}

// --- InputFile ---------------------------------------------------------------------------------

TEST(InputFile, OnlyRegularFilesOpen) {
  TempDir dir;
  EXPECT_NE(user_error_of([&] {
              InputFile(dir.file("none"), "data file");
            }).find("data file " + dir.file("none") + " does not exist"),
            std::string::npos);
  EXPECT_NE(user_error_of([&] { InputFile(dir.file(""), "checkpoint"); }).find("is a directory"),
            std::string::npos);
  // A FIFO would block the reader forever and a device like /dev/zero never ends: both are
  // refused before they are opened.
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), std::string("/dev/null")}) {
    const std::string msg = user_error_of([&] { InputFile(path, "token file"); });
    EXPECT_NE(msg.find("token file " + path + " is not a regular file"), std::string::npos) << msg;
  }
}

TEST(InputFile, ReadsAreBoundedByTheFileSize) {
  TempDir dir;
  write_file(dir.file("f"), "0123456789");
  InputFile in(dir.file("f"), "data file");
  EXPECT_EQ(in.size(), 10u);
  char buf[10];
  in.read_at(6, buf, 4, "the tail");
  EXPECT_EQ(std::string(buf, 4), "6789");
  in.read_at(10, buf, 0, "nothing");  // an empty read at the end is fine
  const std::string msg = user_error_of([&] { in.read_at(7, buf, 4, "the tail"); });
  EXPECT_NE(msg.find("data file " + dir.file("f") + " ends early while reading the tail"),
            std::string::npos)
      << msg;
  // offset + n wraps around 2^64 to 3: still past the end, not a read at offset 3.
  EXPECT_NE(user_error_of([&] { in.read_at(kMax - 5, buf, 9, "x"); }).find("ends early"),
            std::string::npos);
  EXPECT_EQ(in.read_all(), "0123456789");  // and the file is still readable afterwards
}

TEST(TextData, DeviceIsRefusedInsteadOfReadForever) {
  EXPECT_NE(user_error_of([] { load_text_file("/dev/zero"); }).find("is not a regular file"),
            std::string::npos);
}

// --- llm.c token files -------------------------------------------------------------------------

class TokenHeader : public ::testing::Test {
 protected:
  std::string error_of(const std::vector<int32_t>& header, size_t tokens) {
    write_file(path_, llmc_header(header, uint16_le(std::vector<uint16_t>(tokens, 7))));
    return user_error_of([&] { load_llmc_tokens(path_); });
  }
  TempDir dir_;
  const std::string path_ = dir_.file("tokens.bin");
};

TEST_F(TokenHeader, CountMustMatchTheFile) {
  EXPECT_EQ(error_of({20240520, 1, 100}, 100), "");  // the control
  for (int32_t count :
       {-1, std::numeric_limits<int32_t>::min(), 99, 101, std::numeric_limits<int32_t>::max()}) {
    const std::string msg = error_of({20240520, 1, count}, 100);
    EXPECT_NE(msg.find("token file " + path_ + " header says " + std::to_string(count)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("the file holds 100"), std::string::npos) << msg;
  }
  EXPECT_NE(error_of({20240520, 1, 0}, 0).find("holds no tokens"), std::string::npos);
}

TEST_F(TokenHeader, ShortOrOddFilesAreRejected) {
  write_file(path_, llmc_header({20240520, 1, 3}, uint16_le({1, 2, 3})) + "x");  // odd size
  EXPECT_NE(user_error_of([&] { load_llmc_tokens(path_); }).find("header says 3"),
            std::string::npos);
  write_file(path_, llmc_header({20240520, 1, 3}).substr(0, 1023));
  EXPECT_NE(user_error_of([&] { load_llmc_tokens(path_); }).find("1024-byte header"),
            std::string::npos);
}

// --- llm.c checkpoints -------------------------------------------------------------------------

// maxT 4, V 8, L 1, NH 2, C 4, Vp 8: Vp·C + maxT·C + L·(12C² + 13C) + 2C = 300 floats.
const std::vector<int32_t> kSmallHeader = {20240326, 3, 4, 8, 1, 2, 4, 8};
constexpr size_t kSmallFloats = 300;

std::string floats_of(size_t n, float v) {
  std::string s(n * sizeof(float), '\0');
  for (size_t i = 0; i < n; ++i) std::memcpy(&s[i * sizeof(float)], &v, sizeof(float));
  return s;
}

class CheckpointHeader : public ::testing::Test {
 protected:
  std::string error_of(const std::vector<int32_t>& header, size_t floats) {
    write_file(path_, llmc_header(header, floats_of(floats, 0.25f)));
    return user_error_of([&] { read_llmc_config(path_); });
  }
  TempDir dir_;
  const std::string path_ = dir_.file("model.bin");
};

TEST_F(CheckpointHeader, HandBuiltCheckpointLoads) {
  ASSERT_EQ(error_of(kSmallHeader, kSmallFloats), "");
  const ModelConfig cfg = read_llmc_config(path_);
  EXPECT_EQ(cfg.layers, 1);
  EXPECT_EQ(cfg.padded_vocab, 8);
  const ParamLayout layout = gpt2_param_layout(cfg);
  EXPECT_EQ(layout.num_params(), kSmallFloats);
  AlignedBuffer<float> w(layout.total());
  load_llmc_weights(path_, cfg, layout, w.data());
  for (const ParamTensor& t : layout.tensors()) {
    for (size_t i = 0; i < t.numel; ++i) ASSERT_EQ(w[t.offset + i], 0.25f) << t.name;
  }
}

TEST_F(CheckpointHeader, OutOfRangeFieldsAreRejected) {
  const int32_t extremes[] = {0, -1, std::numeric_limits<int32_t>::min(),
                              std::numeric_limits<int32_t>::max(), 1 << 21};
  for (int field = 2; field <= 7; ++field) {
    for (int32_t v : extremes) {
      std::vector<int32_t> h = kSmallHeader;
      h[field] = v;
      const std::string msg = error_of(h, kSmallFloats);
      SCOPED_TRACE("field " + std::to_string(field) + " = " + std::to_string(v));
      EXPECT_NE(msg.find("checkpoint " + path_), std::string::npos) << msg;
      EXPECT_NE(msg.find("impossible model shape"), std::string::npos) << msg;
    }
  }
}

TEST_F(CheckpointHeader, LargestPlausibleShapeNeedsItsBytes) {
  // Every field at its bound: the implied size (about 2^48 bytes) is computed exactly and
  // compared with the file's, nothing is allocated.
  const std::vector<int32_t> h = {20240326, 3, 1 << 20, 1 << 20, 1024, 1, 1 << 16, 1 << 20};
  const std::string msg = error_of(h, kSmallFloats);
  const uint64_t C = 1 << 16,
                 implied = 1024 + 4 * ((1ull << 20) * C * 2 + 1024 * (12 * C * C + 13 * C) + 2 * C);
  EXPECT_NE(msg.find("its header implies " + std::to_string(implied)), std::string::npos) << msg;
}

TEST_F(CheckpointHeader, WeightsMustMatchTheConfigTheyAreLoadedFor) {
  ASSERT_EQ(error_of(kSmallHeader, kSmallFloats), "");
  ModelConfig cfg = read_llmc_config(path_);
  const ParamLayout layout = gpt2_param_layout(cfg);
  AlignedBuffer<float> w(layout.total());
  // The file was replaced between reading its header and loading its weights.
  std::vector<int32_t> h = kSmallHeader;
  h[6] = 8;  // C 8
  write_file(path_, llmc_header(h, floats_of(8 * 8 + 4 * 8 + 12 * 64 + 13 * 8 + 2 * 8, 0.5f)));
  const std::string msg = user_error_of([&] { load_llmc_weights(path_, cfg, layout, w.data()); });
  EXPECT_NE(msg.find("no longer matches"), std::string::npos) << msg;
}

}  // namespace
}  // namespace reftrain
