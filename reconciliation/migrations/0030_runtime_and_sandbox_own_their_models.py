"""The runtime's models (events, the outbox of batches, unregistered agents, decisions, group
rules and their breaches) and the sandbox's SandboxAgent belong to those apps now
(runtime 0001, sandbox 0001 took them over). State only: every table keeps its name, so no
row, partition, index or constraint changes; the two foreign keys that point at them from
here now name their new app. Their content types follow them, so anything that refers to
one (the admin's log) still does."""

import django.db.models.deletion
from django.db import migrations, models

MOVED = {"runtime": ["behaviourevent", "uncountedbatch", "unregisteredagent", "decision",
                     "grouprule", "groupbreach"],
         "sandbox": ["sandboxagent"]}


def relabel(apps, names, old, new):
    content_type = apps.get_model("contenttypes", "ContentType")
    for name in names:
        if not content_type.objects.filter(app_label=new, model=name).exists():
            content_type.objects.filter(app_label=old, model=name).update(app_label=new)


def move_content_types(apps, schema_editor):
    for app, names in MOVED.items():
        relabel(apps, names, "reconciliation", app)


def move_content_types_back(apps, schema_editor):
    for app, names in MOVED.items():
        relabel(apps, names, app, "reconciliation")


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('reconciliation', '0029_health_retired'),
        ('runtime', '0001_initial'),
        ('sandbox', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='escalation',
                    name='decision',
                    field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='escalation', to='runtime.decision'),
                ),
                migrations.AlterField(
                    model_name='observedstate',
                    name='unregistered',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='observations', to='runtime.unregisteredagent'),
                ),
                migrations.DeleteModel(name='GroupBreach'),
                migrations.DeleteModel(name='GroupRule'),
                migrations.DeleteModel(name='UncountedBatch'),
                migrations.DeleteModel(name='BehaviourEvent'),
                migrations.DeleteModel(name='Decision'),
                migrations.DeleteModel(name='UnregisteredAgent'),
                migrations.DeleteModel(name='SandboxAgent'),
            ],
            database_operations=[
                migrations.RunPython(move_content_types, move_content_types_back),
            ],
        ),
    ]
