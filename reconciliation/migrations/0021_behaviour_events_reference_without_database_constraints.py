"""Behaviour events keep their agent, sender and token ids without database foreign keys: each
was a deferred check per stored event at commit, as costly as the insert itself (1,000 events:
~120 ms of checks against ~110 ms of insert on the bench machine). Django still cascades and
nulls them (on_delete), and nothing deletes those rows outside Django. The agent column's own
index goes too: event_agent_ts (agent, ts) serves every lookup by agent."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('reconciliation', '0020_group_rule_effect_block'),
        ('registry', '0011_single_sign_on_identity'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name='behaviourevent',
            name='agent',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='registry.agent'),
        ),
        migrations.AlterField(
            model_name='behaviourevent',
            name='sender_token',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='registry.apitoken'),
        ),
        migrations.AlterField(
            model_name='behaviourevent',
            name='sender_user',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
    ]
