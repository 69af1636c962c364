// A twin's WGSL text: `source` as given, else its family's `prelude` (bindings, uniforms, index
// helpers written once per family; a file or a list of files) followed by `file`, all read from
// `dir` (default: kernels/).
// A file may hold one template section, the lines between `//#template` and `//#end`, written
// once for every element of the twin's `template` (a list of {KEY: text}) with each `{{KEY}}`
// replaced by its text: one body per form, the products differing only in what is substituted
// (registry.mjs's linear twins).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const kernelDir = new URL('./kernels/', import.meta.url).pathname;

export function expandTemplate(text, instances = [], where = 'WGSL') {
  const m = /^\/\/#template[^\n]*\n([\s\S]*?)^\/\/#end[^\n]*\n?/m.exec(text);
  if (!m) {
    if (instances.length) throw new Error(`${where}: a template list but no //#template section`);
    return text;
  }
  const body = instances.map((vars) => m[1].replace(/\{\{(\w+)\}\}/g, (_, k) => {
    if (!(k in vars)) throw new Error(`${where}: template key ${k} has no value`);
    return vars[k];
  }));
  return text.slice(0, m.index) + body.join('\n') + text.slice(m.index + m[0].length);
}

// WGSL wants its directives (`enable f16;`) before any declaration, so the file's are moved
// ahead of the prelude.
const directive = /^enable [^;\n]*;[^\n]*\n/gm;

export function twinSource(twin) {
  if (twin.source) return twin.source;
  const read = (f) => readFileSync(join(twin.dir ?? kernelDir, f), 'utf8');
  const body = expandTemplate(read(twin.file), twin.template, twin.file);
  if (!twin.prelude) return body;
  const prelude = [twin.prelude].flat().map(read).join('\n');
  const directives = [...new Set([prelude, body].flatMap((t) => t.match(directive) ?? []))].join('');
  return `${directives}${prelude.replace(directive, '')}\n${body.replace(directive, '')}`;
}
