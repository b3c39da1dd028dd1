"""On PostgreSQL, a CHECK constraint holds every entry's columns to its hashed payload (see
audit/binding.py), so verify hashes payloads without comparing each row's columns itself. A
stored row that differs leaves the constraint unvalidated, and verify goes on checking rows."""

from django.db import migrations


def add(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from audit import binding

    with schema_editor.connection.cursor() as cursor:
        binding.add_constraint(cursor)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from audit import binding

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE audit_auditentry DROP CONSTRAINT IF EXISTS "
                       f"{binding.CONSTRAINT}")


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0006_archive'),
    ]

    operations = [
        migrations.RunPython(add, drop),
    ]
