"""runtime takes its models over from reconciliation (state only): their tables keep their
names, so the events' day partitions, every index, constraint and row stay as they are.
reconciliation 0030 lets go of them on its side."""

import django.db.models.deletion
import django.utils.timezone
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('reconciliation', '0029_health_retired'),
        ('registry', '0018_waiver_request'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='UncountedBatch',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('received_at', models.DateTimeField()),
                    ('events', models.JSONField()),
                    ('first_ts', models.DateTimeField()),
                    ('last_ts', models.DateTimeField()),
                ],
                options={
                    'db_table': 'reconciliation_uncountedbatch',
                },
            ),
            migrations.CreateModel(
                name='GroupRule',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.SlugField(max_length=63, unique=True)),
                    ('description', models.TextField(blank=True, default='')),
                    ('enabled', models.BooleanField(default=True)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('selector', models.JSONField(blank=True, default=dict)),
                    ('match', models.JSONField(blank=True, default=dict)),
                    ('measure', models.CharField(choices=[('events', 'events'), ('amount', 'amount'), ('tokens', 'tokens'), ('cost', 'cost')], max_length=8)),
                    ('limit', models.FloatField()),
                    ('per', models.CharField(max_length=8)),
                    ('per_record', models.BooleanField(default=False)),
                    ('effect', models.CharField(choices=[('escalate', 'escalate'), ('log', 'log'), ('block', 'block')], default='escalate', max_length=8)),
                    ('required_approvals', models.PositiveSmallIntegerField(default=1)),
                    ('across_owners', models.BooleanField(default=False)),
                    ('revision', models.PositiveIntegerField(default=1)),
                    ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'db_table': 'reconciliation_grouprule',
                    'ordering': ['name'],
                    'abstract': False,
                },
            ),
            migrations.CreateModel(
                name='UnregisteredAgent',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=63, unique=True)),
                    ('display_name', models.CharField(blank=True, default='', max_length=256)),
                    ('first_seen', models.DateTimeField(default=django.utils.timezone.now)),
                    ('last_seen', models.DateTimeField(default=django.utils.timezone.now)),
                    ('events', models.PositiveIntegerField(default=0)),
                    ('last_observation', models.JSONField(blank=True, null=True)),
                    ('registered', models.BooleanField(default=False)),
                    ('assigned_owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'db_table': 'reconciliation_unregisteredagent',
                },
            ),
            migrations.CreateModel(
                name='BehaviourEvent',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('event_id', models.CharField(max_length=128)),
                    ('agent_name', models.CharField(max_length=63)),
                    ('ts', models.DateTimeField()),
                    ('kind', models.CharField(max_length=16)),
                    ('tool', models.CharField(blank=True, default='', max_length=128)),
                    ('resource', models.CharField(blank=True, default='', max_length=256)),
                    ('record', models.CharField(blank=True, default='', max_length=256)),
                    ('action', models.CharField(blank=True, default='', max_length=128)),
                    ('amount', models.FloatField(blank=True, null=True)),
                    ('approved_by', models.CharField(blank=True, default='', max_length=150)),
                    ('decision_id', models.CharField(blank=True, default='', max_length=64)),
                    ('trace_id', models.CharField(blank=True, default='', max_length=64)),
                    ('span_id', models.CharField(blank=True, default='', max_length=32)),
                    ('source', models.CharField(default='api', max_length=8)),
                    ('model', models.CharField(blank=True, default='', max_length=128)),
                    ('operation', models.CharField(blank=True, default='', max_length=32)),
                    ('error', models.CharField(blank=True, default='', max_length=128)),
                    ('input_tokens', models.PositiveBigIntegerField(blank=True, null=True)),
                    ('output_tokens', models.PositiveBigIntegerField(blank=True, null=True)),
                    ('cost', models.FloatField(blank=True, null=True)),
                    ('attributes', models.JSONField(blank=True, null=True)),
                    ('received_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('sender', models.CharField(blank=True, default='', max_length=160)),
                    ('foreign', models.BooleanField(default=False)),
                    ('agent', models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='registry.agent')),
                    ('sender_token', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='registry.apitoken')),
                    ('sender_user', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'db_table': 'reconciliation_behaviourevent',
                    'indexes': [models.Index(fields=['agent', 'ts'], name='event_agent_ts'), models.Index(fields=['agent_name', 'ts'], name='event_name_ts')],
                    'constraints': [models.UniqueConstraint(condition=models.Q(('foreign', False)), fields=('agent_name', 'event_id', 'ts'), name='event_id_per_agent_ts')],
                },
            ),
            migrations.CreateModel(
                name='Decision',
                fields=[
                    ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                    ('request', models.JSONField()),
                    ('request_sha256', models.CharField(max_length=64)),
                    ('outcome', models.CharField(choices=[('allow', 'Allow'), ('deny', 'Deny'), ('pending', 'Pending')], max_length=8)),
                    ('status', models.CharField(choices=[('decided', 'Decided'), ('pending', 'Pending'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('expired', 'Expired'), ('used', 'Used')], max_length=10)),
                    ('rule', models.TextField()),
                    ('callback_url', models.URLField(blank=True, default='', max_length=500)),
                    ('generation', models.PositiveIntegerField()),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('expires_at', models.DateTimeField(blank=True, null=True)),
                    ('decided_at', models.DateTimeField(blank=True, null=True)),
                    ('comment', models.TextField(blank=True, default='')),
                    ('used_at', models.DateTimeField(blank=True, null=True)),
                    ('used_by_event', models.CharField(blank=True, default='', max_length=128)),
                    ('required_approvals', models.PositiveSmallIntegerField(default=1)),
                    ('approvals', models.JSONField(blank=True, default=list)),
                    ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='decisions', to='registry.agent')),
                    ('asked_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'db_table': 'reconciliation_decision',
                    'indexes': [models.Index(fields=['status', 'expires_at'], name='decision_pending')],
                },
            ),
            migrations.CreateModel(
                name='GroupBreach',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('group_key', models.CharField(max_length=600)),
                    ('window', models.CharField(max_length=300)),
                    ('opened_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('last_seen', models.DateTimeField(default=django.utils.timezone.now)),
                    ('total', models.FloatField()),
                    ('agents', models.JSONField(default=list)),
                    ('escalation', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='reconciliation.escalation')),
                    ('rule', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='breaches', to='runtime.grouprule')),
                ],
                options={
                    'db_table': 'reconciliation_groupbreach',
                    'indexes': [models.Index(fields=['rule', 'group_key', '-opened_at'], name='breach_rule_group')],
                    'constraints': [models.UniqueConstraint(fields=('rule', 'group_key', 'window'), name='one_breach_per_group_window')],
                },
            ),
        ]),
    ]
