"""RFC 6962 Merkle trees over the audit trail: hashing, roots, proofs and their verification.

Pure Python over `hashlib`; hashes are 32-byte `bytes` here and lowercase hex in JSON.
A node is addressed as (level, index): the perfect subtree of 2**level leaves starting at leaf
index * 2**level. Proofs are generated from a function returning any such node's hash, so the
control plane can serve them from stored nodes and a test from a list of leaves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from operator import methodcaller

EMPTY_ROOT = hashlib.sha256(b"").digest()

Node = tuple[int, int]
NodeHash = Callable[[int, int], bytes]


class ProofError(ValueError):
    """A proof that does not hold, or arguments no proof can exist for."""


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data): a leaf can never be mistaken for an inner node."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly below n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


class TreeBuilder:
    """Appends leaf hashes one at a time, keeping only O(log n) hashes (a compact range).

    `append` returns the perfect subtrees the new leaf completes, so a store can keep every
    node; `root()` is the RFC 6962 root of the leaves so far.
    """

    def __init__(self) -> None:
        self.size = 0
        self._stack: list[tuple[int, bytes]] = []  # (level, hash), levels strictly decreasing

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        completed = [(0, self.size, leaf)]
        level, current = 0, leaf
        while self._stack and self._stack[-1][0] == level:
            _, left = self._stack.pop()
            current = node_hash(left, current)
            level += 1
            completed.append((level, self.size >> level, current))
        self._stack.append((level, current))
        self.size += 1
        return completed

    def extend(self, leaves: Iterable[bytes]) -> None:
        for leaf in leaves:
            self.append(leaf)

    def push(self, level: int, node: bytes) -> None:
        """Append a whole perfect subtree of 2**level leaves (its hash `node`); the tree's size
        must be a multiple of 2**level, as it is when subtrees come left to right."""
        if self.size % (1 << level):
            raise ValueError(f"a subtree of level {level} cannot start at leaf {self.size}")
        self.size += 1 << level
        while self._stack and self._stack[-1][0] == level:
            node = node_hash(self._stack.pop()[1], node)
            level += 1
        self._stack.append((level, node))

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        current = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            current = node_hash(left, current)
        return current


_DIGEST = methodcaller("digest")


def leaf_hashes(leaf_data: Iterable[bytes]) -> list[bytes]:
    """leaf_hash of each item, the loop in C (map over hashlib): verify hashes millions."""
    return list(map(_DIGEST, map(hashlib.sha256, map(b"\x00".__add__, leaf_data))))


def subtree_levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """Every perfect subtree over `leaves` (leaf 0 aligned to a multiple of a power of two at
    least len(leaves)): levels[k][i] is the node over leaves [i * 2**k, (i + 1) * 2**k). Each
    level is hashed in one pass of C loops, no Python bytecode per node."""
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        below = levels[-1]
        pairs = map(bytes.__add__, below[0::2], below[1::2])  # stops at the last whole pair
        levels.append(list(map(_DIGEST, map(hashlib.sha256, map(b"\x01".__add__, pairs)))))
    return levels


def decomposition(levels: Sequence[Sequence[bytes]], count: int) -> list[tuple[int, bytes]]:
    """The perfect subtrees (level, hash) the first `count` leaves of `levels` decompose into,
    largest first: what TreeBuilder's stack holds after `count` appends from an aligned start."""
    pieces, position = [], 0
    for level in range(count.bit_length() - 1, -1, -1):
        if count >> level & 1:
            pieces.append((level, levels[level][position >> level]))
            position += 1 << level
    return pieces


def root(leaves: Iterable[bytes]) -> bytes:
    """The Merkle tree hash of a list of leaf hashes (the empty tree's is SHA-256 of "")."""
    builder = TreeBuilder()
    builder.extend(leaves)
    return builder.root()


def range_nodes(start: int, end: int) -> list[Node]:
    """The perfect subtrees covering leaves [start, end), left to right.

    Every range an RFC 6962 proof names starts at a multiple of the largest power of two not
    above its length, so the pieces are the binary digits of its length, largest first.
    """
    nodes, position, remaining = [], start, end - start
    for level in range(remaining.bit_length() - 1, -1, -1):
        if remaining >> level & 1:
            if position % (1 << level):
                raise ValueError(f"range [{start}, {end}) is not aligned")
            nodes.append((level, position >> level))
            position += 1 << level
    return nodes


def range_hash(start: int, end: int, node: NodeHash) -> bytes:
    """MTH(D[start:end]) from the hashes of its perfect subtrees, folded from the right."""
    if end <= start:
        return EMPTY_ROOT
    pieces = [node(level, index) for level, index in range_nodes(start, end)]
    current = pieces[-1]
    for left in reversed(pieces[:-1]):
        current = node_hash(left, current)
    return current


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes make PATH(index, D[size]), in proof order (RFC 6962 2.1.1)."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of size {size}")
    ranges: list[tuple[int, int]] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    return ranges[::-1]


def consistency_ranges(first: int, second: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes make PROOF(first, D[second]) (RFC 6962 2.1.2)."""
    if not 0 <= first <= second:
        raise ProofError(f"no consistency proof from size {first} to size {second}")
    if first in (0, second):
        return []
    ranges: list[tuple[int, int]] = []
    start, end, m, whole = 0, second, first, True
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start, m, whole = start + k, m - k, False
    if not whole:
        ranges.append((start, end))
    return ranges[::-1]


def nodes_for(ranges: Iterable[tuple[int, int]]) -> set[Node]:
    """Every stored node a list of proof ranges needs, so a store can fetch them in one query."""
    return {node for start, end in ranges for node in range_nodes(start, end)}


def inclusion_proof(index: int, size: int, node: NodeHash) -> list[bytes]:
    """The audit path of leaf `index` in the tree of `size` leaves."""
    return [range_hash(start, end, node) for start, end in inclusion_ranges(index, size)]


def consistency_proof(first: int, second: int, node: NodeHash) -> list[bytes]:
    """The proof that the tree of `first` leaves is a prefix of the tree of `second`."""
    return [range_hash(start, end, node) for start, end in consistency_ranges(first, second)]


def list_node_hash(leaves: Sequence[bytes]) -> NodeHash:
    """A node function over an in-memory list of leaf hashes (for small trees and tests)."""

    def node(level: int, index: int) -> bytes:
        start = index << level
        return root(leaves[start:start + (1 << level)])

    return node


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root an audit path leads to (RFC 9162 2.1.3.2); ProofError if it cannot be one."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of size {size}")
    fn, sn, current = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            raise ProofError("the proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            current = node_hash(sibling, current)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            current = node_hash(current, sibling)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the proof is shorter than the tree is deep")
    return current


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes],
                     expected_root: bytes) -> None:
    """Raise ProofError unless `leaf` sits at `index` of the tree with `expected_root`."""
    if root_from_inclusion(index, size, leaf, proof) != expected_root:
        raise ProofError(f"leaf {index} is not in the tree of size {size} with that root")


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes,
                       proof: Sequence[bytes]) -> None:
    """Raise ProofError unless the first tree is a prefix of the second (RFC 9162 2.1.4.2)."""
    if not 0 <= first <= second:
        raise ProofError(f"size {second} is smaller than size {first}")
    if first == second:
        if proof or first_root != second_root:
            raise ProofError("trees of the same size must have the same root and no proof")
        return
    if first == 0:
        if proof:
            raise ProofError("a proof from the empty tree must be empty")
        return
    if not proof:
        raise ProofError("the consistency proof is empty")
    path = list(proof)
    if first & (first - 1) == 0:
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for sibling in path[1:]:
        if sn == 0:
            raise ProofError("the proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(sibling, fr), node_hash(sibling, sr)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, sibling)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or fr != first_root or sr != second_root:
        raise ProofError(f"the tree of size {first} is not a prefix of the tree of size {second}")
