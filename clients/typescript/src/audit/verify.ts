/** The offline verifier of docs/audit-format.md: an export (JSONL or CSV) or an evidence bundle,
 * checked with nothing but the file, the keys the auditor trusts and the witnesses' copies.
 *
 * It never says more than it proved (issue 28's rules): given a key or a witness, whatever no
 * trusted signature covers is `unsigned`; a check of the chain alone must be asked for
 * (`chainOnly`) and says so; a key signs only the tree sizes it may (its configured range, and
 * nothing past the checkpoint that proved its rotation); every witness copy is held against the
 * file. */

import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

import { JsonNumber, JsonValue, canonical, integer, isObject, parseJson } from "./json.js";
import { TrustedKey, keyFromRaw, verifySignature } from "./keys.js";
import { Frontier, leafHash, sha256Hex, verifyInclusion } from "./merkle.js";

export const EXPORT_FORMAT = "agentgov-audit-export/v1";
export const EVIDENCE_FORMAT = "agentgov-evidence/v1";
export const LOG_NAME = "agentgov-audit/v1";
export const GENESIS = "0".repeat(64);
export const HASHED_FIELDS = ["seq", "at", "actor", "action", "target", "agent", "before", "after",
  "reason", "request_id", "prev_hash"];
export const ENTRY_FIELDS = [...HASHED_FIELDS, "hash"];

export type Reason = "edited" | "deleted" | "truncated" | "rehashed" | "witness-mismatch"
  | "witness-missing" | "unknown-key" | "retired-key" | "unsigned";

/** The first thing wrong with a file: the seq where it shows and one plain reason. */
export class Failure extends Error {
  constructor(readonly seq: number, readonly reason: Reason, readonly detail: string) {
    super(`FAILED at seq ${seq}: ${reason}: ${detail}`);
  }
}

export interface VerifyOptions {
  keys?: TrustedKey[];
  /** A directory witness: `checkpoint-<size, 12 digits>.json` files. */
  witness?: string;
  /** Check the chain alone, proving nothing by a signature (must be asked for). */
  chainOnly?: boolean;
  format?: "jsonl" | "csv" | "evidence";
}

export interface Verdict {
  /** `proven` by trusted signatures, `chain-only` (asked for), or `failed`. */
  outcome: "proven" | "chain-only" | "failed";
  count: number;
  head: string;
  failure?: Failure;
  /** What each signed checkpoint (or the bundle's) proves, one line each. */
  proven: string[];
  /** Checkpoints listed and not verifiable offline (legacy hmac-sha256). */
  skipped: string[];
}

export function firstLine(verdict: Verdict): string {
  if (verdict.failure) return verdict.failure.message;
  const ok = `OK ${verdict.count} entries, head ${verdict.head}`;
  return verdict.outcome === "chain-only" ? `${ok}: chain only, nothing proven by a signature` : ok;
}

type Entry = Record<string, JsonValue>;
type Checkpoint = Record<string, JsonValue>;

function str(value: JsonValue | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** The chain hash of an entry: SHA-256 of canonical JSON of its hashed fields, then prev_hash. */
export function entryHash(entry: Entry): string {
  const hashed: Record<string, JsonValue> = {};
  for (const name of HASHED_FIELDS) hashed[name] = entry[name];
  return sha256Hex(Buffer.from(canonical(hashed) + String(entry.prev_hash), "utf8"));
}

export function entryLeaf(entry: Entry): string {
  const whole: Record<string, JsonValue> = {};
  for (const name of ENTRY_FIELDS) whole[name] = entry[name];
  return leafHash(canonical(whole));
}

/** Checks one entry on its own: every field there and nothing else, its hash its own. */
function checkEntry(entry: JsonValue, seq: number): Entry {
  if (!isObject(entry)) throw new Failure(seq, "edited", `entry ${seq} is not an entry object`);
  const missing = ENTRY_FIELDS.filter((name) => !Object.hasOwn(entry, name));
  if (missing.length) throw new Failure(seq, "edited", `entry ${seq} lacks ${missing.join(", ")}`);
  const extra = Object.keys(entry).filter((name) => !ENTRY_FIELDS.includes(name));
  if (extra.length) {
    throw new Failure(seq, "edited", `entry ${seq} has field(s) no hash covers: ${extra.join(", ")}`);
  }
  if (integer(entry.seq) === undefined || typeof entry.hash !== "string"
      || typeof entry.prev_hash !== "string") {
    throw new Failure(seq, "edited", `entry ${seq} has no whole-number seq or no hashes`);
  }
  return entry;
}

function checkpointName(checkpoint: Checkpoint): string {
  return `checkpoint ${canonical(checkpoint.size ?? null)} (key ${str(checkpoint.key_id)}, signed `
    + `${str(checkpoint.at)})`;
}

function signedMessage(checkpoint: Checkpoint): string {
  return canonical({ log: LOG_NAME, size: checkpoint.size, root: checkpoint.root,
    at: checkpoint.at, key_id: checkpoint.key_id });
}

/** The keys trusted now, growing with each proven rotation and bounded by retirement. */
class KeyRing {
  readonly keys = new Map<string, TrustedKey>();
  constructor(keys: TrustedKey[]) { for (const key of keys) this.keys.set(key.keyId, { ...key }); }

  /** Whether a checkpoint's signature proves it: unknown-key, retired-key, rehashed, or fine. */
  check(checkpoint: Checkpoint, size: number, root: string, failAt: number): void {
    const keyId = str(checkpoint.key_id) ?? "";
    const key = this.keys.get(keyId);
    if (!key) {
      throw new Failure(failAt, "unknown-key", `${checkpointName(checkpoint)} is signed by a key `
        + "the auditor does not trust");
    }
    if (size < key.minSize || size > key.maxSize) {
      throw new Failure(failAt, "retired-key", `${checkpointName(checkpoint)}: key ${keyId} may `
        + `sign tree sizes ${key.minSize}-${key.maxSize} only (${key.source})`);
    }
    if (!verifySignature(key, signedMessage(checkpoint), checkpoint.signature)) {
      throw new Failure(failAt, "rehashed", `the signature of ${checkpointName(checkpoint)} does `
        + "not hold");
    }
    if (str(checkpoint.root) !== root) {
      throw new Failure(failAt, "rehashed", `entries up to ${size} do not hash to the root `
        + `${checkpointName(checkpoint)} signed`);
    }
  }
}

/** Reads the witness directory's checkpoints, by size. */
function readWitness(folder: string): Map<number, { checkpoint: Checkpoint; file: string }> {
  const copies = new Map<number, { checkpoint: Checkpoint; file: string }>();
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch (error) {
    throw new UsageError(`--witness ${folder}: ${(error as Error).message}`);
  }
  for (const file of names) {
    const match = /^checkpoint-([0-9]{12})\.json$/.exec(file);
    if (!match) continue;
    const size = Number(match[1]);
    let checkpoint: JsonValue;
    try {
      checkpoint = parseJson(readFileSync(join(folder, file), "utf8"));
    } catch {
      throw new Failure(size, "witness-mismatch", `the witness file ${file} is unreadable`);
    }
    if (!isObject(checkpoint) || integer(checkpoint.size) !== size) {
      throw new Failure(size, "witness-mismatch", `the witness file ${file} is not checkpoint ${size}`);
    }
    copies.set(size, { checkpoint, file });
  }
  return copies;
}

export class UsageError extends Error {}

/** The walk over an export's entries, shared by JSONL and CSV. */
function walkExport(header: Record<string, JsonValue>, checkpoints: Checkpoint[],
                    entries: { entry: JsonValue; line: number }[], options: VerifyOptions,
                    signed: boolean): Verdict {
  const proven: string[] = [];
  const skipped: string[] = [];
  const ring = new KeyRing(options.keys ?? []);
  const witness = options.witness ? readWitness(options.witness) : null;
  const checking = !options.chainOnly;

  // An archive's continuation starts from the boundary: chain hash and the tree's frontier.
  let start = 0;
  let prev = GENESIS;
  let tree = new Frontier();
  const boundary = header.boundary;
  if (boundary !== undefined && boundary !== null) {
    const size = isObject(boundary) ? integer(boundary.size) : undefined;
    const frontier = isObject(boundary) && Array.isArray(boundary.frontier) ? boundary.frontier : null;
    if (size === undefined || size < 0 || !isObject(boundary) || typeof boundary.hash !== "string"
        || !frontier) {
      throw new Failure(1, "edited", "the header's boundary is not {size, hash, frontier}");
    }
    try {
      tree = new Frontier(frontier.map((node) => {
        if (!Array.isArray(node) || node.length !== 2 || integer(node[0]) === undefined
            || typeof node[1] !== "string") throw new Error("bad node");
        return [integer(node[0])!, node[1]] as [number, string];
      }));
    } catch {
      throw new Failure(size + 1, "edited", "the header's boundary frontier is malformed");
    }
    if (tree.size !== size) {
      throw new Failure(size + 1, "edited", `the boundary frontier makes a tree of ${tree.size}, `
        + `not ${size}`);
    }
    start = size;
    prev = boundary.hash;
  }

  // Checkpoints by size, legacy ones listed and skipped.
  const bySize = new Map<number, Checkpoint>();
  for (const checkpoint of checkpoints) {
    const size = integer(checkpoint.size);
    if (size === undefined || size < 0) {
      throw new Failure(start + 1, "edited", "a checkpoint without a whole-number size");
    }
    if (checkpoint.algorithm === "hmac-sha256") {
      skipped.push(`${checkpointName(checkpoint)}: hmac-sha256, not verifiable offline`);
      continue;
    }
    if (bySize.has(size) && canonical(bySize.get(size)) !== canonical(checkpoint)) {
      throw new Failure(size, "edited", `two different checkpoints of size ${size}`);
    }
    bySize.set(size, checkpoint);
  }

  let provenTo = start;
  let count = start;
  const rotations: Entry[] = [];
  const witnessRoots = new Map<number, string>();

  const atSize = (size: number) => {
    const root = tree.root();
    if (witness?.has(size)) witnessRoots.set(size, root);
    const checkpoint = bySize.get(size);
    if (!checkpoint || !checking) return;
    ring.check(checkpoint, size, root, provenTo + 1);
    if (witness) {
      const copy = witness.get(size);
      if (!copy) {
        throw new Failure(size, "witness-missing", `the witness holds no copy of ${checkpointName(checkpoint)}`);
      }
      if (canonical(copy.checkpoint) !== canonical(checkpoint)) {
        throw new Failure(size, "witness-mismatch", `the file's checkpoint ${size} differs from the `
          + "witness's copy");
      }
    }
    proven.push(size === start && start > 0
      ? `entries 1-${start} archived (chain head ${prev}), their tree proven by ${checkpointName(checkpoint)}`
      : `entries ${provenTo + 1}-${size} proven by ${checkpointName(checkpoint)}`);
    const signer = ring.keys.get(str(checkpoint.key_id)!)!;
    provenTo = size;
    // Rotations this checkpoint covers, signed off by a key it trusts.
    for (const rotation of rotations.splice(0)) trustRotation(rotation, checkpoint, signer, size);
  };

  const trustRotation = (rotation: Entry, covering: Checkpoint, signer: TrustedKey, size: number) => {
    const after = rotation.after;
    if (!isObject(after)) return;
    const previous = ring.keys.get(str(after.previous_key_id) ?? "");
    if (!previous || typeof after.public_key !== "string") return;
    const endorsed = canonical({ key_id: after.key_id, algorithm: after.algorithm,
      public_key: after.public_key, created_at: after.created_at });
    if (after.algorithm !== "ed25519" || !verifySignature(previous, endorsed, after.signature_by_previous)) return;
    // The rotation must be proven by the old key's own checkpoint, after which it signs nothing larger.
    if (signer.keyId !== previous.keyId) return;
    let raw: Buffer;
    try {
      raw = Buffer.from(after.public_key, "base64");
      const key = keyFromRaw(raw, `the rotation at seq ${integer(rotation.seq)}`, integer(rotation.seq));
      if (key.keyId !== after.key_id) return;
      previous.maxSize = Math.min(previous.maxSize, size);
      if (!ring.keys.has(key.keyId)) ring.keys.set(key.keyId, key);
      proven.push(`key ${key.keyId} trusted from the rotation at seq ${integer(rotation.seq)}, signed `
        + `by key ${previous.keyId} (which signs nothing past ${size})`);
    } catch {
      // not a key: vouches for nothing
    }
  };

  if (start > 0) atSize(start);
  else if (checking && bySize.has(0)) atSize(0);
  if (start > 0 && checking && provenTo < start && signed) {
    throw new Failure(start + 1, "unsigned", "no checkpoint a trusted key signed proves the archive "
      + `boundary at entry ${start}`);
  }

  for (const { entry: raw } of entries) {
    const seq = count + 1;
    const entry = checkEntry(raw, seq);
    const claimed = integer(entry.seq)!;
    if (claimed > seq) {
      throw new Failure(seq, "deleted", `entry ${seq} is missing (the next is ${claimed})`);
    }
    if (claimed < seq) throw new Failure(seq, "edited", `entry ${claimed} appears again after ${seq - 1}`);
    if (entry.prev_hash !== prev || entryHash(entry) !== entry.hash) {
      throw new Failure(seq, "edited", `entry ${seq} does not match its hash`);
    }
    prev = entry.hash as string;
    tree.append(entryLeaf(entry));
    count = seq;
    if (entry.action === "audit.key_rotated") rotations.push(entry);
    atSize(seq);
  }

  // What the file or the witness claims beyond the entries present.
  const larger = [...bySize.keys()].filter((size) => size > count).sort((a, b) => a - b);
  if (larger.length) {
    throw new Failure(count + 1, "truncated", `${checkpointName(bySize.get(larger[0])!)} covers `
      + `entries the file lacks (it ends at ${count})`);
  }
  const headerSize = integer(header.size);
  // (More entries than the header says are caught as unsigned: no checkpoint covers them.)
  if (headerSize !== undefined && headerSize > count) {
    throw new Failure(count + 1, "truncated", `the header says ${headerSize} `
      + `entries, the file ends at ${count}`);
  }
  if (witness && checking) {
    for (const [size, { checkpoint, file }] of [...witness].sort((a, b) => a[0] - b[0])) {
      if (size <= start && size !== start) continue; // before this file: an earlier file's
      if (size > count) {
        throw new Failure(count + 1, "truncated", `the witness holds ${checkpointName(checkpoint)} `
          + `(${file}), past the file's end at ${count}`);
      }
      if (bySize.has(size)) continue; // held against the file's own copy above
      // A copy the file lacks: the file's tree at that size must have its root, and a key the
      // auditor trusts must have signed it when it names one (a witness copy proves nothing
      // here by itself: it can only contradict).
      if (str(checkpoint.root) !== witnessRoots.get(size)) {
        throw new Failure(size, "witness-mismatch", `the witness's ${checkpointName(checkpoint)} `
          + `(${file}) has another root than the file's entries up to ${size}`);
      }
      const signer = ring.keys.get(str(checkpoint.key_id) ?? "");
      if (signer && !verifySignature(signer, signedMessage(checkpoint), checkpoint.signature)) {
        throw new Failure(size, "witness-mismatch", `the signature of the witness's `
          + `${checkpointName(checkpoint)} (${file}) does not hold`);
      }
    }
  }
  if (checking && provenTo < count) {
    throw new Failure(provenTo + 1, "unsigned", signed
      ? `entries ${provenTo + 1}-${count} are covered by no checkpoint a trusted key signed`
      : `a CSV export carries no checkpoints: nothing in it is signed (entries ${provenTo + 1}-`
        + `${count}); verify the JSONL export, or ask for --chain-only`);
  }
  return { outcome: checking ? "proven" : "chain-only", count, head: prev, proven, skipped };
}

function parseJsonl(text: string, options: VerifyOptions): Verdict {
  const lines = text.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  let header: Record<string, JsonValue> | null = null;
  const checkpoints: Checkpoint[] = [];
  const entries: { entry: JsonValue; line: number }[] = [];
  lines.forEach((line, index) => {
    const number = index + 1;
    let record: JsonValue;
    try {
      record = parseJson(line);
    } catch {
      throw new Failure(entries.length + 1, "edited", `line ${number} is not JSON`);
    }
    if (!isObject(record)) throw new Failure(entries.length + 1, "edited", `line ${number} is not a JSON object`);
    if (index === 0) {
      if (record.type !== "header") throw new Failure(1, "edited", "the file does not start with its header");
      if (record.format !== EXPORT_FORMAT) {
        throw new Failure(1, "edited", `unknown export format ${canonical(record.format ?? null)}`);
      }
      header = record;
      return;
    }
    if (record.type === "header") throw new Failure(entries.length + 1, "edited", `line ${number} is a second header`);
    if (record.type === "checkpoint") {
      const { type: _type, ...checkpoint } = record;
      checkpoints.push(checkpoint);
    } else if (record.type === "entry") {
      entries.push({ entry: record.entry, line: number });
    } else if (record.type !== "key") {
      throw new Failure(entries.length + 1, "edited", `line ${number} has an unknown type`);
    }
  });
  if (!header) throw new Failure(1, "edited", "the file is empty");
  const base = header as Record<string, JsonValue>;
  const start = isObject(base.boundary) ? integer(base.boundary.size) ?? 0 : 0;
  // Entries carry their own seq; the walk checks them against the count from the boundary.
  void start;
  return walkExport(base, checkpoints, entries, options, true);
}

/** RFC 4180 CSV (the export's quoting), rows of cells. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (quoted) {
      if (c === "\"" && text[i + 1] === "\"") { cell += "\""; i += 2; continue; }
      if (c === "\"") { quoted = false; i += 1; continue; }
      cell += c; i += 1; continue;
    }
    if (c === "\"" && cell === "") { quoted = true; i += 1; continue; }
    if (c === ",") { row.push(cell); cell = ""; i += 1; continue; }
    if (c === "\r" && text[i + 1] === "\n") { i += 1; continue; }
    if (c === "\n") { row.push(cell); rows.push(row); row = []; cell = ""; i += 1; continue; }
    cell += c; i += 1;
  }
  if (cell !== "" || row.length) { row.push(cell); rows.push(row); }
  return rows;
}

function parseCsvExport(text: string, options: VerifyOptions): Verdict {
  const rows = parseCsv(text);
  const [head, ...body] = rows;
  if (!head || head.join(",") !== ENTRY_FIELDS.join(",")) {
    throw new Failure(1, "edited", `the CSV's columns are not ${ENTRY_FIELDS.join(",")}`);
  }
  const entries = body.map((cells, index) => {
    const seq = index + 1;
    if (cells.length !== ENTRY_FIELDS.length) {
      throw new Failure(seq, "edited", `row ${seq + 1} has ${cells.length} cells`);
    }
    // One leading quote was added against formula injection: drop it to get the hashed value.
    const values = cells.map((cell) => (cell.startsWith("'") ? cell.slice(1) : cell));
    const entry: Record<string, JsonValue> = {};
    ENTRY_FIELDS.forEach((name, i) => {
      const value = values[i];
      if (name === "seq") {
        entry.seq = /^[0-9]+$/.test(value) ? new JsonNumber(value) : value;
      } else if (name === "before" || name === "after") {
        try {
          entry[name] = parseJson(value);
        } catch {
          throw new Failure(seq, "edited", `row ${seq + 1}: ${name} is not JSON`);
        }
      } else {
        entry[name] = value;
      }
    });
    return { entry: entry as JsonValue, line: seq + 1 };
  });
  const signedAsked = (options.keys?.length ?? 0) > 0 || Boolean(options.witness);
  if (!options.chainOnly && !signedAsked) {
    throw new UsageError("a CSV export proves order, not completeness: ask for --chain-only");
  }
  return walkExport({}, [], entries, options, false);
}

function verifyEvidence(document: Record<string, JsonValue>, options: VerifyOptions): Verdict {
  const checkpoint = document.checkpoint;
  const items = document.entries;
  if (!isObject(checkpoint) || !Array.isArray(items)) {
    throw new Failure(1, "edited", "the bundle has no checkpoint or no entries");
  }
  const size = integer(checkpoint.size);
  const root = str(checkpoint.root);
  if (size === undefined || root === undefined) {
    throw new Failure(1, "edited", "the bundle's checkpoint has no size or root");
  }
  const proven: string[] = [];
  const checking = !options.chainOnly;
  if (checking) {
    const ring = new KeyRing(options.keys ?? []);
    ring.check(checkpoint, size, root, 1);
    if (options.witness) {
      const copy = readWitness(options.witness).get(size);
      if (!copy) throw new Failure(size, "witness-missing", `the witness holds no copy of ${checkpointName(checkpoint)}`);
      if (canonical(copy.checkpoint) !== canonical(checkpoint)) {
        throw new Failure(size, "witness-mismatch", `the bundle's checkpoint ${size} differs from the witness's copy`);
      }
    }
  }
  let last = 0;
  let head = "";
  const seqs: number[] = [];
  items.forEach((item, index) => {
    const seqHint = isObject(item) && isObject(item.entry) ? integer(item.entry.seq) ?? index + 1 : index + 1;
    if (!isObject(item)) throw new Failure(seqHint, "edited", `item ${index} is not an object`);
    const entry = checkEntry(item.entry, seqHint);
    const seq = integer(entry.seq)!;
    if (seq <= last) throw new Failure(seq, "edited", `entry ${seq} is out of order`);
    if (seq > size) throw new Failure(seq, "truncated", `entry ${seq} is past the checkpoint's size ${size}`);
    if (entryHash(entry) !== entry.hash) throw new Failure(seq, "edited", `entry ${seq} does not match its hash`);
    const proof = Array.isArray(item.proof) && item.proof.every((p) => typeof p === "string")
      ? item.proof as string[] : null;
    if (integer(item.leaf_index) !== seq - 1 || !proof
        || (checking && !verifyInclusion(entryLeaf(entry), seq - 1, size, proof, root))) {
      throw new Failure(seq, "edited", `entry ${seq} is not in the tree the checkpoint signed`);
    }
    last = seq;
    head = entry.hash as string;
    seqs.push(seq);
  });
  if (checking) {
    proven.push(`${seqs.length} entries (seq ${seqs[0] ?? "-"}-${seqs[seqs.length - 1] ?? "-"}) proven by `
      + checkpointName(checkpoint));
  }
  return { outcome: checking ? "proven" : "chain-only", count: seqs.length, head, proven, skipped: [] };
}

/** Verify one file. Never throws a Failure: it is the verdict's. UsageError for a request that
 * cannot be answered as asked. */
export function verifyText(text: string, options: VerifyOptions = {}): Verdict {
  const signedAsked = (options.keys?.length ?? 0) > 0 || Boolean(options.witness);
  if (options.chainOnly && signedAsked) {
    throw new UsageError("--chain-only proves nothing by a signature: give it without --public-key "
      + "and --witness");
  }
  try {
    let format = options.format;
    if (!format) {
      let first: JsonValue = null;
      try {
        first = parseJson(text.split("\n", 1)[0]);
      } catch {
        first = null;
      }
      if (isObject(first)) format = first.type === "header" ? "jsonl" : "evidence";
      else format = text.trimStart().startsWith("{") ? "evidence" : "csv";
    }
    if (!options.chainOnly && !signedAsked && format !== "csv") {
      throw new UsageError("nothing to prove it with: give --public-key KEY (and --witness DIR), or "
        + "ask for --chain-only");
    }
    if (format === "evidence") {
      const document = parseJson(text);
      if (!isObject(document) || document.format !== EVIDENCE_FORMAT) {
        throw new Failure(1, "edited", "not an evidence bundle (format agentgov-evidence/v1)");
      }
      return verifyEvidence(document, options);
    }
    return format === "jsonl" ? parseJsonl(text, options) : parseCsvExport(text, options);
  } catch (error) {
    if (error instanceof Failure) {
      return { outcome: "failed", count: 0, head: "", failure: error, proven: [], skipped: [] };
    }
    throw error;
  }
}

export function verifyFile(path: string, options: VerifyOptions = {}): Verdict {
  return verifyText(readFileSync(path, "utf8"), options);
}

/** Builds a TrustedKey from a raw key for callers that hold one. */
export { keyFromRaw };
