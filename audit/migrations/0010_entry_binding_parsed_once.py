"""On PostgreSQL, the constraint that holds every entry's columns to its hashed payload (see
audit/binding.py) is replaced by one that parses the payload once instead of once per field. As
in 0007, a stored row that differs leaves the new constraint unvalidated, and verify then goes
on checking rows itself."""

from django.db import migrations

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
    from audit import binding

    cursor.execute(f"ALTER TABLE audit_auditentry DROP CONSTRAINT IF EXISTS {binding.CONSTRAINT}")


def parsed_once(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from audit import binding

    with schema_editor.connection.cursor() as cursor:
        _drop(cursor)
        binding.add_constraint(cursor)


def per_field(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from audit import binding

    with schema_editor.connection.cursor() as cursor:
        _drop(cursor)
        cursor.execute(f"ALTER TABLE audit_auditentry ADD CONSTRAINT {binding.CONSTRAINT} "
                       f"CHECK ({OLD_CHECK_SQL}) NOT VALID")
        cursor.execute(f"ALTER TABLE audit_auditentry VALIDATE CONSTRAINT {binding.CONSTRAINT}")


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0009_queue_vacuumed_often"),
    ]

    operations = [
        migrations.RunPython(parsed_once, per_field),
    ]
