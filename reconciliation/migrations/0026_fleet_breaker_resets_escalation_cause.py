import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """When each breaker was last reset (it counts only findings detected after that), and
    the person behind what caused an escalation (four eyes keeps them from closing it)."""

    dependencies = [
        ("reconciliation", "0001_squashed_0025_event_outbox_of_batches"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="controlstate",
            name="breaker_resets",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="escalation",
            name="caused_by",
            field=models.ForeignKey(blank=True, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL,
                                    related_name="+", to=settings.AUTH_USER_MODEL),
        ),
    ]
