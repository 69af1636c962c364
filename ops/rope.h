// Rotary position embedding (llama family), rotate-half convention. GPU twin: 04_rope.wgsl.
// Within each head, element i pairs with element i + hs/2 (i < hs/2) and the pair is rotated by
// an angle that grows with the position t = 0..T-1:
//   f_i = theta^(-2i/hs);  a = t·f_i
//   out[i]        = x[i]·cos a - x[i+hs/2]·sin a
//   out[i+hs/2]   = x[i+hs/2]·cos a + x[i]·sin a
// The backward is the transposed (inverse) rotation, by -a:
//   dx[i]        += dout[i]·cos a + dout[i+hs/2]·sin a
//   dx[i+hs/2]   += dout[i+hs/2]·cos a - dout[i]·sin a
// Shapes: x/out/dout/dx [B,T,NH·hs] (contiguous rows, head h at columns h·hs..h·hs+hs-1);
// hs must be even. theta is 10000 in the model. t0 (default 0, the GPU twin's only case) shifts
// the positions to t0..t0+T-1: generation with a KV cache rotates one new row at its position.
//
// Precision of the angles: f, a, cos a and sin a are computed in double and rounded once to T,
// so the float kernel's rotation is the correctly rounded one for every position. The GPU twin
// computes them in f32 (f32 pow, t·f in f32, f32 cos/sin): at t ~ 1000 the angle alone is off
// by ~1e-4 rad (a few ulps of 1000), and WGSL bounds cos/sin error only on [-π, π]. That, not
// the rotation, limits how closely a GPU result can match these goldens at long positions.
#pragma once

namespace reftrain {

// out may be the same buffer as x (in-place rotation): each pair is read before it is written.
template <typename T>
void rope_forward(T* out, const T* x, int B, int Tn, int NH, int hs, double theta, int t0 = 0);

// Accumulates (+=) into dx; dx must not overlap dout.
template <typename T>
void rope_backward(T* dx, const T* dout, int B, int Tn, int NH, int hs, double theta, int t0 = 0);

// Same as rope_forward except float only, 16 pairs at a time (in place allowed): bit-identical.
void rope_forward_fast(float* out, const float* x, int B, int Tn, int NH, int hs, double theta,
                       int t0 = 0);
// Same as rope_backward except float only, 16 pairs at a time (accumulates): bit-identical. With
// accumulate false, dx is written (0 + each term, never read): the bits of zeroing it first.
void rope_backward_fast(float* dx, const float* dout, int B, int Tn, int NH, int hs, double theta,
                        int t0 = 0, bool accumulate = true);

}  // namespace reftrain
