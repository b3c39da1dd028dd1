"""reconciliation's migrations 0001 to 0025 in one (squashed when every supported release had
applied them all: an install of the previous release marks it applied without running it; an
older one upgrades through the previous release first). Their data migrations that only filled
or moved rows existing at the time are left out: a new database has none. The partitioning of
0021 stays, with the code it ran copied here: on PostgreSQL, events, observations, runs and
alerts are tables partitioned by day (reconciliation/partitions.py keeps them so)."""

import uuid
from datetime import UTC, datetime, time, timedelta

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone


# From 0021 and reconciliation/partitions.py as they were when 0021 was written.
# (model, partition key, days back that get a partition now: events arrive up to 30 days late)
TABLES = (("BehaviourEvent", "ts", 30), ("ObservedState", "observed_at", 1),
          ("ReconcileRun", "started_at", 1), ("AlertEvent", "at", 1))


def _literal(moment):
    return f"'{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}+00'"


def default_name(table):
    return f"{table}_default"


def create_day(cursor, table, key, day):
    """Create the partition of one day unless it exists; rows of that day that had landed in
    the default partition move into it."""
    name = f"{table}_p{day:%Y%m%d}"
    start = datetime.combine(day, time(), tzinfo=UTC)
    end = start + timedelta(days=1)
    cursor.execute("SELECT to_regclass(%s)", [name])
    if cursor.fetchone()[0] is not None:
        return
    bounds = f"FROM ({_literal(start)}) TO ({_literal(end)})"
    default = default_name(table)
    in_range = f'"{key}" >= {_literal(start)} AND "{key}" < {_literal(end)}'
    cursor.execute(f'SELECT 1 FROM "{default}" WHERE {in_range} LIMIT 1')
    if cursor.fetchone() is None:
        cursor.execute(f'CREATE TABLE "{name}" PARTITION OF "{table}" FOR VALUES {bounds}')
        return
    cursor.execute(f'ALTER TABLE "{table}" DETACH PARTITION "{default}"')
    cursor.execute(f'CREATE TABLE "{name}" PARTITION OF "{table}" FOR VALUES {bounds}')
    cursor.execute(f'WITH moved AS (DELETE FROM "{default}" WHERE {in_range} RETURNING *)'
                   f' INSERT INTO "{name}" SELECT * FROM moved')
    cursor.execute(f'ALTER TABLE "{table}" ATTACH PARTITION "{default}" DEFAULT')


def take_deferred(schema_editor, since):
    """The statements the schema editor deferred since `since`, taken out of its list."""
    taken = schema_editor.deferred_sql[since:]
    del schema_editor.deferred_sql[since:]
    return taken


def reset_ids(cursor, table):
    """Point the table's id sequence past its highest id."""
    cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'),"
                   f' COALESCE((SELECT max(id) FROM "{table}"), 1),'
                   f' (SELECT max(id) FROM "{table}") IS NOT NULL)', [table])


def strip(cursor, table):
    """Drop a table's constraints and indexes, so their names are free for the new table."""
    cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass"
                   " AND contype <> 'n'", [table])
    for (name,) in cursor.fetchall():
        cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}" CASCADE')
    cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [table])
    for (name,) in cursor.fetchall():
        cursor.execute(f'DROP INDEX "{name}"')
    cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "id" DROP IDENTITY IF EXISTS')


def partitioned_sql(create, key):
    """Django's CREATE TABLE with the primary key widened to (id, key), partitioned by key."""
    if create.count(" PRIMARY KEY") != 1:
        raise ValueError(f"expected one inline primary key in {create!r}")
    body = create.replace(" PRIMARY KEY", "", 1)
    return f'{body[:body.rindex(")")]}, PRIMARY KEY ("id", "{key}")) PARTITION BY RANGE ("{key}")'


def convert(schema_editor, model, key, days):
    """Turn a model's plain table into one partitioned by day on `key`, keeping its rows, ids
    and id sequence; the primary key becomes (id, key), indexes, keys and unique constraints
    are recreated from the model after the copy."""
    table = model._meta.db_table
    old = f"{table}_unpartitioned"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
        strip(cursor, old)
        made = len(schema_editor.deferred_sql)
        sql, params = schema_editor.table_sql(model)
        schema_editor.execute(partitioned_sql(sql, key), params or None)
        schema_editor.deferred_sql.extend(schema_editor._model_indexes_sql(model))
        later = take_deferred(schema_editor, made)
        schema_editor.execute(f'CREATE TABLE "{default_name(table)}" PARTITION OF "{table}"'
                              " DEFAULT")
        cursor.execute(f'SELECT DISTINCT (date_trunc(\'day\', "{key}" AT TIME ZONE \'UTC\'))::date'
                       f' FROM "{old}"')
        wanted = {day for (day,) in cursor.fetchall()}
        first, last = days
        wanted.update(first + timedelta(days=n) for n in range((last - first).days + 1))
        for day in sorted(wanted):
            create_day(cursor, table, key, day)
        columns = ", ".join(f'"{f.column}"' for f in model._meta.local_concrete_fields)
        cursor.execute(f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM "{old}"')
        cursor.execute(f'DROP TABLE "{old}"')
        reset_ids(cursor, table)
    for statement in later:
        schema_editor.execute(statement)


def run_deferred(schema_editor):
    """Run what the operations before this one deferred (their foreign keys and indexes), as
    the end of their own migration did before the squash: strip() and convert() work on the
    tables as they stand, and must not meet those statements again at the end."""
    for statement in schema_editor.deferred_sql:
        schema_editor.execute(statement)
    schema_editor.deferred_sql.clear()


def partition(apps, schema_editor):
    """PostgreSQL-only DDL: SQLite keeps plain tables."""
    if schema_editor.connection.vendor != "postgresql":
        return
    run_deferred(schema_editor)
    today = timezone.now().date()
    ahead = today + timedelta(days=settings.RETENTION_PARTITIONS_AHEAD_DAYS)
    for name, key, back in TABLES:
        convert(schema_editor, apps.get_model("reconciliation", name), key,
                (today - timedelta(days=back), ahead))


def unpartition(apps, schema_editor):
    """Back to plain tables (every row kept)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    run_deferred(schema_editor)
    for name, _key, _back in TABLES:
        model = apps.get_model("reconciliation", name)
        table = model._meta.db_table
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_partitioned"')
            strip(cursor, f"{table}_partitioned")
            made = len(schema_editor.deferred_sql)
            schema_editor.create_model(model)
            later = take_deferred(schema_editor, made)
            columns = ", ".join(f'"{f.column}"' for f in model._meta.local_concrete_fields)
            cursor.execute(f'INSERT INTO "{table}" ({columns})'
                           f' SELECT {columns} FROM "{table}_partitioned"')
            cursor.execute(f'DROP TABLE "{table}_partitioned"')
            reset_ids(cursor, table)
        for statement in later:
            schema_editor.execute(statement)


class Migration(migrations.Migration):

    replaces = [
        ('reconciliation', '0001_initial'),
        ('reconciliation', '0002_alter_escalation_resolution_decision_and_more'),
        ('reconciliation', '0003_behaviour_findings'),
        ('reconciliation', '0004_alert_events'),
        ('reconciliation', '0005_agent_health'),
        ('reconciliation', '0006_finding_observed_at'),
        ('reconciliation', '0007_escalation_triage'),
        ('reconciliation', '0008_events_counted'),
        ('reconciliation', '0009_finding_accepted'),
        ('reconciliation', '0010_behaviour_resolutions_and_shadow_history'),
        ('reconciliation', '0011_run_error_detail'),
        ('reconciliation', '0011_event_senders'),
        ('reconciliation', '0011_decision_asked_by'),
        ('reconciliation', '0011_breaker_scopes'),
        ('reconciliation', '0012_merge_trust_branches'),
        ('reconciliation', '0011_waiver_lapsed_trigger'),
        ('reconciliation', '0013_merge_lifecycle'),
        ('reconciliation', '0014_group_rules'),
        ('reconciliation', '0015_genai_usage'),
        ('reconciliation', '0016_group_rule_signoffs'),
        ('reconciliation', '0014_agent_silences'),
        ('reconciliation', '0015_drift_attribution'),
        ('reconciliation', '0017_merge_0015_drift_attribution_0016_group_rule_signoffs'),
        ('reconciliation', '0014_recertification_escalation'),
        ('reconciliation', '0018_merge_20261130_2209'),
        ('reconciliation', '0014_resync_in_sync_digests'),
        ('reconciliation', '0019_merge_20261130_2226'),
        ('reconciliation', '0020_group_rule_effect_block'),
        ('reconciliation', '0021_partition_events_observations_runs_alerts_by_day'),
        ('reconciliation', '0021_behaviour_events_reference_without_database_constraints'),
        ('reconciliation', '0022_merge_20261201_0129'),
        ('reconciliation', '0023_fleet_snapshot'),
        ('reconciliation', '0023_finding_recent_index'),
        ('reconciliation', '0024_merge_0023_finding_recent_index_0023_fleet_snapshot'),
        ('reconciliation', '0025_event_outbox_of_batches'),
    ]

    initial = True

    dependencies = [
        ('registry', '0001_squashed_0013_meeting_points'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ControlState',
            fields=[
                ('id', models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                ('shadow', models.BooleanField(default=False)),
                ('breaker_tripped_at', models.DateTimeField(blank=True, null=True)),
                ('breaker_reason', models.TextField(blank=True, default='')),
                ('post_convergence_drift', models.PositiveIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='AgentStatus',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('conditions', models.JSONField(default=list)),
                ('observed_generation', models.PositiveIntegerField(default=0)),
                ('shadow', models.BooleanField(default=False)),
                ('converged', models.BooleanField(default=False)),
                ('converged_generation', models.PositiveIntegerField(blank=True, null=True)),
                ('last_reconciled_at', models.DateTimeField(blank=True, null=True)),
                ('open_findings', models.PositiveIntegerField(default=0)),
                ('agent', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='status', to='registry.agent')),
            ],
        ),
        migrations.CreateModel(
            name='Finding',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('fingerprint', models.CharField(max_length=64)),
                ('kind', models.CharField(max_length=32)),
                ('pointer', models.CharField(max_length=500)),
                ('expected', models.JSONField(null=True)),
                ('actual', models.JSONField(null=True)),
                ('severity', models.CharField(max_length=8)),
                ('area', models.CharField(max_length=16)),
                ('operation', models.JSONField(null=True)),
                ('status', models.CharField(choices=[('open', 'Open'), ('correcting', 'Correcting'), ('corrected', 'Corrected'), ('regressed', 'Regressed'), ('blocked', 'Blocked'), ('escalated', 'Escalated'), ('logged', 'Logged'), ('resolved', 'Resolved')], default='open', max_length=12)),
                ('generation', models.PositiveIntegerField()),
                ('occurrence', models.PositiveIntegerField(default=1)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('reason', models.TextField(blank=True, default='')),
                ('revert_ordered', models.BooleanField(default=False)),
                ('first_seen', models.DateTimeField(default=django.utils.timezone.now)),
                ('detected_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('last_seen', models.DateTimeField(default=django.utils.timezone.now)),
                ('corrected_at', models.DateTimeField(blank=True, null=True)),
                ('hold_until', models.DateTimeField(blank=True, null=True)),
                ('acknowledged_at', models.DateTimeField(blank=True, null=True)),
                ('acknowledged_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='findings', to='registry.agent')),
            ],
        ),
        migrations.CreateModel(
            name='Escalation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('reason', models.TextField()),
                ('status', models.CharField(choices=[('open', 'Open'), ('resolved', 'Resolved')], default='open', max_length=10)),
                ('resolution', models.CharField(blank=True, choices=[('revert', 'Revert'), ('accept', 'Accept'), ('suspend', 'Suspend')], default='', max_length=10)),
                ('comment', models.TextField(blank=True, default='')),
                ('opened_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('resolved_at', models.DateTimeField(blank=True, null=True)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='escalations', to='registry.agent')),
                ('resolved_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('finding', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='escalations', to='reconciliation.finding')),
            ],
        ),
        migrations.CreateModel(
            name='ObservedState',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('state', models.JSONField()),
                ('state_sha256', models.CharField(max_length=64)),
                ('source', models.CharField(max_length=16)),
                ('reported_by', models.CharField(max_length=200)),
                ('observed_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('last_seen_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='observations', to='registry.agent')),
            ],
        ),
        migrations.CreateModel(
            name='ReconcileRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('trigger', models.CharField(choices=[('approved', 'Approved'), ('observation', 'Observation'), ('finding', 'Finding'), ('grant_expired', 'Grant Expired'), ('manual', 'Manual'), ('resync', 'Resync'), ('verify', 'Verify'), ('retry', 'Retry'), ('escalation', 'Escalation')], max_length=16)),
                ('generation', models.PositiveIntegerField()),
                ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('duration_ms', models.PositiveIntegerField(default=0)),
                ('drift_found', models.PositiveIntegerField(default=0)),
                ('changes', models.JSONField(default=list)),
                ('result', models.CharField(choices=[('converged', 'Converged'), ('corrected', 'Corrected'), ('correcting', 'Correcting'), ('drifted', 'Drifted'), ('failed', 'Failed'), ('skipped', 'Skipped')], max_length=16)),
                ('shadow', models.BooleanField(default=False)),
                ('error', models.TextField(blank=True, default='')),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='registry.agent')),
            ],
        ),
        migrations.CreateModel(
            name='Correction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('idempotency_key', models.CharField(max_length=64, unique=True)),
                ('operation', models.JSONField()),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('result', models.CharField(choices=[('pending', 'Pending'), ('applied', 'Applied'), ('verified', 'Verified'), ('failed', 'Failed'), ('shadow', 'Shadow'), ('superseded', 'Superseded')], default='pending', max_length=12)),
                ('error', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('applied_at', models.DateTimeField(blank=True, null=True)),
                ('verified_at', models.DateTimeField(blank=True, null=True)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='corrections', to='registry.agent')),
                ('finding', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='corrections', to='reconciliation.finding')),
                ('run', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='corrections', to='reconciliation.reconcilerun')),
            ],
        ),
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
                ('agent', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='sandbox', to='registry.agent')),
            ],
        ),
        migrations.AddIndex(
            model_name='finding',
            index=models.Index(fields=['status', '-last_seen'], name='finding_status'),
        ),
        migrations.AddIndex(
            model_name='finding',
            index=models.Index(fields=['detected_at'], name='finding_detected'),
        ),
        migrations.AddIndex(
            model_name='finding',
            index=models.Index(fields=['agent', 'status'], name='finding_agent_status'),
        ),
        migrations.AddConstraint(
            model_name='finding',
            constraint=models.UniqueConstraint(fields=('agent', 'fingerprint'), name='one_finding_per_drift'),
        ),
        migrations.AddIndex(
            model_name='escalation',
            index=models.Index(fields=['status', 'opened_at'], name='escalation_open'),
        ),
        migrations.AddIndex(
            model_name='observedstate',
            index=models.Index(fields=['agent', '-observed_at'], name='observed_agent_latest'),
        ),
        migrations.AddIndex(
            model_name='reconcilerun',
            index=models.Index(fields=['agent', '-started_at'], name='run_agent_latest'),
        ),
        migrations.AddIndex(
            model_name='reconcilerun',
            index=models.Index(fields=['started_at'], name='run_started'),
        ),
        migrations.AlterField(
            model_name='escalation',
            name='resolution',
            field=models.CharField(blank=True, default='', max_length=10),
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
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='decisions', to='registry.agent')),
                ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.AddField(
            model_name='escalation',
            name='decision',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='escalation', to='reconciliation.decision'),
        ),
        migrations.CreateModel(
            name='UnregisteredAgent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=63, unique=True)),
                ('first_seen', models.DateTimeField(default=django.utils.timezone.now)),
                ('last_seen', models.DateTimeField(default=django.utils.timezone.now)),
                ('events', models.PositiveIntegerField(default=0)),
                ('last_observation', models.JSONField(blank=True, null=True)),
                ('registered', models.BooleanField(default=False)),
                ('assigned_owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='BehaviourEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event_id', models.CharField(max_length=128, unique=True)),
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
                ('received_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('agent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='registry.agent')),
            ],
            options={
                'indexes': [models.Index(fields=['agent', 'ts'], name='event_agent_ts'), models.Index(fields=['agent_name', 'ts'], name='event_name_ts')],
            },
        ),
        migrations.AddIndex(
            model_name='decision',
            index=models.Index(fields=['status', 'expires_at'], name='decision_pending'),
        ),
        migrations.AddField(
            model_name='finding',
            name='behaviour',
            field=models.BooleanField(default=False),
        ),
        migrations.CreateModel(
            name='AlertEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('event', models.CharField(max_length=32)),
                ('agent_name', models.CharField(blank=True, default='', max_length=63)),
                ('owner_id', models.IntegerField(blank=True, null=True)),
                ('severity', models.CharField(blank=True, default='', max_length=8)),
                ('payload', models.JSONField(default=dict)),
            ],
            options={
                'indexes': [models.Index(fields=['at'], name='alert_at')],
            },
        ),
        migrations.AddField(
            model_name='agentstatus',
            name='health',
            field=models.CharField(choices=[('in_policy', 'In Policy'), ('drifted', 'Drifted'), ('correcting', 'Correcting'), ('escalated', 'Escalated'), ('suspended', 'Suspended'), ('failed', 'Failed'), ('unknown', 'Unknown')], db_index=True, default='unknown', max_length=12),
        ),
        migrations.AddField(
            model_name='finding',
            name='observed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='escalation',
            name='acknowledged_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='escalation',
            name='assignee',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='escalation',
            name='snoozed_until',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='counted',
            field=models.BooleanField(default=True),
        ),
        migrations.AddIndex(
            model_name='behaviourevent',
            index=models.Index(condition=models.Q(('counted', False)), fields=['counted'], name='event_uncounted'),
        ),
        migrations.AddField(
            model_name='finding',
            name='proposal',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='registry.desiredstateversion'),
        ),
        migrations.AddField(
            model_name='observedstate',
            name='unregistered',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='observations', to='reconciliation.unregisteredagent'),
        ),
        migrations.AddField(
            model_name='unregisteredagent',
            name='display_name',
            field=models.CharField(blank=True, default='', max_length=256),
        ),
        migrations.AlterField(
            model_name='behaviourevent',
            name='counted',
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name='escalation',
            name='resolution',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
        migrations.AlterField(
            model_name='finding',
            name='status',
            field=models.CharField(choices=[('open', 'Open'), ('correcting', 'Correcting'), ('corrected', 'Corrected'), ('regressed', 'Regressed'), ('blocked', 'Blocked'), ('escalated', 'Escalated'), ('accepted', 'Accepted'), ('logged', 'Logged'), ('resolved', 'Resolved'), ('acknowledged', 'Acknowledged')], default='open', max_length=12),
        ),
        migrations.AlterField(
            model_name='observedstate',
            name='agent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='observations', to='registry.agent'),
        ),
        migrations.AddIndex(
            model_name='observedstate',
            index=models.Index(fields=['unregistered', '-observed_at'], name='observed_shadow_latest'),
        ),
        migrations.AddField(
            model_name='reconcilerun',
            name='error_detail',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='foreign',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='sender',
            field=models.CharField(blank=True, default='', max_length=160),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='sender_token',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='registry.apitoken'),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='sender_user',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AlterField(
            model_name='behaviourevent',
            name='event_id',
            field=models.CharField(max_length=128),
        ),
        migrations.AddConstraint(
            model_name='behaviourevent',
            constraint=models.UniqueConstraint(condition=models.Q(('foreign', False)), fields=('agent_name', 'event_id'), name='event_id_per_agent'),
        ),
        migrations.AddField(
            model_name='decision',
            name='asked_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.CreateModel(
            name='BreakerTrip',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(max_length=200, unique=True)),
                ('tripped_at', models.DateTimeField()),
                ('reason', models.TextField()),
            ],
        ),
        migrations.AlterField(
            model_name='reconcilerun',
            name='trigger',
            field=models.CharField(choices=[('approved', 'Approved'), ('observation', 'Observation'), ('finding', 'Finding'), ('grant_expired', 'Grant Expired'), ('waiver_lapsed', 'Waiver Lapsed'), ('manual', 'Manual'), ('resync', 'Resync'), ('verify', 'Verify'), ('retry', 'Retry'), ('escalation', 'Escalation')], max_length=16),
        ),
        migrations.CreateModel(
            name='GroupRule',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(max_length=63, unique=True)),
                ('description', models.TextField(blank=True, default='')),
                ('selector', models.JSONField(blank=True, default=dict)),
                ('match', models.JSONField(blank=True, default=dict)),
                ('measure', models.CharField(choices=[('events', 'events'), ('amount', 'amount'), ('tokens', 'tokens'), ('cost', 'cost')], max_length=8)),
                ('limit', models.FloatField()),
                ('per', models.CharField(max_length=8)),
                ('per_record', models.BooleanField(default=False)),
                ('effect', models.CharField(choices=[('escalate', 'escalate'), ('log', 'log')], default='escalate', max_length=8)),
                ('enabled', models.BooleanField(default=True)),
                ('revision', models.PositiveIntegerField(default=1)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('required_approvals', models.PositiveSmallIntegerField(default=1)),
            ],
            options={
                'ordering': ['name'],
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
                ('rule', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='breaches', to='reconciliation.grouprule')),
            ],
            options={
                'indexes': [models.Index(fields=['rule', 'group_key', '-opened_at'], name='breach_rule_group')],
                'constraints': [models.UniqueConstraint(fields=('rule', 'group_key', 'window'), name='one_breach_per_group_window')],
            },
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='attributes',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='cost',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='error',
            field=models.CharField(blank=True, default='', max_length=128),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='input_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='model',
            field=models.CharField(blank=True, default='', max_length=128),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='operation',
            field=models.CharField(blank=True, default='', max_length=32),
        ),
        migrations.AddField(
            model_name='behaviourevent',
            name='output_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='decision',
            name='approvals',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='decision',
            name='required_approvals',
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.CreateModel(
            name='Silence',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('agent_name', models.CharField(max_length=63)),
                ('expected_seconds', models.PositiveIntegerField()),
                ('last_heard_at', models.DateTimeField(blank=True, null=True)),
                ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('agent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='silences', to='registry.agent')),
            ],
            options={
                'indexes': [models.Index(fields=['started_at'], name='silence_started')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('ended_at__isnull', True)), fields=('agent_name',), name='one_open_silence_per_agent')],
            },
        ),
        migrations.AddField(
            model_name='finding',
            name='cause',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='finding',
            name='cause_key',
            field=models.CharField(default='unknown', max_length=200),
        ),
        migrations.AddField(
            model_name='observedstate',
            name='change',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='sandboxagent',
            name='last_deployment',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='finding',
            index=models.Index(fields=['cause_key', '-detected_at'], name='finding_cause'),
        ),
        migrations.AddField(
            model_name='escalation',
            name='subject',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
        migrations.AddField(
            model_name='agentstatus',
            name='in_sync_observed_sha256',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='agentstatus',
            name='in_sync_suspended',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='agentstatus',
            name='in_sync_until',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='agentstatus',
            name='in_sync_version',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='sandboxagent',
            name='state_sha256',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        # 0014's digest_sandbox_states gave existing sandbox agents their state's digest:
        # a backfill, with no rows to fill on a new database.
        migrations.AlterField(
            model_name='grouprule',
            name='effect',
            field=models.CharField(choices=[('escalate', 'escalate'), ('log', 'log'), ('block', 'block')], default='escalate', max_length=8),
        ),
        migrations.AlterField(
            model_name='correction',
            name='run',
            field=models.ForeignKey(db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='corrections', to='reconciliation.reconcilerun'),
        ),
        migrations.RemoveConstraint(
            model_name='behaviourevent',
            name='event_id_per_agent',
        ),
        migrations.AddConstraint(
            model_name='behaviourevent',
            constraint=models.UniqueConstraint(condition=models.Q(('foreign', False)), fields=('agent_name', 'event_id', 'ts'), name='event_id_per_agent_ts'),
        ),
        migrations.RunPython(partition, unpartition),
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
        migrations.CreateModel(
            name='FleetSnapshot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('as_of', models.DateTimeField()),
                ('took_ms', models.PositiveIntegerField(default=0)),
                ('fleet', models.JSONField()),
                ('toxic_paths', models.JSONField()),
            ],
        ),
        migrations.AddIndex(
            model_name='finding',
            index=models.Index(fields=['-last_seen', '-id'], name='finding_recent'),
        ),
        migrations.CreateModel(
            name='UncountedBatch',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('received_at', models.DateTimeField()),
                ('events', models.JSONField()),
                ('first_ts', models.DateTimeField()),
                ('last_ts', models.DateTimeField()),
            ],
        ),
        # 0025's carry_uncounted carried events still flagged uncounted into the outbox:
        # a data move, with no events to move on a new database.
        migrations.RemoveIndex(
            model_name='behaviourevent',
            name='event_uncounted',
        ),
        migrations.RemoveField(
            model_name='behaviourevent',
            name='counted',
        ),
    ]
