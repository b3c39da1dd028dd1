"""Ten million audit rows fast: the chain and the stored Merkle tree computed in one Python
pass and streamed to PostgreSQL with COPY (no ORM objects, no per-batch INSERT), the table's
secondary indexes dropped during the load and rebuilt once after it. The rows are valid: each
carries its chain hash and canonical payload, the tree holds every complete subtree, the head
moves to the last row, so `audit verify` and the pages read them as real history.

Usage: python bench/audit_bulk.py ROWS [AGENTS]   (scratch stores: see bench/scratch.py)
"""

import hashlib
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The canonical JSON (sorted keys, no spaces) of this bench's one row shape, written as a
# template: json.dumps per row would be most of the time. build() checks the template
# against canonical_json on the first rows it makes, so it cannot drift from the real format.
PAYLOAD = ('{{"action":"role.granted","actor":"system:bench","after":{{"i":{i},"roles":'
           '["owner"]}},"agent":"{agent}","at":"{at}","before":{{"roles":[]}},"prev_hash":'
           '"{prev}","reason":"","request_id":"","seq":{seq},"target":"bench:{i}"}}')
LEAF_CUT = ',"prev_hash":"'
CHUNK = 50_000


def _indexes(cursor, table: str) -> list[tuple[str, str]]:
    """(name, definition) of the table's indexes other than its primary key."""
    cursor.execute("SELECT i.indexname, i.indexdef FROM pg_indexes i "
                   "JOIN pg_class c ON c.relname = i.indexname "
                   "JOIN pg_index x ON x.indexrelid = c.oid "
                   "WHERE i.tablename = %s AND NOT x.indisprimary", [table])
    return list(cursor.fetchall())


def _constraint_of(cursor, index: str) -> str | None:
    cursor.execute("SELECT conname FROM pg_constraint WHERE conindid = "
                   "(SELECT oid FROM pg_class WHERE relname = %s)", [index])
    row = cursor.fetchone()
    return row[0] if row else None


def build(total: int, agent_names: list[str] | None = None, *, every: float = 0.05) -> float:
    """Extend the audit chain (and its stored tree) to `total` entries; returns seconds taken.
    Rows are spaced `every` seconds apart, ending now."""
    from django.db import connection, transaction

    from audit.chain import canonical_json, format_time
    from audit.models import AuditChainHead, AuditEntry, AuditTreeNode
    from audit.tree import frontier_nodes, load, position

    started = time.perf_counter()
    names = agent_names or ["refund-agent"]
    head = AuditChainHead.objects.get(pk=1)
    size, previous = head.seq, head.hash
    count = total - size
    if count <= 0:
        return 0.0
    frontier = {level: digest for (level, _), digest in load(frontier_nodes(size)).items()}
    first_at = datetime.now(UTC) - timedelta(seconds=every * count)
    entries, nodes = AuditEntry._meta.db_table, AuditTreeNode._meta.db_table
    columns = ("seq, at, actor, action, target, agent, before, after, reason, request_id, "
               "prev_hash, hash, canonical")
    sha256, node_prefix = hashlib.sha256, b"\x01"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")  # the index rebuilds
        rebuild, constrain = [], []
        for name, definition in _indexes(cursor, entries):
            constraint = _constraint_of(cursor, name)
            if constraint:
                cursor.execute(f'ALTER TABLE "{entries}" DROP CONSTRAINT "{constraint}"')
                constrain.append(f'ALTER TABLE "{entries}" ADD CONSTRAINT "{constraint}" '
                                 f'UNIQUE USING INDEX "{name}"')
            else:
                cursor.execute(f'DROP INDEX "{name}"')
            rebuild.append(definition)
        raw = cursor.cursor  # psycopg's own cursor: COPY streams through it
        for start in range(0, count, CHUNK):
            # One COPY at a time per connection: a chunk's rows, then the nodes they complete.
            rows, made = [], []
            for offset in range(start, min(start + CHUNK, count)):
                seq, i = size + 1, offset
                moment = first_at + timedelta(seconds=every * offset)
                at = format_time(moment)
                agent = names[i % len(names)]
                payload = PAYLOAD.format(i=i, agent=agent, at=at, prev=previous, seq=seq)
                if offset < 3:
                    assert payload == canonical_json({
                        "seq": seq, "at": at, "actor": "system:bench",
                        "action": "role.granted", "target": f"bench:{i}", "agent": agent,
                        "before": {"roles": []}, "after": {"roles": ["owner"], "i": i},
                        "reason": "", "request_id": "", "prev_hash": previous})
                digest = sha256((payload + previous).encode()).hexdigest()
                # COPY's text format, written by hand: nothing here needs escaping (no tab,
                # newline or backslash), and write_row's per-value adaptation would dominate.
                rows.append(f"{seq}\t{moment.isoformat()}\tsystem:bench\trole.granted\t"
                            f"bench:{i}\t{agent}\t{{\"roles\": []}}\t"
                            f"{{\"roles\": [\"owner\"], \"i\": {i}}}\t\t\t{previous}\t"
                            f"{digest}\t{payload}\n")
                cut = payload.rfind(LEAF_CUT) + 1
                leaf = sha256(b"\x00" + f'{payload[:cut]}"hash":"{digest}",'
                              f'{payload[cut:]}'.encode()).digest()
                # The tree grows like a binary counter (audit.tree.grow).
                level, index, node = 0, size, leaf
                made.append(f"{position(0, index)}\t{node.hex()}\n")
                while index & 1:
                    node = sha256(node_prefix + frontier.pop(level) + node).digest()
                    level, index = level + 1, index >> 1
                    made.append(f"{position(level, index)}\t{node.hex()}\n")
                frontier[level] = node
                size, previous = seq, digest
            with raw.copy(f"COPY {entries} ({columns}) FROM STDIN") as copy:
                copy.write("".join(rows))
            with raw.copy(f"COPY {nodes} (position, hash) FROM STDIN") as copy:
                copy.write("".join(made))
        for statement in (*rebuild, *constrain):  # each index built once, over all rows
            cursor.execute(statement)
        AuditChainHead.objects.filter(pk=1).update(seq=size, hash=previous)
        cursor.execute(f'ANALYZE "{entries}"')
        cursor.execute(f'ANALYZE "{nodes}"')
    return time.perf_counter() - started


def main(rows: int, agents: int) -> None:
    from bench.scratch import setup_django

    setup_django()
    import json

    from django.core.management import call_command

    seconds = build(rows, [f"bench-{i:05d}" for i in range(agents)])
    checked = time.perf_counter()
    call_command("audit", "verify") if "--verify" in sys.argv else None
    print(json.dumps({"bench": "audit_bulk", "rows": rows, "build_s": round(seconds, 1),
                      "rows_per_s": round(rows / seconds) if seconds else None,
                      "verify_s": round(time.perf_counter() - checked, 1)
                      if "--verify" in sys.argv else None}))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(int(args[0]) if args else 1_000_000, int(args[1]) if len(args) > 1 else 100)
