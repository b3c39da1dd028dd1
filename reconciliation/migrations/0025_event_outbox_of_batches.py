"""The event outbox becomes one row per ingested batch (UncountedBatch) instead of a `counted`
flag on every event: flagging each event was an UPDATE of every stored row, which rewrote its
entries in every index of the (partitioned) table.

Events still uncounted are carried into outbox rows before the flag goes; a downgrade brings the
flag back as true for every event (no table rewrite) and false again for those still in the
outbox."""

from django.db import migrations, models

CARRIED = 1000  # events per carried outbox row


def carry_uncounted(apps, schema_editor):
    events = apps.get_model("reconciliation", "BehaviourEvent")
    outbox = apps.get_model("reconciliation", "UncountedBatch")
    waiting = list(events.objects.using(schema_editor.connection.alias)
                   .filter(counted=False).order_by("received_at")
                   .values_list("pk", "ts", "received_at"))
    for start in range(0, len(waiting), CARRIED):
        chunk = waiting[start:start + CARRIED]
        outbox.objects.using(schema_editor.connection.alias).create(
            received_at=max(r[2] for r in chunk), events=[r[0] for r in chunk],
            first_ts=min(r[1] for r in chunk), last_ts=max(r[1] for r in chunk))


def restore_uncounted(apps, schema_editor):
    events = apps.get_model("reconciliation", "BehaviourEvent")
    outbox = apps.get_model("reconciliation", "UncountedBatch")
    alias = schema_editor.connection.alias
    for batch in outbox.objects.using(alias).all():
        events.objects.using(alias).filter(
            pk__in=batch.events, ts__gte=batch.first_ts, ts__lte=batch.last_ts,
        ).update(counted=False)


class Migration(migrations.Migration):

    dependencies = [
        ("reconciliation", "0024_merge_0023_finding_recent_index_0023_fleet_snapshot"),
    ]

    operations = [
        migrations.CreateModel(
            name="UncountedBatch",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True,
                                           serialize=False, verbose_name="ID")),
                ("received_at", models.DateTimeField()),
                ("events", models.JSONField()),
                ("first_ts", models.DateTimeField()),
                ("last_ts", models.DateTimeField()),
            ],
        ),
        migrations.RunPython(carry_uncounted, restore_uncounted),
        migrations.RemoveIndex(
            model_name="behaviourevent",
            name="event_uncounted",
        ),
        # So that a downgrade adds the column back as true for every event.
        migrations.AlterField(
            model_name="behaviourevent",
            name="counted",
            field=models.BooleanField(default=True),
        ),
        migrations.RemoveField(
            model_name="behaviourevent",
            name="counted",
        ),
    ]
