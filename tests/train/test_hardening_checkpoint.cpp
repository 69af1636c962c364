// Checkpoint integrity (docs/checkpoints.md "Integrity"): per-tensor CRC-32C checksums, checked
// on load, and optimizer state that must not be NaN (or, for v and the 8-bit scales, negative).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/base/crc32c.h"
#include "core/formats/safetensors.h"
#include "core/train/checkpoint.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

TEST(HardeningCrc32c, KnownValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
}

class HardeningCheckpoint : public LearnableTextTest {
 protected:
  // A 2-step run's final checkpoint (optimizer `opt`), its path.
  std::string checkpoint(const std::string& opt = "adamw") {
    const std::string out = dir_.file("run-" + opt);
    const CommandResult r = run_reftrain("train --preset tiny --steps 2 --optimizer " + opt +
                                         " --data " + text_ + " --out " + out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out + "/" + checkpoint_file_name(2);
  }
  // XORs `mask` into byte `byte` of tensor `name`'s data, in the file itself.
  static void flip(const std::string& path, const std::string& name, size_t byte, uint8_t mask) {
    std::string bytes = read_file(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const json header = json::parse(bytes.substr(8, n));
    const size_t at = 8 + n + header.at(name).at("data_offsets")[0].get<size_t>() + byte;
    bytes[at] = char(uint8_t(bytes[at]) ^ mask);
    write_file(path, bytes);
  }
  void expect_rejected(const std::string& path, const std::string& what) {
    expect_user_error("sample --ckpt " + path + " --tokens 2", 1, what);
    expect_user_error("train --resume " + path + " --out " + dir_.file("o"), 1, what);
  }
  void expect_loads(const std::string& path) {
    const CommandResult r = run_reftrain("sample --ckpt " + path + " --tokens 2");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
};

// One flipped exponent bit doubles a weight: finite and plausible, so only the checksum sees it.
TEST_F(HardeningCheckpoint, FlippedExponentBitInAWeightIsCaught) {
  const std::string path = checkpoint();
  expect_loads(path);
  flip(path, "transformer.h.0.attn.c_attn.weight", 4 * 5 + 2, 0x80);  // float 5's exponent LSB
  expect_rejected(path, "tensor transformer.h.0.attn.c_attn.weight does not match its checksum");
}

TEST_F(HardeningCheckpoint, DamagedOptimizerStateIsCaught) {
  const std::string path = checkpoint("adamw8bit");
  flip(path, "optimizer.m_codes", 17, 0x01);
  expect_rejected(path, "tensor optimizer.m_codes does not match its checksum");
}

TEST_F(HardeningCheckpoint, CheckpointWithoutChecksumsStillLoads) {
  const std::string path = checkpoint(), old = dir_.file("old.safetensors");
  SafetensorsFile f = read_safetensors(path);
  ASSERT_EQ(f.metadata.count("checksums"), 1u);
  f.metadata.erase("checksums");
  write_safetensors(old, f);
  expect_loads(old);
}

TEST_F(HardeningCheckpoint, ChecksumsMustCoverEveryTensor) {
  const std::string path = checkpoint(), bad = dir_.file("bad.safetensors");
  SafetensorsFile f = read_safetensors(path);
  json sums = json::parse(f.metadata.at("checksums"));
  sums["tensors"].erase("transformer.wpe.weight");
  f.metadata["checksums"] = sums.dump();
  write_safetensors(bad, f);
  expect_rejected(bad, "checksums metadata lacks tensor transformer.wpe.weight");
  sums["algorithm"] = "md5";
  f.metadata["checksums"] = sums.dump();
  write_safetensors(bad, f);
  expect_rejected(bad, "checksums metadata must be");
}

// NaN or negative state used to load, and the resumed run's NaN stop then advised a lower --lr.
TEST_F(HardeningCheckpoint, NanOrNegativeOptimizerStateIsRejectedNamingTheTensor) {
  const std::string bad = dir_.file("bad.safetensors");
  const SafetensorsFile good = read_safetensors(checkpoint());
  const auto with = [&](SafetensorsFile f, const std::string& name, size_t i, float value) {
    std::vector<float> x = f.get(name).as<float>();
    x[i] = value;
    f.add(name, DType::kF32, f.get(name).shape, x.data());
    f.metadata.erase("checksums");  // as an older file: only the state check can see it
    write_safetensors(bad, f);
  };
  with(good, "optimizer.v.transformer.wpe.weight", 3, std::numeric_limits<float>::quiet_NaN());
  expect_rejected(bad, "optimizer state optimizer.v.transformer.wpe.weight element 3 is NaN");
  with(good, "optimizer.m.transformer.ln_f.bias", 0, std::numeric_limits<float>::quiet_NaN());
  expect_rejected(bad, "optimizer state optimizer.m.transformer.ln_f.bias element 0 is NaN");
  with(good, "optimizer.v.transformer.ln_f.weight", 2, -1e-3f);
  expect_rejected(bad, "optimizer state optimizer.v.transformer.ln_f.weight element 2 is negative");
  // m is signed, and v may overflow to +Inf in a legitimate run: both load.
  with(good, "optimizer.m.transformer.ln_f.bias", 1, -0.5f);
  expect_loads(bad);
  with(good, "optimizer.v.transformer.ln_f.bias", 1, std::numeric_limits<float>::infinity());
  expect_loads(bad);
}

TEST_F(HardeningCheckpoint, NegativeEightBitScaleIsRejected) {
  const std::string bad = dir_.file("bad.safetensors");
  SafetensorsFile f = read_safetensors(checkpoint("adamw8bit"));
  std::vector<float> s = f.get("optimizer.v_scales").as<float>();
  s[0] = -s[0] - 1;
  f.add("optimizer.v_scales", DType::kF32, f.get("optimizer.v_scales").shape, s.data());
  write_safetensors(bad, f);
  expect_rejected(bad, "optimizer state optimizer.v_scales element 0 is negative");
}

// bf16-kahan's compensation (BF16) may have either sign but never be NaN.
TEST_F(HardeningCheckpoint, NanKahanCompensationIsRejected) {
  const std::string out = dir_.file("kahan"), bad = dir_.file("bad.safetensors");
  const CommandResult r = run_reftrain(
      "train --preset tiny --steps 2 --precision bf16-kahan --data " + text_ + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SafetensorsFile f = read_safetensors(out + "/" + checkpoint_file_name(2));
  f.metadata.erase("checksums");  // as an older file: only the state check can see it
  const std::string name = "optimizer.kahan.transformer.wpe.weight";
  SafeTensor comp = f.get(name);
  const auto with = [&](size_t i, uint16_t bits) {
    SafeTensor t = comp;
    std::memcpy(t.bytes.data() + 2 * i, &bits, 2);
    f.add(name, DType::kBF16, t.shape, t.bytes.data());
    write_safetensors(bad, f);
  };
  with(4, 0xBC00);  // -2^-7: a compensation of either sign loads
  expect_loads(bad);
  with(4, 0x7FC1);
  expect_rejected(bad, "optimizer state " + name + " element 4 is NaN");
}

}  // namespace
}  // namespace reftrain::testing
