"""sandbox takes SandboxAgent over from reconciliation (state only): its table keeps its name
and rows. reconciliation 0030 lets go of it on its side."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('reconciliation', '0029_health_retired'),
        ('registry', '0018_waiver_request'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='SandboxAgent',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('state', models.JSONField(default=dict)),
                    ('applied_keys', models.JSONField(default=list)),
                    ('apply_count', models.PositiveIntegerField(default=0)),
                    ('fault', models.CharField(blank=True, default='', max_length=8)),
                    ('changes_until_fault', models.PositiveIntegerField(blank=True, null=True)),
                    ('lag_seconds', models.PositiveIntegerField(default=0)),
                    ('stale_state', models.JSONField(blank=True, null=True)),
                    ('stale_until', models.DateTimeField(blank=True, null=True)),
                    ('last_deployment', models.JSONField(blank=True, null=True)),
                    ('state_sha256', models.CharField(blank=True, default='', max_length=64)),
                    ('agent', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='sandbox', to='registry.agent')),
                ],
                options={
                    'db_table': 'reconciliation_sandboxagent',
                },
            ),
        ]),
    ]
