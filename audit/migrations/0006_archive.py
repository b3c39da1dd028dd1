"""Archived prefixes of the trail: the boundary record, and on PostgreSQL a trigger that lets an
entry be deleted only once an archive record covers it (and never lets that record change)."""

from django.db import migrations, models

TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION audit_reject_change() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'audit_auditentry' AND OLD.seq <= (
            SELECT coalesce(max(last_seq), 0) FROM audit_auditarchive) THEN
        RETURN OLD;  -- archived to a file that verifies offline (manage.py audit archive)
    END IF;
    RAISE EXCEPTION 'audit rows are append-only (%% on %%)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER audit_archive_append_only
    BEFORE UPDATE OR DELETE ON audit_auditarchive
    FOR EACH ROW EXECUTE FUNCTION audit_reject_change();
"""

DROP_SQL = """
DROP TRIGGER IF EXISTS audit_archive_append_only ON audit_auditarchive;
CREATE OR REPLACE FUNCTION audit_reject_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit rows are append-only (%% on %%)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def add_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRIGGER_SQL)


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_SQL)


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0005_entry_canonical"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditArchive",
            fields=[
                ("last_seq", models.BigIntegerField(primary_key=True, serialize=False)),
                ("first_seq", models.BigIntegerField()),
                ("prev_hash", models.CharField(max_length=64)),
                ("last_hash", models.CharField(max_length=64)),
                ("first_at", models.DateTimeField()),
                ("last_at", models.DateTimeField()),
                ("before", models.DateTimeField()),
                ("file_name", models.CharField(max_length=255)),
                ("sha256", models.CharField(max_length=64)),
                ("rotations", models.JSONField(default=list)),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "ordering": ["last_seq"],
            },
        ),
        migrations.RunPython(add_trigger, drop_trigger),
    ]
