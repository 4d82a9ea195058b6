// check_manifest.mjs — checks a Kubernetes manifest (every document of a
// YAML file) against the Kubernetes API schemas of the `kubernetes-models`
// package, offline (tests/k8s/package-lock.json pins it; `npm ci` installs
// it into build/node-k8s; KB_K8S_MODULES names its node_modules):
//
//   node tests/k8s/check_manifest.mjs FILE.yaml     exit 0, or 1 with one line per fault
//   node tests/k8s/check_manifest.mjs --self-test FILE.yaml
//                                                   misspelt fields, a wrong
//                                                   enum and a wrong type put
//                                                   into FILE's documents must
//                                                   each be rejected
//
// Two checks: the package's own validator (types, enums, required fields,
// formats), and unknown fields — which the API server rejects (kubectl's
// strict field validation) but the package's schemas allow — found by
// walking each object against the field lists of the package's type
// declarations (.d.ts), where every Kubernetes type is an interface.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// the packages: KB_K8S_MODULES (build/node-k8s/node_modules, `make`), or
// a node_modules beside this script
const modules = process.env.KB_K8S_MODULES || join(dirname(fileURLToPath(import.meta.url)), "node_modules");
const require = createRequire(join(modules, "resolve.js"));
const modelsDir = dirname(require.resolve("kubernetes-models/package.json"));
const { parseAllDocuments } = await import(pathToFileURL(require.resolve("yaml")).href);

// "batch/v1" -> kubernetes-models/batch/v1, "v1" -> kubernetes-models/v1
function groupDir(apiVersion) {
  return join(modelsDir, ...apiVersion.split("/"));
}

// A .d.ts file's interface: field name -> type text, and import name -> path.
const parsed = new Map();
function declarations(path) {
  if (parsed.has(path)) return parsed.get(path);
  const text = readFileSync(path, "utf8").replace(/\/\*\*[\s\S]*?\*\//g, "");
  const imports = new Map();
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
    let target = m[2];
    // a sibling package (its "exports" hide the .d.ts from require.resolve)
    if (target.startsWith("@kubernetes-models/")) target = join(modelsDir, "..", target);
    else target = resolve(dirname(path), target);
    imports.set(m[1], target.replace(/\.js$/, "") + ".d.ts");
  }
  const body = text.match(/export interface I\w+(?: extends [\w, ]+)? \{\n([\s\S]*?)\n\}/);
  const fields = new Map();
  // one field per `    "name"?: TYPE;` (a TYPE may span lines: a map);
  // the comments' places are blank lines
  const lines = body ? body[1].replace(/^[ \t]*\n/gm, "") + "\n" : "";
  for (const entry of lines.split(/;\n(?= {4}")/)) {
    const m = entry.match(/^ {4}"([^"]+)"\??: ([\s\S]*?);?\n?$/);
    if (m) fields.set(m[1], m[2]);
  }
  const decl = { fields: body ? fields : null, imports };
  parsed.set(path, decl);
  return decl;
}

// The .d.ts a field's type names (Array<T> and T[] by their T), or null
// for a leaf: a primitive, a union of literals, a map of strings.
function fieldType(decl, type) {
  const t = type.trim().replace(/^Array<(.*)>$/s, "$1").replace(/\[\]$/, "");
  return /^\w+$/.test(t) && decl.imports.has(t) ? decl.imports.get(t) : null;
}

function unknownFields(value, dts, where, out) {
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, dts, `${where}[${i}]`, out));
    return;
  }
  if (value === null || typeof value !== "object") return;
  const decl = declarations(dts);
  if (!decl.fields) return; // an alias (Quantity, IntOrString, Time, ...)
  for (const [key, v] of Object.entries(value)) {
    if (!decl.fields.has(key)) {
      out.push(`${where}.${key}: unknown field (expected one of ${[...decl.fields.keys()].join(", ")})`);
      continue;
    }
    const inner = fieldType(decl, decl.fields.get(key));
    if (inner) unknownFields(v, inner, `${where}.${key}`, out);
  }
}

async function check(doc, where) {
  const faults = [];
  if (!doc || typeof doc.apiVersion !== "string" || typeof doc.kind !== "string")
    return [`${where}: no apiVersion and kind`];
  const dir = groupDir(doc.apiVersion);
  let Model;
  try {
    Model = (await import(pathToFileURL(join(dir, `${doc.kind}.js`)).href))[doc.kind];
  } catch {
    return [`${where}: ${doc.apiVersion} ${doc.kind} is not a Kubernetes API kind`];
  }
  try {
    new Model(doc).validate();
  } catch (e) {
    faults.push(`${where} (${doc.kind}): ${e.message.split("\n")[0]}`);
  }
  unknownFields(doc, join(dir, `${doc.kind}.d.ts`), `${where} (${doc.kind})`, faults);
  return faults;
}

async function checkAll(docs, file) {
  const faults = [];
  for (const [i, doc] of docs.entries()) faults.push(...(await check(doc, `${file} document ${i + 1}`)));
  return faults;
}

function load(file) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const d of docs) if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
  return docs.map((d) => d.toJS()).filter((d) => d !== null);
}

// Faults put into a copy of the documents, each of which must be caught.
const mutations = [
  ["a misspelt Job field", (ds) => { const j = ds.find((d) => d.kind === "Job"); j.spec.completionz = j.spec.completions; delete j.spec.completions; }],
  ["a misspelt container field", (ds) => { const c = ds.find((d) => d.kind === "Job").spec.template.spec.containers[0]; c.imagee = c.image; delete c.image; }],
  ["a misspelt Service field", (ds) => { ds.find((d) => d.kind === "Service").spec.clusterIp = "None"; }],
  ["a misspelt metadata field", (ds) => { ds[0].metadata.lables = { a: "b" }; }],
  ["a wrong enum", (ds) => { ds.find((d) => d.kind === "Job").spec.completionMode = "Indexd"; }],
  ["a wrong type", (ds) => { ds.find((d) => d.kind === "Job").spec.parallelism = "two"; }],
];

async function main(argv) {
  const self = argv[0] === "--self-test";
  const file = self ? argv[1] : argv[0];
  if (!file) {
    console.error("usage: check_manifest.mjs [--self-test] FILE.yaml");
    return 2;
  }
  const docs = load(file);
  const faults = await checkAll(docs, file);
  if (!self) {
    for (const f of faults) console.error(f);
    if (!faults.length) console.log(`${file}: ${docs.length} documents match the Kubernetes API schemas`);
    return faults.length ? 1 : 0;
  }
  if (faults.length) {
    console.error(`self-test: ${file} itself does not pass: ${faults[0]}`);
    return 1;
  }
  let missed = 0;
  for (const [what, mutate] of mutations) {
    const copy = structuredClone(docs);
    mutate(copy);
    const got = await checkAll(copy, file);
    if (!got.length) {
      console.error(`self-test: ${what} was not rejected`);
      missed++;
    } else {
      console.log(`self-test: ${what} rejected: ${got[0]}`);
    }
  }
  return missed ? 1 : 0;
}

main(process.argv.slice(2)).then((rc) => process.exit(rc), (e) => {
  console.error(`check_manifest: ${e.message}`);
  process.exit(1);
});
