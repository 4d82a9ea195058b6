// check_trace.mjs — loads a kernbench trace with a real importer (Chrome
// DevTools' trace engine, npm @paulirish/trace_engine) and checks what a
// reader of the timeline relies on:
//   - the importer accepts the file and keeps every slice;
//   - every message flow resolves (flows found == flow starts written, each
//     joining two events);
//   - on each track (pid, tid) slices nest: none partially overlaps another;
//   - no displayTimeUnit (older Perfetto scales timestamps by it).
// The engine and its whole dependency tree are pinned by package-lock.json
// beside this file (`npm ci`); it runs on Node 18 (Debian 12) and later.
// usage: node check_trace.mjs ENGINE_DIR TRACE(.json|.json.gz)
// Prints "ok flows=N slices=M tracks=T" or one line per problem; exit 1.
import fs from 'node:fs';
import path from 'node:path';
import url from 'node:url';
import zlib from 'node:zlib';

// Node before 20.18 (Debian 12 ships 18.20) has no static URL.parse, which
// the trace engine calls; the WHATWG definition is `new URL` or null.
if (typeof URL.parse !== 'function')
  URL.parse = (input, base) => {
    try {
      return new URL(input, base);
    } catch {
      return null;
    }
  };

const [engineDir, file] = process.argv.slice(2);
if (!engineDir || !file) {
  console.error('usage: node check_trace.mjs ENGINE_DIR TRACE');
  process.exit(2);
}
const Trace = await import(url.pathToFileURL(path.join(engineDir, 'models/trace/trace.js')).href);

let bytes = fs.readFileSync(file);
if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = zlib.gunzipSync(bytes);
const json = JSON.parse(bytes.toString('utf8'));
const events = json.traceEvents;
const problems = [];
if ('displayTimeUnit' in json) problems.push('displayTimeUnit is set');

const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const parsed = model.parsedTrace();

// flows
const starts = events.filter(e => e.ph === 's');
for (const e of starts)
  if (typeof e.id !== 'number') problems.push(`flow id ${JSON.stringify(e.id)} is not a number`);
const flows = parsed.data.Flows.flows;
if (flows.length !== starts.length)
  problems.push(`importer resolved ${flows.length} of ${starts.length} message flows`);
for (const f of flows)
  if (f.length !== 2) problems.push(`a flow joins ${f.length} events`);

// slices: every X event kept, nesting per track (integer picoseconds)
const ps = us => Math.round(us * 1e6);
let slices = 0, tracks = 0;
for (const [pid, proc] of parsed.data.Renderer.processes) {
  for (const [tid, thread] of proc.threads) {
    const xs = thread.entries.filter(e => e.ph === 'X')
      .map(e => ({ b: ps(e.ts), e: ps(e.ts) + ps(e.dur ?? 0), name: e.name }))
      .sort((a, b) => a.b - b.b || b.e - a.e);
    if (!xs.length) continue;
    tracks++;
    slices += xs.length;
    const open = [];
    for (const s of xs) {
      while (open.length && open[open.length - 1].e <= s.b) open.pop();
      const top = open[open.length - 1];
      if (top && s.e > top.e) {
        problems.push(`pid ${pid} tid ${tid}: "${s.name}" [${s.b}, ${s.e}] ps overlaps "${top.name}" [${top.b}, ${top.e}] ps`);
        break;
      }
      open.push(s);
    }
  }
}
const written = events.filter(e => e.ph === 'X').length;
if (slices !== written) problems.push(`importer kept ${slices} of ${written} slices`);

if (problems.length) {
  for (const p of problems.slice(0, 20)) console.log(p);
  process.exit(1);
}
console.log(`ok flows=${flows.length} slices=${slices} tracks=${tracks}`);
