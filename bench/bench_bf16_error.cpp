// reftrain's side of bench/bf16_op_error.py (per-op error of `--precision bf16` against float64,
// next to PyTorch's bf16 autocast): runs the bf16 kernels of one transformer layer on f32 inputs
// that the script writes, exactly as core/model/model_bf16.cpp calls them (each f32 operand
// rounded by cast_f32_to_bf16 as it enters its product, the weight from its bf16 mirror, the
// products on bf16_best_path()), and writes their f32 outputs for the script to judge. Arrays
// are raw little-endian f32 files in DIR, row-major.
//
//   bench_bf16_error linear DIR N K O        reads  x [N,K], w [O,K], b [O], dy [N,O]
//                                            writes y [N,O], dx [N,K], dw [O,K], db [O]
//   bench_bf16_error attention DIR B T C NH  reads  qkv [B,T,3C], dout [B,T,C]
//                                            writes out [B,T,C], dqkv [B,T,3C]
//
// The gradients are accumulated into zeros (the kernels add into what they are given).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/attention_bf16.h"
#include "ops/bf16.h"
#include "ops/linear_bf16.h"
#include "ops/matmul_bf16.h"

namespace {

using namespace reftrain;

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "bench_bf16_error: %s\n", msg.c_str());
  std::exit(1);
}

std::vector<float> read_f32(const std::string& dir, const char* name, size_t n) {
  const std::string path = dir + "/" + name + ".f32";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot open " + path);
  std::vector<float> v(n);
  const size_t got = std::fread(v.data(), sizeof(float), n, f);
  const bool extra = std::fgetc(f) != EOF;
  std::fclose(f);
  if (got != n || extra) fail(path + ": expected " + std::to_string(n) + " floats");
  return v;
}

void write_f32(const std::string& dir, const char* name, const std::vector<float>& v) {
  const std::string path = dir + "/" + name + ".f32";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(v.data(), sizeof(float), v.size(), f) != v.size()) {
    fail("cannot write " + path);
  }
  std::fclose(f);
}

std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> y(x.size());
  cast_f32_to_bf16(y.data(), x.data(), x.size());
  return y;
}

// Model::linear_fwd_bf16 and Model::linear_bwd_bf16.
void linear(const std::string& dir, int N, int K, int O) {
  const size_t nk = size_t(N) * K, no = size_t(N) * O, ok = size_t(O) * K;
  const std::vector<float> x = read_f32(dir, "x", nk), w = read_f32(dir, "w", ok),
                           b = read_f32(dir, "b", size_t(O)), dy = read_f32(dir, "dy", no);
  const std::vector<bf16> w16 = to_bf16(w), x16 = to_bf16(x), dy16 = to_bf16(dy);
  MatmulBf16 mm;
  std::vector<float> y(no), dx(nk), dw(ok), db(b.size());
  linear_forward_bf16(mm, y.data(), x16.data(), w16.data(), b.data(), N, K, O);
  linear_backward_data_bf16(mm, dx.data(), dy16.data(), w16.data(), N, K, O, true);
  linear_backward_weight_bf16(mm, dw.data(), db.data(), dy.data(), dy16.data(), x16.data(), N, K,
                              O);
  write_f32(dir, "y", y);
  write_f32(dir, "dx", dx);
  write_f32(dir, "dw", dw);
  write_f32(dir, "db", db);
}

// Model::attention_fwd_bf16 and Model::attention_bwd_bf16 (whose P16 is the cast of the f32
// probabilities the forward kept: the forward's own bits).
void attention(const std::string& dir, int B, int T, int C, int NH) {
  const size_t n3 = size_t(B) * T * 3 * C, n1 = size_t(B) * T * C, na = size_t(B) * NH * T * T;
  const std::vector<float> qkv = read_f32(dir, "qkv", n3), dout = read_f32(dir, "dout", n1);
  MatmulBf16 mm;
  const std::vector<bf16> qkv16 = to_bf16(qkv), dout16 = to_bf16(dout);
  std::vector<float> out(n1), att(na), dqkv(n3);
  std::vector<bf16> att16(na);
  attention_forward_bf16(mm, out.data(), att.data(), att16.data(), qkv16.data(), B, T, C, NH);
  const std::vector<bf16> p16 = to_bf16(att);
  const size_t scratch = size_t(mm.threads()) * T * T;
  std::vector<float> dp(scratch);
  std::vector<bf16> ds16(scratch);
  attention_backward_bf16(mm, dqkv.data(), dp.data(), ds16.data(), dout16.data(), qkv16.data(),
                          att.data(), p16.data(), B, T, C, NH);
  write_f32(dir, "out", out);
  write_f32(dir, "dqkv", dqkv);
}

int dim(const char* s) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < 1 || v > (1 << 20)) fail(std::string("bad dimension '") + s + "'");
  return int(v);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string op = argc > 1 ? argv[1] : "";
  if (op == "linear" && argc == 6) {
    linear(argv[2], dim(argv[3]), dim(argv[4]), dim(argv[5]));
  } else if (op == "attention" && argc == 7) {
    const int C = dim(argv[5]), NH = dim(argv[6]);
    if (C % NH != 0) fail("C must be a multiple of NH");
    attention(argv[2], dim(argv[3]), dim(argv[4]), C, NH);
  } else {
    fail("usage: bench_bf16_error linear DIR N K O | attention DIR B T C NH");
  }
  std::printf("path %s, %d threads\n", bf16_path_name(bf16_best_path()), MatmulBf16().threads());
  return 0;
}
