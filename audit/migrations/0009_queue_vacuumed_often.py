"""On PostgreSQL, the queue of unsequenced entries is vacuumed after every thousand deleted rows
instead of after a fifth of the table: each row lives milliseconds, so the table is mostly rows
deleted since the last vacuum, and every look-up at the queue walks them until one runs."""

from django.db import migrations

SETTINGS = ("autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, "
            "autovacuum_vacuum_cost_delay = 0")


def often(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE audit_auditpendingentry SET ({SETTINGS})")


def as_default(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE audit_auditpendingentry RESET (autovacuum_vacuum_scale"
                              "_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay)")


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0008_entry_hash_unindexed"),
    ]

    operations = [
        migrations.RunPython(often, as_default),
    ]
