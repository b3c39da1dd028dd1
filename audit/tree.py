"""The RFC 6962 tree as stored: complete subtrees only, so a root or a proof at any size reads
O(log n) nodes in one query. The arithmetic here is pure; the two functions at the end touch
the database."""

from collections.abc import Callable, Iterable

from audit.formats import EMPTY_ROOT, node_hash
from audit.models import AuditTreeNode

Range = tuple[int, int]  # leaves [start, end)
LEVEL_SHIFT = 40


def position(level: int, index: int) -> int:
    """The stored key of the complete subtree at `level` covering leaves from index * 2**level."""
    return (level << LEVEL_SHIFT) | index


def _split(size: int) -> int:
    """The largest power of two smaller than `size` (RFC 6962's k)."""
    return 1 << ((size - 1).bit_length() - 1)


def frontier_positions(size: int) -> dict[int, int]:
    """level -> position of the complete subtrees a tree of `size` leaves decomposes into."""
    return {level: position(level, (size >> level) - 1)
            for level in range(size.bit_length()) if size >> level & 1}


def grow(size: int, frontier: dict[int, str], leaves: Iterable[str]) -> list[tuple[int, str]]:
    """The (position, hash) nodes that appending `leaves` to a tree of `size` completes.

    `frontier` (level -> hash of the right-edge subtrees) is updated in place, like a binary
    counter: each new leaf carries up while the level below it is complete.
    """
    made = []
    for leaf in leaves:
        level, index, digest = 0, size, leaf
        made.append((position(0, index), digest))
        while index & 1:
            digest = node_hash(frontier.pop(level), digest)
            level, index = level + 1, index >> 1
            made.append((position(level, index), digest))
        frontier[level] = digest
        size += 1
    return made


def complete_subtrees(start: int, end: int) -> list[int]:
    """Positions of the stored nodes that the hash of leaves [start, end) is made from."""
    width = end - start
    if width <= 0:
        return []
    if width & (width - 1) == 0 and start % width == 0:
        return [position(width.bit_length() - 1, start // width)]
    k = _split(width)
    return complete_subtrees(start, start + k) + complete_subtrees(start + k, end)


def range_hash(start: int, end: int, node: Callable[[int], str]) -> str:
    """RFC 6962's MTH of leaves [start, end), from stored complete subtrees."""
    width = end - start
    if width <= 0:
        return EMPTY_ROOT
    if width & (width - 1) == 0 and start % width == 0:
        return node(position(width.bit_length() - 1, start // width))
    k = _split(width)
    return node_hash(range_hash(start, start + k, node), range_hash(start + k, end, node))


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """The leaf ranges whose hashes form the audit path of leaf `index` in a tree of `size`
    (RFC 6962 2.1.1), in proof order."""
    ranges: list[Range] = []
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


def consistency_ranges(first: int, second: int) -> list[Range]:
    """The leaf ranges whose hashes form the consistency proof from `first` to `second`
    (RFC 6962 2.1.2, SUBPROOF), in proof order."""
    if first <= 0 or first >= second:
        return []
    ranges: list[Range] = []
    start, end, whole = 0, second, True
    m = first
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


def load_nodes(positions: Iterable[int]) -> dict[int, str]:
    """The stored hashes at these positions, in one query."""
    wanted = set(positions)
    return dict(AuditTreeNode.objects.filter(position__in=wanted).values_list("position", "hash"))


def hashes_of(ranges: list[Range]) -> list[str]:
    """The hash of each leaf range, all read in one query."""
    nodes = load_nodes(p for start, end in ranges for p in complete_subtrees(start, end))
    return [range_hash(start, end, nodes.__getitem__) for start, end in ranges]


def frontier_root(frontier: dict[int, str]) -> str:
    """The root of the tree whose right-edge subtrees are `frontier` (level -> hash)."""
    root = None
    for level in sorted(frontier):
        root = frontier[level] if root is None else node_hash(frontier[level], root)
    return EMPTY_ROOT if root is None else root


def push_leaf(size: int, frontier: dict[int, str], leaf: str) -> None:
    """Add one leaf to a tree of `size` kept only as its frontier (verify's running root)."""
    level, index, digest = 0, size, leaf
    while index & 1:
        digest = node_hash(frontier.pop(level), digest)
        level, index = level + 1, index >> 1
    frontier[level] = digest
