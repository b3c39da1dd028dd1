"""On PostgreSQL, the constraint that holds every entry's columns to its hashed payload (see
audit/binding.py) is replaced by one that parses the payload once instead of once per field. As
in 0007, a stored row that differs leaves the new constraint unvalidated, and verify then goes
on checking rows itself.

The constraint's name and expression are spelled here as audit/binding.py had them when this
was written, not imported from it: that module changes, this migration must not."""

from django.db import migrations, transaction

CONSTRAINT = "audit_entry_columns_match_payload"
CHECK_SQL = """canonical = '' OR ((canonical::jsonb)::text = jsonb_build_object(
    'seq', seq, 'at', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
    'actor', actor, 'action', action, 'target', target, 'agent', agent,
    'before', coalesce(before, 'null'::jsonb), 'after', coalesce(after, 'null'::jsonb),
    'reason', reason, 'request_id', request_id, 'prev_hash', prev_hash)::text) IS TRUE"""

OLD_CHECK_SQL = """canonical = '' OR (
    ((canonical::jsonb) ->> 'seq') = seq::text AND ((canonical::jsonb) ->> 'actor') = actor
    AND ((canonical::jsonb) ->> 'action') = action AND ((canonical::jsonb) ->> 'target') = target
    AND ((canonical::jsonb) ->> 'agent') = agent AND ((canonical::jsonb) ->> 'reason') = reason
    AND ((canonical::jsonb) ->> 'request_id') = request_id
    AND ((canonical::jsonb) ->> 'prev_hash') = prev_hash
    AND ((canonical::jsonb) ->> 'at') = to_char(at AT TIME ZONE 'UTC',
                                                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    AND ((canonical::jsonb) -> 'before')::text = coalesce(before, 'null'::jsonb)::text
    AND ((canonical::jsonb) -> 'after')::text = coalesce(after, 'null'::jsonb)::text) IS TRUE"""


def _drop(cursor) -> None:
    cursor.execute(f"ALTER TABLE audit_auditentry DROP CONSTRAINT IF EXISTS {CONSTRAINT}")


def _add(cursor, alias, check_sql) -> None:
    """Add, then validate against the stored rows; a row that differs leaves it unvalidated."""
    cursor.execute(f"ALTER TABLE audit_auditentry ADD CONSTRAINT {CONSTRAINT} "
                   f"CHECK ({check_sql}) NOT VALID")
    try:
        with transaction.atomic(using=alias):
            cursor.execute(f"ALTER TABLE audit_auditentry VALIDATE CONSTRAINT {CONSTRAINT}")
    except Exception:  # a CheckViolation: some stored row differs
        pass


def parsed_once(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        _drop(cursor)
        _add(cursor, schema_editor.connection.alias, CHECK_SQL)


def per_field(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        _drop(cursor)
        cursor.execute(f"ALTER TABLE audit_auditentry ADD CONSTRAINT {CONSTRAINT} "
                       f"CHECK ({OLD_CHECK_SQL}) NOT VALID")
        cursor.execute(f"ALTER TABLE audit_auditentry VALIDATE CONSTRAINT {CONSTRAINT}")


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0009_queue_vacuumed_often"),
    ]

    operations = [
        migrations.RunPython(parsed_once, per_field),
    ]
