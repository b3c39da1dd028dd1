// RFC 6962 trees and proofs, checked against the RFC's own recursive definitions (MTH, PATH,
// SUBPROOF), for every size and index up to 33, and refused when any part is changed.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";

import { EMPTY_ROOT, Frontier, leafHash, nodeHash, rootOf, verifyConsistency, verifyInclusion }
  from "agentgov/audit";

const leaves = Array.from({ length: 33 }, (_, i) => leafHash(`entry ${i}`));
const split = (n) => 2 ** Math.floor(Math.log2(n - 1)); // the largest power of two below n

function mth(d) {
  if (d.length === 0) return createHash("sha256").update("").digest("hex");
  if (d.length === 1) return d[0];
  const k = split(d.length);
  return nodeHash(mth(d.slice(0, k)), mth(d.slice(k)));
}

function path(m, d) {
  if (d.length <= 1) return [];
  const k = split(d.length);
  return m < k ? [...path(m, d.slice(0, k)), mth(d.slice(k))]
    : [...path(m - k, d.slice(k)), mth(d.slice(0, k))];
}

function subproof(m, d, b) {
  const n = d.length;
  if (m === n) return b ? [] : [mth(d)];
  const k = split(n);
  return m <= k ? [...subproof(m, d.slice(0, k), b), mth(d.slice(k))]
    : [...subproof(m - k, d.slice(k), false), mth(d.slice(0, k))];
}

test("the tree's root is RFC 6962's MTH at every size, the empty one included", () => {
  assert.equal(EMPTY_ROOT, mth([]));
  for (let n = 0; n <= leaves.length; n += 1) assert.equal(rootOf(leaves.slice(0, n)), mth(leaves.slice(0, n)));
  const frontier = new Frontier();
  for (const leaf of leaves.slice(0, 13)) frontier.append(leaf);
  assert.deepEqual(frontier.nodes.map(([level]) => level), [3, 2, 0]); // 13 = 8 + 4 + 1
  const resumed = new Frontier(frontier.nodes);
  for (const leaf of leaves.slice(13)) resumed.append(leaf);
  assert.equal(resumed.root(), mth(leaves));
});

test("inclusion proofs verify for every index and size, and nothing else does", () => {
  for (let n = 1; n <= leaves.length; n += 1) {
    const tree = leaves.slice(0, n);
    const root = mth(tree);
    for (let m = 0; m < n; m += 1) {
      const proof = path(m, tree);
      assert.ok(verifyInclusion(tree[m], m, n, proof, root), `${m} in ${n}`);
      assert.equal(verifyInclusion(tree[(m + 1) % n], m, n, proof, root), n === 1);
      if (proof.length) {
        const bad = [...proof];
        bad[0] = "00".repeat(32);
        assert.equal(verifyInclusion(tree[m], m, n, bad, root), false);
        assert.equal(verifyInclusion(tree[m], m, n, proof.slice(1), root), false);
      }
      assert.equal(verifyInclusion(tree[m], m, n, proof, mth([...tree, leafHash("extra")])), false);
    }
  }
});

test("consistency proofs verify for every pair of sizes, and a rewritten past does not", () => {
  for (let n = 1; n <= leaves.length; n += 1) {
    for (let m = 1; m <= n; m += 1) {
      const proof = subproof(m, leaves.slice(0, n), true);
      const first = mth(leaves.slice(0, m));
      const second = mth(leaves.slice(0, n));
      assert.ok(verifyConsistency(m, n, proof, first, second), `${m} -> ${n}`);
      const forked = [leafHash("rewritten"), ...leaves.slice(1, n)];
      if (m < n) assert.equal(verifyConsistency(m, n, proof, first, mth(forked)), false);
      if (proof.length) {
        const bad = [...proof];
        bad[bad.length - 1] = "11".repeat(32);
        assert.equal(verifyConsistency(m, n, bad, first, second), false);
      }
    }
  }
});
