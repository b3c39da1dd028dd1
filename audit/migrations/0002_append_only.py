"""Seed the chain head and, on PostgreSQL, forbid UPDATE and DELETE of audit rows in the database."""

from django.db import migrations

GENESIS_HASH = "0" * 64

TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION audit_reject_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit rows are append-only (%% on %%)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER audit_entry_append_only
    BEFORE UPDATE OR DELETE ON audit_auditentry
    FOR EACH ROW EXECUTE FUNCTION audit_reject_change();
CREATE TRIGGER audit_checkpoint_append_only
    BEFORE UPDATE OR DELETE ON audit_auditcheckpoint
    FOR EACH ROW EXECUTE FUNCTION audit_reject_change();
"""

DROP_SQL = """
DROP TRIGGER IF EXISTS audit_entry_append_only ON audit_auditentry;
DROP TRIGGER IF EXISTS audit_checkpoint_append_only ON audit_auditcheckpoint;
DROP FUNCTION IF EXISTS audit_reject_change();
"""


def seed_head(apps, schema_editor):
    apps.get_model("audit", "AuditChainHead").objects.get_or_create(
        pk=1, defaults={"seq": 0, "hash": GENESIS_HASH}
    )


def add_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRIGGER_SQL)


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_SQL)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [
        migrations.RunPython(seed_head, migrations.RunPython.noop),
        migrations.RunPython(add_trigger, drop_trigger),
    ]
