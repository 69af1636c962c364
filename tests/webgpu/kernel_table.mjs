// The kernel table, kernels.json: every GPU kernel's bindings in order, {name, role, dtype,
// shape}, as reftrain's kernel records state them (the fixtures' manifest holds the same for the
// kernels with a fixture), plus the replay's own pack_qkv / unpack_qkv. The replay binds its
// calls by these names and the call dump reads roles and dtypes from it, so nothing here keeps
// a copy of a kernel's signature.
import { readFileSync } from 'node:fs';

export const kernelTablePath = new URL('./kernels.json', import.meta.url).pathname;

let table = null;

// name -> {name, bindings}
export function kernelTable() {
  if (!table) {
    const j = JSON.parse(readFileSync(kernelTablePath, 'utf8'));
    if (j.format !== 'reftrain-kernel-table' || j.version !== 1) throw new Error(`${kernelTablePath}: not a reftrain kernel table v1`);
    table = new Map(j.kernels.map((k) => [k.name, k]));
  }
  return table;
}

export function kernelEntry(name) {
  const k = kernelTable().get(name);
  if (!k) throw new Error(`kernels.json has no kernel ${name}`);
  return k;
}

// A binding's dtype as a safetensors dtype (the 8-bit AdamW codes, stored in u32 words, as U8).
const safetensorsDtypes = { f32: 'F32', f16: 'F16', bf16: 'BF16', i32: 'I32', 'u8 (u32 words)': 'U8' };
export function safetensorsDtype(b) {
  const d = safetensorsDtypes[b.dtype];
  if (!d) throw new Error(`binding ${b.name}: no safetensors dtype for ${b.dtype}`);
  return d;
}
