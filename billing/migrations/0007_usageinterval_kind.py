from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_kind(apps, schema_editor):
    """Existing intervals take their workspace's kind (a workspace never changes kind)."""
    UsageInterval = apps.get_model("billing", "UsageInterval")
    Workspace = apps.get_model("workspaces", "Workspace")
    UsageInterval.objects.update(
        kind=Subquery(Workspace.objects.filter(pk=OuterRef("workspace_id")).values("kind")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0006_estimated_costs"),
        ("workspaces", "0008_drop_offering_spot_price"),
    ]

    operations = [
        migrations.AddField(
            model_name="usageinterval",
            name="kind",
            field=models.CharField(
                default="", help_text="Workspace kind: vm, mig or namespace", max_length=16
            ),
            preserve_default=False,
        ),
        migrations.RunPython(copy_kind, migrations.RunPython.noop),
    ]
