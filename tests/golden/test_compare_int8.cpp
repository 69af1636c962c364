// `reftrain compare` on the 8-bit AdamW state: the m codes are int8 in two's complement stored in
// a U8 tensor, so compare reads a `m_packed` tensor as int8 and a one-code difference across zero
// (0 against −1, bytes 0x00 and 0xFF) is 1, within the fixture's ±1 tolerance, not 255. The v
// codes stay unsigned. The state comes from the optimizer's two ranges with a weight-decay range
// that does not end on a 256-element boundary: the no-decay range starts its own blocks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/golden/compare.h"
#include "optim/adamw8bit.h"

namespace reftrain {
namespace {

SafeTensor u8_tensor(const std::string& name, const std::vector<uint8_t>& bytes) {
  SafetensorsFile f;
  f.add(name, DType::kU8, {int64_t(bytes.size())}, bytes.data());
  return f.tensors.at(name);
}

// The fixture's tolerance for the codes: within one code.
Tolerance one_code() {
  Tolerance t = Tolerance::exact();
  t.atol = 1;
  return t;
}

TEST(CompareInt8, MomentCodesDifferByOneAcrossZero) {
  const std::vector<uint8_t> ref = {0x00, 0x01, 0x7F, 0x81, 0x80};  // 0, 1, 127, −127, −128
  const std::vector<uint8_t> got = {0xFF, 0x00, 0x7E, 0x80, 0x81};  // −1, 0, 126, −128, −127
  for (const char* name : {"awkward.m_packed", "small.m_packed_in", "m_packed"}) {
    const TensorDiff d =
        compare_tensor(name, u8_tensor(name, ref), u8_tensor(name, got), one_code());
    EXPECT_TRUE(d.pass) << name;
    EXPECT_EQ(d.max_abs, 1.0) << name;
  }
  // Two codes apart fails; the unsigned v codes 0 and 255 are 255 apart.
  const TensorDiff two =
      compare_tensor("small.m_packed", u8_tensor("m", {0x01}), u8_tensor("m", {0xFF}), one_code());
  EXPECT_FALSE(two.pass);
  EXPECT_EQ(two.max_abs, 2.0);
  const TensorDiff v =
      compare_tensor("small.v_packed", u8_tensor("v", {0x00}), u8_tensor("v", {0xFF}), one_code());
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.max_abs, 255.0);
}

// One step of the 8-bit optimizer over a mega-buffer of `total` elements as the optimizer runs
// it: [0, wd_end) with weight decay, [wd_end, total) without, each range its own blocks (scales
// of the second range after the first's). Returns the m codes as bytes.
std::vector<uint8_t> m_codes_after_step(const std::vector<float>& g0, size_t wd_end) {
  const size_t total = g0.size();
  std::vector<float> w(total, 0.5f), g = g0;
  std::vector<uint32_t> mc(quant_words(total), 0), vc(quant_words(total), 0);
  std::vector<float> ms(quant_blocks(wd_end) + quant_blocks(total - wd_end), 0.0f), vs = ms;
  const GradStats stats = {1.0f, 1.0f};
  AdamWHyper hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  adamw_8bit_update(w.data(), g.data(), mc.data(), vc.data(), ms.data(), vs.data(), wd_end, stats,
                    hp, 1);
  hp.wd = 0.0f;
  const size_t b2 = quant_blocks(wd_end);
  adamw_8bit_update(w.data() + wd_end, g.data() + wd_end, mc.data() + wd_end / 4,
                    vc.data() + wd_end / 4, ms.data() + b2, vs.data() + b2, total - wd_end, stats,
                    hp, 1);
  std::vector<uint8_t> bytes(4 * mc.size());
  std::memcpy(bytes.data(), mc.data(), bytes.size());
  return bytes;
}

TEST(CompareInt8, WeightDecayRangeOffABlockBoundary) {
  // 700 elements, decay range [0, 304): 304 is a multiple of the layout's 16-float alignment but
  // not of 256, so the no-decay range's blocks are [304, 560) and [560, 700).
  const size_t total = 700, wd_end = 304;
  std::vector<float> g(total);
  // Growing with i, so that every block has its own absmax and scale.
  for (size_t i = 0; i < total; ++i) g[i] = 1e-4f * float(int(i % 37) - 18) * float(i + 1);
  g[650] = 0.0f;  // in the partial last block: its m code is 0
  const std::vector<uint8_t> ref = m_codes_after_step(g, wd_end);
  ASSERT_EQ(ref[650], 0x00);

  std::vector<uint8_t> got = ref;
  got[650] = 0xFF;  // −1: one code off, as a GPU rounding the other way at a boundary would be
  EXPECT_TRUE(
      compare_tensor("awkward.m_packed", u8_tensor("a", ref), u8_tensor("b", got), one_code())
          .pass);
  got[650] = 0xFE;  // −2
  EXPECT_FALSE(
      compare_tensor("awkward.m_packed", u8_tensor("a", ref), u8_tensor("b", got), one_code())
          .pass);

  // Blocks counted from the start of the buffer instead ([256, 512) straddling both ranges)
  // give other scales and codes, and compare must see it. m does not depend on the decay, so
  // splitting at 512 gives exactly those blocks: [0, 256), [256, 512), [512, 700).
  std::vector<uint8_t> from_start = m_codes_after_step(g, 512);
  EXPECT_FALSE(compare_tensor("awkward.m_packed", u8_tensor("a", ref), u8_tensor("b", from_start),
                              one_code())
                   .pass);
}

}  // namespace
}  // namespace reftrain
