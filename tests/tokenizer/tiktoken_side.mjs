// The npm tiktoken side of the tokenizer parity test and benchmark: tiktoken's Rust
// core (compiled to WebAssembly), given K3's pattern and a vocabulary, wrapped the way
// the reference K3 tokenizer wraps it (the 25,000-character run splitting first).
//
//   node tiktoken_side.mjs encode   MODEL_DIR < texts.jsonl > ids.jsonl
//   node tiktoken_side.mjs specials MODEL_DIR < texts.jsonl > ids.jsonl
//   node tiktoken_side.mjs pieces   PIECES.jsonl < texts.jsonl > ids.jsonl
//   node tiktoken_side.mjs bench    MODEL_DIR TEXT_FILE REPS > result.json
//
// encode/specials: one JSON array of ids per input line (a JSON string).
// pieces: checks pre-tokenization alone. The vocabulary is the 256 bytes plus every
// piece in PIECES.jsonl (the C++ pre-tokenizer's output for the same texts); if
// tiktoken splits a text into the same pieces, each piece encodes as its own id, and
// the output is exactly the piece ids, which the caller compares.
// bench: encodes TEXT_FILE REPS times and prints one JSON object: the median time of
// tiktoken's encode calls (the run splitting is done once, untimed), the byte count,
// the number of ids and a hash of them (h = h * 31 + id, 32-bit) to check agreement.
// Requires tiktoken in NODE_PATH or a node_modules above the current directory.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const NPM_PREFIX = process.env.NJ_NPM_PREFIX || process.cwd();
const require = createRequire(path.join(NPM_PREFIX, "noop.js"));
const { Tiktoken } = require("tiktoken/lite");

// k3-model.md §9, verbatim.
const K3_PATTERN = [
  "[\\p{Han}]+",
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  "\\p{N}{1,3}",
  " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*",
  "\\s*[\\r\\n]+",
  "\\s+(?!\\S)",
  "\\s+",
].join("|");

const MAX_RUN_CHARS = 25000;
// Python's str.isspace(): Zs, or bidirectional class WS, B or S.
const PY_SPACE = new Set([0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0,
  0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
  0x2028, 0x2029, 0x202f, 0x205f, 0x3000]);

// The reference's _split_whitespaces_or_nonwhitespaces, counting code points.
function splitRuns(s) {
  if (s.length <= MAX_RUN_CHARS) return [s];  // UTF-16 units >= code points
  const out = [];
  let isSpace = PY_SPACE.has(s.codePointAt(0));
  let len = 0, start = 0;
  for (let i = 0; i < s.length;) {
    const cp = s.codePointAt(i);
    const now = PY_SPACE.has(cp);
    if (now !== isSpace) { len = 1; isSpace = now; }
    else if (++len > MAX_RUN_CHARS) { out.push(s.slice(start, i)); start = i; len = 1; }
    i += cp > 0xffff ? 2 : 1;
  }
  out.push(s.slice(start));
  return out;
}

function specialsOf(modelDir, numRanks) {
  const config = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
  const specials = {};
  for (const [id, tok] of Object.entries(config.added_tokens_decoder || {})) specials[tok.content] = Number(id);
  for (let i = 0; i < 256; i++) {
    if (!Object.values(specials).includes(numRanks + i)) specials[`<|reserved_token_${numRanks + i}|>`] = numRanks + i;
  }
  return specials;
}

function loadModel(modelDir) {
  const ranks = fs.readFileSync(path.join(modelDir, "tiktoken.model"), "utf8");
  const numRanks = ranks.split("\n").filter((l) => l.length).length;
  return new Tiktoken(ranks, specialsOf(modelDir, numRanks), K3_PATTERN);
}

function encodeAll(enc, text, withSpecials) {
  const ids = [];
  for (const chunk of splitRuns(text)) {
    const part = withSpecials ? enc.encode(chunk, "all") : enc.encode_ordinary(chunk);
    for (const id of part) ids.push(id);
  }
  return ids;
}

function readLines(fd) {
  return fs.readFileSync(fd, "utf8").split("\n").filter((l) => l.length).map((l) => JSON.parse(l));
}

const [mode, arg, ...rest] = process.argv.slice(2);
if (mode === "encode" || mode === "specials") {
  const enc = loadModel(arg);
  const out = readLines(0).map((t) => JSON.stringify(encodeAll(enc, t, mode === "specials")));
  fs.writeSync(1, out.join("\n") + "\n");
} else if (mode === "pieces") {
  const lines = [];
  const seen = new Set();
  for (let b = 0; b < 256; b++) lines.push(Buffer.from([b]).toString("base64") + " " + b);
  for (const pieces of readLines(arg)) {
    for (const p of pieces) {
      const key = Buffer.from(p, "utf8").toString("base64");
      if (Buffer.byteLength(p, "utf8") > 1 && !seen.has(key)) {
        seen.add(key);
        lines.push(key + " " + lines.length);
      }
    }
  }
  const enc = new Tiktoken(lines.join("\n"), {}, K3_PATTERN);
  const out = readLines(0).map((t) => JSON.stringify(encodeAll(enc, t, false)));
  fs.writeSync(1, out.join("\n") + "\n");
  fs.writeSync(2, `pieces vocabulary: ${lines.length} tokens\n`);
} else if (mode === "bench") {
  const enc = loadModel(arg);
  const text = fs.readFileSync(rest[0], "utf8");
  const reps = Number(rest[1] || 5);
  const chunks = splitRuns(text);  // not timed: only tiktoken's own work is
  const times = [];
  let ids = null;
  for (let r = 0; r < reps; r++) {
    const t0 = process.hrtime.bigint();
    const parts = chunks.map((c) => enc.encode_ordinary(c));
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
    ids = parts.flatMap((p) => Array.from(p));
  }
  times.sort((a, b) => a - b);
  const hash = ids.reduce((h, id) => (Math.imul(h, 31) + id) >>> 0, 7);
  process.stdout.write(JSON.stringify({
    median_s: times[Math.floor(times.length / 2)], bytes: Buffer.byteLength(text, "utf8"),
    num_ids: ids.length, ids_hash: hash, tiktoken_version: JSON.parse(fs.readFileSync(
      path.join(NPM_PREFIX, "node_modules", "tiktoken", "package.json"), "utf8")).version,
  }) + "\n");
} else {
  console.error("usage: node tiktoken_side.mjs encode|specials|pieces|bench ...");
  process.exit(2);
}
