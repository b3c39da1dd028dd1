"""Exports and evidence bundles read the trail in pages whose number grows with the entries
asked for and whose size does not: each export page is a keyset range on the primary key (no
OFFSET, no sort of the rest of the table), each evidence page reads its proofs in one query."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import audit
from audit.actions import sign_for_export
from audit.choices import AuditAction
from audit.evidence import PROOF_BATCH, bundle
from audit.export import export_chunks

pytestmark = pytest.mark.django_db


def trail(n: int, agent: str = "") -> None:
    audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target="user:first")
    for i in range(n - 1):
        audit.record(actor="alice", action=AuditAction.ROLE_GRANTED, target=f"user:u{i}",
                     agent=agent)


def entry_queries(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries
            if "audit_auditentry" in q["sql"] and "audit_auditcheckpoint" not in q["sql"]]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_export_reads_one_keyset_page_per_chunk(people, fmt):
    trail(45)
    size = sign_for_export(actor=people.dana, target="audit:trail", after={"format": fmt})
    with CaptureQueriesContext(connection) as captured:
        text = "".join(export_chunks(fmt, size, chunk=10))
    pages = entry_queries(captured)
    assert len(pages) == -(-size // 10) + 1  # every page, then the empty one that ends it
    assert all("OFFSET" not in sql.upper() and '"seq" >' in sql for sql in pages)
    assert text.count("user:u") == 44


def test_an_export_page_reads_its_range_of_the_primary_key_only(people):
    if connection.vendor != "postgresql":
        pytest.skip("the plan shape is PostgreSQL's; SQLite reads its rowid table in order")
    trail(30)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE audit_auditentry")
        cursor.execute("EXPLAIN SELECT seq FROM audit_auditentry WHERE seq > 10 AND seq <= 30 "
                       "ORDER BY seq LIMIT 10")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # Read through the primary key, bounded on both sides: what the planner may sort is the
    # page's range (an index walk or a bitmap of the range, by the table's statistics: after
    # a long run's deleted rows it picks the bitmap), never the rest of the table.
    assert "Seq Scan" not in plan and "audit_auditentry_pkey" in plan, plan
    assert "Index Cond: ((seq > 10) AND (seq <= 30))" in plan, plan


def test_an_evidence_bundle_reads_its_proofs_a_batch_at_a_time(people, settings):
    settings.AUDIT_CHECKPOINT_EVERY = 10_000
    trail(PROOF_BATCH + 20, agent="refund-agent")
    size = sign_for_export(actor=people.dana, target="agent:refund-agent",
                           after={"format": "evidence"}, agent="refund-agent")
    with CaptureQueriesContext(connection) as captured:
        made = bundle("refund-agent", None, None, size, limit=10_000)
    assert len(made["entries"]) == PROOF_BATCH + 20  # and the entry recording this bundle
    node_reads = [q for q in captured.captured_queries if "audit_audittreenode" in q["sql"]]
    assert len(node_reads) == 2  # one per batch of PROOF_BATCH entries, not one per entry
    # and one read of the smaller checkpoints the bundle carries consistency proofs from
    assert len(captured.captured_queries) <= 5
