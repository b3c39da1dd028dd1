"""PostgreSQL's guarantee that every stored entry's columns say what its hashed payload says.

A CHECK constraint holds each row's columns to its canonical payload (`canonical = ''`, a row
stored before payloads were, is rebuilt from its columns by verify). While the constraint is in
force and validated, no row can differ from its payload, so verify hashes the payloads alone;
should it be dropped, renamed, replaced or left unvalidated (an attacker with the database
password can do each), verify holds every row to its payload itself, as it does on SQLite.
"""

from django.db import DatabaseError, connection, transaction

CONSTRAINT = "audit_entry_columns_match_payload"
# The payload parsed once and spelled as PostgreSQL spells jsonb, against an object built from
# the columns spelled the same way: equal texts mean the same keys (exactly the hashed fields)
# and the same values, numbers included (jsonb text keeps 3.0 apart from 3). One parse per row:
# a comparison per field parsed the payload eleven times, 60 µs of every append.
CHECK_SQL = """canonical = '' OR ((canonical::jsonb)::text = jsonb_build_object(
    'seq', seq, 'at', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
    'actor', actor, 'action', action, 'target', target, 'agent', agent,
    'before', coalesce(before, 'null'::jsonb), 'after', coalesce(after, 'null'::jsonb),
    'reason', reason, 'request_id', request_id, 'prev_hash', prev_hash)::text) IS TRUE"""

_expected: str | None = None


def add_constraint(cursor) -> bool:
    """Add the constraint, then validate it against the rows already stored; True when every
    row holds. A row that does not stays as it is, the constraint left unvalidated (verify then
    checks each row itself and names it)."""
    cursor.execute(f"ALTER TABLE audit_auditentry ADD CONSTRAINT {CONSTRAINT} "
                   f"CHECK ({CHECK_SQL}) NOT VALID")
    try:
        with transaction.atomic(using=cursor.db.alias):
            cursor.execute(f"ALTER TABLE audit_auditentry VALIDATE CONSTRAINT {CONSTRAINT}")
    except Exception:  # noqa: BLE001  (a CheckViolation: some stored row differs)
        return False
    return True


def expected_definition() -> str:
    """The constraint's definition as this server spells it (it normalises the expression), from
    a throwaway temporary table given the same constraint: compared text for text, nothing is
    taken from the live table's own catalog."""
    global _expected
    if _expected is None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE audit_binding_probe "
                           "(LIKE audit_auditentry) ON COMMIT DROP")
            cursor.execute(f"ALTER TABLE audit_binding_probe ADD CONSTRAINT {CONSTRAINT} "
                           f"CHECK ({CHECK_SQL})")
            cursor.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                           "WHERE conrelid = 'audit_binding_probe'::regclass AND conname = %s",
                           [CONSTRAINT])
            _expected = cursor.fetchone()[0]
            transaction.set_rollback(True)
    return _expected


def columns_bound() -> bool:
    """Whether the constraint is in force on the entries table: present, validated, and the
    expression this code defines (on PostgreSQL; elsewhere False)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_constraintdef(oid), convalidated FROM pg_constraint "
                       "WHERE conrelid = 'audit_auditentry'::regclass AND conname = %s "
                       "AND contype = 'c'", [CONSTRAINT])
        row = cursor.fetchone()
    if not (row and row[1]):
        return False
    try:
        return row[0] == expected_definition()
    except DatabaseError:  # no temporary tables here (a read-only replica): check each row
        return False
