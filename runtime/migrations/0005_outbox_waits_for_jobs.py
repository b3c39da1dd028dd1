"""The event outbox's row waits for its batch's broken-rule jobs: when its events were counted,
how many jobs have not finished, and which counting of the batch they belong to. Columns with
constant database defaults (the previous release's store statement, which does not name
them, keeps working while this runs; on PostgreSQL the columns are added without rewriting
the table). Going back drops them: rows still waiting for jobs are then drained as uncounted
ones (counting again is idempotent)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runtime", "0004_events_by_name_only_unregistered"),
    ]

    operations = [
        migrations.AddField(
            model_name="uncountedbatch",
            name="queued_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="uncountedbatch",
            name="jobs",
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="uncountedbatch",
            name="attempt",
            field=models.IntegerField(db_default=0, default=0),
        ),
    ]
