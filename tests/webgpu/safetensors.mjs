// A small safetensors reader and writer (the container of reftrain's golden files): an 8-byte
// little-endian header length, the JSON header, then the tensors' bytes. The writer follows
// reftrain's own layout: tensors in name order, the header padded with spaces to a multiple of 8.
import { readFileSync, writeFileSync } from 'node:fs';

// BF16 as its bit patterns, like F16 (judge.mjs reads the values).
const kTypes = { F32: Float32Array, F16: Uint16Array, BF16: Uint16Array, F64: Float64Array, I32: Int32Array, U8: Uint8Array };

// { tensors: {name: {dtype, shape, data (typed array, its own copy)}}, metadata: {key: string} }
export function readSafetensors(path) {
  const file = readFileSync(path);
  const bytes = new Uint8Array(file.buffer, file.byteOffset, file.byteLength);
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const tensors = {};
  for (const [name, e] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const Type = kTypes[e.dtype];
    if (!Type) throw new Error(`${path}: tensor ${name} has dtype ${e.dtype}, not one of ${Object.keys(kTypes)}`);
    const [begin, end] = e.data_offsets;
    // A copy: an F16 tensor may leave the next one unaligned for its typed array.
    const data = bytes.slice(8 + n + begin, 8 + n + end);
    tensors[name] = { dtype: e.dtype, shape: e.shape, data: new Type(data.buffer) };
  }
  return { tensors, metadata: header.__metadata__ ?? {} };
}

export function writeSafetensors(path, tensors, metadata = {}) {
  const names = Object.keys(tensors).sort();
  const header = { __metadata__: metadata };
  let offset = 0;
  for (const name of names) {
    const t = tensors[name];
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  const jsonBytes = () => new TextEncoder().encode(json);
  while ((8 + jsonBytes().length) % 8) json += ' ';
  const head = jsonBytes();
  const out = new Uint8Array(8 + head.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  let at = 8 + head.length;
  for (const name of names) {
    const d = tensors[name].data;
    out.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), at);
    at += d.byteLength;
  }
  writeFileSync(path, out);
}

export function typedArrayFor(dtype, bytes) {
  return new kTypes[dtype](bytes);
}
