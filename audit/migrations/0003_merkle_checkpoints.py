"""Ed25519 signed tree heads over a stored RFC 6962 tree.

Existing checkpoints stay as they were, marked hmac-sha256 (they still verify with
AUDIT_SIGNING_KEY); the tree is built over every existing entry, so the next checkpoint signs a
root covering the whole trail; the tree's rows are append-only on PostgreSQL like the others.
"""

import hashlib
import json
from datetime import UTC

from django.db import migrations, models

FIELDS = ("seq", "at", "actor", "action", "target", "agent", "before", "after", "reason",
          "request_id", "prev_hash", "hash")


# The leaf hash and the tree's growth as agentgov.entries, agentgov.merkle and audit.tree had
# them when this was written (docs/audit-format.md), copied here: those modules may change, what
# this migration built must not.
LEVEL_SHIFT = 40


def format_time(moment):
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_leaf_hash(entry):
    """SHA-256(0x00 || canonical JSON of the whole exported entry)."""
    payload = json.dumps({name: entry[name] for name in FIELDS}, sort_keys=True,
                         separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(b"\x00" + payload.encode("utf-8")).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def position(level, index):
    return (level << LEVEL_SHIFT) | index


def grow(size, frontier, leaves):
    """The (position, hex hash) nodes that appending `leaves` to a tree of `size` completes."""
    made = []
    for leaf in leaves:
        level, index, digest = 0, size, leaf
        made.append((position(0, index), digest.hex()))
        while index & 1:
            digest = node_hash(frontier.pop(level), digest)
            level, index = level + 1, index >> 1
            made.append((position(level, index), digest.hex()))
        frontier[level] = digest
        size += 1
    return made

TRIGGER_SQL = """
CREATE TRIGGER audit_tree_node_append_only
    BEFORE UPDATE OR DELETE ON audit_audittreenode
    FOR EACH ROW EXECUTE FUNCTION audit_reject_change();
"""
DROP_SQL = "DROP TRIGGER IF EXISTS audit_tree_node_append_only ON audit_audittreenode;"


def build_tree(apps, schema_editor):
    entry_model = apps.get_model("audit", "AuditEntry")
    node_model = apps.get_model("audit", "AuditTreeNode")
    size, frontier = 0, {}
    while True:
        rows = list(entry_model.objects.filter(seq__gt=size).order_by("seq")
                    .values(*FIELDS)[:5000])
        if not rows:
            return
        leaves = [entry_leaf_hash({**row, "at": format_time(row["at"])}) for row in rows]
        made = grow(size, frontier, leaves)
        node_model.objects.bulk_create([node_model(position=p, hash=h) for p, h in made])
        size = rows[-1]["seq"]


def add_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRIGGER_SQL)


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_SQL)


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0002_append_only'),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditKey',
            fields=[
                ('key_id', models.CharField(max_length=16, primary_key=True, serialize=False)),
                ('algorithm', models.CharField(choices=[('ed25519', 'Ed25519'), ('hmac-sha256', 'Hmac Sha256')], default='ed25519', max_length=16)),
                ('public_key', models.CharField(max_length=64)),
                ('created_at', models.DateTimeField()),
                ('retired_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['created_at'],
            },
        ),
        migrations.CreateModel(
            name='AuditTreeNode',
            fields=[
                ('position', models.BigIntegerField(primary_key=True, serialize=False)),
                ('hash', models.CharField(max_length=64)),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.AddField(
            model_name='auditcheckpoint',
            name='algorithm',
            field=models.CharField(choices=[('ed25519', 'Ed25519'), ('hmac-sha256', 'Hmac Sha256')], default='hmac-sha256', max_length=16),
        ),
        migrations.AlterField(
            model_name='auditcheckpoint',
            name='algorithm',
            field=models.CharField(choices=[('ed25519', 'Ed25519'), ('hmac-sha256', 'Hmac Sha256')], default='ed25519', max_length=16),
        ),
        migrations.AddField(
            model_name='auditcheckpoint',
            name='key_id',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
        migrations.AddField(
            model_name='auditcheckpoint',
            name='root',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AlterField(
            model_name='auditcheckpoint',
            name='signature',
            field=models.CharField(max_length=128),
        ),
        migrations.RunPython(build_tree, migrations.RunPython.noop),
        migrations.RunPython(add_trigger, drop_trigger),
    ]
