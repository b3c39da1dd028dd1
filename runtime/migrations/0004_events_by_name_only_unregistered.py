"""The events' by-name index holds only the events of agents the registry does not know (their
agent is null): a registered agent's events are read by agent (event_agent_ts), so each of
them cost ingest a write into this index that nothing read.

On PostgreSQL the new index is built without blocking ingest (docs/operating.md, "Upgrading":
the previous release keeps serving while this runs): made on the partitioned table alone (no
rows, so no wait), then each day partition's built CONCURRENTLY and attached to it, which
makes it valid; the old index goes last, and the new one takes its name. An interrupted run
starts again from nothing. Elsewhere, Django's own operations."""

from django.db import migrations, models

TABLE = "reconciliation_behaviourevent"
NAME = "event_name_ts"
BUILDING = "event_name_ts_building"
EVERY = models.Index(fields=["agent_name", "ts"], name=NAME)
UNREGISTERED = models.Index(fields=["agent_name", "ts"], name=NAME,
                            condition=models.Q(agent__isnull=True))


def _swap(schema_editor, apps, new: models.Index, old: models.Index, suffix: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        model = apps.get_model("runtime", "BehaviourEvent")
        schema_editor.remove_index(model, old)
        schema_editor.add_index(model, new)
        return
    where = " WHERE agent_id IS NULL" if new.condition is not None else ""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {BUILDING}")  # with its partitions' (a rerun)
        cursor.execute(f"CREATE INDEX {BUILDING} ON ONLY {TABLE} (agent_name, ts){where}")
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c "
                       "ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass "
                       "ORDER BY c.relname", [TABLE])
        for (partition,) in cursor.fetchall():
            index = f"{partition}_{suffix}"[:63]
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")  # left unattached
            cursor.execute(f"CREATE INDEX CONCURRENTLY {index} ON {partition} "
                           f"(agent_name, ts){where}")
            cursor.execute(f"ALTER INDEX {BUILDING} ATTACH PARTITION {index}")
        cursor.execute(f"DROP INDEX IF EXISTS {NAME}")
        cursor.execute(f"ALTER INDEX {BUILDING} RENAME TO {NAME}")


def only_unregistered(apps, schema_editor) -> None:
    _swap(schema_editor, apps, UNREGISTERED, EVERY, "name_unregistered")


def every_event(apps, schema_editor) -> None:
    _swap(schema_editor, apps, EVERY, UNREGISTERED, "agent_name_ts_idx")


class Migration(migrations.Migration):

    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("runtime", "0003_events_indexed_less"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(only_unregistered, every_event,
                                                      atomic=False)],
            state_operations=[
                migrations.RemoveIndex(model_name="behaviourevent", name=NAME),
                migrations.AddIndex(model_name="behaviourevent", index=UNREGISTERED),
            ],
        ),
    ]
