"""On PostgreSQL, a CHECK constraint holds every entry's columns to its hashed payload (see
audit/binding.py), so verify hashes payloads without comparing each row's columns itself. A
stored row that differs leaves the constraint unvalidated, and verify goes on checking rows.

The constraint is spelled here as it stood until 0010 (which replaces it, and puts this one back
on the way down), not read from audit/binding.py: that module changes, this migration must not."""

from django.db import migrations, transaction

CONSTRAINT = "audit_entry_columns_match_payload"
CHECK_SQL = """canonical = '' OR (
    ((canonical::jsonb) ->> 'seq') = seq::text AND ((canonical::jsonb) ->> 'actor') = actor
    AND ((canonical::jsonb) ->> 'action') = action AND ((canonical::jsonb) ->> 'target') = target
    AND ((canonical::jsonb) ->> 'agent') = agent AND ((canonical::jsonb) ->> 'reason') = reason
    AND ((canonical::jsonb) ->> 'request_id') = request_id
    AND ((canonical::jsonb) ->> 'prev_hash') = prev_hash
    AND ((canonical::jsonb) ->> 'at') = to_char(at AT TIME ZONE 'UTC',
                                                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    AND ((canonical::jsonb) -> 'before')::text = coalesce(before, 'null'::jsonb)::text
    AND ((canonical::jsonb) -> 'after')::text = coalesce(after, 'null'::jsonb)::text) IS TRUE"""


def add(apps, schema_editor):
    """PostgreSQL-only DDL: SQLite has no such constraint (verify checks every row there)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE audit_auditentry ADD CONSTRAINT {CONSTRAINT} "
                       f"CHECK ({CHECK_SQL}) NOT VALID")
        try:
            with transaction.atomic(using=schema_editor.connection.alias):
                cursor.execute(f"ALTER TABLE audit_auditentry VALIDATE CONSTRAINT {CONSTRAINT}")
        except Exception:  # a CheckViolation: some stored row differs; left unvalidated
            pass


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE audit_auditentry DROP CONSTRAINT IF EXISTS {CONSTRAINT}")


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0006_archive'),
    ]

    operations = [
        migrations.RunPython(add, drop),
    ]
