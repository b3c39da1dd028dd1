"""Three indexes fewer on the events table, each a write per stored event: the unique
(agent name, event id, ts) of the agent's own events, which the keys table (0002) replaces,
and the senders' (nothing looks events up by sender but within one agent's). On PostgreSQL
each goes from the partitioned table and every day partition in one statement."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("registry", "0018_waiver_request"),
        ("runtime", "0002_event_keys"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="behaviourevent",
            name="event_id_per_agent_ts",
        ),
        migrations.AlterField(
            model_name="behaviourevent",
            name="sender_token",
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL,
                                    related_name="+", to="registry.apitoken"),
        ),
        migrations.AlterField(
            model_name="behaviourevent",
            name="sender_user",
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL,
                                    related_name="+", to=settings.AUTH_USER_MODEL),
        ),
    ]
