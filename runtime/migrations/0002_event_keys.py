"""Ingest's repeat check gets its own plain table of (agent name, event id), filled from the
events already stored (those not foreign; an id stored twice under two times keeps its
earliest). Going back drops the table; the events are untouched either way."""

from django.db import migrations, models

BACKFILL = (
    "INSERT INTO runtime_eventkey (agent_name, event_id, ts) "
    "SELECT agent_name, event_id, MIN(ts) FROM reconciliation_behaviourevent "
    'WHERE NOT "foreign" GROUP BY agent_name, event_id')


class Migration(migrations.Migration):

    dependencies = [
        ("runtime", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="EventKey",
            fields=[
                ("pk", models.CompositePrimaryKey("agent_name", "event_id", blank=True,
                                                  editable=False, primary_key=True,
                                                  serialize=False)),
                ("agent_name", models.CharField(max_length=63)),
                ("event_id", models.CharField(max_length=128)),
                ("ts", models.DateTimeField()),
            ],
            options={
                "indexes": [models.Index(fields=["ts"], name="event_key_ts")],
            },
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
