from django.db import migrations, models


class Migration(migrations.Migration):
    """A block group rule reaches owners who contributed nothing only when compliance says."""

    dependencies = [
        ("reconciliation", "0026_fleet_breaker_resets_escalation_cause"),
    ]

    operations = [
        migrations.AddField(
            model_name="grouprule",
            name="across_owners",
            field=models.BooleanField(default=False),
        ),
    ]
