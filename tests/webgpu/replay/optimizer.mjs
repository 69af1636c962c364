// The optimizer of one step as engine operations, as optim/optimizer.cpp runs it:
// reduce_norm_sq over the whole gradient buffer → finalize_grad_stats → the AdamW kernel on
// [0, wd_end) with weight decay and on [wd_end, total) without, each bound as a sub-range of the
// mega-buffers (the 8-bit state's blocks restart at wd_end); the mirror the precision has is
// written by the update itself (adamw_update_f16, adamw_update_bf16), or by a cast of the whole
// buffer after the 8-bit update (cast_f32_to_f16, cast_f32_to_bf16), whose kernel binds none.
// bf16-pure's update (adamw_update_bf16_sr) rounds each new weight to bf16 stochastically, into
// the mirror and back into w; its noise needs the step t (a buffer the step writes), the run's
// seed folded to 32 bits and each range's first element. bf16-kahan's (adamw_update_bf16_kahan)
// rounds to nearest and keeps what the rounding lost in a bf16 compensation per weight, a third
// state buffer beside m and v that starts from init.safetensors' optimizer.kahan tensors.
import { view } from './engine.mjs';
import { bf16View } from './model.mjs';

const BLOCK = 256;
const blocks = (n) => Math.ceil(n / BLOCK);
const f32 = Math.fround;

// The 8-bit state: codes (4 per u32 word, at the element's byte) and one scale per block of
// each range. The second range's scales start at a multiple of 4 floats, so that its binding
// offset is 16-byte aligned (the gap is never read).
function eightBitState(E, wdEnd, total) {
  const firstScales = Math.ceil(blocks(wdEnd) / 4) * 4;
  const scales = (firstScales + blocks(total - wdEnd)) * 4;
  const words = Math.ceil(total / 4) * 4;
  return { mc: E.storage(words), vc: E.storage(words), ms: E.storage(scales), vs: E.storage(scales), firstScales };
}

function rangeBindings(R, st, begin, size, hp, stats, eight) {
  const { E, bufs } = R;
  const fv = (b) => view(b, begin * 4, size * 4);
  if (!eight) {
    // null: the step number t, which no GPU kernel but bf16-pure's binds (the host turns it into
    // bias).
    const base = [fv(bufs.w), fv(bufs.g), fv(st.m), fv(st.v), stats, R.u(size), hp, st.bias, st.pure ? st.t : null];
    if (R.mixed) return [...base, view(bufs.w16, begin * 2, Math.ceil(size / 2) * 4)];
    // The ranges start on 16-float lines (core/model/param_layout.h), so on whole bf16 words.
    if (st.pure) return [...base, bf16View(bufs.wb, begin * 2, size), R.u(st.seed), R.u(begin)];
    if (st.kahan) return [...base, bf16View(bufs.wb, begin * 2, size), bf16View(st.comp, begin * 2, size)];
    return R.bf16 ? [...base, bf16View(bufs.wb, begin * 2, size)] : base;
  }
  const codes = (b) => view(b, begin, Math.ceil(size / 4) * 4);
  const first = begin === 0 ? 0 : st.firstScales;
  const scales = (b) => view(b, first * 4, blocks(size) * 4);
  return [fv(bufs.w), fv(bufs.g), codes(st.mc), codes(st.vc), scales(st.ms), scales(st.vs), stats, R.u(size), hp, st.bias, null];
}

// {ops, stats (view of [grad_norm, clip]), setStep(t, lr)}.
// kahan: bf16-kahan's initial compensation, bf16 bits in mega-buffer layout (else null).
export function buildOptimizer(R, config, wdEnd, total, kahan = null) {
  const { E, bufs } = R;
  const o = config.optimizer;
  const eight = o.name === 'adamw8bit';
  if (!['adamw', 'adamw8bit'].includes(o.name)) throw new Error(`replay: optimizer ${o.name} is not replayed`);
  const st = eight ? eightBitState(E, wdEnd, total) : { m: E.storage(total * 4), v: E.storage(total * 4) };
  st.bias = E.vec4();
  st.pure = config.train.precision === 'bf16-pure';
  st.kahan = config.train.precision === 'bf16-kahan';
  if (st.kahan) st.comp = E.storage(Math.ceil(total / 2) * 4, kahan);
  if (st.pure) {
    if (!Number.isSafeInteger(config.seed)) throw new Error(`replay: bf16-pure's seed ${config.seed} is past 2^53, which JSON numbers do not hold exactly`);
    const seed = BigInt(config.seed);  // folded to 32 bits as reftrain's stochastic_seed
    st.seed = Number((seed ^ (seed >> 32n)) & 0xFFFFFFFFn);
    st.t = view(E.storage(16), 0, 4);
  }
  const normSq = view(E.storage(16), 0, 4);
  const stats = view(E.storage(16), 0, 8);
  const maxNorm = f32(o.clip) > 0 ? f32(o.clip) : 3.4e38;  // no clipping: the factor stays 1
  const name = eight ? 'adamw_8bit_update' : R.mixed ? 'adamw_update_f16' : st.pure ? 'adamw_update_bf16_sr'
    : st.kahan ? 'adamw_update_bf16_kahan' : R.bf16 ? 'adamw_update_bf16' : 'adamw_update';
  const ranges = [[0, wdEnd, f32(o.wd)], [wdEnd, total - wdEnd, 0]].filter(([, size]) => size > 0)
    .map(([begin, size, wd]) => ({ begin, size, wd, hp: E.vec4() }));
  const ops = [
    E.clear(normSq),
    E.kernel('reduce_norm_sq', [view(bufs.g, 0, total * 4), normSq, R.u(total)], { n: total }, 'optim.reduce_norm_sq'),
    E.kernel('finalize_grad_stats', [normSq, stats, R.f(maxNorm)], {}, 'optim.finalize_grad_stats'),
    ...ranges.map((r) => E.kernel(name, rangeBindings(R, st, r.begin, r.size, r.hp, stats, eight), { size: r.size },
                                  `optim.${name}`)),
  ];
  if (eight && R.mixed) {
    ops.push(E.kernel('cast_f32_to_f16', [view(bufs.w, 0, total * 4), view(bufs.w16, 0, Math.ceil(total / 2) * 4), R.u(total)],
                      { n: total }, 'optim.cast_f32_to_f16'));
  }
  if (eight && R.bf16) {
    ops.push(E.kernel('cast_f32_to_bf16', [bf16View(bufs.wb, 0, total), view(bufs.w, 0, total * 4), R.u(total)],
                      { n: total }, 'optim.cast_f32_to_bf16'));
  }
  const [b1, b2, eps] = [f32(o.beta1), f32(o.beta2), f32(o.eps)];
  const setStep = (t, lr) => {
    for (const r of ranges) E.device.queue.writeBuffer(r.hp.buffer, 0, new Float32Array([lr, b1, b2, r.wd]));
    E.device.queue.writeBuffer(st.bias.buffer, 0, new Float32Array([f32(b1 ** t), f32(b2 ** t), eps, 0]));
    if (st.pure) E.device.queue.writeBuffer(st.t.buffer, 0, new Int32Array([t]));
  };
  return { ops, stats, setStep };
}
