// Training data and llm.c files: the byte tokenizer, the 90/10 split, llm.c token files written
// by an independent (numpy) writer, the batch samplers, the fortunes corpus, and llm.c GPT-2
// checkpoints converted by an independent (numpy) writer, read back bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/rng.h"
#include "core/formats/llmc.h"
#include "core/formats/safetensors.h"
#include "core/model/gpt2.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "simd/aligned_buffer.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::read_file;
using testing::run_command;
using testing::TempDir;
using testing::write_file;

std::string python() {
  return REFTRAIN_TORCH_PYTHON;
}
std::string script(const std::string& name) {
  return std::string(REFTRAIN_SOURCE_DIR) + "/tests/torch/" + name;
}

std::vector<uint16_t> joined(const Dataset& d) {
  std::vector<uint16_t> all = d.train;
  all.insert(all.end(), d.val.begin(), d.val.end());
  return all;
}

using testing::user_error_of;

// --- byte tokenizer and split -----------------------------------------------------------------

TEST(ByteTokenizer, RoundTripsUtf8) {
  const std::string text = "héllo wörld — 日本語, ελληνικά 🎉\n\t\"quoted\" \x7f end";
  const std::vector<uint16_t> tokens = encode_bytes(text);
  ASSERT_EQ(tokens.size(), text.size());  // one token per byte, multi-byte characters included
  for (size_t i = 0; i < text.size(); ++i) {
    EXPECT_EQ(tokens[i], static_cast<unsigned char>(text[i])) << "byte " << i;
    EXPECT_LT(tokens[i], kByteVocab);
  }
  const std::vector<int32_t> ids(tokens.begin(), tokens.end());
  EXPECT_EQ(decode_bytes(ids), text);
}

TEST(ByteTokenizer, EveryByteValueMapsToItself) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  const std::vector<uint16_t> tokens = encode_bytes(all);
  ASSERT_EQ(tokens.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tokens[b], b);  // 0x80..0xff not sign-extended
  EXPECT_EQ(decode_bytes(std::vector<int32_t>(tokens.begin(), tokens.end())), all);
}

TEST(DataSplit, NinetyTenOfTextFile) {
  TempDir dir;
  for (size_t n : {1ul, 9ul, 10ul, 11ul, 19ul, 1000ul, 12345ul}) {
    SCOPED_TRACE(n);
    std::string text(n, '\0');
    for (size_t i = 0; i < n; ++i) text[i] = char('a' + (i * 7) % 26);
    const std::string path = dir.file("t" + std::to_string(n) + ".txt");
    write_file(path, text);
    const Dataset d = load_text_file(path);
    EXPECT_EQ(d.kind, "text");
    EXPECT_EQ(d.source, path);
    EXPECT_EQ(d.train.size(), n * 9 / 10);     // the first 90% (rounded down) ...
    EXPECT_EQ(d.val.size(), n - n * 9 / 10);   // ... and the rest
    EXPECT_EQ(joined(d), encode_bytes(text));  // in order, nothing lost or repeated
  }
}

TEST(DataSplit, HashDependsOnTheTokens) {
  TempDir dir;
  write_file(dir.file("a"), "some text for hashing");
  write_file(dir.file("b"), "some text for hashing");
  write_file(dir.file("c"), "some text for hashinG");
  const Dataset a = load_text_file(dir.file("a")), b = load_text_file(dir.file("b")),
                c = load_text_file(dir.file("c"));
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_NE(a.hash, c.hash);
}

// --- llm.c token files ------------------------------------------------------------------------

TEST(LlmcTokens, ReadsFileFromIndependentWriter) {
  TempDir dir;
  const std::string path = dir.file("tokens.bin");
  const int count = 3001, vocab = 50257, seed = 7;
  const auto r = run_command(python() + " " + script("llmc_files.py") + " tokens " + path +
                             " --count " + std::to_string(count) + " --vocab " +
                             std::to_string(vocab) + " --seed " + std::to_string(seed));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // numpy's tokens, printed by numpy itself.
  const auto np = run_command(python() +
                              " -c \"import numpy as np; print(' '.join(map(str, "
                              "np.random.default_rng(" +
                              std::to_string(seed) + ").integers(0, " + std::to_string(vocab) +
                              ", size=" + std::to_string(count) + "))))\"");
  ASSERT_EQ(np.exit_code, 0) << np.output;
  std::vector<uint16_t> want;
  std::istringstream in(np.output);
  for (int t; in >> t;) want.push_back(uint16_t(t));
  ASSERT_EQ(want.size(), size_t(count));

  // The same tokens straight from the file's bytes (little-endian uint16 after 1024 bytes).
  const std::string bytes = read_file(path);
  ASSERT_EQ(bytes.size(), 1024u + 2u * count);
  std::vector<uint16_t> raw(count);
  for (int i = 0; i < count; ++i) {
    raw[i] = uint16_t(uint8_t(bytes[1024 + 2 * i]) | (uint8_t(bytes[1025 + 2 * i]) << 8));
  }
  ASSERT_EQ(raw, want);

  const Dataset d = load_llmc_tokens(path);
  EXPECT_EQ(d.kind, "llmc-tokens");
  EXPECT_EQ(d.source, path);
  EXPECT_EQ(d.train.size(), size_t(count) * 9 / 10);
  EXPECT_EQ(joined(d), want);
  // Ids above 32767 survive (no sign or byte-order slip); numpy drew plenty of them.
  int high = 0;
  for (uint16_t t : want) high += t > 32767;
  EXPECT_GT(high, 100);
  EXPECT_NO_THROW(check_vocab(d, vocab));
}

TEST(LlmcTokens, CheckVocabNamesFirstBadToken) {
  Dataset d;
  d.source = "x.bin";
  d.train = {1, 2, 3, 4};
  d.val = {5, 300, 6};
  EXPECT_NO_THROW(check_vocab(d, 301));
  const std::string msg = user_error_of([&] { check_vocab(d, 300); });
  EXPECT_NE(msg.find("token id 300 at position 5"), std::string::npos) << msg;
}

// --- batch samplers ---------------------------------------------------------------------------

std::vector<uint16_t> iota_tokens(size_t n) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = uint16_t(i);
  return t;
}

TEST(BatchSampler, SequentialIsLlmcWindowOrder) {
  const int B = 3, T = 5;
  // Tokens with distinct values that are not their positions, so a window is pinned exactly.
  std::vector<uint16_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t((i * 7919 + 13) % 65521);
  const size_t nb = (tokens.size() - 1) / (B * T);  // 6 batches, then it wraps
  ASSERT_EQ(nb, 6u);
  const BatchSampler s(tokens, B, T, BatchSampler::Mode::kSequential, 1, RngStream::kTrainData);
  std::vector<int32_t> in(B * T), tg(B * T);
  for (uint64_t k = 0; k < 20; ++k) {
    s.fill(k, in.data(), tg.data());
    const size_t start = (k % nb) * B * T;
    for (int i = 0; i < B * T; ++i) {
      ASSERT_EQ(in[i], tokens[start + i]) << "batch " << k << " element " << i;
      ASSERT_EQ(tg[i], tokens[start + i + 1]) << "batch " << k << " element " << i;
    }
  }
}

TEST(BatchSampler, SequentialUsesOnlyFullWindows) {
  const int B = 2, T = 4;
  std::vector<int32_t> in(B * T), tg(B * T);
  // n - 1 = B·T exactly: one batch, whose last target is the last token.
  const std::vector<uint16_t> one = iota_tokens(B * T + 1);
  const BatchSampler s1(one, B, T, BatchSampler::Mode::kSequential, 1, RngStream::kTrainData);
  s1.fill(3, in.data(), tg.data());
  for (int i = 0; i < B * T; ++i) {
    EXPECT_EQ(in[i], i);
    EXPECT_EQ(tg[i], i + 1);
  }
  // n = 3·B·T: the third window would need one target past the end, so there are two batches
  // (nb = ⌊(n-1)/(B·T)⌋) and batch 2 wraps to batch 0.
  const std::vector<uint16_t> three = iota_tokens(3 * B * T);
  const BatchSampler s3(three, B, T, BatchSampler::Mode::kSequential, 1, RngStream::kTrainData);
  s3.fill(2, in.data(), tg.data());
  for (int i = 0; i < B * T; ++i) {
    EXPECT_EQ(in[i], i);
    EXPECT_EQ(tg[i], i + 1);
  }
  s3.fill(5, in.data(), tg.data());
  for (int i = 0; i < B * T; ++i) EXPECT_EQ(in[i], B * T + i);
}

TEST(BatchSampler, RandomIsDeterministicWindowsInsideTheData) {
  const int B = 4, T = 8;
  const size_t n = 40;
  const std::vector<uint16_t> tokens = iota_tokens(n);
  const BatchSampler s(tokens, B, T, BatchSampler::Mode::kRandom, 1234, RngStream::kTrainData);
  const BatchSampler same(tokens, B, T, BatchSampler::Mode::kRandom, 1234, RngStream::kTrainData);
  const CounterRng rng(1234, RngStream::kTrainData);
  std::vector<int32_t> in(B * T), tg(B * T), in2(B * T), tg2(B * T);
  std::set<int> starts;
  for (uint64_t k = 0; k < 500; ++k) {
    s.fill(k, in.data(), tg.data());
    same.fill(k, in2.data(), tg2.data());
    ASSERT_EQ(in, in2);
    ASSERT_EQ(tg, tg2);
    for (int b = 0; b < B; ++b) {
      const int start = in[b * T];
      // The documented draw: row b of batch k starts at below(n - T, k·B + b).
      ASSERT_EQ(uint64_t(start), rng.below(n - T, k * B + b)) << "batch " << k << " row " << b;
      ASSERT_GE(start, 0);
      ASSERT_LE(size_t(start) + T, n - 1) << "the last target must lie inside the data";
      for (int t = 0; t < T; ++t) {
        ASSERT_EQ(in[b * T + t], start + t);
        ASSERT_EQ(tg[b * T + t], start + t + 1);
      }
      starts.insert(start);
    }
  }
  // 2000 draws over 32 possible starts: every window, the first and last included, shows up.
  EXPECT_EQ(starts.size(), n - T);
  EXPECT_EQ(*starts.begin(), 0);
  EXPECT_EQ(*starts.rbegin(), int(n - T - 1));
  // The same call twice gives the same batch (fill keeps no state).
  s.fill(7, in.data(), tg.data());
  s.fill(7, in2.data(), tg2.data());
  EXPECT_EQ(in, in2);
}

TEST(BatchSampler, RandomDependsOnSeedStreamAndStep) {
  const int B = 4, T = 16;
  const std::vector<uint16_t> tokens = iota_tokens(5000);
  auto batch = [&](uint64_t seed, RngStream stream, uint64_t k) {
    const BatchSampler s(tokens, B, T, BatchSampler::Mode::kRandom, seed, stream);
    std::vector<int32_t> in(B * T), tg(B * T);
    s.fill(k, in.data(), tg.data());
    return in;
  };
  const auto base = batch(1, RngStream::kTrainData, 0);
  EXPECT_EQ(base, batch(1, RngStream::kTrainData, 0));
  EXPECT_NE(base, batch(2, RngStream::kTrainData, 0));
  EXPECT_NE(base, batch(1, RngStream::kValData, 0));
  EXPECT_NE(base, batch(1, RngStream::kTrainData, 1));
}

TEST(BatchSampler, CheckBatchFits) {
  const std::vector<uint16_t> tokens = iota_tokens(33);
  const auto random = BatchSampler::Mode::kRandom, seq = BatchSampler::Mode::kSequential;
  EXPECT_NO_THROW(check_batch_fits(tokens, "train", "f", 4, 32, random));  // needs T + 1
  EXPECT_NO_THROW(check_batch_fits(tokens, "train", "f", 1, 32, seq));     // needs B·T + 1
  const std::string msg = user_error_of([&] { check_batch_fits(tokens, "val", "f", 2, 32, seq); });
  EXPECT_NE(msg.find("too short"), std::string::npos) << msg;
  EXPECT_NE(msg.find("val"), std::string::npos) << msg;
  EXPECT_NE(user_error_of([&] { check_batch_fits(tokens, "train", "f", 1, 33, random); }), "");
}

// --- fortunes ---------------------------------------------------------------------------------

TEST(Fortunes, SkipsDatFilesAndSymlinksAndDropsSeparators) {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string root = dir.file("fortunes");
  fs::create_directories(root);
  write_file(root + "/b", "three\n%\nfour is 100% sure\n%\n");
  write_file(root + "/a", "one\n%\ntwo\n  %\n");
  write_file(root + "/a.dat", std::string("\x02\x00\x00\x00 binary index", 17));
  write_file(root + "/b.dat", "index");
  fs::create_symlink(root + "/a", root + "/a.u8");
  fs::create_symlink(root + "/b", root + "/zz-link");
  fs::create_directories(root + "/subdir");
  write_file(root + "/subdir/c", "not read\n");

  const Dataset d = load_fortunes(root);
  EXPECT_EQ(d.kind, "text");
  EXPECT_EQ(d.source, root);
  // Name order, "%" lines gone, lines that merely contain '%' kept.
  const std::string want = "one\ntwo\n  %\nthree\nfour is 100% sure\n";
  const std::vector<uint16_t> all = joined(d);
  EXPECT_EQ(decode_bytes(std::vector<int32_t>(all.begin(), all.end())), want);
  EXPECT_EQ(d.train.size(), want.size() * 9 / 10);
}

TEST(Fortunes, MissingOrEmptyDirectoryIsInputError) {
  TempDir dir;
  std::string msg = user_error_of([&] { load_fortunes(dir.file("none")); });
  EXPECT_NE(msg.find("fortunes"), std::string::npos) << msg;
  std::filesystem::create_directories(dir.file("only-dat"));
  write_file(dir.file("only-dat/x.dat"), "index");
  msg = user_error_of([&] { load_fortunes(dir.file("only-dat")); });
  EXPECT_NE(msg.find("--data"), std::string::npos) << msg;
}

// --- llm.c GPT-2 checkpoints ------------------------------------------------------------------

ModelConfig small_gpt2() {
  ModelConfig c;
  c.arch = Arch::kGpt2;
  c.layers = 2;
  c.heads = 2;
  c.channels = 16;
  c.max_seq = 8;
  c.vocab = 50;
  c.padded_vocab = 64;
  return c;
}

// Every parameter of `cfg` with random bits that are finite floats of all magnitudes (normals,
// subnormals, ±0), as a nanoGPT-named safetensors file with the `config` metadata that
// tests/torch/gpt2_mirror.py documents.
SafetensorsFile random_gpt2_params(const ModelConfig& cfg, uint32_t seed) {
  const ParamLayout layout = gpt2_param_layout(cfg);
  std::mt19937 gen(seed);
  SafetensorsFile f;
  for (const ParamTensor& t : layout.tensors()) {
    std::vector<float> v(t.numel);
    for (float& x : v) {
      do {
        const uint32_t bits = gen();
        std::memcpy(&x, &bits, 4);
      } while (!std::isfinite(x));
    }
    if (v.size() > 2) v[0] = -0.0f, v[1] = std::numeric_limits<float>::denorm_min();
    f.add(t.name, DType::kF32, std::vector<int64_t>(t.shape.begin(), t.shape.end()), v.data());
  }
  f.metadata["config"] = nlohmann::json{{"arch", "gpt2"},        {"layers", cfg.layers},
                                        {"heads", cfg.heads},    {"channels", cfg.channels},
                                        {"vocab", cfg.vocab},    {"padded_vocab", cfg.padded_vocab},
                                        {"max_seq", cfg.max_seq}}
                             .dump();
  return f;
}

class LlmcCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    params_ = random_gpt2_params(small_gpt2(), 2024);
    const std::string in = dir_.file("params.safetensors");
    ckpt_ = dir_.file("model.bin");
    write_safetensors(in, params_);
    const auto r =
        run_command(python() + " " + script("llmc_files.py") + " checkpoint " + in + " " + ckpt_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  TempDir dir_;
  SafetensorsFile params_;
  std::string ckpt_;
};

TEST_F(LlmcCheckpoint, LoadsEveryTensorBitForBit) {
  const ModelConfig want = small_gpt2();
  const ModelConfig cfg = read_llmc_config(ckpt_);
  EXPECT_EQ(cfg.arch, Arch::kGpt2);
  EXPECT_EQ(cfg.layers, want.layers);
  EXPECT_EQ(cfg.heads, want.heads);
  EXPECT_EQ(cfg.channels, want.channels);
  EXPECT_EQ(cfg.max_seq, want.max_seq);
  EXPECT_EQ(cfg.vocab, want.vocab);
  EXPECT_EQ(cfg.padded_vocab, want.padded_vocab);

  const ParamLayout layout = gpt2_param_layout(cfg);
  AlignedBuffer<float> w(layout.total());
  const uint32_t sentinel_bits = 0x7fc0dead;  // a NaN no checkpoint holds
  for (size_t i = 0; i < w.size(); ++i) std::memcpy(&w[i], &sentinel_bits, 4);
  load_llmc_weights(ckpt_, cfg, layout, w.data());

  std::vector<bool> covered(layout.total(), false);
  for (const ParamTensor& t : layout.tensors()) {
    SCOPED_TRACE(t.name);
    const SafeTensor& src = params_.get(t.name);
    ASSERT_EQ(src.bytes.size(), t.numel * 4);
    EXPECT_EQ(std::memcmp(w.data() + t.offset, src.bytes.data(), src.bytes.size()), 0);
    for (size_t i = 0; i < t.numel; ++i) covered[t.offset + i] = true;
  }
  // Nothing was written outside the tensors (the alignment padding stays untouched).
  for (size_t i = 0; i < layout.total(); ++i) {
    if (covered[i]) continue;
    uint32_t bits;
    std::memcpy(&bits, &w[i], 4);
    ASSERT_EQ(bits, sentinel_bits) << "padding float " << i;
  }
}

// Overwrites float `index` (counted from the end of the header) of the checkpoint.
void poke_float(const std::string& path, size_t index, float value) {
  std::string bytes = read_file(path);
  ASSERT_LE(1024 + 4 * (index + 1), bytes.size());
  std::memcpy(&bytes[1024 + 4 * index], &value, 4);
  write_file(path, bytes);
}

TEST_F(LlmcCheckpoint, NonFiniteWeightIsRejected) {
  const ModelConfig cfg = read_llmc_config(ckpt_);
  const ParamLayout layout = gpt2_param_layout(cfg);
  AlignedBuffer<float> w(layout.total());
  const size_t C = size_t(cfg.channels), L = size_t(cfg.layers);
  // llm.c order: wte [Vp,C], wpe [maxT,C], ln1w [L,C], ln1b [L,C], qkvw [L,3C,C], ...
  const size_t qkvw_layer1 =
      size_t(cfg.padded_vocab) * C + size_t(cfg.max_seq) * C + 2 * L * C + 3 * C * C + 5;
  poke_float(ckpt_, qkvw_layer1, std::numeric_limits<float>::quiet_NaN());
  std::string msg = user_error_of([&] { load_llmc_weights(ckpt_, cfg, layout, w.data()); });
  EXPECT_NE(msg.find("non-finite"), std::string::npos) << msg;
  EXPECT_NE(msg.find("transformer.h.1.attn.c_attn.weight"), std::string::npos) << msg;

  // An infinity in the very last weight (ln_f.bias) as well.
  poke_float(ckpt_, qkvw_layer1, 0.5f);
  EXPECT_NO_THROW(load_llmc_weights(ckpt_, cfg, layout, w.data()));
  const size_t last = (read_file(ckpt_).size() - 1024) / 4 - 1;
  poke_float(ckpt_, last, -std::numeric_limits<float>::infinity());
  msg = user_error_of([&] { load_llmc_weights(ckpt_, cfg, layout, w.data()); });
  EXPECT_NE(msg.find("transformer.ln_f.bias"), std::string::npos) << msg;
}

TEST_F(LlmcCheckpoint, CorruptHeaderIsRejected) {
  const std::string good = read_file(ckpt_);
  const std::string path = dir_.file("bad.bin");
  auto with_int = [&](int index, int32_t value) {
    std::string b = good;
    std::memcpy(&b[4 * index], &value, 4);
    write_file(path, b);
    return user_error_of([&] { read_llmc_config(path); });
  };
  EXPECT_NE(with_int(0, 20240520).find("magic"), std::string::npos);
  EXPECT_NE(with_int(1, 2).find("version"), std::string::npos);      // bf16 checkpoints
  EXPECT_NE(with_int(4, 3).find("bytes"), std::string::npos);        // L 3: size no longer matches
  EXPECT_NE(with_int(5, 3).find("impossible"), std::string::npos);   // C 16 not divisible by 3
  EXPECT_NE(with_int(7, 49).find("impossible"), std::string::npos);  // Vp < V
  write_file(path, good.substr(0, good.size() - 4));
  EXPECT_NE(user_error_of([&] { read_llmc_config(path); }).find("bytes"), std::string::npos);
  write_file(path, good.substr(0, 1000));
  EXPECT_NE(user_error_of([&] { read_llmc_config(path); }).find("header"), std::string::npos);
  EXPECT_NE(user_error_of([&] { read_llmc_config(dir_.file("none.bin")); }), "");
}

}  // namespace
}  // namespace reftrain
