"""registry's migrations 0001 to 0013 in one (squashed when every supported release had applied
them all: an install of the previous release marks it applied without running it; an older one
upgrades through the previous release first). Their data migrations that only filled rows
existing at the time are left out: a new database has none."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


ROLES = ("owner", "approver", "compliance", "admin")


def create_groups(apps, schema_editor):
    """One group per role (0002)."""
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):

    replaces = [
        ('registry', '0001_initial'),
        ('registry', '0002_role_groups'),
        ('registry', '0003_agent_apitoken_agent_desiredstateversion_approval_and_more'),
        ('registry', '0004_waivers'),
        ('registry', '0005_retirement'),
        ('registry', '0004_people_and_approvals'),
        ('registry', '0004_connector_secrets'),
        ('registry', '0005_merge_trust_branches'),
        ('registry', '0006_merge_lifecycle'),
        ('registry', '0007_stepup'),
        ('registry', '0008_review_thread'),
        ('registry', '0009_notifications'),
        ('registry', '0008_toxic_combinations'),
        ('registry', '0008_recertification_and_lifecycle_gaps'),
        ('registry', '0009_merge_20261130_2209'),
        ('registry', '0010_merge_0009_merge_20261130_2209_0009_notifications'),
        ('registry', '0011_single_sign_on_identity'),
        ('registry', '0012_proposal_list_index'),
        ('registry', '0013_meeting_points'),
    ]

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(blank=True, default='', max_length=100)),
                ('key_hash', models.CharField(max_length=64, unique=True)),
                ('key_prefix', models.CharField(max_length=12)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('last_used_at', models.DateTimeField(blank=True, null=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.RunPython(create_groups, migrations.RunPython.noop),
        migrations.CreateModel(
            name='Agent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(max_length=63, unique=True)),
                ('labels', models.JSONField(blank=True, default=dict)),
                ('description', models.TextField(blank=True, default='')),
                ('framework', models.CharField(blank=True, default='', max_length=64)),
                ('connector', models.JSONField(blank=True, default=dict)),
                ('lifecycle', models.CharField(choices=[('active', 'Active'), ('suspended', 'Suspended'), ('retired', 'Retired')], default='active', max_length=16)),
                ('generation', models.PositiveIntegerField(default=0)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='agents', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.AddField(
            model_name='apitoken',
            name='agent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='tokens', to='registry.agent'),
        ),
        migrations.CreateModel(
            name='DesiredStateVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('generation', models.PositiveIntegerField(blank=True, null=True)),
                ('base_generation', models.PositiveIntegerField(default=0)),
                ('spec', models.JSONField()),
                ('spec_sha256', models.CharField(max_length=64)),
                ('metadata', models.JSONField(default=dict)),
                ('state', models.CharField(choices=[('pending', 'Pending'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('superseded', 'Superseded'), ('withdrawn', 'Withdrawn')], default='pending', max_length=16)),
                ('source', models.CharField(choices=[('ui', 'Ui'), ('api', 'Api'), ('yaml', 'Yaml'), ('agent', 'Agent')], max_length=8)),
                ('revision', models.PositiveIntegerField(default=1)),
                ('required_approvals', models.PositiveSmallIntegerField(default=1)),
                ('guardrail_results', models.JSONField(blank=True, default=list)),
                ('permission_changes', models.JSONField(blank=True, default=list)),
                ('risk', models.PositiveIntegerField(default=0)),
                ('held', models.BooleanField(default=False)),
                ('comment', models.TextField(blank=True, default='')),
                ('decision_comment', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('decided_at', models.DateTimeField(blank=True, null=True)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='registry.agent')),
                ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('proposed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='proposals', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='Approval',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('revision', models.PositiveIntegerField()),
                ('comment', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('approver', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='approvals', to=settings.AUTH_USER_MODEL)),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='approvals', to='registry.desiredstateversion')),
            ],
        ),
        migrations.AddField(
            model_name='agent',
            name='active_version',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='registry.desiredstateversion'),
        ),
        migrations.CreateModel(
            name='Guardrail',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(max_length=63, unique=True)),
                ('description', models.TextField(blank=True, default='')),
                ('expression', models.TextField()),
                ('selector', models.JSONField(blank=True, default=dict)),
                ('effect', models.CharField(choices=[('deny', 'Deny'), ('require_approvals', 'Require Approvals'), ('warn', 'Warn')], max_length=20)),
                ('required_approvals', models.PositiveSmallIntegerField(default=2)),
                ('message', models.CharField(max_length=500)),
                ('enabled', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.AddIndex(
            model_name='desiredstateversion',
            index=models.Index(fields=['state', '-risk', '-created_at'], name='version_inbox'),
        ),
        migrations.AddConstraint(
            model_name='desiredstateversion',
            constraint=models.UniqueConstraint(fields=('agent', 'generation'), name='one_version_per_generation'),
        ),
        migrations.AddConstraint(
            model_name='approval',
            constraint=models.UniqueConstraint(fields=('version', 'approver', 'revision'), name='one_approval_per_revision'),
        ),
        migrations.AddIndex(
            model_name='agent',
            index=models.Index(fields=['owner', 'name'], name='agent_owner_name'),
        ),
        migrations.AddIndex(
            model_name='agent',
            index=models.Index(fields=['lifecycle', 'name'], name='agent_lifecycle_name'),
        ),
        migrations.CreateModel(
            name='Waiver',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('pointer', models.CharField(max_length=1000)),
                ('reason', models.TextField()),
                ('ticket', models.CharField(max_length=100)),
                ('expires_at', models.DateTimeField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('lapsed_at', models.DateTimeField(blank=True, null=True)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='waivers', to='registry.agent')),
                ('granted_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['expires_at'],
                'indexes': [models.Index(fields=['agent', 'expires_at'], name='waiver_agent_expiry')],
            },
        ),
        migrations.CreateModel(
            name='Retirement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('reason', models.TextField()),
                ('state', models.CharField(choices=[('pending', 'Pending'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('superseded', 'Superseded'), ('withdrawn', 'Withdrawn')], default='pending', max_length=16)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('decided_at', models.DateTimeField(blank=True, null=True)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='retirements', to='registry.agent')),
                ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('proposed_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.AddField(
            model_name='apitoken',
            name='suspended_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='desiredstateversion',
            name='origin',
            field=models.CharField(blank=True, default='', max_length=200),
        ),
        migrations.AddField(
            model_name='desiredstateversion',
            name='token_holder',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.CreateModel(
            name='ConnectorSecretGrant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('secret', models.CharField(max_length=128)),
                ('granted_by', models.CharField(max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='connector_secret_grants', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('secret', 'user'), name='unique_connector_secret_grant')],
            },
        ),
        migrations.AlterField(
            model_name='guardrail',
            name='effect',
            field=models.CharField(choices=[('deny', 'Deny'), ('require_approvals', 'Require Approvals'), ('warn', 'Warn'), ('step_up', 'Step Up')], max_length=20),
        ),
        migrations.CreateModel(
            name='ReviewComment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('verdict', models.CharField(choices=[('comment', 'Comment'), ('request_changes', 'Request Changes')], default='comment', max_length=16)),
                ('revision', models.PositiveIntegerField()),
                ('body', models.TextField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('author', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='review_comments', to='registry.desiredstateversion')),
            ],
            options={
                'indexes': [models.Index(fields=['version', 'created_at'], name='review_thread')],
            },
        ),
        migrations.CreateModel(
            name='SlaBreach',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('item', models.CharField(max_length=40, unique=True)),
                ('agent', models.CharField(max_length=63)),
                ('deadline', models.DateTimeField()),
                ('noticed_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('notified', models.CharField(blank=True, default='', max_length=150)),
            ],
        ),
        migrations.CreateModel(
            name='NotificationPreference',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('team', models.CharField(blank=True, default='', max_length=63)),
                ('channel', models.CharField(choices=[('email', 'Email'), ('webhook', 'Webhook')], max_length=8)),
                ('target', models.CharField(max_length=500)),
                ('mode', models.CharField(choices=[('immediate', 'Immediate'), ('digest', 'Digest')], default='immediate', max_length=10)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('last_digest_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='notification_preferences', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='Notification',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('item', models.CharField(max_length=40)),
                ('why', models.CharField(max_length=12)),
                ('text', models.TextField()),
                ('link', models.CharField(max_length=500)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True, default='')),
                ('preference', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notifications', to='registry.notificationpreference')),
            ],
        ),
        migrations.AddConstraint(
            model_name='notificationpreference',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('team', ''), ('user__isnull', False)), models.Q(('user__isnull', True), models.Q(('team', ''), _negated=True)), _connector='OR'), name='preference_for_a_person_or_a_team'),
        ),
        migrations.AddConstraint(
            model_name='notification',
            constraint=models.UniqueConstraint(fields=('preference', 'item', 'why'), name='one_notification_per_item'),
        ),
        migrations.CreateModel(
            name='ToxicCombination',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(max_length=63, unique=True)),
                ('description', models.TextField(blank=True, default='')),
                ('left', models.CharField(max_length=300)),
                ('right', models.CharField(max_length=300)),
                ('effect', models.CharField(choices=[('deny', 'Deny'), ('require_approvals', 'Require Approvals')], default='deny', max_length=20)),
                ('required_approvals', models.PositiveSmallIntegerField(default=2)),
                ('enabled', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='ReviewInterval',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('level', models.CharField(choices=[('high', 'High'), ('medium', 'Medium'), ('low', 'Low')], max_length=8, unique=True)),
                ('seconds', models.PositiveIntegerField()),
                ('risk_from', models.PositiveIntegerField(default=0)),
                ('updated_by', models.CharField(max_length=200)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
        migrations.AddField(
            model_name='agent',
            name='overdue_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='agent',
            name='overdue_effect',
            field=models.CharField(blank=True, choices=[('warn', 'Warn'), ('restrict', 'Restrict'), ('suspend', 'Suspend')], default='', max_length=10),
        ),
        migrations.AddField(
            model_name='agent',
            name='reminded_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='agent',
            name='restricted_to',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='agent',
            name='review_due_at',
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name='desiredstateversion',
            name='recertifies',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='desiredstateversion',
            name='review_after_seconds',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='desiredstateversion',
            name='review_by',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='guardrail',
            name='overdue_effect',
            field=models.CharField(blank=True, choices=[('warn', 'Warn'), ('restrict', 'Restrict'), ('suspend', 'Suspend')], default='', max_length=10),
        ),
        migrations.AddField(
            model_name='guardrail',
            name='safe_tools',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='retirement',
            name='decision_comment',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='waiver',
            name='withdrawn_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='waiver',
            name='withdrawn_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        # 0008's give_review_dates gave agents approved before recertification a review
        # date: a backfill, with no rows to fill on a new database.
        migrations.CreateModel(
            name='SingleSignOnIdentity',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('issuer', models.CharField(max_length=500)),
                ('subject', models.CharField(max_length=255)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('last_signed_in_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='sso_identity', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('issuer', 'subject'), name='one_user_per_sso_subject')],
            },
        ),
        migrations.RemoveIndex(
            model_name='desiredstateversion',
            name='version_inbox',
        ),
        migrations.AddIndex(
            model_name='desiredstateversion',
            index=models.Index(fields=['state', '-risk', '-created_at', '-id'], name='version_inbox'),
        ),
        migrations.AddIndex(
            model_name='desiredstateversion',
            index=models.Index(fields=['-risk', '-created_at', '-id'], name='version_list'),
        ),
        migrations.CreateModel(
            name='MeetingPoint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('point', models.CharField(max_length=100)),
                ('agent', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='meeting_points', to='registry.agent')),
            ],
            options={
                'indexes': [models.Index(fields=['point', 'agent'], name='meeting_point_agents')],
                'constraints': [models.UniqueConstraint(fields=('agent', 'point'), name='one_meeting_point_per_agent')],
            },
        ),
        # 0013's record_approved recorded the meeting points of agents approved before
        # they were kept: a backfill, with no rows to fill on a new database.
    ]
