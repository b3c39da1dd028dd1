/** The offline verifier of docs/audit-format.md: an export (JSONL or CSV) or an evidence bundle,
 * checked with nothing but the file, the keys the auditor trusts and the witnesses' copies.
 *
 * It never says more than it proved (issue 28's rules): given a key or a witness, whatever no
 * trusted signature covers is `unsigned`; a check of the chain alone must be asked for
 * (`chainOnly`) and says so; a key signs only the tree sizes it may (its configured range, and
 * nothing past the checkpoint that proved its rotation); every witness copy is held against the
 * file. */

import { readFileSync, readdirSync } from "node:fs";
import { basename, join } from "node:path";

import { JsonNumber, JsonValue, canonical, integer, isObject, parseJson } from "./json.js";
import { TrustedKey, keyFromRaw, verifySignature } from "./keys.js";
import { Frontier, leafHash, sha256Hex, verifyConsistency, verifyInclusion } from "./merkle.js";

export const EXPORT_FORMAT = "agentgov-audit-export/v1";
export const EVIDENCE_FORMAT = "agentgov-evidence/v1";
export const REPORT_FORMAT = "agentgov-framework-report/v1";
export const LOG_NAME = "agentgov-audit/v1";
export const GENESIS = "0".repeat(64);
export const HASHED_FIELDS = ["seq", "at", "actor", "action", "target", "agent", "before", "after",
  "reason", "request_id", "prev_hash"];
export const ENTRY_FIELDS = [...HASHED_FIELDS, "hash"];

export type Reason = "edited" | "deleted" | "truncated" | "rehashed" | "witness-mismatch"
  | "witness-missing" | "unknown-key" | "retired-key" | "unsigned";

/** The first thing wrong with a file: the seq where it shows and one plain reason (none for a
 * chain checked alone that breaks: `BROKEN at seq S`, as `agentctl audit verify` says it). */
export class Failure extends Error {
  constructor(readonly seq: number, readonly reason: Reason | null, readonly detail: string) {
    super(reason === null ? `BROKEN at seq ${seq}` : `FAILED at seq ${seq}: ${reason}: ${detail}`);
  }

  /** The same failure, said of one of several files joined as one trail. */
  in(file: string): Failure {
    return new Failure(this.seq, this.reason ?? "edited", `${file}: ${this.detail
      || "an entry does not hold (edited, or out of order)"}`);
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
  return verdict.outcome === "chain-only"
    ? `CHAIN ONLY ${verdict.count} entries, head ${verdict.head}: chain only, nothing proven by a signature`
    : `OK ${verdict.count} entries, head ${verdict.head}`;
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
  check(checkpoint: Checkpoint, size: number, root: string, failAt: number,
        otherRoot: Reason = "rehashed"): void {
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
      throw new Failure(failAt, otherRoot, `entries up to ${size} do not hash to the root `
        + `${checkpointName(checkpoint)} signed`);
    }
  }
}

/** Reads the witness directory's checkpoints, by size. A directory that is not there (or cannot
 * be listed) holds none, as for `agentctl audit verify`: the file's checkpoints are then
 * `witness-missing`, and nothing is proven by it. */
function readWitness(folder: string): Map<number, { checkpoint: Checkpoint; file: string }> {
  const copies = new Map<number, { checkpoint: Checkpoint; file: string }>();
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    return copies;
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

type Witness = Map<number, { checkpoint: Checkpoint; file: string }>;

/** Where the walk over one file ended, and where it started: what a file joined after it must
 * continue, and what it must have continued. */
interface Walk {
  header: Record<string, JsonValue>;
  start: number;
  startHash: string;
  startNodes: [number, string][];
  count: number;
  head: string;
  tree: Frontier;
  ring: KeyRing;
  proven: string[];
  skipped: string[];
}

/** The signed fields of a checkpoint, the algorithm and the signature: what a witness's copy
 * must repeat exactly. */
function signedPart(checkpoint: Checkpoint): string {
  return canonical({ size: checkpoint.size ?? null, root: checkpoint.root ?? null,
    at: checkpoint.at ?? null, key_id: checkpoint.key_id ?? null,
    algorithm: checkpoint.algorithm ?? null, signature: checkpoint.signature ?? null });
}

/** The archive boundary a file starts after: entry `size`'s hash and the tree at `size` as its
 * complete subtrees, largest first. */
function readBoundary(boundary: JsonValue | undefined): { size: number; hash: string; tree: Frontier } | null {
  if (boundary === undefined || boundary === null) return null;
  const unreadable = new Failure(1, "edited", "the header's archive boundary is unreadable");
  if (!isObject(boundary) || typeof boundary.hash !== "string" || !Array.isArray(boundary.frontier)) {
    throw unreadable;
  }
  const size = integer(boundary.size);
  if (size === undefined) throw unreadable;
  let tree: Frontier;
  try {
    tree = new Frontier(boundary.frontier.map((node) => {
      if (!Array.isArray(node) || node.length !== 2 || integer(node[0]) === undefined
          || typeof node[1] !== "string" || !/^[0-9a-fA-F]{64}$/.test(node[1])) throw new Error("bad node");
      return [integer(node[0])!, node[1].toLowerCase()] as [number, string];
    }));
  } catch {
    throw new Failure(1, "edited", "the header's archive boundary is not a tree of its size");
  }
  if (size < 1 || tree.size !== size) {
    throw new Failure(1, "edited", "the header's archive boundary is not a tree of its size");
  }
  return { size, hash: boundary.hash, tree };
}

/** One pass over a v1 export's entries (or, `entries`, a CSV's or an entries-only JSONL's, which
 * only a witness's signed checkpoints can prove): the chain, the tree, and each checkpoint as the
 * walk reaches its size. Everything must end proven by a key in `ring`. */
function walkExport(header: Record<string, JsonValue>, checkpoints: Checkpoint[], entries: JsonValue[],
                    ring: KeyRing, witness: Witness | null, kind: "export" | "entries"): Walk {
  const proven: string[] = [];
  const skipped: string[] = [];
  const boundary = readBoundary(header.boundary);
  const start = boundary?.size ?? 0;
  let prev = boundary?.hash ?? GENESIS;
  const tree = boundary?.tree ?? new Frontier();
  const startNodes = tree.nodes.map(([level, hash]) => [level, hash] as [number, string]);

  // The checkpoints still to prove, by size: the file's own (a size given twice is proven twice:
  // each copy must hold on its own), then the witness's copies it lacks (which must hold for the
  // file all the same). Those before the boundary proved an archive.
  const pending = new Map<number, { checkpoint: Checkpoint; witnessed: boolean }[]>();
  for (const checkpoint of checkpoints) {
    if (checkpoint.algorithm !== "ed25519") {
      skipped.push(`${checkpointName(checkpoint)}: ${String(checkpoint.algorithm)}, not verifiable offline`);
      continue;
    }
    const size = integer(checkpoint.size);
    if (size === undefined || size < 0) throw new Failure(1, "edited", "a checkpoint has no valid size");
    if (size < start) continue;
    pending.set(size, [...pending.get(size) ?? [], { checkpoint, witnessed: false }]);
  }
  if (witness) {
    for (const [size, { checkpoint: copy }] of [...witness].sort((a, b) => a[0] - b[0])) {
      if (size < start) continue;
      const mine = pending.get(size);
      if (!mine) pending.set(size, [{ checkpoint: copy, witnessed: true }]);
      else if (signedPart(mine[mine.length - 1].checkpoint) !== signedPart(copy)) {
        throw new Failure(size, "witness-mismatch", `the file's checkpoint ${size} differs from the `
          + "witness's copy");
      }
    }
    for (const [size, due] of [...pending].sort((a, b) => a[0] - b[0])) {
      if (!due[0].witnessed && !witness.has(size)) {
        throw new Failure(size, "witness-missing", `the witness holds no copy of checkpoint ${size}`);
      }
    }
  }

  let provenTo = start;
  let count = start;
  const rotations: Entry[] = [];

  const trustRotation = (rotation: Entry, signer: TrustedKey, size: number) => {
    const after = rotation.after;
    if (!isObject(after)) return;
    const previous = ring.keys.get(str(after.previous_key_id) ?? "");
    if (!previous || typeof after.public_key !== "string") return;
    const endorsed = canonical({ key_id: after.key_id, algorithm: after.algorithm,
      public_key: after.public_key, created_at: after.created_at });
    if (after.algorithm !== "ed25519" || !verifySignature(previous, endorsed, after.signature_by_previous)) return;
    // The rotation must be proven by the old key's own checkpoint, after which it signs nothing larger.
    if (signer.keyId !== previous.keyId) return;
    try {
      const raw = Buffer.from(after.public_key, "base64");
      const key = keyFromRaw(raw, `the rotation at seq ${integer(rotation.seq)}`, size);
      if (key.keyId !== after.key_id) return;
      previous.maxSize = Math.min(previous.maxSize, size);
      if (!ring.keys.has(key.keyId)) ring.keys.set(key.keyId, key);
      proven.push(`key ${key.keyId} trusted from the rotation at seq ${integer(rotation.seq)}, signed `
        + `by key ${previous.keyId} (which signs nothing past ${size})`);
    } catch {
      // not a key: vouches for nothing
    }
  };

  const atSize = (size: number) => {
    for (const due of pending.get(size) ?? []) prove(size, due);
    pending.delete(size);
  };

  const prove = (size: number, { checkpoint, witnessed }: { checkpoint: Checkpoint; witnessed: boolean }) => {
    ring.check(checkpoint, size, tree.root(), provenTo + 1, witnessed ? "witness-mismatch" : "rehashed");
    const by = `${witnessed ? "witnessed " : ""}${checkpointName(checkpoint)}`;
    proven.push(size === start && start > 0
      ? `entries 1-${start} archived (chain head ${prev}), their tree proven by ${by}`
      : `entries ${provenTo + 1}-${size} proven by ${by}`);
    provenTo = Math.max(provenTo, size);
    const signer = ring.keys.get(str(checkpoint.key_id)!)!;
    for (const rotation of rotations.splice(0)) trustRotation(rotation, signer, size);
  };

  atSize(start);
  if (provenTo < start) {
    throw new Failure(start + 1, "unsigned", "no checkpoint a trusted key signed proves the archive "
      + `boundary at entry ${start}`);
  }
  for (const raw of entries) {
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
  const larger = [...pending.keys()].sort((a, b) => a - b);
  if (larger.length) {
    throw new Failure(count + 1, "truncated", `${checkpointName(pending.get(larger[0])![0].checkpoint)} `
      + `covers entries the file lacks (it ends at ${count})`);
  }
  const headerSize = integer(header.size);
  if (headerSize !== undefined && headerSize > count) {
    throw new Failure(count + 1, "truncated", `the header says ${headerSize} entries, the file ends `
      + `at ${count}`);
  }
  if (provenTo < count) {
    throw new Failure(provenTo + 1, "unsigned", `entries ${provenTo + 1}-${count} are not proven: `
      + (kind === "entries" ? "the file carries no signed checkpoint and the witness none that covers them"
        : "no checkpoint a trusted key signed covers them"));
  }
  return { header, start, startHash: boundary?.hash ?? GENESIS, startNodes, count, head: prev, tree,
    ring, proven, skipped };
}

/** The chain alone (`--chain-only`): each entry holds and follows the one before, from entry
 * `after` (whose hash is `prev`). A break is `BROKEN at seq S`; a file that starts past `after + 1`
 * is `deleted` (archived entries belong before it). */
function walkChain(entries: JsonValue[], after = 0, prev = GENESIS): { count: number; head: string } {
  let expected = after + 1;
  for (const entry of entries) {
    let holds = false;
    if (isObject(entry) && integer(entry.seq) === expected && entry.prev_hash === prev
        && typeof entry.hash === "string" && HASHED_FIELDS.every((name) => Object.hasOwn(entry, name))) {
      try {
        holds = entryHash(entry) === entry.hash;
      } catch {
        holds = false;
      }
    }
    if (!holds) {
      const first = isObject(entry) ? integer(entry.seq) : undefined;
      if (expected === after + 1 && first !== undefined && first > expected) {
        throw new Failure(expected, "deleted", `the file starts at entry ${first}: entries ${expected}-`
          + `${first - 1} are not in it (archived entries: pass the archive files before it)`);
      }
      throw new Failure(expected, null, "");
    }
    prev = (entry as Entry).hash as string;
    expected += 1;
  }
  return { count: expected - 1, head: prev };
}

/** A v1 export's records: its header, its checkpoints and its entries, in file order. */
function parseExport(text: string): { header: Record<string, JsonValue>; checkpoints: Checkpoint[];
  entries: JsonValue[] } {
  const lines = text.split("\n");
  let header: Record<string, JsonValue> | null = null;
  let offset = 0;
  const checkpoints: Checkpoint[] = [];
  const entries: JsonValue[] = [];
  lines.forEach((line, index) => {
    if (!line.trim()) return;
    const number = index + 1;
    const seq = offset + entries.length + 1;
    let record: JsonValue;
    try {
      record = parseJson(line);
    } catch {
      record = null;
    }
    if (!isObject(record)) throw new Failure(seq, "edited", `line ${number} is not a JSON object`);
    if (record.type === "header") {
      if (header !== null || number !== 1) throw new Failure(seq, "edited", `line ${number} is a second header`);
      if (record.format !== EXPORT_FORMAT) {
        throw new Failure(1, "edited", `unknown export format ${canonical(record.format ?? null)}`);
      }
      header = record;
      const boundary = isObject(record.boundary) ? integer(record.boundary.size) : undefined;
      offset = boundary ?? 0;
      return;
    }
    if (header === null) throw new Failure(1, "edited", "the file has no v1 export header");
    if (record.type === "checkpoint") {
      if (entries.length) throw new Failure(seq, "edited", "a checkpoint follows the entries");
      const { type: _type, ...checkpoint } = record;
      checkpoints.push(checkpoint);
    } else if (record.type === "entry") {
      entries.push(record.entry ?? null);
    }
  });
  if (!header) throw new Failure(1, "edited", "the file has no v1 export header");
  return { header, checkpoints, entries };
}

/** An entries-only JSONL: one entry object per line (a line that is not JSON: null). */
function jsonlEntries(text: string): JsonValue[] {
  const lines = text.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  return lines.map((line) => {
    try {
      return parseJson(line);
    } catch {
      return null;
    }
  });
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

/** A CSV export's rows back to entries: one added leading quote dropped from each cell, seq a
 * number, before and after parsed (a row that cannot be read: null). */
function csvEntries(text: string): JsonValue[] {
  const [head, ...body] = parseCsv(text);
  const columns = head ?? [];
  return body.map((cells) => {
    if (cells.length !== columns.length || !ENTRY_FIELDS.every((name) => columns.includes(name))) return null;
    const entry: Record<string, JsonValue> = {};
    try {
      columns.forEach((name, i) => {
        const value = cells[i].startsWith("'") ? cells[i].slice(1) : cells[i];
        if (name === "seq") {
          if (!/^-?[0-9]+$/.test(value.trim())) throw new Error("seq");
          entry.seq = new JsonNumber(String(Number(value.trim())));
        } else if (name === "before" || name === "after") {
          entry[name] = parseJson(value);
        } else {
          entry[name] = value;
        }
      });
    } catch {
      return null;
    }
    return entry as JsonValue;
  });
}

/** An ISO 8601 time as microseconds since the epoch (UTC when it names no offset), exact to the
 * microsecond as the format writes it; undefined when it is not one. */
function moment(text: JsonValue | undefined): number | undefined {
  if (typeof text !== "string") return undefined;
  const match = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d{1,6}))?)?(Z|[+-]\d{2}:\d{2})?$/
    .exec(text);
  if (!match) return undefined;
  const [, day, time, fraction, zone] = match;
  const millis = Date.parse(`${day}T${time ?? "00:00"}${time && time.length === 5 ? ":00" : ""}${zone ?? "Z"}`);
  if (Number.isNaN(millis)) return undefined;
  return millis * 1000 + Number((fraction ?? "").padEnd(6, "0"));
}

/** An evidence bundle's consistency proofs, by the smaller size each starts from (an absent list
 * holds none; one that cannot be read is `edited`). */
function consistencyProofs(consistency: JsonValue | undefined): Map<number, string[]> {
  const proofs = new Map<number, string[]>();
  if (consistency === undefined || consistency === null) return proofs;
  const unreadable = new Failure(1, "edited", "the bundle's consistency proofs are unreadable");
  if (!Array.isArray(consistency)) throw unreadable;
  for (const item of consistency) {
    const size = isObject(item) ? integer(item.size) : undefined;
    const proof = isObject(item) ? item.proof : undefined;
    if (size === undefined || !Array.isArray(proof) || !proof.every((node) => typeof node === "string")) {
      throw unreadable;
    }
    proofs.set(size, proof as string[]);
  }
  return proofs;
}

/** Holds every witness checkpoint smaller than the bundle's (`size`, `root`) against it: signed
 * by a trusted key (for its size), and proven a prefix of the bundle's tree by the consistency
 * proof the bundle carries for its size. A copy that is not is `witness-mismatch` at its size
 * (`unknown-key` or `retired-key` when its key is the reason): a bundle signed over a rewritten
 * past, even by the real key. Larger copies (made after the bundle) are only counted. Returns
 * what was shown, one line each. */
function checkWitnessed(size: number, root: string, proofs: Map<number, string[]>, witness: Witness,
                        ring: KeyRing): string[] {
  const earlier = [...witness].filter(([before]) => before > 0 && before < size)
    .sort((a, b) => a[0] - b[0]);
  for (const [before, { checkpoint: copy }] of earlier) {
    const name = `the witness's ${checkpointName(copy)}`;
    const copyRoot = str(copy.root) ?? "";
    try {
      ring.check(copy, before, copyRoot, before);
    } catch (error) {
      if (!(error instanceof Failure)) throw error;
      throw new Failure(before, error.reason === "rehashed" ? "witness-mismatch" : error.reason,
        `${name}: ${error.detail} (another trail's witness, or a forged copy)`);
    }
    const proof = proofs.get(before);
    if (!proof) {
      throw new Failure(before, "witness-mismatch", `the bundle carries no consistency proof from `
        + `${name} to its checkpoint ${size}: nothing shows its entries extend what the witness saw `
        + `(the control plane adds one for every checkpoint it holds: checkpoint ${before} is `
        + "missing from its trail)");
    }
    if (!verifyConsistency(before, size, proof.map((node) => node.toLowerCase()), copyRoot, root)) {
      throw new Failure(before, "witness-mismatch", `the bundle's checkpoint ${size} does not extend `
        + `${name}: the trail was rewritten at or below entry ${before} after the witness saw it`);
    }
  }
  const later = [...witness.keys()].filter((s) => s > size).length;
  return [`${earlier.length} earlier witness checkpoints proven consistent with it`,
    ...(later ? [`${later} witness checkpoints larger than the bundle's are not held against it `
      + "(made after it)"] : [])];
}

/** A bundle's checkpoint: signed by a trusted key and, with a witness, every smaller witness
 * checkpoint proven a prefix of it and its own copy at the witness. Returns (size, root, what the
 * witness showed). */
function checkBundleHead(document: Record<string, JsonValue>, options: VerifyOptions,
                         ring: KeyRing): { size: number; root: string; shown: string[] } {
  const checkpoint = document.checkpoint;
  if (!isObject(checkpoint) || !Array.isArray(document.entries)) {
    throw new Failure(1, "edited", "the bundle has no checkpoint or no entries");
  }
  const size = integer(checkpoint.size);
  const root = str(checkpoint.root);
  if (size === undefined || root === undefined) {
    throw new Failure(1, "edited", "the bundle's checkpoint has no size or root");
  }
  const shown: string[] = [];
  if (!options.chainOnly) {
    ring.check(checkpoint, size, root, 1);
    if (options.witness) {
      const witness = readWitness(options.witness);
      shown.push(...checkWitnessed(size, root, consistencyProofs(document.consistency), witness, ring));
      const copy = witness.get(size);
      if (!copy) throw new Failure(size, "witness-missing", `the witness holds no copy of ${checkpointName(checkpoint)}`);
      if (signedPart(copy.checkpoint) !== signedPart(checkpoint)) {
        throw new Failure(size, "witness-mismatch", `the bundle's checkpoint ${size} differs from the witness's copy`);
      }
    }
  }
  return { size, root, shown };
}

/** One bundle item's entry, after its order, its place under the checkpoint and its hash;
 * `scope` then checks whose entry it is and when; then its inclusion proof. */
function checkBundleItem(item: JsonValue, index: number, last: number, size: number, root: string,
                         checking: boolean, scope: (entry: Entry, seq: number) => void): Entry {
  const seqHint = isObject(item) && isObject(item.entry) ? integer(item.entry.seq) ?? index + 1 : index + 1;
  if (!isObject(item)) throw new Failure(seqHint, "edited", `item ${index} is not an object`);
  const entry = checkEntry(item.entry, seqHint);
  const seq = integer(entry.seq)!;
  if (seq <= last) throw new Failure(last + 1, "edited", `the entry after seq ${last} is out of order`);
  if (seq > size) throw new Failure(seq, "truncated", `entry ${seq} is past the checkpoint's size ${size}`);
  if (entryHash(entry) !== entry.hash) throw new Failure(seq, "edited", `entry ${seq} does not match its hash`);
  scope(entry, seq);
  const proof = Array.isArray(item.proof) && item.proof.every((p) => typeof p === "string")
    ? item.proof as string[] : null;
  if (integer(item.leaf_index) !== seq - 1 || !proof
      || (checking && !verifyInclusion(entryLeaf(entry), seq - 1, size, proof, root))) {
    throw new Failure(seq, "edited", `entry ${seq} is not in the tree the checkpoint signed`);
  }
  return entry;
}

function verifyEvidence(document: Record<string, JsonValue>, options: VerifyOptions): Verdict {
  const checkpoint = document.checkpoint as Checkpoint;
  const checking = !options.chainOnly;
  const { size, root, shown } = checkBundleHead(document, options, new KeyRing(options.keys ?? []));
  const proven: string[] = [];
  let last = 0;
  let head = "";
  const seqs: number[] = [];
  const start = moment(document.from);
  const end = moment(document.to);
  (document.entries as JsonValue[]).forEach((item, index) => {
    const entry = checkBundleItem(item, index, last, size, root, checking, (entry, seq) => {
      if (entry.agent !== document.agent) throw new Failure(seq, "edited", `entry ${seq} is about another agent`);
      const at = moment(entry.at);
      if (at === undefined || (start !== undefined && at < start) || (end !== undefined && at > end)) {
        throw new Failure(seq, "edited", `entry ${seq} lies outside the bundle's period`);
      }
    });
    last = integer(entry.seq)!;
    head = entry.hash as string;
    seqs.push(last);
  });
  if (checking) {
    proven.push(`${seqs.length} entries (seq ${seqs[0] ?? "-"}-${seqs[seqs.length - 1] ?? "-"}) proven by `
      + checkpointName(checkpoint), ...shown);
  }
  return { outcome: checking ? "proven" : "chain-only", count: seqs.length, head, proven, skipped: [] };
}

/** The entry seqs and tree head sizes a framework report's items cite. */
function reportCites(report: JsonValue): { seqs: Set<number>; heads: Set<number> } {
  const seqs = new Set<number>();
  const heads = new Set<number>();
  const unreadable = () => new Failure(1, "edited", "the report's controls are unreadable");
  if (!isObject(report) || !Array.isArray(report.controls)) throw unreadable();
  for (const control of report.controls) {
    if (!isObject(control) || !Array.isArray(control.queries)) throw unreadable();
    for (const query of control.queries) {
      if (!isObject(query) || !Array.isArray(query.items)) throw unreadable();
      for (const item of query.items) {
        if (!isObject(item) || !Array.isArray(item.entries) || !Array.isArray(item.heads)) throw unreadable();
        for (const seq of item.entries) seqs.add(integer(seq) ?? NaN);
        for (const size of item.heads) heads.add(integer(size) ?? NaN);
      }
    }
  }
  if ([...seqs, ...heads].some(Number.isNaN)) throw unreadable();
  return { seqs, heads };
}

/** A framework report bundle (docs/frameworks.md): its checkpoint as an evidence bundle's; the
 * SHA-256 of the report's canonical JSON recorded by an `audit.exported` entry proven under it;
 * every entry the report cites carried and proven; every tree head it cites signed by a trusted
 * key. A colour changed after signing has no entry recording its digest: edited. */
function verifyReport(document: Record<string, JsonValue>, options: VerifyOptions): Verdict {
  const report = document.report;
  if (!isObject(report)) throw new Failure(1, "edited", "the file is not a v1 framework report bundle");
  const ring = new KeyRing(options.keys ?? []);
  const checkpoint = document.checkpoint as Checkpoint;
  const { size, root, shown } = checkBundleHead(document, options, ring);
  const digest = sha256Hex(canonical(report));
  let last = 0;
  let head = "";
  let fetched = 0;
  const carried = new Set<number>();
  (document.entries as JsonValue[]).forEach((item, index) => {
    const entry = checkBundleItem(item, index, last, size, root, true, (entry, seq) => {
      if (typeof report.agent === "string" && report.agent && entry.agent !== report.agent) {
        throw new Failure(seq, "edited", `entry ${seq} is about another agent`);
      }
    });
    last = integer(entry.seq)!;
    head = entry.hash as string;
    carried.add(last);
    const after = isObject(entry.after) ? entry.after : {};
    if (entry.action === "audit.exported" && after.digest === digest && after.framework === report.framework) {
      fetched = last;
    }
  });
  if (!fetched) {
    throw new Failure(size, "edited", "no entry of the signed trail records this report's digest: the "
      + "report was changed after it was signed, or is not the one fetched");
  }
  const { seqs, heads } = reportCites(report);
  const missing = [...seqs].filter((seq) => !carried.has(seq)).sort((a, b) => a - b);
  if (missing.length) {
    throw new Failure(missing[0], "deleted", `entry ${missing[0]}, which the report cites as evidence, `
      + "is not in the bundle");
  }
  const signedHeads = new Map<number, Checkpoint>();
  for (const copy of Array.isArray(document.heads) ? document.heads : []) {
    const at = isObject(copy) ? integer(copy.size) : undefined;
    if (at !== undefined) signedHeads.set(at, copy as Checkpoint);
  }
  for (const at of [...heads].sort((a, b) => a - b)) {
    const copy = signedHeads.get(at);
    if (!copy) throw new Failure(at, "deleted", `tree head ${at}, which the report cites, is not in the bundle`);
    ring.check(copy, at, str(copy.root) ?? "", at);
  }
  const counts = isObject(report.counts) ? report.counts : {};
  const count = (colour: string) => integer(counts[colour]) ?? 0;
  return { outcome: "proven", count: carried.size, head, skipped: [], proven: [
    `report ${str(report.framework)} for ${str(report.scope)} from ${str(report.from)} to `
      + `${str(report.to)} (${count("green")} green, ${count("amber")} amber, ${count("red")} red) `
      + `recorded by entry ${fetched}, proven by ${checkpointName(checkpoint)}`,
    `${carried.size} entries it cites proven, ${heads.size} tree heads it cites signed by a trusted key`,
    ...shown] };
}

export type Kind = "export" | "evidence" | "report" | "jsonl" | "csv";

/** What a file is: an evidence bundle, a v1 export, an entries-only JSONL, or a CSV export. */
export function sniff(text: string, path = ""): Kind {
  if (path.toLowerCase().endsWith(".csv")) return "csv";
  const line = text.split("\n", 1)[0];
  let first: JsonValue = null;
  try {
    first = parseJson(line);
  } catch {
    try { // a pretty-printed evidence bundle spans lines
      first = line.trimStart().startsWith("{") ? parseJson(text) : null;
    } catch {
      first = null;
    }
  }
  if (isObject(first) && first.format === EVIDENCE_FORMAT) return "evidence";
  if (isObject(first) && first.format === REPORT_FORMAT) return "report";
  if (isObject(first) && first.type === "header") return "export";
  return isObject(first) || line.trimStart().startsWith("{") ? "jsonl" : "csv";
}

function failed(error: unknown): Verdict {
  if (error instanceof Failure) {
    return { outcome: "failed", count: 0, head: "", failure: error, proven: [], skipped: [] };
  }
  throw error;
}

/** Verify one file (`name` is how messages call it). Never throws a Failure: it is the
 * verdict's. UsageError for a request that cannot be answered as asked: nothing to prove the file
 * with (no `--public-key`, and no `--chain-only` where the chain alone can be checked), or
 * `--chain-only` for a file its signatures prove. */
export function verifyText(text: string, options: VerifyOptions = {}, name = "the file"): Verdict {
  const keys = options.keys ?? [];
  const sniffed = sniff(text, name);
  let kind: Kind = options.format === "evidence" ? "evidence" : options.format ?? sniffed;
  if (kind === "jsonl" && (sniffed === "export" || sniffed === "evidence" || sniffed === "report")) {
    kind = sniffed;
  }
  try {
    if (kind === "csv" || kind === "jsonl") {
      const entries = kind === "csv" ? csvEntries(text) : jsonlEntries(text);
      if (options.chainOnly) {
        const { count, head } = walkChain(entries);
        return { outcome: "chain-only", count, head, proven: [], skipped: [] };
      }
      if (!keys.length) {
        throw new UsageError(`${name} carries no signed checkpoint: pass --public-key (and --witness, `
          + "whose signed checkpoints can prove it), or --chain-only to check its chain alone");
      }
      const witness = options.witness ? readWitness(options.witness) : null;
      const walk = walkExport({}, [], entries, new KeyRing(keys), witness, "entries");
      return { outcome: "proven", count: walk.count, head: walk.head, proven: walk.proven, skipped: [] };
    }
    if (options.chainOnly) {
      throw new UsageError(`--chain-only is for a CSV or entries-only JSONL; ${name} is an ${kind}, `
        + "proven by its signed checkpoints");
    }
    if (!keys.length) throw new UsageError(`an ${kind} is proven by signed checkpoints: pass --public-key`);
    if (kind === "evidence") {
      let document: JsonValue;
      try {
        document = parseJson(text);
      } catch {
        throw new Failure(1, "edited", "the bundle is not JSON");
      }
      if (!isObject(document) || document.format !== EVIDENCE_FORMAT) {
        throw new Failure(1, "edited", "not an evidence bundle (format agentgov-evidence/v1)");
      }
      return verifyEvidence(document, options);
    }
    if (kind === "report") {
      let document: JsonValue;
      try {
        document = parseJson(text);
      } catch {
        throw new Failure(1, "edited", "the bundle is not JSON");
      }
      if (!isObject(document) || document.format !== REPORT_FORMAT) {
        throw new Failure(1, "edited", "not a framework report bundle (format agentgov-framework-report/v1)");
      }
      return verifyReport(document, options);
    }
    const witness = options.witness ? readWitness(options.witness) : null;
    const { header, checkpoints, entries } = parseExport(text);
    const walk = walkExport(header, checkpoints, entries, new KeyRing(keys), witness, "export");
    return { outcome: "proven", count: walk.count, head: walk.head, proven: walk.proven,
      skipped: walk.skipped };
  } catch (error) {
    return failed(error);
  }
}

export function verifyFile(path: string, options: VerifyOptions = {}): Verdict {
  return verifyText(readFileSync(path, "utf8"), options, basename(path));
}

/** Why `after` does not continue `before` exactly, if it does not: it must start at the entry,
 * chain hash and tree frontier the walk of `before` ended with. */
function joinFailure(before: Walk, after: Walk, name: string): Failure | null {
  if (after.start > before.count) {
    return new Failure(before.count + 1, "deleted", `${name} starts after entry ${after.start}, but `
      + `the file before it ends at entry ${before.count}: entries are in neither`);
  }
  if (after.start < before.count) {
    return new Failure(after.start + 1, "edited", `${name} starts after entry ${after.start}, inside `
      + `the file before it (which ends at entry ${before.count})`);
  }
  if (after.startHash !== before.head || canonical(after.startNodes) !== canonical(before.tree.nodes)) {
    return new Failure(before.count + 1, "edited", `${name} does not continue the chain and tree the `
      + `file before it ends with at entry ${before.count}`);
  }
  return null;
}

/** The boundary size a file's header says it starts after (none when it cannot be read). */
function startsAfter(text: string): number | undefined {
  try {
    const header = parseJson(text.split("\n", 1)[0]);
    return isObject(header) && isObject(header.boundary) ? integer(header.boundary.size) : undefined;
  } catch {
    return undefined;
  }
}

/** Verify several files as one trail (docs/audit-format.md, "Archives and the boundary"):
 * archive files oldest first, then the live export (or a CSV export of it). Each v1 export proves
 * itself, each next one must start exactly where the one before ends, and keys a proven rotation
 * vouches for carry over. The witness is held against the last file, and against an earlier one
 * up to where the next begins. A CSV last is proven by no signature: `unsigned`, or with
 * `chainOnly` its rows must continue the chain (and the verdict says chain only). */
export function verifyFiles(paths: string[], options: VerifyOptions = {}): Verdict {
  if (paths.length === 1) return verifyFile(paths[0], options);
  if (!paths.length) throw new UsageError("give a FILE");
  const texts = paths.map((path) => readFileSync(path, "utf8"));
  const names = paths.map((path) => basename(path));
  const spreadsheet = sniff(texts[texts.length - 1], paths[paths.length - 1]) === "csv";
  const exports = spreadsheet ? paths.length - 1 : paths.length;
  if (texts.slice(0, exports).some((text, i) => sniff(text, paths[i]) !== "export")) {
    throw new UsageError("only v1 exports (archives, then the live export or a CSV export) are joined");
  }
  const keys = options.keys ?? [];
  if (!keys.length) throw new UsageError("an export is proven by signed checkpoints: pass --public-key");
  try {
    const witness = options.witness ? readWitness(options.witness) : null;
    const ring = new KeyRing(keys);
    const proven: string[] = [];
    let before: Walk | null = null;
    for (let i = 0; i < exports; i += 1) {
      const end = i + 1 < exports ? startsAfter(texts[i + 1]) : undefined;
      const copies = witness && end !== undefined
        ? new Map([...witness].filter(([size]) => size <= end)) : witness;
      let walk: Walk;
      try {
        const { header, checkpoints, entries } = parseExport(texts[i]);
        walk = walkExport(header, checkpoints, entries, ring, copies, "export");
      } catch (error) {
        throw error instanceof Failure ? error.in(names[i]) : error;
      }
      if (before) {
        const failure = joinFailure(before, walk, names[i]);
        if (failure) throw failure;
      }
      proven.push(...[...walk.proven, ...walk.skipped].map((line) => `${names[i]}: ${line}`));
      before = walk;
    }
    const last = before!;
    if (!spreadsheet) return { outcome: "proven", count: last.count, head: last.head, proven, skipped: [] };
    const name = names[names.length - 1];
    if (!options.chainOnly) {
      throw new Failure(last.count + 1, "unsigned", `${name}: a CSV carries no signed checkpoint: its `
        + `rows after entry ${last.count} are not proven (pass --chain-only to check only that they `
        + "continue the chain)");
    }
    let chain: { count: number; head: string };
    try {
      chain = walkChain(csvEntries(texts[texts.length - 1]), last.count, last.head);
    } catch (error) {
      throw error instanceof Failure ? error.in(name) : error;
    }
    proven.push(chain.count > last.count
      ? `${name}: entries ${last.count + 1}-${chain.count} continue the chain (a CSV carries no `
        + "checkpoints: its rows are not signed)"
      : `${name}: no entries past the archives`);
    return { outcome: "chain-only", count: chain.count, head: chain.head, proven, skipped: [] };
  } catch (error) {
    return failed(error);
  }
}

/** Builds a TrustedKey from a raw key for callers that hold one. */
export { keyFromRaw };
