"""Each entry keeps the canonical JSON its chain hash covers, so verify reads bytes; rows written
before stay empty and are verified from their columns."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0004_sequencer'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditentry',
            name='canonical',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
    ]
