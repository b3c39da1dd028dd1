/** RFC 6962 Merkle trees over the audit trail: leaf hash SHA-256(0x00 || data), node hash
 * SHA-256(0x01 || left || right), the empty tree's root SHA-256(""); inclusion (2.1.1) and
 * consistency (2.1.2) proofs. Hashes are lowercase hex. */

import { createHash } from "node:crypto";

export function sha256Hex(...parts: (Buffer | string)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return hash.digest("hex");
}

export function leafHash(data: Buffer | string): string {
  return sha256Hex(Buffer.from([0]), Buffer.isBuffer(data) ? data : Buffer.from(data, "utf8"));
}

export function nodeHash(left: string, right: string): string {
  return sha256Hex(Buffer.from([1]), Buffer.from(left, "hex"), Buffer.from(right, "hex"));
}

export const EMPTY_ROOT = sha256Hex("");

/** The tree as its complete subtrees, largest first: [level, hash] (sizes are the binary digits
 * of the tree's size). Appending a leaf merges equal subtrees. */
export class Frontier {
  readonly nodes: [number, string][];
  size: number;

  constructor(nodes: [number, string][] = []) {
    this.nodes = nodes.map(([level, hash]) => [level, hash]);
    this.size = nodes.reduce((total, [level]) => total + 2 ** level, 0);
    for (let i = 1; i < this.nodes.length; i += 1) {
      if (this.nodes[i][0] >= this.nodes[i - 1][0]) {
        throw new Error("a frontier's subtrees must be strictly decreasing in size");
      }
    }
  }

  append(leaf: string): void {
    let level = 0;
    let hash = leaf;
    while (this.nodes.length && this.nodes[this.nodes.length - 1][0] === level) {
      const [, left] = this.nodes.pop()!;
      hash = nodeHash(left, hash);
      level += 1;
    }
    this.nodes.push([level, hash]);
    this.size += 1;
  }

  root(): string {
    if (!this.nodes.length) return EMPTY_ROOT;
    let root = this.nodes[this.nodes.length - 1][1];
    for (let i = this.nodes.length - 2; i >= 0; i -= 1) root = nodeHash(this.nodes[i][1], root);
    return root;
  }
}

/** The root of a list of leaf hashes. */
export function rootOf(leaves: string[]): string {
  const frontier = new Frontier();
  for (const leaf of leaves) frontier.append(leaf);
  return frontier.root();
}

/** RFC 6962 2.1.1 (as RFC 9162 2.1.3.2 states the check): does `proof` place `leaf` at
 * `index` in the tree of `size` with `root`? */
export function verifyInclusion(leaf: string, index: number, size: number, proof: string[],
                                root: string): boolean {
  if (!(Number.isSafeInteger(index) && Number.isSafeInteger(size)) || index < 0 || index >= size) {
    return false;
  }
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (!/^[0-9a-f]{64}$/.test(p) || sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && r === root;
}

/** RFC 6962 2.1.2 (as RFC 9162 2.1.4.2 states the check): is the tree (`second`, `secondRoot`)
 * an append-only extension of (`first`, `firstRoot`)? */
export function verifyConsistency(first: number, second: number, proof: string[],
                                  firstRoot: string, secondRoot: string): boolean {
  if (!(Number.isSafeInteger(first) && Number.isSafeInteger(second)) || first < 0 || first > second) {
    return false;
  }
  if (first === second) return proof.length === 0 && firstRoot === secondRoot;
  if (first === 0) return proof.length === 0;
  if (proof.some((p) => !/^[0-9a-f]{64}$/.test(p))) return false;
  let path = [...proof];
  if ((first & (first - 1)) === 0) path = [firstRoot, ...path]; // first is a power of two
  if (!path.length) return false;
  let fn = first - 1;
  let sn = second - 1;
  while (fn % 2 === 1) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return fr === firstRoot && sr === secondRoot && sn === 0;
}
