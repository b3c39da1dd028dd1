"""A decision's webhook is tracked until delivered: its status, attempts taken, when the one
waiting is overdue (a sweep sends it again: Redis can lose the job) and the last error.
Columns with constant database defaults (the previous release inserts decisions without
them while this runs; PostgreSQL adds them without rewriting the table). The index holds only
decisions whose webhook is pending, and on PostgreSQL is built CONCURRENTLY, so decisions
keep being asked and answered while it builds. Going back drops them: a webhook not yet
delivered is then not sent again by any sweep (as before this release)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class AddIndexConcurrentlyOnPostgreSQL(AddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on PostgreSQL; Django's AddIndex elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return migrations.AddIndex.database_forwards(self, app_label, schema_editor, from_state,
                                                     to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return migrations.AddIndex.database_backwards(self, app_label, schema_editor,
                                                      from_state, to_state)


class Migration(migrations.Migration):

    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("runtime", "0005_outbox_waits_for_jobs"),
    ]

    operations = [
        migrations.AddField(
            model_name="decision",
            name="webhook_attempts",
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="decision",
            name="webhook_due_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="decision",
            name="webhook_error",
            field=models.CharField(blank=True, db_default="", default="", max_length=300),
        ),
        migrations.AddField(
            model_name="decision",
            name="webhook_status",
            field=models.CharField(blank=True, choices=[
                ("", "no webhook"), ("pending", "Pending"), ("delivered", "Delivered"),
                ("refused", "Refused"), ("not_allowed", "Not Allowed"), ("failed", "Failed")],
                db_default="", default="", max_length=12),
        ),
        AddIndexConcurrentlyOnPostgreSQL(
            model_name="decision",
            index=models.Index(condition=models.Q(("webhook_status", "pending")),
                               fields=["webhook_due_at"], name="decision_webhook_due"),
        ),
    ]
