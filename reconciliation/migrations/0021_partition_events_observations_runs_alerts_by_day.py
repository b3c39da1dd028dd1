"""Events, observations, runs and alerts become tables partitioned by day on PostgreSQL
(reconciliation/partitions.py), keeping every row and id; on SQLite they stay plain.

The primary key on PostgreSQL becomes (id, <day key>); the correction -> run foreign key loses
its database constraint (a key into a partitioned table would have to name the day too); the
event's unique (agent_name, event_id) becomes (agent_name, event_id, ts), ts being the
partition key."""

from datetime import timedelta

from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

from reconciliation import partitions

# (model, partition key, days back that get a partition now: events arrive up to 30 days late)
TABLES = (("BehaviourEvent", "ts", 30), ("ObservedState", "observed_at", 1),
          ("ReconcileRun", "started_at", 1), ("AlertEvent", "at", 1))


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    today = timezone.now().date()
    ahead = today + timedelta(days=settings.RETENTION_PARTITIONS_AHEAD_DAYS)
    for name, key, back in TABLES:
        partitions.convert(schema_editor, apps.get_model("reconciliation", name), key,
                           (today - timedelta(days=back), ahead))


def unpartition(apps, schema_editor):
    """Back to plain tables (every row kept), for a downgrade."""
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _key, _back in TABLES:
        model = apps.get_model("reconciliation", name)
        table = model._meta.db_table
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_partitioned"')
            partitions.strip(cursor, f"{table}_partitioned")
            made = len(schema_editor.deferred_sql)
            schema_editor.create_model(model)
            later = partitions.take_deferred(schema_editor, made)
            columns = ", ".join(f'"{f.column}"' for f in model._meta.local_concrete_fields)
            cursor.execute(f'INSERT INTO "{table}" ({columns})'
                           f' SELECT {columns} FROM "{table}_partitioned"')
            cursor.execute(f'DROP TABLE "{table}_partitioned"')
            partitions.reset_ids(cursor, table)
        for statement in later:
            schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ("reconciliation", "0020_group_rule_effect_block"),
    ]

    operations = [
        migrations.AlterField(
            model_name="correction",
            name="run",
            field=models.ForeignKey(db_constraint=False, null=True,
                                    on_delete=models.deletion.SET_NULL,
                                    related_name="corrections",
                                    to="reconciliation.reconcilerun"),
        ),
        migrations.RemoveConstraint(
            model_name="behaviourevent",
            name="event_id_per_agent",
        ),
        migrations.AddConstraint(
            model_name="behaviourevent",
            constraint=models.UniqueConstraint(condition=models.Q(("foreign", False)),
                                               fields=("agent_name", "event_id", "ts"),
                                               name="event_id_per_agent_ts"),
        ),
        migrations.RunPython(partition, unpartition),
    ]
