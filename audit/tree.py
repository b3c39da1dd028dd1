"""The RFC 6962 tree as stored: each complete subtree's hash, so a root or a proof at any size
reads O(log n) nodes in one query. Hashing and proof shapes are the client package's pure
`agentgov.merkle` (the offline verifier's own code); this module only stores and loads."""

from collections.abc import Iterable
from typing import Any

from agentgov import merkle
from agentgov.entries import entry_leaf_hash

from audit.models import AuditTreeNode

LEVEL_SHIFT = 40  # 2**40 leaves before a position would overflow into the level bits


def position(level: int, index: int) -> int:
    """The stored key of the complete subtree at `level` covering leaves from index * 2**level."""
    return (level << LEVEL_SHIFT) | index


def frontier_nodes(size: int) -> list[merkle.Node]:
    """The complete subtrees a tree of `size` leaves decomposes into, largest first."""
    return merkle.range_nodes(0, size)


def grow(size: int, frontier: dict[int, bytes], leaves: Iterable[bytes]) -> list[tuple[int, str]]:
    """The (position, hex hash) nodes that appending `leaves` to a tree of `size` completes.

    `frontier` (level -> hash of the right-edge complete subtrees) is updated in place, like a
    binary counter: each new leaf carries up while the level below it is complete.
    """
    made = []
    for leaf in leaves:
        level, index, digest = 0, size, leaf
        made.append((position(0, index), digest.hex()))
        while index & 1:
            digest = merkle.node_hash(frontier.pop(level), digest)
            level, index = level + 1, index >> 1
            made.append((position(level, index), digest.hex()))
        frontier[level] = digest
        size += 1
    return made


def load(nodes: Iterable[merkle.Node]) -> dict[merkle.Node, bytes]:
    """The stored hashes of these nodes, in one query; a missing node raises KeyError on use."""
    wanted = {position(level, index): (level, index) for level, index in nodes}
    rows = AuditTreeNode.objects.filter(position__in=list(wanted)).values_list("position", "hash")
    return {wanted[p]: bytes.fromhex(h) for p, h in rows}


def append(size: int, entries: list[dict[str, Any]]) -> None:
    """Store the nodes that appending these exported entries to a tree of `size` completes
    (the caller holds the head, so no other writer grows the tree meanwhile)."""
    append_leaves(size, [entry_leaf_hash(entry) for entry in entries])


def append_leaves(size: int, leaves: list[bytes]) -> None:
    """append() for leaf hashes already made (the sequencer builds them from stored payloads)."""
    made = nodes_to_append(size, leaves)
    AuditTreeNode.objects.bulk_create([AuditTreeNode(position=p, hash=h) for p, h in made])


def nodes_to_append(size: int, leaves: list[bytes]) -> list[tuple[int, str]]:
    """The (position, hex hash) nodes appending these leaf hashes to a tree of `size`
    completes, from the stored frontier (one query); the caller stores them."""
    stored = load(frontier_nodes(size))
    frontier = {level: stored[(level, index)] for level, index in frontier_nodes(size)}
    return grow(size, frontier, leaves)


def _lookup(nodes: dict[merkle.Node, bytes]) -> merkle.NodeHash:
    return lambda level, index: nodes[(level, index)]


def root(size: int) -> str:
    """The Merkle root over the first `size` entries, hex."""
    nodes = load(frontier_nodes(size))
    return merkle.range_hash(0, size, _lookup(nodes)).hex()


def leaf(index: int) -> str:
    return load([(0, index)])[(0, index)].hex()


def inclusion_proof(index: int, size: int) -> list[str]:
    """The audit path of leaf `index` in the tree of `size` leaves, hex, from one query."""
    nodes = load(merkle.nodes_for(merkle.inclusion_ranges(index, size)))
    return [h.hex() for h in merkle.inclusion_proof(index, size, _lookup(nodes))]


def consistency_proof(first: int, second: int) -> list[str]:
    """The proof that the tree of `first` leaves is a prefix of the tree of `second`, hex."""
    nodes = load(merkle.nodes_for(merkle.consistency_ranges(first, second)))
    return [h.hex() for h in merkle.consistency_proof(first, second, _lookup(nodes))]
